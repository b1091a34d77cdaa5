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

from mbs_dynamics.model import PLANAR, PRISMATIC, REVOLUTE
from mbs_dynamics.spatial import motion_cross, quaternion_to_rotation, rotation_about_axis, spatial_inertia_matrix


@njit(cache=True, inline="always")
def joint_placement(kind, axis, plane, tree_R, tree_p, q, q0, coupling, R_out, p_out, RJ):
    """parent <- child of one body at q: X_T X_J (RBDL eq. 47). RJ: 3x3 scratch."""
    px = py = pz = 0.0
    if kind == REVOLUTE:
        rotation_about_axis(axis, coupling[0] * q[q0] + coupling[1], RJ)
    elif kind == PRISMATIC:
        d = coupling[0] * q[q0] + coupling[1]
        px, py, pz = axis[0] * d, axis[1] * d, axis[2] * d
        for r in range(3):
            for c in range(3):
                RJ[r, c] = 1.0 if r == c else 0.0
    elif kind == PLANAR:
        rotation_about_axis(axis, q[q0 + 2], RJ)
        x, y = q[q0], q[q0 + 1]
        px = x * plane[0, 0] + y * plane[1, 0]
        py = x * plane[0, 1] + y * plane[1, 1]
        pz = x * plane[0, 2] + y * plane[1, 2]
    else:  # FLOATING: the quaternion is normalised here (its norm is checked on input)
        qx, qy, qz, qw = q[q0 + 3], q[q0 + 4], q[q0 + 5], q[q0 + 6]
        norm = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
        quaternion_to_rotation(qx / norm, qy / norm, qz / norm, qw / norm, RJ)
        px, py, pz = q[q0], q[q0 + 1], q[q0 + 2]
    for r in range(3):
        for c in range(3):
            R_out[r, c] = tree_R[r, 0] * RJ[0, c] + tree_R[r, 1] * RJ[1, c] + tree_R[r, 2] * RJ[2, c]
        p_out[r] = tree_p[r] + tree_R[r, 0] * px + tree_R[r, 1] * py + tree_R[r, 2] * pz


@njit(cache=True, inline="always")
def motion_subspace(kind, axis, plane, q, q0, coupling, S_out):
    """S of one body (6 x nv_joint, child frame) into S_out[:, :nv_joint]; returns nv_joint."""
    if kind == REVOLUTE or kind == PRISMATIC:
        offset = 0 if kind == REVOLUTE else 3
        for r in range(6):
            S_out[r, 0] = 0.0
        for k in range(3):
            S_out[offset + k, 0] = coupling[0] * axis[k]
        return 1
    if kind == PLANAR:
        # Linear columns: u1, u2 seen from the child frame, R_J^T u = cos(t) u - sin(t) axis x u.
        c, s = math.cos(q[q0 + 2]), math.sin(q[q0 + 2])
        for j in range(2):
            u = plane[j]
            S_out[0, j] = S_out[1, j] = S_out[2, j] = 0.0
            S_out[3, j] = c * u[0] - s * (axis[1] * u[2] - axis[2] * u[1])
            S_out[4, j] = c * u[1] - s * (axis[2] * u[0] - axis[0] * u[2])
            S_out[5, j] = c * u[2] - s * (axis[0] * u[1] - axis[1] * u[0])
        for k in range(3):
            S_out[k, 2] = axis[k]
            S_out[3 + k, 2] = 0.0
        return 3
    for r in range(6):  # FLOATING
        for c in range(6):
            S_out[r, c] = 1.0 if r == c else 0.0
    return 6


@njit(cache=True, inline="always")
def joint_bias_add(kind, axis, S, v, v0, out):
    """out += c_J = (dS/dt) v_J: zero but for the planar joint, whose linear
    columns turn with theta: c_J = [0; -theta_dot axis x (linear part of S v)]."""
    if kind != PLANAR:
        return
    theta_dot = v[v0 + 2]
    l0 = S[3, 0] * v[v0] + S[3, 1] * v[v0 + 1]
    l1 = S[4, 0] * v[v0] + S[4, 1] * v[v0 + 1]
    l2 = S[5, 0] * v[v0] + S[5, 1] * v[v0 + 1]
    out[3] -= theta_dot * (axis[1] * l2 - axis[2] * l1)
    out[4] -= theta_dot * (axis[2] * l0 - axis[0] * l2)
    out[5] -= theta_dot * (axis[0] * l1 - axis[1] * l0)


@njit(cache=True, inline="always")
def joint_jerk_bias_add(kind, axis, S, v, a, v0, out):
    """out += d/dt (S qdd + c_J) - S qddd = 2 (dS/dt) qdd + (d²S/dt²) qd: zero but
    for the planar joint, whose linear columns turn with theta (joint_bias_add):
    [0; -2 theta_dot axis x l_a - theta_ddot axis x l + theta_dot² axis x (axis x l)],
    l and l_a the linear parts of S v and S a."""
    if kind != PLANAR:
        return
    theta_dot, theta_ddot = v[v0 + 2], a[v0 + 2]
    x, y, z = axis[0], axis[1], axis[2]
    l0 = S[3, 0] * v[v0] + S[3, 1] * v[v0 + 1]
    l1 = S[4, 0] * v[v0] + S[4, 1] * v[v0 + 1]
    l2 = S[5, 0] * v[v0] + S[5, 1] * v[v0 + 1]
    c0, c1, c2 = y * l2 - z * l1, z * l0 - x * l2, x * l1 - y * l0  # axis x l
    k0, k1, k2 = S[3, 0] * a[v0] + S[3, 1] * a[v0 + 1], S[4, 0] * a[v0] + S[4, 1] * a[v0 + 1], \
        S[5, 0] * a[v0] + S[5, 1] * a[v0 + 1]
    e0, e1, e2 = y * k2 - z * k1, z * k0 - x * k2, x * k1 - y * k0  # axis x l_a
    square = theta_dot * theta_dot
    out[3] += -2.0 * theta_dot * e0 - theta_ddot * c0 + square * (y * c2 - z * c1)
    out[4] += -2.0 * theta_dot * e1 - theta_ddot * c1 + square * (z * c0 - x * c2)
    out[5] += -2.0 * theta_dot * e2 - theta_ddot * c2 + square * (x * c1 - y * c0)


@njit(cache=True)
def forward_pass(arrays, q, R, p, S, RJ):
    """Every body's placement in its parent (R, p) and motion subspace S at q
    (S[i, :, :nv_joint[i]]): joint_placement and motion_subspace for all bodies, fused into one loop
    over scalars (a helper call per body costs ten times the arithmetic)."""
    parent, kind, q_start, v_start, coupling, tree_R, tree_p, axis, plane = arrays[:9]
    for i in range(parent.shape[0]):
        k = kind[i]
        if k != REVOLUTE and k != PRISMATIC:
            joint_placement(k, axis[i], plane[i], tree_R[i], tree_p[i], q, q_start[i], coupling[i],
                            R[i], p[i], RJ)
            motion_subspace(k, axis[i], plane[i], q, q_start[i], coupling[i], S[i])
            continue
        value = coupling[i, 0] * q[q_start[i]] + coupling[i, 1]
        x, y, z = axis[i, 0], axis[i, 1], axis[i, 2]
        for r in range(6):
            S[i, r, 0] = 0.0
        if k == REVOLUTE:
            c, s = math.cos(value), math.sin(value)
            t = 1.0 - c
            j00, j01, j02 = c + t * x * x, t * x * y - s * z, t * x * z + s * y
            j10, j11, j12 = t * x * y + s * z, c + t * y * y, t * y * z - s * x
            j20, j21, j22 = t * x * z - s * y, t * y * z + s * x, c + t * z * z
            for r in range(3):
                a0, a1, a2 = tree_R[i, r, 0], tree_R[i, r, 1], tree_R[i, r, 2]
                R[i, r, 0] = a0 * j00 + a1 * j10 + a2 * j20
                R[i, r, 1] = a0 * j01 + a1 * j11 + a2 * j21
                R[i, r, 2] = a0 * j02 + a1 * j12 + a2 * j22
                p[i, r] = tree_p[i, r]
            S[i, 0, 0], S[i, 1, 0], S[i, 2, 0] = coupling[i, 0] * x, coupling[i, 0] * y, coupling[i, 0] * z
        else:  # PRISMATIC
            for r in range(3):
                a0, a1, a2 = tree_R[i, r, 0], tree_R[i, r, 1], tree_R[i, r, 2]
                R[i, r, 0], R[i, r, 1], R[i, r, 2] = a0, a1, a2
                p[i, r] = tree_p[i, r] + (a0 * x + a1 * y + a2 * z) * value
            S[i, 3, 0], S[i, 4, 0], S[i, 5, 0] = coupling[i, 0] * x, coupling[i, 0] * y, coupling[i, 0] * z


@njit(cache=True)
def body_inertias(arrays, out):
    """out[i]: the 6x6 spatial inertia of body i in its frame (RBDL eq. 9)."""
    mass, first_moment, rotational_inertia = arrays[9], arrays[10], arrays[11]
    for i in range(mass.shape[0]):
        spatial_inertia_matrix(mass[i], first_moment[i], rotational_inertia[i], out[i])


@njit(cache=True, inline="always")
def subspace_times(S, i, nv, x, start):
    """S_i x[start:start + nv], six scalars."""
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
def body_velocity(arrays, i, R, p, S, v, vel):
    """vel[i] = ^iX_λ vel[λ] + S_i qd_i (F&O eq. 1; the world at rest); returns the
    joint's twist S_i qd_i as six scalars. Whole arrays and the index are passed,
    not views: a view per call costs more than the arithmetic."""
    lam, v0, nv = arrays[0][i], arrays[3][i], arrays[13][i]
    if lam < 0:
        pw0 = pw1 = pw2 = pv0 = pv1 = pv2 = 0.0
    else:
        pw0, pw1, pw2, pv0, pv1, pv2 = vel[lam, 0], vel[lam, 1], vel[lam, 2], vel[lam, 3], vel[lam, 4], vel[lam, 5]
    x, y, z = p[i, 0], p[i, 1], p[i, 2]
    t0, t1, t2 = pv0 - (y * pw2 - z * pw1), pv1 - (z * pw0 - x * pw2), pv2 - (x * pw1 - y * pw0)
    j0, j1, j2, j3, j4, j5 = subspace_times(S, i, nv, v, v0)
    vel[i, 0] = R[i, 0, 0] * pw0 + R[i, 1, 0] * pw1 + R[i, 2, 0] * pw2 + j0
    vel[i, 1] = R[i, 0, 1] * pw0 + R[i, 1, 1] * pw1 + R[i, 2, 1] * pw2 + j1
    vel[i, 2] = R[i, 0, 2] * pw0 + R[i, 1, 2] * pw1 + R[i, 2, 2] * pw2 + j2
    vel[i, 3] = R[i, 0, 0] * t0 + R[i, 1, 0] * t1 + R[i, 2, 0] * t2 + j3
    vel[i, 4] = R[i, 0, 1] * t0 + R[i, 1, 1] * t1 + R[i, 2, 1] * t2 + j4
    vel[i, 5] = R[i, 0, 2] * t0 + R[i, 1, 2] * t1 + R[i, 2, 2] * t2 + j5
    return j0, j1, j2, j3, j4, j5


@njit(cache=True, inline="always")
def body_acceleration(arrays, i, R, p, S, v, a, vel, acc, j0, j1, j2, j3, j4, j5, gravity):
    """acc[i] = ^iX_λ acc[λ] + S_i qdd_i + c_J + v_i x (S_i qd_i) (F&O eq. 4, RBDL
    Alg. 3), with the joint twist (j0..j5) from body_velocity and vel[i] set; the
    world accelerates at -gravity (pass zeros for the kinematic acceleration)."""
    lam, v0, nv = arrays[0][i], arrays[3][i], arrays[13][i]
    if lam < 0:
        aw0 = aw1 = aw2 = 0.0
        av0, av1, av2 = -gravity[0], -gravity[1], -gravity[2]
    else:
        aw0, aw1, aw2, av0, av1, av2 = acc[lam, 0], acc[lam, 1], acc[lam, 2], acc[lam, 3], acc[lam, 4], acc[lam, 5]
    x, y, z = p[i, 0], p[i, 1], p[i, 2]
    u0, u1, u2 = av0 - (y * aw2 - z * aw1), av1 - (z * aw0 - x * aw2), av2 - (x * aw1 - y * aw0)
    b0, b1, b2, b3, b4, b5 = subspace_times(S, i, nv, a, v0)
    w0, w1, w2, l0, l1, l2 = vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3], vel[i, 4], vel[i, 5]
    # + v x vJ = [w x jw; w x jv + l x jw]
    acc[i, 0] = R[i, 0, 0] * aw0 + R[i, 1, 0] * aw1 + R[i, 2, 0] * aw2 + b0 + w1 * j2 - w2 * j1
    acc[i, 1] = R[i, 0, 1] * aw0 + R[i, 1, 1] * aw1 + R[i, 2, 1] * aw2 + b1 + w2 * j0 - w0 * j2
    acc[i, 2] = R[i, 0, 2] * aw0 + R[i, 1, 2] * aw1 + R[i, 2, 2] * aw2 + b2 + w0 * j1 - w1 * j0
    acc[i, 3] = R[i, 0, 0] * u0 + R[i, 1, 0] * u1 + R[i, 2, 0] * u2 + b3 + w1 * j5 - w2 * j4 + l1 * j2 - l2 * j1
    acc[i, 4] = R[i, 0, 1] * u0 + R[i, 1, 1] * u1 + R[i, 2, 1] * u2 + b4 + w2 * j3 - w0 * j5 + l2 * j0 - l0 * j2
    acc[i, 5] = R[i, 0, 2] * u0 + R[i, 1, 2] * u1 + R[i, 2, 2] * u2 + b5 + w0 * j4 - w1 * j3 + l0 * j1 - l1 * j0
    if nv > 1:
        joint_bias_add(arrays[1][i], arrays[7][i], S[i], v, v0, acc[i])


@njit(cache=True, inline="always")
def body_jerk(arrays, i, R, p, S, v, a, jerk_in, vel, acc, jerk, j0, j1, j2, j3, j4, j5, work):
    """jerk[i] = d/dt acc[i] (body coordinates), from the time derivative of the
    acceleration recursion (body_acceleration), with d/dt ^iX_λ = -(S qd) x ^iX_λ:
        J_i = ^iX_λ J_λ + S qddd + d_J + 2 A_i x vJ + (vJ + V_i) x (aJ + c_J) + vJ x (V_i x vJ),
    vJ = S qd (j0..j5 from body_velocity), aJ = S qdd, d_J from joint_jerk_bias_add;
    vel[i] and acc[i] set. Müller dynamics §2 gives the same jerk as a sum of
    brackets (eq. 13, with its k = r terms counted once: DESIGN.md §7, misprint 10).
    The world's jerk is zero (gravity is constant). work: 6 floats of scratch."""
    lam, kind, v0, nv = arrays[0][i], arrays[1][i], arrays[3][i], arrays[13][i]
    if lam < 0:
        pw0 = pw1 = pw2 = pv0 = pv1 = pv2 = 0.0
    else:
        pw0, pw1, pw2 = jerk[lam, 0], jerk[lam, 1], jerk[lam, 2]
        pv0, pv1, pv2 = jerk[lam, 3], jerk[lam, 4], jerk[lam, 5]
    x, y, z = p[i, 0], p[i, 1], p[i, 2]
    t0, t1, t2 = pv0 - (y * pw2 - z * pw1), pv1 - (z * pw0 - x * pw2), pv2 - (x * pw1 - y * pw0)
    s0, s1, s2, s3, s4, s5 = subspace_times(S, i, nv, jerk_in, v0)
    for r in range(6):
        work[r] = 0.0
    if nv > 1:
        joint_jerk_bias_add(kind, arrays[7][i], S[i], v, a, v0, work)
    jerk[i, 0] = R[i, 0, 0] * pw0 + R[i, 1, 0] * pw1 + R[i, 2, 0] * pw2 + s0 + work[0]
    jerk[i, 1] = R[i, 0, 1] * pw0 + R[i, 1, 1] * pw1 + R[i, 2, 1] * pw2 + s1 + work[1]
    jerk[i, 2] = R[i, 0, 2] * pw0 + R[i, 1, 2] * pw1 + R[i, 2, 2] * pw2 + s2 + work[2]
    jerk[i, 3] = R[i, 0, 0] * t0 + R[i, 1, 0] * t1 + R[i, 2, 0] * t2 + s3 + work[3]
    jerk[i, 4] = R[i, 0, 1] * t0 + R[i, 1, 1] * t1 + R[i, 2, 1] * t2 + s4 + work[4]
    jerk[i, 5] = R[i, 0, 2] * t0 + R[i, 1, 2] * t1 + R[i, 2, 2] * t2 + s5 + work[5]
    # aJ + c_J = d/dt (S qd)
    for r in range(6):
        work[r] = 0.0
    if nv > 1:
        joint_bias_add(kind, arrays[7][i], S[i], v, v0, work)
    b0, b1, b2, b3, b4, b5 = subspace_times(S, i, nv, a, v0)
    b0, b1, b2, b3, b4, b5 = b0 + work[0], b1 + work[1], b2 + work[2], b3 + work[3], b4 + work[4], b5 + work[5]
    w0, w1, w2, w3, w4, w5 = vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3], vel[i, 4], vel[i, 5]
    c = motion_cross(acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5], j0, j1, j2, j3, j4, j5)
    d = motion_cross(j0 + w0, j1 + w1, j2 + w2, j3 + w3, j4 + w4, j5 + w5, b0, b1, b2, b3, b4, b5)
    e = motion_cross(w0, w1, w2, w3, w4, w5, j0, j1, j2, j3, j4, j5)
    f = motion_cross(j0, j1, j2, j3, j4, j5, e[0], e[1], e[2], e[3], e[4], e[5])
    for r in range(6):
        jerk[i, r] += 2.0 * c[r] + d[r] + f[r]
