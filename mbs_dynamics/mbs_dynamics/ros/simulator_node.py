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
Bad commands are dropped and counted with a throttled warning.
"""
from __future__ import annotations

import threading
import time
from array import array
from collections import Counter, deque

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger

import mbs_dynamics as mbs
from mbs_dynamics.inputs import QUATERNION_TOLERANCE
from mbs_dynamics.model import ROOT_JOINT
from mbs_dynamics.ros.conversions import (InvalidInput, JointMap, base_state, contact_wrenches, named_values,
                                         set_stamp, set_vector)
from mbs_dynamics.ros.dynamics_node import (
    EMPTY_DOUBLE_ARRAY,
    EMPTY_STRING_ARRAY,
    DirectSubscriptions,
    DynamicsNode,
    ParameterSpec,
    diagnostic_array,
    node_main,
    timing_values,
)
from mbs_dynamics_interfaces.msg import Contact, ContactWrenches
from mbs_dynamics_interfaces.srv import SetState, Step

COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
STATE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
WARNING_PERIOD = 5.0
# Wall-clock seconds the simulation may fall behind its real-time factor
# before it stops trying to catch up (a burst would outrun its controllers).
MAX_LAG = 0.05
# Steps timed for the diagnostics.
TIMING_WINDOW = 5000


class SimulatorNode(DynamicsNode):
    PARAMETERS = (
        ParameterSpec("dt", 0.001, "Integration step (s).", read_only=True),
        ParameterSpec("integrator", "semi_implicit_euler",
                      "'semi_implicit_euler', 'rk4' or 'rkmk4' (Munthe-Kaas on SE(3) for the floating base); "
                      "steps with contact, a joint limit or joint friction are time-stepped (first order).",
                      read_only=True),
        ParameterSpec("real_time_factor", 1.0,
                      "Simulated seconds per wall-clock second; 0 = as fast as possible."),
        ParameterSpec("publish_rate", 100.0,
                      "Rate (Hz, simulated time) of joint_states, odom, /clock and ~/contact_wrenches."),
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
                      "Commands older than this (simulated s) are replaced by zero effort."),
        ParameterSpec("initial_joint_names", EMPTY_STRING_ARRAY,
                      "Joints given an initial position; empty = none (each joint starts at 0, or at the "
                      "middle of its limits when 0 is outside them)."),
        ParameterSpec("initial_joint_positions", EMPTY_DOUBLE_ARRAY,
                      "Initial positions of initial_joint_names (rad or m)."),
        ParameterSpec("initial_base_pose", [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0],
                      "Floating base: initial [x, y, z, qx, qy, qz, qw] in the world frame."),
        ParameterSpec("ground_height", 0.0,
                      "Height of the ground plane (m); the ground is off for a fixed base."),
        ParameterSpec("ground_friction", 0.8,
                      "Coulomb friction coefficient of the ground."),
        ParameterSpec("ground_restitution", 0.0,
                      "Coefficient of restitution of the ground."),
        ParameterSpec("contact_frames", EMPTY_STRING_ARRAY,
                      "Link frames whose points touch the ground (e.g. the feet; a frame may repeat); "
                      "empty = none."),
        ParameterSpec("contact_points", EMPTY_DOUBLE_ARRAY,
                      "[x, y, z] in its frame for each of contact_frames, flattened (e.g. the corners of a "
                      "sole); empty = the frames' origins."),
        ParameterSpec("world_frame", "world",
                      "frame_id of odom and ~/contact_wrenches."),
        ParameterSpec("diagnostics_period", 1.0,
                      "Period (s, wall clock) of the /diagnostics status."),
    )

    def on_robot(self, robot) -> None:
        try:
            self.model = self.build_model(robot)
            self.joints = JointMap(self.model)
            self.settings = self._settings({})
            self.simulation = self._simulation()
        except ValueError as error:
            self._fail(str(error))
            return
        model = self.model
        self._lock = threading.Lock()  # the simulation, between the stepping thread and the services
        self.counts: Counter = Counter()
        self.step_times = deque(maxlen=TIMING_WINDOW)
        self._command = None  # (tau, simulated time received)
        self._command_stale = False
        self._zero_effort = np.zeros(model.nv)
        self._waiting_for_command = self.parameter("start_on_command")
        self.paused = self.parameter("start_paused") or self._waiting_for_command
        self._steps_requested = 0
        self._steps_done = threading.Event()  # set when the steps ~/step asked for are taken
        self.check_parameters_at_run_time()
        self.state_publisher = self.create_publisher(JointState, "joint_states", STATE_QOS)
        self.odometry_publisher = (self.create_publisher(Odometry, "odom", STATE_QOS)
                                   if model.floating_base else None)
        self.clock_publisher = self.create_publisher(Clock, "/clock", 10)
        self.wrench_publisher = self.create_publisher(ContactWrenches, "~/contact_wrenches", 10)
        self.diagnostics_publisher = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        # taken by the simulation thread before each step: the newest command, with no executor between
        self._commands = DirectSubscriptions(self, [(Float64MultiArray, "~/effort_command", self._on_effort_command),
                                                    (JointState, "~/joint_efforts", self._on_joint_efforts)],
                                             COMMAND_QOS)
        self.create_service(Trigger, "~/reset", self._reset)
        self.create_service(SetState, "~/set_state", self._set_state)
        self.create_service(SetBool, "~/pause", self._pause)
        self.create_service(Step, "~/step", self._step)
        self._diagnostics_timer = self.create_timer(self.settings["diagnostics_period"], self._publish_diagnostics)
        self._messages()
        self._running = True
        self._wake = threading.Event()
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

    def _simulation(self) -> mbs.Simulation:
        """The Simulation the parameters describe (ValueError on a bad one)."""
        model = self.model
        names, positions = list(self.parameter("initial_joint_names")), list(self.parameter("initial_joint_positions"))
        if len(names) != len(positions):
            raise ValueError(f"initial_joint_names has {len(names)} names, initial_joint_positions "
                             f"{len(positions)} values")
        unknown = [name for name in names if name not in self.joints.names]
        if unknown:
            raise ValueError(f"initial_joint_names: model '{model.name}' has no joints {unknown}")
        q = mbs.simulation.initial_configuration(model, dict(zip(names, positions, strict=True)))
        frames = list(self.parameter("contact_frames"))
        ground = None
        if model.floating_base:
            pose = np.asarray(self.parameter("initial_base_pose"), dtype=float)
            if (pose.shape != (7,) or not np.all(np.isfinite(pose))
                    or abs(np.linalg.norm(pose[3:]) - 1) > QUATERNION_TOLERANCE):
                raise ValueError(f"initial_base_pose must be [x, y, z, qx, qy, qz, qw] with a unit quaternion, "
                                 f"got {pose.tolist()}")
            q[:7] = pose  # the Simulation normalises the quaternion
            ground = mbs.Ground(height=self.parameter("ground_height"), friction=self.parameter("ground_friction"),
                                restitution=self.parameter("ground_restitution"))
        elif frames:
            raise ValueError("contact_frames need a floating base (floating_base: true): a fixed base has no ground")
        unknown = [frame for frame in frames if frame not in model.frames]
        if unknown:
            raise ValueError(f"contact_frames: model '{model.name}' has no frames {unknown}")
        points = np.asarray(self.parameter("contact_points"), dtype=float)
        if points.size == 0:
            points = np.zeros((len(frames), 3))
        elif points.shape != (3 * len(frames),) or not np.all(np.isfinite(points)):
            raise ValueError(f"contact_points must hold [x, y, z] for each of the {len(frames)} contact_frames "
                             f"({3 * len(frames)} finite values), got {points.size}")
        world = mbs.World(ground, tuple(mbs.PointContact(frame, point)
                                        for frame, point in zip(frames, points.reshape(-1, 3), strict=True)))
        return mbs.Simulation(model, world, self.parameter("dt"), self.parameter("integrator"), q=q)

    # --- parameters ----------------------------------------------------

    def _settings(self, changes: dict) -> dict:
        value = {name: changes.get(name, self.parameter(name)) for name in (
            "real_time_factor", "publish_rate", "publish_clock", "command_joints", "command_timeout",
            "world_frame", "diagnostics_period")}
        if not value["real_time_factor"] >= 0:
            raise ValueError(f"real_time_factor must be >= 0 (0: as fast as possible), got "
                             f"{value['real_time_factor']}")
        for name in ("publish_rate", "command_timeout", "diagnostics_period"):
            if not value[name] > 0:
                raise ValueError(f"{name} must be positive, got {value[name]}")
        value["command_order"] = self.joints.command_order(value["command_joints"])
        return value

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
            self._drop(error.reason, str(error))

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
            self._drop(error.reason, str(error))

    def _take_command(self, tau: np.ndarray) -> None:
        self.counts["commands"] += 1
        self._command = (tau, self.simulation.time)
        if self._waiting_for_command:
            self._waiting_for_command, self.paused = False, False
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
        """Step at dt, paced to the real-time factor; publish at publish_rate."""
        simulation = self.simulation
        anchor = None  # (wall time, simulated time, real-time factor) the pacing counts from
        while self._running:
            settings = self.settings
            self._commands.take()
            if self.paused and self._steps_requested == 0:
                anchor = None
                self._publish()  # the state stays visible while paused
                self._wake.wait(1.0 / settings["publish_rate"])
                self._wake.clear()
                continue
            factor = settings["real_time_factor"]
            if anchor is None or anchor[2] != factor:
                anchor = (time.monotonic(), simulation.time, factor)
            if factor > 0:
                ahead = (simulation.time - anchor[1]) / factor - (time.monotonic() - anchor[0])
                if ahead > 0:
                    time.sleep(min(ahead, 0.05))
                    continue
                if ahead < -MAX_LAG:  # behind after a stall: go on from here rather than race to catch up
                    anchor = (time.monotonic(), simulation.time, factor)
            start = time.perf_counter()
            with self._lock:
                tau = self._effort()
                try:
                    simulation.step(tau)
                except Exception as error:  # the state went bad (a singular mass matrix, ...): stop there, serve on
                    self.counts["simulation_errors"] += 1
                    reason = str(error) if isinstance(error, ValueError) else f"{type(error).__name__}: {error}"
                    self.get_logger().error(f"the simulation stopped at t = {simulation.time:.3f} s: {reason}; "
                                            "pausing (~/reset to start again)")
                    self.paused, self._steps_requested = True, 0
                    self._steps_done.set()
                    continue
                self._applied = tau
                if not simulation.last.converged:
                    self.counts["unconverged_steps"] += 1
                if self._steps_requested:
                    self._steps_requested -= 1
                    if self._steps_requested == 0:
                        self._steps_done.set()
            self.counts["steps"] += 1
            self.step_times.append(time.perf_counter() - start)
            if simulation.steps % max(1, round(1.0 / (settings["publish_rate"] * simulation.dt))) == 0:
                self._publish()

    def _messages(self) -> None:
        model = self.model
        self._state = JointState(name=list(self.joints.names))
        self._odometry = Odometry()
        self._odometry.child_frame_id = model.description.root
        self._clock_message = Clock()
        self._wrenches = ContactWrenches()
        self._contacts = [Contact(frame=point.frame, kind=Contact.POINT)
                          for point in self.simulation.world.contact_points]
        for contact, point in zip(self._contacts, self.simulation.world.contact_points, strict=True):
            set_vector(contact.point, point.point)
        self._wrenches.wrenches = contact_wrenches(self._contacts, np.zeros((len(self._contacts), 3)))
        self._applied = np.zeros(model.nv)
        self._wall_anchor = (time.monotonic(), 0.0)  # for the achieved real-time factor

    def _publish(self) -> None:
        try:
            self._publish_state()
        except _rclpy.RCLError:
            if self.context.ok():
                raise
            self._running = False  # Ctrl-C shut the context down before destroy_node stopped this thread

    def _publish_state(self) -> None:
        simulation, model = self.simulation, self.model
        with self._lock:
            q, v, t, tau = simulation.q.copy(), simulation.v.copy(), simulation.time, self._applied
            forces = simulation.contact_forces.copy()
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
        if self._contacts:
            self._wrenches.header.stamp, self._wrenches.header.frame_id = stamp, self.settings["world_frame"]
            for wrench, force in zip(self._wrenches.wrenches, forces, strict=True):
                set_vector(wrench.wrench.force, force)
            self.wrench_publisher.publish(self._wrenches)
        self.counts["published"] += 1

    # --- services ---------------------------------------------------------------

    def _reset(self, request, response):
        with self._lock:
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
        self._wake.set()
        response.success = True
        response.message = f"{'paused' if self.paused else 'running'} at t = {self.simulation.time:.6f} s"
        return response

    def _step(self, request, response):
        if not self.paused:
            response.success, response.message = False, "not paused: ~/pause first"
            return response
        if request.steps == 0:
            response.success, response.message = False, "steps is 0"
            return response
        target = self.simulation.time + request.steps * self.simulation.dt
        self._steps_done.clear()
        self._steps_requested = request.steps
        self._wake.set()
        self._steps_done.wait()
        response.time = self.simulation.time
        response.success = abs(response.time - target) < 0.5 * self.simulation.dt
        response.message = f"{request.steps} steps, t = {response.time:.6f} s"
        return response

    # --- reporting ------------------------------------------------------------

    def _drop(self, reason: str, message: str) -> None:
        self.counts[f"dropped_{reason}"] += 1
        self.get_logger().warning(f"dropped: {message} ({self.counts[f'dropped_{reason}']} so far)",
                                  throttle_duration_sec=WARNING_PERIOD)

    def _publish_diagnostics(self) -> None:
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
        dropped = sum(count for key, count in self.counts.items() if key.startswith("dropped_"))
        self.diagnostics_publisher.publish(diagnostic_array(
            self, "simulator", self.model.name, f"t = {t:.3f} s, real-time factor {factor:.2f}", values,
            warn=dropped > 0 or self.counts["unconverged_steps"] > 0 or self.counts["simulation_errors"] > 0))

    def destroy_node(self):
        if getattr(self, "_thread", None) is not None:
            self._running = False
            self._wake.set()
            self._steps_done.set()
            self._thread.join(2.0)
            self._commands.destroy()
        return super().destroy_node()


main = node_main(SimulatorNode, "simulator", multithreaded=True)

if __name__ == "__main__":
    main()
