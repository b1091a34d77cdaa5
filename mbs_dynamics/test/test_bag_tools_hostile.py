"""mbs_dynamics_record against what ends a recording early or makes it wait:
a disk that fills while a fast topic is recorded (a tmpfs of a few MB,
mounted here; MCAP and sqlite3), a disk full before it starts, SIGTERM in
mid-stream and during the close, a topic published with another type than
the one asked; and write_bag, which writes through the same writer
(bags.BagWriter), onto a disk that fills. Each bag is read back with
rosbags' Reader; each refusal is one line, never a traceback."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from ros_processes import executable
from bags import JOINTS, RECORD, bag_metadata, recorded_counts, recorder, stamp_ns, wait_recorded

DISK_BYTES = 8 * 2**20
# A namespace of this test process alone: the machine may run other ROS tests in the same domain.
NAMESPACE = f"/hostile_bags_{os.getpid()}"
STATES = f"{NAMESPACE}/joint_states"
# Positions per message: 5.7 kB of CDR each, so that the disk fills in about a second at 1 kHz.
POSITIONS = 700


@contextmanager
def small_disk(directory: Path, size: int = DISK_BYTES):
    """A tmpfs of `size` bytes mounted at `directory` (the test is skipped
    where mounting is not allowed), unmounted afterwards."""
    directory.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a {size >> 20} MB tmpfs to fill here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def big_joint_state(i: int):
    """Message i of the stream: stamped i ms, POSITIONS values that name it."""
    from sensor_msgs.msg import JointState

    message = JointState(name=JOINTS, position=[float(i)] * POSITIONS)
    message.header.stamp.sec, message.header.stamp.nanosec = divmod(i * 1_000_000, 1_000_000_000)
    return message


def publish_until(publisher, stop: threading.Event, rate: float = 1000.0, limit: int = 60_000) -> int:
    """Publish big_joint_state(0), (1), ... at `rate` Hz until `stop`; the number published."""
    start = time.perf_counter()
    for n in range(limit):
        if stop.is_set():
            return n
        while (now := time.perf_counter()) < start + n / rate:
            time.sleep(min(start + n / rate - now, 0.0005))
        publisher.publish(big_joint_state(n))
    return limit


def assert_the_stream_in_order(recorded: list[tuple[str, int]], output: str) -> None:
    """The bag holds STATES' messages 0, 1, ... in order; where one is
    missing (it never reached the recorder: its queue overflowed on a busy
    machine) the recorder counted it as missed in its summary."""
    _, _, missed = recorded_counts(output, STATES)
    indices = [index for topic, index in recorded]
    assert {topic for topic, _ in recorded} == {STATES} and indices[0] == 0
    assert all(a < b for a, b in zip(indices, indices[1:])), "out of order or twice"
    assert indices[-1] + 1 - len(indices) <= missed, output


def read_bag(path: Path) -> list[tuple[str, int]]:
    """(topic, message index) of each message of the bag, in order, through
    rosbags' Reader and the definitions the bag holds."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    typestore = get_typestore(Stores.ROS2_KILTED)
    with Reader(path) as reader:
        return [(connection.topic, stamp_ns(typestore.deserialize_cdr(data, connection.msgtype).header.stamp)
                 // 1_000_000) for connection, _, data in reader.messages()]


def one_line_errors(process) -> list[str]:
    return [line for line in process.lines if "error" in line.lower() or "Traceback" in line or "FATAL" in line]


@pytest.mark.parametrize("storage, says", [("mcap", "No space left on device"),
                                           ("sqlite3", "database or disk is full")])
def test_a_disk_that_fills_leaves_a_readable_bag_of_what_was_written(start_process, test_node, tmp_path, storage,
                                                                     says):
    """A 1 kHz stream of 5.7 kB messages recorded onto an 8 MB disk: once it
    is full the recorder stops by itself (exit code 1) and says so in one
    line, with the messages written and lost; the bag has its metadata.yaml,
    rosbags' Reader opens it and reads every message it counts, the stream's
    first ones in order without a gap (the issue's bags held 0 rows, or no
    metadata, while the summary said 10,572 messages)."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    with small_disk(tmp_path / "disk") as disk:
        output = disk / "bag"
        process = recorder(start_process, output, "joint_states", "--storage", storage,
                           "--ros-args", "-r", f"__ns:={NAMESPACE}")
        states = test_node.create_publisher(JointState, STATES,
                                            QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
        wait_recorded(process, states, STATES)
        stop = threading.Event()
        publishing = threading.Thread(target=publish_until, args=(states, stop))
        publishing.start()
        try:
            code = process.wait_exit(60)
        finally:
            stop.set()
            publishing.join()
        errors = one_line_errors(process)
        assert code == 1 and len(errors) == 1, process.output
        written = int(process.wait_for(r"the bag holds the (\d+) messages")[0].split("holds the ")[1].split()[0])
        assert errors[0].startswith(f"{RECORD}: error: writing {output} failed: {says}; the bag holds the "
                                    f"{written} messages written before (readable), "), errors[0]
        lost = int(errors[0].split("), ")[1].split()[0])
        assert written > 100 and lost > 0, errors[0]
        assert f"{STATES} (sensor_msgs/msg/JointState): {written} messages, {lost} lost" in process.output

        assert sorted(p.name for p in output.iterdir()) == sorted([f"bag.{'db3' if storage == 'sqlite3' else 'mcap'}",
                                                                   "metadata.yaml"])  # the reserve gone
        metadata = bag_metadata(output)
        assert metadata["message_count"] == written
        recorded = read_bag(output)
        assert len(recorded) == written
        assert_the_stream_in_order(recorded, process.output)


@pytest.mark.parametrize("storage, says", [("mcap", "No space left on device"),
                                           ("sqlite3", "database or disk is full")])
def test_write_bag_onto_a_disk_that_fills_leaves_a_readable_bag_of_what_was_written(tmp_path, storage, says):
    """A recording of 3.5 kB messages far larger than an 8 MB disk: write_bag
    raises FileProblem in one line with the messages written; the bag holds
    the recording's first samples, readable by read_bag and rosbags, its
    reserve gone."""
    import numpy as np
    from mbs_dynamics.files import FileProblem
    from mbs_dynamics.identification.bag_data import read_bag as read_recording
    from mbs_dynamics.identification.bag_data import write_bag
    from mbs_dynamics.identification.recording import Recording

    count, joints = 20_000, 100
    values = np.arange(count * joints, dtype=float).reshape(count, joints)
    recording = Recording(tuple(f"joint{k}" for k in range(joints)), 0.001 * np.arange(count), position=values,
                          velocity=values, effort=values, time_origin_ns=1_000_000_000)
    with small_disk(tmp_path / "disk") as disk:
        output = disk / "bag"
        with pytest.raises(FileProblem) as raised:
            write_bag(output, recording, storage=storage)
        said = str(raised.value)
        assert said.startswith(f"writing {output} failed: {says}; the bag holds the ") and "\n" not in said, said
        written = int(said.split("holds the ")[1].split()[0])
        assert 100 < written < count, said
        assert sorted(p.name for p in output.iterdir()) == sorted([f"bag.{'db3' if storage == 'sqlite3' else 'mcap'}",
                                                                   "metadata.yaml"])
        assert bag_metadata(output)["message_count"] == written
        back = read_recording(output, progress=False)
        assert len(back) == written and np.array_equal(back.position, values[:written])


def test_sigterm_in_mid_stream_and_during_the_close_leaves_a_valid_bag(start_process, test_node, tmp_path):
    """SIGTERM while messages arrive, and again at once (a supervisor that
    insists): the bag closes, readable, every message received in it."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    output = tmp_path / "bag"
    process = recorder(start_process, output, "joint_states", "--storage", "sqlite3",
                       "--ros-args", "-r", f"__ns:={NAMESPACE}")
    states = test_node.create_publisher(JointState, STATES,
                                        QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
    wait_recorded(process, states, STATES)
    stop = threading.Event()
    publishing = threading.Thread(target=publish_until, args=(states, stop), kwargs={"limit": 20_000})
    publishing.start()
    try:
        time.sleep(2.0)
        process.process.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        process.process.send_signal(signal.SIGTERM)
        code = process.wait_exit(60)
    finally:
        stop.set()
        publishing.join()
    assert code == 0 and "Traceback" not in process.output, process.output
    recorded = read_bag(output)
    assert len(recorded) > 100, process.output  # a stream in full flow (1 kHz for 2 s on a quiet machine)
    assert f"{STATES} (sensor_msgs/msg/JointState): {len(recorded)} messages" in process.output
    assert_the_stream_in_order(recorded, process.output)
    assert not (output / ".mbs_dynamics_record.reserve").exists()


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_disk_full_before_the_recording_is_said_in_one_line(start_process, tmp_path, storage):
    """No room for the bag (its file, or the room kept to close it): one line
    naming the bag and why, exit code 1, nothing left on the disk (sqlite3
    showed a traceback and left an empty bag)."""
    with small_disk(tmp_path / "disk", 2 * 2**20) as disk:
        filler = disk / "filler"
        with open(filler, "wb") as stream:
            try:
                while True:
                    stream.write(bytes(2**16))
                    stream.flush()
            except OSError:
                pass
        output = disk / "bag"
        process = start_process([executable(RECORD), "joint_states", "--storage", storage, "--output", str(output)])
        assert process.wait_exit(60) == 1
        lines = [line for line in process.lines if line.strip()]
        assert len(lines) == 1 and f"--output: cannot create the bag {output}: " in lines[0], process.output
        assert "No space left on device" in lines[0] or "disk is full" in lines[0], lines[0]
        assert not output.exists()


def test_a_topic_of_another_type_is_said_naming_both_and_awaited(start_process, test_node, tmp_path):
    """joint_states asked as JointState while a String publisher holds the
    topic: said once, naming both types, and the recorder waits on (it used
    to say only "waiting for publishers"); the String publisher leaves, a
    JointState one comes and is recorded."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    other = test_node.create_publisher(String, STATES, 10)
    output = tmp_path / "bag"
    process = start_process([executable(RECORD), "joint_states:sensor_msgs/msg/JointState", "--output", str(output),
                             "--ros-args", "-r", f"__ns:={NAMESPACE}"])
    said = process.wait_for("is published as", 30)[0]
    assert f"{STATES} is published as std_msgs/msg/String, not sensor_msgs/msg/JointState as asked: waiting " \
           "for a publisher of sensor_msgs/msg/JointState" in said, said
    time.sleep(1.0)
    assert process.process.poll() is None
    assert len([line for line in process.lines if "is published as" in line]) == 1
    test_node.destroy_publisher(other)  # DDS allows one type per topic in a participant
    states = test_node.create_publisher(JointState, STATES,
                                        QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    wait_recorded(process, states, STATES)
    for i in range(50):
        states.publish(big_joint_state(i))
        time.sleep(0.002)
    time.sleep(0.5)
    assert process.interrupt() == 0
    assert read_bag(output) == [(STATES, i) for i in range(50)]
