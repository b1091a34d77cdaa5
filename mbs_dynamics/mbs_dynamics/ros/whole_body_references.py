"""Whole-body references node: a demonstration motion for the
whole_body_controller node of its namespace (default name
``whole_body_references``), timed by the joint_states stamps (simulated time):

    0 .. circle_start          the CoM held where it was at the first state
    then circle_turns turns    the CoM along a horizontal circle of
                               circle_radius at circle_frequency (through
                               its start, control.references.CircleReference)
    then 1 s                   the CoM moved by lift_com_offset (over the
                               other feet; a z below 0 crouches), rest to
                               rest
    then                       ~/set_contacts without lifted_foot; the foot
                               lifted lift_height and put back (0.5 s each);
                               ~/set_contacts with every contact_frames again
    then 1 s                   the CoM back; 0.5 s later it all starts again

    in   joint_states, odom    the state (the first one: the CoM and the foot's start)
    out  <controller>/com_setpoint, <controller>/frame_setpoint/<lifted_foot>
                               trajectory_msgs/MultiDOFJointTrajectory: the
                               reference's position, velocity and acceleration
         ~/com_reference       geometry_msgs/PointStamped: the CoM reference
                               alone (for the view)
    srv  <controller>/set_contacts (called)

The maths of the motion is the core's (mbs_dynamics.control.references)."""
from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PointStamped, Transform, Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import MultiDOFJointTrajectory, MultiDOFJointTrajectoryPoint

import mbs_dynamics as mbs
from mbs_dynamics.control.references import CircleReference, RestToRest, SwingTrajectory
from mbs_dynamics.ros.conversions import InvalidInput, base_state, set_stamp, set_vector, stamp_seconds
from mbs_dynamics.ros.parameters import EMPTY_STRING_ARRAY, ParameterSpec
from mbs_dynamics.ros.robot_node import RobotNode
from mbs_dynamics.ros.spinning import node_main
from mbs_dynamics.ros.whole_body_controller_node import COMMAND_QOS, STATE_QOS
from mbs_dynamics_interfaces.srv import SetContacts

SHIFT, LIFT, SETTLE = 1.0, 0.5, 0.2  # s: the CoM's move, the foot's way up (and down), a pause


class WholeBodyReferencesNode(RobotNode):
    PARAMETERS = (
        ParameterSpec("controller", "whole_body_controller",
                      "Name of the whole_body_controller node to drive (its topics and service, relative to the "
                      "namespace).", read_only=True),
        ParameterSpec("contact_frames", EMPTY_STRING_ARRAY,
                      "The controller's contacts, all active outside the foot's lift.", read_only=True),
        ParameterSpec("circle_start", 1.0, "Simulated seconds before the circle starts.", read_only=True,
                      bounds=(0.0, 1e6)),
        ParameterSpec("circle_radius", 0.03, "Radius of the CoM's circle (m).", read_only=True, bounds=(0.0, 1.0)),
        ParameterSpec("circle_frequency", 0.5, "Turns a second of the CoM's circle (Hz).", read_only=True,
                      bounds=(1e-3, 10.0)),
        ParameterSpec("circle_turns", 2, "Turns of the circle before the foot is lifted.", read_only=True,
                      bounds=(0, 1000)),
        ParameterSpec("lifted_foot", "", "The contact frame lifted and put back; empty = none.", read_only=True),
        ParameterSpec("lift_height", 0.05, "How high the foot is lifted (m).", read_only=True, bounds=(0.0, 1.0)),
        ParameterSpec("lift_com_offset", [0.0, 0.0],
                      "Where the CoM goes before the lift (x, y from its start, m): over the other feet; or x, y, "
                      "z (z < 0: a crouch, e.g. without lifted_foot).", read_only=True),
        ParameterSpec("reference_rate", 100.0, "References published a second, at most (simulated).",
                      read_only=True, bounds=(1.0, 1e4)),
    )

    def on_robot(self, robot) -> None:
        if not self.model.floating_base:
            raise ValueError("the whole-body references move a CoM: they need a floating base (floating_base: true)")
        self.contact_frames = list(self.parameter("contact_frames"))
        self.foot = self.parameter("lifted_foot")
        if self.foot and self.foot not in self.contact_frames:
            raise ValueError(f"lifted_foot '{self.foot}' is not one of contact_frames {self.contact_frames}")
        offset = list(self.parameter("lift_com_offset"))
        if len(offset) not in (2, 3):
            raise ValueError(f"lift_com_offset must be 2 values (x, y) or 3 (x, y, z), got {offset}")
        self.offset = np.array([*offset, 0.0][:3])
        controller = self.parameter("controller")
        self.com_publisher = self.create_publisher(MultiDOFJointTrajectory, f"{controller}/com_setpoint",
                                                   COMMAND_QOS)
        self.reference_publisher = self.create_publisher(PointStamped, "~/com_reference", COMMAND_QOS)
        self.foot_publisher = (self.create_publisher(MultiDOFJointTrajectory,
                                                    f"{controller}/frame_setpoint/{self.foot}", COMMAND_QOS)
                               if self.foot else None)
        self.contacts = self.create_client(SetContacts, f"{controller}/set_contacts")
        self._odometry = None
        self._start = None  # (t0, CoM, foot position)
        self._last = -np.inf
        self._lifted = False
        self.create_subscription(Odometry, "odom", self._on_odometry, STATE_QOS)
        self.create_subscription(JointState, "joint_states", self._on_state, STATE_QOS)
        self.get_logger().info(f"references for {self.com_publisher.topic_name}"
                               + (f", lifting {self.foot}" if self.foot else ""))

    def _on_odometry(self, message: Odometry) -> None:
        try:
            self._odometry = base_state(message.pose.pose, message.twist.twist)
        except InvalidInput as error:
            self.drop(error.reason, f"odom: {error}")

    def _on_state(self, message: JointState) -> None:
        t = stamp_seconds(message.header.stamp)
        if self._odometry is None or self._last <= t < self._last + 1.0 / self.parameter("reference_rate"):
            return
        self._last = t
        try:
            if self._start is None:
                q, v = self.measured(message, self._odometry)
                foot = mbs.frame_pose(self.model, q, self.foot)[:3, 3] if self.foot else None
                self._start = (t, mbs.centroidal_state(self.model, q, v)[1], foot)
                self.get_logger().info(f"CoM at the start {np.round(self._start[1], 4).tolist()}")
            self._publish(message.header.stamp, t - self._start[0])
        except InvalidInput as error:
            self.drop(error.reason, str(error))

    def _publish(self, stamp, t: float) -> None:
        _, com, foot = self._start
        start = self.parameter("circle_start")
        turns = self.parameter("circle_turns") / self.parameter("circle_frequency")
        lift = 2 * LIFT + 2 * SETTLE if self.foot else 0.0
        period = turns + 2 * SHIFT + lift + SETTLE
        phase = (t - start) % period if t >= start else -1.0
        if phase < turns:
            radius = self.parameter("circle_radius")
            target = CircleReference(com - [radius, 0.0, 0.0], radius, self.parameter("circle_frequency"),
                                     ramp=0.0).at(phase)
        elif phase < turns + SHIFT:
            target = RestToRest(com, com + self.offset, SHIFT).at(phase - turns)
        elif phase < turns + SHIFT + lift:
            target = com + self.offset, np.zeros(3), np.zeros(3)
            self._lift(stamp, phase - turns - SHIFT, foot)
        else:
            target = RestToRest(com + self.offset, com, SHIFT).at(phase - turns - SHIFT - lift)
        self.com_publisher.publish(setpoint_message(stamp, *target))
        point = PointStamped()
        point.header.stamp = stamp
        set_vector(point.point, target[0])
        self.reference_publisher.publish(point)

    def _lift(self, stamp, t: float, foot) -> None:
        """The foot's phase at t s into it: released, up, down, held again."""
        if t < SETTLE + 2 * LIFT and not self._lifted:
            self._lifted = True
            self._call([name for name in self.contact_frames if name != self.foot])
        if SETTLE <= t < SETTLE + 2 * LIFT:
            self.foot_publisher.publish(setpoint_message(stamp, *SwingTrajectory(
                foot, foot, self.parameter("lift_height"), 2 * LIFT, start_time=SETTLE).at(t)))
        if t >= SETTLE + 2 * LIFT and self._lifted:
            self._lifted = False
            self._call(self.contact_frames)

    def _call(self, contacts) -> None:
        if not self.contacts.service_is_ready():
            self.drop("no_controller", f"{self.contacts.srv_name} is not available: contacts not switched")
            return
        future = self.contacts.call_async(SetContacts.Request(contacts=list(contacts)))
        future.add_done_callback(lambda done: None if done.result().success else self.get_logger().warning(
            f"{self.contacts.srv_name}: {done.result().message}"))

    def diagnostics(self) -> tuple[str, dict, bool]:
        return "references", {"dropped": self.dropped()}, self.dropped() > 0


def setpoint_message(stamp, position, velocity, acceleration) -> MultiDOFJointTrajectory:
    """A point's position, velocity and acceleration (world axes) as a whole_body_controller setpoint (identity
    rotation, no angular motion)."""
    return setpoint_trajectory_message(stamp, [0.0], [position], [velocity], [acceleration])


def setpoint_trajectory_message(stamp, times, positions, velocities, accelerations) -> MultiDOFJointTrajectory:
    """Points at `times` (s, time_from_start) with their positions, velocities and accelerations ((k, 3),
    world axes) as a whole_body_controller setpoint trajectory (identity rotation, no angular motion), from
    `stamp` (None: from the controller's next state)."""
    points = []
    for t, position, velocity, acceleration in zip(times, positions, velocities, accelerations, strict=True):
        transform, twist, accel = Transform(), Twist(), Twist()
        set_vector(transform.translation, position)
        transform.rotation.w = 1.0
        set_vector(twist.linear, velocity)
        set_vector(accel.linear, acceleration)
        point = MultiDOFJointTrajectoryPoint(transforms=[transform], velocities=[twist], accelerations=[accel])
        set_stamp(point.time_from_start, t)
        points.append(point)
    message = MultiDOFJointTrajectory(points=points)
    if stamp is not None:
        message.header.stamp = stamp
    return message


main = node_main(WholeBodyReferencesNode, "whole_body_references")

if __name__ == "__main__":
    main()
