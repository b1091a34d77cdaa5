"""Semismooth Newton's method on the natural map of the Coulomb law with De
Saxcé's modified velocity (newton_polish): where block Gauss-Seidel stalls."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from mbs_dynamics.contact.coulomb.law import cone_projection, joint_impulse
from mbs_dynamics.contact.coulomb.problem import _keep_better, _row_velocities, coulomb_residual

# Newton steps of one newton_polish at most, and its line search's halvings.
NEWTON_STEPS, LINE_SEARCH_HALVINGS = 20, 20


@njit(cache=True)
def natural_map(problem, impulses, u, F, J):
    """F(λ) (m,), zero exactly where λ obeys the law, and its generalised
    Jacobian J (m, m), at u = W λ + c (given). Each point's rows: F = λ -
    P_K(λ - ρ û) with û = u + μ |u_t| e_n (De Saxcé's modified velocity: λ in
    the friction cone K, û in its dual, λ ⊥ û is the Coulomb law), ρ =
    1/W_nn; each joint row: F = Λ - Λ* (joint_impulse for the other rows).
    Returns ½ |F|²."""
    W, friction, joint_bound = problem.W, problem.friction, problem.joint_bound
    m, points = u.shape[0], problem.friction.shape[0]
    J[:] = 0.0
    projection = np.empty((3, 3))
    slope = np.empty((3, m))  # d(λ_k - ρ û_k)/dλ
    for k in range(points):
        n = 3 * k
        if not W[n, n] > 0.0:  # a point no coordinate moves: no impulse
            for a in range(3):
                F[n + a], J[n + a, n + a] = impulses[n + a], 1.0
            continue
        mu, rho = friction[k], 1.0 / W[n, n]
        slip = math.sqrt(u[n + 1] * u[n + 1] + u[n + 2] * u[n + 2])
        for a in range(3):
            for col in range(m):
                slope[a, col] = -rho * W[n + a, col]
            slope[a, n + a] += 1.0
        if slip > 0.0:
            for col in range(m):
                slope[0, col] -= rho * mu * (u[n + 1] * W[n + 1, col] + u[n + 2] * W[n + 2, col]) / slip
        z_n = impulses[n] - rho * (u[n] + mu * slip)
        p_n, p_1, p_2 = cone_projection(z_n, impulses[n + 1] - rho * u[n + 1], impulses[n + 2] - rho * u[n + 2],
                                        mu, projection)
        F[n], F[n + 1], F[n + 2] = impulses[n] - p_n, impulses[n + 1] - p_1, impulses[n + 2] - p_2
        for a in range(3):
            J[n + a, n + a] += 1.0
            for col in range(m):
                J[n + a, col] -= (projection[a, 0] * slope[0, col] + projection[a, 1] * slope[1, col]
                                  + projection[a, 2] * slope[2, col])
    for j in range(joint_bound.shape[0]):
        r = 3 * points + j
        w = W[r, r]
        if not w > 0.0:
            F[r], J[r, r] = impulses[r], 1.0
            continue
        x0 = u[r] - w * impulses[r]
        held = joint_impulse(x0, w, joint_bound[j], problem.lowest[j], problem.highest[j])
        F[r] = impulses[r] - held
        if abs(held) != joint_bound[j]:  # friction holds it or a wall does: Λ* = (x* - x0) / w
            for col in range(m):  # F = W_r λ / w + constant
                J[r, col] = W[r, col] / w
        else:
            J[r, r] = 1.0
    half_square = 0.0
    for r in range(m):
        half_square += 0.5 * F[r] * F[r]
    return half_square


@njit(cache=True)
def _solve_dense(A, b):
    """b = A⁻¹ b by Gaussian elimination with partial pivoting, A overwritten;
    a pivot below 1e-12 of A's largest entry is raised to it (a singular
    Jacobian of redundant rows: one of its solutions)."""
    m = b.shape[0]
    tiny = 0.0
    for r in range(m):
        for col in range(m):
            tiny = max(tiny, abs(A[r, col]))
    tiny = max(tiny, 1.0) * 1e-12
    for col in range(m):
        pivot = col
        for r in range(col + 1, m):
            if abs(A[r, col]) > abs(A[pivot, col]):
                pivot = r
        if pivot != col:
            for c in range(m):
                A[col, c], A[pivot, c] = A[pivot, c], A[col, c]
            b[col], b[pivot] = b[pivot], b[col]
        if abs(A[col, col]) < tiny:
            A[col, col] = tiny if A[col, col] >= 0.0 else -tiny
        for r in range(col + 1, m):
            factor = A[r, col] / A[col, col]
            if factor != 0.0:
                for c in range(col, m):
                    A[r, c] -= factor * A[col, c]
                b[r] -= factor * b[col]
    for col in range(m - 1, -1, -1):
        total = b[col]
        for c in range(col + 1, m):
            total -= A[col, c] * b[c]
        b[col] = total / A[col, col]


@njit(cache=True)
def newton_polish(problem, impulses, u, residual, tolerance, cold):
    """Semismooth Newton's method on the natural map (natural_map) from λ (or,
    `cold`, from zero: a warm start can lead it to a local minimum of |F|),
    with a backtracking (Armijo) line search on ½ |F|², NEWTON_STEPS steps at
    most: where Gauss-Seidel cycles (points of one body sliding with
    friction), it converges in a few steps (1 to 7 on a falling TALOS). Kept
    if its residual is smaller; returns the residual."""
    W, c = problem.W, problem.c
    m = c.shape[0]
    F, J = np.empty(m), np.empty((m, m))
    trial_F, trial_J = np.empty(m), np.empty((m, m))
    candidate, trial, velocity, direction = impulses.copy(), np.empty(m), u.copy(), np.empty(m)
    if cold:
        candidate[:] = 0.0
        _row_velocities(W, c, candidate, velocity)
    merit = natural_map(problem, candidate, velocity, F, J)
    for _ in range(NEWTON_STEPS):
        for r in range(m):
            direction[r] = -F[r]
        _solve_dense(J, direction)
        t = 1.0
        accepted = False
        for _ in range(LINE_SEARCH_HALVINGS):
            for r in range(m):
                trial[r] = candidate[r] + t * direction[r]
            _row_velocities(W, c, trial, velocity)
            trial_merit = natural_map(problem, trial, velocity, trial_F, trial_J)
            if trial_merit <= (1.0 - 1e-4 * t) * merit:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            break
        candidate[:] = trial
        F[:], J[:] = trial_F, trial_J
        merit = trial_merit
        if coulomb_residual(problem, velocity, candidate) <= tolerance:
            break
    return _keep_better(problem, candidate, velocity, impulses, u, residual)
