"""Joint models (RBDL §4, jcalc): the transform X_J(q), the motion subspace S
and the bias c_J of each joint type, in the child body frame.

Coordinates (DESIGN.md §2):
    revolute, continuous   q = angle, v = dq/dt, S = [axis; 0]
    prismatic              q = displacement, v = dq/dt, S = [0; axis]
    planar                 q = [x, y, theta] in the plane normal to the axis
                           (x, y along the in-plane vectors u1, u2 of the joint
                           frame), v = dq/dt
    floating               q = [x, y, z, qx, qy, qz, qw], v = body twist [w; v]
                           of the child frame in the child frame, S = 1
A coupled (mimic) joint reads its master's coordinate: q = m q_master + o,
so its S carries the multiplier m.
"""
import math

from numba import njit

from mbs_dynamics.multibody.model import PLANAR, PRISMATIC, REVOLUTE, unpack_model
from mbs_dynamics.spatial.algebra import add, cross, motion_cross, motion_to_child, motion_to_parent, \
    quaternion_to_rotation, rotate, rotation_about_axis, row, store

# The motion of the world, at rest.
REST = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@njit(cache=True, inline="always")
def joint_rotation(model, i, q):
    """R_J(q) of body i's joint, nine scalars by rows, and its translation p_J
    (RBDL §4.4, jcalc)."""
    kind, q0, axis = model.joint_type[i], model.q_start[i], model.axis
    if kind == REVOLUTE:
        angle = model.coupling[i, 0] * q[q0] + model.coupling[i, 1]
        return rotation_about_axis(axis[i, 0], axis[i, 1], axis[i, 2], angle), (0.0, 0.0, 0.0)
    if kind == PRISMATIC:
        d = model.coupling[i, 0] * q[q0] + model.coupling[i, 1]
        return (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0), (axis[i, 0] * d, axis[i, 1] * d, axis[i, 2] * d)
    if kind == PLANAR:
        x, y, u = q[q0], q[q0 + 1], model.plane
        return rotation_about_axis(axis[i, 0], axis[i, 1], axis[i, 2], q[q0 + 2]), (
            x * u[i, 0, 0] + y * u[i, 1, 0], x * u[i, 0, 1] + y * u[i, 1, 1], x * u[i, 0, 2] + y * u[i, 1, 2])
    # FLOATING: the quaternion is normalised here (its norm is checked on input)
    qx, qy, qz, qw = q[q0 + 3], q[q0 + 4], q[q0 + 5], q[q0 + 6]
    norm = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
    return quaternion_to_rotation(qx / norm, qy / norm, qz / norm, qw / norm), (q[q0], q[q0 + 1], q[q0 + 2])


@njit(cache=True, inline="always")
def joint_placement(model, i, q, R, p):
    """(R[i], p[i]) = parent <- child of body i at q: X_T X_J (RBDL eq. 47)."""
    J, t = joint_rotation(model, i, q)
    T, o = model.tree_rotation, model.tree_translation
    for r in range(3):
        a0, a1, a2 = T[i, r, 0], T[i, r, 1], T[i, r, 2]
        R[i, r, 0] = a0 * J[0] + a1 * J[3] + a2 * J[6]
        R[i, r, 1] = a0 * J[1] + a1 * J[4] + a2 * J[7]
        R[i, r, 2] = a0 * J[2] + a1 * J[5] + a2 * J[8]
        p[i, r] = o[i, r] + a0 * t[0] + a1 * t[1] + a2 * t[2]


@njit(cache=True, inline="always")
def motion_subspace(model, i, q, S):
    """S[i, :, :nv_joint[i]]: the motion subspace of body i's joint in the child frame."""
    kind, axis = model.joint_type[i], model.axis
    if kind == REVOLUTE or kind == PRISMATIC:
        offset = 0 if kind == REVOLUTE else 3
        for r in range(6):
            S[i, r, 0] = 0.0
        for k in range(3):
            S[i, offset + k, 0] = model.coupling[i, 0] * axis[i, k]
    elif kind == PLANAR:
        # Linear columns: u1, u2 seen from the child frame, R_J^T u = cos(t) u - sin(t) axis x u.
        theta = q[model.q_start[i] + 2]
        c, s = math.cos(theta), math.sin(theta)
        x, y, z = axis[i, 0], axis[i, 1], axis[i, 2]
        for j in range(2):
            u = model.plane[i, j]
            S[i, 0, j] = S[i, 1, j] = S[i, 2, j] = 0.0
            S[i, 3, j] = c * u[0] - s * (y * u[2] - z * u[1])
            S[i, 4, j] = c * u[1] - s * (z * u[0] - x * u[2])
            S[i, 5, j] = c * u[2] - s * (x * u[1] - y * u[0])
        for k in range(3):
            S[i, k, 2] = axis[i, k]
            S[i, 3 + k, 2] = 0.0
    else:  # FLOATING
        for r in range(6):
            for c in range(6):
                S[i, r, c] = 1.0 if r == c else 0.0


@njit(cache=True, inline="always")
def world_column(model, i, S, world_R, world_p, k):
    """^0X_i S_i[:, k] (spatial.motion_to_parent with body i's world placement):
    column k of its motion subspace in world axes, about the world origin, a
    6-tuple. A revolute joint's column is a rotation [w; p x w], a prismatic
    one's a translation [0; R s]: the same numbers as the general transform,
    without its products with zeros."""
    kind = model.joint_type[i]
    if kind == REVOLUTE:
        w = rotate(world_R, i, (S[i, 0, 0], S[i, 1, 0], S[i, 2, 0]))
        return w + cross((world_p[i, 0], world_p[i, 1], world_p[i, 2]), w)
    if kind == PRISMATIC:
        return (0.0, 0.0, 0.0) + rotate(world_R, i, (S[i, 3, 0], S[i, 4, 0], S[i, 5, 0]))
    return motion_to_parent(world_R, world_p, i, (S[i, 0, k], S[i, 1, k], S[i, 2, k], S[i, 3, k], S[i, 4, k],
                                                  S[i, 5, k]))


@njit(cache=True, inline="always")
def world_subspace(model, i, S, world_R, world_p, out):
    """out[i, k] = world_column k of body i, for each of its joint's columns."""
    for k in range(model.nv_joint[i]):
        out[i, k, 0], out[i, k, 1], out[i, k, 2], out[i, k, 3], out[i, k, 4], out[i, k, 5] = world_column(
            model, i, S, world_R, world_p, k)


@njit(cache=True, inline="always")
def joint_world_subspace(model, i, q, S, world_R, world_p, out):
    """world_subspace of body i at q from its joint: a revolute or prismatic
    joint's column straight from its axis (motion_subspace's and
    world_column's numbers, without storing S[i] and reading it back), the
    other joints' by motion_subspace into S."""
    kind = model.joint_type[i]
    if kind == REVOLUTE or kind == PRISMATIC:
        scale = model.coupling[i, 0]
        u = rotate(world_R, i, (scale * model.axis[i, 0], scale * model.axis[i, 1], scale * model.axis[i, 2]))
        if kind == REVOLUTE:  # [u; p x u]
            out[i, 0, 0], out[i, 0, 1], out[i, 0, 2] = u
            out[i, 0, 3], out[i, 0, 4], out[i, 0, 5] = cross((world_p[i, 0], world_p[i, 1], world_p[i, 2]), u)
        else:  # [0; u]
            out[i, 0, 0] = out[i, 0, 1] = out[i, 0, 2] = 0.0
            out[i, 0, 3], out[i, 0, 4], out[i, 0, 5] = u
        return
    motion_subspace(model, i, q, S)
    world_subspace(model, i, S, world_R, world_p, out)


@njit(cache=True, inline="always")
def joint_bias(model, i, S, v):
    """c_J = (dS/dt) qd of body i's joint, a 6-tuple: zero but for the planar
    joint, whose linear columns turn with theta: c_J = [0; -theta_dot axis x l],
    l the linear part of S qd."""
    if model.joint_type[i] != PLANAR:
        return REST
    v0, x, y, z = model.v_start[i], model.axis[i, 0], model.axis[i, 1], model.axis[i, 2]
    theta_dot = v[v0 + 2]
    _, _, _, l0, l1, l2 = subspace_times(S, i, 2, v, v0)  # the linear columns x, y
    return 0.0, 0.0, 0.0, -theta_dot * (y * l2 - z * l1), -theta_dot * (z * l0 - x * l2), -theta_dot * (x * l1 - y * l0)


@njit(cache=True, inline="always")
def joint_jerk_bias(model, i, S, v, a):
    """d/dt (S qdd + c_J) - S qddd = 2 (dS/dt) qdd + (d²S/dt²) qd of body i's
    joint, a 6-tuple: zero but for the planar joint (joint_bias):
    [0; -2 theta_dot axis x l_a - theta_ddot axis x l + theta_dot² axis x (axis x l)],
    l and l_a the linear parts of S qd and S qdd."""
    if model.joint_type[i] != PLANAR:
        return REST
    v0, x, y, z = model.v_start[i], model.axis[i, 0], model.axis[i, 1], model.axis[i, 2]
    theta_dot, theta_ddot = v[v0 + 2], a[v0 + 2]
    _, _, _, l0, l1, l2 = subspace_times(S, i, 2, v, v0)  # the linear columns x, y
    _, _, _, k0, k1, k2 = subspace_times(S, i, 2, a, v0)
    c0, c1, c2 = y * l2 - z * l1, z * l0 - x * l2, x * l1 - y * l0  # axis x l
    e0, e1, e2 = y * k2 - z * k1, z * k0 - x * k2, x * k1 - y * k0  # axis x l_a
    square = theta_dot * theta_dot
    return (0.0, 0.0, 0.0, -2.0 * theta_dot * e0 - theta_ddot * c0 + square * (y * c2 - z * c1),
            -2.0 * theta_dot * e1 - theta_ddot * c1 + square * (z * c0 - x * c2),
            -2.0 * theta_dot * e2 - theta_ddot * c2 + square * (x * c1 - y * c0))


@njit(cache=True)
def forward_pass(packed, q, R, p, S):
    """Every body's placement in its parent (R, p) and motion subspace S at q."""
    model = unpack_model(packed)
    for i in range(model.parent.shape[0]):
        joint_placement(model, i, q, R, p)
        motion_subspace(model, i, q, S)


@njit(cache=True)
def axis_forward_pass(packed, q, R, p, S):
    """forward_pass's R, p and S, the placements by parent_placement: the same
    numbers (zeros' signs aside), a revolute joint about a coordinate axis
    without its exact-zero terms."""
    model = unpack_model(packed)
    for i in range(model.parent.shape[0]):
        rotation, origin = parent_placement(model, i, q)
        R[i, 0, 0], R[i, 0, 1], R[i, 0, 2] = rotation[0], rotation[1], rotation[2]
        R[i, 1, 0], R[i, 1, 1], R[i, 1, 2] = rotation[3], rotation[4], rotation[5]
        R[i, 2, 0], R[i, 2, 1], R[i, 2, 2] = rotation[6], rotation[7], rotation[8]
        p[i, 0], p[i, 1], p[i, 2] = origin[0], origin[1], origin[2]
        motion_subspace(model, i, q, S)


@njit(cache=True, inline="always")
def coordinate_axis(model, i):
    """0, 1 or 2 when body i's joint axis lies along x, y or z (+ or -:
    most URDFs' joints), else -1."""
    x, y, z = model.axis[i, 0], model.axis[i, 1], model.axis[i, 2]
    return 0 if y == 0.0 and z == 0.0 else 1 if x == 0.0 and z == 0.0 else 2 if x == 0.0 and y == 0.0 else -1


@njit(cache=True, inline="always")
def _axis_row(a0, a1, a2, along, c, s, d):
    """A row (a0, a1, a2) of the tree rotation times the rotation about
    coordinate axis `along` (c, s: its angle's cosine and sine times the
    axis' sign; d its diagonal entry on the axis), the terms of exact zeros
    left out (parent_placement)."""
    if along == 0:  # [d 0 0; 0 c -s; 0 s c]
        return a0 * d, a1 * c + a2 * s, a1 * -s + a2 * c
    if along == 1:  # [c 0 s; 0 d 0; -s 0 c]
        return a0 * c + a2 * -s, a1 * d, a0 * s + a2 * c
    return a0 * c + a1 * s, a0 * -s + a1 * c, a2 * d  # [c -s 0; s c 0; 0 0 d]


@njit(cache=True, inline="always")
def parent_placement(model, i, q):
    """Body i's placement in its parent at q: its rotation (nine scalars by
    rows) and origin, joint_placement's numbers as scalars. For a revolute
    joint about a coordinate axis, without the rotation's and the product's
    terms that are exact zeros (x + 0 = x: the same numbers, zeros' signs
    aside), the rest in joint_placement's order (rotation_about_axis' entry
    on the axis, c + (1 - c) z z, need not round to 1)."""
    T, o = model.tree_rotation, model.tree_translation
    along = coordinate_axis(model, i) if model.joint_type[i] == REVOLUTE else -1
    if along >= 0:
        angle = model.coupling[i, 0] * q[model.q_start[i]] + model.coupling[i, 1]
        c, s, sign = math.cos(angle), math.sin(angle), model.axis[i, along]
        d, s = c + (1.0 - c) * sign * sign, s * sign
        return (_axis_row(T[i, 0, 0], T[i, 0, 1], T[i, 0, 2], along, c, s, d)
                + _axis_row(T[i, 1, 0], T[i, 1, 1], T[i, 1, 2], along, c, s, d)
                + _axis_row(T[i, 2, 0], T[i, 2, 1], T[i, 2, 2], along, c, s, d)), (o[i, 0], o[i, 1], o[i, 2])
    J, t = joint_rotation(model, i, q)
    a, b, e = (T[i, 0, 0], T[i, 0, 1], T[i, 0, 2]), (T[i, 1, 0], T[i, 1, 1], T[i, 1, 2]), \
        (T[i, 2, 0], T[i, 2, 1], T[i, 2, 2])
    return (a[0] * J[0] + a[1] * J[3] + a[2] * J[6], a[0] * J[1] + a[1] * J[4] + a[2] * J[7],
            a[0] * J[2] + a[1] * J[5] + a[2] * J[8], b[0] * J[0] + b[1] * J[3] + b[2] * J[6],
            b[0] * J[1] + b[1] * J[4] + b[2] * J[7], b[0] * J[2] + b[1] * J[5] + b[2] * J[8],
            e[0] * J[0] + e[1] * J[3] + e[2] * J[6], e[0] * J[1] + e[1] * J[4] + e[2] * J[7],
            e[0] * J[2] + e[1] * J[5] + e[2] * J[8]), \
        (o[i, 0] + a[0] * t[0] + a[1] * t[1] + a[2] * t[2], o[i, 1] + b[0] * t[0] + b[1] * t[1] + b[2] * t[2],
         o[i, 2] + e[0] * t[0] + e[1] * t[1] + e[2] * t[2])


@njit(cache=True, inline="always")
def subspace_times(S, i, nv, x, start):
    """S_i x[start:start + nv], a 6-tuple."""
    s0 = s1 = s2 = s3 = s4 = s5 = 0.0
    for k in range(nv):
        value = x[start + k]
        s0 += S[i, 0, k] * value
        s1 += S[i, 1, k] * value
        s2 += S[i, 2, k] * value
        s3 += S[i, 3, k] * value
        s4 += S[i, 4, k] * value
        s5 += S[i, 5, k] * value
    return s0, s1, s2, s3, s4, s5


@njit(cache=True, inline="always")
def parent_row(X, lam, world):
    """X[λ] as a 6-tuple: the parent's motion; `world` for the world (λ < 0)."""
    if lam < 0:
        return world
    return row(X, lam)



@njit(cache=True, inline="always")
def gravity_acceleration(gravity):
    """The world's acceleration [0; -g]: gravity enters the recursions as the
    world accelerating upwards (F&O §3.3)."""
    return 0.0, 0.0, 0.0, -gravity[0], -gravity[1], -gravity[2]


@njit(cache=True, inline="always")
def body_velocity(model, i, R, p, S, v, vel):
    """vel[i] = v_i = ^iX_λ v_λ + S_i qd_i (F&O eq. 1; the world at rest).
    Returns (v_i, vJ = S_i qd_i) as 6-tuples."""
    vJ = subspace_times(S, i, model.nv_joint[i], v, model.v_start[i])
    v_i = add(motion_to_child(R, p, i, parent_row(vel, model.parent[i], REST)), vJ)
    store(vel, i, v_i)
    return v_i, vJ


@njit(cache=True, inline="always")
def body_acceleration(model, i, R, p, S, v, a, acc, v_i, vJ, gravity):
    """acc[i] = a_i = ^iX_λ a_λ + S_i qdd_i + c_J + v_i x vJ (F&O eq. 4, RBDL
    Alg. 3), from body_velocity's v_i and vJ; the world accelerates at -gravity
    (pass zeros for the kinematic acceleration). Returns a_i."""
    a_i = add(add(motion_to_child(R, p, i, parent_row(acc, model.parent[i], gravity_acceleration(gravity))),
                  subspace_times(S, i, model.nv_joint[i], a, model.v_start[i])),
              add(joint_bias(model, i, S, v), motion_cross(v_i, vJ)))
    store(acc, i, a_i)
    return a_i


@njit(cache=True, inline="always")
def body_jerk(model, i, R, p, S, v, a, jerk_in, jerk, v_i, a_i, vJ):
    """jerk[i] = d/dt a_i (body coordinates), from the time derivative of the
    acceleration recursion (body_acceleration), with d/dt ^iX_λ = -vJ x ^iX_λ:
        J_i = ^iX_λ J_λ + S qddd + d_J + 2 a_i x vJ + (vJ + v_i) x (aJ + c_J) + vJ x (v_i x vJ),
    vJ = S qd, aJ = S qdd, d_J = joint_jerk_bias, c_J = joint_bias; v_i and a_i
    from body_velocity and body_acceleration. Müller dynamics §2 gives the same
    jerk as a sum of brackets (eq. 13, its k = r terms counted once: DESIGN.md §7,
    misprint 10). The world's jerk is zero (gravity is constant)."""
    nv, v0 = model.nv_joint[i], model.v_start[i]
    transported = add(motion_to_child(R, p, i, parent_row(jerk, model.parent[i], REST)),
                      add(subspace_times(S, i, nv, jerk_in, v0), joint_jerk_bias(model, i, S, v, a)))
    aJ = add(subspace_times(S, i, nv, a, v0), joint_bias(model, i, S, v))  # d/dt (S qd)
    c = motion_cross(a_i, vJ)
    J_i = add(add(transported, add(c, c)), add(motion_cross(add(vJ, v_i), aJ), motion_cross(vJ, motion_cross(v_i, vJ))))
    store(jerk, i, J_i)
