"""Forward kinematics: poses of every body and frame (Müller kinematics §2-3,
RBDL §6): ^0T_i = ^0T_λ(i) ^λT_i."""
from functools import lru_cache

import numpy as np
from numba import njit, types

from mbs_dynamics import inputs

from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, PACKED_FLAT, RESULT_MATRIX, VECTOR, ExactKernel, \
    all_finite, invalid, vectors_fit
from mbs_dynamics.multibody.joints import body_acceleration, body_jerk, body_velocity, coordinate_axis, forward_pass, \
    motion_subspace, parent_placement, world_column, world_subspace
from mbs_dynamics.multibody.model import FLOATING, PRISMATIC, REVOLUTE, Model, body_count, frame_count, \
    frame_placement, unflatten, unpack_model
from mbs_dynamics.multibody.workspace import call_scratch, kinematic_views, readonly, scratch, take, untracked_views
from mbs_dynamics.spatial.algebra import cross, motion_cross, rotate, rotate_back
from mbs_dynamics.spatial.lie import pose


@njit(cache=True)
def body_poses_kernel(packed, q, R, p, S, world_R, world_p):
    """World <- body for every body (world_R, world_p), from the parent placements."""
    model = unpack_model(packed)
    forward_pass(packed, readonly(q), R, p, S)  # (as the RNEA passes it: one compiled version)
    for i in range(model.parent.shape[0]):
        place_in_world(i, model.parent[i], R, p, world_R, world_p)


@njit(cache=True, inline="always")
def place_in_world(i, lam, R, p, world_R, world_p):
    """world_R[i], world_p[i] = world <- body i, from its parent lam's (lam < 0:
    the world) and its placement in the parent (R[i], p[i])."""
    if lam < 0:  # element by element: an array assignment costs more than the copy
        for r in range(3):
            world_R[i, r, 0], world_R[i, r, 1], world_R[i, r, 2] = R[i, r, 0], R[i, r, 1], R[i, r, 2]
            world_p[i, r] = p[i, r]
        return
    for r in range(3):
        for c in range(3):
            world_R[i, r, c] = (world_R[lam, r, 0] * R[i, 0, c] + world_R[lam, r, 1] * R[i, 1, c]
                                + world_R[lam, r, 2] * R[i, 2, c])
        world_p[i, r] = world_p[lam, r] + (world_R[lam, r, 0] * p[i, 0] + world_R[lam, r, 1] * p[i, 1]
                                           + world_R[lam, r, 2] * p[i, 2])


@njit(cache=True)
def world_placements(packed, q, world_R, world_p, buffer):
    """world_R, world_p = world <- body of every body at q."""
    model = unpack_model(packed)
    kinematics, _ = kinematic_views(buffer, model.parent.shape[0])
    body_poses_kernel(packed, q, kinematics.R, kinematics.p, kinematics.S, world_R, world_p)


def body_poses(model: Model, q) -> tuple[np.ndarray, np.ndarray]:
    """World <- body rotation (nbodies, 3, 3) and translation (nbodies, 3) at q."""
    q = inputs.configuration(model, q, batch=False)
    world_R, world_p = np.empty((model.nbodies, 3, 3)), np.empty((model.nbodies, 3))
    world_placements(model.packed, q, world_R, world_p, scratch(model))
    return world_R, inputs.finite(model, world_p, "the body poses", (q, "q"))


def frame_pose(model: Model, q, frame: str) -> np.ndarray:
    """4x4 homogeneous transform world <- frame at q."""
    return frame_poses(model, q, [frame])[0]


def frame_poses(model: Model, q, frames) -> list[np.ndarray]:
    """frame_pose of each of `frames` at q, from one kinematics pass."""
    placements = [model.frame(frame) for frame in frames]
    q = inputs.configuration(model, q, batch=False)
    if any(placement.body >= 0 for placement in placements):
        world_R, world_p = body_poses(model, q)
    poses = []
    for placement in placements:
        if placement.body < 0:
            poses.append(pose(placement.rotation, placement.translation))
        else:
            R, p = world_R[placement.body], world_p[placement.body]
            poses.append(pose(R @ placement.rotation, R @ placement.translation + p))
    return poses


REPRESENTATIONS = ("body", "spatial", "hybrid", "mixed")


@njit(cache=True, inline="always")
def add_point_jacobian(model, S, body_R, body_p, b, x, jacobian):
    """jacobian (6, nv) += the hybrid Jacobian [w; dx/dt] of the world point x
    moving with body b (body_R, body_p: the bodies' world placements; S their
    motion subspaces in the body frames): each joint's screw on the path to the
    root, in world axes, its linear part moved to x."""
    x0, x1, x2 = x[0], x[1], x[2]
    j = b
    while j >= 0:
        for m in range(model.nv_joint[j]):
            add_column(jacobian, model.v_start[j] + m, world_column(model, j, S, body_R, body_p, m), x0, x1, x2)
        j = model.parent[j]


@njit(cache=True, inline="always")
def point_velocity(column, x0, x1, x2):
    """v + w x x: the velocity of the point x that the world screw column
    [w; v] (6) gives it, a 3-tuple."""
    return column[1] * x2 - column[2] * x1 + column[3], column[2] * x0 - column[0] * x2 + column[4], \
        column[0] * x1 - column[1] * x0 + column[5]


@njit(cache=True, inline="always")
def add_column(jacobian, c, column, x0, x1, x2):
    """jacobian[:, c] += [w; v + w x x]: the world screw column [w; v] (6) as
    the hybrid Jacobian's column of the point x (add_point_jacobian)."""
    u0, u1, u2 = point_velocity(column, x0, x1, x2)
    jacobian[0, c] += column[0]
    jacobian[1, c] += column[1]
    jacobian[2, c] += column[2]
    jacobian[3, c] += u0
    jacobian[4, c] += u1
    jacobian[5, c] += u2


@njit(cache=True, inline="always")
def world_screws(model, S, body_R, body_p, screws):
    """screws (nbodies, 6, 6): each body's joint axes [w; v] in world axes at
    the world origin (screws[b, m]: its m-th coordinate's), so that the
    velocity a coordinate gives a point x moving with a body on its path is
    v + w x x, as add_point_jacobian adds it."""
    for j in range(model.parent.shape[0]):
        world_subspace(model, j, S, body_R, body_p, screws)


@njit(cache=True)
def frames_motion_kernel(packed, q, v, bodies, local_R, local_p, jacobians, motion, world_R, world_p, buffer):
    """For frames fixed in bodies (placement local_R, local_p in the body; body
    -1: the world), in one pass: the hybrid Jacobians (k, 6, nv) [w; do/dt] of
    their origins o, motion (k, 2, 6) = their hybrid twists [w; do/dt] and bias
    accelerations [dw/dt; d²o/dt²] at a = 0 without gravity (what constraints
    need, F&O eqs. 1-4), and their world poses. Returns INVALID_INPUT without
    computing (inputs.invalid), NONFINITE_RESULT on overflow, else 0."""
    model = unpack_model(packed)
    if invalid(model, q, v, v):
        return INVALID_INPUT
    n = model.parent.shape[0]
    kinematics, o = kinematic_views(buffer, n)
    R, p, S, body_R, body_p = kinematics.R, kinematics.p, kinematics.S, kinematics.world_R, kinematics.world_p
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    no_gravity, o = take(buffer, o, (3,))
    no_gravity[0] = no_gravity[1] = no_gravity[2] = 0.0
    no_acceleration, o = take(buffer, o, (v.shape[0],))
    no_acceleration[:] = 0.0
    body_poses_kernel(packed, q, R, p, S, body_R, body_p)
    for i in range(n):
        v_i, vJ = body_velocity(model, i, R, p, S, v, vel)
        body_acceleration(model, i, R, p, S, v, no_acceleration, acc, v_i, vJ, no_gravity)
    jacobians[:] = 0.0
    motion[:] = 0.0
    for k in range(bodies.shape[0]):
        b, x = bodies[k], local_p[k]
        if b < 0:
            world_R[k] = local_R[k]
            world_p[k] = x
            continue
        Rb = body_R[b]
        for r in range(3):
            for c in range(3):
                world_R[k, r, c] = Rb[r, 0] * local_R[k, 0, c] + Rb[r, 1] * local_R[k, 1, c] \
                    + Rb[r, 2] * local_R[k, 2, c]
            world_p[k, r] = body_p[b, r] + Rb[r, 0] * x[0] + Rb[r, 1] * x[1] + Rb[r, 2] * x[2]
        add_point_jacobian(model, S, body_R, body_p, b, world_p[k], jacobians[k])
        # in body axes: the origin's velocity v_b + w_b x x and acceleration
        # dv_b/dt + dw_b/dt x x + w_b x (origin velocity); then to world axes
        w, u, dw, du = vel[b, :3], vel[b, 3:], acc[b, :3], acc[b, 3:]
        o0, o1, o2 = u[0] + w[1] * x[2] - w[2] * x[1], u[1] + w[2] * x[0] - w[0] * x[2], \
            u[2] + w[0] * x[1] - w[1] * x[0]
        e0 = du[0] + dw[1] * x[2] - dw[2] * x[1] + w[1] * o2 - w[2] * o1
        e1 = du[1] + dw[2] * x[0] - dw[0] * x[2] + w[2] * o0 - w[0] * o2
        e2 = du[2] + dw[0] * x[1] - dw[1] * x[0] + w[0] * o1 - w[1] * o0
        for r in range(3):
            motion[k, 0, r] = Rb[r, 0] * w[0] + Rb[r, 1] * w[1] + Rb[r, 2] * w[2]
            motion[k, 0, 3 + r] = Rb[r, 0] * o0 + Rb[r, 1] * o1 + Rb[r, 2] * o2
            motion[k, 1, r] = Rb[r, 0] * dw[0] + Rb[r, 1] * dw[1] + Rb[r, 2] * dw[2]
            motion[k, 1, 3 + r] = Rb[r, 0] * e0 + Rb[r, 1] * e1 + Rb[r, 2] * e2
    return 0 if all_finite(jacobians) and all_finite(motion) and all_finite(world_p) else NONFINITE_RESULT


@lru_cache(maxsize=64)
def frame_placements(model: Model, frames: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bodies, rotations, translations) of the named frames in their bodies."""
    placements = [model.frame(name) for name in frames]
    return (np.array([f.body for f in placements], dtype=np.int64),
            np.array([f.rotation for f in placements], dtype=float).reshape(-1, 3, 3),
            np.array([f.translation for f in placements], dtype=float).reshape(-1, 3))


def frames_motion(model: Model, q, v, frames: tuple):
    """Hybrid Jacobians (k, 6, nv), [twist; bias acceleration] (k, 2, 6) and
    world rotations and origins of the named frames (frames_motion_kernel), for
    shaped q and v; invalid values raise (inputs.explain)."""
    bodies, local_R, local_p = frame_placements(model, frames)
    k = len(frames)
    J, motion = np.empty((k, 6, model.nv)), np.empty((k, 2, 6))
    world_R, world_p = np.empty((k, 3, 3)), np.empty((k, 3))
    status = frames_motion_kernel(model.packed, q, v, bodies, local_R, local_p, J, motion, world_R, world_p,
                                  scratch(model))
    if status:
        inputs.refuse(model, status, "the frames' motion", q, (v, "v"))
    return J, motion, world_R, world_p


@njit(cache=True, inline="always")
def compose(W, w, R, p):
    """The world placement (W R, w + W p) of a body placed (R, p) in a parent
    placed (W, w) in the world, nine and three scalars: place_in_world's
    numbers."""
    return (W[0] * R[0] + W[1] * R[3] + W[2] * R[6], W[0] * R[1] + W[1] * R[4] + W[2] * R[7],
            W[0] * R[2] + W[1] * R[5] + W[2] * R[8], W[3] * R[0] + W[4] * R[3] + W[5] * R[6],
            W[3] * R[1] + W[4] * R[4] + W[5] * R[7], W[3] * R[2] + W[4] * R[5] + W[5] * R[8],
            W[6] * R[0] + W[7] * R[3] + W[8] * R[6], W[6] * R[1] + W[7] * R[4] + W[8] * R[7],
            W[6] * R[2] + W[7] * R[5] + W[8] * R[8]), \
        (w[0] + (W[0] * p[0] + W[1] * p[1] + W[2] * p[2]), w[1] + (W[3] * p[0] + W[4] * p[1] + W[5] * p[2]),
         w[2] + (W[6] * p[0] + W[7] * p[1] + W[8] * p[2]))


@njit(cache=True, inline="always")
def world_columns(model, i, q, W, w, S, columns):
    """columns[m] = world_column(model, i, S, ..., m) of body i placed (W, w)
    in the world (scalars), for each of its joint's coordinates m; S for the
    planar joint's motion_subspace. The joint axis of a revolute or prismatic
    joint along a coordinate axis, and the floating joint's unit columns,
    without the products of exact zeros: the same numbers (zeros' signs
    aside)."""
    kind, x, y, z = model.joint_type[i], w[0], w[1], w[2]
    if kind == REVOLUTE or kind == PRISMATIC:
        along, scale = coordinate_axis(model, i), model.coupling[i, 0]  # S's column: scale * axis
        if along >= 0:
            s = scale * model.axis[i, along]
            u0, u1, u2 = W[along] * s, W[3 + along] * s, W[6 + along] * s
        else:  # W S, spatial.rotate's
            s0, s1, s2 = scale * model.axis[i, 0], scale * model.axis[i, 1], scale * model.axis[i, 2]
            u0, u1, u2 = W[0] * s0 + W[1] * s1 + W[2] * s2, W[3] * s0 + W[4] * s1 + W[5] * s2, \
                W[6] * s0 + W[7] * s1 + W[8] * s2
        if kind == REVOLUTE:  # [u; w x u]
            columns[0, 0], columns[0, 1], columns[0, 2] = u0, u1, u2
            columns[0, 3], columns[0, 4], columns[0, 5] = y * u2 - z * u1, z * u0 - x * u2, x * u1 - y * u0
        else:  # [0; u]
            columns[0, 0] = columns[0, 1] = columns[0, 2] = 0.0
            columns[0, 3], columns[0, 4], columns[0, 5] = u0, u1, u2
    elif kind == FLOATING:
        for m in range(3):  # rotations [W e_m; w x W e_m], translations [0; W e_m]
            u0, u1, u2 = W[m], W[3 + m], W[6 + m]
            columns[m, 0], columns[m, 1], columns[m, 2] = u0, u1, u2
            columns[m, 3], columns[m, 4], columns[m, 5] = y * u2 - z * u1, z * u0 - x * u2, x * u1 - y * u0
            columns[3 + m, 0] = columns[3 + m, 1] = columns[3 + m, 2] = 0.0
            columns[3 + m, 3], columns[3 + m, 4], columns[3 + m, 5] = u0, u1, u2
    else:  # motion_to_parent of each motion_subspace column
        motion_subspace(model, i, q, S)
        for m in range(model.nv_joint[i]):
            a0, a1, a2, b0, b1, b2 = S[i, 0, m], S[i, 1, m], S[i, 2, m], S[i, 3, m], S[i, 4, m], S[i, 5, m]
            u0, u1, u2 = W[0] * a0 + W[1] * a1 + W[2] * a2, W[3] * a0 + W[4] * a1 + W[5] * a2, \
                W[6] * a0 + W[7] * a1 + W[8] * a2
            v0, v1, v2 = W[0] * b0 + W[1] * b1 + W[2] * b2, W[3] * b0 + W[4] * b1 + W[5] * b2, \
                W[6] * b0 + W[7] * b1 + W[8] * b2
            columns[m, 0], columns[m, 1], columns[m, 2] = u0, u1, u2
            columns[m, 3], columns[m, 4], columns[m, 5] = v0 + y * u2 - z * u1, v1 + z * u0 - x * u2, \
                v2 + x * u1 - y * u0


# Floats a body of frame_jacobian_kernel's layout: its placement (12), world
# columns (36), motion subspace (36), path (1) and converted columns (up to 6).
FRAME_JACOBIAN_FLOATS_PER_BODY = 91


@njit(cache=True, inline="always")  # its one caller's: a call passed it 6 arrays, counted in and out
def frame_jacobian_kernel(packed, q, placement, representation, J, buffer):
    """J (6, nv): the Jacobian of a frame fixed in a body, placement = [body,
    its rotation (9, by rows) and origin (3) in the body] (model.frame_placement),
    in REPRESENTATIONS[representation]: the hybrid Jacobian of the origin o
    (add_point_jacobian's numbers), then in spatial its linear rows plus
    o x w, in body and mixed the angular rows (and in body the linear ones)
    turned into frame axes, column by column along the body's path to the
    root (the other columns stay zero). Only the bodies on the path are
    placed, down from the root (body_poses_kernel's numbers), their
    placements and world columns kept as scalars: a foot of TALOS is 7 of
    its 33 bodies. Body -1 (fixed to the world): zero. Returns
    INVALID_INPUT without computing (inputs.invalid), NONFINITE_RESULT on
    overflow, else 0."""
    model = unpack_model(packed)
    if invalid(model, q, q[:0], q[:0]):
        return INVALID_INPUT
    J[:] = 0.0
    body = int(placement[0])
    if body < 0:
        return 0
    n = model.parent.shape[0]
    placed, o = take(buffer, 0, (n, 12))  # by depth: parent_placement's R (by rows) and p
    columns, o = take(buffer, o, (n, 6, 6))  # by depth: the world columns of the body's coordinates
    S, o = take(buffer, o, (n, 6, 6))
    path, o = take(buffer, o, (n,))  # the bodies from `body` to the root
    # distinct: each body's coordinates before its child's (no column that two bodies move, a mimic's);
    # the child's first column kept at hand, not read back from path (a float: a store, load and conversion)
    depth, j, distinct, child_start = 0, body, True, model.v_start[body] + model.nv_joint[body]
    while j >= 0:
        start = model.v_start[j]
        if start + model.nv_joint[j] > child_start:
            distinct = False
        path[depth] = j
        depth += 1
        j, child_start = model.parent[j], start
    for d in range(depth):  # apart from the chain below: the sines and cosines overlap
        R, p = parent_placement(model, int(path[d]), q)
        for k in range(9):
            placed[d, k] = R[k]
        placed[d, 9], placed[d, 10], placed[d, 11] = p[0], p[1], p[2]
    root = placed[depth - 1]  # in the world
    W = (root[0], root[1], root[2], root[3], root[4], root[5], root[6], root[7], root[8])
    w = (root[9], root[10], root[11])
    world_columns(model, int(path[depth - 1]), q, W, w, S, columns[depth - 1])
    for d in range(depth - 2, -1, -1):
        x = placed[d]
        W, w = compose(W, w, (x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8]), (x[9], x[10], x[11]))
        world_columns(model, int(path[d]), q, W, w, S, columns[d])
    f00, f01, f02 = W[0] * placement[1] + W[1] * placement[4] + W[2] * placement[7], \
        W[0] * placement[2] + W[1] * placement[5] + W[2] * placement[8], \
        W[0] * placement[3] + W[1] * placement[6] + W[2] * placement[9]
    f10, f11, f12 = W[3] * placement[1] + W[4] * placement[4] + W[5] * placement[7], \
        W[3] * placement[2] + W[4] * placement[5] + W[5] * placement[8], \
        W[3] * placement[3] + W[4] * placement[6] + W[5] * placement[9]
    f20, f21, f22 = W[6] * placement[1] + W[7] * placement[4] + W[8] * placement[7], \
        W[6] * placement[2] + W[7] * placement[5] + W[8] * placement[8], \
        W[6] * placement[3] + W[7] * placement[6] + W[8] * placement[9]
    o0 = w[0] + W[0] * placement[10] + W[1] * placement[11] + W[2] * placement[12]
    o1 = w[1] + W[3] * placement[10] + W[4] * placement[11] + W[5] * placement[12]
    o2 = w[2] + W[6] * placement[10] + W[7] * placement[11] + W[8] * placement[12]
    if distinct:  # each column once: added to zero (add_point_jacobian) and converted as it is made
        # the entries' sum: finite when every entry is (an infinite or NaN one keeps it infinite or NaN); when
        # not, all_finite tells (finite entries may sum past the largest float): 6 operations a column, not 12
        total = 0.0
        for d in range(depth):
            j = int(path[d])
            for m in range(model.nv_joint[j]):
                column, c = columns[d, m], model.v_start[j] + m
                w0, w1, w2 = column[0], column[1], column[2]
                u0, u1, u2 = point_velocity(column, o0, o1, o2)
                if representation == 1:  # the body point at the world origin: do/dt + o x w
                    u0, u1, u2 = u0 + (o1 * w2 - o2 * w1), u1 + (o2 * w0 - o0 * w2), u2 + (o0 * w1 - o1 * w0)
                elif representation != 2:  # body, mixed: frame axes, R^T x
                    w0, w1, w2 = f00 * w0 + f10 * w1 + f20 * w2, f01 * w0 + f11 * w1 + f21 * w2, \
                        f02 * w0 + f12 * w1 + f22 * w2
                    if representation == 0:
                        u0, u1, u2 = f00 * u0 + f10 * u1 + f20 * u2, f01 * u0 + f11 * u1 + f21 * u2, \
                            f02 * u0 + f12 * u1 + f22 * u2
                J[0, c], J[1, c], J[2, c], J[3, c], J[4, c], J[5, c] = w0, w1, w2, u0, u1, u2
                total += ((w0 + w1) + (w2 + u0)) + (u1 + u2)
        return 0 if total - total == 0.0 or all_finite(J) else NONFINITE_RESULT
    for d in range(depth):  # add_point_jacobian's sums, from the body up
        j = int(path[d])
        for m in range(model.nv_joint[j]):
            add_column(J, model.v_start[j] + m, columns[d, m], o0, o1, o2)
    if representation == 2:
        return 0 if all_finite(J) else NONFINITE_RESULT
    converted, o = take(buffer, o, (J.shape[1],))  # a column two bodies move turned once
    converted[:] = 0.0
    for d in range(depth):
        j = int(path[d])
        for c in range(model.v_start[j], model.v_start[j] + model.nv_joint[j]):
            if converted[c]:
                continue
            converted[c] = 1.0
            if representation == 1:  # the body point at the world origin: do/dt + o x w
                w0, w1, w2 = J[0, c], J[1, c], J[2, c]
                J[3, c] += o1 * w2 - o2 * w1
                J[4, c] += o2 * w0 - o0 * w2
                J[5, c] += o0 * w1 - o1 * w0
                continue
            for start in range(0, 6 if representation == 0 else 3, 3):  # body, mixed: frame axes, R^T x
                x0, x1, x2 = J[start, c], J[start + 1, c], J[start + 2, c]
                J[start, c] = f00 * x0 + f10 * x1 + f20 * x2
                J[start + 1, c] = f01 * x0 + f11 * x1 + f21 * x2
                J[start + 2, c] = f02 * x0 + f12 * x1 + f22 * x2
    return 0 if all_finite(J) else NONFINITE_RESULT


def _frame_jacobian_call(flat, q, frame, representation, J):
    """frame_jacobian_kernel of frame number `frame` (model.frame_numbers) on
    model.packed_flat and a scratch buffer of its own: frame_jacobian's path
    (inputs.ExactKernel). A wrong length or number: INVALID_INPUT."""
    flat, q, J = untracked_views((flat, q, J))  # no reference counted on the views below (workspace)
    packed = unflatten(flat)
    if not (vectors_fit(packed[1], q, J[0], J[0]) and 0 <= frame < frame_count(flat)
            and 0 <= representation < len(REPRESENTATIONS)):
        return INVALID_INPUT
    return frame_jacobian_kernel(packed, q, frame_placement(flat, frame), representation, J,
                                 call_scratch(body_count(packed), FRAME_JACOBIAN_FLOATS_PER_BODY))


_FRAME_JACOBIAN = ExactKernel(_frame_jacobian_call, types.int64, PACKED_FLAT, VECTOR, types.int64, types.int64,
                              RESULT_MATRIX)
_frame_jacobian_entry = _FRAME_JACOBIAN.entry_global(globals(), "_frame_jacobian_entry")  # then the entry itself
_REPRESENTATION_NUMBERS = {name: k for k, name in enumerate(REPRESENTATIONS)}  # frame_jacobian_kernel's
_empty, _ndarray, _float64 = np.empty, inputs.NDARRAY, inputs.FLOAT64  # globals, not attributes: 20 ns a call


def frame_jacobian(model: Model, q, frame: str, representation: str = "body") -> np.ndarray:
    """(6, nv) map from v to the frame's twist [w; v] (Müller kinematics §3):

    body     [w_b; v_b]  frame axes, velocity of the frame origin
    spatial  [w; v_s]    world axes, velocity of the body point at the world origin
    hybrid   [w; dr/dt]  world axes, velocity of the frame origin
    mixed    [w_b; dr/dt] angular in frame axes, linear = velocity of the frame origin in world axes
    """
    J = _empty(model.jacobian_shape)
    if type(q) is _ndarray and q.ndim == 1 and q.dtype is _float64:  # inputs.exact(q)
        try:
            if not _frame_jacobian_entry(model.packed_flat, q, model.frame_numbers[frame],
                                         _REPRESENTATION_NUMBERS[representation], J):
                return J
        except (KeyError, TypeError):  # an unknown or unhashable name: explained below
            pass
    if representation not in REPRESENTATIONS:
        raise ValueError(f"representation must be one of {', '.join(REPRESENTATIONS)}, got {representation!r}")
    frame_number = model.frame_numbers[model.frame(frame).name]
    q = inputs.configuration(model, q, batch=False)  # one dimension, float64, contiguous: for the entry
    status = _FRAME_JACOBIAN.entry(model.packed_flat, q, frame_number, REPRESENTATIONS.index(representation), J)
    if status:
        inputs.refuse(model, status, f"the {representation} Jacobian of frame '{frame}'", q)
    return J


@njit(cache=True, inline="always")
def _put(out, row, start, x):
    out[row, start], out[row, start + 1], out[row, start + 2] = x[0], x[1], x[2]


@njit(cache=True)
def frame_motion_kernel(packed, q, v, a, jerk_in, body, local_R, local_p, representation, out, buffer):
    """out (3, 6): the twist of a frame fixed in `body` (placement local_R[0], local_p)
    and its first and second time derivatives, in REPRESENTATIONS[representation]
    (Müller kinematics §3, dynamics §2), without gravity, for d³q/dt³ = jerk_in.
    From the body's twist, acceleration and jerk in body axes (F&O eqs. 1-4,
    joints.body_jerk), moved to the frame origin in frame axes, then:
      spatial  Ad_C of each, the jerk Ad_C (J + V x A) (d/dt Ad_C = Ad_C ad(V), V x V = 0);
      hybrid   [R w; R u], [R dw; R (du + w x u)], [R (dJ_w + w x dw); R d³r] with the
               origin's jerk d³r = R (J_u + dw x u + w x du + w x (du + w x u));
      mixed    the hybrid linear rows, angular rows in frame axes.
    Returns INVALID_INPUT without computing (inputs.invalid), else 0."""
    model = unpack_model(packed)
    if invalid(model, q, v, a) or invalid(model, q, jerk_in, jerk_in):
        return INVALID_INPUT
    n = model.parent.shape[0]
    kinematics, o = kinematic_views(buffer, n)
    R, p, S, world_R, world_p = kinematics.R, kinematics.p, kinematics.S, kinematics.world_R, kinematics.world_p
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    jerk, o = take(buffer, o, (n, 6))
    work, o = take(buffer, o, (6,))
    frame_R, o = take(buffer, o, (1, 3, 3))
    no_gravity, o = take(buffer, o, (3,))
    no_gravity[0] = no_gravity[1] = no_gravity[2] = 0.0
    body_poses_kernel(packed, q, R, p, S, world_R, world_p)
    for i in range(body + 1):  # parents come before children
        v_i, vJ = body_velocity(model, i, R, p, S, v, vel)
        a_i = body_acceleration(model, i, R, p, S, v, a, acc, v_i, vJ, no_gravity)
        body_jerk(model, i, R, p, S, v, a, jerk_in, jerk, v_i, a_i, vJ)
    x0, x1, x2 = local_p[0], local_p[1], local_p[2]
    for row, motion in enumerate((vel[body], acc[body], jerk[body])):  # to the frame, in frame axes
        m0, m1, m2 = motion[0], motion[1], motion[2]
        c = cross((m0, m1, m2), (x0, x1, x2))
        _put(out, row, 0, rotate_back(local_R, 0, (m0, m1, m2)))
        _put(out, row, 3, rotate_back(local_R, 0, (motion[3] + c[0], motion[4] + c[1], motion[5] + c[2])))
    if representation == 0:
        return 0
    Rb = world_R[body]
    for r in range(3):  # the frame's rotation and origin in the world
        for col in range(3):
            frame_R[0, r, col] = Rb[r, 0] * local_R[0, 0, col] + Rb[r, 1] * local_R[0, 1, col] \
                + Rb[r, 2] * local_R[0, 2, col]
        work[r] = world_p[body, r] + Rb[r, 0] * x0 + Rb[r, 1] * x1 + Rb[r, 2] * x2
    w, u = (out[0, 0], out[0, 1], out[0, 2]), (out[0, 3], out[0, 4], out[0, 5])
    dw, du = (out[1, 0], out[1, 1], out[1, 2]), (out[1, 3], out[1, 4], out[1, 5])
    if representation == 1:
        e = motion_cross(w + u, dw + du)
        for r in range(6):
            out[2, r] += e[r]
        for row in range(3):
            w_s = rotate(frame_R, 0, (out[row, 0], out[row, 1], out[row, 2]))
            u_s = rotate(frame_R, 0, (out[row, 3], out[row, 4], out[row, 5]))
            c = cross(work, w_s)
            _put(out, row, 0, w_s)
            out[row, 3], out[row, 4], out[row, 5] = u_s[0] + c[0], u_s[1] + c[1], u_s[2] + c[2]
        return 0
    wu = cross(w, u)
    r2 = (du[0] + wu[0], du[1] + wu[1], du[2] + wu[2])
    c1, c2, c3 = cross(dw, u), cross(w, du), cross(w, r2)
    r3 = (out[2, 3] + c1[0] + c2[0] + c3[0], out[2, 4] + c1[1] + c2[1] + c3[1], out[2, 5] + c1[2] + c2[2] + c3[2])
    _put(out, 0, 3, rotate(frame_R, 0, u))
    _put(out, 1, 3, rotate(frame_R, 0, r2))
    _put(out, 2, 3, rotate(frame_R, 0, r3))
    if representation == 2:
        wdw = cross(w, dw)
        _put(out, 0, 0, rotate(frame_R, 0, w))
        _put(out, 1, 0, rotate(frame_R, 0, dw))
        _put(out, 2, 0, rotate(frame_R, 0, (out[2, 0] + wdw[0], out[2, 1] + wdw[1], out[2, 2] + wdw[2])))
    return 0


def _frame_motion(model: Model, q, v, a, jerk, frame: str, representation: str) -> np.ndarray:
    """(3, 6): the frame's twist, acceleration and jerk in `representation`
    (frame_motion_kernel): the derivatives of the twist in the same representation."""
    if representation not in REPRESENTATIONS:
        raise ValueError(f"representation must be one of {', '.join(REPRESENTATIONS)}, got {representation!r}")
    placement = model.frame(frame)
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    v = inputs.shaped(model, v, model.nv, "v", batch=False)
    a = inputs.shaped(model, a, model.nv, "a", batch=False)
    jerk = inputs.shaped(model, jerk, model.nv, "j", batch=False)
    out = np.zeros((3, 6))
    if placement.body < 0:  # fixed to the world: at rest
        inputs.configuration(model, q)
        for value, name in ((v, "v"), (a, "a"), (jerk, "j")):
            inputs.vector(model, value, model.nv, name)
        return out
    if frame_motion_kernel(model.packed, q, v, a, jerk, placement.body, placement.rotation.reshape(1, 3, 3),
                           placement.translation,
                           REPRESENTATIONS.index(representation), out, scratch(model)):
        inputs.explain(model, q, (v, "v"), (a, "a"), (jerk, "j"))
    return inputs.finite(model, out, f"the motion of frame '{frame}'", (q, "q"), (v, "v"), (a, "a"), (jerk, "j"))


def frame_velocity(model: Model, q, v, frame: str, representation: str = "body") -> np.ndarray:
    """The frame's twist (6,) = frame_jacobian(representation) @ v, in Müller's
    representations (kinematics §3): body [w_b; v_b], spatial [w; v_s],
    hybrid [w; dr/dt], mixed [w_b; dr/dt] (see frame_jacobian)."""
    zero = np.zeros(model.nv)
    return _frame_motion(model, q, v, zero, zero, frame, representation)[0]


def frame_acceleration(model: Model, q, v, a, frame: str, representation: str = "body") -> np.ndarray:
    """d/dt of frame_velocity in the same representation (6,) = J a + dJ/dt v,
    without gravity. Hybrid and mixed give the classical acceleration of the frame
    origin d²r/dt²; body and spatial the derivatives of the body and spatial twists."""
    return _frame_motion(model, q, v, a, np.zeros(model.nv), frame, representation)[1]


def frame_jerk(model: Model, q, v, a, j, frame: str, representation: str = "body") -> np.ndarray:
    """d/dt of frame_acceleration in the same representation (6,), for
    d³q/dt³ = j (Müller dynamics §2; eq. 13 corrected: DESIGN.md §7, misprint 10):
    J j + 2 dJ/dt a + d²J/dt² v. Hybrid and mixed give the jerk of the frame origin
    d³r/dt³; body and spatial the second derivatives of the body and spatial
    twists (d²V^s/dt² = Ad_C (dA^b/dt + V^b x A^b))."""
    return _frame_motion(model, q, v, a, j, frame, representation)[2]


def frame_bias_acceleration(model: Model, q, v, frame: str, representation: str = "body") -> np.ndarray:
    """dJ/dt v (6,): frame_acceleration at a = 0, without gravity (what contact
    constraints need: J a + dJ/dt v = 0)."""
    zero = np.zeros(model.nv)
    return _frame_motion(model, q, v, zero, zero, frame, representation)[1]
