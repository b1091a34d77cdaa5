"""Inverse dynamics node: joint_states in; feedforward torques and centroidal
momentum out (default name ``inverse_dynamics``).

For each joint_states message: the model's state from the message by joint
name (and, for a floating base, the latest ``odom``), the accelerations from
``acceleration_source``, one core call (mbs.inverse_dynamics, or
mbs.contact_inverse_dynamics with ``contact_frames``), and the results
published with the input's stamp:

    ~/joint_efforts        sensor_msgs/JointState, the model's joints and efforts
    ~/effort_command       std_msgs/Float64MultiArray in command_joints order
    ~/centroidal_momentum  mbs_dynamics_interfaces/CentroidalMomentum
    ~/base_wrench          geometry_msgs/WrenchStamped, floating base without
                           contacts: the wrench [n; f] the base would need, base axes
    /diagnostics           compute time, counts of what was received, published,
                           dropped, lost on the way and missing by the stamps

Acceleration sources: 'zero' (gravity and velocity-product compensation);
'reference' (the first point of ~/reference: its positions and velocities
replace the measured ones of the joints it names, its accelerations are used,
the other joints keep their measured state and zero acceleration; a
reference older than reference_timeout falls back to 'zero', said once per
fall); 'differentiate' (a first-order low-pass derivative of the measured
velocities over the message stamps, cut-off differentiation_cutoff).

Computed-torque tracking: with acceleration_source 'reference' and
position_gains or velocity_gains not all 0, the measured state is kept and
a = a_ref + K_d (v_ref - v) + K_p (q_ref - q) on the joints the reference
names (mbs_dynamics.algorithms.tracking); a floating base is not tracked (its rows are
what the contacts must provide). friction_compensation adds the joint friction
torques of the URDF's <dynamics> and <mbs:friction> (mbs.joint_friction_torques:
Coulomb, Stribeck, viscous, offset) at the measured or the reference velocities; the armature (transmissions, or the
armature_joints and armature parameters) is part of the model.

Bad input never stops the node: a message with a stamp older than the last
one, a missing joint, wrong array lengths, non-finite values, more names than
the model's cap (JointMap.max_names), a state too large to compute with, or
(floating base) no odometry yet is dropped and counted, with a throttled
warning; joint names the model does not know are ignored, warned once. Stamps
that go back for good (a simulator's ~/reset, a bag replayed, or one bad stamp
far in the future) are followed after a jump back of more than
STAMP_JUMP_BACK or LATE_IN_A_ROW late messages in a row, said each time.
command_joints and gain_joints name each joint once. A new robot_description
at run time is refused with a warning: the node keeps the model it started
with (restart it to load another robot).

What never arrives is counted too (input_loss): joint_states and odom
messages lost on the way (gaps in each publisher's sequence numbers: 'lost_*'),
and the messages missing from the joint_states stream at its rate, estimated
from the stamps of the messages in order (expected_rate, or the period
learned from them: 'input_gaps', 'missed_estimate', 'input_pauses').

The outputs are published as their serialized bytes (ros.serialized); with
realtime_priority the thread that serves joint_states and the middleware's
run SCHED_FIFO (spinning.schedule_realtime), ahead of every normally
scheduled process, when the node may (else it says so).
"""
from __future__ import annotations

import time
from array import array
from dataclasses import dataclass

import numpy as np
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.experimental import EventsExecutor
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

import mbs_dynamics as mbs
from mbs_dynamics import warmup
from mbs_dynamics.algorithms.differentiation import FilteredDerivative
from mbs_dynamics.algorithms.joint_friction import SMOOTHING_VELOCITY
from mbs_dynamics.ros.conversions import InvalidInput, base_state, stamp_seconds
from mbs_dynamics.algorithms.tracking import computed_torque_acceleration
from mbs_dynamics.ros.input_loss import StampGaps
from mbs_dynamics.ros.parameters import (EMPTY_DOUBLE_ARRAY, EMPTY_STRING_ARRAY, ParameterSpec, diagnostics_period,
                                         realtime_priority)
from mbs_dynamics.ros.robot_node import WARNING_PERIOD, RobotNode, timing_values, timings
from mbs_dynamics.ros.serialized import SerializedMessage
from mbs_dynamics.ros.spinning import node_main
from mbs_dynamics.warmup import preload
from mbs_dynamics_interfaces.msg import CentroidalMomentum

# A 1 kHz stream: never block the publisher (best effort matches any); by
# default a queue that outlasts a 1 s stall of the node's process (the
# middleware keeps only `depth` messages the node has not taken: TALOS at
# 1 kHz beside two CPU hogs lost 6.5-13 % of its joint_states at depth 100,
# none at 1000); input_queue_depth sets it.
STREAM_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)
COMMAND_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=50, reliability=ReliabilityPolicy.RELIABLE)
ACCELERATION_SOURCES = ("zero", "reference", "differentiate")
FRICTION_COMPENSATIONS = ("none", "measured", "reference")
CONTACT_TYPES = ("point", "frame")
# A joint_states stamp this much (s) before the last one means time went back;
# so do this many late messages in a row: the node then follows the new stamps.
STAMP_JUMP_BACK = 1.0
LATE_IN_A_ROW = 3


@dataclass(frozen=True)
class InverseDynamicsSettings:
    """What the callbacks read: the parameters of the same names, checked,
    and what they make (command_order, the gains (nv,), contacts)."""

    acceleration_source: str
    reference_timeout: float
    differentiation_cutoff: float
    command_order: np.ndarray  # the command's values -> velocity indices
    clamp_to_effort_limits: bool
    contacts: tuple
    diagnostics_period: float
    expected_rate: float
    friction_compensation: str
    friction_smoothing: float
    position_gains: np.ndarray
    velocity_gains: np.ndarray
    tracking: bool  # any gain > 0: computed torque toward the reference


class InverseDynamicsNode(RobotNode):
    # rclpy's executor in C++: a joint_states message costs it tens of microseconds, where the Python executors
    # rebuild their wait set for each one (about 0.4 ms of CPU)
    EXECUTOR = EventsExecutor
    PARAMETERS = (
        ParameterSpec("acceleration_source", "zero",
                      "Joint accelerations used: 'zero' (gravity and velocity-product compensation), "
                      "'reference' (from ~/reference) or 'differentiate' (filtered derivative of the "
                      "measured velocities)."),
        ParameterSpec("reference_timeout", 0.1,
                      "A reference older than this (s) is stale: fall back to 'zero'.", bounds=(1e-4, 3600.0)),
        ParameterSpec("differentiation_cutoff", 50.0,
                      "Cut-off frequency (Hz) of the velocity-derivative filter.", bounds=(0.01, 1e4)),
        ParameterSpec("command_joints", EMPTY_STRING_ARRAY,
                      "Joint order of ~/effort_command; empty = the model's joint order."),
        ParameterSpec("clamp_to_effort_limits", False,
                      "Clamp efforts to the URDF effort limits (reported)."),
        ParameterSpec("contact_frames", EMPTY_STRING_ARRAY,
                      "Frames in contact (floating base): contact-consistent inverse dynamics; "
                      "empty = none."),
        ParameterSpec("friction_compensation", "none",
                      "Add the joint friction torques (URDF <dynamics friction damping> and <mbs:friction>: "
                      "Coulomb and Stribeck smoothed over friction_smoothing, viscous, offset): 'none', "
                      "'measured' (at the measured velocities) or 'reference' (at the reference's velocities while "
                      "it is fresh, else the measured)."),
        ParameterSpec("friction_smoothing", SMOOTHING_VELOCITY,
                      "Velocity (rad/s or m/s) over which the Coulomb friction compensation goes from -friction "
                      "to +friction (tanh).", bounds=(1e-6, 100.0)),
        ParameterSpec("gain_joints", EMPTY_STRING_ARRAY,
                      "Joint order of position_gains and velocity_gains; empty = the model's joint order."),
        ParameterSpec("position_gains", EMPTY_DOUBLE_ARRAY,
                      "Computed-torque K_p (1/s^2) with acceleration_source 'reference': empty = 0 (pure "
                      "feedforward), one value for every joint, or one per gain_joints."),
        ParameterSpec("velocity_gains", EMPTY_DOUBLE_ARRAY,
                      "Computed-torque K_d (1/s), as position_gains."),
        ParameterSpec("contact_type", "point",
                      "Contacts at contact_frames: 'point' (a force at each frame origin: feet) or 'frame' "
                      "(a wrench: soles)."),
        ParameterSpec("input_queue_depth", STREAM_QOS.depth,
                      "Messages of joint_states (and odom) kept while the node cannot take them (best-effort, "
                      "keep last): the default outlasts a 1 s stall at 1 kHz; a small queue keeps the efforts "
                      "fresh when the node falls behind (~/effort_command carries no stamp) and loses the rest "
                      "(counted: lost_joint_states).", read_only=True, bounds=(1, 100_000)),
        ParameterSpec("expected_rate", 0.0,
                      "Rate (Hz) of joint_states, by which the messages missing from the stream are counted "
                      "(missed_estimate in the diagnostics); 0 = learned from the stamps.", bounds=(0.0, 1e6)),
        realtime_priority(),
        diagnostics_period(),
    )

    def on_robot(self, robot) -> None:
        preload(self.model, (warmup.inverse_dynamics, warmup.centroidal, warmup.contact_inverse))
        self.compute_times = timings()
        self._last_stamp = -np.inf
        self._late = 0  # late messages in a row
        self._stamp_gaps = StampGaps(self._expected_period(self.settings))
        self._odometry = None
        self._reference = None
        self._reference_stale = False
        self._velocity_derivative = FilteredDerivative(self.settings.differentiation_cutoff)
        self._priority_pending = self.parameter("realtime_priority") > 0  # set by the first joint_states callback
        self._messages()
        self.check_parameters_at_run_time()
        self.efforts_publisher = self.create_publisher(JointState, "~/joint_efforts", COMMAND_QOS)
        self.command_publisher = self.create_publisher(Float64MultiArray, "~/effort_command", COMMAND_QOS)
        self.momentum_publisher = self.create_publisher(CentroidalMomentum, "~/centroidal_momentum", COMMAND_QOS)
        self.wrench_publisher = (self.create_publisher(WrenchStamped, "~/base_wrench", COMMAND_QOS)
                                 if self.model.floating_base else None)
        stream = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=self.parameter("input_queue_depth"),
                            reliability=ReliabilityPolicy.BEST_EFFORT)
        self.create_counted_subscription(JointState, "joint_states", self._process, stream)
        if self.model.floating_base:
            self.create_counted_subscription(Odometry, "odom", self._on_odometry, stream)
        self.create_subscription(JointTrajectory, "~/reference", self._on_reference, COMMAND_QOS)
        self.report_diagnostics("inverse dynamics")
        self.get_logger().info(
            f"inverse dynamics of {self.model.nv} coordinates, accelerations '{self.settings.acceleration_source}'"
            + (f", contacts at {[c.frame for c in self.settings.contacts]}" if self.settings.contacts else ""))

    # --- parameters -----------------------------------------------------

    def settings_with(self, changes: dict) -> InverseDynamicsSettings:
        value = self.parameter_values(changes, (
            "acceleration_source", "reference_timeout", "differentiation_cutoff", "command_joints",
            "clamp_to_effort_limits", "contact_frames", "contact_type", "diagnostics_period", "expected_rate",
            "friction_compensation", "friction_smoothing", "gain_joints", "position_gains", "velocity_gains"))
        if value["acceleration_source"] not in ACCELERATION_SOURCES:
            raise ValueError(f"acceleration_source must be one of {ACCELERATION_SOURCES}, "
                             f"got '{value['acceleration_source']}'")
        if value["contact_type"] not in CONTACT_TYPES:
            raise ValueError(f"contact_type must be one of {CONTACT_TYPES}, got '{value['contact_type']}'")
        command_order = self.joints.command_order(value["command_joints"])
        if value["friction_compensation"] not in FRICTION_COMPENSATIONS:
            raise ValueError(f"friction_compensation must be one of {FRICTION_COMPENSATIONS}, "
                             f"got '{value['friction_compensation']}'")
        try:  # checked even while no gains use it: gains set later would find it wrong
            gain_order = self.joints.order(list(value["gain_joints"]) or list(self.joints.names))
        except ValueError as error:
            raise ValueError(f"gain_joints: {error}") from None
        position_gains, velocity_gains = (
            self._gains(name, value[name], gain_order) for name in ("position_gains", "velocity_gains"))
        frames = list(value["contact_frames"])
        if frames and not self.model.floating_base:
            raise ValueError("contact_frames need a floating base (floating_base: true)")
        unknown = [frame for frame in frames if frame not in self.model.frames]
        if unknown:
            raise ValueError(f"contact_frames: model '{self.model.name}' has no frames {unknown}")
        contact = mbs.PointContact if value["contact_type"] == "point" else mbs.FrameContact
        return InverseDynamicsSettings(
            acceleration_source=value["acceleration_source"], reference_timeout=value["reference_timeout"],
            differentiation_cutoff=value["differentiation_cutoff"], command_order=command_order,
            clamp_to_effort_limits=value["clamp_to_effort_limits"],
            contacts=tuple(contact(frame) for frame in frames), diagnostics_period=value["diagnostics_period"],
            expected_rate=value["expected_rate"], friction_compensation=value["friction_compensation"],
            friction_smoothing=value["friction_smoothing"], position_gains=position_gains,
            velocity_gains=velocity_gains, tracking=bool(np.any(position_gains) or np.any(velocity_gains)))

    def _gains(self, name: str, values, index: np.ndarray) -> np.ndarray:
        """(nv,) gains of the parameter `name` (its description), `index` the
        v indices of gain_joints; ValueError naming it."""
        values = np.asarray(list(values), dtype=float)
        if not np.all(np.isfinite(values) & (values >= 0.0)):
            raise ValueError(f"{name} must be finite and >= 0, got {values.tolist()}")
        gains = np.zeros(self.model.nv)
        if values.size == 1:
            gains[self.joints.v_index] = values[0]
        elif values.size:
            if values.size != index.size:
                raise ValueError(f"{name} has {values.size} values for {index.size} joints (gain_joints)")
            gains[index] = values
        return gains

    # --- inputs -----------------------------------------------------------

    def _on_odometry(self, message: Odometry) -> None:
        try:
            self._odometry = (*base_state(message.pose.pose, message.twist.twist), message.header.frame_id)
        except InvalidInput as error:
            self.drop(error.reason, f"odom: {error}")

    def _on_reference(self, message: JointTrajectory) -> None:
        try:
            if not message.points:
                raise InvalidInput("invalid", "~/reference has no points")
            match = self.joints.match(message.joint_names)
            self.warn_unknown_joints(match.unknown)
            point = message.points[0]
            arrays = {}
            for field in ("positions", "velocities", "accelerations"):
                values = np.asarray(getattr(point, field), dtype=float)
                if values.size and values.shape[0] != match.size:
                    raise InvalidInput("invalid", f"~/reference has {values.shape[0]} {field} for "
                                                  f"{match.size} joints")
                if not np.all(np.isfinite(values)):
                    raise InvalidInput("invalid", f"~/reference {field} are not finite")
                arrays[field] = values[match.message_index] if values.size else None
            self._reference = (self.get_clock().now(), match, arrays)
        except InvalidInput as error:
            self.drop(error.reason, str(error))

    def _process(self, message: JointState) -> None:
        start = time.perf_counter()
        if self._priority_pending:
            self._priority_pending = False
            self.raise_priority()
        self.counts["received"] += 1
        try:
            self._compute_and_publish(message, self._stamp(message))
            self.counts["published"] += 1
        except InvalidInput as error:
            self.drop(error.reason, str(error))
        except ValueError as error:  # the core refused the state: says why
            self.drop("invalid", f"joint_states: {error}")
        except Exception as error:  # noqa: BLE001  a message never takes the node down
            self.drop("error", f"joint_states: {type(error).__name__}: {error}")
        self.compute_times.append(time.perf_counter() - start)

    def apply_settings(self, settings: InverseDynamicsSettings, changed: set) -> None:
        super().apply_settings(settings, changed)
        if "command_joints" in changed:
            self._command = self._command_message(settings)
        self._velocity_derivative.cutoff = settings.differentiation_cutoff
        self._stamp_gaps.given_period = self._expected_period(settings)

    @staticmethod
    def _expected_period(settings: InverseDynamicsSettings) -> float | None:
        """The period (s) of joint_states that expected_rate gives (None: learn it)."""
        return 1.0 / settings.expected_rate if settings.expected_rate > 0 else None

    # --- the computation ----------------------------------------------------

    def _stamp(self, message: JointState) -> float:
        """The stamp (s) of a joint_states message, judged before its content:
        InvalidInput for a late one; stamps that went back for good are
        followed. The stream's gaps are counted (StampGaps)."""
        stamp = stamp_seconds(message.header.stamp)
        if stamp < self._last_stamp:
            self._late += 1
            if self._last_stamp - stamp <= STAMP_JUMP_BACK and self._late < LATE_IN_A_ROW:
                self._stamp_gaps.late()
                raise InvalidInput("stamp_backwards", f"joint_states stamp {stamp:.6f} s is before the last one "
                                                      f"({self._last_stamp:.6f} s)")
            self.counts["stamp_jumps_back"] += 1
            self.get_logger().warning(
                f"joint_states stamps went back from {self._last_stamp:.6f} s to {stamp:.6f} s (a simulator reset, "
                "a bag replayed, or one bad stamp before): following the new stamps",
                throttle_duration_sec=WARNING_PERIOD)
            self._velocity_derivative.reset()
            self._stamp_gaps.restart()
        self._late = 0
        self._last_stamp = stamp
        missing = self._stamp_gaps.in_order(stamp)
        if missing:
            gaps = self._stamp_gaps
            self.get_logger().warning(
                f"joint_states: {missing} message(s) missing from the stream by its stamps (period "
                f"{gaps.period * 1e3:.4g} ms; {gaps.missed} so far)", throttle_duration_sec=WARNING_PERIOD)
        return stamp

    def _state(self, message: JointState) -> tuple[np.ndarray, np.ndarray]:
        """(q, v) of a joint_states message (and odom)."""
        return self.measured(message, None if self._odometry is None else self._odometry[:2])

    def _accelerations(self, q, v, stamp) -> tuple[np.ndarray, np.ndarray | None]:
        """a from the acceleration source, and the reference's velocities (None
        without a fresh reference). Without gains, a reference's positions and
        velocities replace the measured ones in q, v (feedforward at the
        reference); with gains, q, v stay measured and a is the computed-torque
        law's (tracking.computed_torque_acceleration)."""
        source = self.settings.acceleration_source
        if source == "differentiate":
            return self._velocity_derivative.update(stamp, v), None
        a = np.zeros(self.model.nv)
        if source != "reference":
            return a, None
        if self._reference is None:
            self._say_stale("no reference received yet: using zero accelerations")
            return a, None
        received, match, arrays = self._reference
        age = (self.get_clock().now() - received).nanoseconds * 1e-9
        if age > self.settings.reference_timeout:
            self._say_stale(f"the reference is {age:.3g} s old (reference_timeout "
                            f"{self.settings.reference_timeout:g} s): using zero accelerations")
            return a, None
        if self._reference_stale:
            self.get_logger().info("the reference is fresh again")
            self._reference_stale = False
        q_ref, v_ref = q.copy(), v.copy()
        if arrays["positions"] is not None:
            q_ref[match.q_index] = arrays["positions"]
        if arrays["velocities"] is not None:
            v_ref[match.v_index] = arrays["velocities"]
        if arrays["accelerations"] is not None:
            a[match.v_index] = arrays["accelerations"]
        if self.settings.tracking:
            return computed_torque_acceleration(self.model, q, v, q_ref, v_ref, a, self.settings.position_gains,
                                                self.settings.velocity_gains), v_ref
        q[:], v[:] = q_ref, v_ref
        return a, v_ref

    def _compute_and_publish(self, message: JointState, stamp: float) -> None:
        """Everything computed first (the core raises rather than return a NaN),
        then published."""
        q, v = self._state(message)
        measured_v = v.copy()
        a, v_ref = self._accelerations(q, v, stamp)
        settings, model = self.settings, self.model
        if settings.contacts:
            solution = mbs.contact_inverse_dynamics(model, q, v, a, settings.contacts)
            tau = solution[0]
            if not solution.feasible:
                self.counts["infeasible_contacts"] += 1
                self.get_logger().warning(f"contact inverse dynamics: {solution.message}",
                                          throttle_duration_sec=WARNING_PERIOD)
        else:
            tau = mbs.inverse_dynamics(model, q, v, a)
        if settings.friction_compensation != "none":
            friction_v = v_ref if settings.friction_compensation == "reference" and v_ref is not None else measured_v
            tau = tau + mbs.joint_friction_torques(model, friction_v, settings.friction_smoothing)
        if settings.clamp_to_effort_limits:
            over = np.abs(tau) > self.joints.effort_limit
            if over.any():
                self.counts["clamped"] += 1
                names = [self.joints.names[k] for k in np.flatnonzero(over[self.joints.v_index])]
                self.get_logger().warning(f"efforts clamped to the URDF limits: {names}",
                                          throttle_duration_sec=WARNING_PERIOD)
                tau = np.clip(tau, -self.joints.effort_limit, self.joints.effort_limit)
        h, c = mbs.centroidal_state(model, q, v)
        self._publish(message.header.stamp, tau, h, c)

    def _messages(self) -> None:
        """The outgoing messages' bytes, made once and refilled for each input
        (SerializedMessage: rclpy's conversion of a message object at each
        publish() cost more than the dynamics)."""
        model = self.model
        self._efforts = SerializedMessage(
            JointState(name=list(self.joints.names), effort=array("d", bytes(8 * len(self.joints.names)))), ["effort"])
        self._command = self._command_message(self.settings)
        self._momentum, self._momentum_frame = None, None  # made for the frame of the first output (_momentum_for)
        wrench = WrenchStamped()
        wrench.header.frame_id = model.description.root
        self._wrench = SerializedMessage(wrench, ["wrench.torque", "wrench.force"])

    @staticmethod
    def _command_message(settings: InverseDynamicsSettings) -> SerializedMessage:
        """~/effort_command's bytes: one value per command joint."""
        return SerializedMessage(Float64MultiArray(data=array("d", bytes(8 * settings.command_order.size))), ["data"],
                                 stamp=None)

    def _momentum_for(self, frame_id: str) -> SerializedMessage:
        """~/centroidal_momentum's bytes in `frame_id` (made again when the frame changes)."""
        if self._momentum is None or frame_id != self._momentum_frame:
            momentum = CentroidalMomentum(total_mass=self.model.total_mass)
            momentum.header.frame_id = frame_id
            self._momentum = SerializedMessage(
                momentum, ["com_position", "com_velocity", "linear_momentum", "angular_momentum"])
            self._momentum_frame = frame_id
        return self._momentum

    def _publish(self, stamp, tau, h, c) -> None:
        model = self.model
        efforts = self._efforts
        efforts.set_stamp(stamp)
        np.take(tau, self.joints.v_index, out=efforts.values["effort"])
        self.efforts_publisher.publish(efforts.data())
        command = self._command
        np.take(tau, self.settings.command_order, out=command.values["data"])
        self.command_publisher.publish(command.data())
        momentum = self._momentum_for(self._odometry[2] if model.floating_base else model.description.root)
        momentum.set_stamp(stamp)
        values = momentum.values
        values["com_position"][:] = c
        values["com_velocity"][:] = h[3:] / model.total_mass if model.total_mass > 0 else 0.0
        values["linear_momentum"][:] = h[3:]
        values["angular_momentum"][:] = h[:3]
        self.momentum_publisher.publish(momentum.data())
        if self.wrench_publisher is not None and not self.settings.contacts:
            base = model.v_index("root_joint")
            wrench = self._wrench
            wrench.set_stamp(stamp)
            wrench.values["wrench.torque"][:] = tau[base:base + 3]
            wrench.values["wrench.force"][:] = tau[base + 3:base + 6]
            self.wrench_publisher.publish(wrench.data())

    # --- reporting ----------------------------------------------------------

    def _say_stale(self, message: str) -> None:
        self.counts["stale_reference"] += 1
        if not self._reference_stale:
            self._reference_stale = True
            self.get_logger().warning(message)

    def diagnostics(self) -> tuple[str, dict, bool]:
        dropped, lost, gaps = self.dropped(), self.lost(), self._stamp_gaps
        values = {"received": self.counts["received"], "published": self.counts["published"], "dropped": dropped,
                  "lost": lost}
        values.update({key: count for key, count in sorted(self.counts.items()) if key not in values})
        period = gaps.period
        values.update(input_gaps=gaps.gaps, missed_estimate=gaps.missed, input_pauses=gaps.pauses,
                      input_period_us="unknown" if period is None else f"{period * 1e6:.1f}",
                      input_regular=gaps.regular)
        values.update(timing_values("compute", self.compute_times))
        message = f"{self.counts['published']} published, {dropped} dropped, {lost} lost"
        if gaps.missed:
            message += f", {gaps.missed} missing by the stamps"
        return message, values, dropped > 0 or lost > 0 or gaps.missed > 0


main = node_main(InverseDynamicsNode, "inverse_dynamics")

if __name__ == "__main__":
    main()
