"""mbs_dynamics_record and mbs_dynamics_play_trajectory in their own
processes over real DDS: a 1 kHz best-effort JointState stream recorded
whole to MCAP and sqlite3 bags that rosbags reads back message for message;
Ctrl-C in mid-stream and --duration leave valid bags; the simulator's
joint_states recorded without a gap; a CSV trajectory played sample by
sample (at a rate scale, on a simulated /clock) and as one message; bad
input refused with one line."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from bags import (JOINTS, PLAY, RECORD, bag_messages, bag_metadata, check_stream, recorded_counts, recorder,
                  stamp_ns, stream, wait_recorded)
from ros_processes import executable, wait_for_node

# --- the recorder -------------------------------------------------------------

@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_1_khz_best_effort_stream_is_recorded_whole(start_process, test_node, tmp_path, storage):
    """3000 JointState messages at 1 kHz, best effort, and the project's own
    message type (its definition from its interface file) on a reliable,
    latched topic in a namespace: every message received in the bag, in
    order, equal; on a busy machine best effort may lose some, which the
    recorder counts as missed (gaps in the publisher's sequence numbers), and
    Ctrl-C may come while the last are still queued for it."""
    from mbs_dynamics.identification.data import read_bag
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from mbs_dynamics_interfaces.msg import CentroidalMomentum

    output = tmp_path / "bag"
    process = recorder(start_process, output, "joint_states", "inverse_dynamics/centroidal_momentum",
                       "--storage", storage, "--ros-args", "-r", "__ns:=/robot1")
    states = test_node.create_publisher(JointState, "/robot1/joint_states",
                                        QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT))
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    momentum = test_node.create_publisher(CentroidalMomentum, "/robot1/inverse_dynamics/centroidal_momentum", latched)
    for k in range(3):
        message = CentroidalMomentum(total_mass=10.0 + k)
        message.com_position.x = 0.5 * k
        message.header.stamp.sec = k
        momentum.publish(message)
    wait_recorded(process, states, "/robot1/joint_states")
    process.wait_for("recording /robot1/inverse_dynamics/centroidal_momentum .*reliable, transient local")
    assert stream(states, 3000) == 3000
    time.sleep(0.5)
    assert process.interrupt() == 0
    written, _, missed = recorded_counts(process.output, "/robot1/joint_states")
    # quiet: 3000 written; beside two CPU hogs 2999 + 1 missed, or 2288 + 70 missed and 642 neither received
    # nor known to it (still queued for it when Ctrl-C came: a publisher's numbers tell gaps, not the tail)
    assert written >= 1000 and written + missed <= 3000, process.output
    assert "/robot1/inverse_dynamics/centroidal_momentum (mbs_dynamics_interfaces/msg/CentroidalMomentum): " \
           "3 messages" in process.output

    metadata = bag_metadata(output)
    assert metadata["version"] == 9 and metadata["storage_identifier"] == storage
    assert metadata["message_count"] == written + 3
    topics = {t["topic_metadata"]["name"]: t["topic_metadata"] for t in metadata["topics_with_message_count"]}
    assert topics["/robot1/joint_states"]["offered_qos_profiles"][0]["reliability"] == "best_effort"
    assert topics["/robot1/joint_states"]["type_description_hash"].startswith("RIHS01_")
    messages = bag_messages(output)
    recorded = messages["/robot1/joint_states"]
    first, last = (stamp_ns(recorded[k][1].header.stamp) // 1_000_000 for k in (0, -1))
    check_stream(recorded, first, last + 1 - first, missed)  # every gap between them counted as missed
    latched_messages = [message for _, message in messages["/robot1/inverse_dynamics/centroidal_momentum"]]
    assert [(m.header.stamp.sec, m.total_mass, m.com_position.x) for m in latched_messages] == [
        (k, 10.0 + k, 0.5 * k) for k in range(3)]

    recording = read_bag(output, "joint_states", progress=False)  # the identification's reader takes it too
    assert len(recording) == written and recording.joint_names == tuple(JOINTS)
    indices = [stamp_ns(message.header.stamp) // 1_000_000 for _, message in messages["/robot1/joint_states"]]
    assert np.array_equal(recording.position[:, 0], indices)


def test_ctrl_c_in_mid_stream_leaves_a_valid_bag(start_process, test_node, tmp_path):
    """Ctrl-C while 1 kHz messages arrive: the bag closes, readable, every
    message received in it, in order (a gap only where the recorder counted
    messages as missed), the metadata's counts right."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    output = tmp_path / "bag"
    process = recorder(start_process, output, "joint_states")
    states = test_node.create_publisher(JointState, "/joint_states",
                                        QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    wait_recorded(process, states, "/joint_states")
    stop = threading.Event()
    publishing = threading.Thread(target=stream, args=(states, 10_000), kwargs={"stop": stop})
    publishing.start()
    try:
        time.sleep(2.0)
        assert process.interrupt() == 0
    finally:
        stop.set()
        publishing.join()
    recorded = bag_messages(output)["/joint_states"]
    assert 100 < len(recorded) < 10_000  # a stream in full flow (2 s at 1 kHz on a quiet machine)
    written, _, missed = recorded_counts(process.output, "/joint_states")
    assert written == len(recorded), process.output
    first, last = (stamp_ns(recorded[k][1].header.stamp) // 1_000_000 for k in (0, -1))
    check_stream(recorded, first, last + 1 - first, missed)  # any gap counted as missed
    metadata = bag_metadata(output)
    assert metadata["message_count"] == len(recorded)


def test_the_simulators_joint_states_and_clock_for_a_duration(start_process, test_node, tmp_path):
    """The simulator's joint_states (positions, velocities, efforts) and
    /clock, recorded to sqlite3 for --duration 3 s: the recorder ends by
    itself; the joint_states come every 10 ms of simulated time, none
    missing, and each one's time was on /clock."""
    output = tmp_path / "bag"
    import mbs_dynamics as mbs

    simulator = start_process([executable("simulator_node"), "--ros-args",
                               "-p", f"robot_description_file:={mbs.bundled_robot('arm7')}"])
    simulator.wait_for(r"\[simulator\]: simulating")
    wait_for_node(test_node, "simulator")
    process = start_process([executable(RECORD), "joint_states", "/clock", "--duration", "3", "--storage", "sqlite3",
                             "--output", str(output)])
    process.wait_for("recording /joint_states ")
    process.wait_for("recording /clock ")
    assert process.wait_exit(30) == 0, process.output
    assert "duration over" in process.output
    messages = bag_messages(output)
    states = [message for _, message in messages["/joint_states"]]
    stamps = np.array([stamp_ns(message.header.stamp) for message in states])
    received = [t for t, _ in messages["/joint_states"]]
    assert len(states) > 150, (len(states), (received[-1] - received[0]) / 1e9, stamps[[0, -1]], process.output)
    assert np.all(np.diff(stamps) == 10_000_000), np.unique(np.diff(stamps))
    assert all(len(message.name) == 7 and len(message.position) == len(message.velocity) == len(message.effort) == 7
               for message in states)
    clock = {stamp_ns(message.clock) for _, message in messages["/clock"]}
    both = stamps[(stamps >= min(clock)) & (stamps <= max(clock))]  # while both were recorded
    assert len(both) > 150 and set(both) <= clock


@pytest.mark.parametrize("arguments, says", [
    (["joint_states", "--storage", "zip"], "argument --storage/-s: invalid choice: 'zip'"),
    (["joint states"], "Invalid topic name"),
    (["joint_states:sensor_msgs/msg/NoSuchType"], "no message type sensor_msgs/msg/NoSuchType is installed"),
    (["joint_states", "--duration", "-1"], "--duration must be finite and >= 0"),
    (["joint_states", "--output", "EXISTING"], "exists already"),
])
def test_the_recorder_refuses_bad_input_in_one_line(start_process, tmp_path, arguments, says):
    (tmp_path / "existing").mkdir()
    arguments = [str(tmp_path / "existing") if a == "EXISTING" else a for a in arguments]
    if "--output" not in arguments:
        arguments += ["--output", str(tmp_path / "bag")]
    process = start_process([executable(RECORD), *arguments])
    assert process.wait_exit() != 0
    lines = [line for line in process.lines if line.strip()]
    assert len(lines) == 1 and says in lines[0] and lines[0].startswith(f"{RECORD}: error: "), process.output
    assert not (tmp_path / "bag").exists()


# --- the player ---------------------------------------------------------------

def trajectory_file(path: Path, samples: int = 40, interval: float = 0.01, accelerations: bool = True) -> Path:
    """A CSV trajectory of three joints, written by the identification's writer."""
    from mbs_dynamics.identification.data import Recording, write_csv

    t = np.arange(samples) * interval
    position = np.column_stack([np.sin(2 * t + k) for k in range(3)])
    velocity = np.column_stack([2 * np.cos(2 * t + k) for k in range(3)])
    acceleration = np.column_stack([-4 * np.sin(2 * t + k) for k in range(3)]) if accelerations else None
    return write_csv(path, Recording(("a", "b", "c"), t, position=position, velocity=velocity,
                                     acceleration=acceleration))


class Received:
    """JointTrajectory messages on a topic, collected by the test node."""

    def __init__(self, test_node, topic: str, on_message=None):
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from trajectory_msgs.msg import JointTrajectory

        self.node, self.messages, self.arrivals = test_node, [], []

        def take(message):
            self.messages.append(message)
            self.arrivals.append(time.time_ns())  # wall clock
            if on_message is not None:
                on_message(message)

        test_node.create_subscription(JointTrajectory, topic, take,
                                      QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))

    def until_exit(self, process, timeout: float = 30.0) -> int:
        """Spin until `process` exits (and a little after); its exit code."""
        import rclpy

        deadline = time.monotonic() + timeout
        while process.process.poll() is None:
            assert time.monotonic() < deadline, f"the player did not end:\n{process.output}"
            rclpy.spin_once(self.node, timeout_sec=0.01)
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.01)
        return process.wait_exit()


def check_played(messages: list, recording, rate_scale: float = 1.0) -> None:
    """One single-point message per sample, in order, the values the file's
    at the rate scale, stamped at the samples' times; then the held position."""
    from mbs_dynamics.ros.trajectory_player import HOLD_COUNT

    samples = len(recording)
    assert len(messages) == samples + HOLD_COUNT
    stamps = np.array([stamp_ns(message.header.stamp) for message in messages])
    expected = np.round((recording.time - recording.time[0]) / rate_scale * 1e9).astype(np.int64)
    assert np.array_equal(stamps[:samples] - stamps[0], expected)
    assert np.all(np.diff(stamps) > 0)
    for k, message in enumerate(messages[:samples]):
        assert list(message.joint_names) == list(recording.joint_names) and len(message.points) == 1
        point = message.points[0]
        assert point.time_from_start.sec == point.time_from_start.nanosec == 0
        assert np.array_equal(point.positions, recording.position[k])
        assert np.allclose(point.velocities, recording.velocity[k] * rate_scale, rtol=1e-15, atol=0)
        assert np.allclose(point.accelerations, recording.acceleration[k] * rate_scale ** 2, rtol=1e-15, atol=0)
    for message in messages[samples:]:
        point = message.points[0]
        assert np.array_equal(point.positions, recording.position[-1])
        assert not any(point.velocities) and not any(point.accelerations)


@pytest.mark.parametrize("rate_scale", [1.0, 2.5])
def test_the_player_publishes_every_sample_in_order(start_process, test_node, tmp_path, rate_scale):
    """Remapped onto an inverse dynamics node's ~/reference in a namespace,
    as a user feeds it; samples on time (the wall clock)."""
    from mbs_dynamics.identification.data import read_csv

    path = trajectory_file(tmp_path / "trajectory.csv")
    received = Received(test_node, "/robot1/inverse_dynamics/reference")
    process = start_process([executable(PLAY), str(path), "--rate-scale", str(rate_scale), "--ros-args",
                             "-r", "__ns:=/robot1", "-r", "reference:=inverse_dynamics/reference"])
    assert received.until_exit(process) == 0, process.output
    assert "on /robot1/inverse_dynamics/reference" in process.output
    recording = read_csv(path)
    check_played(received.messages, recording, rate_scale)
    # published when they were meant for: never before their stamp, and not held back (arrival minus stamp,
    # as this process sees it: a few ms on a quiet machine, more when its spinning waits for a busy core)
    stamps = np.array([stamp_ns(message.header.stamp) for message in received.messages])
    lateness = (np.array(received.arrivals) - stamps) * 1e-9
    assert np.all(lateness > -0.001) and np.median(lateness) < 0.1, lateness


def test_the_player_follows_a_simulated_clock(start_process, test_node, tmp_path):
    """--use-sim-time: the samples are stamped and released on /clock, which
    here runs five times faster than the wall clock from t = 1000 s."""
    from mbs_dynamics.identification.data import read_csv
    from rosgraph_msgs.msg import Clock

    path = trajectory_file(tmp_path / "trajectory.csv", samples=30)
    clock = test_node.create_publisher(Clock, "/clock", 10)
    now = {"ns": 1000 * 1_000_000_000}
    early = []

    def check_released(message):  # never before its time on the simulated clock
        if stamp_ns(message.header.stamp) > now["ns"]:
            early.append(message)

    received = Received(test_node, "/reference", check_released)
    ticking = threading.Event()

    def tick():
        while not ticking.is_set():
            message = Clock()
            message.clock.sec, message.clock.nanosec = divmod(now["ns"], 1_000_000_000)
            clock.publish(message)
            time.sleep(0.001)
            now["ns"] += 5_000_000

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        process = start_process([executable(PLAY), str(path), "--use-sim-time", "--start-delay", "0.5"])
        assert received.until_exit(process) == 0, process.output
    finally:
        ticking.set()
        ticker.join()
    check_played(received.messages, read_csv(path))
    first = stamp_ns(received.messages[0].header.stamp)
    assert 1000e9 < first < now["ns"]  # simulated time, not the wall clock's
    assert not early


def test_the_whole_trajectory_as_one_message(start_process, test_node, tmp_path):
    """--whole: one message, a point per sample, time_from_start from the first."""
    from mbs_dynamics.identification.data import read_csv

    path = trajectory_file(tmp_path / "trajectory.csv", accelerations=False)
    received = Received(test_node, "/arm/joint_trajectory")
    before = time.time_ns()
    process = start_process([executable(PLAY), str(path), "--whole", "--topic", "/arm/joint_trajectory",
                             "--start-delay", "0.25", "--rate-scale", "0.5"])
    assert received.until_exit(process) == 0, process.output
    recording = read_csv(path)
    [message] = received.messages
    assert stamp_ns(message.header.stamp) > before + 0.25e9
    assert len(message.points) == len(recording)
    offsets = [stamp_ns(point.time_from_start) for point in message.points]
    assert offsets == list(np.round(recording.time / 0.5 * 1e9).astype(np.int64))
    for k, point in enumerate(message.points):
        assert np.array_equal(point.positions, recording.position[k])
        assert np.allclose(point.velocities, recording.velocity[k] * 0.5, rtol=1e-15, atol=0)
        assert not point.accelerations


@pytest.mark.parametrize("content, arguments, says", [
    (None, [], "cannot read CSV file"),
    ("time,position/a\n0.0,1.0\n0.1,x\n", [], "line 3"),
    ("t,position/a\n0.0,1.0\n", [], "the first column must be 'time'"),
    ("time,velocity/a\n0.0,1.0\n0.1,1.0\n", [], "a trajectory needs positions"),
    ("time,position/a\n0.0,1.0\n", ["--rate-scale", "0"], "argument --rate-scale: '0' is not a finite number >= 0.001"),
    ("time,position/a\n0.0,1.0\n", ["--loop", "--whole"], "not with --whole"),
])
def test_the_player_refuses_bad_input_in_one_line(start_process, tmp_path, content, arguments, says):
    path = tmp_path / "trajectory.csv"
    if content is not None:
        path.write_text(content)
    process = start_process([executable(PLAY), str(path), *arguments])
    assert process.wait_exit() != 0
    lines = [line for line in process.lines if line.strip()]
    assert len(lines) == 1 and says in lines[0] and lines[0].startswith(f"{PLAY}: error: "), process.output
