"""Simulator node: integrates the robot with ground contact, effort commands
and sim time (default name ``simulator``).

The robot of robot_description moves in an mbs.Simulation (gravity; for a
floating base a ground plane touched at contact_points of contact_frames; the
URDF joint limits, damping and friction), stepped at ``dt`` by a thread of
its own, paced to ``real_time_factor`` (0: as fast as it goes).

    in   ~/effort_command      std_msgs/Float64MultiArray, command_joints order
         ~/joint_efforts       sensor_msgs/JointState, by joint name (the
                               inverse dynamics node's output remapped in)
    out  joint_states          sensor_msgs/JointState at publish_rate (simulated
                               time): positions, velocities, applied efforts
         odom                  nav_msgs/Odometry (floating base): world pose,
                               body twist in the child frame
         /clock                rosgraph_msgs/Clock at publish_rate (publish_clock)
         ~/contact_wrenches    mbs_dynamics_interfaces/ContactWrenches
         /diagnostics          achieved real-time factor, step time, solver
    srv  ~/reset (std_srvs/Trigger), ~/set_state (SetState), ~/pause
         (std_srvs/SetBool), ~/step (Step: N steps while paused)

A command applies until a newer one arrives; one older than command_timeout
(simulated seconds since it arrived) gives way to zero effort, said once.
Efforts beyond the URDF effort limits are clamped to them (counted, with a
throttled warning). Bad commands are dropped and counted with a throttled
warning. The world (ground_*, contact_frames, contact_points) can be changed
at run time and applies at once; the initial state (initial_*) applies at the
next ~/reset. ~/step takes at most MAX_STEPS_PER_REQUEST steps and ends early,
saying so, on ~/pause false, ~/reset or shutdown; the services are served
while it runs. The stepping thread survives any error: it counts it, says it
(throttled) and pauses.
"""
from __future__ import annotations

import threading
import time
from array import array

import numpy as np
from nav_msgs.msg import Odometry
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger

import mbs_dynamics as mbs
from mbs_dynamics.inputs import QUATERNION_TOLERANCE
from mbs_dynamics.model import ROOT_JOINT
from mbs_dynamics.ros.conversions import (InvalidInput, JointMap, base_state, contact_wrenches, named_values, set_stamp,
                                         set_vector)
from mbs_dynamics.ros.parameters import EMPTY_DOUBLE_ARRAY, EMPTY_STRING_ARRAY, ParameterSpec, diagnostics_period
from mbs_dynamics.ros.robot_node import WARNING_PERIOD, RobotNode, timing_values, timings
from mbs_dynamics.ros.spinning import SubscriptionsThread, node_main
from mbs_dynamics_interfaces.msg import Contact, ContactWrenches
from mbs_dynamics_interfaces.srv import SetState, Step

COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
# Wall-clock seconds the simulation may fall behind its real-time factor
# before it stops trying to catch up (a burst would outrun its controllers).
MAX_LAG = 0.05
# Wall-clock seconds the simulation may run ahead of its real-time factor
# before it sleeps. A sleep gives up the GIL, and getting it back from a busy
# executor thread can take the 5 ms switch interval: sleeping after every
# sub-millisecond step held the arm at 2x real time to 0.6x.
PACING_SLACK = 0.002
# The most steps one ~/step request takes (1000 s at dt = 1 ms).
MAX_STEPS_PER_REQUEST = 1_000_000
# The most points in contact with the ground (contact_frames).
MAX_CONTACT_POINTS = 1000
# The slowest real-time factor other than 0 (below it a simulated second takes over 16 min).
SLOWEST_REAL_TIME_FACTOR = 1e-3
# Parameters of the world (applied at once) and of the initial state (at the next ~/reset).
WORLD_PARAMETERS = ("ground_height", "ground_friction", "ground_restitution", "contact_frames", "contact_points")
INITIAL_STATE_PARAMETERS = ("initial_joint_names", "initial_joint_positions", "initial_base_pose")


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
                      "Simulated seconds per wall-clock second (at least 0.001); 0 = as fast as possible.",
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
                      "Floating base: initial [x, y, z, qx, qy, qz, qw] in the world frame. Applies at the next "
                      "~/reset."),
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
        ParameterSpec("world_frame", "world",
                      "frame_id of odom and ~/contact_wrenches."),
        diagnostics_period(", wall clock"),
    )

    def on_robot(self, robot) -> None:
        try:
            self.model = self.build_model(robot)
            self.joints = JointMap(self.model)
            self.settings = self.settings_with({})
            self.simulation = mbs.Simulation(self.model, self.settings["world"], self.parameter("dt"),
                                             self.parameter("integrator"), q=self.settings["initial_q"])
        except ValueError as error:
            self.fail(str(error))
            return
        model = self.model
        self._lock = threading.RLock()  # the simulation and the steps asked for, between the threads
        self.step_times = timings()
        self._command = None  # (tau, simulated time received)
        self._command_stale = False
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
        services = ReentrantCallbackGroup()  # ~/pause is answered while a ~/step runs
        self.create_service(Trigger, "~/reset", self._reset, callback_group=services)
        self.create_service(SetState, "~/set_state", self._set_state, callback_group=services)
        self.create_service(SetBool, "~/pause", self._pause, callback_group=services)
        self.create_service(Step, "~/step", self._step, callback_group=services)
        self.report_diagnostics("simulator")
        self._messages()
        self._running = True
        self._wake = threading.Event()
        # the newest command, with neither a ~/step nor the executor's turn to wait for
        self._commands = SubscriptionsThread(self, [(Float64MultiArray, "~/effort_command", self._on_effort_command),
                                                    (JointState, "~/joint_efforts", self._on_joint_efforts)],
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
                            restitution=value["ground_restitution"])
        return mbs.World(ground if model.floating_base else None,
                         tuple(mbs.PointContact(frame, point)
                               for frame, point in zip(frames, points.reshape(-1, 3), strict=True)))

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
            if (pose.shape != (7,) or not np.all(np.isfinite(pose)) or np.abs(pose[:3]).max() > 1e4
                    or abs(np.linalg.norm(pose[3:]) - 1) > QUATERNION_TOLERANCE):
                raise ValueError(f"initial_base_pose must be [x, y, z, qx, qy, qz, qw] with |x|, |y|, |z| <= 1e4 "
                                 f"and a unit quaternion, got {pose.tolist()}")
            q[:7] = pose  # the Simulation normalises the quaternion
        return q

    # --- parameters ----------------------------------------------------

    def settings_with(self, changes: dict) -> dict:
        value = {name: changes.get(name, self.parameter(name)) for name in (
            "real_time_factor", "publish_rate", "publish_clock", "command_joints", "command_timeout",
            "world_frame", "diagnostics_period", *WORLD_PARAMETERS, *INITIAL_STATE_PARAMETERS)}
        if 0 < value["real_time_factor"] < SLOWEST_REAL_TIME_FACTOR:
            raise ValueError(f"real_time_factor must be 0 (as fast as possible) or at least "
                             f"{SLOWEST_REAL_TIME_FACTOR:g}, got {value['real_time_factor']}")
        value["command_order"] = self.joints.command_order(value["command_joints"])
        value["world"] = self._world(value)
        value["initial_q"] = self._initial_configuration(value)
        return value

    def apply_settings(self, settings: dict, changed: set) -> None:
        super().apply_settings(settings, changed)
        if changed & set(WORLD_PARAMETERS):
            with self._lock:
                self.simulation.set_world(settings["world"])
                self._contact_messages()
            world = settings["world"]
            self.get_logger().info(
                "the world changed: " + (f"ground at {world.ground.height:g} m, friction {world.ground.friction:g}, "
                                         f"touched at {len(world.contact_points)} points"
                                         if world.ground is not None else "no ground (a fixed base)"))
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
            if not np.all(np.isfinite(values)):
                raise InvalidInput("invalid", "~/effort_command has non-finite values")
            tau = np.zeros(self.model.nv)
            tau[order] = values
            self._take_command(tau)
        except InvalidInput as error:
            self.drop(error.reason, str(error))

    def _on_joint_efforts(self, message: JointState) -> None:
        try:
            match = self.joints.match(message.name)
            if match.missing:
                raise InvalidInput("missing_joint", f"~/joint_efforts lacks joints {list(match.missing)}")
            efforts = named_values(match, message.effort, "~/joint_efforts effort")
            if efforts is None:
                raise InvalidInput("invalid", "~/joint_efforts has no efforts")
            tau = np.zeros(self.model.nv)
            tau[match.v_index] = efforts
            self._take_command(tau)
        except InvalidInput as error:
            self.drop(error.reason, str(error))

    def _take_command(self, tau: np.ndarray) -> None:
        """Apply tau from now on, clamped to the URDF effort limits."""
        self.counts["commands"] += 1
        limit = self.joints.effort_limit
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
            first = self._waiting_for_command
            if first:
                self._waiting_for_command, self.paused = False, False
        if first:
            self._wake.set()
            self.get_logger().info(f"first effort command: running from t = {self.simulation.time:g} s")
        if self._command_stale:
            self._command_stale = False
            self.get_logger().info("commands arrive again", throttle_duration_sec=WARNING_PERIOD)

    def _effort(self) -> np.ndarray:
        """The effort of the latest command, or zero once it is stale."""
        if self._command is None:
            return self._zero_effort
        tau, received = self._command
        if self.simulation.time - received > self.settings["command_timeout"]:
            if not self._command_stale:
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
            try:
                simulation.step(tau)
            except ValueError as error:  # the state went bad (diverged, a singular mass matrix): stop there
                self.counts["simulation_errors"] += 1
                self.get_logger().error(f"the simulation stopped at t = {simulation.time:.3f} s: {error}; "
                                        "pausing (~/reset or ~/set_state to go on)")
                self.paused = True
                self._end_steps(f"the simulation stopped: {error}")
                return
            self._applied = tau
            if not simulation.last.converged:
                self.counts["unconverged_steps"] += 1
            if self._steps_requested:
                self._steps_requested -= 1
                self._steps_taken += 1
                if self._steps_requested == 0:
                    self._steps_done.set()
        self.counts["steps"] += 1
        self.step_times.append(time.perf_counter() - start)
        if simulation.steps % max(1, round(1.0 / (settings["publish_rate"] * simulation.dt))) == 0:
            self._publish()

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

    def _publish(self) -> None:
        simulation, model = self.simulation, self.model
        with self._lock:
            q, v, t, tau = simulation.q.copy(), simulation.v.copy(), simulation.time, self._applied
            forces, wrenches = simulation.contact_forces.copy(), self._wrenches
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
        if wrenches.wrenches:
            wrenches.header.stamp, wrenches.header.frame_id = stamp, self.settings["world_frame"]
            for wrench, force in zip(wrenches.wrenches, forces, strict=True):
                set_vector(wrench.wrench.force, force)
            self.wrench_publisher.publish(wrenches)
        self.counts["published"] += 1

    # --- services ---------------------------------------------------------------

    def _reset(self, request, response):
        with self._lock:
            self._end_steps("~/reset")
            self.simulation.reset()
            self._command = None
            if self.parameter("start_on_command"):
                self._waiting_for_command = self.paused = True
        self._wake.set()
        response.success, response.message = True, "back to the initial state at t = 0"
        return response

    def _set_state(self, request, response):
        model = self.model
        try:
            with self._lock:
                q, v = self.simulation.q.copy(), self.simulation.v.copy()
                state = request.joint_state
                match = self.joints.match(state.name)
                if match.unknown:
                    raise InvalidInput("invalid", f"model '{model.name}' has no joints {list(match.unknown)}")
                positions = named_values(match, state.position, "joint_state position")
                if positions is None and len(state.name):
                    raise InvalidInput("invalid", "joint_state has names but no positions")
                if positions is not None:
                    q[match.q_index] = positions
                    velocities = named_values(match, state.velocity, "joint_state velocity")
                    v[match.v_index] = velocities if velocities is not None else 0.0
                    outside = [name for name in mbs.simulation.outside_limits(model, q) if name in state.name]
                    if outside:
                        raise InvalidInput("invalid", f"positions outside the joint limits: {outside}")
                if len(request.base_state):
                    if not model.floating_base:
                        raise InvalidInput("invalid", f"model '{model.name}' has a fixed base: base_state must "
                                                      "be empty")
                    base = model.v_index(ROOT_JOINT)
                    q[:7], v[base:base + 6] = base_state(request.base_state[0].pose, request.base_state[0].twist,
                                                         what="base_state")
                self.simulation.set_state(q, v)
        except (InvalidInput, ValueError) as error:
            response.success, response.message = False, str(error)
            return response
        self._wake.set()
        response.success, response.message = True, f"state set at t = {self.simulation.time:.6f} s"
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
        with self._lock:
            refusal = ("the node is shutting down" if self._stopping
                       else "not paused: ~/pause first" if not self.paused
                       else "steps is 0" if steps == 0
                       else f"{steps} steps: at most {MAX_STEPS_PER_REQUEST} per request" if steps > MAX_STEPS_PER_REQUEST
                       else f"busy: a ~/step is under way ({self._steps_requested} steps to go)"
                       if self._steps_requested else None)
            if refusal is None:
                self._steps_done.clear()
                self._steps_requested, self._steps_taken, self._steps_ended = steps, 0, None
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
