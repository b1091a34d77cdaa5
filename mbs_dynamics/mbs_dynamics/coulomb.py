"""The Coulomb solver on (W, c): impulses λ for the rows u = W λ + c of a time
step's constraints (time_stepping.py builds them), each point's three rows
(its velocity along the ground normal n and two tangents) obeying the Coulomb
law in its exact cone (not a pyramid):

    no pulling, no penetration   λ_n >= 0,  u_n >= 0,  λ_n u_n = 0
    friction cone                |λ_t| <= μ λ_n
    sticking or sliding          u_t = 0, or λ_t = -μ λ_n u_t / |u_t|

(u_n includes the bias that closes a gap or pushes a penetration out), and each
joint row after the points (one coordinate's velocity) the law of joint_impulse:
joint friction up to a bound, the position limits as velocity walls.

A projected block Gauss-Seidel over the points: for each point, the normal
impulse from its row, then the tangential impulse exactly, as the minimiser of
½ λ_t^T W_tt λ_t + c_t^T λ_t over the disk |λ_t| <= μ λ_n (whose optimality
condition is Coulomb's maximal dissipation, u_t = -κ λ_t), solved with a
Moré-Sorensen secular equation. Redundant contacts (the corners of a sole) make
W singular and Gauss-Seidel slow, so every POLISH_EVERY sweeps the rows that
hold (the points that stick, the joints held) are solved for directly, as
bilateral constraints, and the result kept when it is closer to the law. Its
accuracy is the largest violation of the law, in velocity units (m/s, rad/s),
measured after every sweep (coulomb_residual). Warm-starting with the previous
step's impulses makes a resting contact converge in one sweep.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.crba import ltl_factor, ltl_solve

# Gauss-Seidel sweeps between attempts to polish the sticking set
POLISH_EVERY = 8
# The solver gives up when STALL_CHECKS polishes in a row each leave the
# residual above STALL_RATIO times the one before: contradictory rows (a
# penetrated joint limit pushing a foot into the ground) have no solution, and
# sweeping on would cost time for nothing.
STALL_RATIO, STALL_CHECKS = 0.5, 3

# The problem: u = W λ + c with three rows per point (friction: one μ per point),
# then one row per joint (joint_bound: its friction impulse bound, lowest and
# highest: its velocity walls, -inf and inf where it has none).
CoulombProblem = namedtuple("CoulombProblem", "W c friction joint_bound lowest highest")
# What solve_coulomb did: its sweeps and the residual it reached.
SolverReport = namedtuple("SolverReport", "sweeps residual")


@njit(cache=True, inline="always")
def disk_minimizer(a, b, c, g1, g2, radius):
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
def joint_impulse(x0, w, bound, lowest, highest):
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


@njit(cache=True, inline="always")
def _joint_row_impulse(problem, j, r, u, impulses):
    """The joint_impulse of joint j (row r) for the other rows' impulses."""
    w = problem.W[r, r]
    return joint_impulse(u[r] - w * impulses[r], w, problem.joint_bound[j], problem.lowest[j], problem.highest[j])


@njit(cache=True)
def coulomb_residual(problem, u, impulses):
    """The largest violation of the Coulomb law (module docstring) over the
    points, velocity units: min(λ_n W_nn, u_n) for the normal row (the natural
    map), and |λ_t - P(λ_t - u_t/w)| w for the tangential (P: onto the disk
    of radius μ λ_n, w: the largest eigenvalue of W_tt); and for each joint
    row after the points, |Λ - Λ*| W_rr with Λ* the joint_impulse for the
    other rows' impulses."""
    W, friction = problem.W, problem.friction
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
    for j in range(problem.joint_bound.shape[0]):
        r = 3 * points + j
        if W[r, r] > 0.0:
            worst = max(worst, abs(impulses[r] - _joint_row_impulse(problem, j, r, u, impulses)) * W[r, r])
    return worst


@njit(cache=True)
def _add_column(W, u, column, change):
    """u += W[:, column] change: the velocities after one row's impulse changed."""
    if change != 0.0:
        for r in range(u.shape[0]):
            u[r] += W[r, column] * change


@njit(cache=True)
def _sweep(problem, impulses, u):
    """One projected block Gauss-Seidel sweep over the points, then the joint rows."""
    W, friction = problem.W, problem.friction
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
        x1, x2 = disk_minimizer(a, b, c, g1, g2, friction[k] * normal)
        _add_column(W, u, t1, x1 - impulses[t1])
        _add_column(W, u, t2, x2 - impulses[t2])
        impulses[t1], impulses[t2] = x1, x2
    for j in range(problem.joint_bound.shape[0]):
        r = 3 * points + j
        if W[r, r] > 0.0:
            value = _joint_row_impulse(problem, j, r, u, impulses)
            _add_column(W, u, r, value - impulses[r])
            impulses[r] = value


@njit(cache=True)
def _row_velocities(W, c, impulses, u):
    """u = W λ + c."""
    for r in range(c.shape[0]):
        total = c[r]
        for s in range(c.shape[0]):
            total += W[r, s] * impulses[s]
        u[r] = total


@njit(cache=True, inline="always")
def _holding_rows(problem, impulses, rows, target):
    """The rows that hold, into rows[:m] with their velocities target[:m]: the
    points that stick (pressed, strictly inside their cones, u = 0), the joints
    held by friction (strictly inside its bound, u = 0) or pressed on a limit
    (u = its wall). Returns m."""
    friction, joint_bound = problem.friction, problem.joint_bound
    points = friction.shape[0]
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
        elif impulse > joint_bound[j] and problem.lowest[j] > -np.inf:
            rows[m], target[m] = r, problem.lowest[j]
            m += 1
        elif impulse < -joint_bound[j] and problem.highest[j] < np.inf:
            rows[m], target[m] = r, problem.highest[j]
            m += 1
    return m


@njit(cache=True)
def _polish(problem, impulses, u, residual):
    """Solve for the rows that hold (_holding_rows) as bilateral, the others'
    impulses held: the exact answer in one step when that set is right, which
    Gauss-Seidel approaches slowly when the contacts are redundant (the corners
    of a sole). W_SS is singular then: a dense factor of W_SS + ε 1 with
    iterative refinement (proximal point iterations) converges to a solution.
    Kept if its residual is smaller; returns the residual."""
    W, c = problem.W, problem.c
    rows = np.empty(W.shape[0], dtype=np.int64)
    target = np.zeros(W.shape[0])
    m = _holding_rows(problem, impulses, rows, target)
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
    chain = np.empty(m, dtype=np.int64)  # a dense factor A = L^T L: each coordinate's parent the one before
    for i in range(m):
        chain[i] = i - 1
    if ltl_factor(A, chain) >= 0:
        return residual
    candidate = impulses.copy()
    velocity = np.empty_like(u)
    step = np.empty(m)
    for _ in range(4):  # refine: candidate_S -= (W_SS + ε)⁻¹ (u_S - target)
        _row_velocities(W, c, candidate, velocity)
        for i in range(m):
            step[i] = velocity[rows[i]] - target[i]
        ltl_solve(A, chain, step)
        for i in range(m):
            candidate[rows[i]] -= step[i]
    _row_velocities(W, c, candidate, velocity)
    polished = coulomb_residual(problem, velocity, candidate)
    if polished < residual:
        impulses[:] = candidate
        u[:] = velocity
        return polished
    return residual


@njit(cache=True)
def solve_coulomb(problem, impulses, u, tolerance, max_iterations):
    """Impulses λ (in: the warm start) of the CoulombProblem (W, c, ...) with
    u = W λ + c obeying, for each point, the Coulomb law, and for each joint
    row the law of joint_impulse (module docstring). Projected block
    Gauss-Seidel, polished every POLISH_EVERY sweeps by a direct solve of the
    rows that hold; stops at `tolerance`, after max_iterations sweeps, or when
    it stalls (STALL_CHECKS). Returns a SolverReport (sweeps, residual in m/s
    or rad/s)."""
    _row_velocities(problem.W, problem.c, impulses, u)
    residual = coulomb_residual(problem, u, impulses)
    if residual <= tolerance:
        return SolverReport(0, residual)
    checkpoint, stalled = residual, 0
    for sweep in range(1, max_iterations + 1):
        _sweep(problem, impulses, u)
        residual = coulomb_residual(problem, u, impulses)
        if residual > tolerance and sweep % POLISH_EVERY == 0:
            residual = _polish(problem, impulses, u, residual)
            stalled = stalled + 1 if residual > STALL_RATIO * checkpoint else 0
            checkpoint = residual
            if stalled == STALL_CHECKS:
                return SolverReport(sweep, residual)
        if residual <= tolerance:
            return SolverReport(sweep, residual)
    return SolverReport(max_iterations, residual)
