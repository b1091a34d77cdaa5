"""The solver (solve_coulomb): nonsmooth block Gauss-Seidel sweeps
(_sweep), every POLISH_EVERY sweeps the rows that hold solved for directly
(_polish), and Newton's method (newton.py) where that stalls."""
from __future__ import annotations

import numpy as np
from numba import njit

from mbs_dynamics.algorithms.crba import ltl_factor_dense, ltl_solve_dense
from mbs_dynamics.contact.coulomb.law import point_impulse
from mbs_dynamics.contact.coulomb.newton import newton_polish
from mbs_dynamics.contact.coulomb.problem import (
    SolverReport,
    _add_column,
    _joint_row_impulse,
    _keep_better,
    _row_velocities,
    coulomb_residual,
)

# Gauss-Seidel sweeps between attempts to polish the sticking set
POLISH_EVERY = 8
# A polish that leaves the residual above STALL_RATIO times the one before is a
# stall: Gauss-Seidel converges slowly or cycles (points on one body sliding
# with friction swap their loads sweep after sweep), and Newton's method
# (newton_polish) takes over from where it stands. The solver gives up after
# STALL_CHECKS stalls in a row: contradictory rows (a penetrated joint limit
# pushing a foot into the ground) have no solution, and sweeping on would cost
# time for nothing.
STALL_RATIO, STALL_CHECKS = 0.5, 3


@njit(cache=True)
def _sweep(problem, impulses, u):
    """One nonsmooth block Gauss-Seidel sweep over the points, then the joint rows."""
    W, friction = problem.W, problem.friction
    points = friction.shape[0]
    for k in range(points):
        n, t1, t2 = 3 * k, 3 * k + 1, 3 * k + 2
        if not W[n, n] > 0.0:  # a point no coordinate moves
            continue
        free_n, free_1, free_2 = u[n], u[t1], u[t2]  # the point's velocity without its own impulses
        for a in range(3):
            free_n -= W[n, n + a] * impulses[n + a]
            free_1 -= W[t1, n + a] * impulses[n + a]
            free_2 -= W[t2, n + a] * impulses[n + a]
        normal, x1, x2 = point_impulse(W[n, n], W[n, t1], W[n, t2], W[t1, t1], W[t1, t2], W[t2, t2],
                                       free_n, free_1, free_2, friction[k], impulses[t1], impulses[t2])
        change_n, change_1, change_2 = normal - impulses[n], x1 - impulses[t1], x2 - impulses[t2]
        if change_n != 0.0 and change_1 != 0.0 and change_2 != 0.0:
            # the three columns in one pass (_add_column's, each u[r]'s terms added in the same order)
            for r in range(u.shape[0]):
                u[r] = u[r] + W[n, r] * change_n + W[t1, r] * change_1 + W[t2, r] * change_2
        else:
            _add_column(W, u, n, change_n)
            _add_column(W, u, t1, change_1)
            _add_column(W, u, t2, change_2)
        impulses[n], impulses[t1], impulses[t2] = normal, x1, x2
    for j in range(problem.joint_bound.shape[0]):
        r = 3 * points + j
        if W[r, r] > 0.0:
            value = _joint_row_impulse(problem, j, r, u, impulses)
            _add_column(W, u, r, value - impulses[r])
            impulses[r] = value


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
    if ltl_factor_dense(A) >= 0:  # A = L^T L
        return residual
    candidate = impulses.copy()
    velocity = np.empty_like(u)
    step = np.empty(m)
    for _ in range(4):  # refine: candidate_S -= (W_SS + ε)⁻¹ (u_S - target)
        _row_velocities(W, c, candidate, velocity)
        for i in range(m):
            step[i] = velocity[rows[i]] - target[i]
        ltl_solve_dense(A, step)
        for i in range(m):
            candidate[rows[i]] -= step[i]
    return _keep_better(problem, candidate, velocity, impulses, u, residual)


@njit(cache=True)
def solve_coulomb(problem, impulses, u, tolerance, max_iterations):
    """Impulses λ (in: the warm start) of the CoulombProblem (W, c, ...) with
    u = W λ + c obeying, for each point, the Coulomb law, and for each joint
    row the law of joint_impulse (module docstring). Nonsmooth block
    Gauss-Seidel, polished every POLISH_EVERY sweeps by a direct solve of the
    rows that hold, and by Newton's method where it stalls or runs out of
    sweeps; stops at `tolerance`, after max_iterations sweeps, or when it
    stalls STALL_CHECKS times in a row. Returns a SolverReport (sweeps,
    residual in m/s or rad/s)."""
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
            if residual > STALL_RATIO * checkpoint:
                residual = newton_polish(problem, impulses, u, residual, tolerance, False)
                stalled += 1
            else:
                stalled = 0
            checkpoint = residual
            if stalled == STALL_CHECKS and residual > tolerance:
                return SolverReport(sweep, newton_polish(problem, impulses, u, residual, tolerance, True))
        if residual <= tolerance:
            return SolverReport(sweep, residual)
    residual = newton_polish(problem, impulses, u, residual, tolerance, False)
    if residual > tolerance:
        residual = newton_polish(problem, impulses, u, residual, tolerance, True)
    return SolverReport(max_iterations, residual)
