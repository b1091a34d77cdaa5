"""The step's constraint rows and its Delassus operator: for each pair the
velocity of its contact point (of body b relative to body a) along its axes
(n, t1, t2), for each coordinate with Coulomb friction or at a position
limit its velocity; W = G (M + dt D)⁻¹ G^T from the factor L^T L of
M + dt D, with the tree's sparsity (stepping's docstring), entry by entry
(islands.py builds it island by island, entry by entry summed by decreasing
coordinate)."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.algorithms.crba import ltl_solve_lower, ltl_solve_transposed_paths
from mbs_dynamics.algorithms.joint_friction import sliding_friction
from mbs_dynamics.algorithms.kinematics import world_screws

# The joints' velocity walls (nv,): -inf and inf where none; walls: how many are finite
VelocityWalls = namedtuple("VelocityWalls", "lowest highest walls")
# The constraint rows: G (m, nv), each row zero off the paths from coordinates `deepest` and `other` to the
# root (-1: none; a contact between two bodies has two), c = G v_free + bias, and the impulses (in: the warm
# start)
Rows = namedtuple("Rows", "G deepest other c impulses")


@njit(cache=True, inline="always")
def closing_speed(gap, dt, stabilization):
    """The bias of a constraint `gap` away from its bound (stepping's
    docstring): the whole gap closed within the step, or a penetration
    (gap < 0) pushed out at `stabilization` of it per step."""
    return gap / dt if gap > 0.0 else stabilization * gap / dt


@njit(cache=True, inline="always")
def velocity_walls(q, v_free, limits, step, lowest, highest):
    """Each coordinate's velocity walls (into lowest, highest (nv,)) from the
    position limits (LIMIT records) it is at or passes within the step, their
    gaps closed as the points' normal rows'."""
    lowest[:] = -np.inf
    highest[:] = np.inf
    walls = 0
    for j in range(limits.shape[0]):
        limit = limits[j]
        iv, at = limit.v, q[limit.q]
        gap = at - limit.lower
        if gap + step.dt * min(0.0, v_free[iv]) <= step.margin:
            lowest[iv] = -closing_speed(gap, step.dt, step.stabilization)
            walls += 1
        gap = limit.upper - at
        if gap - step.dt * max(0.0, v_free[iv]) <= step.margin:
            highest[iv] = closing_speed(gap, step.dt, step.stabilization)
            walls += 1
    return VelocityWalls(lowest, highest, walls)


@njit(cache=True, inline="always")
def joint_row_coordinates(terms, walls, coordinates):
    """The coordinates that get a joint row: with friction (JOINT_TERMS
    records: static >= Coulomb) or a wall (laid out in coordinates (nv,))."""
    count = 0
    for iv in range(terms.shape[0]):
        if terms[iv].static > 0.0 or walls.lowest[iv] > -np.inf or walls.highest[iv] < np.inf:
            coordinates[count] = iv
            count += 1
    return coordinates[:count]


@njit(cache=True, inline="always")
def add_point_row(model, screws, b, x, axis, sign, row):
    """row (nv,) += sign axis . (the velocity of the world point x moving with
    body b per coordinate), from the world screws (kinematics.world_screws)
    of b's path to the root: axis . (v + w x x) = axis . v + (x x axis) . w.
    Returns the deepest coordinate on the path (-1: none, the world)."""
    m0, m1, m2 = x[1] * axis[2] - x[2] * axis[1], x[2] * axis[0] - x[0] * axis[2], x[0] * axis[1] - x[1] * axis[0]
    deepest = -1
    while b >= 0:
        for k in range(model.nv_joint[b]):
            col = model.v_start[b] + k
            deepest = max(deepest, col)
            screw = screws[b, k]
            row[col] += sign * (axis[0] * screw[3] + axis[1] * screw[4] + axis[2] * screw[5]
                                + m0 * screw[0] + m1 * screw[1] + m2 * screw[2])
        b = model.parent[b]
    return deepest


@njit(cache=True, inline="always")
def path_columns(dof_parent, deepest, other, columns):
    """The coordinates of the union of the paths from deepest and other (-1:
    none) to the root, decreasing, written into columns: returns their count."""
    count, a, b = 0, deepest, other
    while a >= 0 or b >= 0:
        col = max(a, b)
        columns[count] = col
        count += 1
        if a == col:
            a = dof_parent[a]
        if b == col:
            b = dof_parent[b]
    return count


@njit(cache=True, inline="always")
def pair_rows(model, dof_parent, rows, pairs, kinematics, v_free, screws, columns):
    """Each pair's rows G = axes (J_b - J_a) (J: the Jacobian of its contact
    point on body b, and on body a, none for the world), c = G v_free + (b
    on the normal row, the tangent biases on the others); the normal warm start clipped at 0 (the caller wrote
    the warm starts, and zeroed G). Only the columns of the two bodies'
    paths to the root are touched. screws (nbodies, 6, 6), columns (nv,):
    scratch."""
    G, deepest, other, c, impulses = rows
    if pairs.body_b.shape[0] > 0:
        world_screws(model, kinematics.S, kinematics.world_R, kinematics.world_p, screws)
    for i in range(pairs.body_b.shape[0]):
        body_a, body_b, x, axes = pairs.body_a[i], pairs.body_b[i], pairs.location[i], pairs.axes[i]
        for a in range(3):
            row = 3 * i + a
            deep_b = add_point_row(model, screws, body_b, x, axes[a], 1.0, G[row])
            deep_a = add_point_row(model, screws, body_a, x, axes[a], -1.0, G[row])
            deepest[row], other[row] = deep_b, deep_a
            if deep_b < 0 and deep_a >= 0:
                deepest[row], other[row] = deep_a, -1
            count = path_columns(dof_parent, deep_b, deep_a, columns)
            total = pairs.bias[i] if a == 0 else pairs.tangent_bias[i, a - 1]
            for k in range(count - 1, -1, -1):  # by increasing coordinate
                total += G[row, columns[k]] * v_free[columns[k]]
            c[row] = total
        impulses[3 * i] = max(impulses[3 * i], 0.0)


@njit(cache=True, inline="always")
def joint_rows(rows, first, coordinates, v, v_free, walls, terms, dt, previous, laws):
    """The joint rows from row `first` on, one per coordinate: G its unit row,
    c its free velocity; and their laws (coulomb.joint_impulse): the friction
    impulse's bound f dt and the walls. f is the friction's level at the
    coordinate's velocity v at the step's start (joint_friction.sliding_friction
    of the JOINT_TERMS records): the static friction from rest, the Stribeck
    curve's level while sliding (stepping's docstring). The warm start its
    previous impulse (COORDINATE records), within the friction bound on a
    side with no wall. Returns (bound, lowest, highest), views of laws (3, nv)."""
    G, deepest, other, c, impulses = rows
    count = coordinates.shape[0]
    bound, lowest, highest = laws[0, :count], laws[1, :count], laws[2, :count]
    for j in range(count):
        row, iv = first + j, coordinates[j]
        G[row, iv], deepest[row], other[row], c[row] = 1.0, iv, -1, v_free[iv]
        level = sliding_friction(terms[iv].friction, terms[iv].static, terms[iv].stribeck_velocity, v[iv])
        bound[j], lowest[j], highest[j] = level * dt, walls.lowest[iv], walls.highest[iv]
        impulses[row] = min(max(previous[iv].joint_impulse, -bound[j] if highest[j] == np.inf else -np.inf),
                            bound[j] if lowest[j] == -np.inf else np.inf)
    return bound, lowest, highest


@njit(cache=True, inline="always")
def transform_rows(L, dof_parent, rows):
    """G's rows overwritten by Y's, Y = L^-T G^T (M = L^T L): each zero off
    the same paths to the root, so that the Delassus operator is
    W = G M⁻¹ G^T = Y Y^T (islands.solve_islands)."""
    G, deepest, other = rows.G, rows.deepest, rows.other
    row = 0
    while row < G.shape[0]:  # consecutive rows on the same paths (a point's, a sole's corners') at once
        end = row + 1
        while end < G.shape[0] and deepest[end] == deepest[row] and other[end] == other[row]:
            end += 1
        ltl_solve_transposed_paths(L, dof_parent, G[row:end], deepest[row], other[row])
        row = end


@njit(cache=True, inline="always")
def velocity_change(L, dof_parent, rows, change):
    """change (nv,) = M⁻¹ G^T λ = L⁻¹ Y^T λ, from the rows Y that
    transform_rows left."""
    Y, deepest, other, impulses = rows.G, rows.deepest, rows.other, rows.impulses
    change[:] = 0.0
    row = 0
    while row < Y.shape[0]:  # consecutive rows on the same paths at once, each entry summed by row
        end = row + 1
        while end < Y.shape[0] and deepest[end] == deepest[row] and other[end] == other[row]:
            end += 1
        a, b = deepest[row], other[row]
        if b < 0:
            while a >= 0:
                for r in range(row, end):
                    change[a] += Y[r, a] * impulses[r]
                a = dof_parent[a]
        while a >= 0 or b >= 0:
            col = max(a, b)
            for r in range(row, end):
                change[col] += Y[r, col] * impulses[r]
            if a == col:
                a = dof_parent[a]
            if b == col:
                b = dof_parent[b]
        row = end
    ltl_solve_lower(L, dof_parent, change)
    return change


@njit(cache=True, inline="always")
def zeroed_rows(G, m, zeroed):
    """G's first m rows all zero off what the rows will write: the rows below
    zeroed[0] are (clear_rows leaves them so), those above it are zeroed
    now, once a call: zeroing every row in every pass cost O(m nv), most of
    a step with a hundred objects."""
    for row in range(zeroed[0], m):
        G[row, :] = 0.0
    zeroed[0] = max(zeroed[0], m)


@njit(cache=True, inline="always")
def clear_rows(rows, dof_parent):
    """Zero what the rows hold: the entries on their paths."""
    G, deepest, other = rows.G, rows.deepest, rows.other
    for row in range(G.shape[0]):
        a, b = deepest[row], other[row]
        while a >= 0 or b >= 0:
            col = max(a, b)
            G[row, col] = 0.0
            if a == col:
                a = dof_parent[a]
            if b == col:
                b = dof_parent[b]
