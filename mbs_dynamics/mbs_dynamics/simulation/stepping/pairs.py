"""Which contact points meet which obstacles in a step: the points' world
positions and velocities, whether any is within reach (the smooth
integrator must not take the step), and the point-obstacle pairs that enter
the solver, with their contact axes, contact points and the bias of their
normal rows; a body's many coplanar pairs reduced to the extreme points of
their patch."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.algorithms.kinematics import body_poses_kernel
from mbs_dynamics.multibody.joints import body_velocity
from mbs_dynamics.multibody.model import body_count
from mbs_dynamics.multibody.workspace import kinematic_views
from mbs_dynamics.simulation.stepping.obstacles import obstacle_distance
from mbs_dynamics.simulation.stepping.rows import closing_speed

# Slower impacts (m/s) do not bounce: a resting contact stays at rest.
BOUNCE_SPEED = 1e-2
# A body's points touching one obstacle beyond this many are reduced to those extreme along PATCH_DIRECTIONS
# directions of the obstacle's tangent plane, and the deepest: a patch of coplanar points (a sole's mesh
# vertices) makes as many redundant rows, on which the solver stalls.
PATCH_POINTS = 8
PATCH_DIRECTIONS = 8

# The pairs in the solver, the point-obstacle pairs first, then the contacts between bodies: each one's
# point and obstacle (-1 for a contact between bodies), its bodies a and b (a = -1: the world, an obstacle)
# and shapes (-1: none), its gap, normal-row bias, tangential rows' biases (rigid_corrections), contact axes
# (rows n from a to b, t1, t2), contact point (world) and friction
Pairs = namedtuple("Pairs", "point obstacle body_a body_b shape_a shape_b gap bias tangent_bias axes location "
                            "friction")
# A rigid correction's pivots below this share of the largest are dropped (its twist's components that no
# normal row moves)
CORRECTION_PIVOT = 1e-10
# A rigid correction is taken only where it meets the normal targets within this share of the largest
CORRECTION_MISFIT = 1e-9


@njit(cache=True, inline="always")
def tangent_axes(axes):
    """Rows 1 and 2 of axes: unit tangents t1, t2 with t1 x t2 = n (row 0), the
    x and y axes for n = z (model.plane_basis)."""
    n0, n1, n2 = axes[0, 0], axes[0, 1], axes[0, 2]
    h0, h1 = (1.0, 0.0) if abs(n0) < 0.9 else (0.0, 1.0)
    along = h0 * n0 + h1 * n1
    f0, f1, f2 = h0 - along * n0, h1 - along * n1, -along * n2
    norm = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
    f0, f1, f2 = f0 / norm, f1 / norm, f2 / norm
    axes[1, 0], axes[1, 1], axes[1, 2] = f0, f1, f2
    axes[2, 0], axes[2, 1], axes[2, 2] = n1 * f2 - n2 * f1, n2 * f0 - n0 * f2, n0 * f1 - n1 * f0


@njit(cache=True, inline="always")
def point_velocity(body_R, body_p, vel, b, x0, x1, x2):
    """The world velocity of the world point x moving with body b, whose body
    twist is vel[b]: R_b u + (R_b w) x (x - p_b)."""
    w, u, Rb = vel[b, :3], vel[b, 3:], body_R[b]
    r0, r1, r2 = x0 - body_p[b, 0], x1 - body_p[b, 1], x2 - body_p[b, 2]
    w0 = Rb[0, 0] * w[0] + Rb[0, 1] * w[1] + Rb[0, 2] * w[2]
    w1 = Rb[1, 0] * w[0] + Rb[1, 1] * w[1] + Rb[1, 2] * w[2]
    w2 = Rb[2, 0] * w[0] + Rb[2, 1] * w[1] + Rb[2, 2] * w[2]
    return (Rb[0, 0] * u[0] + Rb[0, 1] * u[1] + Rb[0, 2] * u[2] + w1 * r2 - w2 * r1,
            Rb[1, 0] * u[0] + Rb[1, 1] * u[1] + Rb[1, 2] * u[2] + w2 * r0 - w0 * r2,
            Rb[2, 0] * u[0] + Rb[2, 1] * u[1] + Rb[2, 2] * u[2] + w0 * r1 - w1 * r0)


@njit(cache=True, inline="always")
def point_positions(packed, q, spheres, buffer, positions, placed):
    """positions (k, 3) = the world positions of the contact points' centres
    (SPHERE records) at q, from the bodies' placements in buffer's kinematic views, computed there
    first unless `placed` (crba_paths_kernel leaves them at its q)."""
    kinematics, o = kinematic_views(buffer, body_count(packed))
    if not placed:
        body_poses_kernel(packed, q, kinematics.R, kinematics.p, kinematics.S, kinematics.world_R,
                          kinematics.world_p)
    body_R, body_p = kinematics.world_R, kinematics.world_p
    for k in range(spheres.shape[0]):
        b, x = spheres[k].body, spheres[k].centre
        if b < 0:
            positions[k, 0], positions[k, 1], positions[k, 2] = x[0], x[1], x[2]
            continue
        for r in range(3):
            positions[k, r] = body_p[b, r] + body_R[b, r, 0] * x[0] + body_R[b, r, 1] * x[1] + body_R[b, r, 2] * x[2]
    return kinematics, o


@njit(cache=True, inline="always")
def body_twists(model, kinematics, v, vel):
    """vel[i] = the body twist of every body at velocity v (joints.body_velocity)."""
    for i in range(model.parent.shape[0]):
        body_velocity(model, i, kinematics.R, kinematics.p, kinematics.S, v, vel)


@njit(cache=True, inline="always")
def within_reach(spheres, obstacles, positions, kinematics, vel, dt, margin, gaps):
    """Whether some point is within `margin` of an obstacle or reaches it within
    the step at its present velocity (body twists vel): the smooth integrator
    then must not take the step. gaps (k,): each point's distance from the
    nearest obstacle."""
    reach = False
    for k in range(spheres.shape[0]):
        gaps[k] = np.inf
        b = spheres[k].body
        if b < 0:
            continue
        x0, x1, x2 = positions[k, 0], positions[k, 1], positions[k, 2]
        for o in range(obstacles.shape[0]):
            gap, n0, n1, n2 = obstacle_distance(obstacles[o], x0, x1, x2)
            gap -= spheres[k].radius
            gaps[k] = min(gaps[k], gap)
            if gap > margin + dt * 100.0 or reach:  # beyond any speed a robot reaches
                continue
            u0, u1, u2 = point_velocity(kinematics.world_R, kinematics.world_p, vel, b, x0, x1, x2)
            if gap + dt * min(0.0, n0 * u0 + n1 * u1 + n2 * u2) <= margin:
                reach = True
    return reach


@njit(cache=True, inline="always")
def contact_pairs(spheres, obstacles, positions, kinematics, vel, free_vel, step, gaps, work):
    """The point-obstacle pairs within `margin` or reaching each other within
    the step at the free velocity (body twists free_vel), with the bias b of
    their normal rows (stepping's docstring: a gap closed, a penetration pushed
    out, or an impact's bounce), their contact axes and contact points. gaps
    (k,) each point's distance from the nearest obstacle at the step's start;
    the pairs are laid out at the front of work's pair arrays: returns their
    count (pairs_view gives the Pairs of the first count)."""
    npoints, nobstacles, dt = spheres.shape[0], obstacles.shape[0], step.dt
    point, obstacle, bias, friction = work.pair_point, work.pair_obstacle, work.pair_bias, work.pair_friction
    axes, location = work.axes, work.location
    count = 0
    for k in range(npoints):
        gaps[k] = np.inf
        b = spheres[k].body
        if b < 0:
            continue
        radius = spheres[k].radius
        for o in range(nobstacles):
            gap, n0, n1, n2 = obstacle_distance(obstacles[o], positions[k, 0], positions[k, 1], positions[k, 2])
            gap -= radius
            gaps[k] = min(gaps[k], gap)
            c0, c1, c2 = positions[k, 0] - radius * n0, positions[k, 1] - radius * n1, positions[k, 2] - radius * n2
            u0, u1, u2 = point_velocity(kinematics.world_R, kinematics.world_p, free_vel, b, c0, c1, c2)
            if gap + dt * min(0.0, n0 * u0 + n1 * u1 + n2 * u2) > step.margin:
                continue
            bias_k = closing_speed(gap, dt, step.stabilization)
            restitution = obstacles[o].restitution
            if restitution > 0.0:
                s0, s1, s2 = point_velocity(kinematics.world_R, kinematics.world_p, vel, b, c0, c1, c2)
                approach = n0 * s0 + n1 * s1 + n2 * s2
                if approach < -BOUNCE_SPEED and gap + dt * (n0 * u0 + n1 * u1 + n2 * u2) <= 0.0:
                    bias_k = min(bias_k, restitution * approach)  # it hits within the step: it bounces
            axes[count, 0, 0], axes[count, 0, 1], axes[count, 0, 2] = n0, n1, n2
            tangent_axes(axes[count])
            location[count, 0], location[count, 1], location[count, 2] = c0, c1, c2
            point[count], obstacle[count], bias[count], friction[count] = k, o, bias_k, obstacles[o].friction
            work.pair_gap[count] = gap
            count += 1
    if count > PATCH_POINTS and crowded(point, count, spheres, work.pairs_of_body):
        # np.int64: typing meets count first as the literal 0 and would compile reduce_patches for it too
        count = reduce_patches(point, obstacle, work.pair_gap, bias, axes, location, friction, np.int64(count),
                               spheres, gaps)
    for i in range(count):
        work.pair_body_a[i], work.pair_body_b[i] = -1, spheres[point[i]].body
        work.pair_shape_a[i], work.pair_shape_b[i] = -1, -1
    return count


@njit(cache=True, inline="always")
def pairs_view(work, count):
    """The Pairs of the first count of work's pair arrays."""
    return Pairs(work.pair_point[:count], work.pair_obstacle[:count], work.pair_body_a[:count],
                 work.pair_body_b[:count], work.pair_shape_a[:count], work.pair_shape_b[:count], work.pair_gap[:count],
                 work.pair_bias[:count], work.pair_tangent_bias[:count], work.axes[:count], work.location[:count],
                 work.pair_friction[:count])


@njit(cache=True, inline="always")
def rigid_corrections(pairs, first_of_body, next_pair, system, dt, stabilization):
    """The tangential rows' biases (pairs.tangent_bias): for each two bodies
    a, b with several pairs (a sole's corners on the ground, a box on a
    box), those of the rigid motion of b relative to a whose normal
    velocities are the normal rows' targets -bias (stepping's docstring);
    zero for a single pair. The targets of a tilted face's corners at
    different depths are no rigid motion along the normals alone (the
    rotation that lifts the deeper corners more moves the corners along the
    face too, by the tilt times the difference): with zero tangential
    targets, sticking corners could not obey them all, and the solver
    stalled on it (the softened steps of a robot standing on its soles). The
    twist (ω, v) about the pairs' centroid solves n_i·(v + ω x r_i) = -b_i
    in least squares by symmetrically pivoted elimination of the normal
    equations, the components no row moves zero (the slide along the
    face). Where some of the pairs penetrate, the others' gaps close at the
    same rate (`stabilization` of the gap a step, not all of it), so that
    the normal targets are linear in the gaps, as the gaps across a face are
    in its corners' positions: with the kink at zero gap, the corners of a
    sole half in, half out of the ground had no rigid motion either.
    Where no rigid motion meets the normal targets within CORRECTION_MISFIT
    (points of a curved hull at different depths, a bounce), the biases
    stay as they were. Scratch: first_of_body (nbodies,), next_pair
    (pairs,), system (6, 9)."""
    count = pairs.body_b.shape[0]
    pairs.tangent_bias[:, :] = 0.0
    if count < 2:
        return
    first_of_body[:] = -1
    for i in range(count - 1, -1, -1):  # each body's pairs in a list, by increasing index
        next_pair[i] = first_of_body[pairs.body_b[i]]
        first_of_body[pairs.body_b[i]] = i
    for i in range(count):
        body_a = pairs.body_a[i]
        j, first = first_of_body[pairs.body_b[i]], True  # is i the first of the pairs of its two bodies?
        while j != i:
            first = first and pairs.body_a[j] != body_a
            j = next_pair[j]
        if first:
            rigid_correction(pairs, i, next_pair, system, dt, stabilization)


@njit(cache=True, inline="always")
def rigid_correction(pairs, first, next_pair, system, dt, stabilization):
    """rigid_corrections' twist for the pairs of body_a[first], body_b[first]
    from `first` on in next_pair's list, and their biases."""
    body_a = pairs.body_a[first]
    members, x0, x1, x2, deepest = 0, 0.0, 0.0, 0.0, np.inf
    j = first
    while j >= 0:
        if pairs.body_a[j] == body_a:
            members += 1
            x0, x1, x2 = x0 + pairs.location[j, 0], x1 + pairs.location[j, 1], x2 + pairs.location[j, 2]
            deepest = min(deepest, pairs.gap[j])
        j = next_pair[j]
    if members < 2:
        return
    x0, x1, x2 = x0 / members, x1 / members, x2 / members
    if deepest < 0.0:  # a penetration: the gaps' closing speeds at its rate too, linear in the gap across the face
        j = first
        while j >= 0:
            if pairs.body_a[j] == body_a and pairs.gap[j] > 0.0 and pairs.bias[j] == pairs.gap[j] / dt:
                pairs.bias[j] = stabilization * pairs.gap[j] / dt
            j = next_pair[j]
    system[:, :7] = 0.0  # [N | g], N = Σ a aᵀ, g = -Σ a b, a = (r x n, n)
    j = first
    while j >= 0:
        if pairs.body_a[j] == body_a:
            n0, n1, n2 = pairs.axes[j, 0, 0], pairs.axes[j, 0, 1], pairs.axes[j, 0, 2]
            r0, r1, r2 = pairs.location[j, 0] - x0, pairs.location[j, 1] - x1, pairs.location[j, 2] - x2
            a = (r1 * n2 - r2 * n1, r2 * n0 - r0 * n2, r0 * n1 - r1 * n0, n0, n1, n2)
            for row in range(6):
                for col in range(6):
                    system[row, col] += a[row] * a[col]
                system[row, 6] -= a[row] * pairs.bias[j]
        j = next_pair[j]
    largest = 0.0
    for row in range(6):
        largest = max(largest, system[row, row])
        system[row, 7], system[row, 8] = -1.0, 0.0
    # symmetric pivoting, the largest remaining diagonal first: column 7, the step a row was eliminated at
    # (-1: not; its unknown zero), column 8 the twist
    eliminated = 0
    for s in range(6):
        p, best = -1, CORRECTION_PIVOT * largest
        for row in range(6):
            if system[row, 7] < 0.0 and system[row, row] > best:
                p, best = row, system[row, row]
        if p < 0:
            break
        system[p, 7] = s
        eliminated += 1
        for row in range(6):
            if system[row, 7] < 0.0:
                factor = system[row, p] / system[p, p]
                for col in range(7):
                    system[row, col] -= factor * system[p, col]
    for s in range(eliminated - 1, -1, -1):
        p = 0
        while system[p, 7] != s:
            p += 1
        total = system[p, 6]
        for col in range(6):
            if system[col, 7] > s:
                total -= system[p, col] * system[col, 8]
        system[p, 8] = total / system[p, p]
    w0, w1, w2, v0, v1, v2 = system[0, 8], system[1, 8], system[2, 8], system[3, 8], system[4, 8], system[5, 8]
    misfit, largest_bias = 0.0, 0.0  # of the normal targets: none where the pairs lie on one face
    j = first
    while j >= 0:
        if pairs.body_a[j] == body_a:
            n0, n1, n2 = pairs.axes[j, 0, 0], pairs.axes[j, 0, 1], pairs.axes[j, 0, 2]
            r0, r1, r2 = pairs.location[j, 0] - x0, pairs.location[j, 1] - x1, pairs.location[j, 2] - x2
            along = n0 * (v0 + w1 * r2 - w2 * r1) + n1 * (v1 + w2 * r0 - w0 * r2) + n2 * (v2 + w0 * r1 - w1 * r0)
            misfit, largest_bias = max(misfit, abs(along + pairs.bias[j])), max(largest_bias, abs(pairs.bias[j]))
        j = next_pair[j]
    if misfit > CORRECTION_MISFIT * largest_bias:
        # no rigid motion meets the targets (points of a curved hull, an impact's bounce): the biases as they were
        j = first
        while j >= 0:
            if pairs.body_a[j] == body_a and pairs.gap[j] > 0.0 and pairs.bias[j] == stabilization * pairs.gap[j] / dt:
                pairs.bias[j] = pairs.gap[j] / dt
            j = next_pair[j]
        return
    j = first
    while j >= 0:
        if pairs.body_a[j] == body_a:
            r0, r1, r2 = pairs.location[j, 0] - x0, pairs.location[j, 1] - x1, pairs.location[j, 2] - x2
            f0 = v0 + w1 * r2 - w2 * r1
            f1 = v1 + w2 * r0 - w0 * r2
            f2 = v2 + w0 * r1 - w1 * r0
            for a in range(2):
                axis = pairs.axes[j, a + 1]
                pairs.tangent_bias[j, a] = -(axis[0] * f0 + axis[1] * f1 + axis[2] * f2)
        j = next_pair[j]


@njit(cache=True, inline="always")
def crowded(point, count, spheres, pairs_of_body):
    """Whether some body has more than PATCH_POINTS of the first count pairs
    (pairs_of_body (nbodies,): scratch): else reduce_patches, which sorts,
    has nothing to reduce (ten boxes resting on a table, 40 pairs a step)."""
    pairs_of_body[:] = 0
    for i in range(count):
        b = spheres[point[i]].body
        pairs_of_body[b] += 1
        if pairs_of_body[b] > PATCH_POINTS:
            return True
    return False


@njit(cache=True)
def reduce_patches(point, obstacle, gap, bias, axes, location, friction, count, spheres, gaps):
    """Keep, of each body's pairs with one obstacle when they are more than
    PATCH_POINTS, the deepest and those extreme along PATCH_DIRECTIONS
    directions of the tangent plane (t1, t2 of the first); compact the pair
    arrays. Returns the new count. The pairs are grouped by a stable sort
    on (body, obstacle): a hundred boxes on the ground are 400 pairs, which
    pairwise grouping took 0.3 ms a step to sort out. Its arrays are
    allocated here, only in the steps that have more than PATCH_POINTS
    pairs."""
    keep = np.ones(count, dtype=np.bool_)
    keys = np.empty(count, dtype=np.int64)
    nobstacles = 0
    for i in range(count):
        nobstacles = max(nobstacles, obstacle[i] + 1)
    for i in range(count):
        keys[i] = spheres[point[i]].body * nobstacles + obstacle[i]
    order = np.argsort(keys, kind="mergesort")  # stable: each group in the pairs' order
    start = 0
    while start < count:
        stop = start
        while stop < count and keys[order[stop]] == keys[order[start]]:
            stop += 1
        if stop - start > PATCH_POINTS:
            first = order[start]
            for g in range(start, stop):
                keep[order[g]] = False
            deepest = first
            for g in range(start, stop):
                if gaps[point[order[g]]] < gaps[point[deepest]]:
                    deepest = order[g]
            keep[deepest] = True
            for d in range(PATCH_DIRECTIONS):
                angle = 2.0 * np.pi * d / PATCH_DIRECTIONS
                c, s = math.cos(angle), math.sin(angle)
                best, extreme = -np.inf, first
                for g in range(start, stop):
                    i = order[g]
                    along = 0.0
                    for r in range(3):
                        along += (c * axes[first, 1, r] + s * axes[first, 2, r]) * location[i, r]
                    if along > best:
                        best, extreme = along, i
                keep[extreme] = True
        start = stop
    kept = 0
    for i in range(count):
        if keep[i]:
            point[kept], obstacle[kept], bias[kept], friction[kept] = point[i], obstacle[i], bias[i], friction[i]
            gap[kept] = gap[i]
            axes[kept] = axes[i]
            location[kept] = location[i]
            kept += 1
    return kept
