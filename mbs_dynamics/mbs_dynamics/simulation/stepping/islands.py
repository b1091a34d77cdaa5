"""The rows of a step split into islands, solved one by one: rows are in
one island when they move coordinates of the same trees of the model (a
robot and the objects it touches, a stack of boxes), so that W is block
diagonal over the islands and each block a problem of its own (coulomb's
CoulombProblem); the cost of a scene of many objects apart grows with the
objects, not with their square. Rows that the solver cannot satisfy at the
step's compliance are solved again softer (SOFTENING, stepping's
docstring), island by island."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.contact.coulomb import CoulombProblem, solve_coulomb
from mbs_dynamics.simulation.stepping.rows import delassus_entry

# Rows the solver cannot satisfy at the step's compliance are solved again at SOFTENING times it (at least
# SOFTENED_COMPLIANCE), up to SOFTENINGS times (stepping's docstring).
SOFTENINGS, SOFTENING, SOFTENED_COMPLIANCE = 2, 10.0, 0.01

# What the islands' solves did: the most sweeps and the largest residual of any, whether any was softened
IslandsReport = namedtuple("IslandsReport", "sweeps residual softened")


@njit(cache=True, inline="always")
def _find(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


@njit(cache=True, inline="always")
def _tree(root, deepest, other):
    """The tree (its root coordinate) of a row's first path, else its second, else -1."""
    if deepest >= 0:
        return root[deepest]
    if other >= 0:
        return root[other]
    return -1


@njit(cache=True)
def island_labels(dof_parent, rows, pairs, labels):
    """labels (pairs + joint rows,): each pair's and joint row's island, the
    root coordinate of one of its trees' (-1: a row no coordinate moves)."""
    nv = dof_parent.shape[0]
    root = np.empty(nv, dtype=np.int64)
    link = np.empty(nv, dtype=np.int64)
    for k in range(nv):  # a coordinate's parent comes before it
        root[k] = k if dof_parent[k] < 0 else root[dof_parent[k]]
        link[k] = k
    deepest, other = rows.deepest, rows.other
    for i in range(pairs):
        for r in range(3 * i, 3 * i + 3):
            if deepest[r] >= 0 and other[r] >= 0:
                a, b = _find(link, root[deepest[r]]), _find(link, root[other[r]])
                if a != b:
                    link[max(a, b)] = min(a, b)
    count = labels.shape[0]
    for i in range(count):
        r = 3 * i if i < pairs else 3 * pairs + (i - pairs)
        tree = -1
        for q in range(r, r + 3 if i < pairs else r + 1):
            if tree < 0:
                tree = _tree(root, deepest[q], other[q])
        labels[i] = _find(link, tree) if tree >= 0 else -1


@njit(cache=True)
def solve_islands(rows, dof_parent, friction, bound, lowest, highest, step, u, diagonal):
    """The impulses of all rows (rows.impulses, in: the warm starts), island
    by island, and u = W λ + c; diagonal (m,): each row's W_rr times the
    share of its impulse the compliance it was solved at turns into velocity
    (c / (1 + c): the contact velocity record_contacts reports). Returns an
    IslandsReport."""
    pairs, joints = friction.shape[0], bound.shape[0]
    Y, deepest, other = rows.G, rows.deepest, rows.other
    labels = np.empty(pairs + joints, dtype=np.int64)
    island_labels(dof_parent, rows, pairs, labels)
    done = np.zeros(pairs + joints, dtype=np.bool_)
    members = np.empty(pairs + joints, dtype=np.int64)
    sweeps, residual, softened = 0, 0.0, False
    for first in range(pairs + joints):
        if done[first]:
            continue
        island, n_pairs, n_joints = labels[first], 0, 0
        for i in range(first, pairs + joints):  # its pairs, then its joint rows: the problem's layout
            if not done[i] and labels[i] == island:
                done[i] = True
                members[n_pairs + n_joints] = i
                if i < pairs:
                    n_pairs += 1
                else:
                    n_joints += 1
        m = 3 * n_pairs + n_joints
        index = np.empty(m, dtype=np.int64)
        for j in range(n_pairs):
            for a in range(3):
                index[3 * j + a] = 3 * members[j] + a
        for j in range(n_joints):
            index[3 * n_pairs + j] = 3 * pairs + (members[n_pairs + j] - pairs)
        W = np.empty((m, m))
        for r in range(m):
            for s in range(r + 1):
                W[r, s] = W[s, r] = delassus_entry(Y, deepest, other, dof_parent, index[r], index[s])
            W[r, r] *= 1.0 + step.compliance
        c, impulses, velocities = np.empty(m), np.empty(m), np.empty(m)
        for r in range(m):
            c[r], impulses[r] = rows.c[index[r]], rows.impulses[index[r]]
        island_friction = np.empty(n_pairs)
        for j in range(n_pairs):
            island_friction[j] = friction[members[j]]
        island_bound, island_lowest, island_highest = np.empty(n_joints), np.empty(n_joints), np.empty(n_joints)
        for j in range(n_joints):
            k = members[n_pairs + j] - pairs
            island_bound[j], island_lowest[j], island_highest[j] = bound[k], lowest[k], highest[k]
        problem = CoulombProblem(W, c, island_friction, island_bound, island_lowest, island_highest)
        solver = solve_coulomb(problem, impulses, velocities, step.tolerance, step.max_iterations)
        island_sweeps, island_residual, compliance = solver.sweeps, solver.residual, step.compliance
        for _ in range(SOFTENINGS):
            if island_residual <= step.tolerance:
                break
            softer = max(SOFTENING * compliance, SOFTENED_COMPLIANCE)
            for r in range(m):
                W[r, r] *= (1.0 + softer) / (1.0 + compliance)
            compliance, softened = softer, True
            solver = solve_coulomb(problem, impulses, velocities, step.tolerance, step.max_iterations)
            island_sweeps, island_residual = island_sweeps + solver.sweeps, solver.residual
        for r in range(m):
            rows.impulses[index[r]], u[index[r]] = impulses[r], velocities[r]
            diagonal[index[r]] = W[r, r] * compliance / (1.0 + compliance)
        sweeps, residual = max(sweeps, island_sweeps), max(residual, island_residual)
    return IslandsReport(sweeps, residual, softened)
