"""Run monitor: what a person watching a simulation wants to see (default
name ``run_monitor``; started by mbs_dynamics_bringup --summary-period,
--duration or --plot).

It listens to the simulator's joint_states (and odom) and the inverse
dynamics node's centroidal momentum, and asks the dynamics server for the
forward dynamics of the state it sees. Every summary_period it logs the
simulated time, the real-time factor achieved since the last summary, the
joint efforts, the CoM, the centroidal momentum, the energy and the
server's accelerations. At the
end (duration of simulated time reached, or Ctrl-C) it writes plot_file: an
SVG of the joint positions, efforts, energy and centroidal momentum against
time. With push_time > 0 it sets push_joint_velocities on
push_joint_names through the simulator's ~/set_state at that simulated time.

    in   joint_states, odom (floating base)
         inverse_dynamics/centroidal_momentum   (remap to follow another node)
    srv  dynamics_server/forward_dynamics (client), simulator/set_state (client)

All relative to its namespace: it watches the nodes of its own namespace.
What is missing (no inverse dynamics node, no dynamics server) is said once.
"""
from __future__ import annotations

import time

import numpy as np
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState

import mbs_dynamics as mbs
from mbs_dynamics import warmup
from mbs_dynamics.files import FileProblem, check_writable, write_file
from mbs_dynamics.ros.conversions import InvalidInput, base_state, measured_state, named_values, stamp_seconds
from mbs_dynamics.ros.parameters import EMPTY_DOUBLE_ARRAY, EMPTY_STRING_ARRAY, ParameterSpec
from mbs_dynamics.ros.robot_node import WARNING_PERIOD, RobotNode
from mbs_dynamics.view import svg_plot
from mbs_dynamics.warmup import preload
from mbs_dynamics_interfaces.msg import BaseState, CentroidalMomentum
from mbs_dynamics_interfaces.srv import ForwardDynamics, SetState

# Samples kept for the plot; past this, every other one is dropped and the
# recording stride doubles.
MAX_SAMPLES = 20_000


class RunMonitor(RobotNode):
    PARAMETERS = (
        ParameterSpec("summary_period", 1.0, "Period (s, wall clock) of the summary; 0 = none.", read_only=True),
        ParameterSpec("duration", 0.0, "Simulated time (s) after which the run ends; 0 = until Ctrl-C.",
                      read_only=True),
        ParameterSpec("plot_file", "", "SVG file written at the end; empty = none.", read_only=True),
        ParameterSpec("push_time", 0.0, "Simulated time (s) of the push; 0 = none.", read_only=True),
        ParameterSpec("push_joint_names", EMPTY_STRING_ARRAY, "Joints the push sets moving.", read_only=True),
        ParameterSpec("push_joint_velocities", EMPTY_DOUBLE_ARRAY, "Their velocities after the push (rad/s or m/s).",
                      read_only=True),
    )

    def on_robot(self, robot) -> None:
        if self.parameter("plot_file"):
            check_writable(self.parameter("plot_file"), "plot")
        preload(self.model, (warmup.centroidal,))  # its energies: not in the first joint_states (0.2 s)
        names, velocities = list(self.parameter("push_joint_names")), list(self.parameter("push_joint_velocities"))
        unknown = [name for name in names if name not in self.joints.names]
        if len(names) != len(velocities) or unknown:
            self.fail(f"push_joint_names {names} and push_joint_velocities {velocities}: "
                       + (f"unknown joints {unknown}" if unknown else "different lengths"))
            return
        self._push = dict(zip(names, velocities, strict=True)) if self.parameter("push_time") > 0 else {}
        self.samples: list[tuple] = []  # (t, q, v, effort, energies (T, V), momentum [k; l])
        self._stride, self._skipped = 1, 0
        self._latest = None  # (t, q, v, effort, (kinetic, potential energy)) of the last joint_states
        self._odometry = None
        self._momentum = None  # (com, [k; l]) of the last centroidal momentum message
        self._accelerations = None  # the server's last answer: (t, max |a|) or a message
        self._wall_anchor = None  # (wall time, simulated time) of the last summary, or of the first message
        self._finished = False
        self._said: set[str] = set()  # what is missing, said once
        self.create_subscription(JointState, "joint_states", self._on_joint_states, 100)
        if self.model.floating_base:
            self.create_subscription(Odometry, "odom", self._on_odometry, 100)
        self.momentum = self.create_subscription(CentroidalMomentum, "inverse_dynamics/centroidal_momentum",
                                                 self._on_momentum, 100)
        self.forward_dynamics = self.create_client(ForwardDynamics, "dynamics_server/forward_dynamics")
        self.set_state = self.create_client(SetState, "simulator/set_state")
        if self.parameter("summary_period") > 0:
            self.create_timer(self.parameter("summary_period"), self._summarise)
        duration = self.parameter("duration")
        self.get_logger().info(
            "watching joint_states" + (f" for {duration:g} s of simulated time" if duration > 0 else "")
            + (f", pushing {self._push} at t = {self.parameter('push_time'):g} s" if self._push else "")
            + (f"; the plot goes to {self.parameter('plot_file')}" if self.parameter("plot_file") else ""))

    # --- what arrives ------------------------------------------------------------

    def _on_odometry(self, message: Odometry) -> None:
        try:
            self._odometry = base_state(message.pose.pose, message.twist.twist)
        except InvalidInput as error:
            self.get_logger().warning(f"odom: {error}", throttle_duration_sec=WARNING_PERIOD)

    def _on_momentum(self, message: CentroidalMomentum) -> None:
        c, k, linear = message.com_position, message.angular_momentum, message.linear_momentum
        self._momentum = (np.array([c.x, c.y, c.z]), np.array([k.x, k.y, k.z, linear.x, linear.y, linear.z]))

    def _on_joint_states(self, message: JointState) -> None:
        if self._finished or (self.model.floating_base and self._odometry is None):
            return
        try:
            match = self.joints.match(message.name)
            q, v = measured_state(self.joints, match, message, self._odometry)
            effort, efforts = np.zeros(self.model.nv), named_values(match, message.effort, "joint_states effort")
            if efforts is not None:
                effort[match.v_index] = efforts
        except InvalidInput as error:
            self.get_logger().warning(f"joint_states: {error}", throttle_duration_sec=WARNING_PERIOD)
            return
        t = stamp_seconds(message.header.stamp)
        energies = (float(mbs.kinetic_energy(self.model, q, v)), float(mbs.potential_energy(self.model, q)))
        self._latest = (t, q, v, effort, energies)
        if self._wall_anchor is None and t > 0:
            self._wall_anchor = (time.monotonic(), t)
        self._record(t, q, effort, energies)
        if self._push and t >= self.parameter("push_time"):
            self._send_push(message)
        duration = self.parameter("duration")
        if duration > 0 and t >= duration:
            self._finish(f"{duration:g} s of simulated time")

    def _record(self, t, q, effort, energies) -> None:
        self._skipped += 1
        if self._skipped < self._stride:
            return
        self._skipped = 0
        momentum = self._momentum[1] if self._momentum is not None else np.full(6, np.nan)
        self.samples.append((t, q[self.joints.q_index], effort[self.joints.v_index], energies, momentum))
        if len(self.samples) > MAX_SAMPLES:
            self.samples = self.samples[::2]
            self._stride *= 2

    def _send_push(self, message: JointState) -> None:
        push, self._push = self._push, {}
        request = SetState.Request()
        request.joint_state.name = list(message.name)
        request.joint_state.position = list(message.position)
        velocities = dict(zip(message.name, message.velocity, strict=True)) if len(message.velocity) else {}
        request.joint_state.velocity = [float(push.get(name, velocities.get(name, 0.0))) for name in message.name]
        if not self.set_state.service_is_ready():
            self.get_logger().warning(f"the push finds no {self.resolve_service_name(self.set_state.srv_name)}: "
                                      "not pushed")
            return
        self.get_logger().info(f"t = {stamp_seconds(message.header.stamp):.3f} s: push, {push}")
        self.set_state.call_async(request)

    # --- what is shown -------------------------------------------------------------

    def _say_once(self, what: str, message: str) -> None:
        if what not in self._said:
            self._said.add(what)
            self.get_logger().info(message)

    def _summarise(self) -> None:
        if self._latest is None:
            self._say_once("joint_states", "no joint_states yet")
            return
        t, q, v, effort, (kinetic, potential) = self._latest
        factor, now = "", time.monotonic()
        if self._wall_anchor is not None and now > self._wall_anchor[0]:
            # over the last summary period, so that a stall shows where it happened and no later
            factor = f", real-time factor {(t - self._wall_anchor[1]) / (now - self._wall_anchor[0]):.2f}"
            self._wall_anchor = (now, t)
        lines = [f"t = {t:.3f} s{factor}; energy {kinetic + potential:.4f} J (kinetic {kinetic:.4f} J)",
                 "  efforts (N m, N): " + " ".join(f"{name} {effort[i]:+.2f}" for name, i in
                                                     zip(self.joints.names, self.joints.v_index, strict=True))]
        if self._momentum is not None:
            com, h = self._momentum
            lines.append(f"  CoM ({com[0]:.3f}, {com[1]:.3f}, {com[2]:.3f}) m; momentum: linear "
                         f"({h[3]:.3f}, {h[4]:.3f}, {h[5]:.3f}) kg m/s, angular ({h[0]:.3f}, {h[1]:.3f}, "
                         f"{h[2]:.3f}) kg m^2/s")
        else:
            self._say_once("momentum", f"no centroidal momentum on {self.momentum.topic_name} (no inverse dynamics "
                                       "node in this namespace?): the summaries go without it")
        if isinstance(self._accelerations, tuple):
            at, largest = self._accelerations
            lines.append(f"  dynamics server: forward dynamics of the state and efforts at t = {at:.3f} s, "
                         f"largest |acceleration| {largest:.3g}")
        elif self._accelerations:
            lines.append(f"  dynamics server: {self._accelerations}")
        self.get_logger().info("\n".join(lines))
        self._ask_server(t, q, v, effort)

    def _ask_server(self, t, q, v, effort) -> None:
        if not self.forward_dynamics.service_is_ready():
            self._say_once("server", f"no {self.resolve_service_name(self.forward_dynamics.srv_name)} (no dynamics "
                                     "server in this namespace?): the summaries go without its accelerations")
            return
        request = ForwardDynamics.Request()
        request.joint_state.name = list(self.joints.names)
        request.joint_state.position = q[self.joints.q_index].tolist()
        request.joint_state.velocity = v[self.joints.v_index].tolist()
        request.joint_state.effort = effort[self.joints.v_index].tolist()
        if self.model.floating_base:
            base = BaseState()
            p, o = base.pose.position, base.pose.orientation
            p.x, p.y, p.z = (float(x) for x in q[:3])
            o.x, o.y, o.z, o.w = (float(x) for x in q[3:7])
            w, u = base.twist.angular, base.twist.linear
            w.x, w.y, w.z, u.x, u.y, u.z = (float(x) for x in v[:6])
            request.base_state = [base]

        def answered(future):
            response = future.result()
            self._accelerations = ((t, float(np.max(np.abs(response.accelerations)))) if response.success
                                   else f"refused: {response.message}")

        self.forward_dynamics.call_async(request).add_done_callback(answered)

    def _finish(self, why: str) -> None:
        """Write the plot and stop the process (exit code 0)."""
        if self._finished:
            return
        self._finished = True
        self.get_logger().info(f"run over after {why}")
        self.write_plot()
        self.finish()

    def write_plot(self) -> None:
        path = self.parameter("plot_file")
        if not path or not self.samples:
            return
        t = np.array([s[0] for s in self.samples])
        positions, efforts = np.array([s[1] for s in self.samples]), np.array([s[2] for s in self.samples])
        energies, momentum = np.array([s[3] for s in self.samples]), np.array([s[4] for s in self.samples])
        names = self.joints.names
        document = svg_plot.document(f"{self.model.name}: {len(t)} samples over {t[-1] - t[0]:.2f} s", t, [
            svg_plot.Panel("joint positions", "rad or m", {n: positions[:, k] for k, n in enumerate(names)}),
            svg_plot.Panel("joint efforts", "N m or N", {n: efforts[:, k] for k, n in enumerate(names)}),
            svg_plot.Panel("energy, change from the start", "J", {
                "kinetic": energies[:, 0] - energies[0, 0], "potential": energies[:, 1] - energies[0, 1],
                "total": energies.sum(axis=1) - energies[0].sum()}),
            svg_plot.Panel("centroidal momentum", "kg m/s, kg m^2/s",
                           {label: momentum[:, k] for k, label in enumerate(("k_x", "k_y", "k_z", "l_x", "l_y",
                                                                              "l_z"))}),
        ])
        try:
            write_file(path, document, "plot")
        except FileProblem as error:
            self.get_logger().error(f"the plot is lost: {error}")
            return
        self.get_logger().info(f"plot written to {path}")

    def destroy_node(self):
        if not getattr(self, "_finished", True):  # Ctrl-C before the end: still the plot
            self._finished = True
            self.write_plot()
        return super().destroy_node()
