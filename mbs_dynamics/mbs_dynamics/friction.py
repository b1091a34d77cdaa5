"""Unilateral contact with Coulomb friction, for simulation: points of the robot
against a ground plane, by velocity-level time stepping (Moreau-Jean; the
impulse form of the constrained dynamics of F&O §3.4 and RBDL §2.3).

One step of `dt` from (q, v) under the joint forces tau:

    v_free = v + dt M⁻¹ (tau - h)
    v⁺     = v_free + M⁻¹ G^T λ          (λ: the contact impulses)
    q⁺     = q ⊕ dt v⁺

with, for each touching point, the rows G = [n; t1; t2] J_p of its velocity
along the ground normal n and two tangents, u = G v⁺ = W λ + c, W = G M⁻¹ G^T
(the Delassus operator) and c = G v_free + (bias on the normal row), and the
Coulomb law in its exact cone (not a pyramid):

    no pulling, no penetration   λ_n >= 0,  u_n + b >= 0,  λ_n (u_n + b) = 0
    friction cone                |λ_t| <= μ λ_n
    sticking or sliding          u_t = 0, or λ_t = -μ λ_n u_t / |u_t|

b lets a point that is above the ground by φ close the gap in one step (b =
φ/dt), pushes a point below it out at `stabilization` φ/dt per step, and makes a
point that would reach the ground within the step, approaching faster than
BOUNCE_SPEED, leave at `restitution` times its approach speed (Newton's law of
restitution, applied at the start of the step: the bounce is placed to within
one step's travel).

The solver is a projected block Gauss-Seidel over the points: for each point,
the normal impulse from its row, then the tangential impulse exactly, as the
minimiser of ½ λ_t^T W_tt λ_t + c_t^T λ_t over the disk |λ_t| <= μ λ_n (whose
optimality condition is Coulomb's maximal dissipation, u_t = -κ λ_t), solved
with a Moré-Sorensen secular equation. Redundant contacts (the corners of a
sole) make W singular and Gauss-Seidel slow, so every POLISH_EVERY sweeps the
points that stick are solved for directly, as bilateral constraints, and the
result kept when it is closer to the law. Its accuracy is the largest violation
of the law above, in velocity units (m/s), measured after every sweep; the
step reports it and the number of sweeps. Warm-starting with the previous
step's impulses makes a resting contact converge in one sweep.

M is factored once per step as L^T L with the tree's sparsity (crba.ltl_factor).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.configuration import integrate_kernel
from mbs_dynamics.contact import PointContact
from mbs_dynamics.aba import singular_mass_matrix
from mbs_dynamics.crba import crba_kernel, ltl_factor, ltl_solve, ltl_solve_lower, ltl_solve_transposed_chain
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, SINGULAR_MASS_MATRIX, all_finite, invalid
from mbs_dynamics.kinematics import frame_placements, frames_motion_kernel
from mbs_dynamics.model import Model, plane_basis, unpack_model
from mbs_dynamics.rnea import rnea_kernel
from mbs_dynamics.workspace import scratch

# Slower impacts (m/s) do not bounce: a resting contact stays at rest.
BOUNCE_SPEED = 1e-2


@dataclass(frozen=True)
class Ground:
    """The plane {x : normal . x = height} (world), with the Coulomb friction
    coefficient and the restitution of the robot's contacts with it."""

    height: float = 0.0
    normal: tuple = (0.0, 0.0, 1.0)
    friction: float = 1.0
    restitution: float = 0.0

    def __post_init__(self):
        normal = np.asarray(self.normal, dtype=float)
        if normal.shape != (3,) or not np.all(np.isfinite(normal)) or np.linalg.norm(normal) < 1e-12:
            raise ValueError(f"ground normal must be a nonzero 3-vector, got {self.normal!r}")
        if not np.isfinite(self.height):
            raise ValueError(f"ground height must be finite, got {self.height!r}")
        if not (np.isfinite(self.friction) and self.friction >= 0.0):
            raise ValueError(f"friction must be finite and >= 0, got {self.friction!r}")
        if not 0.0 <= self.restitution <= 1.0:
            raise ValueError(f"restitution must be in [0, 1], got {self.restitution!r}")
        normal = normal / np.linalg.norm(normal)
        axes = np.vstack([normal, plane_basis(normal)])
        axes.setflags(write=False)
        object.__setattr__(self, "_axes", axes)

    @property
    def contact_axes(self) -> np.ndarray:
        """Rows (n, t1, t2): the unit normal and two tangents, t1 x t2 = n."""
        return self._axes


# The ground of contact_step when none is given (and of a Simulation without one): built once.
DEFAULT_GROUND = Ground()


class ContactStep(tuple):
    """(q, v) after the step, unpackable as a pair, with what the contacts did:
    forces (k, 3) the mean force on each point over the step, world axes;
    impulses (k, 3) the same as impulses along (n, t1, t2) (pass them back as
    warm_start); active (k,) the points the solver considered; gaps (k,) each
    point's height above the ground at the start of the step; joint_impulses
    (nv,) the generalised impulse of the joint limits and joint friction;
    limits_active the number of joint limits in the solver; iterations and
    residual (the largest violation of the Coulomb law, m/s) of the solver, and
    converged = residual <= tolerance."""

    def __new__(cls, q, v, forces, impulses, active, gaps, iterations, residual, converged,
                joint_impulses=None, limits_active=0):
        result = super().__new__(cls, (q, v))
        result.forces, result.impulses, result.active, result.gaps = forces, impulses, active, gaps
        result.iterations, result.residual, result.converged = iterations, residual, converged
        result.joint_impulses, result.limits_active = joint_impulses, limits_active
        return result


@njit(cache=True, inline="always")
def _disk_minimizer(a, b, c, g1, g2, radius):
    """argmin of ½ x^T A x + g^T x over |x| <= radius, A = [[a, b], [b, c]]
    positive semidefinite: the unconstrained minimiser when it lies inside
    (the minimum-norm one if A is singular), else x(κ) = -(A + κ 1)⁻¹ g on the
    circle, κ > 0 by Newton's method on 1/|x(κ)| - 1/radius, concave in κ, so
    that from below it converges monotonically (Moré-Sorensen)."""
    if radius <= 0.0 or (g1 == 0.0 and g2 == 0.0):
        return 0.0, 0.0
    half_difference = 0.5 * (a - c)
    spread = np.sqrt(half_difference * half_difference + b * b)
    w1, w2 = 0.5 * (a + c) + spread, 0.5 * (a + c) - spread  # eigenvalues, w1 >= w2
    angle = 0.5 * np.arctan2(2.0 * b, a - c)
    e1x, e1y = np.cos(angle), np.sin(angle)  # eigenvector of w1; (-e1y, e1x) of w2
    gamma1, gamma2 = e1x * g1 + e1y * g2, -e1y * g1 + e1x * g2
    tiny = 1e-14 * max(w1, 1e-300)
    inside, y1, y2 = False, 0.0, 0.0
    if w2 > tiny:
        y1, y2 = gamma1 / w1, gamma2 / w2
        inside = y1 * y1 + y2 * y2 <= radius * radius
    elif w1 > tiny and abs(gamma2) <= 1e-14 * abs(gamma1):
        y1, y2 = gamma1 / w1, 0.0
        inside = y1 * y1 <= radius * radius
    if not inside:
        kappa = max(0.0, np.sqrt(gamma1 * gamma1 + gamma2 * gamma2) / radius - w1)
        for _ in range(60):
            d1, d2 = max(w1 + kappa, tiny), max(w2 + kappa, tiny)
            y1, y2 = gamma1 / d1, gamma2 / d2
            norm = np.sqrt(y1 * y1 + y2 * y2)
            if abs(norm - radius) <= 1e-15 * radius:
                break
            slope = (y1 * y1 / d1 + y2 * y2 / d2) / (norm * norm * norm)
            kappa += (1.0 / radius - 1.0 / norm) / slope
        scale = radius / np.sqrt(y1 * y1 + y2 * y2)  # onto the circle to rounding
        y1, y2 = y1 * scale, y2 * scale
    return -(e1x * y1 - e1y * y2), -(e1y * y1 + e1x * y2)


@njit(cache=True, inline="always")
def _closing_speed(gap, dt, stabilization):
    """The bias of a constraint `gap` away from its bound (module docstring): the
    whole gap closed within the step, or a penetration (gap < 0) pushed out at
    `stabilization` of it per step."""
    return gap / dt if gap > 0.0 else stabilization * gap / dt


@njit(cache=True, inline="always")
def _joint_impulse(x0, w, bound, lowest, highest):
    """The impulse Λ on a joint's coordinate, whose velocity is x0 + w Λ, from
    its joint friction (|Λ| <= bound, and Λ = -bound sign(x) when it moves)
    and its position limits (velocity walls: x >= lowest, pushed by Λ > 0,
    x <= highest, by Λ < 0): friction's answer, unless it leaves the
    velocity past a wall; then the wall's. The two laws in one row, so that a
    joint resting on its limit with friction has one row (two parallel rows
    make Gauss-Seidel cycle)."""
    impulse = min(max(-x0 / w, -bound), bound)
    x = x0 + w * impulse
    if x < lowest:
        impulse = (lowest - x0) / w
    elif x > highest:
        impulse = (highest - x0) / w
    return impulse


@njit(cache=True)
def coulomb_residual(W, u, impulses, friction, joint_bound, lowest, highest):
    """The largest violation of the Coulomb law (module docstring) over the
    points, velocity units: min(λ_n W_nn, u_n) for the normal row (the natural
    map), and |λ_t - P(λ_t - u_t/w)| w for the tangential (P: onto the disk
    of radius μ λ_n, w: the largest eigenvalue of W_tt); and for each joint
    row after the points, |Λ - Λ*| W_rr with Λ* the _joint_impulse for the
    other rows' impulses."""
    worst = 0.0
    points = friction.shape[0]
    for k in range(points):
        n = 3 * k
        worst = max(worst, abs(min(impulses[n] * W[n, n], u[n])))
        a, b, c = W[n + 1, n + 1], W[n + 1, n + 2], W[n + 2, n + 2]
        w = 0.5 * (a + c) + np.sqrt(0.25 * (a - c) * (a - c) + b * b)
        if w <= 0.0:
            continue
        x1, x2 = impulses[n + 1] - u[n + 1] / w, impulses[n + 2] - u[n + 2] / w
        radius = friction[k] * max(impulses[n], 0.0)
        norm = np.sqrt(x1 * x1 + x2 * x2)
        if norm > radius:
            x1, x2 = x1 * radius / norm, x2 * radius / norm
        worst = max(worst, np.sqrt((impulses[n + 1] - x1) ** 2 + (impulses[n + 2] - x2) ** 2) * w)
    for j in range(joint_bound.shape[0]):
        r = 3 * points + j
        w = W[r, r]
        if w > 0.0:
            best = _joint_impulse(u[r] - w * impulses[r], w, joint_bound[j], lowest[j], highest[j])
            worst = max(worst, abs(impulses[r] - best) * w)
    return worst


@njit(cache=True)
def _add_column(W, u, column, change):
    if change != 0.0:
        for r in range(u.shape[0]):
            u[r] += W[r, column] * change


@njit(cache=True)
def _sweep(W, friction, joint_bound, lowest, highest, impulses, u):
    """One projected block Gauss-Seidel sweep over the points, then the joint rows."""
    points = friction.shape[0]
    for k in range(points):
        n, t1, t2 = 3 * k, 3 * k + 1, 3 * k + 2
        if not W[n, n] > 0.0:  # a point no coordinate moves
            continue
        normal = max(0.0, impulses[n] - u[n] / W[n, n])
        _add_column(W, u, n, normal - impulses[n])
        impulses[n] = normal
        a, b, c = W[t1, t1], W[t1, t2], W[t2, t2]
        g1 = u[t1] - a * impulses[t1] - b * impulses[t2]
        g2 = u[t2] - b * impulses[t1] - c * impulses[t2]
        x1, x2 = _disk_minimizer(a, b, c, g1, g2, friction[k] * normal)
        _add_column(W, u, t1, x1 - impulses[t1])
        _add_column(W, u, t2, x2 - impulses[t2])
        impulses[t1], impulses[t2] = x1, x2
    for j in range(joint_bound.shape[0]):
        r = 3 * points + j
        w = W[r, r]
        if w > 0.0:
            value = _joint_impulse(u[r] - w * impulses[r], w, joint_bound[j], lowest[j], highest[j])
            _add_column(W, u, r, value - impulses[r])
            impulses[r] = value


@njit(cache=True)
def _residual_velocity(W, c, impulses, u):
    for r in range(c.shape[0]):
        total = c[r]
        for s in range(c.shape[0]):
            total += W[r, s] * impulses[s]
        u[r] = total


@njit(cache=True)
def _polish(W, c, friction, joint_bound, lowest, highest, impulses, u, residual):
    """Solve for the rows that hold (the points that stick: pressed, strictly
    inside their cones, u = 0; the joints held by friction, strictly inside its
    bound, u = 0, or pressed on a limit, u = its wall) as bilateral, the
    others' impulses held: the exact answer in one step
    when that set is right, which Gauss-Seidel approaches slowly when the
    contacts are redundant (the corners of a sole). W_SS is singular then: a
    dense factor of W_SS + ε 1 with iterative refinement (proximal point
    iterations) converges to a solution. Kept if its residual is smaller;
    returns the residual."""
    points = friction.shape[0]
    rows = np.empty(W.shape[0], dtype=np.int64)
    target = np.zeros(W.shape[0])
    m = 0
    for k in range(points):
        n = 3 * k
        if impulses[n] > 0.0 and np.hypot(impulses[n + 1], impulses[n + 2]) < friction[k] * impulses[n] * (1 - 1e-9):
            for a in range(3):
                rows[m] = n + a
                m += 1
    for j in range(joint_bound.shape[0]):
        r = 3 * points + j
        impulse = impulses[r]
        if abs(impulse) < joint_bound[j]:
            rows[m] = r
            m += 1
        elif impulse > joint_bound[j] and lowest[j] > -np.inf:
            rows[m], target[m] = r, lowest[j]
            m += 1
        elif impulse < -joint_bound[j] and highest[j] < np.inf:
            rows[m], target[m] = r, highest[j]
            m += 1
    if m == 0:
        return residual
    A = np.empty((m, m))
    largest = 0.0
    for i in range(m):
        largest = max(largest, W[rows[i], rows[i]])
    epsilon = 1e-10 * largest
    for i in range(m):
        for j in range(m):
            A[i, j] = W[rows[i], rows[j]]
        A[i, i] += epsilon
    chain = np.arange(m) - 1  # a dense factor A = L^T L
    if ltl_factor(A, chain) >= 0:
        return residual
    candidate = impulses.copy()
    velocity = np.empty_like(u)
    step = np.empty(m)
    for _ in range(4):  # refine: candidate_S -= (W_SS + ε)⁻¹ (u_S - target)
        _residual_velocity(W, c, candidate, velocity)
        for i in range(m):
            step[i] = velocity[rows[i]] - target[i]
        ltl_solve(A, chain, step)
        for i in range(m):
            candidate[rows[i]] -= step[i]
    _residual_velocity(W, c, candidate, velocity)
    polished = coulomb_residual(W, velocity, candidate, friction, joint_bound, lowest, highest)
    if polished < residual:
        impulses[:] = candidate
        u[:] = velocity
        return polished
    return residual


# Gauss-Seidel sweeps between attempts to polish the sticking set
POLISH_EVERY = 8
# The solver gives up when STALL_CHECKS polishes in a row each leave the
# residual above STALL_RATIO times the one before: contradictory rows (a
# penetrated joint limit pushing a foot into the ground) have no solution, and
# sweeping on would cost time for nothing.
STALL_RATIO, STALL_CHECKS = 0.5, 3


@njit(cache=True)
def solve_coulomb(W, c, friction, joint_bound, lowest, highest, impulses, tolerance, max_iterations, u):
    """Impulses λ (in: the warm start) with u = W λ + c obeying, for each point
    (rows n, t1, t2; friction: one μ per point), the Coulomb law (module
    docstring), and for each joint row after them (one coordinate each: its
    velocity u) the law of _joint_impulse: joint friction up to joint_bound
    (f dt), the position limits as the velocity walls u >= lowest, u <= highest
    (-inf, inf: none). Projected block Gauss-Seidel, polished every
    POLISH_EVERY sweeps by a direct solve of the rows that hold; stops at
    `tolerance`, after max_iterations sweeps, or when it stalls (STALL_CHECKS).
    Returns (sweeps, residual in m/s or rad/s)."""
    _residual_velocity(W, c, impulses, u)
    residual = coulomb_residual(W, u, impulses, friction, joint_bound, lowest, highest)
    if residual <= tolerance:
        return 0, residual
    checkpoint, stalled = residual, 0
    for sweep in range(1, max_iterations + 1):
        _sweep(W, friction, joint_bound, lowest, highest, impulses, u)
        residual = coulomb_residual(W, u, impulses, friction, joint_bound, lowest, highest)
        if residual > tolerance and sweep % POLISH_EVERY == 0:
            residual = _polish(W, c, friction, joint_bound, lowest, highest, impulses, u, residual)
            stalled = stalled + 1 if residual > STALL_RATIO * checkpoint else 0
            checkpoint = residual
            if stalled == STALL_CHECKS:
                return sweep, residual
        if residual <= tolerance:
            return sweep, residual
    return max_iterations, residual


@njit(cache=True)
def contact_step_kernel(packed, dof_parent, q, v, tau, dt, bodies, local_points, axes, height, friction,
                        restitution, stabilization, margin, tolerance, max_iterations, warm_start,
                        joint_warm_start, damping, limit_q, limit_v, limit_lower, limit_upper, joint_friction,
                        v_out, impulses_out, gaps, touching, joint_impulses, info, buffer):
    """One time step's velocity v_out (module docstring); impulses_out (k, 3) along
    the contact axes, gaps (k,), touching (k,) 1 for the points in the solver,
    joint_impulses (nv,) what the joint limits and joint friction applied,
    and info = (sweeps, residual, points in the solver, joint limits in it).
    Joints: damping (nv,) viscous, implicit: (M + dt D) v⁺ = M v + dt (tau - h)
    + impulses; the position limits of the coordinates limit_q (velocity index
    limit_v) and the Coulomb friction joint_friction (nv,), bounded to
    ±friction dt, in one row per coordinate (_joint_impulse).
    Returns 0, INVALID_INPUT, NONFINITE_RESULT (the dynamics or v_out overflow)
    or SINGULAR_MASS_MATRIX (with info[0] the velocity index of the vanishing
    pivot)."""
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, tau):
        return INVALID_INPUT
    nv, npoints = v.shape[0], bodies.shape[0]
    M = np.empty((nv, nv))
    h = np.empty(nv)
    zero = np.zeros(nv)
    if crba_kernel(packed, q, M, buffer) or rnea_kernel(packed, q, v, zero, np.empty((0, 6)), h, buffer):
        return NONFINITE_RESULT  # the inputs were checked: what else fails is overflow
    positions, rotations = np.empty((npoints, 3)), np.empty((npoints, 3, 3))
    jacobians, motion = np.empty((npoints, 6, nv)), np.empty((npoints, 2, 6))
    if npoints:
        no_rotation = np.zeros((npoints, 3, 3))  # only the points' positions and velocities matter
        frames_motion_kernel(packed, q, v, bodies, no_rotation, local_points, jacobians, motion, rotations,
                             positions, buffer)
    point_jacobians = jacobians[:, 3:, :]  # and motion[:, 0, 3:] = the points' velocities
    v_free = tau - h
    for r in range(nv):
        M[r, r] += dt * damping[r]
        v_free[r] -= damping[r] * v[r]
    pivot = ltl_factor(M, dof_parent)
    if pivot >= 0:
        info[0] = pivot
        return SINGULAR_MASS_MATRIX
    ltl_solve(M, dof_parent, v_free)
    for r in range(nv):
        v_free[r] = v[r] + dt * v_free[r]

    # the touching points' rows G = axes J_p, and the normal rows' bias
    active = np.empty(npoints, dtype=np.int64)
    bias = np.empty(npoints)
    count = 0
    for k in range(npoints):
        gap = -height
        approach, free_approach = 0.0, 0.0
        for r in range(3):
            gap += axes[0, r] * positions[k, r]
            approach += axes[0, r] * motion[k, 0, 3 + r]
            for c in range(nv):
                free_approach += axes[0, r] * point_jacobians[k, r, c] * v_free[c]
        gaps[k] = gap
        touching[k] = 0
        if gap + dt * min(0.0, free_approach) > margin:
            continue
        touching[k] = 1
        b = _closing_speed(gap, dt, stabilization)
        if restitution > 0.0 and approach < -BOUNCE_SPEED and gap + dt * free_approach <= 0.0:
            b = min(b, restitution * approach)  # it hits the ground within the step: it bounces
        active[count] = k
        bias[count] = b
        count += 1
    # joint rows: one per coordinate with friction or at a limit, or about to pass one within the step,
    # its walls from the limits' gaps, as the points' normal rows
    lowest, highest = np.full(nv, -np.inf), np.full(nv, np.inf)
    walls = 0
    for j in range(limit_q.shape[0]):
        iv, at = limit_v[j], q[limit_q[j]]
        gap = at - limit_lower[j]
        if gap + dt * min(0.0, v_free[iv]) <= margin:
            lowest[iv] = -_closing_speed(gap, dt, stabilization)
            walls += 1
        gap = limit_upper[j] - at
        if gap - dt * max(0.0, v_free[iv]) <= margin:
            highest[iv] = _closing_speed(gap, dt, stabilization)
            walls += 1
    joint_v = np.empty(nv, dtype=np.int64)
    joints = 0
    for iv in range(nv):
        if joint_friction[iv] > 0.0 or lowest[iv] > -np.inf or highest[iv] < np.inf:
            joint_v[joints] = iv
            joints += 1
    impulses_out[:] = 0.0
    joint_impulses[:] = 0.0
    info[0], info[1], info[2], info[3] = 0.0, 0.0, count, walls
    m = 3 * count + joints
    if m == 0:
        v_out[:] = v_free
        return 0 if all_finite(v_out) else NONFINITE_RESULT
    Y = np.zeros((m, nv))  # rows G, then L^-T G^T: W = Y Y^T
    deepest = np.empty(m, dtype=np.int64)  # each row is zero off the path from this coordinate to the root
    c = np.empty(m)
    impulses = np.empty(m)
    mu = np.full(count, friction)
    joint_bound, joint_lowest, joint_highest = np.empty(joints), np.empty(joints), np.empty(joints)
    for i in range(count):
        k = active[i]
        for a in range(3):
            row = 3 * i + a
            deepest[row] = -1
            for col in range(nv):
                Y[row, col] = axes[a, 0] * point_jacobians[k, 0, col] + axes[a, 1] * point_jacobians[k, 1, col] \
                    + axes[a, 2] * point_jacobians[k, 2, col]
                if Y[row, col] != 0.0:
                    deepest[row] = col
            total = bias[i] if a == 0 else 0.0
            for col in range(nv):
                total += Y[row, col] * v_free[col]
            c[row] = total
            impulses[row] = warm_start[k, a]
        impulses[3 * i] = max(impulses[3 * i], 0.0)
    for j in range(joints):
        row, iv = 3 * count + j, joint_v[j]
        Y[row, iv], deepest[row], c[row] = 1.0, iv, v_free[iv]
        joint_bound[j], joint_lowest[j], joint_highest[j] = joint_friction[iv] * dt, lowest[iv], highest[iv]
        impulses[row] = min(max(joint_warm_start[iv], -joint_bound[j] if highest[iv] == np.inf else -np.inf),
                            joint_bound[j] if lowest[iv] == -np.inf else np.inf)
    for row in range(m):
        ltl_solve_transposed_chain(M, dof_parent, Y[row], deepest[row])
    W = np.empty((m, m))
    for r in range(m):
        for s in range(r + 1):
            total = 0.0
            col = deepest[r]
            while col >= 0:
                total += Y[r, col] * Y[s, col]
                col = dof_parent[col]
            W[r, s] = total
            W[s, r] = total
    u = np.empty(m)
    sweeps, residual = solve_coulomb(W, c, mu, joint_bound, joint_lowest, joint_highest, impulses, tolerance,
                                     max_iterations, u)
    change = np.zeros(nv)  # M⁻¹ G^T λ = L⁻¹ Y^T λ
    for row in range(m):
        col = deepest[row]
        while col >= 0:
            change[col] += Y[row, col] * impulses[row]
            col = dof_parent[col]
    ltl_solve_lower(M, dof_parent, change)
    for col in range(nv):
        v_out[col] = v_free[col] + change[col]
    for i in range(count):
        for a in range(3):
            impulses_out[active[i], a] = impulses[3 * i + a]
    for j in range(joints):
        joint_impulses[joint_v[j]] = impulses[3 * count + j]
    info[0], info[1] = sweeps, residual
    return 0 if all_finite(v_out) else NONFINITE_RESULT


@lru_cache(maxsize=32)
def _resolve(model: Model, points: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(bodies, points in body coordinates) of PointContacts."""
    for point in points:
        if not isinstance(point, PointContact):
            raise ValueError(f"contact points must be PointContact(frame, point), got {point!r}")
    if not points:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 3))
    offsets = np.array([np.asarray(point.point, dtype=float) for point in points])
    if offsets.shape != (len(points), 3) or not np.all(np.isfinite(offsets)):
        raise ValueError(f"contact points must be 3 finite numbers each, got {[p.point for p in points]}")
    bodies, rotations, translations = frame_placements(model, tuple(point.frame for point in points))
    return bodies, np.einsum("kij,kj->ki", rotations, offsets) + translations


@lru_cache(maxsize=32)
def position_limits(model: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(q indices, v indices, lower, upper) of the one-coordinate joints with a
    finite position limit (URDF revolute and prismatic joints)."""
    rows = []
    for body, name in enumerate(model.body_joint_names):
        if name not in model.joint_names or model.nv_joint[body] != 1:
            continue  # a fixed joint, a mimic joint following its master, a floating or planar joint
        qi, vi = int(model.q_start[body]), int(model.v_start[body])
        lower, upper = model.lower_position_limit[qi], model.upper_position_limit[qi]
        if np.isfinite(lower) or np.isfinite(upper):
            rows.append((qi, vi, lower, upper))
    limit_q = np.array([r[0] for r in rows], dtype=np.int64)
    limit_v = np.array([r[1] for r in rows], dtype=np.int64)
    return limit_q, limit_v, np.array([r[2] for r in rows], dtype=float), np.array([r[3] for r in rows], dtype=float)


def contact_step(model: Model, q, v, tau, dt: float, points=(), ground: Ground = DEFAULT_GROUND, *, warm_start=None,
                 joint_warm_start=None, tolerance: float = 1e-10, max_iterations: int = 200, stabilization: float = 0.2,
                 margin: float = 1e-4, joint_limits: bool = False, joint_damping: bool = False,
                 joint_friction: bool = False) -> ContactStep:
    """One time step of `dt` with the `points` (PointContact: a point fixed in a
    frame) in unilateral frictional contact with `ground` (module docstring):
    semi-implicit Euler with contact impulses, first order. warm_start and
    joint_warm_start: the previous step's `impulses` and `joint_impulses`. Points within `margin` (m) of the ground, or
    predicted to reach it within the step, enter the solver; it stops at
    `tolerance` (m/s) or after `max_iterations` sweeps (then converged is False
    and the step is the last sweep's).

    The joints, from the URDF: joint_limits holds the position limits as
    unilateral constraints (entering the solver as the points do);
    joint_damping applies the viscous damping, implicitly; joint_friction the
    Coulomb friction, as impulses bounded by friction x dt that stop a joint
    they can hold."""
    dt = float(dt)
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a positive finite number, got {dt}")
    if not 0.0 <= stabilization <= 1.0:
        raise ValueError(f"stabilization must be in [0, 1], got {stabilization}")
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    v = inputs.shaped(model, v, model.nv, "v", batch=False)
    tau = inputs.shaped(model, tau, model.nv, "tau", batch=False)
    bodies, local_points = _resolve(model, tuple(points))
    npoints = bodies.shape[0]
    if warm_start is None:
        warm_start = np.zeros((npoints, 3))
    else:
        warm_start = np.asarray(warm_start, dtype=float)
        if warm_start.shape != (npoints, 3):
            raise ValueError(f"warm_start must have shape ({npoints}, 3), got {warm_start.shape}")
    joint_warm_start = (np.zeros(model.nv) if joint_warm_start is None
                        else inputs.shaped(model, joint_warm_start, model.nv, "joint_warm_start", batch=False))
    limits = position_limits(model) if joint_limits else _NO_LIMITS
    damping = model.damping if joint_damping else _read_only_zeros(model.nv)
    friction = model.friction if joint_friction else _read_only_zeros(model.nv)
    v_out, impulses, gaps, info = np.empty(model.nv), np.empty((npoints, 3)), np.empty(npoints), np.empty(4)
    touching, joint_impulses = np.empty(npoints, dtype=np.int64), np.empty(model.nv)
    axes = ground.contact_axes
    status = contact_step_kernel(model.packed, model.dof_parent, q, v, tau, dt, bodies, local_points, axes,
                                 float(ground.height), float(ground.friction), float(ground.restitution),
                                 float(stabilization), float(margin), float(tolerance), int(max_iterations),
                                 warm_start, joint_warm_start, damping, *limits, friction, v_out, impulses, gaps,
                                 touching, joint_impulses, info, scratch(model))
    if status == SINGULAR_MASS_MATRIX:
        raise singular_mass_matrix(model, model.velocity_joint(int(info[0])))
    inputs.refuse(model, status, "the contact step", q, (v, "v"), (tau, "tau"))
    q_out = np.empty(model.nq)
    integrate_kernel(model.packed, q, v_out, dt, q_out)
    inputs.finite(model, q_out, "the contact step's configuration", (q, "q"), (v_out, "v after the step"))
    forces = impulses @ axes / dt
    residual = float(info[1])
    return ContactStep(q_out, v_out, forces, impulses, touching.astype(bool), gaps, int(info[0]), residual,
                       residual <= tolerance, joint_impulses, int(info[3]))


@lru_cache(maxsize=32)
def _read_only_zeros(n: int) -> np.ndarray:
    """Zeros (n,), read-only as model.damping and model.friction are, so that
    contact_step_kernel has one signature with the joint terms on or off
    (numba compiles read-only and writable arrays separately)."""
    zeros = np.zeros(n)
    zeros.setflags(write=False)
    return zeros


_NO_LIMITS = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0))
