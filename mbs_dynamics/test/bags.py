"""The recorder's and the player's tests' shared parts: a JointState stream
published at a rate, the recorder started and waited for, a bag read back."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
from ros_processes import executable

RECORD = "mbs_dynamics_record"
PLAY = "mbs_dynamics_play_trajectory"
JOINTS = [f"joint{k}" for k in range(7)]



def stamp_ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def joint_state(i: int):
    """Message i of a test stream: stamped i ms, values that name it."""
    from sensor_msgs.msg import JointState

    message = JointState(name=JOINTS, position=[i + 0.1 * k for k in range(7)], velocity=[float(i)] * 7,
                         effort=[-0.5 * i] * 7)
    message.header.stamp.sec, message.header.stamp.nanosec = divmod(i * 1_000_000, 1_000_000_000)
    return message


def stream(publisher, count: int, first: int = 0, rate: float = 1000.0, stop: threading.Event | None = None) -> int:
    """Publish joint_state(first), ... at `rate` Hz; the number published."""
    start = time.perf_counter()
    for n in range(count):
        if stop is not None and stop.is_set():
            return n
        target = start + n / rate
        while (now := time.perf_counter()) < target:
            time.sleep(min(target - now, 0.0005))
        publisher.publish(joint_state(first + n))
    return count


def recorder(start_process, output: Path, *arguments: str):
    """The recorder started, once it has looked at the graph."""
    process = start_process([executable(RECORD), "--output", str(output), *arguments])
    process.wait_for(r"waiting for publishers|recording /")
    return process


def wait_recorded(process, publisher, topic: str) -> None:
    """The recorder subscribed to `topic` and matched with `publisher` both ways."""
    process.wait_for(f"recording {topic} ")
    deadline = time.monotonic() + 15
    while publisher.get_subscription_count() == 0:
        assert time.monotonic() < deadline, f"the recorder's subscription to {topic} not matched"
        time.sleep(0.05)
    time.sleep(1.0)  # the recorder's reader matches our writer too


def bag_messages(path: Path) -> dict:
    """{topic: [(receive time ns, message)]} of the bag, read with rosbags
    (the message definitions the bag holds)."""
    from rosbags.highlevel import AnyReader

    messages = {}
    with AnyReader([path]) as reader:
        for connection, timestamp, data in reader.messages():
            messages.setdefault(connection.topic, []).append((timestamp, reader.deserialize(data, connection.msgtype)))
    return messages


def bag_metadata(path: Path) -> dict:
    import yaml

    return yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]


def recorded_counts(output: str, topic: str, kind: str = "sensor_msgs/msg/JointState") -> tuple[int, int, int]:
    """(written, lost, missed) of `topic` in the recorder's summary (0 where it names none)."""
    counted = re.search(rf"{re.escape(topic)} \({re.escape(kind)}\): (\d+) messages(?:, (\d+) lost)?"
                        r"(?:, (\d+) missed)?$", output, re.MULTILINE)
    assert counted, output
    return tuple(int(value or 0) for value in counted.groups())


def check_stream(recorded: list, first: int, count: int, missed: int = 0) -> None:
    """The recorded stream is joint_state(first), ..., joint_state(first + count - 1), in order, but for
    `missed` of them."""
    indices = [stamp_ns(message.header.stamp) // 1_000_000 for _, message in recorded]
    if missed == 0:
        assert indices == list(range(first, first + count))
    assert len(indices) == count - missed and all(a < b for a, b in zip(indices, indices[1:]))
    assert first <= indices[0] and indices[-1] < first + count
    for i, (_, message) in zip(indices, recorded, strict=True):
        assert list(message.name) == JOINTS
        assert np.array_equal(message.position, [i + 0.1 * k for k in range(7)])
        assert np.array_equal(message.velocity, [float(i)] * 7)
        assert np.array_equal(message.effort, [-0.5 * i] * 7)
    receive_times = np.array([timestamp for timestamp, _ in recorded])
    assert np.all(np.diff(receive_times) >= 0)
