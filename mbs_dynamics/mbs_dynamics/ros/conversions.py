"""Messages to the core's arrays and back, by joint name: what every node
needs and no dynamics. Bad input raises InvalidInput with a message that says
what is wrong; the nodes count it and go on.

Conventions (DESIGN.md §2): q = [base position, base quaternion (x y z w),
joint positions in model order], v = [base twist w; v in the base frame,
joint velocities]. nav_msgs/Odometry gives the pose in its frame_id and the
twist in its child frame: exactly the base's body twist.
"""
from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mbs_dynamics import Model
from mbs_dynamics.inputs import QUATERNION_TOLERANCE
from mbs_dynamics.multibody.configuration import floating_base_state
from mbs_dynamics.simulation.scene import robot_joints

# The most joint names one message or request may carry, at least: more is
# refused at once (a robot has tens; a joint_states of several robots,
# hundreds). A model of many joints raises it to NAMES_PER_JOINT names per
# URDF joint (JointMap.max_names): a joint_states of a few such robots.
MAX_JOINT_NAMES = 4096
NAMES_PER_JOINT = 4


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
        self.names = robot_joints(model)
        self.q_index = np.array([model.q_index(name) for name in self.names], dtype=np.int64)
        self.v_index = np.array([model.v_index(name) for name in self.names], dtype=np.int64)
        self._by_name = {name: k for k, name in enumerate(self.names)}
        # the most names a message may carry: MAX_JOINT_NAMES, or more for a model of many joints
        self.max_names = max(MAX_JOINT_NAMES, NAMES_PER_JOINT * len(model.description.joints))
        self.neutral = model.neutral_configuration()
        limit = model.effort_limit  # a URDF effort of 0 means none given
        self.effort_limit = np.where(np.isfinite(limit) & (limit > 0), limit, np.inf)  # (nv,): inf = none
        self._ignored = frozenset(model._coupled)  # mimics follow their master
        self._matches: dict[tuple, NameMatch] = {}

    def match(self, names) -> NameMatch:
        """The NameMatch of a message's joint names (cached: a stream repeats
        them); O(len(names)), at most max_names."""
        if len(names) > self.max_names:
            raise InvalidInput("too_many_names", f"{len(names)} joint names: at most {self.max_names} are accepted "
                                                 f"(model '{self.model.name}' has {len(self.names)} joints)")
        key = tuple(names)
        found = self._matches.get(key)
        if found is None:
            if len(set(key)) != len(key):
                repeated = sorted(name for name, count in Counter(key).items() if count > 1)
                raise InvalidInput("invalid", f"joint names repeat: {listed(repeated)}")
            pairs = [(i, self._by_name[name]) for i, name in enumerate(key) if name in self._by_name]
            seen = {joint for _, joint in pairs}
            found = NameMatch(
                np.array([i for i, _ in pairs], dtype=np.int64),
                self.q_index[[joint for _, joint in pairs]],
                self.v_index[[joint for _, joint in pairs]],
                tuple(name for name in key if name not in self._by_name and name not in self._ignored)[:20],
                tuple(name for k, name in enumerate(self.names) if k not in seen),
                len(key),
            )
            if len(self._matches) > 64:
                self._matches.clear()
            self._matches[key] = found
        return found

    def order(self, names) -> np.ndarray:
        """v indices of `names` (each a joint of the model, once), e.g.
        command_joints; ValueError naming the unknown or repeated ones."""
        unknown = [name for name in names if name not in self._by_name]
        if unknown:
            raise ValueError(f"unknown joints {listed(unknown)}; the model's are {listed(self.names, 50)}")
        repeated = sorted(name for name, count in Counter(names).items() if count > 1)
        if repeated:
            raise ValueError(f"joints listed twice: {listed(repeated)} (each joint once: the values of a joint listed "
                             "twice would overwrite each other)")
        return self.v_index[[self._by_name[name] for name in names]]

    def command_order(self, command_joints) -> np.ndarray:
        """v indices of the parameter command_joints (empty: the model's order);
        ValueError naming the parameter."""
        try:
            return self.order(list(command_joints) or list(self.names))
        except ValueError as error:
            raise ValueError(f"command_joints: {error}") from None


def listed(names, most: int = 10, length: int = 80) -> str:
    """Names for a message, bounded: the first `most` (each cut to `length`
    characters) as a list, and how many more."""
    names = list(names)
    shown = [name if len(name) <= length else f"{name[:length]}..." for name in names[:most]]
    return f"{shown}" + (f" and {len(names) - most} more" if len(names) > most else "")


def named_values(match: NameMatch, values, what: str, names=None) -> np.ndarray | None:
    """One message array given in name order (positions, efforts, ...) as the
    values of the model's joints in match order; None when the array is empty.
    Raises InvalidInput on a wrong length or a non-finite value (naming its
    joint when given the message's `names`, else its index)."""
    if not len(values):
        return None
    values = np.asarray(values, dtype=float)
    if values.shape[0] != match.size:
        raise InvalidInput("invalid", f"{what} has {values.shape[0]} values for {match.size} joint names")
    if not np.isfinite(values).all():
        index = int(np.flatnonzero(~np.isfinite(values))[0])
        raise InvalidInput("invalid", f"{what} has a non-finite value ({values[index]}) for "
                                      + (f"joint '{names[index]}'" if names is not None else f"joint index {index}"))
    return values[match.message_index]


def interface_values(names, values, interfaces, what: str) -> dict[str, float]:
    """{joint: value} of one array of a joint command message whose `names`
    are all its joints: the array is aligned with the names, or, as
    topic_based_ros2_control's TopicBasedSystem fills it, holds only the
    joints that have its command interface, in name order: the first of the
    `interfaces` (sets of joint names) whose members among `names` are as many
    as the values. Empty values: {}. InvalidInput when neither fits or a
    value is not finite."""
    if len(values) == 0:
        return {}
    values = np.asarray(values, dtype=float)
    if values.size == len(names):
        joints = list(names)
    else:
        joints = next(([name for name in names if name in joints] for joints in interfaces
                       if sum(name in joints for name in names) == values.size), None)
        if joints is None:
            raise InvalidInput("invalid", f"{what} has {values.size} values for {len(names)} names, and as many "
                                          "joints of none of its command interfaces")
    if not np.all(np.isfinite(values)):
        index = int(np.flatnonzero(~np.isfinite(values))[0])
        raise InvalidInput("invalid", f"{what} of '{joints[index]}' is {values[index]}: not finite")
    return dict(zip(joints, values.tolist(), strict=True))


def point_values(match: NameMatch, points, field: str, what: str) -> np.ndarray | None:
    """One field (positions, velocities, ...) of every trajectory point as a
    (points, joints) array of the model's joints in match order; None when
    the field is empty in every point. A point may leave velocities or
    accelerations empty (zero) when others give them. Raises InvalidInput on a
    wrong length or a non-finite value, naming the point."""
    rows = [getattr(point, field) for point in points]
    lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
    required = field == "positions"
    wrong = np.flatnonzero((lengths != match.size) & ((lengths != 0) | required))
    if wrong.size:
        k = int(wrong[0])
        raise InvalidInput("invalid", f"{what} point {k} has {lengths[k]} {field} for {match.size} joint names")
    if not lengths.any():
        return None
    if lengths.all():  # one copy of the points' buffers (a message's float64[] are array('d'))
        values = np.frombuffer(b"".join(row if isinstance(row, array) else np.asarray(row, dtype=float).tobytes()
                                        for row in rows)).reshape(len(rows), match.size)
    else:
        values = np.zeros((len(rows), match.size))
        for k in np.flatnonzero(lengths):
            values[k] = rows[k]
    finite = np.isfinite(values)
    if not finite.all():
        k, j = (int(x[0]) for x in np.nonzero(~finite))
        raise InvalidInput("invalid", f"{what} point {k} {field} has a non-finite value ({values[k, j]}) for "
                                      f"joint index {j}")
    return values[:, match.message_index]


def joint_arrays(match: NameMatch, positions, velocities, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(positions, velocities or None) of the model's joints from one message's
    arrays, checked: lengths, every joint present, finite values."""
    if match.missing:
        raise InvalidInput("missing_joint", f"{what} lacks joints {list(match.missing)}")
    q = named_values(match, positions, f"{what} position")
    if q is None:
        raise InvalidInput("invalid", f"{what} has no positions")
    return q, named_values(match, velocities, f"{what} velocity")


def measured_state(joints: JointMap, match: NameMatch, message, base=None,
                   what: str = "joint_states") -> tuple[np.ndarray, np.ndarray]:
    """(q, v) of a sensor_msgs/JointState whose names gave `match` (empty
    velocities = zero) and, for a floating base, base = (q_base (7,), v_base (6,)):
    the root joint comes first in q and v."""
    positions, velocities = joint_arrays(match, message.position, message.velocity, what)
    q, v = joints.neutral.copy(), np.zeros(joints.model.nv)
    q[match.q_index] = positions
    if velocities is not None:
        v[match.v_index] = velocities
    if base is not None:
        q[:7], v[:6] = base
    return q, v


def base_state(pose, twist, tolerance: float = QUATERNION_TOLERANCE,
               what: str = "odometry") -> tuple[np.ndarray, np.ndarray]:
    """(q_base (7,), v_base (6,)) of geometry_msgs Pose and the child-frame Twist
    (configuration.floating_base_state): InvalidInput for a quaternion further
    than `tolerance` from unit length or a non-finite value."""
    p, o = pose.position, pose.orientation
    try:
        return floating_base_state((p.x, p.y, p.z), (o.x, o.y, o.z, o.w), vector_values(twist.linear),
                                   vector_values(twist.angular), tolerance, what)
    except ValueError as error:
        raise InvalidInput("invalid", str(error)) from None


def stamp_seconds(stamp) -> float:
    return stamp.sec + 1e-9 * stamp.nanosec


def set_stamp(stamp, seconds: float) -> None:
    """builtin_interfaces/Time `stamp` set to `seconds` (to the nearest ns)."""
    stamp.sec, stamp.nanosec = divmod(int(round(seconds * 1e9)), 1_000_000_000)


def strict_match(joints: JointMap, names, what: str) -> NameMatch:
    """The NameMatch of a request's joint names, which must name every joint of
    the model and nothing else (the model's mimic joints are accepted and
    ignored: they follow their master)."""
    match = joints.match(names)
    if match.unknown:
        raise InvalidInput("unknown_joint", f"{what} names joints model '{joints.model.name}' does not have: "
                                            f"{list(match.unknown)}; its joints are {list(joints.names)}")
    if match.missing:
        raise InvalidInput("missing_joint", f"{what} lacks joints {list(match.missing)}")
    return match


def request_state(joints: JointMap, joint_state, base_states, tolerance: float) -> tuple[np.ndarray, np.ndarray,
                                                                                          NameMatch]:
    """(q, v, match) of a service request's sensor_msgs/JointState (empty
    velocities = zero) and BaseState[<=1] (required for a floating base,
    refused for a fixed one)."""
    model = joints.model
    match = strict_match(joints, joint_state.name, "joint_state")
    base = None
    if model.floating_base:
        if len(base_states) != 1:
            raise InvalidInput("invalid", f"model '{model.name}' has a floating base: base_state (pose and body "
                                          "twist) is required")
        base = base_state(base_states[0].pose, base_states[0].twist, tolerance, "base_state")
    elif len(base_states):
        raise InvalidInput("invalid", f"model '{model.name}' has a fixed base: base_state must be empty")
    q, v = measured_state(joints, match, joint_state, base, "joint_state")
    return q, v, match


def contacts_from_messages(model: Model, messages) -> tuple[list, np.ndarray, np.ndarray]:
    """(core contacts, friction coefficients (k,), unit normals (k, 3)) of
    mbs_dynamics_interfaces/Contact messages; a zero normal means (0, 0, 1)."""
    from mbs_dynamics import FrameContact, PointContact
    from mbs_dynamics_interfaces.msg import Contact

    contacts, friction, normals = [], np.empty(len(messages)), np.empty((len(messages), 3))
    for k, message in enumerate(messages):
        what = f"contacts[{k}]"
        if message.frame not in model.frames:
            raise InvalidInput("unknown_frame", f"{what}: model '{model.name}' has no frame '{message.frame}'")
        point = (message.point.x, message.point.y, message.point.z)
        normal = np.array([message.normal.x, message.normal.y, message.normal.z])
        if not (np.all(np.isfinite(point)) and np.all(np.isfinite(normal))
                and np.isfinite(message.friction_coefficient)):
            raise InvalidInput("invalid", f"{what} ({message.frame}) has non-finite values")
        if message.friction_coefficient < 0:
            raise InvalidInput("invalid", f"{what} ({message.frame}) has a negative friction coefficient "
                                          f"{message.friction_coefficient}")
        if message.kind == Contact.POINT:
            contacts.append(PointContact(message.frame, point))
        elif message.kind == Contact.FRAME:
            contacts.append(FrameContact(message.frame, point))
        else:
            raise InvalidInput("invalid", f"{what} ({message.frame}) has kind {message.kind}: use POINT (0) or "
                                          "FRAME (1)")
        length = float(np.linalg.norm(normal))
        normals[k] = normal / length if length > 0 else (0.0, 0.0, 1.0)
        friction[k] = message.friction_coefficient
    return contacts, friction, normals


def contact_wrenches(messages, forces) -> list:
    """mbs_dynamics_interfaces/ContactWrench per contact: a force (3,) or a
    wrench [n; f] (6,) of the core, world axes."""
    from mbs_dynamics_interfaces.msg import ContactWrench

    wrenches = []
    for message, force in zip(messages, forces, strict=True):
        wrench = ContactWrench(frame=message.frame, point=message.point, kind=message.kind)
        torque = force[:3] if force.size == 6 else (0.0, 0.0, 0.0)
        set_vector(wrench.wrench.force, force[-3:])
        set_vector(wrench.wrench.torque, torque)
        wrenches.append(wrench)
    return wrenches


@lru_cache(maxsize=256)
def _float_fields(message_type) -> tuple:
    """The fields of a ROS message type that can hold a float: (name, kind)
    with kind 'scalar', 'array', 'message' or 'messages' (a sequence of them)."""
    fields = []
    for name, kind in message_type.get_fields_and_field_types().items():
        if kind in ("double", "float"):
            fields.append((name, "scalar"))
        elif kind.startswith(("sequence<double", "sequence<float", "double[", "float[")):
            fields.append((name, "array"))
        elif "/" in kind:  # another message, or a sequence of them
            fields.append((name, "messages" if kind.startswith("sequence<") or "[" in kind else "message"))
    return tuple(fields)


def first_nonfinite_field(message, prefix: str = "") -> str | None:
    """The name of the first field of a ROS message (nested messages and
    sequences included) that holds a NaN or an infinity; None when all are finite."""
    for name, kind in _float_fields(type(message)):
        value = getattr(message, name)
        if kind == "scalar":
            bad = not math.isfinite(value)
        elif kind == "array":
            bad = len(value) > 0 and not np.isfinite(np.asarray(value, dtype=float)).all()
        elif kind == "message":
            found = first_nonfinite_field(value, f"{prefix}{name}.")
            if found:
                return found
            continue
        else:
            for k, item in enumerate(value):
                found = first_nonfinite_field(item, f"{prefix}{name}[{k}].")
                if found:
                    return found
            continue
        if bad:
            return f"{prefix}{name}"
    return None


def set_vector(vector, values) -> None:
    """A geometry_msgs Point or Vector3 from 3 numbers."""
    vector.x, vector.y, vector.z = float(values[0]), float(values[1]), float(values[2])


def vector_values(vector) -> tuple[float, float, float]:
    return vector.x, vector.y, vector.z
