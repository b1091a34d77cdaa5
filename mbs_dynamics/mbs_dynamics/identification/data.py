"""Recorded robot motion for identification: joint positions, velocities,
accelerations and efforts against time, and optionally the floating base's
pose and twist, read from ROS 2 bags or CSV files, low-pass filtered, and laid
out in a model's coordinates. No ROS here: bags are read and written with
rosbags.

Units and frames: time in s; joint positions in rad (revolute) or m
(prismatic), velocities in rad/s or m/s, accelerations in rad/s² or m/s²,
efforts in N m or N. The base as nav_msgs/Odometry gives it: position (m) and
unit quaternion (x, y, z, w) of the base in the world (odometry) frame, linear
(m/s) and angular (rad/s) velocity in the base's own axes (the child frame),
and their time derivatives in the same axes, which are the floating joint's
accelerations (DESIGN.md §2).

Bad input raises DataError (a ValueError) that says what is wrong; what can be
dropped and counted instead (a message without a joint, a non-finite value,
repeated stamps, ...) is, and said in `Recording.warnings`.

CSV format (recorded data and trajectory files alike)::

    # comment lines start with '#'; blank lines are skipped
    # time_origin_ns: 1700000000000000000
    time,position/joint1,position/joint2,velocity/joint1,velocity/joint2
    0.000,0.10,-0.20,0.0,0.0
    0.002,0.11,-0.21,5.0,-5.0

* The header row (the first line that is neither blank nor a comment) starts
  with `time` (s, strictly increasing down the file); then columns
  `<quantity>/<joint>`, quantity one of position, velocity, acceleration,
  effort, in any order. Any subset of the quantities may be given; each one
  given covers the same joints. A joint's name is everything after the first
  '/'; a name with a comma is quoted ("..."), as CSV does.
* A floating base adds the 13 columns base/x, base/y, base/z (position),
  base/qx, base/qy, base/qz, base/qw (orientation), base/vx, base/vy, base/vz
  (linear velocity), base/wx, base/wy, base/wz (angular velocity), all or
  none, and optionally the 6 accelerations base/dvx, base/dvy, base/dvz,
  base/dwx, base/dwy, base/dwz (their time derivatives).
* The optional comment `# time_origin_ns: <integer>` gives the ROS time
  (ns since the epoch) of time 0, which a bag written from the file stamps
  its messages from; 0 when absent.
* Every value is a finite decimal number; write_csv writes the shortest
  form that reads back to the same float64.
* A CSV file is a regular file of at most MAX_CSV_BYTES (256 MiB: some 20
  minutes of 7 joints' positions, velocities and efforts at 500 Hz; reading
  one takes about five times its size in memory); longer recordings go in
  bags.

Bags are bounded likewise: a bag is a regular .mcap or .db3 file or a
directory whose metadata.yaml (at most MAX_BAG_METADATA_BYTES) and other
entries are regular files (a FIFO would block the reader, /dev/zero never
end); at most MAX_BAG_MESSAGES messages and MAX_BAG_MESSAGE_BYTES bytes of
them are read from the topics asked for.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import re
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mbs_dynamics.configuration import floating_base_state
from mbs_dynamics.files import FileProblem, checked_file, read_file, write_file
from mbs_dynamics.inputs import QUATERNION_TOLERANCE
from mbs_dynamics.model import JOINT_NQ, ROOT_JOINT, Model

QUANTITIES = ("position", "velocity", "acceleration", "effort")
# Base fields and their CSV columns: the pose and twist go together, the accelerations optionally with them.
BASE_STATE_COLUMNS = {
    "base_position": ("x", "y", "z"),
    "base_orientation": ("qx", "qy", "qz", "qw"),
    "base_linear_velocity": ("vx", "vy", "vz"),
    "base_angular_velocity": ("wx", "wy", "wz"),
}
BASE_ACCELERATION_COLUMNS = {
    "base_linear_acceleration": ("dvx", "dvy", "dvz"),
    "base_angular_acceleration": ("dwx", "dwy", "dwz"),
}
BASE_COLUMNS = {**BASE_STATE_COLUMNS, **BASE_ACCELERATION_COLUMNS}
JOINT_STATE = "sensor_msgs/msg/JointState"
ODOMETRY = "nav_msgs/msg/Odometry"
STORAGES = ("mcap", "sqlite3")

# filtered()'s low-pass filter (its docstring says why these)
DEFAULT_CUTOFF = 10.0  # Hz
DEFAULT_ORDER = 4
# Sample intervals further than this (relative) from their median make
# filtered() resample onto a uniform grid first.
UNIFORM_TOLERANCE = 0.05
# ... but not onto more than this many times its samples: a recording with long gaps.
MAX_RESAMPLING = 2
TIME_ORIGIN = re.compile(r"#\s*time_origin_ns\s*:\s*(\S+)\s*$")
# The largest CSV file read (module docstring).
MAX_CSV_BYTES = 256 * 2**20
# A bag's metadata.yaml: a few kB per storage file and topic.
MAX_BAG_METADATA_BYTES = 16 * 2**20
# Messages read from a bag's topics: over a quarter of an hour at 1 kHz, half an hour at 500 Hz; reading
# them peaks at some 1.3 GB (1340 bytes a 6-joint JointState, measured) and takes about 45 s.
MAX_BAG_MESSAGES = 1_000_000
# Their serialized bytes: 500 bytes each (a 6-joint JointState takes 363 in an MCAP bag).
MAX_BAG_MESSAGE_BYTES = 500 * MAX_BAG_MESSAGES


class DataError(ValueError):
    """Recorded data that cannot be used; the message says what and where."""


@dataclass(frozen=True, eq=False)
class Recording:
    """Joint (and floating-base) motion sampled at `time` (N,), seconds after
    `time_origin_ns` (ns since the epoch), strictly increasing. Joint arrays
    are (N, J), column j for joint_names[j], or None when not recorded; the
    base fields are (N, 3) ((N, 4) for the quaternion x, y, z, w) in the
    module's conventions: the four state fields all or none, the two
    accelerations only with them. Arrays are read-only float64 copies;
    quaternions are normalised (within QUATERNION_TOLERANCE of unit length,
    refused otherwise). `source` names where it came from, `warnings` what
    was dropped, guessed or changed on the way."""

    joint_names: tuple
    time: np.ndarray
    position: np.ndarray | None = None
    velocity: np.ndarray | None = None
    acceleration: np.ndarray | None = None
    effort: np.ndarray | None = None
    base_position: np.ndarray | None = None
    base_orientation: np.ndarray | None = None
    base_linear_velocity: np.ndarray | None = None
    base_angular_velocity: np.ndarray | None = None
    base_linear_acceleration: np.ndarray | None = None
    base_angular_acceleration: np.ndarray | None = None
    time_origin_ns: int = 0
    source: str = ""
    warnings: tuple = ()

    def __post_init__(self):
        names = tuple(self.joint_names)
        if not all(isinstance(name, str) for name in names):
            raise DataError(f"{self._what()}: joint names must be strings, got {list(names)}")
        names = tuple(str(name) for name in names)  # numpy's str_ too
        repeated = sorted(name for name, count in Counter(names).items() if count > 1)
        if repeated:
            raise DataError(f"{self._what()}: joint names repeat: {repeated}")
        object.__setattr__(self, "joint_names", names)
        object.__setattr__(self, "time_origin_ns", int(self.time_origin_ns))
        object.__setattr__(self, "warnings", tuple(self.warnings))
        object.__setattr__(self, "time", self._checked_time())
        for quantity in QUANTITIES:
            self._set_array(quantity, len(names))
        self._check_base()

    def _what(self) -> str:
        return self.source or "recording"

    def _checked_time(self) -> np.ndarray:
        time = _frozen(self.time)
        if time.ndim != 1 or time.size == 0:
            raise DataError(f"{self._what()}: time must be a non-empty 1-D array, got shape {time.shape}")
        if not np.all(np.isfinite(time)):
            raise DataError(f"{self._what()}: time has non-finite values")
        steps = np.diff(time)
        if np.any(steps <= 0):
            k = int(np.argmax(steps <= 0))
            raise DataError(f"{self._what()}: time must increase strictly; sample {k + 1} ({float(time[k + 1])!r} "
                            f"s) does not come after sample {k} ({float(time[k])!r} s)")
        return time

    def _set_array(self, field: str, columns: int) -> None:
        value = getattr(self, field)
        if value is None:
            return
        array = _frozen(value)
        if array.shape != (self.time.size, columns):
            raise DataError(f"{self._what()}: {field} has shape {array.shape}, expected (samples, columns) = "
                            f"({self.time.size}, {columns})")
        if not np.all(np.isfinite(array)):
            row, column = (int(k) for k in np.argwhere(~np.isfinite(array))[0])
            raise DataError(f"{self._what()}: {field} has a non-finite value ({array[row, column]}) at sample {row} "
                            f"(t = {self.time[row]:.6f} s), column {column}")
        object.__setattr__(self, field, array)

    def _check_base(self) -> None:
        given = [field for field in BASE_COLUMNS if getattr(self, field) is not None]
        state = [field for field in BASE_STATE_COLUMNS if field in given]
        accelerations = [field for field in BASE_ACCELERATION_COLUMNS if field in given]
        if (state or accelerations) and len(state) < len(BASE_STATE_COLUMNS):
            raise DataError(f"{self._what()}: a floating base needs all of {list(BASE_STATE_COLUMNS)}; "
                            f"given: {given}")
        if 0 < len(accelerations) < len(BASE_ACCELERATION_COLUMNS):
            raise DataError(f"{self._what()}: base accelerations need both of {list(BASE_ACCELERATION_COLUMNS)}; "
                            f"given: {accelerations}")
        for field in given:
            self._set_array(field, len(BASE_COLUMNS[field]))
        if state:
            try:
                q, _ = floating_base_state(self.base_position, self.base_orientation, self.base_linear_velocity,
                                           self.base_angular_velocity, what=f"{self._what()}: base")
            except ValueError as error:
                raise DataError(str(error)) from None
            orientation = self.base_orientation
            unit = np.abs(np.linalg.norm(orientation, axis=1) - 1.0) <= 1e-12  # normalised: again would move bits
            object.__setattr__(self, "base_orientation", _frozen(np.where(unit[:, None], orientation, q[:, 3:7])))

    def __len__(self) -> int:
        return self.time.size

    @property
    def duration(self) -> float:
        """Seconds from the first sample to the last."""
        return float(self.time[-1] - self.time[0])

    @property
    def has_base(self) -> bool:
        return self.base_position is not None

    def replace(self, **changes) -> Recording:
        """A copy with the given fields changed (checked like a new one)."""
        return dataclasses.replace(self, **changes)

    def rows(self, index) -> Recording:
        """The samples `index` selects (a slice, or indices or a mask over samples)."""
        arrays = {field: getattr(self, field)[index] for field in (*QUANTITIES, *BASE_COLUMNS)
                  if getattr(self, field) is not None}
        return self.replace(time=self.time[index], **arrays)

    def window(self, start: float | None = None, stop: float | None = None) -> Recording:
        """The samples with start <= time < stop (s; None: unbounded)."""
        inside = np.ones(len(self), dtype=bool)
        if start is not None:
            inside &= self.time >= start
        if stop is not None:
            inside &= self.time < stop
        if not inside.any():
            raise DataError(f"{self._what()}: no sample in the window [{start}, {stop}) s; it spans "
                            f"[{self.time[0]:.6g}, {self.time[-1]:.6g}] s")
        return self.rows(inside)

    def chunks(self, samples: int):
        """Consecutive sub-recordings of `samples` samples each (the last may
        be shorter), e.g. to spread one recording over workers."""
        if int(samples) != samples or samples < 1:
            raise ValueError(f"samples must be a positive integer, got {samples!r}")
        for start in range(0, len(self), int(samples)):
            yield self.rows(slice(start, start + int(samples)))


def _frozen(value) -> np.ndarray:
    array = np.array(value, dtype=float)
    array.setflags(write=False)
    return array


# --- bags ---------------------------------------------------------------

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
    with _opened_bag(path) as reader:
        topics = [_bag_topic(path, reader.topics, topic, JOINT_STATE, notes)]
        if odometry_topic is not None:
            topics.append(_bag_topic(path, reader.topics, odometry_topic, ODOMETRY, notes))
        messages = _decoded_messages(reader, path, topics, progress, notes)
    stamps, names, arrays = _joint_samples(messages[topics[0]], topics[0], notes)
    base = {}
    if odometry_topic is not None:
        stamps, arrays, base = _with_odometry(stamps, arrays, messages[topics[1]], topics[1], notes)
    origin = int(stamps[0])
    return Recording(names, (stamps - origin) * 1e-9, **arrays, **base, time_origin_ns=origin,
                     source=f"{path} ({', '.join(topics)})", warnings=tuple(notes))


@lru_cache(maxsize=1)
def _typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


@contextmanager
def _opened_bag(path: Path):
    """rosbags' AnyReader on the bag at `path`, opened: DataError for what it cannot open."""
    from rosbags.highlevel import AnyReader

    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    if path.suffix == ".bag":
        raise DataError(f"{path} is a ROS 1 bag: convert it to ROS 2 first (rosbags-convert --src {path})")
    _check_bag_files(path)
    try:
        reader = AnyReader([path], default_typestore=_typestore())
        reader.open()
    except Exception as error:  # noqa: BLE001  rosbags and its storage libraries raise many kinds
        hint = (" An MCAP file cut short (a recording that did not end cleanly) can be repaired with "
                "`mcap recover`." if path.suffix == ".mcap" or path.is_dir() and any(path.glob("*.mcap")) else "")
        raise DataError(f"{path} is not a readable ROS 2 bag ({_reason(error)}). A bag is a directory with a "
                        f"metadata.yaml, or one .mcap or .db3 file.{hint}") from None
    try:
        yield reader
    finally:
        reader.close()


def _check_bag_files(path: Path) -> None:
    """DataError unless `path` is a regular file (a bag's storage file) or a
    directory with a metadata.yaml of at most MAX_BAG_METADATA_BYTES whose
    entries are all regular files or directories: rosbags would block on a
    FIFO and read /dev/zero without end."""
    what = "bag file"
    try:
        if not path.is_dir():
            checked_file(path, what, float("inf"))
            return
        checked_file(path / "metadata.yaml", "bag metadata", MAX_BAG_METADATA_BYTES)
        for entry in path.iterdir():
            if not (entry.is_dir() or entry.is_file()):
                checked_file(entry, what, float("inf"))  # says why
    except FileProblem as error:
        raise DataError(f"{path} is not a readable ROS 2 bag ({error}). A bag is a directory with a metadata.yaml, "
                        "or one .mcap or .db3 file.") from None


def _reason(error: Exception) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _bag_topic(path: Path, topics: dict, wanted: str, message_type: str, notes: list) -> str:
    """The bag's topic that `wanted` names (exactly, else by a unique suffix),
    checked to hold messages of `message_type`."""
    absolute = "/" + wanted.strip("/")
    if wanted in topics or absolute in topics:
        found = wanted if wanted in topics else absolute
    else:
        candidates = sorted(name for name in topics if name.endswith(absolute))
        listing = "; ".join(f"{name} ({info.msgtype}, {info.msgcount} messages)"
                            for name, info in sorted(topics.items())) or "none"
        if len(candidates) != 1:
            several = f" matches several topics {candidates}; name one" if candidates else ": no such topic"
            raise DataError(f"{path}: '{wanted}'{several}. The bag's topics: {listing}")
        found = candidates[0]
        notes.append(f"topic '{wanted}' taken as '{found}'")
    info = topics[found]
    if info.msgtype != message_type:
        raise DataError(f"{path}: topic {found} has messages of type {info.msgtype}, not {message_type}")
    if not info.msgcount:
        raise DataError(f"{path}: topic {found} has no messages")
    return found


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
    connections = [connection for connection in reader.connections if connection.topic in topics]
    decoded = {topic: [] for topic in topics}
    failures = Counter()
    count = sum(reader.topics[topic].msgcount for topic in topics)
    if count > MAX_BAG_MESSAGES:
        raise _too_long(path, topics, f"{count} messages")
    read_bytes = 0
    bar = tqdm(total=count, unit="msg", disable=not progress, desc=path.name)
    with bar:
        for index, (connection, receive_time, data) in enumerate(_raw_messages(reader, connections, path)):
            read_bytes += len(data)
            if index >= MAX_BAG_MESSAGES or read_bytes > MAX_BAG_MESSAGE_BYTES:  # the metadata's counts may lie
                raise _too_long(path, topics, f"more than {index} messages, {read_bytes} bytes")
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


def _too_long(path: Path, topics: list, size: str) -> DataError:
    return DataError(f"{path}: {', '.join(topics)} hold {size}, more than the {MAX_BAG_MESSAGES} messages of "
                     f"{MAX_BAG_MESSAGE_BYTES / 2**20:.0f} MiB that are read from a bag; split it (ros2 bag convert, "
                     "rosbags-convert) and give the parts")


def _raw_messages(reader, connections, path: Path):
    try:
        yield from reader.messages(connections=connections)
    except Exception as error:  # noqa: BLE001  the storage's own errors: damaged chunks or pages
        raise DataError(f"{path}: the bag is damaged; reading stopped ({_reason(error)})") from None


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
    result[:, 3:7] = _slerp(time, values[:, 3:7], new_time)
    return result


def _slerp(time: np.ndarray, quaternions: np.ndarray, new_time: np.ndarray) -> np.ndarray:
    """Unit quaternions (x, y, z, w) at `new_time`, spherically interpolated
    between the samples around each (on the shorter arc)."""
    index = np.clip(np.searchsorted(time, new_time, side="right") - 1, 0, time.size - 2)
    fraction = ((new_time - time[index]) / (time[index + 1] - time[index]))[:, None]
    start, end = quaternions[index], quaternions[index + 1]
    cosine = np.sum(start * end, axis=1, keepdims=True)
    end, cosine = np.where(cosine < 0, -end, end), np.abs(cosine)
    angle = np.arccos(np.clip(cosine, -1.0, 1.0))
    sine = np.sin(angle)
    tiny = sine < 1e-9  # (nearly) the same rotation: linear weights
    safe = np.where(tiny, 1.0, sine)
    start_weight = np.where(tiny, 1 - fraction, np.sin((1 - fraction) * angle) / safe)
    end_weight = np.where(tiny, fraction, np.sin(fraction * angle) / safe)
    result = start_weight * start + end_weight * end
    result /= np.linalg.norm(result, axis=1, keepdims=True)
    for sample in (index, index + 1):  # at a sample's own time, its own quaternion to the bit
        hit = new_time == time[sample]
        result[hit] = quaternions[sample[hit]]
    return result


def write_bag(path, recording: Recording, storage: str = "mcap", topic: str = "joint_states",
              odometry_topic: str | None = None) -> Path:
    """A ROS 2 bag (directory `path`, which must not exist) of the recording:
    sensor_msgs/JointState on `topic` (positions, velocities, efforts as
    recorded, empty when not; no accelerations: JointState has none) and,
    with a floating base, nav_msgs/Odometry on `odometry_topic` (default
    'odom'; frame_id 'world', child_frame_id 'base', twist in the child
    frame, zero covariances). Stamped time_origin_ns + time, header and
    receive time alike. Storage 'mcap' or 'sqlite3'."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    if storage not in STORAGES:
        raise ValueError(f"storage must be one of {STORAGES}, got {storage!r}")
    if odometry_topic and not recording.has_base:
        raise DataError(f"{recording._what()} has no floating base to write on {odometry_topic}")
    stamps = recording.time_origin_ns + np.round(recording.time * 1e9).astype(np.int64)
    if stamps[0] < 0 or stamps[-1] >= 2**31 * 1_000_000_000:
        raise DataError(f"{recording._what()}: stamps time_origin_ns + time must lie within 0 and 2^31 s, got "
                        f"{stamps[0] * 1e-9:.9g} to {stamps[-1] * 1e-9:.9g} s")
    path = Path(path)
    if path.exists():
        raise DataError(f"{path} exists: write_bag writes a new bag")
    typestore = _typestore()
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        joints = writer.add_connection("/" + topic.strip("/"), JOINT_STATE, typestore=typestore)
        odometry = None
        if recording.has_base:
            odometry = writer.add_connection("/" + (odometry_topic or "odom").strip("/"), ODOMETRY, typestore=typestore)
        for k, stamp in enumerate(stamps.tolist()):
            writer.write(joints, stamp, typestore.serialize_cdr(_joint_state(recording, k, stamp), JOINT_STATE))
            if odometry is not None:
                writer.write(odometry, stamp, typestore.serialize_cdr(_odometry(recording, k, stamp), ODOMETRY))
    return path


def _header(stamp: int):
    types = _typestore().types
    sec, nanosec = divmod(stamp, 1_000_000_000)
    return types["std_msgs/msg/Header"](stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
                                        frame_id="")


def _joint_state(recording: Recording, k: int, stamp: int):
    values = {quantity: getattr(recording, quantity)[k] if getattr(recording, quantity) is not None
              else np.empty(0) for quantity in ("position", "velocity", "effort")}
    return _typestore().types[JOINT_STATE](header=_header(stamp), name=list(recording.joint_names), **values)


def _odometry(recording: Recording, k: int, stamp: int):
    types = _typestore().types

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


# --- CSV ----------------------------------------------------------------

def read_csv(path) -> Recording:
    """A recording from a CSV file in the module's format; DataError naming
    the line and column of what is malformed."""
    path = Path(path)
    try:
        text = read_file(path, "CSV file", MAX_CSV_BYTES)  # a spreadsheet's byte order mark is dropped
    except FileProblem as error:
        raise DataError(str(error)) from None
    origin, lines = 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        directive = TIME_ORIGIN.match(stripped)
        if directive:
            origin = _time_origin(path, number, directive.group(1))
        elif stripped and not stripped.startswith("#"):
            lines.append((number, next(csv.reader([line]))))
    if not lines:
        raise DataError(f"{path}: no header row (time, then <quantity>/<joint> columns)")
    (header_line, header), rows = lines[0], lines[1:]
    columns = _csv_columns(path, header_line, [cell.strip() for cell in header])
    if not rows:
        raise DataError(f"{path}: a header but no data rows")
    values = _csv_values(path, rows, len(header))
    time = values[:, 0]
    steps = np.diff(time)
    if np.any(steps <= 0):
        k = int(np.argmax(steps <= 0))
        raise DataError(f"{path}, line {rows[k + 1][0]}: time {float(time[k + 1])!r} s does not come after line "
                        f"{rows[k][0]}'s {float(time[k])!r} s: time must increase strictly")
    names, fields = columns
    arrays = {field: values[:, indices] for field, indices in fields.items()}
    return Recording(names, time, **arrays, time_origin_ns=origin, source=str(path))


def _time_origin(path: Path, number: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise DataError(f"{path}, line {number}: time_origin_ns must be an integer (ns), got '{text}'") from None


def _csv_columns(path: Path, line: int, header: list) -> tuple[tuple, dict]:
    """(joint names, {Recording field: column indices}) of the header row."""
    where = f"{path}, line {line} (the header)"
    if not header or header[0] != "time":
        raise DataError(f"{where}: the first column must be 'time', got '{header[0] if header else ''}'")
    repeated = sorted(name for name, count in Counter(header).items() if count > 1)
    if repeated:
        raise DataError(f"{where}: columns repeat: {repeated}")
    by_quantity: dict[str, dict[str, int]] = {}
    base: dict[str, int] = {}
    base_names = {column: field for field, columns in BASE_COLUMNS.items() for column in columns}
    for index, column in enumerate(header[1:], start=1):
        quantity, _, joint = column.partition("/")
        if quantity == "base" and joint in base_names:
            base[joint] = index
        elif quantity in QUANTITIES and joint:
            by_quantity.setdefault(quantity, {})[joint] = index
        else:
            raise DataError(f"{where}: unknown column '{column}' (column {index + 1}); columns are "
                            f"<quantity>/<joint> with quantity one of {list(QUANTITIES)}, or base/<field> with "
                            f"field one of {list(base_names)}")
    names = tuple(dict.fromkeys(joint for joints in by_quantity.values() for joint in joints))
    fields = {}
    for quantity, joints in by_quantity.items():
        missing = [name for name in names if name not in joints]
        if missing:
            raise DataError(f"{where}: {quantity} lacks the joints {missing} that other quantities have")
        fields[quantity] = [joints[name] for name in names]
    for field, columns in BASE_COLUMNS.items():
        present = [column for column in columns if column in base]
        if present and len(present) < len(columns):
            raise DataError(f"{where}: base columns {['base/' + c for c in columns if c not in base]} missing "
                            f"(a {field.removeprefix('base_').replace('_', ' ')} needs all of {list(columns)})")
        if present:
            fields[field] = [base[column] for column in columns]
    return names, fields


def _csv_values(path: Path, rows: list, width: int) -> np.ndarray:
    """The data rows as a (rows, width) float array: DataError naming the first bad cell."""
    for number, cells in rows:
        if len(cells) != width:
            raise DataError(f"{path}, line {number}: {len(cells)} values for the header's {width} columns")
    try:
        values = np.array([cells for _, cells in rows], dtype=float)
        if np.all(np.isfinite(values)):
            return values
    except ValueError:
        pass
    for number, cells in rows:
        for column, cell in enumerate(cells):
            try:
                finite = np.isfinite(float(cell))
            except ValueError:
                finite = False
            if not finite:
                raise DataError(f"{path}, line {number}, column {column + 1}: '{cell}' is not a finite number")
    return np.array([[float(cell) for cell in cells] for _, cells in rows])  # what only Python's float() reads


def write_csv(path, recording: Recording) -> Path:
    """The recording as a CSV file in the module's format (accelerations
    included when recorded), every value exact; FileProblem (a ValueError)
    when it cannot be written."""
    header, columns = ["time"], [recording.time[:, None]]
    for quantity in QUANTITIES:
        if getattr(recording, quantity) is not None:
            header += [f"{quantity}/{name}" for name in recording.joint_names]
            columns.append(getattr(recording, quantity))
    for field, names in BASE_COLUMNS.items():
        if getattr(recording, field) is not None:
            header += [f"base/{name}" for name in names]
            columns.append(getattr(recording, field))
    text = io.StringIO()
    text.write(f"# {recording.source or 'recording'}: time in s; positions in rad or m, velocities in rad/s "
               "or m/s, accelerations in rad/s^2 or m/s^2, efforts in N m or N\n")
    text.write(f"# time_origin_ns: {recording.time_origin_ns}\n")
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(np.hstack(columns).tolist())  # str(float) is the shortest exact form
    return write_file(path, text.getvalue(), "CSV file")


# --- filtering ----------------------------------------------------------

def filtered(recording: Recording, cutoff: float = DEFAULT_CUTOFF, order: int = DEFAULT_ORDER,
             filter_effort: bool = True) -> Recording:
    """The recording low-pass filtered without phase lag, and accelerations
    differentiated from the filtered velocities.

    Positions, velocities, efforts and the base's pose and twist go through
    a Butterworth filter of `order` and `cutoff` (Hz) forward and backward
    (scipy.signal.sosfiltfilt: zero phase, gain 1 / (1 + (f / cutoff)^(2
    order)), half at the cut-off). The default 10 Hz suits arm
    identification: excitation trajectories (finite Fourier series) keep
    their energy below a few Hz, which pass unchanged (5 Hz at 0.996, 2 Hz
    at 1 - 3e-6), while measurement noise, which each differentiation
    amplifies by 2 pi f, is stopped above it; efforts and motion pass the
    same filter, so that their phases and gains stay consistent. Noisier
    data wants a lower cut-off: with 1 % white noise on 500 Hz velocities,
    10 Hz leaves accelerations of motion below 2 Hz within about 1 % RMS
    (4 % at worst) of their peak, 5 Hz within half that.

    Velocities not recorded are differentiated from the filtered positions;
    accelerations always come from the filtered velocities (central
    differences; recorded ones are replaced, said in the warnings), the
    base's as the time derivatives of its twist in its own axes. The
    filter needs a uniform sample rate: stamps further than 5 % from their
    median interval are first resampled onto a uniform grid at that interval
    (linear interpolation, the quaternion by slerp; said in the warnings).
    Each end is padded with one cut-off period (odd extension); the first
    and last few tenths of a second still carry the filter's transients, for
    `Recording.window` to drop. With filter_effort False the efforts pass
    unfiltered (resampled if need be): what identification does, so that a
    Coulomb friction's jump at a velocity reversal stays as sharp as the
    model's (joint_friction), while least squares averages the noise out.
    DataError for a recording no longer than
    that padding or a cut-off at or above the Nyquist frequency."""
    from scipy.signal import butter, sosfiltfilt

    if not (np.isfinite(cutoff) and cutoff > 0):
        raise ValueError(f"cutoff must be a positive frequency (Hz), got {cutoff!r}")
    if int(order) != order or order < 1:
        raise ValueError(f"order must be a positive integer, got {order!r}")
    if len(recording) < 3:
        raise DataError(f"{recording._what()}: {len(recording)} samples; filtering needs many more")
    recording, notes = _uniform(recording)
    rate = 1.0 / float(np.median(np.diff(recording.time)))
    if cutoff >= rate / 2:
        raise DataError(f"{recording._what()}: cut-off {cutoff:g} Hz at or above the Nyquist frequency "
                        f"{rate / 2:.6g} Hz of its {rate:.6g} Hz samples")

    def too_few(needed: float) -> DataError:
        return DataError(f"{recording._what()}: {len(recording)} samples ({recording.duration:.3g} s) are too few "
                         f"to filter at {cutoff:g} Hz: more than {needed:.0f} ({needed / rate:.3g} s at {rate:.6g} Hz) "
                         "are needed")

    period = rate / cutoff  # samples in a period of the cut-off; inf for a tiny cut-off
    if not len(recording) > period:
        raise too_few(np.ceil(period))
    sections = butter(int(order), cutoff, fs=rate, output="sos")
    padding = max(3 * (2 * len(sections) + 1), int(np.ceil(period)))
    if len(recording) <= padding:
        raise too_few(padding)

    def smooth(values):
        return None if values is None else sosfiltfilt(sections, values, axis=0, padlen=padding)

    def derivative(values):
        return None if values is None else np.gradient(values, recording.time, axis=0)

    position = smooth(recording.position)
    velocity = smooth(recording.velocity) if recording.velocity is not None else derivative(position)
    if recording.acceleration is not None:
        notes.append("the recorded accelerations were replaced by the derivative of the filtered velocities")
    changes = {"position": position, "velocity": velocity, "acceleration": derivative(velocity),
               "effort": smooth(recording.effort) if filter_effort else recording.effort}
    if recording.has_base:
        orientation = smooth(_continuous(recording.base_orientation))
        linear, angular = smooth(recording.base_linear_velocity), smooth(recording.base_angular_velocity)
        changes.update(base_position=smooth(recording.base_position),
                       base_orientation=orientation / np.linalg.norm(orientation, axis=1, keepdims=True),
                       base_linear_velocity=linear, base_angular_velocity=angular,
                       base_linear_acceleration=derivative(linear), base_angular_acceleration=derivative(angular))
    notes.append(f"low-pass filtered at {cutoff:g} Hz (Butterworth of order {order}, zero phase"
                 f"{'' if filter_effort else ', the efforts not'}); accelerations from the filtered velocities")
    return recording.replace(**changes, warnings=recording.warnings + tuple(notes))


def _uniform(recording: Recording) -> tuple[Recording, list]:
    """The recording on a uniform time grid at its median sample interval,
    resampled when an interval is more than UNIFORM_TOLERANCE from it."""
    steps = np.diff(recording.time)
    step = float(np.median(steps))
    if np.max(np.abs(steps - step)) <= UNIFORM_TOLERANCE * step:
        return recording, []
    samples = recording.duration / step + 1
    if samples > MAX_RESAMPLING * len(recording):
        raise DataError(f"{recording._what()}: its sample intervals range from {steps.min() * 1e3:.3g} to "
                        f"{steps.max() * 1e3:.3g} ms; a uniform grid at the median {step * 1e3:.3g} ms would take "
                        f"{samples:.3g} samples, more than {MAX_RESAMPLING} times its {len(recording)}: the recording "
                        "has long gaps; cut it at them (Recording.window) and give the parts")
    time = recording.time[0] + step * np.arange(int(np.floor(recording.duration / step + 1e-9)) + 1)
    changes = {field: np.column_stack([np.interp(time, recording.time, column) for column in values.T])
               for field in (*QUANTITIES, *BASE_COLUMNS)
               if (values := getattr(recording, field)) is not None}
    if recording.has_base:
        changes["base_orientation"] = _slerp(recording.time, recording.base_orientation, time)
    note = (f"resampled onto a uniform {1 / step:.6g} Hz grid ({len(recording)} -> {time.size} samples): the "
            f"sample intervals ranged from {steps.min() * 1e3:.3g} to {steps.max() * 1e3:.3g} ms")
    return recording.replace(time=time, **changes), [note]


def _continuous(quaternions: np.ndarray) -> np.ndarray:
    """The quaternions with signs flipped so that neighbours lie in the same
    hemisphere (q and -q are one rotation): a signal that can be filtered."""
    flips = np.concatenate([[1.0], np.where(np.sum(quaternions[1:] * quaternions[:-1], axis=1) < 0, -1.0, 1.0)])
    return quaternions * np.cumprod(flips)[:, None]


# --- a model's coordinates ----------------------------------------------

@dataclass(frozen=True, eq=False)
class ModelState:
    """A recording in a model's coordinates (DESIGN.md §2): q (N, nq), v, a
    and effort (N, nv), each None when the recording lacks it (q never is);
    a floating base's effort rows are zero (nothing actuates it). Unpacks as
    q, v, a, effort; `warnings` says what of the recording was ignored."""

    q: np.ndarray
    v: np.ndarray | None
    a: np.ndarray | None
    effort: np.ndarray | None
    warnings: tuple = ()

    def __iter__(self):
        return iter((self.q, self.v, self.a, self.effort))


def model_state(model: Model, recording: Recording) -> ModelState:
    """The recording's samples as the model's q, v, a and effort, joints
    matched by name (model.q_index, model.v_index); the floating base
    (root_joint) from the recording's base fields. DataError when the
    recording lacks positions, a joint of the model or the base of a
    floating-base model; joints the model does not know are ignored with a
    warning, mimic joints (no coordinates) and the base of a fixed-base
    model likewise."""
    joints = [name for name in model.joint_names if name != ROOT_JOINT or not model.floating_base]
    _check_one_coordinate(model, joints)
    missing = [name for name in joints if name not in recording.joint_names]
    if missing:
        raise DataError(f"{recording._what()} lacks joints {missing} of model '{model.name}'; it has "
                        f"{list(recording.joint_names)}")
    if recording.position is None:
        raise DataError(f"{recording._what()} has no joint positions")
    if model.floating_base and not recording.has_base:
        raise DataError(f"model '{model.name}' has a floating base, {recording._what()} none (read the bag with "
                        "its odometry_topic, or give the CSV the base/... columns)")
    notes = _ignored(model, recording)
    columns = [recording.joint_names.index(name) for name in joints]
    q_index = [model.q_index(name) for name in joints]
    v_index = [model.v_index(name) for name in joints]
    q = np.tile(model.neutral_configuration(), (len(recording), 1))
    q[:, q_index] = recording.position[:, columns]
    base_velocity = base_acceleration = None
    if model.floating_base:
        q_base, base_velocity = floating_base_state(recording.base_position, recording.base_orientation,
                                                    recording.base_linear_velocity, recording.base_angular_velocity)
        q[:, model.q_index(ROOT_JOINT) + np.arange(7)] = q_base
        if recording.base_linear_acceleration is not None:
            base_acceleration = np.hstack([recording.base_angular_acceleration, recording.base_linear_acceleration])

    def coordinates(values, base_values):
        """(N, nv) of the joints' `values`, the base's `base_values` (None: the result is None)."""
        if values is None or (model.floating_base and base_values is None):
            return None
        result = np.zeros((len(recording), model.nv))
        result[:, v_index] = values[:, columns]
        if model.floating_base:
            result[:, model.v_index(ROOT_JOINT) + np.arange(6)] = base_values
        return result

    return ModelState(q, coordinates(recording.velocity, base_velocity),
                      coordinates(recording.acceleration, base_acceleration),
                      coordinates(recording.effort, np.zeros((len(recording), 6))), tuple(notes))


def _check_one_coordinate(model: Model, joints: list) -> None:
    """DataError for a joint of several coordinates (planar, floating): a recording holds one per joint."""
    types = dict(zip(model.body_joint_names, model.joint_type))
    several = [name for name in joints if JOINT_NQ[int(types[name])] != 1]
    if several:
        raise DataError(f"model '{model.name}' has joints with several coordinates {several}: a recording holds one "
                        "per joint (and the floating base root_joint apart)")


def _ignored(model: Model, recording: Recording) -> list:
    """Warnings for what of the recording the model has no coordinate for."""
    notes = []
    mimics = set(model.body_joint_names) - set(model.joint_names)  # joints that follow another's coordinate
    unknown = [name for name in recording.joint_names if name not in model.joint_names and name not in mimics]
    if unknown:
        notes.append(f"joints of {recording._what()} that model '{model.name}' does not have were ignored: {unknown}")
    if recording.has_base and not model.floating_base:
        notes.append(f"the floating base of {recording._what()} was ignored: model '{model.name}' has a fixed base")
    return notes
