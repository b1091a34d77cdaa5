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

# Rows the solver cannot satisfy at the step's compliance are solved again at SOFTENING times it (at least
# SOFTENED_COMPLIANCE), up to SOFTENINGS times (stepping's docstring).
SOFTENINGS, SOFTENING, SOFTENED_COMPLIANCE = 2, 10.0, 0.01

# What the islands' solves did: the most sweeps and the largest residual of any, whether any was softened
IslandsReport = namedtuple("IslandsReport", "sweeps residual softened")
# solve_islands' scratch, of the step's work (work.lay_out_work: room for the robot's own rows, ints for any)
IslandScratch = namedtuple("IslandScratch", "ints floats")


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
def island_labels(dof_parent, rows, pairs, labels, root, link):
    """labels (pairs + joint rows,): each pair's and joint row's island, the
    root coordinate of one of its trees' (-1: a row no coordinate moves).
    Scratch: root, link (nv,)."""
    nv = dof_parent.shape[0]
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


@njit(cache=True, inline="always")
def island_rows(members, first, size, pairs, index):
    """The rows of the island whose pairs and joint rows are members[first:first + size] (its pairs
    first, group_islands), into index (room for 3 rows a pair, 1 a joint): returns (rows, pairs)."""
    n_pairs = 0
    for j in range(first, first + size):
        n_pairs += members[j] < pairs
    for j in range(n_pairs):
        for a in range(3):
            index[3 * j + a] = 3 * members[first + j] + a
    n_joints = size - n_pairs
    for j in range(n_joints):
        index[3 * n_pairs + j] = 3 * pairs + (members[first + n_pairs + j] - pairs)
    return index[:3 * n_pairs + n_joints], n_pairs


@njit(cache=True, inline="always")
def mark_paths(deepest, other, dof_parent, index, island, mark):
    """mark[col] = island for each coordinate on the rows' `index` paths to
    the root not marked so already; returns how many were newly marked (a
    walk stops at a marked coordinate: the rest of its path is marked)."""
    count = 0
    for r in range(index.shape[0]):
        for end in (deepest[index[r]], other[index[r]]):
            a = end
            while a >= 0 and mark[a] != island:
                mark[a] = island
                count += 1
                a = dof_parent[a]
    return count


@njit(cache=True, inline="always")
def group_islands(labels, island_of_label, island, starts, members):
    """The rows' islands in the order of their first row: island k's pairs
    and joint rows are members[starts[k]:starts[k + 1]], by increasing index
    (its pairs, then its joint rows: the problem's layout), in one pass over
    the rows, not one per island. Scratch: island_of_label (nv + 1,), island
    (rows,). Returns the number of islands."""
    island_of_label[:] = -1  # at label + 1 (label -1: rows no coordinate moves)
    starts[:] = 0
    islands = 0
    for i in range(labels.shape[0]):
        label = labels[i] + 1
        if island_of_label[label] < 0:
            island_of_label[label] = islands
            islands += 1
        island[i] = island_of_label[label]
        starts[island[i] + 1] += 1
    for k in range(islands):
        starts[k + 1] += starts[k]
    fill = island_of_label[:islands]  # each island's next member's place
    fill[:] = starts[:islands]
    for i in range(labels.shape[0]):
        members[fill[island[i]]] = i
        fill[island[i]] += 1
    return islands


@njit(cache=True)
def solve_islands(rows, dof_parent, friction, bound, lowest, highest, step, u, diagonal, scratch):
    """The impulses of all rows (rows.impulses, in: the warm starts), island
    by island, and u = W λ + c; diagonal (m,): each row's W_rr times the
    share of its impulse the compliance it was solved at turns into velocity
    (c / (1 + c): the contact velocity record_contacts reports). Returns an
    IslandsReport. The islands' problems share two buffers sized for the
    largest: `scratch`'s (IslandScratch) where they fit, else allocated."""
    pairs, joints = friction.shape[0], bound.shape[0]
    count, nv = pairs + joints, dof_parent.shape[0]
    Y, deepest, other = rows.G, rows.deepest, rows.other
    int_size = 5 * count + 2 * pairs + 6 * nv + 4
    ints = scratch.ints[:int_size] if int_size <= scratch.ints.shape[0] else np.empty(int_size, dtype=np.int64)
    labels, island_of_label, island = ints[:count], ints[count:count + nv + 1], ints[count + nv + 1:2 * count + nv + 1]
    starts, members = ints[2 * count + nv + 1:3 * count + nv + 2], ints[3 * count + nv + 2:4 * count + nv + 2]
    end = 5 * count + 2 * pairs + nv + 2
    index_buffer = ints[4 * count + nv + 2:end]  # room for 3 rows a pair, 1 a joint
    mark, columns = ints[end:end + nv], ints[end + nv:end + 2 * nv]
    column_starts = ints[end + 2 * nv:end + 3 * nv + 2]  # (islands + 1,): islands <= nv + 1 (a root each, and -1)
    island_labels(dof_parent, rows, pairs, labels, ints[end + 3 * nv + 2:end + 4 * nv + 2], ints[end + 4 * nv + 2:])
    islands = group_islands(labels, island_of_label, island, starts, members)
    # each island's columns: the union of its rows' paths to the root (islands share no coordinate), by
    # decreasing coordinate (the order delassus_entry sums in), columns[column_starts[k]:column_starts[k + 1]]
    mark[:] = -1
    largest, largest_block = 0, 0
    column_starts[0] = 0
    for k in range(islands):
        index, _ = island_rows(members, starts[k], starts[k + 1] - starts[k], pairs, index_buffer)
        marked = mark_paths(deepest, other, dof_parent, index, k, mark)
        column_starts[k + 1] = column_starts[k] + marked
        largest = max(largest, index.shape[0])
        largest_block = max(largest_block, index.shape[0] * marked)
    fill = island_of_label[:islands]  # each island's next column's place
    fill[:] = column_starts[:islands]
    for col in range(nv - 1, -1, -1):
        if mark[col] >= 0:
            columns[fill[mark[col]]] = col
            fill[mark[col]] += 1
    float_size = largest * (largest + 7) + largest_block
    floats = scratch.floats[:float_size] if float_size <= scratch.floats.shape[0] else np.empty(float_size)
    W_buffer, block_buffer = floats[:largest * largest], floats[largest * largest:largest * largest + largest_block]
    vectors = floats[largest * largest + largest_block:]
    c_buffer, impulse_buffer, velocity_buffer = vectors[:largest], vectors[largest:2 * largest], \
        vectors[2 * largest:3 * largest]
    friction_buffer, bound_buffer = vectors[3 * largest:4 * largest], vectors[4 * largest:5 * largest]
    lowest_buffer, highest_buffer = vectors[5 * largest:6 * largest], vectors[6 * largest:]
    sweeps, residual, softened = 0, 0.0, False
    for k in range(islands):
        first, size = starts[k], starts[k + 1] - starts[k]
        index, n_pairs = island_rows(members, first, size, pairs, index_buffer)
        n_joints, m = size - n_pairs, index.shape[0]
        W = W_buffer[:m * m].reshape((m, m))
        # W = Y_S Y_S^T over the island's columns: Y's entries there gathered, column r row index[r]'s, and a
        # row of W at a time, each entry summed by decreasing coordinate as delassus_entry's (the terms of
        # coordinates off row r's paths, where its Y is zero, left out: adding a zero changes no sum that
        # starts at +0)
        island_columns = columns[column_starts[k]:column_starts[k + 1]]
        block = block_buffer[:island_columns.shape[0] * m].reshape((island_columns.shape[0], m))
        for r in range(m):
            for j in range(island_columns.shape[0]):
                block[j, r] = Y[index[r], island_columns[j]]
        for r in range(m):
            W[r, :r + 1] = 0.0
            for j in range(island_columns.shape[0]):
                y = block[j, r]
                if y != 0.0:
                    for s in range(r + 1):
                        W[r, s] += y * block[j, s]
            for s in range(r):
                W[s, r] = W[r, s]
            W[r, r] *= 1.0 + step.compliance
        c, impulses, velocities = c_buffer[:m], impulse_buffer[:m], velocity_buffer[:m]
        for r in range(m):
            c[r], impulses[r] = rows.c[index[r]], rows.impulses[index[r]]
        island_friction = friction_buffer[:n_pairs]
        for j in range(n_pairs):
            island_friction[j] = friction[members[first + j]]
        island_bound, island_lowest = bound_buffer[:n_joints], lowest_buffer[:n_joints]
        island_highest = highest_buffer[:n_joints]
        for j in range(n_joints):
            joint = members[first + n_pairs + j] - pairs
            island_bound[j], island_lowest[j], island_highest[j] = bound[joint], lowest[joint], highest[joint]
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
