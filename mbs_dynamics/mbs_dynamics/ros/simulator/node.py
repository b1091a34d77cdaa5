"""Simulator node: integrates the robot with contact, actuators, sensors and
sim time (default name ``simulator``).

The robot of robot_description moves in an mbs.Simulation (gravity; for a
floating base a ground plane; static world_boxes; touched at contact_points
of contact_frames, or else at the points of the URDF's collision geometry
(contact_geometry: a mesh's hull vertices, or its bounding box's corners);
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
         objects/<name>/odom   nav_msgs/Odometry of each free object (and tf)
         world, objects        visualization_msgs/MarkerArray: the ground and
                               boxes (latched), the free objects (markers.py)
         /diagnostics          achieved real-time factor, step time, solver
    in   robot_description_semantic  the SRDF (latched), unless given as a
                               parameter: link pairs that never collide
    srv  ~/reset (std_srvs/Trigger), ~/set_state (SetState), ~/pause
         (std_srvs/SetBool), ~/step (Step: N steps while paused), ~/spawn
         (SpawnObject), ~/delete (DeleteObject): free objects (objects.py)

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

The parts, a file each: the parameters and the settings they make
(parameters.py, the scene from mbs.scene), the command formats
(commands.py), the outputs and sensors (outputs.py), the stepping thread
(stepping_thread.py); this file, the node that holds them and its services.
"""
from __future__ import annotations

import time
from dataclasses import replace
from functools import cached_property

import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.exceptions import InvalidTopicNameException
from rclpy.executors import MultiThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.validate_topic_name import validate_topic_name
from std_srvs.srv import SetBool, Trigger
from visualization_msgs.msg import MarkerArray

from mbs_dynamics.multibody.model import ROOT_JOINT
from mbs_dynamics.ros.conversions import InvalidInput, base_state, named_values
from mbs_dynamics.ros.markers import WORLD_QOS, world_markers
from mbs_dynamics.ros.robot_node import WARNING_PERIOD, RobotNode, timing_values
from mbs_dynamics.ros.simulator.commands import COMMAND_FORMATS, Command, check_large, clamped_command
from mbs_dynamics.ros.simulator.objects import SemanticDescription, delete, spawn
from mbs_dynamics.ros.simulator.outputs import make_outputs
from mbs_dynamics.ros.simulator.parameters import (
    ACTUATOR_PARAMETERS,
    CONTACT_GEOMETRY,
    GEOMETRY_PARAMETERS,
    INITIAL_STATE_PARAMETERS,
    PARAMETERS,
    SETTINGS_PARAMETERS,
    WORLD_PARAMETERS,
    SimulatorSettings,
    simulator_settings,
)
from mbs_dynamics.ros.simulator.stepping_thread import MAX_STEPS_PER_REQUEST, BusyError, SteppingThread
from mbs_dynamics.ros.spinning import SubscriptionsThread, node_main
from mbs_dynamics.simulation.scene import WORLD_EXTENT, scene_objects
from mbs_dynamics.simulation.simulation import outside_limits
from mbs_dynamics_interfaces.srv import DeleteObject, SetState, SpawnObject, Step

COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE)
# Requests of each service kept until served (and their answers until taken). rclpy's default of 10 lost all but
# the last 10 of 200 simultaneous ~/reset calls in the reader's history: those were never answered.
SERVICE_QUEUE = 1000
SERVICE_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=SERVICE_QUEUE,
                         reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)


class SimulatorNode(RobotNode):
    EXECUTOR = MultiThreadedExecutor  # ~/pause is answered while a ~/step runs
    PARAMETERS = PARAMETERS
    settings: SimulatorSettings

    def on_robot(self, robot) -> None:
        self._check_topic_name("joint_commands_topic")
        self.outputs = make_outputs(self)
        objects = scene_objects(self.parameter("world_objects"), self.parameter("world_object_files"),
                                self.parameter("world_object_poses"), self.mesh_search_paths(),
                                self.parameter("max_objects"))
        self.simulation, lifted = self.settings.scene.simulation(objects)
        if lifted:
            self.get_logger().warning(lifted)
        model = self.model
        self.applied = np.zeros(model.nv)  # the efforts of the last step
        self._zero_effort = np.zeros(model.nv)
        self._command = None  # (Command, simulated time received)
        self._command_stale = False
        self._targets_changed = False
        self._reset_targets()
        self._waiting_for_command = self.parameter("start_on_command")
        self.stepping = SteppingThread(self, paused=self.parameter("start_paused") or self._waiting_for_command,
                                       lockstep=self.parameter("lockstep"))
        self.check_parameters_at_run_time()
        services = ReentrantCallbackGroup()  # ~/pause is answered while a ~/step runs
        for kind, name, callback in ((Trigger, "~/reset", self._reset), (SetState, "~/set_state", self._set_state),
                                     (SetBool, "~/pause", self._pause), (Step, "~/step", self._step),
                                     (SpawnObject, "~/spawn", lambda request, response: spawn(self, request, response)),
                                     (DeleteObject, "~/delete",
                                      lambda request, response: delete(self, request, response))):
            self.create_service(kind, name, callback, qos_profile=SERVICE_QOS, callback_group=services)
        if self.semantic.pairs != self.settings.scene.disabled_collisions:  # an SRDF came meanwhile
            self.apply_collision_pairs()
        self.report_diagnostics("simulator")
        self._world_publisher = self.create_publisher(MarkerArray, "world", WORLD_QOS)
        self.publish_world()
        self._wall_anchor = (time.monotonic(), 0.0)  # for the achieved real-time factor
        formats = [kind(self) for kind in COMMAND_FORMATS]
        # the newest command, with neither a ~/step nor the executor's turn to wait for
        self._commands = SubscriptionsThread(
            self, [(kind.MESSAGE, kind.topic, lambda message, kind=kind: self._on_command(kind, message))
                   for kind in formats], COMMAND_QOS, on_error=self.fail)
        self.stepping.start()
        world = self.simulation.world
        self.get_logger().info(
            f"simulating {model.nv} coordinates at dt {self.simulation.dt:g} s ({self.simulation.integrator}), "
            f"real-time factor {self.settings.real_time_factor:g}"
            + (f", ground at {world.ground.height:g} m touched at {[p.frame for p in world.contact_points]}"
               if world.contact_points else "")
            + (f", {len(objects)} free objects" if objects else "")
            + (", self-collision on" if world.self_collision else "")
            + (", waiting for the first effort command" if self._waiting_for_command
               else ", paused" if self.stepping.paused else ""))

    @cached_property
    def collision(self):
        """The contact points of the URDF's collision elements (contact_geometry
        'collision' or 'collision_boxes': CONTACT_GEOMETRY), or None; what could not be used said once."""
        kind = self.parameter("contact_geometry")
        if kind == "none":
            return None
        if kind not in CONTACT_GEOMETRY:
            raise ValueError(f"contact_geometry must be 'collision', 'collision_boxes' or 'none', got {kind!r}")
        from mbs_dynamics.contact.geometry import collision_contacts

        geometry = collision_contacts(self.model, self.robot_xml, search_paths=self.mesh_search_paths(),
                                      mesh_points=CONTACT_GEOMETRY[kind])
        for warning in geometry.warnings:
            self.get_logger().warning(f"collision geometry: {warning}")
        return geometry

    @cached_property
    def collision_shapes(self):
        """The convex shapes of the URDF's collision elements (contact_geometry
        'collision' or 'collision_boxes': the meshes' hulls either way), which free objects and self-collision
        meet, or None."""
        if self.collision is None:
            return None
        from mbs_dynamics.contact.geometry import collision_shapes

        return collision_shapes(self.model, self.robot_xml, search_paths=self.mesh_search_paths())

    @cached_property
    def semantic(self) -> SemanticDescription:
        return SemanticDescription(self)

    def apply_collision_pairs(self) -> None:
        """The SRDF's pairs that never collide into the scene and the world."""
        if getattr(self, "stepping", None) is None:
            return  # on_robot takes them
        with self.stepping.lock:
            scene = self.settings.scene.with_collision_pairs(self.semantic.pairs)
            self.settings = replace(self.settings, scene=scene)
            self.simulation.set_world(scene.world_with(self.simulation.world.objects))

    def publish_world(self) -> None:
        """The ground and the boxes on `world` (latched), as they are now."""
        self._world_publisher.publish(world_markers(self.simulation.world, self.settings.world_frame))

    def _check_topic_name(self, parameter: str) -> None:
        """ValueError, in one line, unless the parameter is a valid topic name."""
        topic = self.parameter(parameter)
        try:
            validate_topic_name(topic)
        except InvalidTopicNameException as error:
            raise ValueError(f"{parameter} {topic[:100]!r} is not a topic name: "
                             f"{str(error).splitlines()[0].removeprefix('Invalid topic name: ').rstrip(':')}") from None

    def _reset_targets(self) -> None:
        """The actuators' targets back to the initial state: position joints hold it."""
        self.position_target = self.settings.scene.held_positions(self.simulation.initial_q)
        self.velocity_target = np.zeros(self.model.nv)
        self.simulation.set_targets(self.position_target, self.velocity_target)

    # --- parameters ----------------------------------------------------

    def settings_with(self, changes: dict) -> SimulatorSettings:
        settings = simulator_settings(self.parameter_values(changes, SETTINGS_PARAMETERS), self.model, self.joints,
                                      self.collision, self.collision_shapes, self.semantic.pairs)
        if (not self.model.floating_base and set(changes) & set(GEOMETRY_PARAMETERS)
                and getattr(self, "simulation", None) is not None):
            with self.stepping.lock:  # a fixed base cannot be lifted clear of a box: the box is refused
                q, objects = self.simulation.q.copy(), self.simulation.world.objects
            settings.scene.lifted_clear(q, "the robot where it is now", settings.scene.world_with(objects))
        return settings

    def apply_settings(self, settings: SimulatorSettings, changed: set) -> None:
        super().apply_settings(settings, changed)
        scene = settings.scene
        if changed & set(WORLD_PARAMETERS):
            lifted = ""
            with self.stepping.lock:
                self.simulation.set_world(scene.world_with(self.simulation.world.objects))
                self.stepping.step_times.clear()  # a step may now cost much more
                if self.model.floating_base and changed & set(GEOMETRY_PARAMETERS):
                    try:
                        q, lifted = scene.lifted_clear(self.simulation.q, "the robot where it was",
                                                       self.simulation.world)
                        self.simulation.set_state(q, self.simulation.v)
                    except ValueError as error:  # (a fixed base's was refused before the change)
                        self.get_logger().error(f"{error}; ~/reset or ~/set_state to go on")
            world = scene.world
            self.get_logger().info(
                "the world changed: " + (f"ground at {world.ground.height:g} m, friction {world.ground.friction:g}, "
                                         f"touched at {len(world.contact_points)} points"
                                         if world.ground is not None else "no ground (a fixed base)")
                + f", {len(world.boxes)} boxes")
            if lifted:
                self.get_logger().warning(lifted)
        if changed & {*WORLD_PARAMETERS, "world_frame"}:
            self.publish_world()
        if changed & set(ACTUATOR_PARAMETERS):
            with self.stepping.lock:
                self.simulation.set_actuators(scene.actuators)
                self.stepping.step_times.clear()
            self.get_logger().info(f"actuators: position control of {sorted(settings.position_joints)}, velocity "
                                   f"control of {sorted(settings.velocity_joints)}, effort of the others")
        if changed & set(INITIAL_STATE_PARAMETERS):
            with self.stepping.lock:
                self.simulation.set_initial_state(scene.initial_q, self.simulation.initial_v)
            self.get_logger().info("the initial state changed: it applies at the next ~/reset")

    # --- commands ------------------------------------------------------------

    def _on_command(self, kind, message) -> None:
        """A command of one format: checked, its efforts clamped to the URDF
        effort limits (counted, said), applied from now on; a bad one dropped."""
        try:
            with self.stepping.lock:
                last = Command(self._command[0].effort if self._command is not None else self._zero_effort,
                               self.position_target, self.velocity_target)
            command, clamped = clamped_command(kind.command(message, last), self.joints, kind.topic)
        except InvalidInput as error:
            self.drop(error.reason, str(error))
            return
        self.counts["commands"] += 1
        self.stepping.command_arrived.set()
        if clamped:
            self.counts["clamped_commands"] += 1
            self.get_logger().warning(
                f"efforts beyond the URDF effort limits clamped to them: {clamped[:10]} "
                f"({self.counts['clamped_commands']} commands so far)", throttle_duration_sec=WARNING_PERIOD)
        with self.stepping.lock:  # (the commands arrive on a thread of their own)
            self._command = (command, self.simulation.time)
            if command.position_target is not None:
                self.position_target, self.velocity_target = command.position_target, command.velocity_target
                self._targets_changed = True
            first = self._waiting_for_command
            if first:
                self._waiting_for_command, self.stepping.paused = False, False
        if first:
            self.stepping.wake()
            self.get_logger().info(f"first effort command: running from t = {self.simulation.time:g} s")
        if self._command_stale:
            self._command_stale = False
            self._targets_changed = True  # the velocity targets, zeroed while stale
            self.get_logger().info("commands arrive again", throttle_duration_sec=WARNING_PERIOD)

    def effort(self) -> np.ndarray:
        """The effort of the latest command, or zero once it is stale (the
        velocity targets then zero too; position targets hold). Under the lock."""
        if self._targets_changed:
            self.simulation.set_targets(self.position_target, self.velocity_target)
            self._targets_changed = False
        if self._command is None:
            return self._zero_effort
        command, received = self._command
        timeout = self.settings.command_timeout
        if self.simulation.time - received > timeout:
            if not self._command_stale:
                self.simulation.set_targets(None, self._zero_effort)
                self._command_stale = True
                self.counts["stale_command"] += 1
                self.get_logger().warning(
                    f"the last command is {self.simulation.time - received:.3g} s old (command_timeout "
                    f"{timeout:g} s, simulated): applying zero effort "
                    f"({self.counts['stale_command']} lapses so far)", throttle_duration_sec=WARNING_PERIOD)
            return self._zero_effort
        return command.effort

    def steps_to_stale_command(self) -> int:
        """Steps until the latest command passes command_timeout (a call ends
        there, so that the next applies zero effort); large when none is due."""
        if self._command is None or self._command_stale:
            return MAX_STEPS_PER_REQUEST
        stale_at = self._command[1] + self.settings.command_timeout
        return max(1, int(np.ceil((stale_at - self.simulation.time) / self.simulation.dt)) + 1)

    # --- services ---------------------------------------------------------------

    def _reset(self, request, response):
        try:
            with self.stepping.service_lock():
                start, lifted = self.settings.scene.lifted_clear(self.simulation.initial_q, "the initial state",
                                                                 self.simulation.world)
                self.stepping.end_steps("~/reset")
                self.simulation.reset(start)
                self._command = None
                self._reset_targets()
                if self.parameter("start_on_command"):
                    self._waiting_for_command = self.stepping.paused = True
        except (BusyError, ValueError) as error:
            response.success, response.message = False, str(error)
            return response
        self.stepping.wake()
        if lifted:
            self.get_logger().warning(f"~/reset: {lifted}")
        response.success, response.message = True, "back to the initial state at t = 0" + (
            f"; {lifted}" if lifted else "")
        return response

    def _set_state(self, request, response):
        model = self.model
        try:
            with self.stepping.service_lock():
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
                    outside = [name for name in outside_limits(model, q) if name in state.name]
                    if outside:
                        raise InvalidInput("invalid", f"positions outside the joint limits: {outside}")
                    by_velocity_index = np.zeros(model.nv)
                    by_velocity_index[self.joints.v_index] = q[self.joints.q_index]
                    check_large(by_velocity_index, np.ones(model.nv, dtype=bool), self.joints,
                                "joint_state: the position")
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
                check_large(v, np.ones(model.nv, dtype=bool), self.joints, "the velocity")
                q, lifted = self.settings.scene.lifted_clear(q, "the state asked for", self.simulation.world)
                self.simulation.set_state(q, v)
                t = self.simulation.time
        except (BusyError, InvalidInput, ValueError) as error:
            response.success, response.message = False, str(error)
            return response
        self.stepping.wake()
        if lifted:
            self.get_logger().warning(f"~/set_state: {lifted}")
        response.success, response.message = True, f"state set at t = {t:.6f} s" + (f"; {lifted}" if lifted else "")
        return response

    def _pause(self, request, response):
        paused = self.stepping.paused = bool(request.data)
        self._waiting_for_command = False
        if not paused:
            self.stepping.end_steps("~/pause false: running")
        self.stepping.wake()
        response.success = True
        response.message = f"{'paused' if paused else 'running'} at t = {self.simulation.time:.6f} s"
        return response

    def _step(self, request, response):
        """Take request.steps steps while paused, as fast as they go; answered
        when they are taken, or early (success false) on ~/pause false, ~/reset,
        an error of the simulation, or shutdown. One ~/step at a time."""
        steps = int(request.steps)
        try:
            refusal = self.stepping.request_steps(steps)
        except BusyError as error:
            refusal = str(error)
        if refusal is not None:
            response.success, response.message, response.time = False, refusal, self.simulation.time
            return response
        taken, ended = self.stepping.wait_for_steps()
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
        values = {"time": f"{t:.3f}", "real_time_factor": f"{factor:.3f}", "paused": self.stepping.paused,
                  **dict(sorted(self.counts.items())), **timing_values("step", self.stepping.step_times)}
        if last is not None:
            values.update({"contact_points_active": int(last.active.sum()), "limits_active": last.limits_active,
                           "solver_sweeps": last.iterations, "solver_residual": f"{last.residual:.3g}"})
        warn = any(self.counts[key] for key in ("unconverged_steps", "simulation_errors", "thread_errors"))
        return f"t = {t:.3f} s, real-time factor {factor:.2f}", values, warn or self.dropped() > 0

    def stopping(self) -> None:
        if getattr(self, "stepping", None) is not None:
            self.stepping.stopping = True
            self.stepping.end_steps("the node is shutting down")

    def destroy_node(self):
        if getattr(self, "stepping", None) is not None:
            self.stepping.stop()
            self._commands.destroy()
        return super().destroy_node()

main = node_main(SimulatorNode, "simulator")

if __name__ == "__main__":
    main()
