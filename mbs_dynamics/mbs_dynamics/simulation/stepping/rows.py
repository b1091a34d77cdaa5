"""The step's constraint rows and its Delassus operator: for each
point-obstacle pair the velocity of the contact point along its axes
(n, t1, t2), for each coordinate with Coulomb friction or at a position
limit its velocity; W = G (M + dt D)⁻¹ G^T from the factor L^T L of
M + dt D, with the tree's sparsity (stepping's docstring)."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.algorithms.crba import ltl_solve_lower, ltl_solve_transposed_chain
from mbs_dynamics.algorithms.kinematics import add_point_jacobian

# The joints' velocity walls (nv,): -inf and inf where none; walls: how many are finite
VelocityWalls = namedtuple("VelocityWalls", "lowest highest walls")
# The constraint rows: G (m, nv), each row zero off the path from coordinate `deepest`
# to the root (-1: all zero), c = G v_free + bias, and the impulses (in: the warm start)
Rows = namedtuple("Rows", "G deepest c impulses")


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
    records) or a wall (laid out in coordinates (nv,))."""
    count = 0
    for iv in range(terms.shape[0]):
        if terms[iv].friction > 0.0 or walls.lowest[iv] > -np.inf or walls.highest[iv] < np.inf:
            coordinates[count] = iv
            count += 1
    return coordinates[:count]


@njit(cache=True, inline="always")
def pair_rows(model, rows, pairs, spheres, kinematics, v_free, contacts, jacobian):
    """Each pair's rows G = axes J_c (J_c: the Jacobian of its contact point,
    on its sphere's body), c = G v_free + (b on the normal row), the warm
    start its previous impulses (CONTACT records; the normal one >= 0).
    jacobian (6, nv): scratch."""
    nv = v_free.shape[0]
    G, deepest, c, impulses = rows
    for i in range(pairs.point.shape[0]):
        jacobian[:] = 0.0
        add_point_jacobian(model, kinematics.S, kinematics.world_R, kinematics.world_p,
                           spheres[pairs.point[i]].body,
                           pairs.location[i], jacobian)
        axes = pairs.axes[i]
        warm_start = contacts[pairs.point[i], pairs.obstacle[i]].impulse
        for a in range(3):
            row = 3 * i + a
            deepest[row] = -1
            for col in range(nv):
                G[row, col] = axes[a, 0] * jacobian[3, col] + axes[a, 1] * jacobian[4, col] \
                    + axes[a, 2] * jacobian[5, col]
                if G[row, col] != 0.0:
                    deepest[row] = col
            total = pairs.bias[i] if a == 0 else 0.0
            for col in range(nv):
                total += G[row, col] * v_free[col]
            c[row] = total
            impulses[row] = warm_start[a]
        impulses[3 * i] = max(impulses[3 * i], 0.0)


@njit(cache=True, inline="always")
def joint_rows(rows, first, coordinates, v_free, walls, terms, dt, previous):
    """The joint rows from row `first` on, one per coordinate: G its unit row,
    c its free velocity; and their laws (coulomb.joint_impulse): the friction
    impulse's bound f dt (JOINT_TERMS records) and the walls. The warm start
    its previous impulse (COORDINATE records), within the friction bound on a
    side with no wall. Returns (bound, lowest, highest)."""
    G, deepest, c, impulses = rows
    count = coordinates.shape[0]
    bound, lowest, highest = np.empty(count), np.empty(count), np.empty(count)
    for j in range(count):
        row, iv = first + j, coordinates[j]
        G[row, iv], deepest[row], c[row] = 1.0, iv, v_free[iv]
        bound[j], lowest[j], highest[j] = terms[iv].friction * dt, walls.lowest[iv], walls.highest[iv]
        impulses[row] = min(max(previous[iv].joint_impulse, -bound[j] if highest[j] == np.inf else -np.inf),
                            bound[j] if lowest[j] == -np.inf else np.inf)
    return bound, lowest, highest


@njit(cache=True, inline="always")
def delassus(L, dof_parent, rows, compliance):
    """W = G M⁻¹ G^T = Y Y^T with Y = L^-T G^T (M = L^T L), its diagonal times
    1 + compliance: G's rows are overwritten by Y's, each zero off the same
    path to the root."""
    G, deepest = rows.G, rows.deepest
    m = G.shape[0]
    for row in range(m):
        ltl_solve_transposed_chain(L, dof_parent, G[row], deepest[row])
    W = np.empty((m, m))
    for r in range(m):
        for s in range(r + 1):
            total = 0.0
            col = deepest[r]
            while col >= 0:
                total += G[r, col] * G[s, col]
                col = dof_parent[col]
            W[r, s] = total
            W[s, r] = total
        W[r, r] *= 1.0 + compliance
    return W


@njit(cache=True, inline="always")
def velocity_change(L, dof_parent, rows):
    """M⁻¹ G^T λ = L⁻¹ Y^T λ, from the rows Y that delassus() left."""
    Y, deepest, impulses = rows.G, rows.deepest, rows.impulses
    change = np.zeros(Y.shape[1])
    for row in range(Y.shape[0]):
        col = deepest[row]
        while col >= 0:
            change[col] += Y[row, col] * impulses[row]
            col = dof_parent[col]
    ltl_solve_lower(L, dof_parent, change)
    return change
