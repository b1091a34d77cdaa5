"""Recordings to and from ROS 2 bags (bags.py: MCAP or sqlite3, rosbags, no
ROS): read_bag takes a bag's sensor_msgs/JointState topic, and optionally its
nav_msgs/Odometry as the floating base, into a Recording (recording.py);
write_bag writes a Recording as such a bag. Reading is bounded as bags.py
says; what cannot be read raises DataError.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import NamedTuple

import numpy as np
from rosbags.rosbag2 import WriterError

from mbs_dynamics import bags
from mbs_dynamics.files import FileProblem
from mbs_dynamics.identification.filtering import slerp
from mbs_dynamics.identification.recording import BASE_STATE_COLUMNS, DataError, Recording
from mbs_dynamics.inputs import QUATERNION_TOLERANCE

JOINT_STATE = "sensor_msgs/msg/JointState"
ODOMETRY = "nav_msgs/msg/Odometry"


def read_bag(path, topic: str = "joint_states", odometry_topic: str | None = None,
             progress: bool = True) -> Recording:
    """The sensor_msgs/JointState messages on `topic` of a ROS 2 bag (a bag
    directory, or its .mcap or .db3 file; MCAP or sqlite3 storage), and with
    `odometry_topic` the nav_msgs/Odometry there as the floating base,
    interpolated to the joint states' times (linear; the quaternion by slerp):
    joint samples outside the odometry's time span are dropped.

    A topic is found by its exact name (with or without the leading '/'),
    else by a unique suffix (`joint_states` finds `/robot/joint_states`; said
    in the warnings). Joints are matched by name in every message; the
    joints are the set of names most messages carry, in the order of the
    first such message, and messages without one of them are dropped.
    Positions, velocities or efforts are recorded when most messages carry
    them (effort None when they do not, e.g. for a caller to refuse
    identification clearly). Stamps are the header's, or the bag's receive
    times when every header stamp is zero. Messages with non-finite values
    or that cannot be decoded are dropped; out-of-order stamps are sorted
    and repeated ones dropped. All of this is counted in `warnings`.
    `progress` shows a progress bar over the messages on stderr."""
    path = Path(path)
    notes: list[str] = []
    try:
        with bags.opened(path) as reader:
            topics = [bags.find_topic(path, reader.topics, topic, JOINT_STATE, notes)]
            if odometry_topic is not None:
                topics.append(bags.find_topic(path, reader.topics, odometry_topic, ODOMETRY, notes))
            messages = _decoded_messages(reader, path, topics, progress, notes)
    except bags.BagError as error:
        raise DataError(str(error)) from None
    stamps, names, arrays = _joint_samples(messages[topics[0]], topics[0], notes)
    base = {}
    if odometry_topic is not None:
        stamps, arrays, base = _with_odometry(stamps, arrays, messages[topics[1]], topics[1], notes)
    origin = int(stamps[0])
    return Recording(names, (stamps - origin) * 1e-9, **arrays, **base, time_origin_ns=origin,
                     source=f"{path} ({', '.join(topics)})", warnings=tuple(notes))


class JointFields(NamedTuple):
    """What read_bag keeps of one sensor_msgs/JointState."""

    names: tuple
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


def _decoded_messages(reader, path: Path, topics: list, progress: bool, notes: list) -> dict:
    """{topic: [(header stamp ns, receive time ns, fields)]} of the bag's
    messages on `topics`, fields the JointFields of a JointState or the
    _odometry_values of an Odometry; messages that cannot be decoded are
    dropped and counted."""
    from tqdm import tqdm

    names = {}  # one tuple per distinct list of names: a long bag repeats a few

    def joint_fields(message):
        order = tuple(message.name)
        return JointFields(names.setdefault(order, order), message.position, message.velocity, message.effort)

    extract = {JOINT_STATE: joint_fields, ODOMETRY: _odometry_values}
    decoded = {topic: [] for topic in topics}
    failures = Counter()
    bar = tqdm(total=bags.message_count(reader, path, topics), unit="msg", disable=not progress, desc=path.name)
    with bar:
        for connection, receive_time, data in bags.messages(reader, path, topics):
            bar.update()
            try:
                message = reader.deserialize(data, connection.msgtype)
            except Exception:  # noqa: BLE001  one damaged message, whatever rosbags raises for it
                failures[connection.topic] += 1
                continue
            stamp = message.header.stamp
            decoded[connection.topic].append((stamp.sec * 1_000_000_000 + stamp.nanosec, receive_time,
                                              extract[connection.msgtype](message)))
    notes.extend(f"{count} messages on {topic} could not be decoded and were dropped"
                 for topic, count in failures.items())
    return decoded


def _stamps(messages: list, topic: str, notes: list) -> np.ndarray:
    """Header stamps (ns) of decoded messages, or their receive times when
    every header stamp is zero."""
    stamps = np.array([stamp for stamp, _, _ in messages], dtype=np.int64)
    if np.any(stamps):
        return stamps
    notes.append(f"every header stamp on {topic} is zero: the bag's receive times are used instead")
    return np.array([received for _, received, _ in messages], dtype=np.int64)


def _joint_samples(messages: list, topic: str, notes: list) -> tuple[np.ndarray, tuple, dict]:
    """(stamps ns (N,), joint names, {quantity: (N, J)}) of decoded JointState
    messages, sorted by stamp, what cannot be used dropped and counted."""
    stamps = _stamps(messages, topic, notes)
    message_names = [fields.names for _, _, fields in messages]
    names = _common_joints(message_names, topic, notes)
    usable_order = {order: set(names) <= set(order) and len(set(order)) == len(order) for order in set(message_names)}
    keep = np.array([usable_order[order] for order in message_names])
    _count(notes, ~keep, topic, f"lacked one of the joints {list(names)} (or repeated a name)")
    quantities, keep = _recorded_quantities(messages, message_names, keep, topic, notes)
    arrays = {quantity: _named_columns(messages, message_names, names, keep, quantity) for quantity in quantities}
    usable = keep.copy()
    for values in arrays.values():
        usable &= np.all(np.isfinite(values), axis=1)
    _count(notes, keep & ~usable, topic, "had non-finite values")
    rows = np.flatnonzero(usable)
    if rows.size == 0:
        raise DataError(f"{topic}: no message is usable ({'; '.join(notes)})")
    rows = rows[_increasing(stamps[rows], topic, notes)]
    return stamps[rows], names, {quantity: values[rows] for quantity, values in arrays.items()}


def _recorded_quantities(messages: list, message_names: list, keep: np.ndarray, topic: str,
                         notes: list) -> tuple[list, np.ndarray]:
    """(the quantities most kept messages carry, `keep` without the messages
    that lack one of them or carry an array of the wrong length)."""
    quantities, sizes = [], np.array([len(order) for order in message_names])
    for quantity in ("position", "velocity", "effort"):
        lengths = np.array([len(getattr(fields, quantity)) for _, _, fields in messages])
        malformed = keep & (lengths > 0) & (lengths != sizes)
        _count(notes, malformed, topic, f"had {quantity} arrays whose length differs from their names'")
        keep = keep & ~malformed
        given = keep & (lengths == sizes)
        if 2 * np.count_nonzero(given) > np.count_nonzero(keep):
            _count(notes, keep & ~given, topic, f"had no {quantity}")
            keep = given
            quantities.append(quantity)
        elif given.any():
            notes.append(f"only {np.count_nonzero(given)} of {keep.size} messages on {topic} had {quantity}: "
                         f"{quantity} not read")
    return quantities, keep


def _common_joints(message_names: list, topic: str, notes: list) -> tuple:
    """The set of joint names most messages carry, in the order of the first message with that set."""
    orders = Counter(message_names)  # in the order first seen
    sets = Counter()
    for order, count in orders.items():
        sets[frozenset(order)] += count
    common, count = max(sets.items(), key=lambda item: item[1])  # ties: the first seen
    if len(sets) > 1:
        notes.append(f"the messages on {topic} name {len(sets)} different sets of joints; the joints are the "
                     f"{len(common)} that {count} of {len(message_names)} messages name")
    return next(order for order in orders if frozenset(order) == common)


def _named_columns(messages: list, message_names: list, names: tuple, keep: np.ndarray,
                   quantity: str) -> np.ndarray:
    """(messages, J) values of `quantity` in the order of `names`, NaN in rows not kept."""
    values = np.full((len(messages), len(names)), np.nan)
    columns_of = {}
    for k in np.flatnonzero(keep):
        order = message_names[k]
        columns = columns_of.get(order)
        if columns is None:
            index = {name: i for i, name in enumerate(order)}
            columns = columns_of[order] = np.array([index[name] for name in names], dtype=np.int64)
        values[k] = np.asarray(getattr(messages[k][2], quantity), dtype=float)[columns]
    return values


def _count(notes: list, dropped: np.ndarray, topic: str, why: str) -> None:
    count = int(np.count_nonzero(dropped))
    if count:
        notes.append(f"{count} of {dropped.size} messages on {topic} {why} and were dropped")


def _increasing(stamps: np.ndarray, topic: str, notes: list) -> np.ndarray:
    """Indices that sort `stamps` and drop repeats (the first kept), counted."""
    order = np.argsort(stamps, kind="stable")
    out_of_order = int(np.count_nonzero(np.diff(stamps) < 0))
    if out_of_order:
        notes.append(f"{out_of_order} messages on {topic} came before an earlier stamp: sorted by stamp")
    repeated = np.concatenate([[False], np.diff(stamps[order]) == 0])
    _count(notes, repeated, topic, "repeated an earlier stamp")
    return order[~repeated]


def _with_odometry(stamps: np.ndarray, arrays: dict, messages: list, topic: str,
                   notes: list) -> tuple[np.ndarray, dict, dict]:
    """The joint samples within the odometry's time span and the base fields
    interpolated to their stamps."""
    odometry_stamps = _stamps(messages, topic, notes)
    values = np.array([fields for _, _, fields in messages])
    norm = np.linalg.norm(values[:, 3:7], axis=1)
    usable = np.all(np.isfinite(values), axis=1) & (np.abs(norm - 1.0) <= QUATERNION_TOLERANCE)
    _count(notes, ~usable, topic, "had non-finite values or a quaternion not of unit length")
    rows = np.flatnonzero(usable)
    rows = rows[_increasing(odometry_stamps[rows], topic, notes)]
    if rows.size < 2:
        raise DataError(f"{topic}: {rows.size} usable odometry messages; interpolating needs at least 2")
    odometry_stamps, values = odometry_stamps[rows], values[rows]
    inside = (stamps >= odometry_stamps[0]) & (stamps <= odometry_stamps[-1])
    if not inside.any():
        raise DataError(f"{topic}: the odometry ({odometry_stamps[0] * 1e-9:.3f} to {odometry_stamps[-1] * 1e-9:.3f}"
                        f" s) does not overlap the joint states ({stamps[0] * 1e-9:.3f} to {stamps[-1] * 1e-9:.3f} s)")
    if not inside.all():
        notes.append(f"{np.count_nonzero(~inside)} of {inside.size} joint samples outside the odometry's time span "
                     "were dropped")
    stamps = stamps[inside]
    # relative seconds: float64 keeps ns over hours
    time, new_time = (odometry_stamps - odometry_stamps[0]) * 1e-9, (stamps - odometry_stamps[0]) * 1e-9
    base = _interpolated(time, values, new_time)
    fields = dict(zip(BASE_STATE_COLUMNS, np.split(base, [3, 7, 10], axis=1)))
    return stamps, {quantity: array[inside] for quantity, array in arrays.items()}, fields


def _odometry_values(message) -> tuple:
    """x y z, qx qy qz qw, vx vy vz, wx wy wz of a nav_msgs/Odometry (the twist in its child frame)."""
    p, o = message.pose.pose.position, message.pose.pose.orientation
    linear, angular = message.twist.twist.linear, message.twist.twist.angular
    return (p.x, p.y, p.z, o.x, o.y, o.z, o.w, linear.x, linear.y, linear.z, angular.x, angular.y, angular.z)


def _interpolated(time: np.ndarray, values: np.ndarray, new_time: np.ndarray) -> np.ndarray:
    """Rows of [position (3), quaternion (4), ...] at `new_time` (within
    `time`'s span): linear, the quaternion columns 3:7 by slerp."""
    result = np.column_stack([np.interp(new_time, time, column) for column in values.T])
    result[:, 3:7] = slerp(time, values[:, 3:7], new_time)
    return result


def write_bag(path, recording: Recording, storage: str = "mcap", topic: str = "joint_states",
              odometry_topic: str | None = None) -> Path:
    """A ROS 2 bag (directory `path`, which must not exist) of the recording:
    sensor_msgs/JointState on `topic` (positions, velocities, efforts as
    recorded, empty when not; no accelerations: JointState has none) and,
    with a floating base, nav_msgs/Odometry on `odometry_topic` (default
    'odom'; frame_id 'world', child_frame_id 'base', twist in the child
    frame, zero covariances). Stamped time_origin_ns + time, header and
    receive time alike. Storage 'mcap' or 'sqlite3'. Written through
    bags.BagWriter: FileProblem (a ValueError) when the bag cannot be made,
    or when a write fails (a full disk), the bag then readable with what was
    written up to its last checkpoint."""
    if storage not in bags.STORAGES:
        raise ValueError(f"storage must be one of {tuple(bags.STORAGES)}, got {storage!r}")
    if odometry_topic and not recording.has_base:
        raise DataError(f"{recording._what()} has no floating base to write on {odometry_topic}")
    stamps = recording.time_origin_ns + np.round(recording.time * 1e9).astype(np.int64)
    if stamps[0] < 0 or stamps[-1] >= 2**31 * 1_000_000_000:
        raise DataError(f"{recording._what()}: stamps time_origin_ns + time must lie within 0 and 2^31 s, got "
                        f"{stamps[0] * 1e-9:.9g} to {stamps[-1] * 1e-9:.9g} s")
    path = Path(path)
    if path.exists():
        raise DataError(f"{path} exists: write_bag writes a new bag")
    typestore = bags.typestore()
    bag = bags.BagWriter(path, storage, typestore)
    connections = []
    try:
        joints = bag.add_topic("/" + topic.strip("/"), JOINT_STATE)
        connections.append(joints)
        odometry = None
        if recording.has_base:
            odometry = bag.add_topic("/" + (odometry_topic or "odom").strip("/"), ODOMETRY)
            connections.append(odometry)
        for k, stamp in enumerate(stamps.tolist()):
            if not bag.put(joints, stamp, typestore.serialize_cdr(_joint_state(recording, k, stamp), JOINT_STATE),
                           wait=True):
                break
            if odometry is not None and not bag.put(
                    odometry, stamp, typestore.serialize_cdr(_odometry(recording, k, stamp), ODOMETRY), wait=True):
                break
    except WriterError:
        pass  # writing failed: bag.error says why
    finally:
        bag.close()
    if bag.error is not None:
        written = sum(bag.count(connection) for connection in connections)
        raise FileProblem(f"{bag.error}; the bag holds the {written} messages written before (readable)")
    return path


def _header(stamp: int):
    types = bags.typestore().types
    sec, nanosec = divmod(stamp, 1_000_000_000)
    return types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                        frame_id="")


def _joint_state(recording: Recording, k: int, stamp: int):
    values = {quantity: getattr(recording, quantity)[k] if getattr(recording, quantity) is not None
              else np.empty(0) for quantity in ("position", "velocity", "effort")}
    return bags.typestore().types[JOINT_STATE](header=_header(stamp), name=list(recording.joint_names), **values)


def _odometry(recording: Recording, k: int, stamp: int):
    types = bags.typestore().types

    def message(name, values):
        return types[f"geometry_msgs/msg/{name}"](*values[k].tolist())

    header = _header(stamp)
    header.frame_id = "world"
    pose = types["geometry_msgs/msg/Pose"](position=message("Point", recording.base_position),
                                           orientation=message("Quaternion", recording.base_orientation))
    twist = types["geometry_msgs/msg/Twist"](linear=message("Vector3", recording.base_linear_velocity),
                                             angular=message("Vector3", recording.base_angular_velocity))
    return types[ODOMETRY](
        header=header, child_frame_id="base",
        pose=types["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
        twist=types["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)))
