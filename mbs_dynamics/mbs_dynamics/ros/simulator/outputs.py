"""What the simulator publishes, as parts with one interface: an Output has
a rate (Hz, simulated time) and publishes from a Snapshot of the simulation,
taken once for all the outputs due at a step. The stepping thread loops over
the node's list of outputs; a new sensor is one class here and one line in
make_outputs.

    joint_states, /clock      JointStates (publish_rate; also while paused)
    odom, tf                  Odometry (floating base)
    ~/contact_wrenches        ContactWrenchOutput
    imu/<link>                ImuSensor, one per imu_links (imu_rate)
    ft/<joint>                ForceTorqueSensor, one per ft_joints (ft_rate)
    objects/<name>/odom, tf,  ObjectOutputs: each free object's root link (world
    objects                   pose, body twist; child frame <name>/<link>), and
                              their visuals as markers (ros/markers.py)
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from geometry_msgs.msg import TransformStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from visualization_msgs.msg import MarkerArray

from mbs_dynamics.multibody.model import ROOT_JOINT, Model
from mbs_dynamics.ros.conversions import contact_wrenches, set_stamp, set_vector
from mbs_dynamics.ros.markers import object_markers, set_pose
from mbs_dynamics.simulation import sensors
from mbs_dynamics.simulation.placement import body_links
from mbs_dynamics.simulation.objects import WorldObject
from mbs_dynamics.simulation.simulation import World
from mbs_dynamics.view.visuals import link_visuals, visual_poses
from mbs_dynamics_interfaces.msg import Contact, ContactWrench, ContactWrenches

try:  # a full ROS 2 install has it; the pip route has no wheel of it
    from tf2_msgs.msg import TFMessage
except ImportError:
    TFMessage = None

SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)


def topic_token(name: str) -> str:
    """A link or joint name as a topic name token (letters, digits, underscores)."""
    token = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return token if token and not token[0].isdigit() else f"_{token}"


@dataclass
class Snapshot:
    """The simulation at one instant, copied under its lock: what every output
    reads. acceleration and body_wrenches (contact wrenches on each body, in
    its frame) are those of the last step (zero and None before the first)."""

    model: Model
    world: World
    time: float
    q: np.ndarray
    v: np.ndarray
    applied: np.ndarray  # the joint efforts applied (actuators and clamped commands)
    contact_forces: np.ndarray  # (k, 3) world frame, every contact point of the world
    active: np.ndarray  # (k,) which of them touch
    acceleration: np.ndarray
    body_wrenches: np.ndarray | None
    objects: tuple = ()  # (WorldObject, q, v) of each free object

    @cached_property
    def stamp(self):
        stamp = Clock().clock
        set_stamp(stamp, self.time)
        return stamp

    @cached_property
    def joint_wrenches(self) -> np.ndarray:
        """The wrench each joint transmits to its child body (its frame), contact forces included."""
        return sensors.joint_wrenches(self.model, self.q, self.v, self.acceleration, self.body_wrenches)


class Output:
    """A part of the simulator's output, published every period(dt) steps."""

    WHILE_PAUSED = False  # published while paused too, at publish_rate (the state stays visible)

    def __init__(self, node):
        self.node = node

    def rate(self) -> float:
        """Hz, simulated time."""
        return self.node.settings.publish_rate

    def period(self, dt: float) -> int:
        """Steps between publications."""
        return max(1, round(1.0 / (self.rate() * dt)))

    def publish(self, snapshot: Snapshot) -> None:
        raise NotImplementedError


class JointStates(Output):
    """joint_states (positions, velocities, applied efforts), /clock, and the count of publications."""

    WHILE_PAUSED = True

    def __init__(self, node):
        super().__init__(node)
        self.joints = node.joints
        self.message = JointState(name=list(self.joints.names))
        self.clock = Clock()
        self.publisher = node.create_publisher(JointState, "joint_states", STATE_QOS)
        self.clock_publisher = node.create_publisher(Clock, "/clock", 10)

    def publish(self, snapshot: Snapshot) -> None:
        message = self.message
        message.header.stamp = self.clock.clock = snapshot.stamp
        message.position = array("d", snapshot.q[self.joints.q_index].tobytes())  # no per-element checks
        message.velocity = array("d", snapshot.v[self.joints.v_index].tobytes())
        message.effort = array("d", snapshot.applied[self.joints.v_index].tobytes())
        self.publisher.publish(message)
        if self.node.settings.publish_clock:
            self.clock_publisher.publish(self.clock)
        self.node.counts["published"] += 1


class BaseOdometry(Output):
    """odom: the floating base's world pose and body twist (child frame); tf
    world_frame -> root link where tf2_msgs is installed and publish_tf."""

    WHILE_PAUSED = True

    def __init__(self, node, publish_tf: bool):
        super().__init__(node)
        root = node.model.description.root
        self.message = Odometry(child_frame_id=root)
        self.base = node.model.v_index(ROOT_JOINT)
        self.publisher = node.create_publisher(Odometry, "odom", STATE_QOS)
        self.tf_publisher = None
        if publish_tf:
            if TFMessage is None:
                node.get_logger().info("no tf2_msgs here (ROS 2 from pip has no wheel of it): tf is not "
                                       "published; odom carries the base's pose")
            else:
                self.tf_publisher = node.create_publisher(TFMessage, "tf", 100)
                self.transform = TransformStamped(child_frame_id=root)
                self.tf_message = TFMessage(transforms=[self.transform])

    def publish(self, snapshot: Snapshot) -> None:
        q, v, frame = snapshot.q, snapshot.v, self.node.settings.world_frame
        message = self.message
        message.header.stamp, message.header.frame_id = snapshot.stamp, frame
        pose, twist = message.pose.pose, message.twist.twist
        set_vector(pose.position, q[:3])
        o = pose.orientation
        o.x, o.y, o.z, o.w = (float(x) for x in q[3:7])
        set_vector(twist.angular, v[self.base:self.base + 3])
        set_vector(twist.linear, v[self.base + 3:self.base + 6])
        self.publisher.publish(message)
        if self.tf_publisher is not None:
            transform = self.transform
            transform.header.stamp, transform.header.frame_id = snapshot.stamp, frame
            set_vector(transform.transform.translation, q[:3])
            r = transform.transform.rotation
            r.x, r.y, r.z, r.w = (float(x) for x in q[3:7])
            self.tf_publisher.publish(self.tf_message)


class ContactWrenchOutput(Output):
    """~/contact_wrenches: the force at each contact point of contact_frames,
    or at each touching point of the collision geometry (its link, the point
    in that link's frame)."""

    WHILE_PAUSED = True

    def __init__(self, node):
        super().__init__(node)
        self.body_links = body_links(node.model)
        self.publisher = node.create_publisher(ContactWrenches, "~/contact_wrenches", 10)
        self.world = None
        self.message = ContactWrenches()

    def _point_wrenches(self, world: World) -> ContactWrenches:
        """The message of the world's contact points (rebuilt when the world changes)."""
        if world is not self.world:
            contacts = [Contact(frame=point.frame, kind=Contact.POINT) for point in world.contact_points]
            for contact, point in zip(contacts, world.contact_points, strict=True):
                set_vector(contact.point, point.point)
            self.message = ContactWrenches(wrenches=contact_wrenches(contacts, np.zeros((len(contacts), 3))))
            self.world = world
        return self.message

    def _touching_collision_points(self, snapshot: Snapshot) -> ContactWrenches:
        first = len(snapshot.world.contact_points)
        geometry = snapshot.world.contact_geometry
        message = ContactWrenches()
        for k in np.flatnonzero(snapshot.active[first:]):
            wrench = ContactWrench(frame=self.body_links[geometry.bodies[k]], kind=Contact.POINT)
            set_vector(wrench.point, geometry.points[k])
            set_vector(wrench.wrench.force, snapshot.contact_forces[first + k])
            message.wrenches.append(wrench)
        return message

    def publish(self, snapshot: Snapshot) -> None:
        world = snapshot.world
        if world.contact_geometry is not None:
            message = self._touching_collision_points(snapshot)
        elif world.contact_points:
            message = self._point_wrenches(world)
            for wrench, force in zip(message.wrenches, snapshot.contact_forces, strict=True):
                set_vector(wrench.wrench.force, force)
        else:
            return
        message.header.stamp, message.header.frame_id = snapshot.stamp, self.node.settings.world_frame
        self.publisher.publish(message)


class ImuSensor(Output):
    """imu/<link>: orientation, angular velocity and proper acceleration (with
    gravity) in the link frame, with white noise and a constant bias
    (sensors.ImuNoise) and their variances."""

    def __init__(self, node, link: str, rate: float, noise: sensors.ImuNoise, index: int):
        super().__init__(node)
        self.link, self._rate, self.noise, self.index = link, rate, noise, index
        self.publisher = node.create_publisher(Imu, f"imu/{topic_token(link)}", SENSOR_QOS)

    def rate(self) -> float:
        return self._rate

    def publish(self, snapshot: Snapshot) -> None:
        orientation, angular, proper = sensors.imu_reading(snapshot.model, snapshot.q, snapshot.v,
                                                           snapshot.acceleration, self.link)
        angular, proper = self.noise.reading(self.index, angular, proper)
        gyroscope_variance, accelerometer_variance = self.noise.variances.tolist()
        message = Imu()
        message.header.stamp, message.header.frame_id = snapshot.stamp, self.link
        o = message.orientation
        o.x, o.y, o.z, o.w = (float(x) for x in orientation)
        set_vector(message.angular_velocity, angular)
        set_vector(message.linear_acceleration, proper)
        message.angular_velocity_covariance[0::4] = [gyroscope_variance] * 3
        message.linear_acceleration_covariance[0::4] = [accelerometer_variance] * 3
        self.publisher.publish(message)


class ForceTorqueSensor(Output):
    """ft/<joint>: the wrench the joint transmits to its child link (child
    frame), contact forces included."""

    def __init__(self, node, joint: str, rate: float):
        super().__init__(node)
        self._rate = rate
        self.body = sensors.sensor_joint_body(node.model, joint)
        self.frame = body_links(node.model)[self.body]
        self.publisher = node.create_publisher(WrenchStamped, f"ft/{topic_token(joint)}", SENSOR_QOS)

    def rate(self) -> float:
        return self._rate

    def publish(self, snapshot: Snapshot) -> None:
        wrench = snapshot.joint_wrenches[self.body]
        message = WrenchStamped()
        message.header.stamp, message.header.frame_id = snapshot.stamp, self.frame
        set_vector(message.wrench.torque, wrench[:3])
        set_vector(message.wrench.force, wrench[3:])
        self.publisher.publish(message)


class ObjectOutputs(Output):
    """Each object's odom (and tf where tf2_msgs is) and the objects'
    markers, publishers made as objects come and destroyed as they go."""

    WHILE_PAUSED = True

    def __init__(self, node, publish_tf: bool):
        super().__init__(node)
        self.odometry: dict[str, object] = {}  # name -> (WorldObject, its publisher, its visuals)
        self.markers = node.create_publisher(MarkerArray, "objects", STATE_QOS)
        self.tf_publisher = node.create_publisher(TFMessage, "tf", 100) if publish_tf and TFMessage else None
        self.drawn_last = False  # whether the last markers held objects (then none are published once more)

    def _part(self, thing: WorldObject):
        known = self.odometry.get(thing.name)
        if known is None or known[0] is not thing:
            if known is not None:
                self.node.destroy_publisher(known[1])
            visuals, warnings = link_visuals(thing.model, thing.urdf, thing.search_paths)
            for warning in warnings:
                self.node.get_logger().warning(f"object '{thing.name}': {warning}")
            publisher = self.node.create_publisher(Odometry, f"objects/{thing.name}/odom", STATE_QOS)
            known = self.odometry[thing.name] = (thing, publisher, visuals)
        return known

    def publish(self, snapshot: Snapshot) -> None:
        frame = self.node.settings.world_frame
        present = {thing.name for thing, _, _ in snapshot.objects}
        for name in [name for name in self.odometry if name not in present]:
            self.node.destroy_publisher(self.odometry.pop(name)[1])
        if not snapshot.objects and not self.drawn_last:
            return
        drawn, transforms = [], []
        for thing, q, v in snapshot.objects:
            _, publisher, visuals = self._part(thing)
            message = Odometry(child_frame_id=f"{thing.name}/{thing.model.description.root}")
            message.header.stamp, message.header.frame_id = snapshot.stamp, frame
            set_pose(message.pose.pose, q[3:7], q[:3])
            set_vector(message.twist.twist.angular, v[:3])
            set_vector(message.twist.twist.linear, v[3:6])
            publisher.publish(message)
            if self.tf_publisher is not None:
                transform = TransformStamped(header=message.header, child_frame_id=message.child_frame_id)
                set_vector(transform.transform.translation, q[:3])
                r = transform.transform.rotation
                r.x, r.y, r.z, r.w = (float(x) for x in q[3:7])
                transforms.append(transform)
            drawn.append((thing.name, visuals, *visual_poses(thing.model, visuals, q)))
        self.markers.publish(object_markers(drawn, frame, snapshot.stamp))
        self.drawn_last = bool(snapshot.objects)
        if transforms:
            self.tf_publisher.publish(TFMessage(transforms=transforms))


def make_outputs(node) -> list[Output]:
    """The outputs of the node's parameters (ValueError naming an unknown
    link or joint, or a bad noise): the state first (odom, joint_states)."""
    model = node.model
    imu_links, ft_joints = list(node.parameter("imu_links")), list(node.parameter("ft_joints"))
    for parameter, names, known, what in (("imu_links", imu_links, model.frames, "links"),
                                          ("ft_joints", ft_joints, node.joints.names, "joints")):
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ValueError(f"{parameter}: model '{model.name}' has no {what} {unknown[:10]}")
    noise = sensors.ImuNoise(len(imu_links), node.parameter("imu_noise"), node.parameter("imu_bias"),
                             names=("imu_noise", "imu_bias"))
    # a floating base's odom before the joint_states of the same step: a controller that runs on each joint_states
    # (and takes the newest odom) then has the base of that step, not of the publication before
    outputs = [BaseOdometry(node, node.parameter("publish_tf"))] if model.floating_base else []
    outputs.append(JointStates(node))
    outputs.append(ContactWrenchOutput(node))
    outputs += [ImuSensor(node, link, node.parameter("imu_rate"), noise, k) for k, link in enumerate(imu_links)]
    outputs += [ForceTorqueSensor(node, joint, node.parameter("ft_rate")) for joint in ft_joints]
    outputs.append(ObjectOutputs(node, node.parameter("publish_tf")))
    return outputs
