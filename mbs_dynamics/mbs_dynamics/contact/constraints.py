"""Contact, loop-closure and impact dynamics (F&O §3.4, RBDL §2.2-2.3).

A constraint set stacks, for the state (q, v), rows G (m x nv) of constraint
velocities G v and their bias gamma = -dG/dt v, so that the constraint holds
at the acceleration level when G a = gamma (DESIGN.md §2):

    PointContact(frame, point)   3 rows: the point's classical acceleration
                                 d²p/dt² = 0, world axes; its force f (3,)
    FrameContact(frame, point)   6 rows: the contact frame (origin `point`
                                 in `frame`, frame's axes) is welded: its
                                 body twist does not change; its wrench
                                 [n; f] (6,) about its origin, world-aligned
                                 axes
    LoopClosure(frame_a, frame_b)
                                 3 rows: the two frame origins move together
                                 (6 with weld=True: nor do they turn); the
                                 force [and moment] ON frame_a, world axes
                                 (frame_b feels the opposite)

The forces λ enter as M a + h = tau + G^T λ. A constraint set whose G loses
rank (a straight chain, a planar loop closed by a point) has many force
solutions: every method returns the same accelerations and the minimum-norm
forces, and the solution says `rank_deficient`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np
from numba import njit
from scipy.optimize import minimize

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.aba import InverseMassMatrix, forward_dynamics
from mbs_dynamics.algorithms.crba import crba_paths_kernel, ltl_factor, ltl_solve, ltl_solve_rows, mass_matrix
from mbs_dynamics.algorithms.kinematics import frame_placements, frames_motion, frames_motion_kernel
from mbs_dynamics.algorithms.rnea import inverse_dynamics, nonlinear_effects, rnea_kernel
from mbs_dynamics.inputs import all_finite, invalid
from mbs_dynamics.multibody.model import Model, unpack_model
from mbs_dynamics.multibody.workspace import readonly, scratch
from mbs_dynamics.spatial.lie import so3_log

# Singular values of G below this, relative to the largest, count as zero.
RANK_TOLERANCE = 1e-9
# Least squares on the saddle-point and operational-space systems of a rank-
# deficient G: singular values below this, relative, are its null directions.
LSTSQ_RCOND = 1e-12
METHODS = ("kkt", "schur", "nullspace")
IDENTITY = {3: np.eye(3), 6: np.eye(6)}
ORIGIN = np.zeros(3)
for _constant in (*IDENTITY.values(), ORIGIN):
    _constant.setflags(write=False)


def _as_tuple(value):
    """Lists and arrays as tuples, so that a constraint stays hashable (the
    solvers cache per constraint set); what they hold is checked where used."""
    if isinstance(value, np.ndarray):
        return tuple(value.ravel().tolist())
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class PointContact:
    """A point fixed in `frame` (frame coordinates) held still: 3 rows, world axes.
    `target` (world) adds a position error for Baumgarte stabilisation."""

    frame: str
    point: tuple = (0.0, 0.0, 0.0)
    target: tuple | None = None
    rows: ClassVar[int] = 3

    def __post_init__(self):
        object.__setattr__(self, "point", _as_tuple(self.point))
        object.__setattr__(self, "target", _as_tuple(self.target))


@dataclass(frozen=True)
class FrameContact:
    """A frame welded to the world: its body twist does not change, 6 rows.
    `point` (frame coordinates) moves the contact frame's origin, e.g. to the
    centre of a sole; its axes stay the frame's."""

    frame: str
    point: tuple = (0.0, 0.0, 0.0)
    rows: ClassVar[int] = 6

    def __post_init__(self):
        object.__setattr__(self, "point", _as_tuple(self.point))


@dataclass(frozen=True)
class LoopClosure:
    """The origins of frame_a and frame_b held together (a cut joint of a closed
    chain); weld=True also holds their relative orientation."""

    frame_a: str
    frame_b: str
    weld: bool = False

    @property
    def rows(self) -> int:
        return 6 if self.weld else 3


class ConstraintSolution(tuple):
    """(x, forces), unpackable as a pair, with diagnostics: x is the acceleration
    (or the post-impact velocity), forces one array per constraint; rank is the
    rank of G, rows its number of rows, residual = |G x - target| (zero when the
    constraints are consistent)."""

    def __new__(cls, x, forces, rank: int, rows: int, residual: float):
        solution = super().__new__(cls, (x, forces))
        solution.rank, solution.rows, solution.residual = rank, rows, residual
        return solution

    @property
    def rank_deficient(self) -> bool:
        return self.rank < self.rows


@dataclass
class ConstraintRows:
    """G (m, nv), gamma = -dG/dt v (m,), the position error phi (m,), and per
    constraint its row slice and the orthogonal map from its multipliers to its
    force (so G^T λ = (to_force G)^T force)."""

    G: np.ndarray
    gamma: np.ndarray
    phi: np.ndarray
    blocks: list


@njit(cache=True)
def _point_rows(J, motion, R, p, point, G, gamma, position):
    """G (3, nv), gamma = -dG/dt v and the world position of a point fixed in a
    frame with hybrid Jacobian J and motion [twist; bias] (frames_motion_kernel):
    p' = do/dt + w x r with r = R point, p'' = d²o/dt² + dw/dt x r + w x (w x r)
    at a = 0."""
    r0 = R[0, 0] * point[0] + R[0, 1] * point[1] + R[0, 2] * point[2]
    r1 = R[1, 0] * point[0] + R[1, 1] * point[1] + R[1, 2] * point[2]
    r2 = R[2, 0] * point[0] + R[2, 1] * point[1] + R[2, 2] * point[2]
    for c in range(J.shape[1]):  # v_o - r x w
        G[0, c] = J[3, c] - (r1 * J[2, c] - r2 * J[1, c])
        G[1, c] = J[4, c] - (r2 * J[0, c] - r0 * J[2, c])
        G[2, c] = J[5, c] - (r0 * J[1, c] - r1 * J[0, c])
    w0, w1, w2 = motion[0, 0], motion[0, 1], motion[0, 2]
    d0, d1, d2 = motion[1, 0], motion[1, 1], motion[1, 2]
    x0, x1, x2 = w1 * r2 - w2 * r1, w2 * r0 - w0 * r2, w0 * r1 - w1 * r0  # w x r
    gamma[0] = -(motion[1, 3] + d1 * r2 - d2 * r1 + w1 * x2 - w2 * x1)
    gamma[1] = -(motion[1, 4] + d2 * r0 - d0 * r2 + w2 * x0 - w0 * x2)
    gamma[2] = -(motion[1, 5] + d0 * r1 - d1 * r0 + w0 * x1 - w1 * x0)
    position[0], position[1], position[2] = p[0] + r0, p[1] + r1, p[2] + r2


@njit(cache=True)
def _frame_rows(J, motion, R, point, G, gamma):
    """G = the body Jacobian (6, nv) and gamma = -d(body twist)/dt at a = 0 of a
    frame with hybrid J and motion: [dw_b/dt; dv_b/dt] = [R^T dw/dt; R^T d²o/dt²
    - w_b x v_b]; then moved to the origin `point` (frame axes, fixed in the
    frame): v_b' = v_b - point x w_b, so G and gamma take the same shift."""
    for half in (0, 3):
        for r in range(3):
            for c in range(J.shape[1]):
                G[half + r, c] = R[0, r] * J[half, c] + R[1, r] * J[half + 1, c] + R[2, r] * J[half + 2, c]
    body = np.empty((2, 6))
    for row in range(2):
        for half in (0, 3):
            for r in range(3):
                body[row, half + r] = R[0, r] * motion[row, half] + R[1, r] * motion[row, half + 1] \
                    + R[2, r] * motion[row, half + 2]
    w, u = body[0, :3], body[0, 3:]
    gamma[0], gamma[1], gamma[2] = -body[1, 0], -body[1, 1], -body[1, 2]
    gamma[3] = -(body[1, 3] - (w[1] * u[2] - w[2] * u[1]))
    gamma[4] = -(body[1, 4] - (w[2] * u[0] - w[0] * u[2]))
    gamma[5] = -(body[1, 5] - (w[0] * u[1] - w[1] * u[0]))
    p0, p1, p2 = point[0], point[1], point[2]
    if p0 != 0.0 or p1 != 0.0 or p2 != 0.0:
        for c in range(J.shape[1]):
            g0, g1, g2 = G[0, c], G[1, c], G[2, c]
            G[3, c] -= p1 * g2 - p2 * g1
            G[4, c] -= p2 * g0 - p0 * g2
            G[5, c] -= p0 * g1 - p1 * g0
        g0, g1, g2 = gamma[0], gamma[1], gamma[2]
        gamma[3] -= p1 * g2 - p2 * g1
        gamma[4] -= p2 * g0 - p0 * g2
        gamma[5] -= p0 * g1 - p1 * g0


def constraint_rows(model: Model, q, v, constraints) -> ConstraintRows:
    """Stack the rows of `constraints` at (q, v)."""
    frames = []
    for constraint in constraints:
        if isinstance(constraint, (PointContact, FrameContact)):
            frames.append(constraint.frame)
        elif isinstance(constraint, LoopClosure):
            frames += [constraint.frame_a, constraint.frame_b]
        else:
            raise ValueError(f"unknown constraint {constraint!r}: use PointContact, FrameContact or LoopClosure")
    if not frames:
        raise ValueError("no constraints given")
    J, motion, world_R, world_p = frames_motion(model, q, v, tuple(frames))
    m = sum(constraint.rows for constraint in constraints)
    G, gamma, phi = np.empty((m, model.nv)), np.empty(m), np.zeros(m)
    blocks = []
    start = i = 0
    position, other = np.empty(3), np.empty(3)
    for constraint in constraints:
        rows = slice(start, start + constraint.rows)
        if isinstance(constraint, PointContact):
            _point_rows(J[i], motion[i], world_R[i], world_p[i], np.asarray(constraint.point, dtype=float),
                        G[rows], gamma[rows], position)
            if constraint.target is not None:
                phi[rows] = position - np.asarray(constraint.target, dtype=float)
            to_force = IDENTITY[3]
            i += 1
        elif isinstance(constraint, FrameContact):
            _frame_rows(J[i], motion[i], world_R[i], np.asarray(constraint.point, dtype=float), G[rows],
                        gamma[rows])
            R = world_R[i]
            to_force = np.zeros((6, 6))  # body wrench -> world-aligned, same point
            to_force[:3, :3] = to_force[3:, 3:] = R
            i += 1
        else:
            linear = slice(rows.stop - 3, rows.stop)
            Gb, gamma_b = np.empty((3, model.nv)), np.empty(3)
            _point_rows(J[i], motion[i], world_R[i], world_p[i], ORIGIN, G[linear], gamma[linear], position)
            _point_rows(J[i + 1], motion[i + 1], world_R[i + 1], world_p[i + 1], ORIGIN, Gb, gamma_b, other)
            G[linear] -= Gb
            gamma[linear] -= gamma_b
            phi[linear] = position - other
            if constraint.weld:
                angular = slice(rows.start, rows.start + 3)
                G[angular] = J[i, :3] - J[i + 1, :3]
                gamma[angular] = motion[i + 1, 1, :3] - motion[i, 1, :3]
                phi[angular] = so3_log(world_R[i] @ world_R[i + 1].T)
            to_force = IDENTITY[constraint.rows]
            i += 2
        blocks.append((rows, to_force))
        start = rows.stop
    return ConstraintRows(G, gamma, phi, blocks)


# numpy's linear algebra costs 20-170 us a call on these small matrices, LAPACK
# from compiled code a few: the dense steps below are compiled.


@njit(cache=True)
def _rank(G):
    """(rank, U, s, Vt) of G by its SVD: singular values above RANK_TOLERANCE
    of the largest count."""
    U, s, Vt = np.linalg.svd(G)
    rank = 0
    for value in s:
        if value > RANK_TOLERANCE * max(s[0], 1e-300):
            rank += 1
    return rank, U, s, Vt


@njit(cache=True, inline="always")
def _symmetric_product(G, B):
    """G B (m, m) for a product known to be symmetric (G G^T, G M⁻¹ G^T): its
    lower triangle summed, the upper mirrored. A loop: BLAS costs microseconds
    a call at these sizes."""
    m, n = G.shape
    product = np.empty((m, m))
    for r in range(m):
        for c in range(r + 1):
            total = 0.0
            for j in range(n):
                total += G[r, j] * B[j, c]
            product[r, c] = product[c, r] = total
    return product


@njit(cache=True)
def _certainly_full_rank(G):
    """True when G's rows are independent by a margin, without an SVD (which
    takes some 30 us here): σ_min(G)² = λ_min(G G^T) >= 1 / |(G G^T)⁻¹|_F and
    σ_max(G) <= |G|_F, so σ_min / σ_max is bounded below from a Cholesky of
    G G^T. False means "not certain": then the SVD decides."""
    m = G.shape[0]
    A = _symmetric_product(G, G.T)
    scale = 0.0
    for i in range(m):
        scale += A[i, i]  # |G|_F²
    chain = np.arange(m) - 1  # a dense factor A = L^T L
    if ltl_factor(A, chain) >= 0:
        return False
    inverse_norm = 0.0  # |L⁻¹|_F² >= |L⁻¹|_2² = |A⁻¹|_2 = 1 / σ_min²
    reciprocal, column = np.empty(m), np.empty(m)
    for i in range(m):
        reciprocal[i] = 1.0 / A[i, i]
    for c in range(m):  # L⁻¹'s column c, zero above c: L x = e_c
        column[c] = reciprocal[c]
        inverse_norm += column[c] * column[c]
        for i in range(c + 1, m):
            total = 0.0
            for j in range(c, i):
                total += A[i, j] * column[j]
            column[i] = -total * reciprocal[i]
            inverse_norm += column[i] * column[i]
    # σ_max² <= |G|_F²
    return 1.0 / (inverse_norm * scale) > (1e3 * RANK_TOLERANCE) ** 2


def _forces(rows: ConstraintRows, multipliers: np.ndarray) -> list[np.ndarray]:
    return [to_force @ multipliers[block] for block, to_force in rows.blocks]


@njit(cache=True)
def _solve_kkt(M, G, rhs_top, rhs_bottom, full_rank):
    """[[M, G^T], [G, 0]] [x; -λ] = [rhs_top; rhs_bottom] -> (x, λ); least
    squares (minimum norm) when G loses rank."""
    n, m = M.shape[0], G.shape[0]
    K = np.zeros((n + m, n + m))
    K[:n, :n] = M
    K[:n, n:] = G.T
    K[n:, :n] = G
    rhs = np.concatenate((rhs_top, rhs_bottom))
    if full_rank:
        solution = np.linalg.solve(K, rhs)
    else:
        solution = np.linalg.lstsq(K, rhs, rcond=LSTSQ_RCOND)[0]
    return solution[:n].copy(), -solution[n:]


@njit(cache=True)
def _solve_operational(operational, rhs, full_rank):
    """λ of (G M⁻¹ G^T) λ = rhs; minimum norm when G loses rank."""
    if full_rank:
        return np.linalg.solve(operational, rhs)
    return np.linalg.lstsq(operational, rhs, rcond=LSTSQ_RCOND)[0]


@njit(cache=True)
def _solve_nullspace(M, h, tau, target, rank, U, s, Vt):
    """a = a_p + N y with a_p = G⁺ target and G N = 0, N^T M N y = N^T (tau - h
    - M a_p); λ = the minimum-norm solution of G^T λ = M a + h - tau."""
    range_rows, null, left = Vt[:rank].copy(), Vt[rank:].T.copy(), np.ascontiguousarray(U[:, :rank])
    particular = range_rows.T @ ((left.T @ target) / s[:rank])
    a = particular.copy()
    if null.shape[1]:
        a += null @ np.linalg.solve(null.T @ M @ null, null.T @ (tau - h - M @ particular))
    multipliers = left @ ((range_rows @ (M @ a + h - tau)) / s[:rank])
    return a, multipliers


def _finite(model: Model, what: str, results, *named) -> None:
    """Raise inputs.overflow (on the named inputs) when one of the results is not finite."""
    if not all(inputs.all_finite(np.ascontiguousarray(result)) for result in results):
        raise inputs.overflow(model, what, *named)


# The compiled KKT path of contact_forward_dynamics: constraint kinds.
POINT_ROWS, FRAME_ROWS = 0, 1


@njit(cache=True, inline="always")
def _dot(x, y):
    total = 0.0
    for i in range(x.shape[0]):
        total += x[i] * y[i]
    return total


@njit(cache=True)
def _contact_dynamics_kernel(packed, dof_parent, q, v, tau, kinds, bodies, local_R, local_p, points, targets,
                             aimed, alpha, beta, a, forces, buffer):
    """contact_forward_dynamics's "kkt" for point and frame contacts whose G
    is certainly of full rank, in one call: the rows as constraint_rows
    stacks them, then the saddle-point system [[M, G^T], [G, 0]] [a; -λ] =
    [tau - h; target] solved by its block factorisation (Pinocchio's
    forwardDynamics solves it so): M = L^T L with the tree's sparsity
    (ltl_factor), a_free = M⁻¹ (tau - h), Y = M⁻¹ G^T, (G Y) λ = target -
    G a_free by a dense Cholesky, a = a_free + Y λ. Writes a (nv,) and the
    forces (m,: each constraint's, stacked) and returns (0, |G a -
    target|), or (1, 0) without a result where the general path decides
    (and explains): invalid inputs, an overflow, a G not certainly of full
    rank, a mass matrix or G M⁻¹ G^T not positive definite."""
    model = unpack_model(packed)
    if invalid(model, q, v, tau):
        return 1, 0.0
    k, nv, m = kinds.shape[0], v.shape[0], forces.shape[0]
    J, motion = np.empty((k, 6, nv)), np.empty((k, 2, 6))
    world_R, world_p = np.empty((k, 3, 3)), np.empty((k, 3))
    if frames_motion_kernel(packed, q, v, bodies, local_R, local_p, J, motion, world_R, world_p, buffer):
        return 1, 0.0
    G, gamma, phi, position = np.empty((m, nv)), np.empty(m), np.zeros(m), np.empty(3)
    start = 0
    for i in range(k):
        if kinds[i] == POINT_ROWS:
            _point_rows(J[i], motion[i], world_R[i], world_p[i], points[i], G[start:start + 3],
                        gamma[start:start + 3], position)
            if aimed[i]:
                for r in range(3):
                    phi[start + r] = position[r] - targets[i, r]
            start += 3
        else:
            _frame_rows(J[i], motion[i], world_R[i], points[i], G[start:start + 6], gamma[start:start + 6])
            start += 6
    # the small products as loops: BLAS costs microseconds a call here
    target = np.empty(m)
    for r in range(m):
        target[r] = gamma[r] - 2.0 * alpha * _dot(G[r], v) - beta**2 * phi[r]
    if not _certainly_full_rank(G):
        return 1, 0.0
    M, h = np.empty((nv, nv)), np.empty(nv)
    if rnea_kernel(packed, readonly(q), readonly(v), readonly(np.zeros(nv)), np.empty((0, 6)), h, buffer) \
            or crba_paths_kernel(packed, dof_parent, q, M, buffer, np.bool_(True)) or ltl_factor(M, dof_parent) >= 0:
        return 1, 0.0
    free = tau - h
    ltl_solve(M, dof_parent, free)
    Y = np.ascontiguousarray(G.T)
    ltl_solve_rows(M, dof_parent, Y)
    operational, multipliers = _symmetric_product(G, Y), np.empty(m)
    for r in range(m):
        multipliers[r] = target[r] - _dot(G[r], free)
    chain = np.arange(m) - 1  # dense
    if ltl_factor(operational, chain) >= 0:
        return 1, 0.0
    ltl_solve(operational, chain, multipliers)
    for j in range(nv):
        a[j] = free[j] + _dot(Y[j], multipliers)
    if not (all_finite(a) and all_finite(multipliers)):
        return 1, 0.0
    start = 0
    for i in range(k):  # forces: a frame's multipliers are in its axes, its force world-aligned
        if kinds[i] == POINT_ROWS:
            forces[start:start + 3] = multipliers[start:start + 3]
            start += 3
        else:
            for half in (start, start + 3):
                for r in range(3):
                    forces[half + r] = world_R[i, r, 0] * multipliers[half] + world_R[i, r, 1] \
                        * multipliers[half + 1] + world_R[i, r, 2] * multipliers[half + 2]
            start += 6
    residual = 0.0
    for r in range(m):
        residual += (_dot(G[r], a) - target[r]) ** 2
    return 0, np.sqrt(residual)


@lru_cache(maxsize=64)
def _compiled_contacts(model: Model, contacts: tuple):
    """What _contact_dynamics_kernel reads of point and frame contacts, the
    number of rows and each one's slice of the stacked forces; None for
    other sets (loop closures, none, anything malformed: the general path
    says what)."""
    if not contacts or any(type(c) not in (PointContact, FrameContact) for c in contacts):
        return None
    try:
        bodies, local_R, local_p = frame_placements(model, tuple(c.frame for c in contacts))
        points = np.array([c.point for c in contacts], dtype=float)
        targets = np.array([c.target if isinstance(c, PointContact) and c.target is not None else (0.0,) * 3
                            for c in contacts], dtype=float)
    except (KeyError, ValueError, TypeError):
        return None
    if points.shape != (len(contacts), 3) or targets.shape != points.shape \
            or not (np.all(np.isfinite(points)) and np.all(np.isfinite(targets))):
        return None
    kinds = np.array([POINT_ROWS if isinstance(c, PointContact) else FRAME_ROWS for c in contacts], dtype=np.int64)
    aimed = np.array([isinstance(c, PointContact) and c.target is not None for c in contacts])
    blocks, start = [], 0
    for c in contacts:
        blocks.append(slice(start, start + c.rows))
        start += c.rows
    for array in (kinds, bodies, local_R, local_p, points, targets, aimed):
        array.setflags(write=False)
    return kinds, bodies, local_R, local_p, points, targets, aimed, start, blocks


# The last contact set's compiled form, for the calls of a loop that passes the
# same set every time: (model, contacts, _compiled_contacts(model, contacts)).
_last_contacts = (None, (), None)


def _compiled_for(model: Model, contacts: tuple):
    """_compiled_contacts(model, contacts), the last call's where the set is
    the same (compared, not hashed: a dataclass hashes in ~0.4 us); None
    where anything in it does not compare or hash."""
    global _last_contacts
    last_model, last_contacts, compiled = _last_contacts
    try:
        if model is last_model and contacts == last_contacts:
            return compiled
        compiled = _compiled_contacts(model, contacts)
    except (TypeError, ValueError):
        return None
    _last_contacts = (model, contacts, compiled)
    return compiled


def contact_forward_dynamics(model: Model, q, v, tau, contacts, method: str = "kkt",
                             baumgarte=(0.0, 0.0)) -> ConstraintSolution:
    """(a, forces): the accelerations with the constraints held, G a = gamma -
    2 alpha G v - beta² phi (Baumgarte; phi is the position error where a
    constraint defines one), and one force per constraint (module docstring).

    method: "kkt" (the full saddle-point system; for point and frame contacts
    whose G is certainly of full rank, one compiled call that solves it by
    its block factorisation, _contact_dynamics_kernel), "schur" (range space:
    (G M⁻¹ G^T) λ = gamma - G a_free with the O(n) M⁻¹ of the ABA), or
    "nullspace" (a = a_p + N y with G N = 0, N^T M N y = N^T (tau - h - M a_p)).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    alpha, beta = (float(x) for x in baumgarte)
    if method == "kkt":
        contacts = tuple(contacts)
        compiled = _compiled_for(model, contacts)
        if compiled is not None:
            q_shaped = inputs.shaped(model, q, model.nq, "q", batch=False)
            v_shaped = inputs.shaped(model, v, model.nv, "v", batch=False)
            tau_shaped = inputs.shaped(model, tau, model.nv, "tau", batch=False)
            a, forces = np.empty(model.nv), np.empty(compiled[7])
            status, residual = _contact_dynamics_kernel(model.packed, model.dof_parent, q_shaped, v_shaped,
                                                        tau_shaped, *compiled[:7], alpha, beta, a, forces,
                                                        scratch(model))
            if status == 0:
                return ConstraintSolution(a, [forces[block] for block in compiled[8]], compiled[7], compiled[7],
                                          residual)
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    tau = inputs.vector(model, tau, model.nv, "tau", batch=False)
    rows = constraint_rows(model, q, v, contacts)
    G = rows.G
    target = rows.gamma - 2.0 * alpha * (G @ v) - beta**2 * rows.phi
    if method != "nullspace" and _certainly_full_rank(G):
        rank = G.shape[0]
    else:
        rank, U, s, Vt = _rank(G)
    full_rank = rank == G.shape[0]
    if method == "kkt":
        a, multipliers = _solve_kkt(mass_matrix(model, q), G, tau - nonlinear_effects(model, q, v), target,
                                    full_rank)
    elif method == "schur":
        Minv = InverseMassMatrix(model, q)
        free = forward_dynamics(model, q, v, tau)
        Minv_Gt = Minv @ G.T
        multipliers = _solve_operational(G @ Minv_Gt, target - G @ free, full_rank)  # G M⁻¹ G^T λ = ...
        a = free + Minv_Gt @ multipliers
    else:
        a, multipliers = _solve_nullspace(mass_matrix(model, q), nonlinear_effects(model, q, v), tau, target,
                                          rank, U, s, Vt)
    residual = float(np.linalg.norm(G @ a - target))
    _finite(model, "the contact forward dynamics", (a, multipliers), (q, "q"), (v, "v"), (tau, "tau"))
    return ConstraintSolution(a, _forces(rows, multipliers), rank, G.shape[0], residual)


def impact(model: Model, q, v_minus, contacts, restitution: float = 0.0) -> ConstraintSolution:
    """(v_plus, impulses) of an impact on the constraints (RBDL §2.3):
    [[M, G^T], [G, 0]] [v⁺; -Λ] = [M v⁻; -e G v⁻]: the constraint velocity
    reverses with the restitution e (0: plastic, 1: no energy lost), and
    M (v⁺ - v⁻) = G^T Λ. One impulse per constraint, as the forces of
    contact_forward_dynamics."""
    restitution = float(restitution)
    if not 0.0 <= restitution <= 1.0:
        raise ValueError(f"restitution must be in [0, 1], got {restitution}")
    q = inputs.configuration(model, q, batch=False)
    v_minus = inputs.vector(model, v_minus, model.nv, "v_minus", batch=False)
    rows = constraint_rows(model, q, v_minus, contacts)
    G = rows.G
    rank, *_ = _rank(G)
    M = mass_matrix(model, q)
    target = -restitution * (G @ v_minus)
    v_plus, impulses = _solve_kkt(M, G, M @ v_minus, target, rank == G.shape[0])
    _finite(model, "the impact", (v_plus, impulses), (q, "q"), (v_minus, "v_minus"))
    return ConstraintSolution(v_plus, _forces(rows, impulses), rank, G.shape[0],
                              float(np.linalg.norm(G @ v_plus - target)))


class ContactInverseDynamics(tuple):
    """(tau, forces), unpackable as a pair: joint torques (nv,), zero on the
    floating base, and one force per contact; feasible says whether the base
    wrench is balanced (to `base_residual`) with the forces inside their
    friction cones when friction was asked for; message says why not.
    base_wrench (6,) is what the contacts leave unbalanced on the base (the
    root joint's generalised force, base axes): zero when feasible."""

    def __new__(cls, tau, forces, feasible: bool, base_residual: float, message: str, base_wrench=None):
        solution = super().__new__(cls, (tau, forces))
        solution.feasible, solution.base_residual, solution.message = feasible, base_residual, message
        solution.base_wrench = np.zeros(6) if base_wrench is None else base_wrench
        return solution


def contact_inverse_dynamics(model: Model, q, v, a, contacts, friction=None,
                             normal=(0.0, 0.0, 1.0)) -> ContactInverseDynamics:
    """(tau, forces) of a floating-base robot: the contact forces balance the
    base wrench of M a + h exactly (G_base^T λ = (M a + h)_base), and the
    joints supply the rest, tau = (M a + h) - G^T λ, zero on the base.

    Without friction the forces are the minimum-norm λ. With `friction` (one
    coefficient, or one per contact) the linear force f of each contact stays in
    its exact cone |f - (f.n) n| <= mu f.n about `normal` (world; one for all
    contacts, or one per contact, any length but zero), solved as the
    minimum-norm λ under those constraints (SLSQP); when no λ balances the base
    inside the cones, the answer says so (feasible False) and carries the
    minimum-norm forces instead. Moments of frame contacts are not limited.
    """
    if not model.floating_base:
        raise ValueError(f"model '{model.name}' has no floating base: use inverse_dynamics")
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    a = inputs.vector(model, a, model.nv, "a", batch=False)
    rows = constraint_rows(model, q, v, contacts)
    # forces, not the multipliers of the body-axes frame rows: G^T λ = Gw^T f
    Gw = np.vstack([to_force @ rows.G[block] for block, to_force in rows.blocks])
    base = slice(model.v_index("root_joint"), model.v_index("root_joint") + 6)
    full = inverse_dynamics(model, q, v, a)
    A, b = Gw[:, base].T, full[base]
    forces = np.linalg.lstsq(A, b, rcond=LSTSQ_RCOND)[0]  # minimum norm
    residual = float(np.linalg.norm(A @ forces - b))
    feasible, message = residual <= 1e-9 * max(1.0, float(np.abs(b).max())), ""
    if not feasible:
        message = f"the contacts cannot balance the base wrench (residual {residual:.3g})"
    if friction is not None and feasible:
        mu = np.broadcast_to(np.asarray(friction, dtype=float), (len(contacts),))
        if np.any(mu < 0) or not np.all(np.isfinite(mu)):
            raise ValueError(f"friction coefficients must be finite and >= 0, got {mu.tolist()}")
        normals = np.broadcast_to(np.asarray(normal, dtype=float), (len(contacts), 3))
        lengths = np.linalg.norm(normals, axis=1)
        if not np.all(np.isfinite(lengths)) or np.any(lengths == 0):
            raise ValueError(f"contact normals must be finite and non-zero, got {normals.tolist()}")
        linear = [(block.start + (3 if block.stop - block.start == 6 else 0), coefficient, n / length)
                  for (block, _), coefficient, n, length in zip(rows.blocks, mu, normals, lengths, strict=True)]

        def cones(x):  # mu² (f.n)² - |f_t|² >= 0 and f.n >= 0, per contact
            out = []
            for start, coefficient, n in linear:
                f = x[start:start + 3]
                fn = f @ n
                tangential = f - fn * n
                out += [coefficient**2 * fn**2 - tangential @ tangential, fn]
            return np.array(out)

        scale = max(1.0, float(np.abs(b).max()))
        result = minimize(lambda x: 0.5 * x @ x / scale**2, forces, jac=lambda x: x / scale**2, method="SLSQP",
                          constraints=[{"type": "eq", "fun": lambda x: (A @ x - b) / scale},
                                       {"type": "ineq", "fun": lambda x: cones(x) / scale**2}],
                          options={"ftol": 1e-14, "maxiter": 500})
        inside = bool(np.all(cones(result.x) >= -1e-9 * scale**2))
        balanced = float(np.linalg.norm(A @ result.x - b)) <= 1e-9 * scale
        if result.success and inside and balanced:
            forces = result.x
            residual = float(np.linalg.norm(A @ forces - b))
        else:
            feasible = False
            message = ("no contact forces inside the friction cones balance the base wrench "
                       f"(SLSQP: {result.message}); the minimum-norm forces are returned")
    tau = full - Gw.T @ forces
    _finite(model, "the contact inverse dynamics", (tau, forces), (q, "q"), (v, "v"), (a, "a"))
    base_wrench = tau[base].copy()
    tau[base] = 0.0
    return ContactInverseDynamics(tau, [forces[block] for block, _ in rows.blocks], feasible, residual, message,
                                  base_wrench)
