"""Whole-body controller node: joint_states (and odom) in, joint efforts out,
by task-space inverse dynamics (mbs_dynamics.control, DESIGN.md §9; default
name ``whole_body_controller``).

Each joint_states message (at most control_rate a second by its stamps) is
one cycle: the state from it by joint name and, for a floating base, the
newest odom (its twist in the child frame: the floating joint's body twist);
one QP (WholeBodyController.compute) over the accelerations and the forces
of the active contacts, for the tasks: the centre of mass, the base
orientation, the frame tasks and the posture. Then, with the input's stamp:

    in   joint_states                 sensor_msgs/JointState
         odom                         nav_msgs/Odometry (floating base)
         ~/com_reference              geometry_msgs/PointStamped (world frame)
         ~/com_setpoint               trajectory_msgs/MultiDOFJointTrajectory:
                                      the position, velocity and acceleration
                                      of its point (feed-forward); several
                                      points: a trajectory followed by the
                                      input stamps (time_from_start from the
                                      header's stamp, 0: from the next state)
         ~/base_orientation_reference geometry_msgs/QuaternionStamped
         ~/frame_reference/<frame>    geometry_msgs/PoseStamped, each of
                                      frame_task_frames (pose or position)
         ~/frame_setpoint/<frame>     trajectory_msgs/MultiDOFJointTrajectory
    out  <efforts_topic>              sensor_msgs/JointState efforts by name
                                      (default simulator/joint_efforts)
         ~/contact_forces             mbs_dynamics_interfaces/ContactWrenches:
                                      the forces the QP chose, world axes
                                      (at most contact_forces_rate a second)
         ~/markers                    visualization_msgs/MarkerArray: an arrow
                                      per contact force, the CoM and its reference
         /diagnostics                 cycle time, counts, the active contacts,
                                      the CoM's distance to its reference
    srv  ~/set_contacts               mbs_dynamics_interfaces/SetContacts: the
                                      contacts that hold from the next cycle on

A frame task whose frame is an active contact is off; when ~/set_contacts
lifts the contact, the task holds the frame where it is until a reference
moves it (a reference sent while the frame is in contact is refused). A
contact named again holds its frame where it is at the next cycle.

Bad input never stops the node: a joint_states message lacking joints, with
wrong lengths or non-finite values, a reference with a NaN or a bad
quaternion or in another frame than world_frame, an odom older than
state_timeout (the state is stale), no odom yet: dropped and counted, with a
throttled warning; a stale state republishes the last torques (held) with the
new stamp. A cycle whose QP has no solution (contacts that cannot hold the
robot) publishes the last solved torques (the controller's), counted and
warned. ~/set_contacts refuses unknown or repeated names with the reason.

Inputs taken and outputs published as bytes (ros.serialized): rclpy's
message conversions cost more than the controller. With realtime_priority
the thread that serves joint_states and the middleware's run SCHED_FIFO
(RobotNode.raise_priority), as the inverse dynamics node's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from nav_msgs.msg import Odometry
from rclpy.experimental import EventsExecutor
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from mbs_dynamics.control import (CenterOfMassTask, FrameTask, OrientationTask, PostureTask, RigidPointContact,
                                  RigidSurfaceContact, WholeBodyController)
from mbs_dynamics.ros.conversions import InvalidInput, base_state, listed, stamp_seconds
from mbs_dynamics.ros.parameters import (EMPTY_DOUBLE_ARRAY, EMPTY_STRING_ARRAY, ParameterSpec, diagnostics_period,
                                         realtime_priority)
from mbs_dynamics.ros.robot_node import WARNING_PERIOD, RobotNode, timing_values, timings
from mbs_dynamics.ros.spinning import node_main
from mbs_dynamics.ros.serialized import SerializedStream
from mbs_dynamics.ros.whole_body_messages import (JOINT_STATES_FIELDS, ODOMETRY_FIELDS, WholeBodyOutputs,
                                                 WholeBodyReferenceInputs)
from mbs_dynamics_interfaces.msg import Contact
from mbs_dynamics_interfaces.srv import SetContacts

# joint_states: best effort (matches any publisher), a queue of INPUT_QUEUE_DEPTH (input_queue_depth): every state
# answered through a scheduler's hiccup of up to 10 periods at 1 kHz (with a queue of one, 38-146 of 15,000 states
# were lost to such jitter at 1 kHz, SCHED_FIFO; 0-14 with ten, in stalls over 10 ms), none answered older than
# that: a longer stall loses the oldest (counted: lost_joint_states). STATE_QOS (the newest only): the references'.
# odom's callback only keeps the newest: its queue drains at once after a stall.
INPUT_QUEUE_DEPTH = 10
STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
ODOM_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
# ~/contact_forces monitor the controller (the view, plots) as ros2_control's state topics do (their
# state_publish_rate): at most 100 a second by default, a middleware write a cycle less at 1 kHz (45-70 us of CPU)
CONTACT_FORCES_RATE = 100.0
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
CONTACT_TYPES = ("point", "surface")
FRAME_TASK_TYPES = ("pose", "position")
GAIN_BOUNDS = (0.0, 1e6)
WEIGHT_BOUNDS = (0.0, 1e6)


@dataclass(frozen=True)
class ControllerSettings:
    """What the cycles read (the parameters of the same names), checked."""

    control_rate: float
    state_timeout: float
    contact_forces_rate: float
    markers_rate: float
    com_weight: float
    base_orientation_weight: float
    posture_weight: float
    frame_task_weights: tuple
    diagnostics_period: float


class WholeBodyControllerNode(WholeBodyReferenceInputs, RobotNode):
    # rclpy's executor in C++: the Python executors rebuild their wait set for each message (Solo-12 at 1 kHz,
    # the SingleThreadedExecutor: 684-696 us of the process's CPU a message, this one 390)
    EXECUTOR = EventsExecutor
    PARAMETERS = (
        ParameterSpec("control_rate", 0.0,
                      "Most control cycles a second, by the joint_states stamps (Hz); 0 = one per joint_states "
                      "message.", bounds=(0.0, 1e5)),
        ParameterSpec("input_queue_depth", INPUT_QUEUE_DEPTH,
                      "joint_states messages kept while a cycle runs (best effort, keep last): the default answers "
                      "every state in turn through a hiccup of 10 periods at 1 kHz, none older; a longer stall "
                      "loses the oldest (counted: lost_joint_states); 1 acts on the newest state only, losing "
                      "those a long cycle skipped.", read_only=True, bounds=(1, 100_000)),
        ParameterSpec("state_timeout", 0.05,
                      "A state whose odom is older than this (s) before its joint_states is stale: the last "
                      "torques are held.", bounds=(1e-4, 3600.0)),
        ParameterSpec("efforts_topic", "simulator/joint_efforts",
                      "Topic of the efforts (sensor_msgs/JointState by name), relative to the namespace.",
                      read_only=True),
        ParameterSpec("world_frame", "world",
                      "The frame references are in (their frame_id; empty is taken for it) and of the outputs.",
                      read_only=True),
        ParameterSpec("contact_frames", EMPTY_STRING_ARRAY,
                      "Frames that can be in contact (feet, soles), all active at start; ~/set_contacts switches "
                      "them.", read_only=True),
        ParameterSpec("contact_type", "point",
                      "'point' (a force at each frame origin: point feet) or 'surface' (a rectangular sole of "
                      "contact_sole_size centred at the frame origin, in its x-y plane).", read_only=True),
        ParameterSpec("contact_sole_size", [0.2, 0.1],
                      "Length (along x) and width (along y) of a surface contact's sole (m).", read_only=True),
        ParameterSpec("contact_radius", 0.0,
                      "Point contacts: the radius of a sphere foot centred at the frame origin (the contact is "
                      "its lowest point, rolling without slip); 0 = the frame origin is the contact point (m).",
                      read_only=True, bounds=(0.0, 1.0)),
        ParameterSpec("friction_coefficient", 0.7, "Friction coefficient of the contacts' pyramids.",
                      read_only=True, bounds=(1e-3, 10.0)),
        ParameterSpec("min_normal_force", 1.0, "Least normal force of an active contact (N).", read_only=True,
                      bounds=(0.0, 1e6)),
        ParameterSpec("com_weight", 1.0, "Weight of the CoM task (floating base); 0 = off.",
                      bounds=WEIGHT_BOUNDS),
        ParameterSpec("com_kp", 100.0, "Stiffness of the CoM task (1/s^2).", read_only=True, bounds=GAIN_BOUNDS),
        ParameterSpec("com_kd", 20.0, "Damping of the CoM task (1/s).", read_only=True, bounds=GAIN_BOUNDS),
        ParameterSpec("base_orientation_weight", 1.0,
                      "Weight of the base orientation task (the root link's, floating base); 0 = off.",
                      bounds=WEIGHT_BOUNDS),
        ParameterSpec("base_orientation_kp", 100.0, "Stiffness of the base orientation task (1/s^2).",
                      read_only=True, bounds=GAIN_BOUNDS),
        ParameterSpec("base_orientation_kd", 20.0, "Damping of the base orientation task (1/s).", read_only=True,
                      bounds=GAIN_BOUNDS),
        ParameterSpec("frame_task_frames", EMPTY_STRING_ARRAY,
                      "Frames with a task (feet, hands), each referenced on ~/frame_reference/<frame>.",
                      read_only=True),
        ParameterSpec("frame_task_types", EMPTY_STRING_ARRAY,
                      "'pose' or 'position' per frame task (one value: all); empty = position.", read_only=True),
        ParameterSpec("frame_task_weights", EMPTY_DOUBLE_ARRAY,
                      "Weight per frame task (one value: all); empty = 1.", bounds=WEIGHT_BOUNDS),
        ParameterSpec("frame_task_kp", 100.0, "Stiffness of the frame tasks (1/s^2).", read_only=True,
                      bounds=GAIN_BOUNDS),
        ParameterSpec("frame_task_kd", 20.0, "Damping of the frame tasks (1/s).", read_only=True,
                      bounds=GAIN_BOUNDS),
        ParameterSpec("posture_weight", 1e-3, "Weight of the posture task; 0 = off.", bounds=WEIGHT_BOUNDS),
        ParameterSpec("posture_kp", 10.0, "Stiffness of the posture task (1/s^2).", read_only=True,
                      bounds=GAIN_BOUNDS),
        ParameterSpec("posture_kd", 6.3, "Damping of the posture task (1/s).", read_only=True, bounds=GAIN_BOUNDS),
        ParameterSpec("posture_reference", EMPTY_DOUBLE_ARRAY,
                      "Joint positions the posture task holds, in the model's joint order; empty = the posture of "
                      "the first cycle (the robot as it stands).", read_only=True),
        ParameterSpec("torque_limits", True, "The URDF effort limits as constraints of the QP.", read_only=True),
        ParameterSpec("contact_forces_rate", CONTACT_FORCES_RATE,
                      "Most ~/contact_forces messages a second (by the joint_states stamps), after the efforts; "
                      "0 = one per cycle.", bounds=(0.0, 1e5)),
        ParameterSpec("markers_rate", 30.0, "Most ~/markers messages a second (by the joint_states stamps).",
                      bounds=(0.0, 1e4)),
        realtime_priority(),
        diagnostics_period(),
    )

    def on_robot(self, robot) -> None:
        model = self.model
        names = self._names = {}
        for name in ("contact_frames", "frame_task_frames"):
            names[name] = list(self.parameter(name))
            unknown = [frame for frame in names[name] if frame not in model.frames]
            if unknown:
                raise ValueError(f"{name}: model '{model.name}' has no frames {listed(unknown)}")
            if len(set(names[name])) != len(names[name]):
                raise ValueError(f"{name} names a frame twice: {listed(names[name])}")
        if names["contact_frames"] and not model.floating_base:
            raise ValueError("contact_frames need a floating base (floating_base: true)")
        self.controller = WholeBodyController(model, torque_limits=self.parameter("torque_limits"))
        self._priority_pending = self.parameter("realtime_priority") > 0  # set by the first joint_states callback
        self._contact_kind = self._contact_maker()
        self.com_task = self.orientation_task = None
        if model.floating_base:
            self.com_task = self.controller.add_task(CenterOfMassTask(
                kp=self.parameter("com_kp"), kd=self.parameter("com_kd"), weight=self.settings.com_weight))
            self.orientation_task = self.controller.add_task(OrientationTask(
                self.controller.base_frame, kp=self.parameter("base_orientation_kp"),
                kd=self.parameter("base_orientation_kd"), weight=self.settings.base_orientation_weight))
        self.posture_task = self.controller.add_task(PostureTask(
            kp=self.parameter("posture_kp"), kd=self.parameter("posture_kd"), weight=self.settings.posture_weight))
        posture = list(self.parameter("posture_reference"))
        if posture:
            self.posture_task.set_reference(dict(zip(self.joints.names, self._posture(posture), strict=True)))
        self.frame_tasks = {frame: self._frame_task(frame, k) for k, frame in enumerate(names["frame_task_frames"])}
        for frame in names["contact_frames"]:
            self.controller.add_contact(self._contact_kind(frame))
        self._sync_frame_tasks()
        self.cycle_times = timings()
        self._odometry = None  # (q_base, v_base, stamp)
        self._last_cycle = -np.inf
        self._tau = None  # the last published efforts
        self._world_frame = self.parameter("world_frame")
        # the CoM's distance to its reference (m): at the last cycle, the most since the last diagnostics
        self._com_error, self._com_error_most = np.nan, -np.inf
        self.check_parameters_at_run_time()
        self.outputs = WholeBodyOutputs(
            self, model, self.controller.joint_names, names["contact_frames"],
            Contact.POINT if self.parameter("contact_type") == "point" else Contact.FRAME, self._world_frame,
            self.parameter("efforts_topic"), COMMAND_QOS)
        self.outputs.prepare(*self._warm_up())
        states = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=self.parameter("input_queue_depth"),
                            reliability=ReliabilityPolicy.BEST_EFFORT)
        # taken as bytes: a stream's next message updates the last one's object (SerializedStream)
        self._inputs = {"joint_states": SerializedStream(JointState, JOINT_STATES_FIELDS),
                        "odom": SerializedStream(Odometry, ODOMETRY_FIELDS)}
        self.create_counted_subscription(JointState, "joint_states", self._on_joint_states, states, raw=True)
        if model.floating_base:
            self.create_counted_subscription(Odometry, "odom", self._on_odometry, ODOM_QOS, raw=True)
        self.subscribe_references(COMMAND_QOS)
        self.create_service(SetContacts, "~/set_contacts", self._set_contacts)
        self.report_diagnostics("whole-body control")
        self.get_logger().info(
            f"whole-body control of {len(self.controller.joint_names)} joints, efforts to "
            f"{self.outputs.efforts_publisher.topic_name}; contacts {names['contact_frames']} "
            f"({self.parameter('contact_type')}), frame tasks {names['frame_task_frames']}")

    # --- parameters -----------------------------------------------------------

    def settings_with(self, changes: dict) -> ControllerSettings:
        value = self.parameter_values(changes, (
            "control_rate", "state_timeout", "contact_forces_rate", "markers_rate", "com_weight",
            "base_orientation_weight", "posture_weight", "frame_task_weights", "diagnostics_period", "contact_type",
            "frame_task_types", "frame_task_frames", "contact_sole_size"))
        if value["contact_type"] not in CONTACT_TYPES:
            raise ValueError(f"contact_type must be one of {CONTACT_TYPES}, got '{value['contact_type']}'")
        frames = list(value["frame_task_frames"])
        kinds = list(value["frame_task_types"])
        if kinds and len(kinds) not in (1, len(frames)):
            raise ValueError(f"frame_task_types has {len(kinds)} values for {len(frames)} frame_task_frames")
        wrong = [kind for kind in kinds if kind not in FRAME_TASK_TYPES]
        if wrong:
            raise ValueError(f"frame_task_types must be {' or '.join(FRAME_TASK_TYPES)}, got {listed(wrong)}")
        weights = [float(w) for w in value["frame_task_weights"]]
        if weights and len(weights) not in (1, len(frames)):
            raise ValueError(f"frame_task_weights has {len(weights)} values for {len(frames)} frame_task_frames")
        sole = list(value["contact_sole_size"])
        if len(sole) != 2 or not all(np.isfinite(sole)) or min(sole) <= 0:
            raise ValueError(f"contact_sole_size must be 2 positive lengths (m), got {sole}")
        return ControllerSettings(
            value["control_rate"], value["state_timeout"], value["contact_forces_rate"], value["markers_rate"],
            value["com_weight"],
            value["base_orientation_weight"], value["posture_weight"],
            tuple(weights[0] if len(weights) == 1 else weights[k] if weights else 1.0 for k in range(len(frames))),
            value["diagnostics_period"])

    def apply_settings(self, settings: ControllerSettings, changed: set) -> None:
        super().apply_settings(settings, changed)
        for task, weight in ((self.com_task, settings.com_weight),
                             (self.orientation_task, settings.base_orientation_weight),
                             (self.posture_task, settings.posture_weight)):
            if task is not None:
                task.set_weight(weight)
        for task, weight in zip(self.frame_tasks.values(), settings.frame_task_weights, strict=True):
            task.set_weight(weight)

    def _posture(self, values) -> np.ndarray:
        values = np.asarray(values, dtype=float)
        if values.size != len(self.joints.names) or not np.all(np.isfinite(values)):
            raise ValueError(f"posture_reference must be {len(self.joints.names)} finite joint positions (the "
                             f"model's joints in order: {listed(self.joints.names)}), got {values.size} values")
        return values

    def _contact_maker(self):
        """frame -> a new contact of the parameters' kind."""
        friction, least = self.parameter("friction_coefficient"), self.parameter("min_normal_force")
        if self.parameter("contact_type") == "point":
            radius = self.parameter("contact_radius")
            return lambda frame: RigidPointContact(frame, friction=friction, min_normal_force=least, radius=radius)
        length, width = (0.5 * x for x in self.parameter("contact_sole_size"))
        corners = [[length, width, 0.0], [length, -width, 0.0], [-length, -width, 0.0], [-length, width, 0.0]]
        return lambda frame: RigidSurfaceContact(frame, corners, friction=friction, min_normal_force=least)

    def _frame_task(self, frame: str, k: int) -> FrameTask:
        kinds = list(self.parameter("frame_task_types"))
        kind = (kinds[0] if len(kinds) == 1 else kinds[k]) if kinds else "position"
        return FrameTask(frame, kp=self.parameter("frame_task_kp"), kd=self.parameter("frame_task_kd"),
                         weight=self.settings.frame_task_weights[k], mask=kind)

    def _sync_frame_tasks(self) -> None:
        """Each frame task in the controller exactly while its frame is no active contact."""
        for frame, task in list(self.frame_tasks.items()):
            held = task in self.controller.tasks
            if frame in self.controller.contacts and held:
                self.controller.remove_task(task)
            elif frame not in self.controller.contacts and not held:
                fresh = self._frame_task(frame, list(self.frame_tasks).index(frame))  # holds the frame where it is
                self.frame_tasks[frame] = self.controller.add_task(fresh)

    def _warm_up(self) -> tuple:
        """(q, result) of a cycle of a controller like this one at the neutral posture: the kernels and the QP
        solver loaded before the first message."""
        scratch = WholeBodyController(self.model, torque_limits=self.parameter("torque_limits"))
        for task in self.controller.tasks:
            if isinstance(task, CenterOfMassTask):
                scratch.add_task(CenterOfMassTask())
            elif isinstance(task, PostureTask):
                scratch.add_task(PostureTask())
            elif isinstance(task, FrameTask):
                scratch.add_task(FrameTask(task.frame))
        for frame in self._names["contact_frames"]:
            scratch.add_contact(self._contact_kind(frame))
        q = self.model.neutral_configuration()
        return q, scratch.compute(q, np.zeros(self.model.nv))

    # --- inputs ------------------------------------------------------------------

    def _read(self, topic: str, data: bytes):
        """The message of `topic` of the bytes `data`; None when they are none (dropped: 'unreadable')."""
        try:
            return self._inputs[topic].message(data)
        except Exception as error:  # noqa: BLE001  rclpy's deserializer on malformed bytes
            self.drop("unreadable", f"{topic}: {type(error).__name__}: {error}")
            return None

    def _on_joint_states(self, data: bytes) -> None:
        if self._priority_pending:
            self._priority_pending = False
            self.raise_priority()
        message = self._read("joint_states", data)
        if message is not None:
            self._cycle(message)

    def _on_odometry(self, data: bytes) -> None:
        message = self._read("odom", data)
        if message is None:
            return
        try:
            self._odometry = (*base_state(message.pose.pose, message.twist.twist),
                              stamp_seconds(message.header.stamp))
        except InvalidInput as error:
            self.drop(error.reason, f"odom: {error}")

    def _set_com(self, topic: str, position, velocity, acceleration) -> None:
        """The CoM reference; one outside the contacts' support polygon cannot be held standing: it is held
        at the polygon's nearest point, at rest (counted, warned)."""
        polygon = self.controller.support_polygon()
        position = np.asarray(position, dtype=float)
        if polygon is not None and np.all(np.isfinite(position)):
            nearest, outside = polygon.nearest(position)
            if outside > 0.0:
                self.counts["unreachable_com"] += 1
                self.get_logger().warning(
                    f"{topic}: {np.round(position, 4).tolist()} is {outside * 1e3:.1f} mm outside the support "
                    f"polygon of {listed(self._active_contacts())}: held at {np.round(nearest, 4).tolist()} "
                    f"({self.counts['unreachable_com']} so far)", throttle_duration_sec=WARNING_PERIOD)
                position, velocity, acceleration = nearest, 0.0, 0.0
        self.com_task.set_reference(position, velocity, acceleration)

    def _set_frame(self, frame: str, position, rotation, twist, acceleration) -> None:
        if frame in self.controller.contacts:
            raise InvalidInput("in_contact", f"'{frame}' is an active contact: its task is off until "
                                             "~/set_contacts lifts it")
        task = self.frame_tasks[frame]
        task.set_reference(position=position, rotation=rotation if task.mask[:3].any() else None, twist=twist,
                           acceleration=acceleration)

    def _set_contacts(self, request, response):
        known = self._names["contact_frames"]
        wanted = list(request.contacts)
        unknown = [name for name in wanted if name not in known]
        repeated = sorted({name for name in wanted if wanted.count(name) > 1})
        unsupported = None if unknown or repeated else self._unsupported_com(wanted)
        if unknown or repeated or unsupported:
            response.success = False
            response.message = (f"unknown contacts {listed(unknown)}; the node's contact_frames are {listed(known)}"
                                if unknown else f"contacts named twice: {listed(repeated)}" if repeated
                                else unsupported)
            self.counts["refused_set_contacts"] += 1
            self.get_logger().warning(f"~/set_contacts refused: {response.message}",
                                      throttle_duration_sec=WARNING_PERIOD)
        else:
            for name in [name for name in self.controller.contacts if name not in wanted]:
                self.controller.remove_contact(name)
            for name in wanted:
                if name not in self.controller.contacts:
                    self.controller.add_contact(self._contact_kind(name))
            self._sync_frame_tasks()
            response.success = True
            response.message = f"active contacts: {listed(self._active_contacts())}"
            self.get_logger().info(response.message)
        response.contacts = self._active_contacts()
        return response

    def _unsupported_com(self, wanted: list[str]) -> str | None:
        """Why releasing contacts to keep only `wanted` would tip the robot (the CoM reference outside their
        support polygon), or None."""
        reference = self.com_task.position if self.com_task is not None else None
        if reference is None or not set(wanted) < set(self.controller.contacts):
            return None
        polygon = self.controller.support_polygon(wanted)
        outside = np.inf if polygon is None else polygon.nearest(reference)[1]
        if outside == 0.0:
            return None
        where = "they span no area" if polygon is None else \
            f"it is {outside * 1e3:.1f} mm outside their support polygon"
        return (f"the CoM reference {np.round(reference, 4).tolist()} cannot be held on {listed(wanted)} alone "
                f"({where}): move it over them first")

    def _active_contacts(self) -> list[str]:
        return [name for name in self._names["contact_frames"] if name in self.controller.contacts]

    # --- the cycle ----------------------------------------------------------------

    def _cycle(self, message: JointState) -> None:
        start = time.perf_counter()
        self.counts["received"] += 1
        stamp = stamp_seconds(message.header.stamp)
        rate = self.settings.control_rate
        if rate > 0 and self._last_cycle <= stamp < self._last_cycle + (1.0 - 1e-6) / rate:
            return
        try:
            self._last_cycle = stamp
            q, v = self._state(message, stamp)
            if self.setpoint_trajectories:
                self.follow_setpoints(stamp)
            result = self.controller.compute(q, v)
            if not result.feasible:
                self.counts["infeasible"] += 1
                self.get_logger().warning(f"{result.message} ({self.counts['infeasible']} so far)",
                                          throttle_duration_sec=WARNING_PERIOD)
            self._tau = result.tau
            self._publish(message.header.stamp, result.tau)
            com = result.com
            if com is not None:
                self._com_error = float(np.linalg.norm(com - self.com_task.position))
                self._com_error_most = max(self._com_error_most, self._com_error)
            self.outputs.monitoring(message.header.stamp, stamp, q, result.forces, com,
                                    None if self.com_task is None else self.com_task.position,
                                    self.settings.contact_forces_rate, self.settings.markers_rate)
        except InvalidInput as error:
            self.drop(error.reason, str(error))
            if error.reason == "stale_state" and self._tau is not None:
                self.counts["held"] += 1
                self._publish(message.header.stamp, self._tau)
        except ValueError as error:  # the controller refused the state: says why
            self.drop("invalid", f"joint_states: {error}")
        except Exception as error:  # noqa: BLE001  a message never takes the node down
            self.drop("error", f"joint_states: {type(error).__name__}: {error}")
        self.cycle_times.append(time.perf_counter() - start)

    def _state(self, message: JointState, stamp: float) -> tuple[np.ndarray, np.ndarray]:
        """(q, v) of a joint_states message and the newest odom, unless that
        is more than state_timeout older (InvalidInput 'stale_state')."""
        odometry = self._odometry
        if self.model.floating_base and odometry is not None and stamp - odometry[2] > self.settings.state_timeout:
            raise InvalidInput("stale_state", f"the newest odom is {stamp - odometry[2]:.3g} s older than "
                                              f"joint_states (state_timeout {self.settings.state_timeout:g} s): the "
                                              "state is stale; holding the last torques")
        return self.measured(message, None if odometry is None else odometry[:2])

    def _publish(self, stamp, tau) -> None:
        self.outputs.efforts(stamp, tau)
        self.counts["published"] += 1

    def destroy_node(self) -> None:
        # the QP solvers go with the node, not at the interpreter's exit (proxsuite's nanobind objects reported leaks)
        self.__dict__.pop("controller", None)
        super().destroy_node()

    # --- reporting -----------------------------------------------------------------

    def diagnostics(self) -> tuple[str, dict, bool]:
        dropped, lost = self.dropped(), self.lost()
        values = {"received": self.counts["received"], "published": self.counts["published"], "dropped": dropped,
                  "lost": lost, "infeasible": self.counts["infeasible"], "held": self.counts["held"],
                  "active_contacts": " ".join(self._active_contacts()) or "none"}
        values.update({key: count for key, count in sorted(self.counts.items()) if key not in values})
        values.update(timing_values("cycle", self.cycle_times))
        if np.isfinite(self._com_error):  # the most since the last status (the last if no cycle since)
            values["com_error_mm"] = f"{1e3 * self._com_error:.2f}"
            values["com_error_max_mm"] = f"{1e3 * max(self._com_error_most, self._com_error):.2f}"
            self._com_error_most = -np.inf
        message = (f"{self.counts['published']} published, {dropped} dropped, {self.counts['infeasible']} "
                   f"infeasible, contacts: {values['active_contacts']}")
        return message, values, dropped > 0 or lost > 0 or self.counts["infeasible"] > 0


main = node_main(WholeBodyControllerNode, "whole_body_controller")

if __name__ == "__main__":
    main()
