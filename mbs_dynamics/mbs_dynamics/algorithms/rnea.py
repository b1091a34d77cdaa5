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
from collections import namedtuple

import numpy as np
from numba import njit, types

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.crba import world_body_inertias, world_motion_subspaces
from mbs_dynamics.algorithms.kinematics import body_poses, body_poses_kernel
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, PACKED_FLAT, RESULT, VECTOR, ExactKernel, all_finite, \
    invalid, vectors_fit
from mbs_dynamics.multibody.joints import (
    REST,
    body_acceleration,
    body_velocity,
    forward_pass,
    gravity_acceleration,
    joint_bias,
    parent_row,
)
from mbs_dynamics.multibody.model import Model, body_count, unflatten, unpack_model
from mbs_dynamics.multibody.workspace import kinematic_views, new_scratch, readonly, scratch, take, untracked_views
from mbs_dynamics.parallel import run_batch
from mbs_dynamics.spatial.algebra import (
    add,
    add3,
    cross,
    force_to_parent,
    motion_cross,
    newton_euler,
    rotate,
    rotate_back,
    row,
    store,
    store_add,
)

# The forms, in the order of their numbers (_KERNELS, _BATCH_KERNELS).
RNEA_REPRESENTATIONS = ("body", "spatial", "hybrid")
BODY, SPATIAL, HYBRID = range(3)
# The fastest form on TALOS in benchmarks/core.py (rows "inverse_dynamics body/spatial/hybrid"; it says which).
DEFAULT_RNEA_REPRESENTATION = "body"


# --- pieces of the three forms ----------------------------------------------

# The world forms' layout of the scratch buffer (world_views).
WorldViews = namedtuple("WorldViews", (
    "S", "world_R", "world_p", "J", "vel", "acc", "force", "mass_w", "first_moment_w", "inertia_w"))


@njit(cache=True, inline="always")
def store_wrench(force, i, f_ext, f_i):
    """force[i] = f_i - f_ext[i]: the applied wrench enters with a minus sign
    (MD eqs. 67a, 71b, 76b; DESIGN.md §7, misprint 9). f_ext with no rows: none."""
    store(force, i, f_i)
    if f_ext.shape[0] > 0:
        for r in range(6):
            force[i, r] -= f_ext[i, r]


@njit(cache=True, inline="always")
def screw_times(J, i, nv, x, start):
    """J_i x[start:start + nv] for joint screws stored by column, J[i, k] (the
    layout of crba.world_motion_subspaces), a 6-tuple."""
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
def world_joint_acceleration(model, i, views, v, a):
    """J_i qdd_i + d(J_i)/dt qd_i beyond the bracket with the twist: the planar
    joint's c_J (joints.joint_bias), a pure linear motion vector, turned to
    world axes (R_i c_J, the same about any point)."""
    nv, v0 = model.nv_joint[i], model.v_start[i]
    b = screw_times(views.J, i, nv, a, v0)
    if nv == 1:
        return b
    c = joint_bias(model, i, views.S, v)
    l0, l1, l2 = rotate(views.world_R, i, (c[3], c[4], c[5]))
    return b[0], b[1], b[2], b[3] + l0, b[4] + l1, b[5] + l2


@njit(cache=True, inline="always")
def world_views(packed, q, buffer, about_world_origin):
    """The world forms' layout of the scratch buffer (WorldViews), filled from q:
    world placements (kinematics.body_poses_kernel) and the joint screws
    J_i = ^0X_i S_i (crba.world_motion_subspaces) about the world origin
    (spatial, MD eq. 70b), with each body's inertia M^s_i about it
    (crba.world_body_inertias, 71a); or, with about_world_origin False, the
    screws about each body's origin: the rotation alone, Ad_R_i S_i (hybrid, MD
    eq. 75b). The twists, accelerations and wrenches are left to the kernel."""
    model = unpack_model(packed)
    n = model.parent.shape[0]
    kinematics, o = kinematic_views(buffer, n)
    J, o = take(buffer, o, (n, 6, 6))
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    force, o = take(buffer, o, (n, 6))
    mass_w, o = take(buffer, o, (n,))
    first_moment_w, o = take(buffer, o, (n, 3))
    inertia_w, o = take(buffer, o, (n, 3, 3))
    no_offset, o = take(buffer, o, (n, 3))
    world_R, world_p = kinematics.world_R, kinematics.world_p
    body_poses_kernel(packed, q, kinematics.R, kinematics.p, kinematics.S, world_R, world_p)
    if about_world_origin:
        world_motion_subspaces(packed, kinematics.S, world_R, world_p, J)
        world_body_inertias(packed, world_R, world_p, mass_w, first_moment_w, inertia_w)
    else:
        no_offset[:] = 0.0
        world_motion_subspaces(packed, kinematics.S, world_R, no_offset, J)
    return WorldViews(kinematics.S, world_R, world_p, J, vel, acc, force, mass_w, first_moment_w, inertia_w)


@njit(cache=True, inline="always")
def body_motion_views(packed, q, buffer):
    """The body form's layout of the scratch buffer: the joint placements R, p
    and subspaces S at q (joints.forward_pass), and the arrays of the body
    twists vel and accelerations acc; then the offset where the caller's own
    arrays begin."""
    n = body_count(packed)
    kinematics, o = kinematic_views(buffer, n)
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    forward_pass(packed, q, kinematics.R, kinematics.p, kinematics.S)
    return kinematics.R, kinematics.p, kinematics.S, vel, acc, o


@njit(cache=True, inline="always")
def pass_body_twists(buffer, n):
    """The body twists vel (n, 6) a body form's pass at q and v left in
    `buffer` (body_motion_views' layout): valid until the buffer is used again."""
    _, o = kinematic_views(buffer, n)
    vel, _ = take(buffer, o, (n, 6))
    return vel


@njit(cache=True, inline="always")
def add_armature(model, a, tau):
    """tau += armature a: the rotors' inertia on their coordinates (model.armature)."""
    for k in range(tau.shape[0]):
        tau[k] += model.armature[k] * a[k]


@njit(cache=True, inline="always")
def world_backward_pass(model, views, about_world_origin, tau):
    """From i = n down (W_{n+1} = 0: DESIGN.md §7, misprint 9): tau_i = J_i^T W_i
    (MD eqs. 71c, 76c) and W_λ += W_i: as it is about the world origin (spatial,
    71b), or with its moment taken about λ's origin, [n + (r_i - r_λ) x f; f]
    (hybrid, Ad^T_d of 76b, a translation)."""
    J, world_p, force = views.J, views.world_p, views.force
    for k in range(tau.shape[0]):
        tau[k] = 0.0
    for i in range(model.parent.shape[0] - 1, -1, -1):
        v0 = model.v_start[i]
        for k in range(model.nv_joint[i]):
            tau[v0 + k] += (J[i, k, 0] * force[i, 0] + J[i, k, 1] * force[i, 1] + J[i, k, 2] * force[i, 2]
                            + J[i, k, 3] * force[i, 3] + J[i, k, 4] * force[i, 4] + J[i, k, 5] * force[i, 5])
        lam = model.parent[i]
        if lam < 0:
            continue
        store_add(force, lam, row(force, i))
        if not about_world_origin:
            d = (world_p[i, 0] - world_p[lam, 0], world_p[i, 1] - world_p[lam, 1], world_p[i, 2] - world_p[lam, 2])
            moment = cross(d, (force[i, 3], force[i, 4], force[i, 5]))
            for r in range(3):
                force[lam, r] += moment[r]


# --- the three kernels -------------------------------------------------------


@njit(cache=True, inline="always")
def body_form_pass(packed, q, v, a, f_ext, tau, buffer):
    """The body form's passes (rnea_kernel) on valid inputs: tau, and the view
    `force` (n, 6) of the buffer, f_i after the backward pass: the wrench the
    parent applies to body i through its joint (body frame, about its
    origin), which carries i's subtree."""
    model = unpack_model(packed)
    n = model.parent.shape[0]
    R, p, S, vel, acc, o = body_motion_views(packed, q, buffer)
    force, o = take(buffer, o, (n, 6))
    for i in range(n):
        v_i, vJ = body_velocity(model, i, R, p, S, v, vel)
        a_i = body_acceleration(model, i, R, p, S, v, a, acc, v_i, vJ, model.gravity)
        store_wrench(force, i, f_ext, newton_euler(model.mass, model.first_moment, model.rotational_inertia, i,
                                                   a_i, v_i))
    for k in range(tau.shape[0]):
        tau[k] = 0.0
    for i in range(n - 1, -1, -1):
        v0 = model.v_start[i]
        for k in range(model.nv_joint[i]):
            t = 0.0
            for r in range(6):
                t += S[i, r, k] * force[i, r]
            tau[v0 + k] += t
        lam = model.parent[i]
        if lam >= 0:
            store_add(force, lam, force_to_parent(R, p, i, row(force, i)))
    add_armature(model, a, tau)
    return force


@njit(cache=True)
def rnea_kernel(packed, q, v, a, f_ext, tau, buffer):
    """tau = ID(q, v, a), body form; f_ext[i]: wrench on body i (body frame,
    about its origin), or none (0 rows). Body by body (F&O eqs. 1-8, MD eqs.
    66-67; spatial_v2's ID):
        v_i = ^iX_λ v_λ + S qd,  a_i = ^iX_λ a_λ + S qdd + c_J + v_i x S qd,
        f_i = I a_i + v_i x* I v_i - f_ext_i,  tau_i = S^T f_i,  f_λ += ^λX_i^* f_i.
    Returns INVALID_INPUT without computing (inputs.invalid), NONFINITE_RESULT
    when tau overflows, else 0.
    """
    model = unpack_model(packed)
    if invalid(model, q, v, a):
        return INVALID_INPUT
    body_form_pass(packed, q, v, a, f_ext, tau, buffer)
    return 0 if all_finite(tau) else NONFINITE_RESULT


@njit(cache=True)
def joint_wrenches_kernel(packed, q, v, a, f_ext, wrenches, buffer):
    """wrenches (n, 6) = f_i of the RNEA (body_form_pass): what each joint
    transmits to its child body, [torque; force] in the child's frame about its
    origin. Returns the status of rnea_kernel."""
    model = unpack_model(packed)
    if invalid(model, q, v, a):
        return INVALID_INPUT
    force = body_form_pass(packed, q, v, a, f_ext, np.empty(v.shape[0]), buffer)
    wrenches[:] = force
    return 0 if all_finite(wrenches) else NONFINITE_RESULT


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
    model = unpack_model(packed)
    if invalid(model, q, v, a):
        return INVALID_INPUT
    views = world_views(packed, q, buffer, True)
    vel, acc = views.vel, views.acc
    gravity = gravity_acceleration(model.gravity)
    for i in range(model.parent.shape[0]):
        lam = model.parent[i]
        vJ = screw_times(views.J, i, model.nv_joint[i], v, model.v_start[i])
        V_i = add(parent_row(vel, lam, REST), vJ)
        dV_i = add(add(parent_row(acc, lam, gravity), world_joint_acceleration(model, i, views, v, a)),
                   motion_cross(V_i, vJ))
        store(vel, i, V_i)
        store(acc, i, dV_i)
        store_wrench(views.force, i, f_ext, newton_euler(views.mass_w, views.first_moment_w, views.inertia_w, i,
                                                         dV_i, V_i))
    world_backward_pass(model, views, True, tau)
    add_armature(model, a, tau)
    return 0 if all_finite(tau) else NONFINITE_RESULT


@njit(cache=True, inline="always")
def hybrid_wrench(model, i, world_R, w, dw, e):
    """W^h = M^h dV^h + ad_w M^h [w; 0] (MD eqs. 53, 76b): body i's wrench [n; f]
    in world axes about its origin r, from its angular velocity w, angular
    acceleration dw and the acceleration e = d²r/dt² of r, all in world axes.
    M^h = Ad_R^-T M^b Ad_R^-1 (76a) is applied, not formed: the vectors are
    rotated into the body, newton_euler there with v = [R^T w; 0], and back."""
    f = newton_euler(model.mass, model.first_moment, model.rotational_inertia, i,
                     rotate_back(world_R, i, dw) + rotate_back(world_R, i, e),
                     rotate_back(world_R, i, w) + (0.0, 0.0, 0.0))
    return rotate(world_R, i, (f[0], f[1], f[2])) + rotate(world_R, i, (f[3], f[4], f[5]))


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
    (c_J: the planar joint's bias, joints.joint_bias.) Returns the status of
    rnea_kernel.
    """
    model = unpack_model(packed)
    if invalid(model, q, v, a):
        return INVALID_INPUT
    views = world_views(packed, q, buffer, False)
    vel, acc, world_p = views.vel, views.acc, views.world_p
    gravity = gravity_acceleration(model.gravity)
    for i in range(model.parent.shape[0]):
        lam = model.parent[i]
        V, dV = parent_row(vel, lam, REST), parent_row(acc, lam, gravity)
        w_parent, r_parent, dw_parent, e_parent = V[:3], V[3:], dV[:3], dV[3:]
        j = screw_times(views.J, i, model.nv_joint[i], v, model.v_start[i])
        b = world_joint_acceleration(model, i, views, v, a)
        d = (world_p[i, 0], world_p[i, 1], world_p[i, 2])
        if lam >= 0:
            d = (d[0] - world_p[lam, 0], d[1] - world_p[lam, 1], d[2] - world_p[lam, 2])
        w = add3(w_parent, j[:3])
        u = add3(cross(w_parent, d), j[3:])  # dr_i/dt - dr_λ/dt
        dw = add3(add3(dw_parent, b[:3]), cross(w, j[:3]))
        e = add3(add3(add3(e_parent, cross(dw_parent, d)), add3(cross(w_parent, u), b[3:])), cross(w, j[3:]))
        store(vel, i, w + add3(r_parent, u))
        store(acc, i, dw + e)
        store_wrench(views.force, i, f_ext, hybrid_wrench(model, i, views.world_R, w, dw, e))
    world_backward_pass(model, views, False, tau)
    add_armature(model, a, tau)
    return 0 if all_finite(tau) else NONFINITE_RESULT


# One batch kernel per form, not one that takes the form as an argument: that
# one compiled all three forms wherever one was used (the dynamics server's
# trajectories: some 20 s more of set-up). parallel.run_batch runs slices of a
# batch on every core.
@njit(cache=True, nogil=True)
def rnea_batch_kernel(packed, q, v, a, tau, status):
    """The body form (rnea_kernel) of each state of a batch."""
    no_force, buffer = np.empty((0, 6)), new_scratch(body_count(packed))
    for b in range(q.shape[0]):
        # each state typed read-only, as a single one is (_inverse_dynamics_call): one compiled RNEA for both
        status[b] = rnea_kernel(packed, readonly(q[b]), readonly(v[b]), readonly(a[b]), no_force, tau[b], buffer)


@njit(cache=True, nogil=True)
def rnea_spatial_batch_kernel(packed, q, v, a, tau, status):
    """The spatial form (rnea_spatial_kernel) of each state of a batch."""
    no_force, buffer = np.empty((0, 6)), new_scratch(body_count(packed))
    for b in range(q.shape[0]):
        status[b] = rnea_spatial_kernel(packed, readonly(q[b]), readonly(v[b]), readonly(a[b]), no_force, tau[b],
                                        buffer)


@njit(cache=True, nogil=True)
def rnea_hybrid_batch_kernel(packed, q, v, a, tau, status):
    """The hybrid form (rnea_hybrid_kernel) of each state of a batch."""
    no_force, buffer = np.empty((0, 6)), new_scratch(body_count(packed))
    for b in range(q.shape[0]):
        status[b] = rnea_hybrid_kernel(packed, readonly(q[b]), readonly(v[b]), readonly(a[b]), no_force, tau[b],
                                       buffer)


# --- one state from Python (inputs.ExactKernel) ---------------------------------


def _inverse_dynamics_call(flat, q, v, a, tau):
    """rnea_kernel, body form, no applied wrench, on model.packed_flat and a
    scratch buffer of its own: inverse_dynamics' fast path. Wrong lengths:
    INVALID_INPUT."""
    flat, q, v, a, tau = untracked_views((flat, q, v, a, tau))  # borrowed (inputs.ExactKernel): plain arrays
    packed = unflatten(flat)
    if not vectors_fit(packed[1], q, v, a):
        return INVALID_INPUT
    buffer = new_scratch(body_count(packed))
    return rnea_kernel(packed, q, v, a, take(buffer, 0, (0, 6))[0], tau, buffer)


def _nonlinear_effects_call(flat, q, v, tau):
    """_inverse_dynamics_call at a = 0: nonlinear_effects' fast path."""
    flat, q, v, tau = untracked_views((flat, q, v, tau))
    packed = unflatten(flat)
    if not vectors_fit(packed[1], q, v, v):
        return INVALID_INPUT
    buffer = new_scratch(body_count(packed))
    zero, _ = take(buffer, buffer.shape[0] - v.shape[0], (v.shape[0],))  # past the RNEA's layout
    zero[:] = 0.0
    return rnea_kernel(packed, q, v, readonly(zero), take(buffer, 0, (0, 6))[0], tau, buffer)


_INVERSE_DYNAMICS = ExactKernel(_inverse_dynamics_call, types.int64, PACKED_FLAT, VECTOR, VECTOR, VECTOR, RESULT)
_NONLINEAR_EFFECTS = ExactKernel(_nonlinear_effects_call, types.int64, PACKED_FLAT, VECTOR, VECTOR, RESULT)


# --- the functions -----------------------------------------------------------

_NO_FORCE = np.empty((0, 6))
_empty = np.empty  # a global, not an attribute of np: 20 ns a call
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


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view of `array` (the caller's array stays writable)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _rnea(model: Model, q, v, a, form: int, f_ext_bodies=_NO_FORCE, names=("v", "a")) -> np.ndarray:
    """RNEA of `form` on shaped inputs, one state or a batch; invalid values
    and overflows raise (inputs.refuse)."""
    if q.ndim == 2:
        tau = np.empty((q.shape[0], model.nv))
        status = np.empty(q.shape[0], dtype=np.int64)
        run_batch(_BATCH_KERNELS[form], (model.packed,), (q, v, a, tau, status), model.nbodies)
        failed = status.any()
    else:
        tau = np.empty(model.nv)
        # q, v, a as read-only views: the types of the fast paths' and the batches' calls (one compiled RNEA:
        # the writable one cost the warm-up's inverse dynamics task 7 CPU-s)
        status = _KERNELS[form](model.packed, _read_only(q), _read_only(v), _read_only(a), f_ext_bodies, tau,
                                scratch(model))
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
    if f_ext is None and representation == "body":
        tau = _empty(model.nv)
        try:
            if not _INVERSE_DYNAMICS.call(model.packed_flat, q, v, a, tau):
                return tau
        except TypeError:  # not arrays of float64: the checked path converts them
            pass
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
    if representation == "body":
        tau = _empty(model.nv)
        try:
            if not _NONLINEAR_EFFECTS.call(model.packed_flat, q, v, tau):
                return tau
        except TypeError:
            pass
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
