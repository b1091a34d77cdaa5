"""Inverse dynamics by the recursive Newton-Euler algorithm, in the three forms
of Müller dynamics §4 (MD), selected by `representation`; all give the same
torques:

body     every twist, acceleration, wrench and inertia in the body frame about
         its origin (F&O eqs. 1-8, MD eqs. 66-67; RBDL Alg. 1 with its misprint
         corrected: the bias acceleration includes v_i x (S_i qd_i), as in RBDL
         Alg. 3): each step transforms parent <-> child.
spatial  all in world axes about the world origin (MD eqs. 70-71): the twists
         and the wrenches add up the tree with no transform; the joint screws
         are transformed instead.
hybrid   twists [w; dr/dt] and wrenches in world axes at each body's origin
         (MD eqs. 72-76): the steps only move the reference point, and each
         body needs one rotation.

Gravity enters as the acceleration [0; -g] of the world. The MD backward loops
start at i = n with W_{n+1} = 0, and applied wrenches enter with a minus sign
(DESIGN.md §7, misprint 9).

The default form is the fastest in benchmarks/core.py: the body form, on
every robot there (TALOS: hybrid 1.2x and spatial 1.3x its time): the world
forms also need every body's world placement and world joint screws, and the
spatial form its world inertia, which the body form never forms.
"""
import numpy as np
from numba import njit, prange

from mbs_dynamics import inputs
from mbs_dynamics.crba import world_body_inertias, world_motion_subspaces
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, all_finite, invalid
from mbs_dynamics.joints import body_acceleration, body_velocity, forward_pass, joint_bias_add
from mbs_dynamics.kinematics import body_poses, body_poses_kernel
from mbs_dynamics.model import Model, unpack_model
from mbs_dynamics.spatial import cross, force_cross, force_to_parent_add, inertia_apply, motion_cross, rotate, \
    rotate_back
from mbs_dynamics.workspace import kinematic_views, new_scratch, scratch, take

# The forms, in the order of their numbers (_KERNELS, _BATCH_KERNELS).
RNEA_REPRESENTATIONS = ("body", "spatial", "hybrid")
BODY, SPATIAL, HYBRID = range(3)
# The fastest form on TALOS in benchmarks/core.py (rows "inverse_dynamics body/spatial/hybrid"; it says which).
DEFAULT_RNEA_REPRESENTATION = "body"


# --- pieces of the three forms, on scalars ---------------------------------


@njit(cache=True, inline="always")
def newton_euler(mass, first_moment, inertia, i, b0, b1, b2, b3, b4, b5, w0, w1, w2, l0, l1, l2):
    """W = I a + v x* I v (F&O eq. 3; M dV - ad^T_V M V of MD eqs. 67a, 71b) for
    a = [b0..b5], v = [w; l] and I = (mass[i], first_moment[i], inertia[i]) in
    one frame about one point (spatial.inertia_apply), six scalars."""
    m, h, I_O = mass[i], first_moment[i], inertia[i]
    n0, n1, n2, f0, f1, f2 = inertia_apply(m, h[0], h[1], h[2], I_O, b0, b1, b2, b3, b4, b5)
    k0, k1, k2, g0, g1, g2 = inertia_apply(m, h[0], h[1], h[2], I_O, w0, w1, w2, l0, l1, l2)
    c = force_cross(w0, w1, w2, l0, l1, l2, k0, k1, k2, g0, g1, g2)
    return n0 + c[0], n1 + c[1], n2 + c[2], f0 + c[3], f1 + c[4], f2 + c[5]


@njit(cache=True, inline="always")
def hybrid_wrench(arrays, i, world_R, w0, w1, w2, dw0, dw1, dw2, e0, e1, e2):
    """W^h = M^h dV^h + ad_w M^h [w; 0] (MD eqs. 53, 76b): body i's wrench [n; f]
    in world axes about its origin r, from its angular velocity w, angular
    acceleration dw and the acceleration e = d²r/dt² of r, all in world axes.
    M^h = Ad_R^-T M^b Ad_R^-1 (76a) is applied, not formed: the vectors are
    rotated into the body, newton_euler there with v = [R^T w; 0], and back."""
    x0, x1, x2 = rotate_back(world_R, i, w0, w1, w2)
    y0, y1, y2 = rotate_back(world_R, i, dw0, dw1, dw2)
    z0, z1, z2 = rotate_back(world_R, i, e0, e1, e2)
    n0, n1, n2, f0, f1, f2 = newton_euler(arrays[9], arrays[10], arrays[11], i, y0, y1, y2, z0, z1, z2,
                                          x0, x1, x2, 0.0, 0.0, 0.0)
    n0, n1, n2 = rotate(world_R, i, n0, n1, n2)
    f0, f1, f2 = rotate(world_R, i, f0, f1, f2)
    return n0, n1, n2, f0, f1, f2


@njit(cache=True, inline="always")
def store_wrench(force, i, f_ext, n0, n1, n2, f0, f1, f2):
    """force[i] = [n; f] - f_ext[i]: the applied wrench enters with a minus sign
    (MD eqs. 67a, 71b, 76b; DESIGN.md §7, misprint 9). f_ext with no rows: none."""
    force[i, 0], force[i, 1], force[i, 2], force[i, 3], force[i, 4], force[i, 5] = n0, n1, n2, f0, f1, f2
    if f_ext.shape[0] > 0:
        for r in range(6):
            force[i, r] -= f_ext[i, r]


@njit(cache=True, inline="always")
def parent_motion(vel, acc, lam):
    """Body λ's twist and acceleration as twelve scalars; for the world (λ < 0)
    zeros, to which world_step adds gravity."""
    if lam < 0:
        return 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    return (vel[lam, 0], vel[lam, 1], vel[lam, 2], vel[lam, 3], vel[lam, 4], vel[lam, 5],
            acc[lam, 0], acc[lam, 1], acc[lam, 2], acc[lam, 3], acc[lam, 4], acc[lam, 5])


@njit(cache=True, inline="always")
def screw_times(J, i, nv, x, start):
    """J_i x[start:start + nv] for joint screws stored by column, J[i, k] (the
    layout of crba.world_motion_subspaces), six scalars."""
    s0 = s1 = s2 = s3 = s4 = s5 = 0.0
    for k in range(nv):
        value = x[start + k]
        s0 += J[i, k, 0] * value
        s1 += J[i, k, 1] * value
        s2 += J[i, k, 2] * value
        s3 += J[i, k, 3] * value
        s4 += J[i, k, 4] * value
        s5 += J[i, k, 5] * value
    return s0, s1, s2, s3, s4, s5


@njit(cache=True, inline="always")
def world_step(arrays, i, S, world_R, J, v, a, vel, acc, work):
    """What both world forms start body i's step from: its parent's twist and
    acceleration (the world's: [0; -g], gravity), the joint's J_i qd_i and
    J_i qdd_i, and d(J_i)/dt qd_i beyond the bracket with the twist: the planar
    joint's c_J (joints.joint_bias_add), a pure linear motion vector, turned to
    world axes (R_i c_J, the same about any point); 24 scalars."""
    lam, v0, nv = arrays[0][i], arrays[3][i], arrays[13][i]
    pw0, pw1, pw2, pl0, pl1, pl2, aw0, aw1, aw2, al0, al1, al2 = parent_motion(vel, acc, lam)
    if lam < 0:
        gravity = arrays[14]
        al0, al1, al2 = -gravity[0], -gravity[1], -gravity[2]
    j0, j1, j2, j3, j4, j5 = screw_times(J, i, nv, v, v0)
    b0, b1, b2, b3, b4, b5 = screw_times(J, i, nv, a, v0)
    c0 = c1 = c2 = 0.0
    if nv > 1:
        work[3] = work[4] = work[5] = 0.0
        joint_bias_add(arrays[1][i], arrays[7][i], S[i], v, v0, work)
        c0, c1, c2 = rotate(world_R, i, work[3], work[4], work[5])
    return (pw0, pw1, pw2, pl0, pl1, pl2, aw0, aw1, aw2, al0, al1, al2, j0, j1, j2, j3, j4, j5,
            b0, b1, b2, b3 + c0, b4 + c1, b5 + c2)


@njit(cache=True, inline="always")
def world_views(arrays, q, buffer, about_world_origin):
    """The world forms' layout of the scratch buffer, filled from q: world
    placements (kinematics.body_poses_kernel) and the joint screws J_i = ^0X_i S_i
    (crba.world_motion_subspaces) about the world origin (spatial, MD eq. 70b),
    with each body's inertia M^s_i about it (crba.world_body_inertias, 71a); or,
    with about_world_origin False, the screws about each body's origin: the
    rotation alone, Ad_R_i S_i (hybrid, MD eq. 75b). Returns S (body frame),
    world_R, world_p, J, the twists, accelerations and wrenches (n, 6), the
    world inertias (mass, first moment, rotational; filled for spatial only)
    and a 6-vector of scratch."""
    n = arrays[0].shape[0]
    R, p, S, RJ, world_R, world_p, o = kinematic_views(buffer, n)
    J, o = take(buffer, o, (n, 6, 6))
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    force, o = take(buffer, o, (n, 6))
    mass_w, o = take(buffer, o, (n,))
    first_moment_w, o = take(buffer, o, (n, 3))
    inertia_w, o = take(buffer, o, (n, 3, 3))
    no_offset, o = take(buffer, o, (n, 3))
    work, o = take(buffer, o, (6,))
    body_poses_kernel(arrays, q, R, p, S, RJ, world_R, world_p)
    if about_world_origin:
        world_motion_subspaces(arrays, S, world_R, world_p, J)
        world_body_inertias(arrays, world_R, world_p, mass_w, first_moment_w, inertia_w)
    else:
        no_offset[:] = 0.0
        world_motion_subspaces(arrays, S, world_R, no_offset, J)
    return S, world_R, world_p, J, vel, acc, force, mass_w, first_moment_w, inertia_w, work


@njit(cache=True, inline="always")
def world_backward_pass(arrays, J, world_p, force, about_world_origin, tau):
    """From i = n down (W_{n+1} = 0: DESIGN.md §7, misprint 9): tau_i = J_i^T W_i (MD eqs. 71c,
    76c) and W_λ += W_i: as it is about the world origin (spatial, 71b), or
    with its moment taken about λ's origin, [n + (r_i - r_λ) x f; f] (hybrid,
    Ad^T_d of 76b, a translation)."""
    parent, v_start, nv_joint = arrays[0], arrays[3], arrays[13]
    for k in range(tau.shape[0]):
        tau[k] = 0.0
    for i in range(parent.shape[0] - 1, -1, -1):
        v0 = v_start[i]
        for k in range(nv_joint[i]):
            tau[v0 + k] += (J[i, k, 0] * force[i, 0] + J[i, k, 1] * force[i, 1] + J[i, k, 2] * force[i, 2]
                            + J[i, k, 3] * force[i, 3] + J[i, k, 4] * force[i, 4] + J[i, k, 5] * force[i, 5])
        lam = parent[i]
        if lam < 0:
            continue
        for r in range(6):
            force[lam, r] += force[i, r]
        if not about_world_origin:
            m0, m1, m2 = cross(world_p[i, 0] - world_p[lam, 0], world_p[i, 1] - world_p[lam, 1],
                               world_p[i, 2] - world_p[lam, 2], force[i, 3], force[i, 4], force[i, 5])
            force[lam, 0] += m0
            force[lam, 1] += m1
            force[lam, 2] += m2


# --- the three kernels -------------------------------------------------------


@njit(cache=True)
def rnea_kernel(packed, q, v, a, f_ext, tau, buffer):
    """tau = ID(q, v, a), body form; f_ext[i]: wrench on body i (body frame,
    about its origin), or none (0 rows).

    Written over scalars, body by body (F&O eqs. 1-8, MD eqs. 66-67):
        v_i = X v_λ + S qd,  a_i = X a_λ + S qdd + c_J + v_i x S qd,
        f_i = I a_i + v_i x* I v_i - f_ext_i,  tau_i = S^T f_i,  f_λ += X^T f_i.
    Returns INVALID_INPUT without computing (inputs.invalid), NONFINITE_RESULT
    when tau overflows, else 0.
    """
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, a):
        return INVALID_INPUT
    parent, v_start, nv_joint, gravity = arrays[0], arrays[3], arrays[13], arrays[14]
    n = parent.shape[0]
    R, p, S, RJ, _, _, o = kinematic_views(buffer, n)
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    force, o = take(buffer, o, (n, 6))
    forward_pass(arrays, q, R, p, S, RJ)
    for i in range(n):
        j0, j1, j2, j3, j4, j5 = body_velocity(arrays, i, R, p, S, v, vel)
        body_acceleration(arrays, i, R, p, S, v, a, vel, acc, j0, j1, j2, j3, j4, j5, gravity)
        n0, n1, n2, f0, f1, f2 = newton_euler(
            arrays[9], arrays[10], arrays[11], i, acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5],
            vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3], vel[i, 4], vel[i, 5])
        store_wrench(force, i, f_ext, n0, n1, n2, f0, f1, f2)
    for k in range(tau.shape[0]):
        tau[k] = 0.0
    for i in range(n - 1, -1, -1):
        v0 = v_start[i]
        for k in range(nv_joint[i]):
            t = 0.0
            for r in range(6):
                t += S[i, r, k] * force[i, r]
            tau[v0 + k] += t
        lam = parent[i]
        if lam >= 0:
            force_to_parent_add(R[i], p[i], force[i], force[lam])
    return 0 if all_finite(tau) else NONFINITE_RESULT


@njit(cache=True)
def rnea_spatial_kernel(packed, q, v, a, f_ext, tau, buffer):
    """tau = ID(q, v, a), spatial form (MD eqs. 70-71): twists V_i, accelerations
    dV_i, wrenches W_i and inertias M_i in world axes about the world origin;
    f_ext[i]: wrench on body i in world axes about the world origin, or none (0 rows).

        V_i = V_λ + J_i qd_i                           (70c, J_i = ^0X_i S_i: 70b)
        dV_i = dV_λ + J_i qdd_i + V_i x J_i qd_i        (70d, 69: dJ_i/dt = V_i x J_i,
               + [0; R_i c_J]                           and the planar joint's c_J)
        W_i = M_i dV_i - ad^T_{V_i} M_i V_i - W_i^app   (71a-b)
        tau_i = J_i^T W_i,  W_λ += W_i                  (71b-c, from i = n).
    Rounding grows with the square of the distance |r| from the world origin
    (the m |r|^2 in M_i): relative 1e-16 near it, 4e-13 at 100 m on TALOS.
    Returns INVALID_INPUT without computing (inputs.invalid), NONFINITE_RESULT
    when tau overflows, else 0.
    """
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, a):
        return INVALID_INPUT
    S, world_R, world_p, J, vel, acc, force, mass_w, first_moment_w, inertia_w, work = world_views(
        arrays, q, buffer, True)
    for i in range(arrays[0].shape[0]):
        pw0, pw1, pw2, pl0, pl1, pl2, aw0, aw1, aw2, al0, al1, al2, j0, j1, j2, j3, j4, j5, \
            b0, b1, b2, b3, b4, b5 = world_step(arrays, i, S, world_R, J, v, a, vel, acc, work)
        w0, w1, w2, l0, l1, l2 = pw0 + j0, pw1 + j1, pw2 + j2, pl0 + j3, pl1 + j4, pl2 + j5
        x = motion_cross(w0, w1, w2, l0, l1, l2, j0, j1, j2, j3, j4, j5)
        dw0, dw1, dw2 = aw0 + b0 + x[0], aw1 + b1 + x[1], aw2 + b2 + x[2]
        dl0, dl1, dl2 = al0 + b3 + x[3], al1 + b4 + x[4], al2 + b5 + x[5]
        vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3], vel[i, 4], vel[i, 5] = w0, w1, w2, l0, l1, l2
        acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5] = dw0, dw1, dw2, dl0, dl1, dl2
        n0, n1, n2, f0, f1, f2 = newton_euler(mass_w, first_moment_w, inertia_w, i, dw0, dw1, dw2, dl0, dl1, dl2,
                                              w0, w1, w2, l0, l1, l2)
        store_wrench(force, i, f_ext, n0, n1, n2, f0, f1, f2)
    world_backward_pass(arrays, J, world_p, force, True, tau)
    return 0 if all_finite(tau) else NONFINITE_RESULT


@njit(cache=True)
def rnea_hybrid_kernel(packed, q, v, a, f_ext, tau, buffer):
    """tau = ID(q, v, a), hybrid form (MD eqs. 72-76): twists V_i = [w_i; dr_i/dt],
    accelerations [dw_i/dt; d²r_i/dt²] and wrenches in world axes at body i's
    origin r_i; f_ext[i]: wrench on body i in world axes about r_i, or none (0 rows).
    With d = r_i - r_λ and the hybrid joint screws J_i = Ad_R_i S_i (75b):

        w_i = w_λ + Jw qd,  dr_i/dt = dr_λ/dt + w_λ x d + Jv qd      (75c)
        dw_i/dt = dw_λ/dt + Jw qdd + w_i x Jw qd                     (75d)
        d²r_i/dt² = d²r_λ/dt² + dw_λ/dt x d + w_λ x (dr_i/dt - dr_λ/dt)
                    + Jv qdd + w_i x Jv qd + R_i c_J                  (75d, 72)
        W_i = M^h_i dV_i + ad_w M^h_i [w_i; 0] - W_i^app              (76a-b)
        tau_i = J_i^T W_i,  W_λ += [n_i + d x f_i; f_i]              (76b-c, from i = n)
    (c_J: the planar joint's bias, joints.joint_bias_add.) Returns the status
    of rnea_kernel.
    """
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, a):
        return INVALID_INPUT
    parent = arrays[0]
    S, world_R, world_p, J, vel, acc, force, _, _, _, work = world_views(arrays, q, buffer, False)
    for i in range(parent.shape[0]):
        pw0, pw1, pw2, pr0, pr1, pr2, aw0, aw1, aw2, ar0, ar1, ar2, j0, j1, j2, j3, j4, j5, \
            b0, b1, b2, b3, b4, b5 = world_step(arrays, i, S, world_R, J, v, a, vel, acc, work)
        lam = parent[i]
        d0, d1, d2 = world_p[i, 0], world_p[i, 1], world_p[i, 2]
        if lam >= 0:
            d0, d1, d2 = d0 - world_p[lam, 0], d1 - world_p[lam, 1], d2 - world_p[lam, 2]
        w0, w1, w2 = pw0 + j0, pw1 + j1, pw2 + j2
        u0, u1, u2 = cross(pw0, pw1, pw2, d0, d1, d2)
        u0, u1, u2 = u0 + j3, u1 + j4, u2 + j5  # dr_i/dt - dr_λ/dt
        x0, x1, x2 = cross(w0, w1, w2, j0, j1, j2)
        dw0, dw1, dw2 = aw0 + b0 + x0, aw1 + b1 + x1, aw2 + b2 + x2
        x0, x1, x2 = cross(aw0, aw1, aw2, d0, d1, d2)
        y0, y1, y2 = cross(pw0, pw1, pw2, u0, u1, u2)
        z0, z1, z2 = cross(w0, w1, w2, j3, j4, j5)
        e0, e1, e2 = ar0 + x0 + y0 + b3 + z0, ar1 + x1 + y1 + b4 + z1, ar2 + x2 + y2 + b5 + z2
        vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3], vel[i, 4], vel[i, 5] = w0, w1, w2, pr0 + u0, pr1 + u1, pr2 + u2
        acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5] = dw0, dw1, dw2, e0, e1, e2
        n0, n1, n2, f0, f1, f2 = hybrid_wrench(arrays, i, world_R, w0, w1, w2, dw0, dw1, dw2, e0, e1, e2)
        store_wrench(force, i, f_ext, n0, n1, n2, f0, f1, f2)
    world_backward_pass(arrays, J, world_p, force, False, tau)
    return 0 if all_finite(tau) else NONFINITE_RESULT


# One batch kernel per form, not one that takes the form as an argument: that
# one compiled all three forms wherever one was used (the dynamics server's
# trajectories: some 20 s more of set-up).
@njit(cache=True, parallel=True)
def rnea_batch_kernel(packed, q, v, a, tau, status):
    """The body form (rnea_kernel) of each state of a batch, in parallel."""
    no_force = np.empty((0, 6))
    for b in prange(q.shape[0]):
        status[b] = rnea_kernel(packed, q[b], v[b], a[b], no_force, tau[b], new_scratch(packed[1][0]))


@njit(cache=True, parallel=True)
def rnea_spatial_batch_kernel(packed, q, v, a, tau, status):
    """The spatial form (rnea_spatial_kernel) of each state of a batch, in parallel."""
    no_force = np.empty((0, 6))
    for b in prange(q.shape[0]):
        status[b] = rnea_spatial_kernel(packed, q[b], v[b], a[b], no_force, tau[b], new_scratch(packed[1][0]))


@njit(cache=True, parallel=True)
def rnea_hybrid_batch_kernel(packed, q, v, a, tau, status):
    """The hybrid form (rnea_hybrid_kernel) of each state of a batch, in parallel."""
    no_force = np.empty((0, 6))
    for b in prange(q.shape[0]):
        status[b] = rnea_hybrid_kernel(packed, q[b], v[b], a[b], no_force, tau[b], new_scratch(packed[1][0]))


# --- the functions -----------------------------------------------------------

_NO_FORCE = np.empty((0, 6))
_KERNELS = (rnea_kernel, rnea_spatial_kernel, rnea_hybrid_kernel)  # by form number
_BATCH_KERNELS = (rnea_batch_kernel, rnea_spatial_batch_kernel, rnea_hybrid_batch_kernel)
_FORMS = {name: form for form, name in enumerate(RNEA_REPRESENTATIONS)}


def _form(representation) -> int:
    """The number of an RNEA form by its name (RNEA_REPRESENTATIONS)."""
    try:
        return _FORMS[representation]
    except (KeyError, TypeError):  # TypeError: unhashable
        raise ValueError(f"representation must be one of {', '.join(RNEA_REPRESENTATIONS)}, "
                         f"got {representation!r}") from None


def _rnea(model: Model, q, v, a, form: int, f_ext_bodies=_NO_FORCE, names=("v", "a")) -> np.ndarray:
    """RNEA of `form` on shaped inputs, one state or a batch; invalid values
    and overflows raise (inputs.refuse)."""
    if q.ndim == 2:
        tau = np.empty((q.shape[0], model.nv))
        status = np.empty(q.shape[0], dtype=np.int64)
        _BATCH_KERNELS[form](model.packed, q, v, a, tau, status)
        failed = status.any()
    else:
        tau = np.empty(model.nv)
        status = _KERNELS[form](model.packed, q, v, a, f_ext_bodies, tau, scratch(model))
        failed = status != 0
    if failed:
        inputs.refuse(model, status, "the inverse dynamics", q,
                      *((x, name) for x, name in zip((v, a), names, strict=True) if name))
    return tau


def inverse_dynamics(model: Model, q, v, a, f_ext=None,
                     representation: str = DEFAULT_RNEA_REPRESENTATION) -> np.ndarray:
    """tau = M(q) a + C(q, v) v + g(q) - sum_i J_i^T f_i (RNEA, O(n)).

    f_ext: {frame name: wrench [n; f]} applied by the environment ON the robot,
    in world-aligned axes about the frame's origin (the convention of
    contact forces, DESIGN.md §2). q, v, a may carry a leading batch dimension
    (then f_ext must be None). representation: the form the RNEA is computed
    in, one of RNEA_REPRESENTATIONS (body, spatial, hybrid: MD §4); all give the
    same torques, the default is the fastest.
    """
    form = _form(representation)
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    a = inputs.shaped(model, a, model.nv, "a")
    batch = inputs.same_batch(q, v, a)
    if f_ext:
        if batch:
            raise ValueError("f_ext is not supported with a batch of states")
        return _rnea(model, q, v, a, form,
                     external_wrenches_in_bodies(model, inputs.configuration(model, q), f_ext, representation))
    return _rnea(model, q, v, a, form)


def nonlinear_effects(model: Model, q, v, representation: str = DEFAULT_RNEA_REPRESENTATION) -> np.ndarray:
    """h(q, v) = C(q, v) v + g(q) = RNEA(q, v, 0), in `representation` (inverse_dynamics)."""
    form = _form(representation)
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    inputs.same_batch(q, v)
    return _rnea(model, q, v, np.zeros_like(v), form, names=("v", None))


def gravity_torques(model: Model, q, representation: str = DEFAULT_RNEA_REPRESENTATION) -> np.ndarray:
    """g(q) = RNEA(q, 0, 0), in `representation` (inverse_dynamics)."""
    form = _form(representation)
    q = inputs.shaped(model, q, model.nq, "q")
    zero = np.zeros(q.shape[:-1] + (model.nv,))
    return _rnea(model, q, zero, zero, form, names=(None, None))


def external_wrenches_in_bodies(model: Model, q, f_ext, representation: str = "body") -> np.ndarray:
    """{frame: world-aligned wrench about the frame origin} -> per-body wrenches
    (nbodies, 6) as the RNEA of `representation` takes them: about the body
    origin in body axes (body) or world axes (hybrid); about the world origin
    in world axes (spatial)."""
    world_R, world_p = body_poses(model, q)
    bodies = np.zeros((model.nbodies, 6))
    for name, wrench in f_ext.items():
        frame = model.frame(name)
        wrench = inputs.vector(model, wrench, 6, f"f_ext['{name}']", batch=False)
        if frame.body < 0:
            continue  # on a link fixed to the world: no joint feels it
        R = world_R[frame.body]
        arm = R @ frame.translation  # from the body origin to the frame origin, world axes
        if representation == "spatial":
            arm += world_p[frame.body]
        torque, force = wrench[:3] + np.cross(arm, wrench[3:]), wrench[3:]
        if representation == "body":
            torque, force = R.T @ torque, R.T @ force
        bodies[frame.body, :3] += torque
        bodies[frame.body, 3:] += force
    return bodies
