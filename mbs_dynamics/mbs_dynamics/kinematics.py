"""Forward kinematics: poses of every body and frame (Müller kinematics §2-3,
RBDL §6): ^0T_i = ^0T_λ(i) ^λT_i."""
from functools import lru_cache

import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.inputs import invalid
from mbs_dynamics.joints import body_acceleration, body_velocity, forward_pass
from mbs_dynamics.lie import adjoint, pose, skew
from mbs_dynamics.model import Model, unpack_model
from mbs_dynamics.spatial import motion_to_parent
from mbs_dynamics.workspace import kinematic_views, scratch, take


@njit(cache=True)
def body_poses_kernel(arrays, q, R, p, S, RJ, world_R, world_p):
    """World <- body for every body (world_R, world_p), from the parent placements."""
    forward_pass(arrays, q, R, p, S, RJ)
    parent = arrays[0]
    for i in range(parent.shape[0]):
        lam = parent[i]
        if lam < 0:
            world_R[i] = R[i]
            world_p[i] = p[i]
            continue
        for r in range(3):
            for c in range(3):
                world_R[i, r, c] = (world_R[lam, r, 0] * R[i, 0, c] + world_R[lam, r, 1] * R[i, 1, c]
                                    + world_R[lam, r, 2] * R[i, 2, c])
            world_p[i, r] = world_p[lam, r] + (world_R[lam, r, 0] * p[i, 0] + world_R[lam, r, 1] * p[i, 1]
                                               + world_R[lam, r, 2] * p[i, 2])


@njit(cache=True)
def world_placements(packed, q, world_R, world_p, buffer):
    """world_R, world_p = world <- body of every body at q."""
    arrays = unpack_model(packed)
    R, p, S, RJ, _, _, _ = kinematic_views(buffer, arrays[0].shape[0])
    body_poses_kernel(arrays, q, R, p, S, RJ, world_R, world_p)


def body_poses(model: Model, q) -> tuple[np.ndarray, np.ndarray]:
    """World <- body rotation (nbodies, 3, 3) and translation (nbodies, 3) at q."""
    q = inputs.configuration(model, q, batch=False)
    world_R, world_p = np.empty((model.nbodies, 3, 3)), np.empty((model.nbodies, 3))
    world_placements(model.packed, q, world_R, world_p, scratch(model))
    return world_R, world_p


def frame_pose(model: Model, q, frame: str) -> np.ndarray:
    """4x4 homogeneous transform world <- frame at q."""
    placement = model.frame(frame)
    q = inputs.configuration(model, q, batch=False)
    if placement.body < 0:
        return pose(placement.rotation, placement.translation)
    world_R, world_p = body_poses(model, q)
    R, p = world_R[placement.body], world_p[placement.body]
    return pose(R @ placement.rotation, R @ placement.translation + p)


REPRESENTATIONS = ("body", "spatial", "hybrid", "mixed")


@njit(cache=True)
def frames_motion_kernel(packed, q, v, bodies, local_R, local_p, jacobians, motion, world_R, world_p, buffer):
    """For frames fixed in bodies (placement local_R, local_p in the body; body
    -1: the world), in one pass: the hybrid Jacobians (k, 6, nv) [w; do/dt] of
    their origins o, motion (k, 2, 6) = their hybrid twists [w; do/dt] and bias
    accelerations [dw/dt; d²o/dt²] at a = 0 without gravity (what constraints
    need, F&O eqs. 1-4), and their world poses. Returns 1 without computing
    when an input is invalid (inputs.invalid), else 0."""
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, v):
        return 1
    parent, v_start, nv_joint = arrays[0], arrays[3], arrays[13]
    n = parent.shape[0]
    R, p, S, RJ, body_R, body_p, o = kinematic_views(buffer, n)
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    column, o = take(buffer, o, (6,))
    no_gravity, o = take(buffer, o, (3,))
    no_gravity[0] = no_gravity[1] = no_gravity[2] = 0.0
    no_acceleration, o = take(buffer, o, (v.shape[0],))
    no_acceleration[:] = 0.0
    body_poses_kernel(arrays, q, R, p, S, RJ, body_R, body_p)
    for i in range(n):
        j0, j1, j2, j3, j4, j5 = body_velocity(arrays, i, R, p, S, v, vel)
        body_acceleration(arrays, i, R, p, S, v, no_acceleration, vel, acc, j0, j1, j2, j3, j4, j5, no_gravity)
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
        x0, x1, x2 = world_p[k, 0], world_p[k, 1], world_p[k, 2]
        j = b
        while j >= 0:
            for m in range(nv_joint[j]):
                motion_to_parent(body_R[j], body_p[j], S[j, :, m], column)
                c = v_start[j] + m
                jacobians[k, 0, c] += column[0]
                jacobians[k, 1, c] += column[1]
                jacobians[k, 2, c] += column[2]
                jacobians[k, 3, c] += column[1] * x2 - column[2] * x1 + column[3]
                jacobians[k, 4, c] += column[2] * x0 - column[0] * x2 + column[4]
                jacobians[k, 5, c] += column[0] * x1 - column[1] * x0 + column[5]
            j = parent[j]
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
    return 0


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
    if frames_motion_kernel(model.packed, q, v, bodies, local_R, local_p, J, motion, world_R, world_p,
                            scratch(model)):
        inputs.explain(model, q, (v, "v"))
    return J, motion, world_R, world_p


def frame_jacobian(model: Model, q, frame: str, representation: str = "body") -> np.ndarray:
    """(6, nv) map from v to the frame's twist [w; v] (Müller kinematics §3):

    body     [w_b; v_b]  frame axes, velocity of the frame origin
    spatial  [w; v_s]    world axes, velocity of the body point at the world origin
    hybrid   [w; dr/dt]  world axes, velocity of the frame origin
    mixed    [w_b; dr/dt] angular in frame axes, linear = velocity of the frame origin in world axes
    """
    if representation not in REPRESENTATIONS:
        raise ValueError(f"representation must be one of {', '.join(REPRESENTATIONS)}, got {representation!r}")
    q = inputs.configuration(model, q, batch=False)
    J, _, world_R, world_p = frames_motion(model, q, np.zeros(model.nv), (frame,))
    J, R_frame, origin = J[0], world_R[0], world_p[0]
    if representation == "hybrid":
        return J
    if representation == "spatial":
        J[3:] += skew(origin) @ J[:3]  # the body point at the world origin: do/dt - w x o
        return J
    J[:3] = R_frame.T @ J[:3]
    if representation == "body":
        J[3:] = R_frame.T @ J[3:]
    return J


@njit(cache=True)
def body_motion_kernel(packed, q, v, a, body, out, buffer):
    """Of one body: out[0:3, 0:3] = world <- body rotation, out[0:3, 3] = its origin,
    out[3] = body twist [w; v] and out[4] = its time derivative, the spatial
    acceleration in body coordinates without gravity (F&O eqs. 1-4); out (5, 6).
    Returns 1 without computing when an input is invalid (inputs.invalid), else 0."""
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, a):
        return 1
    n = arrays[0].shape[0]
    R, p, S, RJ, world_R, world_p, o = kinematic_views(buffer, n)
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    no_gravity, o = take(buffer, o, (3,))
    no_gravity[0] = no_gravity[1] = no_gravity[2] = 0.0
    body_poses_kernel(arrays, q, R, p, S, RJ, world_R, world_p)
    for i in range(body + 1):  # parents come before children
        j0, j1, j2, j3, j4, j5 = body_velocity(arrays, i, R, p, S, v, vel)
        body_acceleration(arrays, i, R, p, S, v, a, vel, acc, j0, j1, j2, j3, j4, j5, no_gravity)
    for r in range(3):
        for c in range(3):
            out[r, c] = world_R[body, r, c]
        out[r, 3] = world_p[body, r]
    for r in range(6):
        out[3, r] = vel[body, r]
        out[4, r] = acc[body, r]
    return 0


def _frame_motion(model: Model, q, v, a, frame: str, representation: str):
    """(twist, acceleration) of a frame in `representation` (see frame_velocity)."""
    if representation not in REPRESENTATIONS:
        raise ValueError(f"representation must be one of {', '.join(REPRESENTATIONS)}, got {representation!r}")
    placement = model.frame(frame)
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    v = inputs.shaped(model, v, model.nv, "v", batch=False)
    a = inputs.shaped(model, a, model.nv, "a", batch=False)
    if placement.body < 0:
        inputs.configuration(model, q)
        inputs.vector(model, v, model.nv, "v")
        inputs.vector(model, a, model.nv, "a")
        return np.zeros(6), np.zeros(6)
    out = np.empty((5, 6))
    if body_motion_kernel(model.packed, q, v, a, placement.body, out, scratch(model)):
        inputs.explain(model, q, (v, "v"), (a, "a"))
    # the frame's twist and acceleration in its own axes: a constant transform of the body's
    to_frame = adjoint(pose(placement.rotation.T, -placement.rotation.T @ placement.translation))
    twist, acceleration = to_frame @ out[3], to_frame @ out[4]
    if representation == "body":
        return twist, acceleration
    R = out[:3, :3] @ placement.rotation
    if representation == "spatial":
        to_world = adjoint(pose(R, out[:3, 3] + out[:3, :3] @ placement.translation))
        return to_world @ twist, to_world @ acceleration
    # the frame origin's velocity R v_b and acceleration R (dv_b/dt + w_b x v_b)
    origin_velocity = R @ twist[3:]
    origin_acceleration = R @ (acceleration[3:] + skew(twist[:3]) @ twist[3:])
    if representation == "hybrid":
        return (np.concatenate([R @ twist[:3], origin_velocity]),
                np.concatenate([R @ acceleration[:3], origin_acceleration]))
    return np.concatenate([twist[:3], origin_velocity]), np.concatenate([acceleration[:3], origin_acceleration])


def frame_velocity(model: Model, q, v, frame: str, representation: str = "body") -> np.ndarray:
    """The frame's twist (6,) = frame_jacobian(representation) @ v, in Müller's
    representations (kinematics §3): body [w_b; v_b], spatial [w; v_s],
    hybrid [w; dr/dt], mixed [w_b; dr/dt] (see frame_jacobian)."""
    return _frame_motion(model, q, v, np.zeros(model.nv), frame, representation)[0]


def frame_acceleration(model: Model, q, v, a, frame: str, representation: str = "body") -> np.ndarray:
    """d/dt of frame_velocity in the same representation (6,) = J a + dJ/dt v,
    without gravity. Hybrid and mixed give the classical acceleration of the frame
    origin d²r/dt²; body and spatial the derivatives of the body and spatial twists."""
    return _frame_motion(model, q, v, a, frame, representation)[1]


def frame_bias_acceleration(model: Model, q, v, frame: str, representation: str = "body") -> np.ndarray:
    """dJ/dt v (6,): frame_acceleration at a = 0, without gravity (what contact
    constraints need: J a + dJ/dt v = 0)."""
    return _frame_motion(model, q, v, np.zeros(model.nv), frame, representation)[1]
