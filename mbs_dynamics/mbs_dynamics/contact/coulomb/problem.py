"""The problem u = W λ + c (CoulombProblem), its rows' velocities, and its
residual: the largest violation of the law (coulomb_residual), in velocity
units."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.contact.coulomb.law import joint_impulse

# The problem: u = W λ + c (W symmetric) with three rows per point (friction: one μ per point),
# then one row per joint (joint_bound: its friction impulse bound, lowest and
# highest: its velocity walls, -inf and inf where it has none).
CoulombProblem = namedtuple("CoulombProblem", "W c friction joint_bound lowest highest")
# What solve_coulomb did: its sweeps and the residual it reached.
SolverReport = namedtuple("SolverReport", "sweeps residual")


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
    """u += W[:, column] change: the velocities after one row's impulse
    changed, read along row `column` (W is symmetric: a contiguous row, not a
    strided column)."""
    if change != 0.0:
        for r in range(u.shape[0]):
            u[r] += W[column, r] * change


@njit(cache=True)
def _row_velocities(W, c, impulses, u):
    """u = W λ + c, four rows at a time: four sums in flight, each summed in
    the order of its row (one sum waited on each addition before)."""
    m = c.shape[0]
    r = 0
    while r + 4 <= m:
        total0, total1, total2, total3 = c[r], c[r + 1], c[r + 2], c[r + 3]
        for s in range(m):
            impulse = impulses[s]
            total0 += W[r, s] * impulse
            total1 += W[r + 1, s] * impulse
            total2 += W[r + 2, s] * impulse
            total3 += W[r + 3, s] * impulse
        u[r], u[r + 1], u[r + 2], u[r + 3] = total0, total1, total2, total3
        r += 4
    for row in range(r, m):
        total = c[row]
        for s in range(m):
            total += W[row, s] * impulses[s]
        u[row] = total


@njit(cache=True, inline="always")
def _keep_better(problem, candidate, velocity, impulses, u, residual):
    """impulses, u = the candidate and its velocities (computed into velocity)
    if its residual is below `residual`; returns the residual kept."""
    _row_velocities(problem.W, problem.c, candidate, velocity)
    polished = coulomb_residual(problem, velocity, candidate)
    if polished < residual:
        impulses[:] = candidate
        u[:] = velocity
        return polished
    return residual
