"""Excitation trajectories: periodic joint motions whose recorded torques
tell the base parameters well (the Fourier series and its files:
fourier_trajectory.py).

The free coefficients x = (q0_j, a_j2..a_jL, b_j2..b_jL per joint) minimise
log cond(W), W the base regressor (the base parameters' columns of the
identification regressor Y_p, parameters.py) stacked over N = SAMPLES_PER_HARMONIC
L times of one period, each column scaled to unit norm (base_parameters.
condition_number), subject to the limits at the same times: positions within
the range less a margin, velocities and accelerations within their limits,
and, optionally, the torques of the model as loaded (tau = Y_p p_nominal:
inverse dynamics, the URDF's friction and damping, the armature) within a
fraction of the effort limits. q, v and a are linear in x, so are their
constraints; they are tightened by Bernstein's inequality so that they also
hold between the samples: a trigonometric polynomial of degree L sampled N
times a period peaks at most a factor 1 / (1 - eps), eps = (pi L / N)^2 / 2,
above its largest sample (1.2 % at 20 samples a harmonic). The torques are
held at the samples only. The gradient of log cond is analytic in W
(d log s_i = u_i^T dA v_i / s_i for the singular values s_i of A, W with
its columns scaled, and through the scaling: log_condition_gradient) and W's
derivatives in q, v and a are finite differences of Y_p (exact in a, where Y_p
is affine); SLSQP (scipy.optimize) then moves x.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.optimize

from mbs_dynamics.identification.base_parameters import BaseParameters, base_parameters, condition_number, random_states
from mbs_dynamics.identification.fourier_trajectory import (
    CHECK_SAMPLES_PER_HARMONIC,
    ExcitationLimits,
    ExcitationTrajectory,
    bernstein_factor,
    fourier_basis,
    limit_margins,
    tied_coefficients,
)
from mbs_dynamics.identification.parameters import ParameterLayout
from mbs_dynamics.multibody.model import Model

PERIOD = 10.0  # s: w_f = 0.2 pi rad/s, the highest harmonic 0.5 Hz at L = 5
HARMONICS = 5
# The most harmonics optimised: the constraints grow as L^2 (some 240 MB for 7 joints at 50) and the time with them.
MAX_HARMONICS = 50
# SLSQP's exit modes that leave a usable result: converged, a line search that no longer descends (at the
# optimum, within rounding), the iteration limit. The others (incompatible constraints, singular
# subproblems) are failures.
SLSQP_USABLE = (0, 8, 9)
SAMPLES_PER_HARMONIC = 20  # times a period at which the regressor and the limits are evaluated, per harmonic
UNLIMITED_RANGE = (-math.pi, math.pi)  # where q0 of a joint without position limits may lie
MAX_ITERATIONS = 100
FEASIBILITY_TOLERANCE = 1e-6  # relative: how far past a bound SLSQP's result may end
CACHED = 2  # x at which ExcitationProblem keeps its results
SHRINK_STEPS = 10  # halvings at most of the random start's oscillation to bring its torques within bounds
# Pivots (base_parameters, on random states) below this fraction of the largest count as dependent here: a
# URDF's rounded angles (rpy 1.5708 for pi / 2) leave columns dependent to some 1e-5, which no motion can
# part and which would fix the condition number near 1e5 whatever the motion; independent columns pivot
# above 1e-2 on the robots tried.
RANK_TOLERANCE = 1e-3
POSITION_STEP = 1e-6  # rad or m: finite differences of Y_p in q
VELOCITY_STEP = 1e-6  # rad/s or m/s: in v (in a, Y_p is affine: a unit step is exact)


class ExcitationProblem:
    """log cond(W), the constraints and their derivatives in the free
    coefficients x (module docstring), for model's joint_names moving and its
    other coordinates held at `hold` (nq) at rest."""

    def __init__(self, layout: ParameterLayout, base: BaseParameters, joint_names, limits: ExcitationLimits,
                 period: float, harmonics: int, hold: np.ndarray, samples: int):
        model = layout.model
        self.layout, self.base, self.limits, self.hold = layout, base, limits, hold
        self.joint_names, self.period, self.harmonics = tuple(joint_names), period, harmonics
        self.rows = np.array([model.q_index(name) for name in self.joint_names], dtype=np.int64)
        self.columns = np.array([model.v_index(name) for name in self.joint_names], dtype=np.int64)
        self.times = np.arange(samples) * period / samples
        E = tied_coefficients(harmonics)
        self.bases = tuple(basis @ E for basis in fourier_basis(self.times, period, harmonics))  # (N, m) each
        self.eps = bernstein_factor(harmonics, samples)
        self.nominal = layout.nominal()
        # the last CACHED results of each, by x: SLSQP asks for the objective at x clipped to the bounds and
        # for the constraints at x itself
        self._cache = {"values": [], "derivatives": []}

    @property
    def free(self) -> int:
        """Free coefficients per joint, m = 2 L - 1."""
        return 2 * self.harmonics - 1

    def coefficients(self, x) -> np.ndarray:
        """[q0, a_1..a_L, b_1..b_L] per joint (n, 2 L + 1) from x."""
        return np.reshape(x, (len(self.joint_names), self.free)) @ tied_coefficients(self.harmonics).T

    def states(self, x) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The model's q, v, a (N, nq or nv) at the samples."""
        X = np.reshape(x, (len(self.joint_names), self.free))
        q = np.tile(self.hold, (self.times.size, 1))
        v, a = np.zeros((self.times.size, self.layout.model.nv)), np.zeros((self.times.size, self.layout.model.nv))
        q[:, self.rows] = self.bases[0] @ X.T
        v[:, self.columns] = self.bases[1] @ X.T
        a[:, self.columns] = self.bases[2] @ X.T
        return q, v, a

    def values(self, x) -> tuple[float, np.ndarray]:
        """log cond(W) and the excited joints' torques (N, n) at x."""
        return self._cached("values", x, self._values)

    def _values(self, x):
        Y = self.layout.regressor(*self.states(x))
        stacked = Y.reshape(-1, self.layout.size)
        return math.log(condition_number(stacked.T @ stacked, self.base)), (Y @ self.nominal)[:, self.columns]

    def derivatives(self, x) -> tuple[np.ndarray, np.ndarray]:
        """The gradient of log cond in x (n m,) and the Jacobian of the torques
        (N n, n m) at x."""
        return self._cached("derivatives", x, self._derivatives)

    def _cached(self, kind: str, x, compute):
        x = np.asarray(x, dtype=float)
        for known, result in self._cache[kind]:
            if np.array_equal(x, known):
                return result
        result = compute(x)
        self._cache[kind] = [(x.copy(), result)] + self._cache[kind][:CACHED - 1]
        return result

    def _derivatives(self, x):
        q, v, a = self.states(x)
        n, N, nq, nv = len(self.joint_names), self.times.size, q.shape[1], v.shape[1]
        # the batch: (q, v, a), then q, v and a of each excited joint stepped
        Q, V, A = (np.repeat(state[None], 1 + 3 * n, axis=0) for state in (q, v, a))
        joints = np.arange(n)
        Q[1 + joints, :, self.rows] += POSITION_STEP
        V[1 + n + joints, :, self.columns] += VELOCITY_STEP
        A[1 + 2 * n + joints, :, self.columns] += 1.0
        Y = self.layout.regressor(Q.reshape(-1, nq), V.reshape(-1, nv), A.reshape(-1, nv))
        Y = Y.reshape(1 + 3 * n, N, nv, self.layout.size)
        steps = np.repeat([POSITION_STEP, VELOCITY_STEP, 1.0], n)
        dY = (Y[1:] - Y[0]) / steps[:, None, None, None]  # (3 n, N, nv, size): d/dq_j, d/dv_j, d/da_j

        independent = self.base.independent
        G = log_condition_gradient(Y[0][..., independent].reshape(-1, independent.size))
        # d log cond / d(state) per sample, then through the bases to x
        dstate = np.einsum("kc,skc->sk", G.reshape(N, -1), dY[..., independent].reshape(3 * n, N, -1))
        gradient = np.concatenate([sum(basis.T @ dstate[s * n + j] for s, basis in enumerate(self.bases))
                                   for j in range(n)])
        dtorque = (dY @ self.nominal)[..., self.columns].reshape(3, n, N, n)  # (state, joint moved, k, joint)
        jacobian = np.einsum("sjke,skm->kejm", dtorque, np.stack(self.bases)).reshape(N * n, n * self.free)
        return gradient, jacobian

    def linear_constraints(self):
        """(C, d): the position, velocity and acceleration limits at the samples
        as C x + d >= 0, tightened by the Bernstein factor."""
        n, m, limits, eps = len(self.joint_names), self.free, self.limits, self.eps
        blocks, offsets = [], []
        slack = 1.0 - eps
        # positions: within [lower + delta, upper - delta], delta = eps / (1 - eps) of the range
        delta = eps / (1.0 - eps) * (limits.upper - limits.lower)
        for j in range(n):
            if not np.isfinite(limits.upper[j] - limits.lower[j]):
                continue
            rows = np.zeros((self.times.size, n * m))
            rows[:, j * m:(j + 1) * m] = self.bases[0]
            blocks += [rows, -rows]
            offsets += [np.full(self.times.size, -(limits.lower[j] + delta[j])),
                        np.full(self.times.size, limits.upper[j] - delta[j])]
        for basis, bound in ((self.bases[1], limits.velocity), (self.bases[2], limits.acceleration)):
            for j in range(n):
                rows = np.zeros((self.times.size, n * m))
                rows[:, j * m:(j + 1) * m] = basis
                blocks += [rows, -rows]
                offsets += [np.full(self.times.size, slack * bound[j])] * 2
        return np.vstack(blocks), np.concatenate(offsets)

    def q0_bounds(self) -> list[tuple[float, float]]:
        """Bounds of x: q0 within the kept range (UNLIMITED_RANGE where none),
        the other coefficients free."""
        bounds = []
        for lower, upper in zip(self.limits.lower, self.limits.upper, strict=True):
            if not np.isfinite(upper - lower):
                lower, upper = UNLIMITED_RANGE
            bounds += [(float(lower), float(upper))] + [(None, None)] * (self.free - 1)
        return bounds


def log_condition_gradient(W: np.ndarray) -> np.ndarray:
    """d log cond / dW (same shape as W) for cond that of W with its columns
    scaled to unit norm (base_parameters.condition_number): with A = W / norms
    and v_1, v_n the eigenvectors of A^T A of its largest and smallest
    eigenvalues l_1, l_n, d log cond = (A v_1)^T dA v_1 / l_1 - (A v_n)^T dA v_n / l_n,
    and dA_i = dW_i / n_i - W_i (W_i . dW_i) / n_i^3 for column i."""
    norms = np.linalg.norm(W, axis=0)
    norms = np.maximum(norms, 1e-12 * norms.max())  # a column that never moves: cond is at its cap anyway
    A = W / norms
    eigenvalues, vectors = np.linalg.eigh(A.T @ A)
    largest, smallest = vectors[:, -1], vectors[:, 0]
    H = (np.outer(A @ largest, largest) / eigenvalues[-1]
         - np.outer(A @ smallest, smallest) / max(eigenvalues[0], eigenvalues[-1] * 1e-32))
    return H / norms - W * (np.sum(W * H, axis=0) / norms**3)


def middle_configuration(model: Model) -> np.ndarray:
    """The model's neutral configuration with each joint that has position
    limits at the middle of its range."""
    q = model.neutral_configuration()
    bounded = np.isfinite(model.upper_position_limit - model.lower_position_limit)
    q[bounded] = 0.5 * (model.lower_position_limit[bounded] + model.upper_position_limit[bounded])
    return q


def excitation_base_parameters(layout: ParameterLayout, joint_names, hold: np.ndarray, seed: int = 0):
    """The base parameters a motion of joint_names alone (the other
    coordinates at hold, at rest) can excite: those of base_parameters, found
    on random_states with the held coordinates overwritten, with pivots above
    RANK_TOLERANCE."""
    model = layout.model
    rows = [model.q_index(name) for name in joint_names]
    columns = [model.v_index(name) for name in joint_names]
    held_rows = np.setdiff1d(np.arange(model.nq), rows)
    held_columns = np.setdiff1d(np.arange(model.nv), columns)

    def states(model, count, rng):
        q, v, a = random_states(model, count, rng)
        q[:, held_rows] = hold[held_rows]
        v[:, held_columns] = 0.0
        a[:, held_columns] = 0.0
        return q, v, a

    return base_parameters(layout, seed, states=states, tolerance=RANK_TOLERANCE)


def random_start(problem: ExcitationProblem, rng) -> np.ndarray:
    """Random coefficients, normal, q0 at the middle of the kept range, each
    joint's oscillation scaled to reach the nearest of its position, velocity
    and acceleration bounds, then shrunk (up to SHRINK_STEPS times) until the
    model's torques are within their bounds. The start is infeasible when the
    torques at rest at q0 exceed them; SLSQP may still find a feasible q0."""
    n, m, limits = len(problem.joint_names), problem.free, problem.limits
    X = np.zeros((n, m))
    X[:, 1:] = rng.normal(size=(n, m - 1))
    for j, (lower, upper) in enumerate(zip(limits.lower, limits.upper, strict=True)):
        X[j, 0] = 0.5 * (lower + upper) if np.isfinite(upper - lower) else 0.0
    C, d = problem.linear_constraints()
    # C x + d >= 0 at x = [q0, 0...] with margin d0; scale s of the oscillation: d0 + s C x_osc >= 0
    oscillation = X.copy()
    oscillation[:, 0] = 0.0
    centre = X.ravel() - oscillation.ravel()
    room, pull = C @ centre + d, C @ oscillation.ravel()
    scale = np.min(room[pull < 0] / -pull[pull < 0]) if np.any(pull < 0) else 1.0
    x = centre + scale * oscillation.ravel()
    for _ in range(SHRINK_STEPS):
        worst = np.max(np.abs(problem.values(x)[1]) / limits.effort)
        if worst <= 1.0:
            break
        x = centre + (x - centre) * max(0.5, 0.9 / worst)
    return x


def optimise_excitation(model: Model, joint_names=None, *, period: float = PERIOD, harmonics: int = HARMONICS,
                        limits: ExcitationLimits | None = None, layout: ParameterLayout | None = None,
                        hold=None, seed: int = 0, max_iterations: int = MAX_ITERATIONS,
                        samples_per_harmonic: int = SAMPLES_PER_HARMONIC) -> ExcitationTrajectory:
    """The excitation of joint_names (default: the layout's actuated joints)
    that minimises the condition number of layout's base regressor (default
    layout: all joint parameters) within limits (default
    ExcitationLimits.from_model), from random coefficients drawn with seed; the
    model's other coordinates stay at hold (nq; default middle_configuration,
    the layout's held joints at their positions) at rest (module docstring)."""
    layout = ParameterLayout(model) if layout is None else layout
    if layout.model is not model:
        raise ValueError("layout must be built on the same model")
    joint_names = layout.actuated_joints if joint_names is None else tuple(joint_names)
    unknown = [name for name in joint_names if name not in layout.actuated_joints]
    if unknown or not joint_names or len(set(joint_names)) != len(joint_names):
        raise ValueError(f"joint_names must be distinct actuated joints of '{model.name}' "
                         f"({', '.join(layout.actuated_joints)}), got {list(joint_names)}")
    if not (np.isfinite(period) and period > 0.0):
        raise ValueError(f"period must be positive, got {period}")
    if int(harmonics) != harmonics or not 2 <= harmonics <= MAX_HARMONICS:
        raise ValueError(f"harmonics must be an integer from 2 (an excitation that starts at rest needs at least 2 "
                         f"harmonics) to {MAX_HARMONICS}, got {harmonics}")
    if int(max_iterations) != max_iterations or max_iterations < 1:
        raise ValueError(f"max_iterations must be a positive integer, got {max_iterations}")
    limits = ExcitationLimits.from_model(model, joint_names) if limits is None else limits
    if tuple(limits.joint_names) != joint_names:
        raise ValueError(f"limits are for joints {list(limits.joint_names)}, not {list(joint_names)}")
    if hold is None:
        hold = middle_configuration(model)
        for name, position in layout.held_joints:
            hold[model.q_index(name)] = position
    hold = np.asarray(hold, dtype=float)
    if hold.shape != (model.nq,):
        raise ValueError(f"hold must have shape ({model.nq},), got {hold.shape}")

    base = excitation_base_parameters(layout, joint_names, hold, seed)
    problem = ExcitationProblem(layout, base, joint_names, limits, period, harmonics, hold,
                                samples_per_harmonic * harmonics)
    x0 = random_start(problem, np.random.default_rng(seed))
    C, d = problem.linear_constraints()
    effort_rows = np.tile(np.isfinite(limits.effort), problem.times.size)
    effort = np.tile(limits.effort, problem.times.size)[effort_rows]
    constraints = [{"type": "ineq", "fun": lambda x: C @ x + d, "jac": lambda x: C}]
    if effort_rows.any():
        def torque_room(x):
            torque = problem.values(x)[1].ravel()[effort_rows]
            return np.concatenate([effort - torque, effort + torque])

        def torque_jacobian(x):
            jacobian = problem.derivatives(x)[1][effort_rows]
            return np.vstack([-jacobian, jacobian])

        constraints.append({"type": "ineq", "fun": torque_room, "jac": torque_jacobian})
    result = scipy.optimize.minimize(lambda x: problem.values(x)[0], x0, jac=lambda x: problem.derivatives(x)[0],
                                     method="SLSQP",
                                     bounds=problem.q0_bounds(), constraints=constraints,
                                     options={"maxiter": max_iterations, "ftol": 1e-6})
    x, message = result.x, f"SLSQP: {result.message} ({result.nit} iterations)"
    if result.status not in SLSQP_USABLE:
        raise ValueError(f"the optimisation failed ({message}): the limits, period ({period:g} s) and harmonics "
                         f"({harmonics}) may leave no room to move")
    if not _feasible(problem, x, C, d, effort_rows, effort):
        if not _feasible(problem, x0, C, d, effort_rows, effort):
            torque = np.max(np.abs(problem.values(x0)[1]), axis=0)
            raise ValueError(f"no excitation within the limits found ({message}); the model's torques at the "
                             "random start reach " + ", ".join(
                                 f"{name} {value:.4g} (bound {bound:.4g})" for name, value, bound in
                                 zip(joint_names, torque, limits.effort, strict=True) if value > bound)
                             + ": the effort bounds may be below the torques at rest")
        x, message = x0, message + "; it ended outside the limits: the random start kept"
    return _trajectory(problem, x, x0, model, seed, message)


def _feasible(problem, x, C, d, effort_rows, effort) -> bool:
    """Whether x keeps the linear constraints and the torque bounds, within
    FEASIBILITY_TOLERANCE of each bound (SLSQP ends on them up to rounding; the
    linear ones have the Bernstein slack besides)."""
    torque = problem.values(x)[1].ravel()[effort_rows]
    return bool(np.all(C @ x + d >= -FEASIBILITY_TOLERANCE * np.maximum(1.0, np.abs(d)))
                and np.all(np.abs(torque) <= effort * (1.0 + FEASIBILITY_TOLERANCE)))


def _trajectory(problem: ExcitationProblem, x, x0, model: Model, seed, message: str) -> ExcitationTrajectory:
    """The trajectory of x, its condition number and margins measured at
    CHECK_SAMPLES_PER_HARMONIC samples a harmonic."""
    coefficients = problem.coefficients(x)
    L = problem.harmonics
    trajectory = ExcitationTrajectory(problem.joint_names, problem.period, coefficients[:, 0],
                                      coefficients[:, 1:L + 1], coefficients[:, L + 1:], seed=seed)
    fine = ExcitationProblem(problem.layout, problem.base, problem.joint_names, problem.limits, problem.period, L,
                             problem.hold, CHECK_SAMPLES_PER_HARMONIC * L)
    margins = limit_margins(trajectory, problem.limits, model, problem.hold, fine.times)
    return ExcitationTrajectory(trajectory.joint_names, trajectory.period, trajectory.offsets, trajectory.sine,
                                trajectory.cosine, float(np.exp(fine.values(x)[0])),
                                float(np.exp(fine.values(x0)[0])), problem.limits, margins, seed, message)
