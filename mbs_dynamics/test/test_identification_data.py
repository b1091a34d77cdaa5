"""Recorded data for identification: ROS 2 bags (MCAP and sqlite3, written by
rosbags) and CSV files read into Recordings, the zero-phase filter, and a
recording laid out in a real robot's coordinates."""
from __future__ import annotations

import numpy as np
import pytest
from mbs_dynamics.identification.data import (
    DataError,
    Recording,
    filtered,
    model_state,
    read_bag,
    read_csv,
    write_bag,
    write_csv,
)
from mbs_dynamics.multibody.model import ROOT_JOINT
from oracles import robot_path

import mbs_dynamics as mbs
from mbs_dynamics.spatial import lie

ORIGIN_NS = 1_700_000_000_123_456_789
JOINTS = ("shoulder", "elbow", "wrist")
BASE_STATE = ("base_position", "base_linear_velocity", "base_angular_velocity")
BASE_ACCELERATIONS = ("base_linear_acceleration", "base_angular_acceleration")


def stamps_ns(count, rng, period_ns=2_000_000):
    """Increasing stamps (ns after ORIGIN_NS) with up to 10 % jitter, first 0."""
    steps = period_ns + rng.integers(-period_ns // 10, period_ns // 10, count - 1)
    return np.concatenate([[0], np.cumsum(steps)])


def random_base(rng, count, fields=BASE_STATE):
    """Random base `fields` (N, 3), the orientation random unit quaternions (N, 4)."""
    base = {field: rng.normal(size=(count, 3)) for field in fields}
    quaternions = rng.normal(size=(count, 4))
    base["base_orientation"] = quaternions / np.linalg.norm(quaternions, axis=1, keepdims=True)
    return base


def random_recording(rng, count=400, base=True):
    """Random joint arrays and a floating base at stamps a bag can hold exactly (whole ns)."""
    time = stamps_ns(count, rng) * 1e-9
    return Recording(JOINTS, time, position=rng.normal(size=(count, 3)), velocity=rng.normal(size=(count, 3)),
                     effort=rng.normal(size=(count, 3)), time_origin_ns=ORIGIN_NS, source="random",
                     **(random_base(rng, count) if base else {}))


def hand_made_bag(path, messages, topic="/joint_states", storage="mcap"):
    """A bag of JointState messages (stamp ns, names, positions, velocities,
    efforts), or raw bytes in their place, written with rosbags one by one,
    the k-th received at ORIGIN_NS + (k + 1) ms."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types = store.types
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        connection = writer.add_connection(topic, "sensor_msgs/msg/JointState", typestore=store)
        for k, entry in enumerate(messages):
            data = entry if isinstance(entry, bytes) else store.serialize_cdr(joint_state(types, *entry),
                                                                                "sensor_msgs/msg/JointState")
            writer.write(connection, ORIGIN_NS + 1_000_000 * (k + 1), data)
    return path


def joint_state(types, stamp, names, position, velocity, effort):
    sec, nanosec = divmod(stamp, 1_000_000_000)
    header = types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                          frame_id="")
    return types["sensor_msgs/msg/JointState"](
        header=header, name=list(names), position=np.array(position, dtype=float),
        velocity=np.array(velocity, dtype=float), effort=np.array(effort, dtype=float))


def assert_same_recording(actual, expected, fields):
    assert actual.joint_names == expected.joint_names
    assert actual.time_origin_ns == expected.time_origin_ns
    assert np.array_equal(actual.time, expected.time)
    for field in fields:
        assert np.array_equal(getattr(actual, field), getattr(expected, field)), field


BAG_FIELDS = ("position", "velocity", "effort", "base_position", "base_orientation", "base_linear_velocity",
              "base_angular_velocity")


# --- bags ---------------------------------------------------------------

@pytest.mark.parametrize("storage, suffix", [("mcap", ".mcap"), ("sqlite3", ".db3")])
def test_a_bag_round_trips_exactly_in_both_storages(tmp_path, storage, suffix):
    recording = random_recording(np.random.default_rng(1))
    bag = write_bag(tmp_path / "bag", recording, storage=storage, odometry_topic="robot/odom")
    files = [path.name for path in bag.iterdir()]
    assert "metadata.yaml" in files and any(name.endswith(suffix) for name in files)
    back = read_bag(bag, odometry_topic="robot/odom", progress=False)
    assert_same_recording(back, recording, BAG_FIELDS)
    assert back.acceleration is None and back.warnings == ()
    assert "/joint_states" in back.source and "/robot/odom" in back.source
    single_file = read_bag(next(bag.glob(f"*{suffix}")), progress=False)  # the storage file alone
    assert_same_recording(single_file, recording, ("position", "velocity", "effort"))
    assert not single_file.has_base


def test_joint_names_are_matched_in_every_message_whatever_their_order(tmp_path):
    rng = np.random.default_rng(2)
    values = rng.normal(size=(6, 3))
    messages = []
    for k, row in enumerate(values):
        order = rng.permutation(3)
        names = [JOINTS[j] for j in order]
        messages.append((ORIGIN_NS + k * 2_000_000, names, row[order], 10 * row[order], 100 * row[order]))
    recording = read_bag(hand_made_bag(tmp_path / "bag", messages), progress=False)
    assert recording.joint_names == tuple(messages[0][1])  # the first message's order
    columns = [JOINTS.index(name) for name in recording.joint_names]
    assert np.array_equal(recording.position, values[:, columns])
    assert np.array_equal(recording.velocity, 10 * values[:, columns])
    assert np.array_equal(recording.effort, 100 * values[:, columns])
    assert np.allclose(recording.time, 0.002 * np.arange(6), rtol=0, atol=1e-15)


def test_unusable_messages_are_dropped_and_counted_and_stamps_sorted(tmp_path):
    ms = 1_000_000
    good = [0.1, 0.2, 0.3]
    messages = [
        (ORIGIN_NS + 0 * ms, JOINTS, good, good, good),
        (ORIGIN_NS + 4 * ms, JOINTS, [1.0, 2.0, 3.0], good, good),
        (ORIGIN_NS + 2 * ms, JOINTS, [4.0, 5.0, 6.0], good, good),  # out of order
        (ORIGIN_NS + 2 * ms, JOINTS, [7.0, 8.0, 9.0], good, good),  # the same stamp again
        (ORIGIN_NS + 6 * ms, JOINTS[:2], good[:2], good[:2], good[:2]),  # lacks a joint
        (ORIGIN_NS + 8 * ms, JOINTS, [np.nan, 0.0, 0.0], good, good),  # not finite
        (ORIGIN_NS + 10 * ms, JOINTS, good[:2], good, good),  # wrong length
        (ORIGIN_NS + 12 * ms, (*JOINTS, "gripper"), [*good, 9.0], [*good, 0], [*good, 0]),  # an extra joint is fine
        b"\x00\x01\x00\x00 not CDR",  # cannot be decoded
    ]
    recording = read_bag(hand_made_bag(tmp_path / "bag", messages), progress=False)
    assert np.allclose(recording.time, [0.0, 0.002, 0.004, 0.012], rtol=0, atol=1e-15)
    assert np.array_equal(recording.position, [good, [4.0, 5.0, 6.0], [1.0, 2.0, 3.0], good])
    notes = "\n".join(recording.warnings)
    for expected in ("1 of 8 messages on /joint_states lacked one of the joints", "non-finite values",
                     "1 messages on /joint_states could not be decoded and were dropped",
                     "position arrays whose length differs", "sorted by stamp", "repeated an earlier stamp",
                     "name 3 different sets of joints"):
        assert expected in notes, notes


def test_a_bag_without_efforts_reads_with_effort_none(tmp_path):
    messages = [(ORIGIN_NS + k * 2_000_000, JOINTS, [k, 0.0, 1.0], [], []) for k in range(5)]
    recording = read_bag(hand_made_bag(tmp_path / "bag", messages, storage="sqlite3"), progress=False)
    assert recording.effort is None and recording.velocity is None
    assert np.array_equal(recording.position[:, 0], np.arange(5.0))


def test_the_progress_bar_goes_to_stderr_unless_disabled(tmp_path, capsys):
    bag = write_bag(tmp_path / "bag", random_recording(np.random.default_rng(13), count=50, base=False))
    read_bag(bag)
    captured = capsys.readouterr()
    assert "50/50" in captured.err and captured.out == ""
    read_bag(bag, progress=False)
    assert capsys.readouterr().err == ""


def test_a_topic_is_found_by_a_unique_suffix_and_a_missing_one_lists_the_topics(tmp_path):
    messages = [(ORIGIN_NS + k * 2_000_000, JOINTS, [0.0] * 3, [], []) for k in range(3)]
    bag = hand_made_bag(tmp_path / "bag", messages, topic="/robot/joint_states")
    recording = read_bag(bag, progress=False)
    assert "topic 'joint_states' taken as '/robot/joint_states'" in recording.warnings
    with pytest.raises(DataError, match=r"'arm/states': no such topic. The bag's topics: "
                                        r"/robot/joint_states \(sensor_msgs/msg/JointState, 3 messages\)"):
        read_bag(bag, topic="arm/states", progress=False)
    with pytest.raises(DataError, match="has messages of type sensor_msgs/msg/JointState, not nav_msgs/msg/Odometry"):
        read_bag(bag, odometry_topic="joint_states", progress=False)
    other = hand_made_bag(tmp_path / "other", messages, topic="/arm/joint_states")
    both = merged_bag(tmp_path / "both", [(bag, "/robot/joint_states"), (other, "/arm/joint_states")])
    with pytest.raises(DataError, match=r"matches several topics \['/arm/joint_states', '/robot/joint_states'\]"):
        read_bag(both, progress=False)
    assert read_bag(both, topic="/arm/joint_states", progress=False).warnings == ()
    with pytest.raises(DataError, match="topic /joint_states has no messages"):
        read_bag(hand_made_bag(tmp_path / "silent", []), progress=False)


def test_zero_header_stamps_fall_back_to_the_receive_times(tmp_path):
    messages = [(0, JOINTS, [k, 0.0, 0.0], [], []) for k in range(4)]
    recording = read_bag(hand_made_bag(tmp_path / "bag", messages), progress=False)
    assert recording.time_origin_ns == ORIGIN_NS + 1_000_000  # hand_made_bag receives at +1 ms each
    assert np.allclose(recording.time, 0.001 * np.arange(4), rtol=0, atol=1e-15)
    assert any("receive times" in note for note in recording.warnings)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_truncated_bag_gives_a_data_error(tmp_path, storage):
    bag = write_bag(tmp_path / "bag", random_recording(np.random.default_rng(3), base=False), storage=storage)
    data_file = next(path for path in bag.iterdir() if path.name != "metadata.yaml")
    data_file.write_bytes(data_file.read_bytes()[: data_file.stat().st_size // 2])
    with pytest.raises(DataError, match="is not a readable ROS 2 bag"):
        read_bag(bag, progress=False)


def test_what_is_not_a_bag_gives_a_data_error(tmp_path):
    with pytest.raises(DataError, match="no such file or directory"):
        read_bag(tmp_path / "missing", progress=False)
    text = tmp_path / "notes.txt"
    text.write_text("not a bag\n")
    with pytest.raises(DataError, match="not a readable ROS 2 bag"):
        read_bag(text, progress=False)
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(DataError, match="not a readable ROS 2 bag"):
        read_bag(tmp_path / "empty_dir", progress=False)


def test_odometry_is_interpolated_to_the_joint_states_along_a_known_motion(tmp_path):
    """The base turns at a constant rate about a fixed axis while its origin
    moves at a constant world velocity: the pose interpolates exactly
    (slerp, linear), the body-frame linear velocity to O((w dt)^2)."""
    axis, rate, world_velocity = np.array([1.0, 2.0, 2.0]) / 3.0, 0.7, np.array([0.3, -0.2, 0.1])

    def pose_and_twist(time):
        rotations = [lie.so3_exp(axis * rate * t) for t in time]
        quaternions = np.array([lie.matrix_to_quaternion(rotation) for rotation in rotations])
        linear = np.array([rotation.T @ world_velocity for rotation in rotations])  # child (base) axes
        return (np.array([1.0, 0.0, 0.5]) + np.outer(time, world_velocity), quaternions, linear,
                np.tile(rate * axis, (len(time), 1)))

    odometry_time = np.arange(0.0, 2.0 + 1e-9, 0.01)  # 100 Hz
    position, orientation, linear, angular = pose_and_twist(odometry_time)
    odometry = Recording(("unused",), odometry_time, base_position=position, base_orientation=orientation,
                         base_linear_velocity=linear, base_angular_velocity=angular, time_origin_ns=ORIGIN_NS)
    joint_stamps = ORIGIN_NS - 10_000_000 + 700_000 + 2_000_000 * np.arange(1011)  # 500 Hz, from before to after
    joint_states = hand_made_bag(tmp_path / "joints", [(int(stamp), ("j",), [0.0], [], []) for stamp in joint_stamps])
    bag = merged_bag(tmp_path / "bag", [(joint_states, "/joint_states"), (write_bag(tmp_path / "odom", odometry), "/odom")])
    recording = read_bag(bag, odometry_topic="odom", progress=False)
    inside = (joint_stamps >= ORIGIN_NS) & (joint_stamps <= ORIGIN_NS + 2_000_000_000)
    assert len(recording) == np.count_nonzero(inside) < joint_stamps.size
    assert f"{joint_stamps.size - len(recording)} of {joint_stamps.size} joint samples outside the odometry's " \
           "time span were dropped" in recording.warnings
    expected = pose_and_twist((joint_stamps[inside] - ORIGIN_NS) * 1e-9)
    same_sign = np.sign(np.sum(recording.base_orientation * expected[1], axis=1))[:, None]
    assert np.max(np.abs(recording.base_position - expected[0])) < 1e-12
    assert np.max(np.abs(recording.base_orientation * same_sign - expected[1])) < 1e-12
    assert np.max(np.abs(recording.base_angular_velocity - expected[3])) < 1e-12
    bound = (rate * 0.01) ** 2 / 8 * np.linalg.norm(world_velocity)  # linear interpolation of a rotating vector
    error = np.max(np.abs(recording.base_linear_velocity - expected[2]))
    assert 0 < error <= bound


def merged_bag(path, sources):
    """A new MCAP bag at `path` with the raw messages of (bag, topic) `sources`, in receive-time order."""
    from contextlib import ExitStack

    from rosbags.highlevel import AnyReader
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    with ExitStack() as stack:
        writer = stack.enter_context(Writer(path, version=9, storage_plugin=StoragePlugin.MCAP))
        records = []
        for source, topic in sources:
            reader = stack.enter_context(AnyReader([source], default_typestore=store))
            wanted = [connection for connection in reader.connections if connection.topic == topic]
            target = writer.add_connection(topic, wanted[0].msgtype, typestore=store)
            records += [(stamp, target, data) for _, stamp, data in reader.messages(wanted)]
        for stamp, target, data in sorted(records, key=lambda record: record[0]):
            writer.write(target, stamp, data)
    return path


def test_write_bag_refuses_an_existing_path_and_stamps_before_the_epoch(tmp_path):
    recording = random_recording(np.random.default_rng(12), count=10, base=False)
    with pytest.raises(DataError, match="exists: write_bag writes a new bag"):
        write_bag(tmp_path, recording)
    with pytest.raises(DataError, match="must lie within 0 and 2\\^31 s"):
        write_bag(tmp_path / "bag", recording.replace(time_origin_ns=-1_000_000_000))
    with pytest.raises(DataError, match="has no floating base to write on odom"):
        write_bag(tmp_path / "bag", recording, odometry_topic="odom")


def test_write_bag_waits_for_its_writer_thread_rather_than_drop(tmp_path, monkeypatch):
    """write_bag hands its messages to bags.BagWriter's thread; where more
    than MAX_QUEUED_BYTES wait (here 2 kB: a few messages), it waits, never
    drops one."""
    from mbs_dynamics import bags

    monkeypatch.setattr(bags, "MAX_QUEUED_BYTES", 2000)
    recording = random_recording(np.random.default_rng(14), count=300)
    back = read_bag(write_bag(tmp_path / "bag", recording, odometry_topic="odom"), odometry_topic="odom",
                    progress=False)
    assert len(back) == 300 and np.array_equal(back.position, recording.position)
    assert np.array_equal(back.base_position, recording.base_position)


# --- the filter ---------------------------------------------------------

def sum_of_sines(time):
    """(positions, velocities, accelerations) of three joints, each a sum of
    sines at 0.3, 0.9 and 1.7 Hz (an identification excitation's band)."""
    frequencies = 2 * np.pi * np.array([0.3, 0.9, 1.7])
    amplitudes = np.array([[0.8, 0.3, 0.15], [0.5, 0.4, 0.1], [1.0, 0.2, 0.05]])
    phases = np.array([[0.1, 1.2, 2.3], [0.7, 2.9, 4.0], [5.1, 0.4, 3.3]])
    angle = frequencies * time[:, None, None] + phases
    return ((amplitudes * np.sin(angle)).sum(-1), (amplitudes * frequencies * np.cos(angle)).sum(-1),
            -(amplitudes * frequencies**2 * np.sin(angle)).sum(-1))


def with_noise(values, rng, fraction=0.01):
    """values with white noise of `fraction` of each column's amplitude (standard deviation)."""
    return values + fraction * np.abs(values).max(axis=0) * rng.normal(size=values.shape)


def test_the_filter_gives_accelerations_within_5_percent_without_lag():
    """500 Hz, 1 % noise on positions, velocities and efforts; the default
    10 Hz cut-off. Stated tolerance, 1 s from each end: accelerations within
    5 % of their peak (1.5 % RMS), positions and efforts within 1.5 %."""
    rng = np.random.default_rng(4)
    time = np.arange(0.0, 10.0, 0.002)
    position, velocity, acceleration = sum_of_sines(time)
    effort = 3.0 * acceleration + 20.0 * np.sin(position)
    recording = Recording(JOINTS, time, position=with_noise(position, rng), velocity=with_noise(velocity, rng),
                          effort=with_noise(effort, rng))
    result = filtered(recording)
    inner = (time > 1.0) & (time < 9.0)

    def relative(actual, expected, norm=np.max):
        return norm(np.abs(actual - expected)[inner]) / np.max(np.abs(expected))

    assert relative(result.acceleration, acceleration) < 0.05
    assert relative(result.acceleration, acceleration, lambda x: np.sqrt(np.mean(x**2))) < 0.015
    assert relative(result.position, position) < 0.015 and relative(result.effort, effort) < 0.015
    assert relative(recording.position, position) > 0.03  # the noise it removed
    shifts = np.arange(-10, 11)  # samples of 2 ms: a causal 10 Hz filter lags by about 15
    misfit = [np.sum((np.roll(result.position, shift, axis=0) - position)[inner] ** 2) for shift in shifts]
    assert shifts[int(np.argmin(misfit))] == 0
    assert any("low-pass filtered at 10 Hz" in note for note in result.warnings)


def test_positions_alone_give_velocities_and_accelerations():
    rng = np.random.default_rng(5)
    time = np.arange(0.0, 10.0, 0.002)
    position, velocity, acceleration = sum_of_sines(time)
    result = filtered(Recording(JOINTS, time, position=with_noise(position, rng, 1e-4)))
    inner = (time > 1.0) & (time < 9.0)
    assert np.max(np.abs(result.velocity - velocity)[inner]) < 0.01 * np.max(np.abs(velocity))
    assert np.max(np.abs(result.acceleration - acceleration)[inner]) < 0.05 * np.max(np.abs(acceleration))


def test_irregular_stamps_are_resampled_onto_a_uniform_grid():
    rng = np.random.default_rng(6)
    time = np.cumsum(rng.uniform(0.0015, 0.0025, 5000))  # 2 ms +- 25 %
    position, velocity, _ = sum_of_sines(time)
    result = filtered(Recording(JOINTS, time, position=position, velocity=velocity))
    steps = np.diff(result.time)
    assert np.ptp(steps) < 1e-12 and abs(steps[0] - np.median(np.diff(time))) < 1e-15
    assert any("resampled onto a uniform" in note for note in result.warnings)
    _, _, expected = sum_of_sines(result.time)
    inner = (result.time > time[0] + 1.0) & (result.time < time[-1] - 1.0)
    assert np.max(np.abs(result.acceleration - expected)[inner]) < 0.01 * np.max(np.abs(expected))


def test_the_filter_refuses_a_recording_too_short_or_a_cutoff_too_high():
    time = np.arange(0.0, 0.09, 0.002)  # 45 samples: one 10 Hz period is 50
    position, _, _ = sum_of_sines(time)
    with pytest.raises(DataError, match="45 samples .* too few to filter at 10 Hz: more than 50"):
        filtered(Recording(JOINTS, time, position=position))
    with pytest.raises(DataError, match="at or above the Nyquist frequency 250 Hz"):
        filtered(Recording(JOINTS, time, position=position), cutoff=300.0)


def test_the_floating_base_is_filtered_and_its_accelerations_derived():
    """A base turning at a constant rate about z and sliding at a constant body
    velocity: filtering keeps the pose and twist, the accelerations are zero."""
    time = np.arange(0.0, 4.0, 0.002)
    angle = 0.5 * time
    orientation = np.column_stack([np.zeros_like(time), np.zeros_like(time), np.sin(angle / 2), np.cos(angle / 2)])
    orientation[::7] *= -1  # the same rotations, some with the other sign
    count = time.size
    recording = Recording(("j",), time, position=np.zeros((count, 1)), velocity=np.zeros((count, 1)),
                          base_position=np.outer(time, [0.1, 0.2, 0.0]), base_orientation=orientation,
                          base_linear_velocity=np.tile([0.3, 0.0, 0.0], (count, 1)),
                          base_angular_velocity=np.tile([0.0, 0.0, 0.5], (count, 1)))
    result = filtered(recording)
    inner = (time > 0.5) & (time < 3.5)
    sign = np.sign(np.sum(result.base_orientation * orientation, axis=1))[:, None]
    assert np.max(np.abs(result.base_orientation * sign - orientation)[inner]) < 1e-6
    assert np.max(np.abs(result.base_linear_acceleration)) < 1e-9
    assert np.max(np.abs(result.base_angular_acceleration)) < 1e-9


# --- CSV ----------------------------------------------------------------

def test_csv_round_trips_exactly(tmp_path):
    recording = filtered(random_recording(np.random.default_rng(7), count=200))  # with accelerations too
    path = write_csv(tmp_path / "recording.csv", recording)
    lines = path.read_text().splitlines()
    assert lines[1] == f"# time_origin_ns: {ORIGIN_NS}"
    assert lines[2].startswith("time,position/shoulder,position/elbow,position/wrist,velocity/shoulder")
    assert lines[2].endswith("base/wz,base/dvx,base/dvy,base/dvz,base/dwx,base/dwy,base/dwz")
    back = read_csv(path)
    assert_same_recording(back, recording, (*BAG_FIELDS, "acceleration", "base_linear_acceleration",
                                            "base_angular_acceleration"))


def test_csv_with_a_subset_of_quantities_comments_and_quoted_names(tmp_path):
    path = tmp_path / "trajectory.csv"
    path.write_text('\ufeff# a trajectory (a byte order mark first)\n\ntime,"effort/a,b","position/a,b",position/c,effort/c\n'
                    "# mid-file comment\n0.0,1,2,3,4\n0.5,5,6,7,8\n")
    recording = read_csv(path)
    assert recording.joint_names == ("a,b", "c") and recording.time_origin_ns == 0
    assert np.array_equal(recording.position, [[2, 3], [6, 7]])
    assert np.array_equal(recording.effort, [[1, 4], [5, 8]])
    assert recording.velocity is None and not recording.has_base


@pytest.mark.parametrize("text, message", [
    ("time,position/a\n0,1\n1,2,3\n", r"line 3: 3 values for the header's 2 columns"),
    ("time,position/a\n0,1\n1,two\n", r"line 3, column 2: 'two' is not a finite number"),
    ("time,position/a\n0,nan\n", r"line 2, column 2: 'nan' is not a finite number"),
    ("time,speed/a\n0,1\n", r"unknown column 'speed/a' \(column 2\)"),
    ("position/a,time\n1,0\n", r"the first column must be 'time', got 'position/a'"),
    ("time,position/a\n0,1\n0,2\n", r"line 3: time 0.0 s does not come after line 2's 0.0 s"),
    ("time,position/a,velocity/b\n0,1,2\n", r"position lacks the joints \['b'\]"),
    ("time,position/a,base/x,base/y\n0,1,2,3\n", r"base columns \['base/z'\] missing"),
    ("time,position/a\n", "a header but no data rows"),
    ("# only a comment\n", "no header row"),
    ("# time_origin_ns: soon\ntime,position/a\n0,1\n", "time_origin_ns must be an integer"),
])
def test_malformed_csv_files_give_data_errors_naming_the_place(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=message):
        read_csv(path)


def test_csv_that_cannot_be_read_gives_a_data_error(tmp_path):
    with pytest.raises(DataError, match="cannot read CSV file"):
        read_csv(tmp_path / "missing.csv")
    (tmp_path / "binary.csv").write_bytes(b"\xff\xfe\x00time")
    with pytest.raises(DataError, match="UTF-8"):
        read_csv(tmp_path / "binary.csv")


# --- Recording ----------------------------------------------------------

def test_recording_windows_and_chunks_cover_its_samples():
    recording = random_recording(np.random.default_rng(8), count=250)
    chunks = list(recording.chunks(100))
    assert [len(chunk) for chunk in chunks] == [100, 100, 50]
    assert np.array_equal(np.concatenate([chunk.position for chunk in chunks]), recording.position)
    assert np.array_equal(np.concatenate([chunk.base_orientation for chunk in chunks]), recording.base_orientation)
    window = recording.window(0.1, 0.2)
    assert window.time[0] >= 0.1 and window.time[-1] < 0.2
    assert len(window) == np.count_nonzero((recording.time >= 0.1) & (recording.time < 0.2))
    with pytest.raises(DataError, match="no sample in the window"):
        recording.window(5.0, 6.0)
    assert not recording.position.flags.writeable


def test_recording_refuses_inconsistent_arrays():
    time = np.array([0.0, 0.1, 0.1])
    with pytest.raises(DataError, match=r"sample 2 \(0.1 s\) does not come after sample 1"):
        Recording(("a",), time, position=np.zeros((3, 1)))
    with pytest.raises(DataError, match=r"position has shape \(3, 2\), expected .* \(3, 1\)"):
        Recording(("a",), [0.0, 1.0, 2.0], position=np.zeros((3, 2)))
    with pytest.raises(DataError, match="a floating base needs all of"):
        Recording(("a",), [0.0], base_position=np.zeros((1, 3)))
    with pytest.raises(DataError, match=r"quaternion \(x, y, z, w\) has norm 2"):
        Recording(("a",), [0.0], base_position=np.zeros((1, 3)), base_orientation=[[0.0, 0.0, 0.0, 2.0]],
                  base_linear_velocity=np.zeros((1, 3)), base_angular_velocity=np.zeros((1, 3)))
    slightly_off = Recording(("a",), [0.0], base_position=np.zeros((1, 3)), base_orientation=[[0, 0, 0, 1.0005]],
                             base_linear_velocity=np.zeros((1, 3)), base_angular_velocity=np.zeros((1, 3)))
    assert np.array_equal(slightly_off.base_orientation, [[0, 0, 0, 1.0]])


# --- a model's coordinates ----------------------------------------------

def ur5_recording(rng, extra=("gripper_joint",), count=20):
    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    names = tuple(rng.permutation([*model.joint_names, *extra]))
    values = {quantity: rng.normal(size=(count, len(names))) for quantity in ("position", "velocity", "effort")}
    return model, Recording(names, 0.01 * np.arange(count), **values, source="ur5 log")


def test_model_state_lays_a_recording_out_by_the_models_indices():
    model, recording = ur5_recording(np.random.default_rng(9))
    q, v, a, effort = state = model_state(model, recording)
    assert q.shape == (20, model.nq) and v.shape == effort.shape == (20, model.nv) and a is None
    for name in model.joint_names:
        column = recording.joint_names.index(name)
        assert np.array_equal(q[:, model.q_index(name)], recording.position[:, column])
        assert np.array_equal(v[:, model.v_index(name)], recording.velocity[:, column])
        assert np.array_equal(effort[:, model.v_index(name)], recording.effort[:, column])
    assert state.warnings == ("joints of ur5 log that model 'ur5' does not have were ignored: ['gripper_joint']",)
    tau = mbs.inverse_dynamics(model, q[0], v[0], np.zeros(model.nv))  # usable by the core as it is
    assert tau.shape == (model.nv,)


def test_model_state_names_the_joints_a_recording_lacks():
    model, recording = ur5_recording(np.random.default_rng(10), extra=())
    lacking = recording.replace(joint_names=tuple(name if name != "elbow_joint" else "elbow"
                                                  for name in recording.joint_names))
    with pytest.raises(DataError, match=r"ur5 log lacks joints \['elbow_joint'\] of model 'ur5'"):
        model_state(model, lacking)
    with pytest.raises(DataError, match="has no joint positions"):
        model_state(model, recording.replace(position=None))


def test_model_state_ignores_mimic_joints_silently():
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    mimics = set(model.body_joint_names) - set(model.joint_names)
    assert mimics  # the second finger follows the first
    names = (*model.joint_names, *sorted(mimics))
    recording = Recording(names, [0.0, 0.1], position=np.arange(2.0 * len(names)).reshape(2, -1))
    q, v, a, effort = state = model_state(model, recording)
    assert state.warnings == () and v is None and a is None and effort is None
    assert np.array_equal(q, recording.position[:, :model.nq])


def test_model_state_puts_the_floating_base_first_angular_before_linear():
    model = mbs.Model.from_urdf_file(robot_path("ur5"), floating_base=True)
    rng = np.random.default_rng(11)
    count = 5
    joints = model.joint_names[1:]
    base = random_base(rng, count, BASE_STATE + BASE_ACCELERATIONS)
    recording = Recording(joints, 0.01 * np.arange(count), position=rng.normal(size=(count, 6)),
                          velocity=rng.normal(size=(count, 6)), acceleration=rng.normal(size=(count, 6)),
                          effort=rng.normal(size=(count, 6)), **base)
    q, v, a, effort = model_state(model, recording)
    qb, vb = model.q_index(ROOT_JOINT), model.v_index(ROOT_JOINT)
    assert np.array_equal(q[:, qb:qb + 3], base["base_position"])
    assert np.allclose(q[:, qb + 3:qb + 7], base["base_orientation"], rtol=0, atol=1e-15)
    assert np.array_equal(v[:, vb:vb + 3], base["base_angular_velocity"])
    assert np.array_equal(v[:, vb + 3:vb + 6], base["base_linear_velocity"])
    assert np.array_equal(a[:, vb:vb + 3], base["base_angular_acceleration"])
    assert np.array_equal(a[:, vb + 3:vb + 6], base["base_linear_acceleration"])
    assert np.array_equal(effort[:, vb:vb + 6], np.zeros((count, 6)))
    assert np.array_equal(q[:, model.q_index("elbow_joint")], recording.position[:, joints.index("elbow_joint")])
    with pytest.raises(DataError, match="has a floating base"):
        model_state(model, Recording(joints, [0.0], position=np.zeros((1, 6))))
