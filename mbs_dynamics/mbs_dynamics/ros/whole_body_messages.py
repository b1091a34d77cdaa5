"""The whole_body_controller node's messages: its outputs, the efforts
(sensor_msgs/JointState), the contact forces the QP chose
(mbs_dynamics_interfaces/ContactWrenches) and the markers
(visualization_msgs/MarkerArray: an arrow per contact force, the CoM and its
reference), each published as its serialized bytes (ros.serialized: made
once per layout, such as a set of active contacts, and only the numbers and
stamps written each cycle: rclpy's conversion of the message objects at
each publish() took 60 us for Solo-12's efforts, 45 us for its forces and
~1 ms for its markers); and its setpoint inputs
(trajectory_msgs/MultiDOFJointTrajectory: one point, a reference with its
velocity and acceleration, as mav_msgs commands one; several, a trajectory
the controller follows at each cycle by the input stamps, so that a move
does not depend on when its sender runs)."""
from __future__ import annotations

from array import array

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, PointStamped, PoseStamped, QuaternionStamped
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import MultiDOFJointTrajectory
from visualization_msgs.msg import Marker, MarkerArray

import mbs_dynamics as mbs
from mbs_dynamics.control.references import Waypoints
from mbs_dynamics.ros.conversions import InvalidInput, contact_wrenches, set_vector, stamp_seconds, vector_values
from mbs_dynamics.ros.serialized import SerializedMessage
from mbs_dynamics_interfaces.msg import Contact, ContactWrenches

FORCE_SCALE = 1e-3  # m of arrow per N
SPHERE_DIAMETER = 0.02  # m: the CoM's and its reference's spheres
COM_REFERENCE_RGBA, COM_RGBA, FORCE_RGBA = (0.0, 0.8, 0.0, 0.8), (0.1, 0.3, 1.0, 0.8), (1.0, 0.4, 0.0, 1.0)


# The float64 fields of the inputs, read from their bytes (SerializedStream)
JOINT_STATES_FIELDS = ("position", "velocity", "effort")
ODOMETRY_FIELDS = ("pose.pose.position", "pose.pose.orientation", "pose.covariance", "twist.twist.linear",
                   "twist.twist.angular", "twist.covariance")


class WholeBodyOutputs:
    """The node's publishers and their messages' bytes: the efforts at each
    cycle, then, after them, the contact forces and the markers at their
    rates (most a second by the input stamps; forces: 0 = each cycle,
    markers: 0 = none)."""

    def __init__(self, node, model, joint_names, contact_frames, kind: int, world_frame: str, efforts_topic: str,
                 qos):
        self.efforts_publisher = node.create_publisher(JointState, efforts_topic, qos)
        self.forces_publisher = node.create_publisher(ContactWrenches, "~/contact_forces", qos)
        self.markers_publisher = node.create_publisher(MarkerArray, "~/markers", qos)
        self._efforts = efforts_message(joint_names)
        self._forces = ContactForceMessages(contact_frames, kind, world_frame)
        self._markers = MarkerMessages(model, world_frame)
        self._last_forces = self._last_markers = -np.inf

    def prepare(self, q, result) -> None:
        """The messages of a cycle's ControlResult at q made, with and without a CoM reference, unpublished:
        the first cycle's took 10-350 ms (the kernels the markers call loaded, the messages' layouts found)."""
        for reference in (result.com, None):
            self._forces.data(Time(), result.forces)
            self._markers.data(q, Time(), result.forces, result.com, reference)

    def efforts(self, stamp, tau) -> None:
        efforts = self._efforts
        efforts.set_stamp(stamp)
        efforts.values["effort"][:] = tau
        self.efforts_publisher.publish(efforts.data())

    def monitoring(self, stamp, seconds: float, q, forces: dict, com, com_reference, forces_rate: float,
                   markers_rate: float) -> None:
        """~/contact_forces and ~/markers of the cycle of the input stamped `stamp` (`seconds`), when due."""
        if forces_rate <= 0 or not self._last_forces <= seconds < self._last_forces + (1.0 - 1e-6) / forces_rate:
            self._last_forces = seconds
            self.forces_publisher.publish(self._forces.data(stamp, forces))
        if markers_rate > 0 and not self._last_markers <= seconds < self._last_markers + 1.0 / markers_rate:
            self._last_markers = seconds
            self.markers_publisher.publish(self._markers.data(q, stamp, forces, com, com_reference))


class WholeBodyReferenceInputs:
    """The node's reference topics (a mixin of WholeBodyControllerNode):
    each message in the world frame given to its task (_set_com,
    orientation_task, _set_frame), else refused (dropped, said). A setpoint
    of several points is a trajectory (Waypoints at the points'
    time_from_start from its header's stamp, or from the next cycle's state
    if zero) that follow_setpoints gives its task at each cycle until its
    last point; a newer reference of the task replaces it."""

    def subscribe_references(self, qos) -> None:
        self.setpoint_trajectories = {}  # topic -> [Waypoints, start (s, input stamps) or None, apply(t), reason]
        if self.model.floating_base:
            self.create_subscription(PointStamped, "~/com_reference", self._on_com_reference, qos)
            self.create_subscription(MultiDOFJointTrajectory, "~/com_setpoint", self._on_com_setpoint, qos)
            self.create_subscription(QuaternionStamped, "~/base_orientation_reference",
                                     self._on_orientation_reference, qos)
        for frame in self.frame_tasks:
            self.create_subscription(PoseStamped, f"~/frame_reference/{frame}",
                                     lambda message, frame=frame: self._on_frame_reference(frame, message), qos)
            self.create_subscription(MultiDOFJointTrajectory, f"~/frame_setpoint/{frame}",
                                     lambda message, frame=frame: self._on_frame_setpoint(frame, message), qos)

    def _reference_frame(self, message, topic: str) -> None:
        frame = message.header.frame_id
        world = self._world_frame
        if frame not in ("", world):
            raise InvalidInput("wrong_frame", f"frame_id '{frame[:80]}' is not the world frame '{world}' "
                                              "(world_frame): references are given in it")

    def _reference(self, topic: str, message, reason: str, apply) -> None:
        """apply() a reference message of `topic` in the world frame; refused (dropped for `reason` or the
        InvalidInput's, with the controller's reason: a NaN, a bad quaternion) otherwise."""
        try:
            self._reference_frame(message, topic)
            apply()
            self.counts["references"] += 1
        except ValueError as error:  # InvalidInput, or the controller's refusal (NaN)
            self.drop(getattr(error, "reason", reason), f"{topic}: {error}")
        else:
            self.setpoint_trajectories.pop(self._setpoint_topic(topic), None)

    @staticmethod
    def _setpoint_topic(topic: str) -> str:
        return topic.replace("_reference", "_setpoint")

    def _follow(self, topic: str, message, reason: str, apply_point, apply_at) -> None:
        """A setpoint message of `topic`: one point applied at once (apply_point(position, rotation, twist,
        acceleration)), several kept as a trajectory whose apply_at(waypoints, t) each cycle calls (its first
        point at once: the trajectory holds it until its first time)."""
        if len(message.points) <= 1:
            self._reference(topic, message, reason, lambda: apply_point(*setpoint(message)))
            return
        try:
            self._reference_frame(message, topic)
            waypoints = setpoint_waypoints(message)
            apply_at(waypoints, -np.inf)  # its first point: refused now if the task cannot take it
        except ValueError as error:
            self.drop(getattr(error, "reason", reason), f"{topic}: {error}")
            return
        start = stamp_seconds(message.header.stamp) if message.header.stamp.sec or message.header.stamp.nanosec \
            else None
        self.counts["references"] += 1
        self.setpoint_trajectories[topic] = [waypoints, start, lambda t: apply_at(waypoints, t), reason]

    def follow_setpoints(self, seconds: float) -> None:
        """Each setpoint trajectory's reference at the input stamp `seconds` given to its task; one ended (its
        last point given) or refused (an unreachable frame, a frame now in contact) is dropped."""
        for topic, entry in list(self.setpoint_trajectories.items()):
            waypoints, start, apply_at, reason = entry
            if start is None:
                start = entry[1] = seconds
            try:
                apply_at(seconds - start)
            except ValueError as error:
                del self.setpoint_trajectories[topic]
                self.drop(getattr(error, "reason", reason), f"{topic}: {error}: its trajectory is dropped")
                continue
            if seconds - start >= waypoints.times[-1]:
                del self.setpoint_trajectories[topic]

    def _on_com_reference(self, message: PointStamped) -> None:
        self._reference("~/com_reference", message, "invalid_com_reference",
                        lambda: self._set_com("~/com_reference", vector_values(message.point), 0.0, 0.0))

    def _on_com_setpoint(self, message: MultiDOFJointTrajectory) -> None:
        self._follow("~/com_setpoint", message, "invalid_com_reference",
                     lambda position, _, twist, acceleration: self._set_com(
                         "~/com_setpoint", position, twist[3:], acceleration[3:]),
                     lambda waypoints, t: self._set_com("~/com_setpoint", *waypoints.at(t)))

    def _on_orientation_reference(self, message: QuaternionStamped) -> None:
        o = message.quaternion
        self._reference("~/base_orientation_reference", message, "invalid_orientation_reference",
                        lambda: self.orientation_task.set_reference((o.x, o.y, o.z, o.w)))

    def _on_frame_reference(self, frame: str, message: PoseStamped) -> None:
        p, o = message.pose.position, message.pose.orientation
        self._reference(f"~/frame_reference/{frame}", message, "invalid_frame_reference", lambda: self._set_frame(
            frame, vector_values(p), (o.x, o.y, o.z, o.w), np.zeros(6), np.zeros(6)))

    def _on_frame_setpoint(self, frame: str, message: MultiDOFJointTrajectory) -> None:
        def apply_at(waypoints, t):
            (position, velocity, acceleration), (rotation, angular_velocity, angular_acceleration) = \
                waypoints.at(t), waypoints.rotation_at(t)
            self._set_frame(frame, position, rotation, np.concatenate((angular_velocity, velocity)),
                            np.concatenate((angular_acceleration, acceleration)))

        self._follow(f"~/frame_setpoint/{frame}", message, "invalid_frame_reference",
                     lambda *pose: self._set_frame(frame, *pose), apply_at)


def efforts_message(joint_names) -> SerializedMessage:
    """The efforts' bytes: a JointState of `joint_names` whose 'effort' values each cycle sets."""
    return SerializedMessage(JointState(name=list(joint_names), effort=array("d", bytes(8 * len(joint_names)))),
                             ["effort"])


class ContactForceMessages:
    """~/contact_forces: the bytes of the message of each set of contacts
    (in the order of contact_frames), whose numbers each cycle sets."""

    def __init__(self, contact_frames, kind: int, world_frame: str):
        self.contact_frames, self.kind, self.world_frame = list(contact_frames), kind, world_frame
        self._messages = {}  # tuple of contact frames -> (its SerializedMessage, [(frame, force, torque values)])

    def data(self, stamp, forces: dict) -> bytes:
        """The bytes of the message of `forces` ({frame: force (3,) or wrench [n; f] (6,)}, world axes)."""
        frames = tuple(name for name in self.contact_frames if name in forces)
        entry = self._messages.get(frames)
        if entry is None:
            entry = self._messages[frames] = self._message(frames, forces)
        serialized, places = entry
        for frame, force, torque in places:
            value = forces[frame]
            force[:] = value[-3:]
            if value.size == 6:
                torque[:] = value[:3]
        serialized.set_stamp(stamp)
        return serialized.data()

    def _message(self, frames: tuple, forces: dict) -> tuple:
        contacts = [Contact(frame=frame, kind=self.kind) for frame in frames]
        message = ContactWrenches(wrenches=contact_wrenches(contacts, [forces[f] for f in frames]))
        message.header.frame_id = self.world_frame
        fields = [f"wrenches.{k}.wrench.{part}" for k in range(len(frames)) for part in ("force", "torque")]
        serialized = SerializedMessage(message, fields)
        return serialized, [(frame, serialized.values[fields[2 * k]], serialized.values[fields[2 * k + 1]])
                            for k, frame in enumerate(frames)]


class MarkerMessages:
    """~/markers (whole_body_markers): the bytes of the message of each set
    of contact forces, with or without the CoM and its reference, whose
    points and stamps each publication sets."""

    def __init__(self, model, world_frame: str):
        self.model, self.world_frame = model, world_frame
        self._messages = {}  # (contact frames, CoM?, reference?) -> (its SerializedMessage, [point values])

    def data(self, q, stamp, forces: dict, com=None, com_reference=None) -> bytes:
        """The bytes of whole_body_markers(model, q, stamp, world_frame, forces, com, com_reference)."""
        key = (tuple(forces), com is not None, com_reference is not None)
        entry = self._messages.get(key)
        if entry is None:
            message = whole_body_markers(self.model, q, stamp, self.world_frame, forces, com, com_reference)
            fields, stamps = [], []
            for k, marker in enumerate(message.markers[1:], start=1):
                marker.header.stamp = Time()  # each its own (whole_body_markers shares `stamp`)
                stamps.append(f"markers.{k}.header.stamp")
                fields += ([f"markers.{k}.points.0", f"markers.{k}.points.1"] if marker.type == Marker.ARROW
                           else [f"markers.{k}.pose.position"])
            serialized = SerializedMessage(message, fields, stamps)
            entry = self._messages[key] = (serialized, [serialized.values[field] for field in fields])
        serialized, places = entry
        for place, values in zip(places, marker_points(self.model, q, forces, com, com_reference), strict=True):
            place[:] = values
        serialized.set_stamp(stamp)
        return serialized.data()


def marker_points(model, q, forces: dict, com=None, com_reference=None) -> list:
    """The points of whole_body_markers, in its order: each force's arrow
    from its frame's origin at q (FORCE_SCALE m per N), then the CoM
    reference and the CoM where given."""
    points = []
    for pose, force in zip(mbs.frame_poses(model, q, list(forces)), forces.values(), strict=True):
        origin = pose[:3, 3]
        points += [origin, origin + FORCE_SCALE * np.asarray(force)[-3:]]
    return points + [np.asarray(position, dtype=float) for position in (com_reference, com) if position is not None]


def whole_body_markers(model, q, stamp, world_frame: str, forces: dict, com=None, com_reference=None) -> MarkerArray:
    """An arrow per contact force (FORCE_SCALE m per N) from its frame's
    origin at q, the CoM reference (green) and the CoM (blue) as spheres,
    after a DELETEALL."""
    markers = [Marker(action=Marker.DELETEALL)]

    def marker(namespace, k, kind, rgba):
        m = Marker(ns=namespace, id=k, type=kind, action=Marker.ADD)
        m.header.stamp, m.header.frame_id = stamp, world_frame
        m.pose.orientation.w = 1.0
        m.color.r, m.color.g, m.color.b, m.color.a = rgba
        markers.append(m)
        return m

    points = iter(marker_points(model, q, forces, com, com_reference))
    for k in range(len(forces)):
        arrow = marker("contact_forces", k, Marker.ARROW, FORCE_RGBA)
        set_vector(arrow.scale, (0.01, 0.02, 0.02))
        arrow.points = [point(next(points)), point(next(points))]
    for namespace, position, rgba in (("com_reference", com_reference, COM_REFERENCE_RGBA), ("com", com, COM_RGBA)):
        if position is not None:
            sphere = marker(namespace, 0, Marker.SPHERE, rgba)
            set_vector(sphere.pose.position, next(points))
            set_vector(sphere.scale, (SPHERE_DIAMETER,) * 3)
    return MarkerArray(markers=markers)


def point(values) -> Point:
    message = Point()
    set_vector(message, values)
    return message


def setpoint(message) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(position (3,), rotation quaternion (x, y, z, w), twist [ω; ṗ] (6,),
    acceleration [ω̇; p̈] (6,)) of a trajectory_msgs/MultiDOFJointTrajectory
    setpoint, all in its header's frame: its first point's (trajectory_point);
    InvalidInput 'invalid_setpoint' without a point or a transform."""
    if not message.points or not message.points[0].transforms:
        raise InvalidInput("invalid_setpoint", "a setpoint needs a point with a transform (points[0].transforms[0])")
    return trajectory_point(message.points[0])


def trajectory_point(point) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """setpoint's values of a MultiDOFJointTrajectoryPoint with a transform:
    its transforms[0], velocities[0] and accelerations[0] (either of the last
    two absent: zero)."""
    transform = point.transforms[0]
    o = transform.rotation
    derivatives = [np.zeros(6) if not values else np.array([*vector_values(values[0].angular),
                                                           *vector_values(values[0].linear)])
                   for values in (point.velocities, point.accelerations)]
    return np.array(vector_values(transform.translation)), np.array([o.x, o.y, o.z, o.w]), *derivatives


def setpoint_waypoints(message) -> Waypoints:
    """The Waypoints of a MultiDOFJointTrajectory's points (each's
    transforms[0], velocities[0], accelerations[0] as setpoint reads them) at
    their time_from_start; InvalidInput 'invalid_setpoint' for a point without
    a transform or times not increasing, ValueError for a NaN or a bad
    quaternion (Waypoints')."""
    points = []
    for k, point in enumerate(message.points):
        if not point.transforms:
            raise InvalidInput("invalid_setpoint", f"a setpoint trajectory's point {k} has no transform")
        points.append(trajectory_point(point))
    times = [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in message.points]
    if any(b <= a for a, b in zip(times, times[1:])):
        raise InvalidInput("invalid_setpoint", "a setpoint trajectory's time_from_start must increase from point to "
                                               f"point, got {np.round(times, 6).tolist()[:10]}")
    position, rotation, twist, acceleration = (np.array(values) for values in zip(*points))
    return Waypoints(times, position, twist[:, 3:], acceleration[:, 3:], rotation, twist[:, :3], acceleration[:, :3])
