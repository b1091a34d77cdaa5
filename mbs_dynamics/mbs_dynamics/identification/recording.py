"""Recorded robot motion for identification: `Recording`, joint positions,
velocities, accelerations and efforts against time, and optionally the
floating base's pose and twist; read from ROS 2 bags (bag_data.py) or CSV
files (csv_data.py), low-pass filtered (filtering.py) and laid out in a
model's coordinates (model_state.py).

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
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

import numpy as np

from mbs_dynamics.multibody.configuration import floating_base_state

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
