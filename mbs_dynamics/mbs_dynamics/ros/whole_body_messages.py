"""The whole_body_controller node's messages: its outputs, the contact
forces the QP chose (mbs_dynamics_interfaces/ContactWrenches, one message per
set of active contacts, built once and refilled each cycle) and the markers
(visualization_msgs/MarkerArray: an arrow per contact force, the CoM and its
reference); and its setpoint inputs (trajectory_msgs/MultiDOFJointTrajectory:
a reference with its velocity and acceleration, as mav_msgs commands one)."""
from __future__ import annotations

import numpy as np
from geometry_msgs.msg import Point
from visualization_msgs.msg import Marker, MarkerArray

import mbs_dynamics as mbs
from mbs_dynamics.ros.conversions import InvalidInput, contact_wrenches, set_vector, vector_values
from mbs_dynamics_interfaces.msg import Contact, ContactWrenches

FORCE_SCALE = 1e-3  # m of arrow per N
SPHERE_DIAMETER = 0.02  # m: the CoM's and its reference's spheres
COM_REFERENCE_RGBA, COM_RGBA, FORCE_RGBA = (0.0, 0.8, 0.0, 0.8), (0.1, 0.3, 1.0, 0.8), (1.0, 0.4, 0.0, 1.0)


class ContactForceMessages:
    """~/contact_forces: the message of each set of contacts (in the order
    of contact_frames), whose numbers each cycle sets."""

    def __init__(self, contact_frames, kind: int, world_frame: str):
        self.contact_frames, self.kind, self.world_frame = list(contact_frames), kind, world_frame
        self._messages = {}  # tuple of contact frames -> its message

    def message(self, stamp, forces: dict) -> ContactWrenches:
        """The message of `forces` ({frame: force (3,) or wrench [n; f] (6,)}, world axes)."""
        frames = tuple(name for name in self.contact_frames if name in forces)
        message = self._messages.get(frames)
        if message is None:
            contacts = [Contact(frame=frame, kind=self.kind) for frame in frames]
            message = ContactWrenches(wrenches=contact_wrenches(contacts, [forces[f] for f in frames]))
            message.header.frame_id = self.world_frame
            self._messages[frames] = message
        else:
            for wrench, frame in zip(message.wrenches, frames, strict=True):
                force = forces[frame]
                set_vector(wrench.wrench.force, force[-3:])
                if force.size == 6:
                    set_vector(wrench.wrench.torque, force[:3])
        message.header.stamp = stamp
        return message


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

    for k, (frame, force) in enumerate(forces.items()):
        origin = mbs.frame_pose(model, q, frame)[:3, 3]
        arrow = marker("contact_forces", k, Marker.ARROW, FORCE_RGBA)
        set_vector(arrow.scale, (0.01, 0.02, 0.02))
        arrow.points = [point(origin), point(origin + FORCE_SCALE * np.asarray(force)[-3:])]
    for namespace, position, rgba in (("com_reference", com_reference, COM_REFERENCE_RGBA), ("com", com, COM_RGBA)):
        if position is not None:
            sphere = marker(namespace, 0, Marker.SPHERE, rgba)
            set_vector(sphere.pose.position, position)
            set_vector(sphere.scale, (SPHERE_DIAMETER,) * 3)
    return MarkerArray(markers=markers)


def point(values) -> Point:
    message = Point()
    set_vector(message, values)
    return message


def setpoint(message) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(position (3,), rotation quaternion (x, y, z, w), twist [ω; ṗ] (6,),
    acceleration [ω̇; p̈] (6,)) of a trajectory_msgs/MultiDOFJointTrajectory
    setpoint, all in its header's frame: its first point's transforms[0],
    velocities[0] and accelerations[0] (either of the last two absent: zero);
    InvalidInput 'invalid_setpoint' without a point or a transform."""
    if not message.points or not message.points[0].transforms:
        raise InvalidInput("invalid_setpoint", "a setpoint needs a point with a transform (points[0].transforms[0])")
    point = message.points[0]
    transform = point.transforms[0]
    o = transform.rotation
    derivatives = [np.zeros(6) if not values else np.array([*vector_values(values[0].angular),
                                                           *vector_values(values[0].linear)])
                   for values in (point.velocities, point.accelerations)]
    return np.array(vector_values(transform.translation)), np.array([o.x, o.y, o.z, o.w]), *derivatives
