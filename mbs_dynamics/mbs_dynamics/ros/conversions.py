"""Messages to the core's arrays and back, by joint name: what every node
needs and no dynamics. Bad input raises InvalidInput with a message that says
what is wrong; the nodes count it and go on.

Conventions (DESIGN.md §2): q = [base position, base quaternion (x y z w),
joint positions in model order], v = [base twist w; v in the base frame,
joint velocities]. nav_msgs/Odometry gives the pose in its frame_id and the
twist in its child frame: exactly the base's body twist.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbs_dynamics import Model
from mbs_dynamics.inputs import QUATERNION_TOLERANCE
from mbs_dynamics.model import ROOT_JOINT


class InvalidInput(ValueError):
    """A message the node cannot use; `reason` names the counter it goes to."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class NameMatch:
    """How the names of one message map onto the model: message index ->
    coordinate index, for the joints the model needs; names it does not know."""

    message_index: np.ndarray
    q_index: np.ndarray
    v_index: np.ndarray
    unknown: tuple
    missing: tuple
    size: int  # names in the message


class JointMap:
    """The model's joints with coordinates (the floating base excepted), by name."""

    def __init__(self, model: Model):
        self.model = model
        self.names = tuple(name for name in model.joint_names if name != ROOT_JOINT)
        self.q_index = np.array([model.q_index(name) for name in self.names], dtype=np.int64)
        self.v_index = np.array([model.v_index(name) for name in self.names], dtype=np.int64)
        self._by_name = {name: k for k, name in enumerate(self.names)}
        self._ignored = frozenset(model._coupled)  # mimics follow their master
        self._matches: dict[tuple, NameMatch] = {}

    def match(self, names) -> NameMatch:
        """The NameMatch of a message's joint names (cached: a stream repeats them)."""
        key = tuple(names)
        found = self._matches.get(key)
        if found is None:
            if len(set(key)) != len(key):
                raise InvalidInput("invalid", f"joint names repeat: {sorted({n for n in key if key.count(n) > 1})}")
            pairs = [(i, self._by_name[name]) for i, name in enumerate(key) if name in self._by_name]
            seen = {joint for _, joint in pairs}
            found = NameMatch(
                np.array([i for i, _ in pairs], dtype=np.int64),
                self.q_index[[joint for _, joint in pairs]],
                self.v_index[[joint for _, joint in pairs]],
                tuple(name for name in key if name not in self._by_name and name not in self._ignored),
                tuple(name for k, name in enumerate(self.names) if k not in seen),
                len(key),
            )
            if len(self._matches) > 64:
                self._matches.clear()
            self._matches[key] = found
        return found

    def order(self, names) -> np.ndarray:
        """v indices of `names` (all must be joints of the model), e.g. command_joints."""
        unknown = [name for name in names if name not in self._by_name]
        if unknown:
            raise ValueError(f"unknown joints {unknown}; the model's are {list(self.names)}")
        return self.v_index[[self._by_name[name] for name in names]]


def joint_arrays(match: NameMatch, positions, velocities, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(positions, velocities or None) of the model's joints from one message's
    arrays, checked: lengths, every joint present, finite values."""
    if match.missing:
        raise InvalidInput("missing_joint", f"{what} lacks joints {list(match.missing)}")
    positions = np.asarray(positions, dtype=float)
    if positions.shape[0] != match.size:
        raise InvalidInput("invalid", f"{what} has {positions.shape[0]} positions for {match.size} names")
    q = positions[match.message_index]
    v = None
    if len(velocities):
        velocities = np.asarray(velocities, dtype=float)
        if velocities.shape[0] != match.size:
            raise InvalidInput("invalid", f"{what} has {velocities.shape[0]} velocities for {match.size} names")
        v = velocities[match.message_index]
    if not np.all(np.isfinite(q)) or (v is not None and not np.all(np.isfinite(v))):
        raise InvalidInput("invalid", f"{what} has non-finite values")
    return q, v


def base_state(pose, twist) -> tuple[np.ndarray, np.ndarray]:
    """(q_base (7,), v_base (6,)) of geometry_msgs Pose and the child-frame Twist.
    A quaternion within QUATERNION_TOLERANCE of unit length is normalised."""
    p, o = pose.position, pose.orientation
    quaternion = np.array([o.x, o.y, o.z, o.w])
    q = np.array([p.x, p.y, p.z, *quaternion])
    v = np.array([twist.angular.x, twist.angular.y, twist.angular.z, twist.linear.x, twist.linear.y,
                  twist.linear.z])
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
        raise InvalidInput("invalid", "odometry has non-finite values")
    norm = float(np.linalg.norm(quaternion))
    if abs(norm - 1.0) > QUATERNION_TOLERANCE:
        raise InvalidInput("invalid", f"odometry orientation quaternion has norm {norm:.6g}, not 1")
    q[3:7] /= norm
    return q, v


def stamp_seconds(stamp) -> float:
    return stamp.sec + 1e-9 * stamp.nanosec
