"""Dynamics server node: forward, inverse, contact and impact dynamics as
services for planners (default name ``dynamics_server``).

    ~/forward_dynamics             ForwardDynamics: a from (q, v, efforts);
                                   with contacts, contact forward dynamics
    ~/inverse_dynamics             InverseDynamics: efforts from (q, v, a); with
                                   contacts (floating base), contact-consistent
    ~/impact                       Impact: the velocity jump of closing contacts
    ~/dynamics_terms               DynamicsTerms: M, h, g, A_G, frame Jacobians
    ~/inverse_dynamics_trajectory  InverseDynamicsTrajectory: efforts along a
                                   trajectory, and where they exceed the limits
    ~/rollout                      Rollout: N simulated futures of T steps
                                   (mbs.rollout), each from its own state
                                   under its own efforts or PD targets

Every request names the model's joints (any order; the model's mimic joints
may be named and are ignored); velocities, efforts and accelerations may be
left empty for zero. A floating base comes as pose and body twist. A request
that cannot be answered (an unknown or missing joint, wrong lengths, NaN, an
unknown contact frame, rank-deficient contacts, a base quaternion far from
unit length, a singular mass matrix, infeasible contact forces, a state too
large to compute with) gets ``success: false`` and a message saying what is
wrong; the node goes on. No answer carries a NaN or an infinity: one that
would is refused.

What one request may cost is bounded: at most JointMap.max_names names
(4096, or 4 per URDF joint for a model of more than 1024 joints),
max_contacts contacts, MAX_FRAMES frames, max_trajectory_points points,
max_rollout_steps steps of all rollouts together. A large request (LARGE:
more than 8 contacts, 100 frames, 1000 points or 10000 rollout steps) is
answered one at a time; another one meanwhile is refused as busy, so that
cheap requests keep flowing on the other threads.

The services run in a reentrant callback group, so a multi-threaded executor
serves several clients at once. The model is shared read-only; the core's
scratch memory is per thread, and a request's answer depends on the request
alone.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, fields

import numpy as np
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor

import mbs_dynamics as mbs
from mbs_dynamics import warmup
from mbs_dynamics.algorithms.kinematics import REPRESENTATIONS
from mbs_dynamics.multibody.model import ROOT_JOINT
from mbs_dynamics.ros.conversions import (InvalidInput, contact_wrenches, contacts_from_messages,
                                         first_nonfinite_field, named_values, point_values, request_state, set_vector,
                                         strict_match, vector_values)
from mbs_dynamics.ros.parameters import ParameterSpec, diagnostics_period
from mbs_dynamics.ros.robot_node import WARNING_PERIOD, RobotNode, timing_values, timings
from mbs_dynamics.ros.spinning import node_main
from mbs_dynamics.warmup import preload
from mbs_dynamics_interfaces.srv import (DynamicsTerms, ForwardDynamics, Impact, InverseDynamics,
                                        InverseDynamicsTrajectory, Rollout)

CONTACT_METHODS = ("kkt", "schur", "nullspace")
# The most frames one ~/dynamics_terms request may ask Jacobians of.
MAX_FRAMES = 1000
# Beyond these sizes a request is large: one at a time (measured on TALOS:
# 8 contacts 2 ms with friction cones, 16 84 ms, 24 1.4 s; 100 Jacobians 1 ms;
# 1000 points 6 ms, 100000 0.3 s with the answer's lists).
LARGE = {"contacts": 8, "frames": 100, "points": 1000, "rollout steps": 10000}
# A ~/rollout request's dt when it gives 0, and the largest it may give (s).
ROLLOUT_DT = 1e-3
MAX_ROLLOUT_DT = 1.0



@dataclass(frozen=True)
class ServerSettings:
    """What the services read (the parameters of the same names)."""

    quaternion_tolerance: float
    max_trajectory_points: int
    max_rollout_steps: int
    max_contacts: int
    contact_method: str
    allow_rank_deficient_contacts: bool
    diagnostics_period: float


class DynamicsServerNode(RobotNode):
    EXECUTOR = MultiThreadedExecutor  # several clients served at once
    PARAMETERS = (
        ParameterSpec("quaternion_tolerance", 1e-3,
                      "A base orientation whose quaternion norm differs from 1 by more than this is "
                      "refused; closer ones are normalised.", bounds=(1e-12, 0.1)),
        ParameterSpec("max_trajectory_points", 100000,
                      "Longest trajectory ~/inverse_dynamics_trajectory accepts.", bounds=(1, 1_000_000)),
        ParameterSpec("max_rollout_steps", 100000,
                      "Most steps one ~/rollout request may ask for, all its rollouts together (rollouts x "
                      "steps; TALOS: some 15 us a step per core, 77 numbers a state in the answer).",
                      bounds=(1, 10_000_000)),
        ParameterSpec("max_contacts", 16,
                      "Most contacts one request may carry (friction cones cost: 16 take 0.1 s, 24 over 1 s).",
                      bounds=(1, 256)),
        ParameterSpec("contact_method", "kkt",
                      "How ~/forward_dynamics solves contacts: 'kkt' (saddle-point system), 'schur' "
                      "(operational space) or 'nullspace'."),
        ParameterSpec("allow_rank_deficient_contacts", False,
                      "Answer rank-deficient contact sets (redundant contacts) of ~/forward_dynamics and "
                      "~/impact with the minimum-norm forces (noted in the message) instead of refusing them."),
        diagnostics_period(),
    )

    def on_robot(self, robot) -> None:
        model = self.model
        self.base = slice(model.v_index(ROOT_JOINT), model.v_index(ROOT_JOINT) + 6) if model.floating_base else None
        self.limit = self.joints.effort_limit[self.joints.v_index]
        preload(model, (warmup.inverse_dynamics, warmup.forward_dynamics, warmup.centroidal, warmup.kinematics,
                        warmup.mass_matrix, warmup.contact_forward, warmup.contact_inverse, warmup.rollouts))
        self._lock = threading.Lock()
        self._large = threading.Lock()  # held while a large request is answered
        self.answer_times = defaultdict(timings)
        self.check_parameters_at_run_time()
        group = ReentrantCallbackGroup()
        for kind, name, compute in (
                (ForwardDynamics, "forward_dynamics", self._forward_dynamics),
                (InverseDynamics, "inverse_dynamics", self._inverse_dynamics),
                (Impact, "impact", self._impact),
                (DynamicsTerms, "dynamics_terms", self._dynamics_terms),
                (InverseDynamicsTrajectory, "inverse_dynamics_trajectory", self._inverse_dynamics_trajectory),
                (Rollout, "rollout", self._rollout)):
            self.create_service(kind, f"~/{name}", self._answer(kind, name, compute), callback_group=group)
        self.report_diagnostics("dynamics server")
        self.get_logger().info(f"serving the dynamics of {model.nv} coordinates on {self.get_fully_qualified_name()}/"
                               "{forward_dynamics, inverse_dynamics, impact, dynamics_terms, "
                               "inverse_dynamics_trajectory, rollout}")

    # --- parameters -------------------------------------------------------

    def settings_with(self, changes: dict) -> ServerSettings:
        settings = ServerSettings(**self.parameter_values(changes, (f.name for f in fields(ServerSettings))))
        if settings.contact_method not in CONTACT_METHODS:
            raise ValueError(f"contact_method must be one of {CONTACT_METHODS}, got '{settings.contact_method}'")
        return settings

    # --- answering ----------------------------------------------------------

    def _answer(self, kind, name: str, compute):
        """The service callback: compute(request, response, settings), or, when
        the request cannot be answered, an empty response that says why."""

        def callback(request, response):
            start = time.perf_counter()
            settings = self.settings
            large = False
            try:
                large = self._admit(request, settings)
                compute(request, response, settings)
                nonfinite = first_nonfinite_field(response)
                if nonfinite is not None:  # the core raises first; this is the last line of defence
                    raise InvalidInput("invalid", f"the answer's {nonfinite} is not finite: the request's values are "
                                                  "too large to compute with")
                response.success = True
            except (InvalidInput, ValueError) as error:  # the request's fault: the core says what is wrong
                response = kind.Response(success=False, message=str(error))
            except Exception as error:  # noqa: BLE001  a request never takes the node down
                response = kind.Response(success=False, message=f"internal error: {type(error).__name__}: {error}")
                self.get_logger().error(f"{name}: {response.message}", throttle_duration_sec=WARNING_PERIOD)
            finally:
                if large:
                    self._large.release()
            elapsed = time.perf_counter() - start
            with self._lock:
                self.counts[f"{name}_calls"] += 1
                if not response.success:
                    self.counts[f"{name}_refused"] += 1
                self.answer_times[name].append(elapsed)
            if not response.success:
                self.get_logger().warning(f"{name} refused: {response.message}", throttle_duration_sec=WARNING_PERIOD)
            return response

        return callback

    def _admit(self, request, settings) -> bool:
        """Refuse a request beyond the limits (InvalidInput); True when it is
        large and took the large-request lock (released by the caller), refused
        as busy while another large one is answered."""
        sizes = {"contacts": len(getattr(request, "contacts", ())), "frames": len(getattr(request, "frames", ())),
                 "points": len(request.trajectory.points) if hasattr(request, "trajectory") else 0,
                 "rollout steps": request.rollouts * request.steps if hasattr(request, "rollouts") else 0}
        limits = {"contacts": settings.max_contacts, "frames": MAX_FRAMES,
                  "points": settings.max_trajectory_points, "rollout steps": settings.max_rollout_steps}
        for what, size in sizes.items():
            if size > limits[what]:
                raise InvalidInput("too_large", f"the request has {size} {what}"
                                   + (f" ({request.rollouts} rollouts x {request.steps} steps)"
                                      if what == "rollout steps" else "") + f": at most {limits[what]}"
                                   + (" (max_contacts)" if what == "contacts" else
                                      " (max_trajectory_points)" if what == "points" else
                                      " (max_rollout_steps)" if what == "rollout steps" else ""))
        large = [f"{size} {what}" for what, size in sizes.items() if size > LARGE[what]]
        if not large:
            return False
        if not self._large.acquire(blocking=False):
            raise InvalidInput("busy", f"busy: another large request is being answered; this one ({', '.join(large)}) "
                                       "is refused, retry when it is done")
        return True

    def _state(self, request, settings) -> tuple[np.ndarray, np.ndarray, object]:
        return request_state(self.joints, request.joint_state, request.base_state, settings.quaternion_tolerance)

    def _contacts(self, messages):
        if not len(messages):
            return None
        return contacts_from_messages(self.model, messages)

    def _check_rank(self, solution, settings) -> str:
        """'' or the note on a rank-deficient answer; refuses one unless allowed."""
        if not solution.rank_deficient:
            return ""
        note = (f"the contacts are rank-deficient: their {solution.rows} constraint rows have rank "
                f"{solution.rank} (redundant contacts, or directions the joints cannot move)")
        if not settings.allow_rank_deficient_contacts:
            raise InvalidInput("rank_deficient", f"{note}; the forces are not unique. Remove the redundant "
                                                 "contacts, or set allow_rank_deficient_contacts to get the "
                                                 "minimum-norm forces")
        return f"{note}: the forces are the minimum-norm solution"

    def _joint_values(self, values) -> list[float]:
        """The model's joints' entries of a vector over v, in JointMap order."""
        return values[self.joints.v_index].tolist()

    def _forward_dynamics(self, request, response, settings) -> None:
        model = self.model
        q, v, match = self._state(request, settings)
        tau = np.zeros(model.nv)
        efforts = named_values(match, request.joint_state.effort, "joint_state effort")
        if efforts is not None:
            tau[match.v_index] = efforts
        tau[self._base_part("base_wrench", request.base_wrench)] = self._base_vector(request.base_wrench, "base_wrench")
        contacts = self._contacts(request.contacts)
        if contacts is None:
            a = mbs.forward_dynamics(model, q, v, tau)
        else:
            solution = mbs.contact_forward_dynamics(model, q, v, tau, contacts[0], method=settings.contact_method)
            response.message = self._check_rank(solution, settings)
            a = solution[0]
            response.contact_wrenches = contact_wrenches(request.contacts, solution[1])
        response.joint_names = list(self.joints.names)
        response.accelerations = self._joint_values(a)
        if self.base is not None:
            set_vector(response.base_acceleration.angular, a[self.base][:3])
            set_vector(response.base_acceleration.linear, a[self.base][3:])

    def _inverse_dynamics(self, request, response, settings) -> None:
        model = self.model
        q, v, match = self._state(request, settings)
        a = np.zeros(model.nv)
        accelerations = named_values(match, request.accelerations, "accelerations")
        if accelerations is not None:
            a[match.v_index] = accelerations
        a[self._base_part("base_acceleration", request.base_acceleration)] = self._base_vector(
            request.base_acceleration, "base_acceleration")
        contacts = self._contacts(request.contacts)
        if contacts is None:
            tau = mbs.inverse_dynamics(model, q, v, a)
            base_wrench = tau[self.base] if self.base is not None else None
        else:
            if not model.floating_base:
                raise InvalidInput("invalid", f"model '{model.name}' has a fixed base: contacts need a floating "
                                              "base (floating_base: true); leave contacts empty")
            core_contacts, friction, normals = contacts
            solution = mbs.contact_inverse_dynamics(model, q, v, a, core_contacts, friction=friction, normal=normals)
            if not solution.feasible:
                raise InvalidInput("infeasible", f"{solution.message} (friction coefficients {friction.tolist()}; "
                                                 "0 means frictionless)")
            tau, base_wrench = solution[0], solution.base_wrench
            response.contact_wrenches = contact_wrenches(request.contacts, solution[1])
        response.joint_names = list(self.joints.names)
        response.efforts = self._joint_values(tau)
        if base_wrench is not None:
            set_vector(response.base_wrench.torque, base_wrench[:3])
            set_vector(response.base_wrench.force, base_wrench[3:])

    def _impact(self, request, response, settings) -> None:
        q, v, _ = self._state(request, settings)
        contacts = self._contacts(request.contacts)
        if contacts is None:
            raise InvalidInput("invalid", "an impact needs at least one contact")
        if not 0.0 <= request.restitution <= 1.0:  # NaN fails too
            raise InvalidInput("invalid", f"restitution must be in [0, 1], got {request.restitution}")
        solution = mbs.impact(self.model, q, v, contacts[0], request.restitution)
        response.message = self._check_rank(solution, settings)
        v_plus = solution[0]
        response.joint_names = list(self.joints.names)
        response.velocities = self._joint_values(v_plus)
        if self.base is not None:
            set_vector(response.base_twist.angular, v_plus[self.base][:3])
            set_vector(response.base_twist.linear, v_plus[self.base][3:])
        response.impulses = contact_wrenches(request.contacts, solution[1])

    def _dynamics_terms(self, request, response, settings) -> None:
        model = self.model
        q, v, _ = self._state(request, settings)
        representation = request.jacobian_representation or "hybrid"
        if representation not in REPRESENTATIONS:
            raise InvalidInput("invalid", f"jacobian_representation must be one of {REPRESENTATIONS} (or empty "
                                          f"for hybrid), got '{representation}'")
        unknown = [frame for frame in request.frames if frame not in model.frames]
        if unknown:
            raise InvalidInput("unknown_frame", f"model '{model.name}' has no frames {unknown}")
        jacobians = [mbs.frame_jacobian(model, q, frame, representation) for frame in request.frames]
        response.nv = model.nv
        response.joint_names = list(model.joint_names)
        response.velocity_index = [model.v_index(name) for name in model.joint_names]
        response.mass_matrix = mbs.mass_matrix(model, q).ravel().tolist()
        response.nonlinear_effects = mbs.nonlinear_effects(model, q, v).tolist()
        response.gravity_torques = mbs.gravity_torques(model, q).tolist()
        response.centroidal_momentum_matrix = mbs.centroidal_momentum_matrix(model, q).ravel().tolist()
        response.frame_jacobians = np.concatenate([J.ravel() for J in jacobians]).tolist() if jacobians else []

    def _inverse_dynamics_trajectory(self, request, response, settings) -> None:
        model, trajectory = self.model, request.trajectory
        points = trajectory.points
        if not points:
            raise InvalidInput("invalid", "the trajectory has no points")
        match = strict_match(self.joints, trajectory.joint_names, "trajectory.joint_names")
        count = len(points)
        q = np.tile(model.neutral_configuration(), (count, 1))
        v, a = np.zeros((count, model.nv)), np.zeros((count, model.nv))
        q[:, match.q_index] = point_values(match, points, "positions", "trajectory")
        for field, target in (("velocities", v), ("accelerations", a)):
            values = point_values(match, points, field, "trajectory")
            if values is not None:
                target[:, match.v_index] = values
        efforts = mbs.inverse_dynamics(model, q, v, a)[:, self.joints.v_index]
        over_points, over_joints = np.nonzero(np.abs(efforts) > self.limit)
        response.joint_names = list(self.joints.names)
        response.efforts = efforts.ravel().tolist()
        response.violation_points = over_points.tolist()
        response.violation_joints = [self.joints.names[j] for j in over_joints]
        response.violation_efforts = efforts[over_points, over_joints].tolist()
        response.violation_limits = self.limit[over_joints].tolist()
        if over_points.size:
            response.message = (f"{over_points.size} efforts exceed the URDF effort limits, at "
                                f"{np.unique(over_points).size} of {count} points")

    def _rollout(self, request, response, settings) -> None:
        model = self.model
        count, steps, stride = int(request.rollouts), int(request.steps), int(request.stride) or 1
        if count < 1 or steps < 1:
            raise InvalidInput("invalid", f"rollouts and steps must be at least 1, got {count} and {steps}")
        if steps % stride:
            raise InvalidInput("invalid", f"stride {stride} does not divide the {steps} steps")
        dt = request.dt or ROLLOUT_DT
        if not 0.0 < dt <= MAX_ROLLOUT_DT:  # NaN fails too
            raise InvalidInput("invalid", f"dt must be in (0, {MAX_ROLLOUT_DT:g}] s (0: {ROLLOUT_DT:g}), "
                                          f"got {request.dt}")
        q0 = self._rollout_values(request.positions, "positions", (count, model.nq), "nq", required=True)
        v0 = self._rollout_values(request.velocities, "velocities", (count, model.nv), "nv")
        controls = [self._rollout_values(getattr(request, field), field.replace("_", " "), (count, steps, model.nv),
                                         "steps x nv")
                    for field in ("efforts", "position_targets", "velocity_targets")]
        for start, joint in model.quaternions:
            norms = np.linalg.norm(q0[:, start:start + 4], axis=1)
            bad = np.flatnonzero(np.abs(norms - 1.0) > settings.quaternion_tolerance)
            if bad.size:
                raise InvalidInput("invalid", f"positions of rollout {bad[0]}: the quaternion of joint '{joint}' "
                                              f"has norm {norms[bad[0]]:.6g}, more than quaternion_tolerance "
                                              f"({settings.quaternion_tolerance:g}) from 1")
        actuators = mbs.Actuators(list(request.actuated_joints), list(request.stiffness), list(request.damping))
        if not np.isfinite(request.friction) or request.friction < 0:
            raise InvalidInput("invalid", f"friction must be finite and >= 0, got {request.friction}")
        frames, points = list(request.contact_frames), request.contact_points
        if len(points) not in (0, len(frames)):
            raise InvalidInput("invalid", f"contact_points has {len(points)} points for {len(frames)} "
                                          "contact_frames: one each, or none (the frames' origins)")
        if len(frames) > settings.max_contacts:
            raise InvalidInput("too_large", f"the request has {len(frames)} contact frames: at most "
                                            f"{settings.max_contacts} (max_contacts)")
        unknown = [frame for frame in frames if frame not in model.frames]
        if unknown:
            raise InvalidInput("unknown_frame", f"model '{model.name}' has no frames {unknown}")
        contacts = tuple(mbs.PointContact(frame, vector_values(points[k]) if len(points) else (0.0, 0.0, 0.0))
                         for k, frame in enumerate(frames))
        world = mbs.World(mbs.Ground(friction=request.friction) if request.ground else None, contacts)
        result = mbs.rollout(model, q0, v0, controls[0], steps=steps, position_targets=controls[1],
                             velocity_targets=controls[2], world=world, dt=dt, actuators=actuators, stride=stride)
        response.joint_names = list(model.joint_names)
        response.position_index = [model.q_index(name) for name in model.joint_names]
        response.velocity_index = [model.v_index(name) for name in model.joint_names]
        response.nq, response.nv = model.nq, model.nv
        response.positions = result.q.ravel().tolist()
        response.velocities = result.v.ravel().tolist()
        response.contact_forces = result.contact_forces.ravel().tolist()
        response.status = result.status.tolist()
        response.steps_taken = result.steps.tolist()
        response.failures = list(result.failures().values())
        if response.failures:
            response.message = f"{len(response.failures)} of {count} rollouts stopped early (failures)"

    @staticmethod
    def _rollout_values(values, what: str, shape: tuple, per: str, required: bool = False) -> np.ndarray | None:
        """A ~/rollout array of `shape` (rollout first), finite; None when
        empty and not required."""
        values = np.asarray(values, dtype=float)
        size = int(np.prod(shape))
        if values.size == 0 and not required:
            return None
        if values.size != size:
            raise InvalidInput("invalid", f"{what} has {values.size} values: {shape[0]} rollouts x {per} = {size} "
                                          "expected" + ("" if required else " (or none)"))
        values = values.reshape(shape)
        if not np.all(np.isfinite(values)):
            where = np.argwhere(~np.isfinite(values))[0].tolist()
            raise InvalidInput("invalid", f"{what} has a non-finite value ({values[tuple(where)]}) at rollout "
                                          f"{where[0]}" + (f", step {where[1]}" if len(shape) == 3 else "")
                                          + f", coordinate {where[-1]}")
        return values

    # --- helpers ------------------------------------------------------------

    def _base_part(self, field: str, values) -> slice:
        """Where a request's floating-base vector goes in v: the base's 6
        coordinates, or nothing when it is empty; refused on a fixed base."""
        if not len(values):
            return slice(0, 0)
        if self.base is None:
            raise InvalidInput("invalid", f"model '{self.model.name}' has a fixed base: {field} must be empty")
        return self.base

    @staticmethod
    def _base_vector(values, field: str) -> np.ndarray:
        """[angular; linear] of a Wrench[<=1] or Accel[<=1] (empty: none)."""
        if not len(values):
            return np.zeros(0)
        value = values[0]
        first, second = (value.torque, value.force) if hasattr(value, "torque") else (value.angular, value.linear)
        vector = np.array([*vector_values(first), *vector_values(second)])
        if not np.all(np.isfinite(vector)):
            raise InvalidInput("invalid", f"{field} has non-finite values")
        return vector

    # --- reporting ----------------------------------------------------------

    def diagnostics(self) -> tuple[str, dict, bool]:
        with self._lock:
            counts = dict(self.counts)
            times = {name: list(values) for name, values in self.answer_times.items()}
        calls = sum(count for key, count in counts.items() if key.endswith("_calls"))
        refused = sum(count for key, count in counts.items() if key.endswith("_refused"))
        values = {"calls": calls, "refused": refused, **dict(sorted(counts.items()))}
        for name, seconds in sorted(times.items()):
            values.update(timing_values(name, seconds))
        return f"{calls} requests answered, {refused} refused", values, False


main = node_main(DynamicsServerNode, "dynamics_server")

if __name__ == "__main__":
    main()
