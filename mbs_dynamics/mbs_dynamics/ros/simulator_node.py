"""Simulator node: integrates the robot with contact, actuators, sensors and
sim time (default name ``simulator``).

The robot of robot_description moves in an mbs.Simulation (gravity; for a
floating base a ground plane; static world_boxes; touched at contact_points
of contact_frames, or else at the points of the URDF's collision geometry;
the URDF joint limits, damping and friction; PD actuators on position_joints
and velocity_joints), stepped at ``dt`` by a thread of its own in compiled
calls of many steps (up to the next publication), paced to
``real_time_factor`` (0: as fast as it goes).

    in   joint_commands        sensor_msgs/JointState by name, as
                               topic_based_ros2_control's TopicBasedSystem
                               sends them (joint_commands_topic): positions of
                               position_joints, velocities of velocity_joints,
                               efforts of the others; each array may hold only
                               the joints of its interface
         ~/effort_command      std_msgs/Float64MultiArray, command_joints order
         ~/joint_efforts       sensor_msgs/JointState, by joint name (the
                               inverse dynamics node's output remapped in)
    out  joint_states          sensor_msgs/JointState at publish_rate (simulated
                               time): positions, velocities, applied efforts
         odom                  nav_msgs/Odometry (floating base): world pose,
                               body twist in the child frame
         tf                    world_frame -> root link (floating base, where
                               tf2_msgs is installed)
         imu/<link>            sensor_msgs/Imu at imu_rate (imu_links)
         ft/<joint>            geometry_msgs/WrenchStamped at ft_rate (ft_joints)
         /clock                rosgraph_msgs/Clock at publish_rate (publish_clock)
         ~/contact_wrenches    mbs_dynamics_interfaces/ContactWrenches
         /diagnostics          achieved real-time factor, step time, solver
    srv  ~/reset (std_srvs/Trigger), ~/set_state (SetState), ~/pause
         (std_srvs/SetBool), ~/step (Step: N steps while paused)

A command applies until a newer one arrives; once older than command_timeout
(simulated seconds since it arrived) efforts and velocity targets give way to
zero, said once; position targets hold. Efforts beyond the URDF effort limits
are clamped to them (counted, with a throttled warning), and so is every
actuator's effort. Bad commands are dropped and counted with a throttled
warning, naming the joint: non-finite values, and beyond LARGEST_VALUE a
position or velocity target, or an effort on a joint without an effort limit.
The world (ground_*, contact_frames, contact_points, world_boxes,
contact_compliance) and the actuators can be changed at run time and apply at
once; the initial state (initial_*) applies at the next ~/reset. A state that
puts a contact point inside the ground or a box (start-up, ~/reset,
~/set_state, a change of the world) has its floating base lifted clear, said
in the log and the answer; a fixed base that would lie inside a box is
refused, with the depth. The services wait at most SERVICE_WAIT for the
simulation and then answer "busy"; requests queue up to SERVICE_QUEUE deep.
~/step takes
at most MAX_STEPS_PER_REQUEST steps, in compiled calls of some CALL_SECONDS
of wall-clock time each, publishes once at its end, and ends early, saying so, on ~/pause false,
~/reset or shutdown; the services are served while it runs. The
stepping thread survives any error: it counts it, says it (throttled) and
pauses.
"""
from __future__ import annotations

import threading
import time
from array import array
from contextlib import contextmanager

import numpy as np
from geometry_msgs.msg import TransformStamped, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.exceptions import InvalidTopicNameException
from rclpy.executors import MultiThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.validate_topic_name import validate_topic_name
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger

import mbs_dynamics as mbs
from mbs_dynamics.inputs import QUATERNION_TOLERANCE
from mbs_dynamics.model import ROOT_JOINT
from mbs_dynamics.ros.conversions import (
    MAX_WORLD_BOXES,
    WORLD_EXTENT,
    InvalidInput,
    JointMap,
    base_state,
    contact_wrenches,
    interface_values,
    named_values,
    set_stamp,
    set_vector,
    world_boxes,
)
from mbs_dynamics.ros.parameters import EMPTY_DOUBLE_ARRAY, EMPTY_STRING_ARRAY, ParameterSpec, diagnostics_period
from mbs_dynamics.ros.robot_node import WARNING_PERIOD, RobotNode, timing_values, timings
from mbs_dynamics.ros.spinning import SubscriptionsThread, node_main
from mbs_dynamics_interfaces.msg import Contact, ContactWrench, ContactWrenches
from mbs_dynamics_interfaces.srv import SetState, Step

try:  # a full ROS 2 install has it; the pip route has no wheel of it
    from tf2_msgs.msg import TFMessage
except ImportError:
    TFMessage = None

SENSOR_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
# Requests of each service kept until served (and their answers until taken). rclpy's default of 10 lost all but
# the last 10 of 200 simultaneous ~/reset calls in the reader's history: those were never answered.
SERVICE_QUEUE = 1000
SERVICE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=SERVICE_QUEUE,
                         reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
# Wall-clock seconds a service waits for the simulation (a compiled call of steps) before it answers "busy".
SERVICE_WAIT = 2.0
# The largest magnitude of a commanded position target (rad or m), velocity target (rad/s or m/s) or effort on a
# joint without a URDF effort limit (N m or N), and of a joint position or velocity of ~/set_state: beyond it a
# value is a mistake (1.7e308 as a position target overflowed the step and paused the simulation).
LARGEST_VALUE = 1e6
# The longest world_frame (characters).
MAX_FRAME_ID_LENGTH = 256
# Wall-clock seconds the simulation may fall behind its real-time factor
# and still catch up (a burst of steps); further behind, after a real stall,
# it goes on from where it is (a longer burst would outrun its controllers).
# A busy machine holds the stepping thread up to 50-150 ms now and then:
# at 0.05 each such hold was lost for good (a real-time factor of 0.93 over
# the second beside two busy processes), at 0.2 it is made up.
MAX_LAG = 0.2
# Wall-clock seconds the simulation may run ahead of its real-time factor
# before it sleeps. A sleep gives up the GIL, and getting it back from a busy
# executor thread can take the 5 ms switch interval: sleeping after every
# sub-millisecond step held the arm at 2x real time to 0.6x.
PACING_SLACK = 0.002
# The most steps one ~/step request takes (1000 s at dt = 1 ms).
MAX_STEPS_PER_REQUEST = 1_000_000
# Wall-clock seconds of the steps taken in one compiled call (from the last calls' step time), the lock held:
# a ~/pause or ~/reset ends a ~/step between calls, and a service waits at most about this long. Each call gives
# the GIL back and takes it again, which can wait for a switch interval: calls of 20 ms cost the Panda a third of
# its steps, of 100 ms nothing. A single step when nothing says how long a step takes (at start-up, after a
# change of the world or the actuators: 1000 boxes made a step of the Solo-12 70 ms).
CALL_SECONDS = 0.1
# Wall-clock seconds the stepping thread waits between calls, the lock released, while a service waits for it
# (and between the calls of a ~/step): the lock is not fair, and without it a waiting service would wait for
# the whole request.
LOCK_HANDOVER = 1e-4
# The most points in contact with the ground (contact_frames).
MAX_CONTACT_POINTS = 1000
# The slowest real-time factor other than 0 (below it a simulated second takes over 16 min).
SLOWEST_REAL_TIME_FACTOR = 1e-3
# Parameters of the world (applied at once) and of the initial state (at the next ~/reset).
WORLD_PARAMETERS = ("ground_height", "ground_friction", "ground_restitution", "contact_frames", "contact_points",
                    "world_boxes", "contact_compliance")
# Those of them that move a surface or a contact point: a change may put the robot inside an obstacle.
GEOMETRY_PARAMETERS = ("ground_height", "contact_frames", "contact_points", "world_boxes")
ACTUATOR_PARAMETERS = ("position_joints", "position_stiffness", "position_damping", "velocity_joints",
                       "velocity_damping", "actuator_bandwidth")
INITIAL_STATE_PARAMETERS = ("initial_joint_names", "initial_joint_positions", "initial_base_pose")


class BusyError(RuntimeError):
    """A service the simulation could not serve within SERVICE_WAIT."""


def topic_token(name: str) -> str:
    """A link or joint name as a topic name token (letters, digits, underscores)."""
    token = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return token if token and not token[0].isdigit() else f"_{token}"


class SimulatorNode(RobotNode):
    EXECUTOR = MultiThreadedExecutor  # ~/pause is answered while a ~/step runs
    PARAMETERS = (
        ParameterSpec("dt", 0.001, "Integration step (s).", read_only=True, bounds=(1e-5, 0.1)),
        ParameterSpec("integrator", mbs.simulation.DEFAULT_INTEGRATOR,
                      "'rk4', 'rkmk4' (Munthe-Kaas on SE(3) for the floating base) or 'semi_implicit_euler' (which "
                      "does not keep energy); steps with contact, a joint limit, joint friction or actuator gains "
                      "are time-stepped (first order).",
                      read_only=True),
        ParameterSpec("real_time_factor", 1.0,
                      "Simulated seconds per wall-clock second (at least 0.001); 0 = as fast as possible. A stall "
                      f"of up to {MAX_LAG:g} s (a busy machine) is made up by stepping faster; after a longer one the "
                      "simulation goes on from where it is.",
                      bounds=(0.0, 1000.0)),
        ParameterSpec("publish_rate", 100.0,
                      "Rate (Hz, simulated time) of joint_states, odom, /clock and ~/contact_wrenches.",
                      bounds=(0.1, 1e4)),
        ParameterSpec("publish_clock", True,
                      "Publish /clock (the simulator owns sim time)."),
        ParameterSpec("start_paused", False,
                      "Start paused (~/pause false or ~/step to go on); joint_states are published meanwhile."),
        ParameterSpec("start_on_command", False,
                      "Start paused and run from the first effort command on: a closed loop starts from the "
                      "efforts computed for the initial state.", read_only=True),
        ParameterSpec("command_joints", EMPTY_STRING_ARRAY,
                      "Joint order of ~/effort_command; empty = the model's joint order."),
        ParameterSpec("command_timeout", 0.5,
                      "Commands older than this (simulated s) are replaced by zero effort.", bounds=(1e-4, 3600.0)),
        ParameterSpec("initial_joint_names", EMPTY_STRING_ARRAY,
                      "Joints given an initial position; empty = none (each joint starts at 0, or at the "
                      "middle of its limits when 0 is outside them). Applies at the next ~/reset."),
        ParameterSpec("initial_joint_positions", EMPTY_DOUBLE_ARRAY,
                      "Initial positions of initial_joint_names (rad or m). Applies at the next ~/reset."),
        ParameterSpec("initial_base_pose", [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0],
                      "Floating base: initial [x, y, z, qx, qy, qz, qw] in the world frame (x, y and z within 1e4 m "
                      "of 0), lifted until no contact point lies inside the ground or a box (said). Applies at the "
                      "next ~/reset."),
        ParameterSpec("ground_height", 0.0,
                      "Height of the ground plane (m); the ground is off for a fixed base.", bounds=(-1e4, 1e4)),
        ParameterSpec("ground_friction", 0.8,
                      "Coulomb friction coefficient of the ground.", bounds=(0.0, 1e3)),
        ParameterSpec("ground_restitution", 0.0,
                      "Coefficient of restitution of the ground.", bounds=(0.0, 1.0)),
        ParameterSpec("contact_frames", EMPTY_STRING_ARRAY,
                      "Link frames whose points touch the ground (e.g. the feet; a frame may repeat); "
                      "empty = none. At most 1000."),
        ParameterSpec("contact_points", EMPTY_DOUBLE_ARRAY,
                      "[x, y, z] in its frame for each of contact_frames, flattened (e.g. the corners of a "
                      "sole); empty = the frames' origins."),
        ParameterSpec("contact_geometry", "collision",
                      "Where the robot touches the ground and world_boxes when contact_frames is empty: "
                      "'collision' (the URDF's <collision> elements: sphere centres with their radius, box "
                      "corners, cylinder rims, the vertices of each mesh's convex hull) or 'none'.", read_only=True),
        ParameterSpec("mesh_search_paths", EMPTY_STRING_ARRAY,
                      "Directories searched for collision meshes after the ament index (package://) and the "
                      "URDF's own directory.", read_only=True),
        ParameterSpec("world_boxes", EMPTY_DOUBLE_ARRAY,
                      "Static boxes (a step, a table): [size_x, size_y, size_z, x, y, z, yaw] per box (m, rad; "
                      f"world frame, centre), flattened; empty = none. At most {MAX_WORLD_BOXES} boxes: each step "
                      "tests every contact point against every box (the UR5's 296 collision points beside 1000 "
                      "boxes: real-time factor 0.12)."),
        ParameterSpec("contact_compliance", 0.0,
                      "Softness of the constraint rows: 0 is rigid; 0.01 for a robot lying on its collision meshes "
                      "or against its joint limits (rows that contradict), at a small penetration and a slow creep "
                      "of sticking points. A step the solver cannot converge is solved at ten times it (at least "
                      "0.01), up to twice (softened_steps in the diagnostics).", bounds=(0.0, 1.0)),
        ParameterSpec("position_joints", EMPTY_STRING_ARRAY,
                      "Joints under position control: PD actuators toward the positions of joint_commands, "
                      "implicit in the step, clamped to the URDF effort limits; they hold their initial "
                      "position until commanded."),
        ParameterSpec("position_stiffness", EMPTY_DOUBLE_ARRAY,
                      "Stiffness (N m/rad or N/m) of each of position_joints; empty = from actuator_bandwidth."),
        ParameterSpec("position_damping", EMPTY_DOUBLE_ARRAY,
                      "Damping (N m s/rad or N s/m) of each of position_joints; empty = from actuator_bandwidth."),
        ParameterSpec("velocity_joints", EMPTY_STRING_ARRAY,
                      "Joints under velocity control: damping actuators toward the velocities of joint_commands."),
        ParameterSpec("velocity_damping", EMPTY_DOUBLE_ARRAY,
                      "Damping of each of velocity_joints; empty = from actuator_bandwidth."),
        ParameterSpec("actuator_bandwidth", 20.0,
                      "Hz: the gains not given, for each joint's inertia M_jj at the initial state: stiffness "
                      "M_jj (2 pi f)^2 and damping 2 M_jj 2 pi f (critically damped); velocity joints M_jj 2 pi f.",
                      bounds=(0.01, 1000.0)),
        ParameterSpec("joint_commands_topic", "joint_commands",
                      "sensor_msgs/JointState commands by name, as topic_based_ros2_control's TopicBasedSystem "
                      "sends them: positions of position_joints, velocities of velocity_joints (and of "
                      "position_joints, as their target velocity), efforts of the others (and feedforward).",
                      read_only=True),
        ParameterSpec("imu_links", EMPTY_STRING_ARRAY,
                      "Links with an IMU: sensor_msgs/Imu on imu/<link> (orientation, angular velocity, proper "
                      "acceleration with gravity, in the link frame).", read_only=True),
        ParameterSpec("imu_rate", 200.0, "Rate (Hz, simulated time) of the IMUs.", read_only=True,
                      bounds=(0.1, 1e4)),
        ParameterSpec("imu_noise", [0.0, 0.0],
                      "[gyroscope (rad/s), accelerometer (m/s^2)] standard deviation of the IMUs' white noise: two "
                      "finite numbers >= 0.", read_only=True),
        ParameterSpec("imu_bias", [0.0, 0.0],
                      "[gyroscope, accelerometer] standard deviation of each IMU axis' constant bias, drawn at "
                      "start-up: two finite numbers >= 0.", read_only=True),
        ParameterSpec("ft_joints", EMPTY_STRING_ARRAY,
                      "Moving joints with a force-torque sensor: geometry_msgs/WrenchStamped on ft/<joint>, the "
                      "wrench the joint transmits to its child link (child frame), contact forces included.",
                      read_only=True),
        ParameterSpec("ft_rate", 100.0, "Rate (Hz, simulated time) of the force-torque sensors.", read_only=True,
                      bounds=(0.1, 1e4)),
        ParameterSpec("publish_tf", True,
                      "Floating base: publish tf (world_frame -> the root link) where tf2_msgs is installed.",
                      read_only=True),
        ParameterSpec("world_frame", "world",
                      f"frame_id of odom, tf and ~/contact_wrenches: a tf frame id (1 to {MAX_FRAME_ID_LENGTH} "
                      "printable characters, no white space, no leading '/')."),
        diagnostics_period(", wall clock"),
    )

    def on_robot(self, robot) -> None:
        try:
            self.model = self.build_model(robot)
            self.joints = JointMap(self.model)
            self.collision = self._collision_geometry()
            self.imus = self._sensor_frames("imu_links", self.model.frames, "links")
            self.force_torque_bodies = {joint: mbs.sensors.sensor_joint_body(self.model, joint)
                                        for joint in self._sensor_frames("ft_joints", self.joints.names, "joints")}
            self._check_topic_name("joint_commands_topic")
            self.imu_noise = mbs.sensors.ImuNoise(len(self.imus), self.parameter("imu_noise"),
                                                  self.parameter("imu_bias"), names=("imu_noise", "imu_bias"))
            self.settings = self.settings_with({})
            self.simulation = mbs.Simulation(self.model, self.settings["world"], self.parameter("dt"),
                                             self.parameter("integrator"), q=self.settings["initial_q"],
                                             actuators=self.settings["actuators"])
            start, lifted = self._clear_of_the_world(self.simulation.initial_q, "the initial state")
            self.simulation.reset(start)
            self._reset_targets()
        except ValueError as error:
            self.fail(str(error))
            return
        if lifted:
            self.get_logger().warning(lifted)
        model = self.model
        self._lock = threading.RLock()  # the simulation and the steps asked for, between the threads
        self._services_waiting = 0  # services waiting for the lock: the stepping thread lets them in
        self._waiting_lock = threading.Lock()  # (of that count)
        self.step_times = timings()
        self._command = None  # (tau, simulated time received)
        self._command_stale = False
        self._targets_changed = False
        self._zero_effort = np.zeros(model.nv)
        self._waiting_for_command = self.parameter("start_on_command")
        self.paused = self.parameter("start_paused") or self._waiting_for_command
        self._steps_requested = 0  # steps the ~/step in progress still has to take
        self._steps_taken = 0  # and has taken
        self._steps_ended = None  # why it ended early, if it did
        self._steps_done = threading.Event()  # set when the ~/step in progress ends
        self._anchor = None  # (wall time, simulated time, real-time factor) the pacing counts from
        self._stopping = False  # the process is stopping: no ~/step is taken
        self.check_parameters_at_run_time()
        self.state_publisher = self.create_publisher(JointState, "joint_states", STATE_QOS)
        self.odometry_publisher = (self.create_publisher(Odometry, "odom", STATE_QOS)
                                   if model.floating_base else None)
        self.clock_publisher = self.create_publisher(Clock, "/clock", 10)
        self.wrench_publisher = self.create_publisher(ContactWrenches, "~/contact_wrenches", 10)
        self._body_links = mbs.simulation.body_links(model)
        self.imu_publishers = {link: self.create_publisher(Imu, f"imu/{topic_token(link)}", SENSOR_QOS)
                               for link in self.imus}
        self.ft_publishers = {joint: self.create_publisher(WrenchStamped, f"ft/{topic_token(joint)}", SENSOR_QOS)
                              for joint in self.force_torque_bodies}
        self.tf_publisher = None
        if model.floating_base and self.parameter("publish_tf"):
            if TFMessage is None:
                self.get_logger().info("no tf2_msgs here (ROS 2 from pip has no wheel of it): tf is not "
                                       "published; odom carries the base's pose")
            else:
                self.tf_publisher = self.create_publisher(TFMessage, "tf", 100)
                self._transform = TransformStamped(child_frame_id=model.description.root)
                self._tf_message = TFMessage(transforms=[self._transform])
        services = ReentrantCallbackGroup()  # ~/pause is answered while a ~/step runs
        for kind, name, callback in ((Trigger, "~/reset", self._reset), (SetState, "~/set_state", self._set_state),
                                     (SetBool, "~/pause", self._pause), (Step, "~/step", self._step)):
            self.create_service(kind, name, callback, qos_profile=SERVICE_QOS, callback_group=services)
        self.report_diagnostics("simulator")
        self._messages()
        self._running = True
        self._wake = threading.Event()
        # the newest command, with neither a ~/step nor the executor's turn to wait for
        self._commands = SubscriptionsThread(self, [(Float64MultiArray, "~/effort_command", self._on_effort_command),
                                                    (JointState, "~/joint_efforts", self._on_joint_efforts),
                                                    (JointState, self.parameter("joint_commands_topic"),
                                                     self._on_joint_commands)],
                                             COMMAND_QOS, on_error=self.fail)
        self._thread = threading.Thread(target=self._run, name="simulation", daemon=True)
        self._thread.start()
        world = self.simulation.world
        self.get_logger().info(
            f"simulating {model.nv} coordinates at dt {self.simulation.dt:g} s ({self.simulation.integrator}), "
            f"real-time factor {self.settings['real_time_factor']:g}"
            + (f", ground at {world.ground.height:g} m touched at {[p.frame for p in world.contact_points]}"
               if world.contact_points else "")
            + (", waiting for the first effort command" if self._waiting_for_command
               else ", paused" if self.paused else ""))

    def _world(self, value: dict) -> mbs.World:
        """The World of the parameters in `value` (ValueError on a bad one)."""
        model = self.model
        frames = list(value["contact_frames"])
        if len(frames) > MAX_CONTACT_POINTS:
            raise ValueError(f"contact_frames has {len(frames)} frames: at most {MAX_CONTACT_POINTS}")
        if frames and not model.floating_base:
            raise ValueError("contact_frames need a floating base (floating_base: true): a fixed base has no ground")
        unknown = [frame for frame in frames if frame not in model.frames]
        if unknown:
            raise ValueError(f"contact_frames: model '{model.name}' has no frames {unknown[:10]}")
        points = np.asarray(value["contact_points"], dtype=float)
        if points.size == 0:
            points = np.zeros((len(frames), 3))
        elif points.shape != (3 * len(frames),) or not np.all(np.isfinite(points)):
            raise ValueError(f"contact_points must hold [x, y, z] for each of the {len(frames)} contact_frames "
                             f"({3 * len(frames)} finite values), got {points.tolist()[:12]}")
        ground = mbs.Ground(height=value["ground_height"], friction=value["ground_friction"],
                            restitution=value["ground_restitution"]) if model.floating_base else None
        boxes = world_boxes(value["world_boxes"], value["ground_friction"], value["ground_restitution"])
        obstacles = ground is not None or bool(boxes)
        geometry = self.collision if not frames and obstacles and self.collision is not None \
            and len(self.collision.bodies) else None
        return mbs.World(ground, tuple(mbs.PointContact(frame, point)
                                       for frame, point in zip(frames, points.reshape(-1, 3), strict=True))
                         if obstacles else (), boxes=boxes, contact_geometry=geometry,
                         compliance=value["contact_compliance"])

    def _collision_geometry(self):
        """The contact points of the URDF's collision elements (contact_geometry
        'collision'), or None; what could not be used said once."""
        kind = self.parameter("contact_geometry")
        if kind == "none":
            return None
        if kind != "collision":
            raise ValueError(f"contact_geometry must be 'collision' or 'none', got {kind!r}")
        from mbs_dynamics.contact_geometry import collision_contacts

        geometry = collision_contacts(self.model, self.robot_xml, search_paths=self.mesh_search_paths())
        for warning in geometry.warnings:
            self.get_logger().warning(f"collision geometry: {warning}")
        return geometry

    def _check_topic_name(self, parameter: str) -> None:
        """ValueError, in one line, unless the parameter is a valid topic name."""
        topic = self.parameter(parameter)
        try:
            validate_topic_name(topic)
        except InvalidTopicNameException as error:
            raise ValueError(f"{parameter} {topic[:100]!r} is not a topic name: "
                             f"{str(error).splitlines()[0].removeprefix('Invalid topic name: ').rstrip(':')}") from None

    def _sensor_frames(self, parameter: str, known, what: str) -> list[str]:
        names = list(self.parameter(parameter))
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ValueError(f"{parameter}: model '{self.model.name}' has no {what} {unknown[:10]}")
        return names

    def _actuators(self, value: dict) -> mbs.Actuators:
        """The Actuators of the parameters in `value` (ValueError on a bad one):
        gains given, or critically damped at actuator_bandwidth for each joint's
        inertia at the initial state."""
        position, velocity = list(value["position_joints"]), list(value["velocity_joints"])
        both = sorted(set(position) & set(velocity))
        if both:
            raise ValueError(f"joints both in position_joints and velocity_joints: {both}")
        unknown = [name for name in position + velocity if name not in self.joints.names]
        if unknown:
            raise ValueError(f"position_joints/velocity_joints: model '{self.model.name}' has no joints "
                             f"{unknown[:10]}")
        inertia = np.diag(mbs.mass_matrix(self.model, value["initial_q"]))
        omega = 2 * np.pi * value["actuator_bandwidth"]

        def gains(name, joints, default):
            given = np.asarray(value[name], dtype=float)
            if given.size == 0:
                return default(np.array([inertia[self.model.v_index(joint)] for joint in joints]))
            if given.shape != (len(joints),) or not np.all(np.isfinite(given)) or np.any(given < 0):
                raise ValueError(f"{name} must hold a finite value >= 0 for each of its {len(joints)} joints, "
                                 f"got {given.tolist()[:12]}")
            return given

        stiffness = gains("position_stiffness", position, lambda m: m * omega**2)
        damping = gains("position_damping", position, lambda m: 2 * m * omega)
        velocity_damping = gains("velocity_damping", velocity, lambda m: m * omega)
        return mbs.Actuators(position + velocity, np.concatenate([stiffness, np.zeros(len(velocity))]),
                             np.concatenate([damping, velocity_damping]))

    def _reset_targets(self) -> None:
        """The actuators' targets back to the initial state: position joints hold it."""
        model = self.model
        self._position_target = np.zeros(model.nv)
        self._velocity_target = np.zeros(model.nv)
        for name in self.settings["actuators"].joints:
            self._position_target[model.v_index(name)] = self.simulation.initial_q[model.q_index(name)]
        self.simulation.set_targets(self._position_target, self._velocity_target)

    def _initial_configuration(self, value: dict) -> np.ndarray:
        """The initial q of the parameters in `value` (ValueError on a bad one)."""
        model = self.model
        names, positions = list(value["initial_joint_names"]), np.asarray(value["initial_joint_positions"], float)
        if len(names) != len(positions):
            raise ValueError(f"initial_joint_names has {len(names)} names, initial_joint_positions "
                             f"{len(positions)} values (set both at once)")
        if not np.all(np.isfinite(positions)):
            raise ValueError(f"initial_joint_positions must be finite, got {positions.tolist()}")
        unknown = [name for name in names if name not in self.joints.names]
        if unknown:
            raise ValueError(f"initial_joint_names: model '{model.name}' has no joints {unknown[:10]}")
        q = mbs.simulation.initial_configuration(model, dict(zip(names, positions, strict=True)))
        if model.floating_base:
            pose = np.asarray(value["initial_base_pose"], dtype=float)
            if (pose.shape != (7,) or not np.all(np.isfinite(pose)) or np.abs(pose[:3]).max() > WORLD_EXTENT
                    or abs(np.linalg.norm(pose[3:]) - 1) > QUATERNION_TOLERANCE):
                raise ValueError(f"initial_base_pose must be [x, y, z, qx, qy, qz, qw] with |x|, |y|, |z| <= "
                                 f"{WORLD_EXTENT:g} and a unit quaternion, got {pose.tolist()[:7]}")
            q[:7] = pose  # the Simulation normalises the quaternion
        return q

    def _clear_of_the_world(self, q, what: str, world: mbs.World | None = None) -> tuple[np.ndarray, str]:
        """(q with its floating base lifted until no contact point lies inside
        the ground or a box of `world` (by default the simulation's), what was
        lifted ('' when nothing)). ValueError, starting with `what`, for a fixed
        base inside a box."""
        try:
            lifted, lift, deepest = mbs.simulation.lifted_clear(
                self.model, self.simulation.world if world is None else world, q, mbs.simulation.MARGIN)
        except ValueError as error:
            raise ValueError(f"{what}: {error}") from None
        return lifted, "" if deepest is None else f"{what}: {deepest}: the base lifted {lift:.3g} m, clear of it"

    # --- parameters ----------------------------------------------------

    def settings_with(self, changes: dict) -> dict:
        value = {name: changes.get(name, self.parameter(name)) for name in (
            "real_time_factor", "publish_rate", "publish_clock", "command_joints", "command_timeout",
            "world_frame", "diagnostics_period", *WORLD_PARAMETERS, *INITIAL_STATE_PARAMETERS,
            *ACTUATOR_PARAMETERS)}
        if 0 < value["real_time_factor"] < SLOWEST_REAL_TIME_FACTOR:
            raise ValueError(f"real_time_factor must be 0 (as fast as possible) or at least "
                             f"{SLOWEST_REAL_TIME_FACTOR:g}, got {value['real_time_factor']}")
        frame = value["world_frame"]
        if not (0 < len(frame) <= MAX_FRAME_ID_LENGTH and frame.isprintable() and not frame.startswith("/")
                and not any(c.isspace() for c in frame)):
            raise ValueError(f"world_frame must be a tf frame id: 1 to {MAX_FRAME_ID_LENGTH} printable characters, "
                             f"no white space, no leading '/'; got {frame[:40]!r}"
                             + (f" ({len(frame)} characters)" if len(frame) > 40 else ""))
        for name in ("command_joints", "initial_joint_names", "position_joints", "velocity_joints"):
            names = value[name]
            if len(names) > len(self.joints.names) or len(set(names)) != len(names):
                raise ValueError(f"{name} names {len(names)} joints, {len(set(names))} of them different: each of "
                                 f"the {len(self.joints.names)} joints of model '{self.model.name}' at most once")
        value["command_order"] = self.joints.command_order(value["command_joints"])
        value["world"] = self._world(value)
        value["initial_q"] = self._initial_configuration(value)
        if not self.model.floating_base:  # a fixed base cannot be lifted clear of a box: the box is refused
            self._clear_of_the_world(value["initial_q"], "the initial state", value["world"])
            if set(changes) & set(GEOMETRY_PARAMETERS) and getattr(self, "simulation", None) is not None:
                with self._lock:
                    q = self.simulation.q.copy()
                self._clear_of_the_world(q, "the robot where it is now", value["world"])
        value["actuators"] = self._actuators(value)
        value["position_joints_set"] = frozenset(value["position_joints"])
        value["velocity_joints_set"] = frozenset(value["velocity_joints"])
        value["effort_joints_set"] = frozenset(self.joints.names) - value["position_joints_set"] \
            - value["velocity_joints_set"]
        return value

    def apply_settings(self, settings: dict, changed: set) -> None:
        super().apply_settings(settings, changed)
        if changed & set(WORLD_PARAMETERS):
            lifted = ""
            with self._lock:
                self.simulation.set_world(settings["world"])
                self.step_times.clear()  # a step may now cost much more
                self._contact_messages()
                if self.model.floating_base and changed & set(GEOMETRY_PARAMETERS):
                    try:
                        q, lifted = self._clear_of_the_world(self.simulation.q, "the robot where it was")
                        self.simulation.set_state(q, self.simulation.v)
                    except ValueError as error:  # (a fixed base's was refused before the change)
                        self.get_logger().error(f"{error}; ~/reset or ~/set_state to go on")
            world = settings["world"]
            self.get_logger().info(
                "the world changed: " + (f"ground at {world.ground.height:g} m, friction {world.ground.friction:g}, "
                                         f"touched at {len(world.contact_points)} points"
                                         if world.ground is not None else "no ground (a fixed base)")
                + f", {len(world.boxes)} boxes")
            if lifted:
                self.get_logger().warning(lifted)
        if changed & set(ACTUATOR_PARAMETERS):
            with self._lock:
                self.simulation.set_actuators(settings["actuators"])
                self.step_times.clear()
            self.get_logger().info(f"actuators: position control of {list(settings['position_joints'])}, velocity "
                                   f"control of {list(settings['velocity_joints'])}, effort of the others")
        if changed & set(INITIAL_STATE_PARAMETERS):
            with self._lock:
                self.simulation.set_initial_state(settings["initial_q"], self.simulation.initial_v)
            self.get_logger().info("the initial state changed: it applies at the next ~/reset")

    # --- commands ------------------------------------------------------------

    def _on_effort_command(self, message: Float64MultiArray) -> None:
        order = self.settings["command_order"]
        try:
            values = np.asarray(message.data, dtype=float)
            if values.shape != order.shape:
                raise InvalidInput("invalid", f"~/effort_command has {values.size} values for {order.size} "
                                              "command_joints")
            tau = np.zeros(self.model.nv)
            tau[order] = values
            self._take_command(tau, what="~/effort_command")
        except InvalidInput as error:
            self.drop(error.reason, str(error))

    def _on_joint_efforts(self, message: JointState) -> None:
        try:
            match = self.joints.match(message.name)
            if match.missing:
                raise InvalidInput("missing_joint", f"~/joint_efforts lacks joints {list(match.missing)}")
            efforts = named_values(match, message.effort, "~/joint_efforts effort", message.name)
            if efforts is None:
                raise InvalidInput("invalid", "~/joint_efforts has no efforts")
            tau = np.zeros(self.model.nv)
            tau[match.v_index] = efforts
            self._take_command(tau, what="~/joint_efforts")
        except InvalidInput as error:
            self.drop(error.reason, str(error))

    def _on_joint_commands(self, message: JointState) -> None:
        """Commands as TopicBasedSystem sends them (joint_commands_topic): the
        named joints' positions (position_joints), velocities and efforts; a
        joint not named keeps its last command."""
        settings, what = self.settings, self.parameter("joint_commands_topic")
        try:
            names = list(message.name)
            match = self.joints.match(names)
            if match.unknown:
                self.drop("unknown_joint", f"{what} names joints the model does not have: {list(match.unknown)}; "
                                           "the others are applied")
            position_joints, velocity_joints = settings["position_joints_set"], settings["velocity_joints_set"]
            positions = interface_values(names, message.position, (position_joints,), f"{what} position")
            velocities = interface_values(names, message.velocity,
                                          (velocity_joints, position_joints | velocity_joints), f"{what} velocity")
            efforts = interface_values(names, message.effort, (settings["effort_joints_set"],), f"{what} effort")
            model = self.model
            with self._lock:
                tau = self._command[0].copy() if self._command is not None else np.zeros(model.nv)
                position_target, velocity_target = self._position_target.copy(), self._velocity_target.copy()
            for name, value in efforts.items():
                if name in self.joints.names:
                    tau[model.v_index(name)] = value
            for name, value in positions.items():
                if name in position_joints:
                    position_target[model.v_index(name)] = value
            for name, value in velocities.items():
                if name in position_joints or name in velocity_joints:
                    velocity_target[model.v_index(name)] = value
            self._take_command(tau, position_target, velocity_target, what)
        except InvalidInput as error:
            self.drop(error.reason, str(error))

    def _too_large(self, values: np.ndarray, checked: np.ndarray, what: str) -> None:
        """InvalidInput naming the first joint whose value (by velocity index)
        is beyond LARGEST_VALUE where `checked`, or not finite."""
        wrong = ~np.isfinite(values) | ((np.abs(values) > LARGEST_VALUE) & checked)
        if wrong.any():
            index = int(np.flatnonzero(wrong)[0])
            name = self.model.velocity_joint(index)
            raise InvalidInput("invalid", f"{what} of '{name}' is {values[index]:g}: "
                                          + ("not finite" if not np.isfinite(values[index])
                                             else f"too large (at most {LARGEST_VALUE:g} in magnitude)"))

    def _take_command(self, tau: np.ndarray, position_target=None, velocity_target=None, what: str = "") -> None:
        """Apply tau (and the actuators' targets) from now on, tau clamped to the
        URDF effort limits; InvalidInput (the command dropped) for a value not
        finite or beyond LARGEST_VALUE (an effort only where no limit clamps it)."""
        limit = self.joints.effort_limit
        self._too_large(tau, ~np.isfinite(limit), f"{what}: the effort")
        if position_target is not None:
            everywhere = np.ones(self.model.nv, dtype=bool)
            self._too_large(position_target, everywhere, f"{what}: the position target")
            self._too_large(velocity_target, everywhere, f"{what}: the velocity target")
        self.counts["commands"] += 1
        over = np.abs(tau) > limit
        if over.any():
            self.counts["clamped_commands"] += 1
            names = [name for name, index in zip(self.joints.names, self.joints.v_index, strict=True) if over[index]]
            self.get_logger().warning(
                f"efforts beyond the URDF effort limits clamped to them: {names[:10]} "
                f"({self.counts['clamped_commands']} commands so far)", throttle_duration_sec=WARNING_PERIOD)
            tau = np.clip(tau, -limit, limit)
        with self._lock:  # (the commands arrive on a thread of their own)
            self._command = (tau, self.simulation.time)
            if position_target is not None:
                self._position_target, self._velocity_target = position_target, velocity_target
                self._targets_changed = True
            first = self._waiting_for_command
            if first:
                self._waiting_for_command, self.paused = False, False
        if first:
            self._wake.set()
            self.get_logger().info(f"first effort command: running from t = {self.simulation.time:g} s")
        if self._command_stale:
            self._command_stale = False
            self._targets_changed = True  # the velocity targets, zeroed while stale
            self.get_logger().info("commands arrive again", throttle_duration_sec=WARNING_PERIOD)

    def _effort(self) -> np.ndarray:
        """The effort of the latest command, or zero once it is stale (the
        velocity targets then zero too; position targets hold)."""
        if self._targets_changed:
            self.simulation.set_targets(self._position_target, self._velocity_target)
            self._targets_changed = False
        if self._command is None:
            return self._zero_effort
        tau, received = self._command
        if self.simulation.time - received > self.settings["command_timeout"]:
            if not self._command_stale:
                self.simulation.set_targets(None, self._zero_effort)
                self._command_stale = True
                self.counts["stale_command"] += 1
                self.get_logger().warning(
                    f"the last command is {self.simulation.time - received:.3g} s old (command_timeout "
                    f"{self.settings['command_timeout']:g} s, simulated): applying zero effort "
                    f"({self.counts['stale_command']} lapses so far)", throttle_duration_sec=WARNING_PERIOD)
            return self._zero_effort
        return tau

    # --- the simulation thread ---------------------------------------------------

    def _run(self) -> None:
        """Step at dt, paced to the real-time factor; publish at publish_rate.
        An error of one pass is counted and said, and the thread goes on, paused."""
        while self._running:
            try:
                self._pass()
            except Exception as error:  # noqa: BLE001  the thread must outlive anything
                if not self.context.ok():
                    break
                self.counts["thread_errors"] += 1
                self.get_logger().error(f"simulation thread: {type(error).__name__}: {error}; pausing",
                                        throttle_duration_sec=WARNING_PERIOD)
                self.paused = True
                self._end_steps(f"{type(error).__name__}: {error}")
                time.sleep(0.1)

    def _pass(self) -> None:
        """One pass of the thread: a step, a wait, or (paused) a publication."""
        simulation, settings = self.simulation, self.settings
        if self.paused and self._steps_requested == 0:
            self._anchor = None
            self._publish()  # the state stays visible while paused
            self._wake.wait(1.0 / settings["publish_rate"])
            self._wake.clear()
            return
        factor = settings["real_time_factor"]
        if self._anchor is None or self._anchor[2] != factor:
            self._anchor = (time.monotonic(), simulation.time, factor)
        if factor > 0 and self._steps_requested == 0:  # a ~/step goes as fast as it can
            ahead = (simulation.time - self._anchor[1]) / factor - (time.monotonic() - self._anchor[0])
            if ahead > PACING_SLACK:
                time.sleep(min(ahead, 0.05))
                return
            if ahead < -MAX_LAG:  # behind after a stall: go on from here rather than race to catch up
                self._anchor = (time.monotonic(), simulation.time, factor)
        start = time.perf_counter()
        with self._lock:
            tau = self._effort()
            stepping = self._steps_requested > 0
            steps = min(self._steps_requested if stepping else self._steps_to_next_event(), self._steps_per_call(),
                        self._steps_to_stale_command())
            before = simulation.steps
            try:
                result = simulation.step(tau, steps)
            except ValueError as error:  # the state went bad (diverged, a singular mass matrix): stop there
                self._count_steps(simulation.steps - before)
                self.counts["simulation_errors"] += 1
                self.get_logger().error(f"the simulation stopped at t = {simulation.time:.3f} s: {error}; "
                                        "pausing (~/reset or ~/set_state to go on)")
                self.paused = True
                self._end_steps(f"the simulation stopped: {error}")
                return
            self._applied = result.applied
            self.counts["unconverged_steps"] += result.unconverged_steps
            self.counts["softened_steps"] += result.softened_steps
            self._count_steps(steps)
        self.step_times.append((time.perf_counter() - start) / steps)
        if not stepping:
            self._publish_due()
        elif self._steps_requested == 0:  # a ~/step publishes once, at its end
            self._publish_all()
        if (stepping and self._steps_requested) or self._services_waiting:
            time.sleep(LOCK_HANDOVER)

    def _count_steps(self, steps: int) -> None:
        """steps taken: counted, and off the ~/step in progress (under the lock)."""
        self.counts["steps"] += steps
        if self._steps_requested:
            self._steps_requested -= min(steps, self._steps_requested)
            self._steps_taken += steps
            if self._steps_requested == 0:
                self._steps_done.set()

    def _steps_per_call(self) -> int:
        """The most steps in one call: CALL_SECONDS of them at the recent step
        time, one when nothing says how long a step takes."""
        if not self.step_times:
            return 1
        return max(1, int(CALL_SECONDS / max(self.step_times[-1], 1e-7)))

    def _steps_to_stale_command(self) -> int:
        """Steps until the latest command passes command_timeout (a call ends
        there, so that the next applies zero effort); large when none is due."""
        if self._command is None or self._command_stale:
            return MAX_STEPS_PER_REQUEST
        stale_at = self._command[1] + self.settings["command_timeout"]
        return max(1, int(np.ceil((stale_at - self.simulation.time) / self.simulation.dt)) + 1)

    def _periods(self) -> tuple[int, int, int]:
        """Steps between publications of joint_states (and the rest), the IMUs
        and the force-torque sensors."""
        dt = self.simulation.dt
        return tuple(max(1, round(1.0 / (rate * dt))) for rate in (
            self.settings["publish_rate"], self.parameter("imu_rate"), self.parameter("ft_rate")))

    def _steps_to_next_event(self) -> int:
        """Steps to take in one compiled call: up to the next publication of
        anything (the commands apply from one call to the next)."""
        steps, (state, imu, force_torque) = self.simulation.steps, self._periods()
        periods = [state] + ([imu] if self.imus else []) + ([force_torque] if self.force_torque_bodies else [])
        return min(period - steps % period for period in periods)

    def _publish_all(self) -> None:
        self._publish()
        if self.imus:
            self._publish_imus()
        if self.force_torque_bodies:
            self._publish_force_torque()

    def _publish_due(self) -> None:
        steps, (state, imu, force_torque) = self.simulation.steps, self._periods()
        if steps % state == 0:
            self._publish()
        if self.imus and steps % imu == 0:
            self._publish_imus()
        if self.force_torque_bodies and steps % force_torque == 0:
            self._publish_force_torque()

    def _end_steps(self, why: str) -> None:
        """End the ~/step in progress, if any, early: it answers `why`."""
        with self._lock:
            if self._steps_requested:
                self._steps_requested, self._steps_ended = 0, why
                self._steps_done.set()

    def _messages(self) -> None:
        model = self.model
        self._state = JointState(name=list(self.joints.names))
        self._odometry = Odometry()
        self._odometry.child_frame_id = model.description.root
        self._clock_message = Clock()
        self._contact_messages()
        self._applied = np.zeros(model.nv)
        self._wall_anchor = (time.monotonic(), 0.0)  # for the achieved real-time factor

    def _contact_messages(self) -> None:
        """~/contact_wrenches for the world's contact points (under the lock when it can change)."""
        wrenches = ContactWrenches()
        contacts = [Contact(frame=point.frame, kind=Contact.POINT) for point in self.simulation.world.contact_points]
        for contact, point in zip(contacts, self.simulation.world.contact_points, strict=True):
            set_vector(contact.point, point.point)
        wrenches.wrenches = contact_wrenches(contacts, np.zeros((len(contacts), 3)))
        self._wrenches = wrenches

    def _touching_collision_points(self, forces: np.ndarray, touching: np.ndarray) -> ContactWrenches:
        """~/contact_wrenches of the collision points in the solver, each with its
        link (the moving body's root link) and its point in that link's frame."""
        first = len(self.simulation.world.contact_points)
        geometry = self.simulation.world.contact_geometry
        wrenches = ContactWrenches()
        for k in np.flatnonzero(touching[first:]):
            wrench = ContactWrench(frame=self._body_links[geometry.bodies[k]], kind=Contact.POINT)
            set_vector(wrench.point, geometry.points[k])
            set_vector(wrench.wrench.force, forces[first + k])
            wrenches.wrenches.append(wrench)
        return wrenches

    def _publish(self) -> None:
        simulation, model = self.simulation, self.model
        with self._lock:
            q, v, t, tau = simulation.q.copy(), simulation.v.copy(), simulation.time, self._applied
            forces, wrenches = simulation.contact_forces.copy(), self._wrenches
            if simulation.world.contact_geometry is not None:
                touching = simulation.last.active if simulation.last is not None else np.zeros(len(forces), bool)
                wrenches = self._touching_collision_points(forces, touching)
                forces = forces[touching]
        stamp = self._clock_message.clock
        set_stamp(stamp, t)
        self._state.header.stamp = stamp
        self._state.position = array("d", q[self.joints.q_index].tobytes())  # no per-element checks
        self._state.velocity = array("d", v[self.joints.v_index].tobytes())
        self._state.effort = array("d", tau[self.joints.v_index].tobytes())
        self.state_publisher.publish(self._state)
        if self.settings["publish_clock"]:
            self.clock_publisher.publish(self._clock_message)
        if self.odometry_publisher is not None:
            odometry = self._odometry
            odometry.header.stamp, odometry.header.frame_id = stamp, self.settings["world_frame"]
            pose, twist = odometry.pose.pose, odometry.twist.twist
            set_vector(pose.position, q[:3])
            o = pose.orientation
            o.x, o.y, o.z, o.w = (float(x) for x in q[3:7])
            base = model.v_index(ROOT_JOINT)
            set_vector(twist.angular, v[base:base + 3])
            set_vector(twist.linear, v[base + 3:base + 6])
            self.odometry_publisher.publish(odometry)
        if wrenches.wrenches or simulation.world.contact_geometry is not None:
            wrenches.header.stamp, wrenches.header.frame_id = stamp, self.settings["world_frame"]
            for wrench, force in zip(wrenches.wrenches, forces, strict=True):
                set_vector(wrench.wrench.force, force)
            self.wrench_publisher.publish(wrenches)
        if self.tf_publisher is not None:
            transform = self._transform
            transform.header.stamp, transform.header.frame_id = stamp, self.settings["world_frame"]
            set_vector(transform.transform.translation, q[:3])
            r = transform.transform.rotation
            r.x, r.y, r.z, r.w = (float(x) for x in q[3:7])
            self.tf_publisher.publish(self._tf_message)
        self.counts["published"] += 1

    def _sensor_state(self):
        """(q, v, a, contact body wrenches, stamp) of the last step, for the sensors."""
        simulation = self.simulation
        with self._lock:
            last = simulation.last
            q, v = simulation.q.copy(), simulation.v.copy()
            a = last.acceleration.copy() if last is not None else np.zeros(self.model.nv)
            wrenches = last.body_wrenches.copy() if last is not None else None
            t = simulation.time
        stamp = Clock().clock
        set_stamp(stamp, t)
        return q, v, a, wrenches, stamp

    def _publish_imus(self) -> None:
        q, v, a, _, stamp = self._sensor_state()
        gyroscope_variance, accelerometer_variance = self.imu_noise.variances.tolist()
        for imu, (link, publisher) in enumerate(self.imu_publishers.items()):
            orientation, angular, proper = mbs.sensors.imu_reading(self.model, q, v, a, link)
            angular, proper = self.imu_noise.reading(imu, angular, proper)
            message = Imu()
            message.header.stamp, message.header.frame_id = stamp, link
            o = message.orientation
            o.x, o.y, o.z, o.w = (float(x) for x in orientation)
            set_vector(message.angular_velocity, angular)
            set_vector(message.linear_acceleration, proper)
            message.angular_velocity_covariance[0::4] = [gyroscope_variance] * 3
            message.linear_acceleration_covariance[0::4] = [accelerometer_variance] * 3
            publisher.publish(message)

    def _publish_force_torque(self) -> None:
        q, v, a, body_wrenches, stamp = self._sensor_state()
        wrenches = mbs.sensors.joint_wrenches(self.model, q, v, a, body_wrenches)
        for joint, publisher in self.ft_publishers.items():
            body = self.force_torque_bodies[joint]
            message = WrenchStamped()
            message.header.stamp, message.header.frame_id = stamp, self._body_links[body]
            set_vector(message.wrench.torque, wrenches[body, :3])
            set_vector(message.wrench.force, wrenches[body, 3:])
            publisher.publish(message)

    # --- services ---------------------------------------------------------------

    @contextmanager
    def _simulation_lock(self):
        """The lock of the simulation, for a service: BusyError after
        SERVICE_WAIT without it (the stepping thread lets a waiting service in
        between its calls)."""
        with self._waiting_lock:
            self._services_waiting += 1
        try:
            taken = self._lock.acquire(timeout=SERVICE_WAIT)
        finally:
            with self._waiting_lock:
                self._services_waiting -= 1
        if not taken:
            self.counts["busy_refusals"] += 1
            raise BusyError(f"busy: the simulation did not give way within {SERVICE_WAIT:g} s (a step takes "
                            f"{self.step_times[-1] * 1e3 if self.step_times else float('nan'):.3g} ms); try again")
        try:
            yield
        finally:
            self._lock.release()

    def _reset(self, request, response):
        try:
            with self._simulation_lock():
                start, lifted = self._clear_of_the_world(self.simulation.initial_q, "the initial state")
                self._end_steps("~/reset")
                self.simulation.reset(start)
                self._command = None
                self._reset_targets()
                if self.parameter("start_on_command"):
                    self._waiting_for_command = self.paused = True
        except (BusyError, ValueError) as error:
            response.success, response.message = False, str(error)
            return response
        self._wake.set()
        if lifted:
            self.get_logger().warning(f"~/reset: {lifted}")
        response.success, response.message = True, "back to the initial state at t = 0" + (
            f"; {lifted}" if lifted else "")
        return response

    def _set_state(self, request, response):
        model = self.model
        try:
            with self._simulation_lock():
                q, v = self.simulation.q.copy(), self.simulation.v.copy()
                state = request.joint_state
                match = self.joints.match(state.name)
                if match.unknown:
                    raise InvalidInput("invalid", f"model '{model.name}' has no joints {list(match.unknown)}")
                positions = named_values(match, state.position, "joint_state position", state.name)
                if positions is None and len(state.name):
                    raise InvalidInput("invalid", "joint_state has names but no positions")
                if positions is not None:
                    q[match.q_index] = positions
                    velocities = named_values(match, state.velocity, "joint_state velocity", state.name)
                    v[match.v_index] = velocities if velocities is not None else 0.0
                    outside = [name for name in mbs.simulation.outside_limits(model, q) if name in state.name]
                    if outside:
                        raise InvalidInput("invalid", f"positions outside the joint limits: {outside}")
                    by_velocity_index = np.zeros(model.nv)
                    by_velocity_index[self.joints.v_index] = q[self.joints.q_index]
                    self._too_large(by_velocity_index, np.ones(model.nv, dtype=bool), "joint_state: the position")
                if len(request.base_state):
                    if not model.floating_base:
                        raise InvalidInput("invalid", f"model '{model.name}' has a fixed base: base_state must "
                                                      "be empty")
                    base = model.v_index(ROOT_JOINT)
                    q[:7], v[base:base + 6] = base_state(request.base_state[0].pose, request.base_state[0].twist,
                                                         what="base_state")
                    if np.abs(q[:3]).max() > WORLD_EXTENT:
                        raise InvalidInput("invalid", f"base_state position {q[:3].tolist()}: each coordinate at most "
                                                      f"{WORLD_EXTENT:g} m from the origin")
                self._too_large(v, np.ones(model.nv, dtype=bool), "the velocity")
                q, lifted = self._clear_of_the_world(q, "the state asked for")
                self.simulation.set_state(q, v)
                t = self.simulation.time
        except (BusyError, InvalidInput, ValueError) as error:
            response.success, response.message = False, str(error)
            return response
        self._wake.set()
        if lifted:
            self.get_logger().warning(f"~/set_state: {lifted}")
        response.success, response.message = True, f"state set at t = {t:.6f} s" + (f"; {lifted}" if lifted else "")
        return response

    def _pause(self, request, response):
        self.paused = bool(request.data)
        self._waiting_for_command = False
        if not self.paused:
            self._end_steps("~/pause false: running")
        self._wake.set()
        response.success = True
        response.message = f"{'paused' if self.paused else 'running'} at t = {self.simulation.time:.6f} s"
        return response

    def _step(self, request, response):
        """Take request.steps steps while paused, as fast as they go; answered
        when they are taken, or early (success false) on ~/pause false, ~/reset,
        an error of the simulation, or shutdown. One ~/step at a time."""
        steps = int(request.steps)
        try:
            with self._simulation_lock():
                refusal = ("the node is shutting down" if self._stopping
                           else "not paused: ~/pause first" if not self.paused
                           else "steps is 0" if steps == 0
                           else f"{steps} steps: at most {MAX_STEPS_PER_REQUEST} per request"
                           if steps > MAX_STEPS_PER_REQUEST
                           else f"busy: a ~/step is under way ({self._steps_requested} steps to go)"
                           if self._steps_requested else None)
                if refusal is None:
                    self._steps_done.clear()
                    self._steps_requested, self._steps_taken, self._steps_ended = steps, 0, None
        except BusyError as error:
            refusal = str(error)
        if refusal is not None:
            response.success, response.message, response.time = False, refusal, self.simulation.time
            return response
        self._wake.set()
        while not self._steps_done.wait(0.1):
            if self._stopping or not (self._running and self.context.ok()):
                self._end_steps("the node is shutting down")
        with self._lock:
            taken, ended = self._steps_taken, self._steps_ended
            response.time = self.simulation.time
        response.success = ended is None
        response.message = (f"{steps} steps, t = {response.time:.6f} s" if ended is None
                            else f"ended after {taken} of {steps} steps: {ended}; t = {response.time:.6f} s")
        return response

    # --- reporting ------------------------------------------------------------

    def diagnostics(self) -> tuple[str, dict, bool]:
        now, t = time.monotonic(), self.simulation.time
        wall0, sim0 = self._wall_anchor
        factor = (t - sim0) / (now - wall0) if now > wall0 else 0.0
        self._wall_anchor = (now, t)
        last = self.simulation.last
        values = {"time": f"{t:.3f}", "real_time_factor": f"{factor:.3f}", "paused": self.paused,
                  **dict(sorted(self.counts.items())), **timing_values("step", self.step_times)}
        if last is not None:
            values.update({"contact_points_active": int(last.active.sum()), "limits_active": last.limits_active,
                           "solver_sweeps": last.iterations, "solver_residual": f"{last.residual:.3g}"})
        warn = any(self.counts[key] for key in ("unconverged_steps", "simulation_errors", "thread_errors"))
        return f"t = {t:.3f} s, real-time factor {factor:.2f}", values, warn or self.dropped() > 0

    def stopping(self) -> None:
        if getattr(self, "_thread", None) is not None:
            self._stopping = True
            self._end_steps("the node is shutting down")

    def destroy_node(self):
        if getattr(self, "_thread", None) is not None:
            self._running = False
            self._end_steps("the node is shutting down")
            self._wake.set()
            self._thread.join(2.0)
            self._commands.destroy()
        return super().destroy_node()


main = node_main(SimulatorNode, "simulator")

if __name__ == "__main__":
    main()
