"""Inverse dynamics by the recursive Newton-Euler algorithm (F&O eqs. 1-8,
RBDL Alg. 1 with its misprint corrected: the bias acceleration includes
v_i x (S_i qd_i), as in RBDL Alg. 3). Body-frame form; gravity enters as the
acceleration -g of the world."""
import numpy as np
from numba import njit, prange

from mbs_dynamics import inputs
from mbs_dynamics.inputs import invalid
from mbs_dynamics.joints import body_acceleration, body_velocity, forward_pass
from mbs_dynamics.kinematics import body_poses
from mbs_dynamics.lie import skew
from mbs_dynamics.model import Model, unpack_model
from mbs_dynamics.spatial import force_to_parent_add, inertia_apply
from mbs_dynamics.workspace import kinematic_views, new_scratch, scratch, take


@njit(cache=True)
def rnea_kernel(packed, q, v, a, f_ext, tau, buffer):
    """tau = ID(q, v, a); f_ext[i]: wrench on body i (body frame, about its origin), or none (0 rows).

    Written over scalars, body by body (F&O eqs. 1-8):
        v_i = X v_λ + S qd,  a_i = X a_λ + S qdd + c_J + v_i x S qd,
        f_i = I a_i + v_i x* I v_i - f_ext_i,  tau_i = S^T f_i,  f_λ += X^T f_i.
    Returns 1 without computing when an input is invalid (inputs.invalid), else 0.
    """
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, a):
        return 1
    parent, v_start = arrays[0], arrays[3]
    mass, first_moment, rotational_inertia, nv_joint, gravity = arrays[9], arrays[10], arrays[11], arrays[13], \
        arrays[14]
    n = parent.shape[0]
    R, p, S, RJ, _, _, o = kinematic_views(buffer, n)
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    force, o = take(buffer, o, (n, 6))
    forward_pass(arrays, q, R, p, S, RJ)
    has_external = f_ext.shape[0] > 0
    for i in range(n):
        j0, j1, j2, j3, j4, j5 = body_velocity(arrays, i, R, p, S, v, vel)
        body_acceleration(arrays, i, R, p, S, v, a, vel, acc, j0, j1, j2, j3, j4, j5, gravity)
        w0, w1, w2, l0, l1, l2 = vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3], vel[i, 4], vel[i, 5]
        b0, b1, b2, b3, b4, b5 = acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5]
        # f = I a + v x* (I v)
        m, h, I_O = mass[i], first_moment[i], rotational_inertia[i]
        n0, n1, n2, f0, f1, f2 = inertia_apply(m, h[0], h[1], h[2], I_O, b0, b1, b2, b3, b4, b5)
        k0, k1, k2, g0, g1, g2 = inertia_apply(m, h[0], h[1], h[2], I_O, w0, w1, w2, l0, l1, l2)
        # v x* [k; g] = [w x k + l x g; w x g]
        force[i, 0] = n0 + w1 * k2 - w2 * k1 + l1 * g2 - l2 * g1
        force[i, 1] = n1 + w2 * k0 - w0 * k2 + l2 * g0 - l0 * g2
        force[i, 2] = n2 + w0 * k1 - w1 * k0 + l0 * g1 - l1 * g0
        force[i, 3] = f0 + w1 * g2 - w2 * g1
        force[i, 4] = f1 + w2 * g0 - w0 * g2
        force[i, 5] = f2 + w0 * g1 - w1 * g0
        if has_external:
            for r in range(6):
                force[i, r] -= f_ext[i, r]
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
    return 0


@njit(cache=True, parallel=True)
def rnea_batch_kernel(packed, q, v, a, tau, status):
    no_force = np.empty((0, 6))
    for b in prange(q.shape[0]):
        status[b] = rnea_kernel(packed, q[b], v[b], a[b], no_force, tau[b], new_scratch(packed[1][0]))


_NO_FORCE = np.empty((0, 6))


def _rnea(model: Model, q, v, a, f_ext_bodies=_NO_FORCE, names=("v", "a")) -> np.ndarray:
    """RNEA on shaped inputs, one state or a batch; invalid values raise (inputs.explain)."""
    if q.ndim == 2:
        tau = np.empty((q.shape[0], model.nv))
        status = np.empty(q.shape[0], dtype=np.int64)
        rnea_batch_kernel(model.packed, q, v, a, tau, status)
        failed = bool(status.any())
    else:
        tau = np.empty(model.nv)
        failed = rnea_kernel(model.packed, q, v, a, f_ext_bodies, tau, scratch(model))
    if failed:
        inputs.explain(model, q, *((x, name) for x, name in zip((v, a), names, strict=True) if name))
    return tau


def inverse_dynamics(model: Model, q, v, a, f_ext=None) -> np.ndarray:
    """tau = M(q) a + C(q, v) v + g(q) - sum_i J_i^T f_i (RNEA, O(n)).

    f_ext: {frame name: wrench [n; f]} applied by the environment ON the robot,
    in world-aligned axes about the frame's origin (the convention of
    contact forces, DESIGN.md §2). q, v, a may carry a leading batch dimension
    (then f_ext must be None).
    """
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    a = inputs.shaped(model, a, model.nv, "a")
    batch = inputs.same_batch(q, v, a)
    if f_ext:
        if batch:
            raise ValueError("f_ext is not supported with a batch of states")
        return _rnea(model, q, v, a, external_wrenches_in_bodies(model, inputs.configuration(model, q), f_ext))
    return _rnea(model, q, v, a)


def nonlinear_effects(model: Model, q, v) -> np.ndarray:
    """h(q, v) = C(q, v) v + g(q) = RNEA(q, v, 0)."""
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    inputs.same_batch(q, v)
    return _rnea(model, q, v, np.zeros_like(v), names=("v", None))


def gravity_torques(model: Model, q) -> np.ndarray:
    """g(q) = RNEA(q, 0, 0)."""
    q = inputs.shaped(model, q, model.nq, "q")
    zero = np.zeros(q.shape[:-1] + (model.nv,))
    return _rnea(model, q, zero, zero, names=(None, None))


def external_wrenches_in_bodies(model: Model, q, f_ext) -> np.ndarray:
    """{frame: world-aligned wrench about the frame origin} -> per-body wrenches
    about the body origin in body axes, (nbodies, 6)."""
    world_R, world_p = body_poses(model, q)
    bodies = np.zeros((model.nbodies, 6))
    for name, wrench in f_ext.items():
        frame = model.frame(name)
        wrench = inputs.vector(model, wrench, 6, f"f_ext['{name}']", batch=False)
        if frame.body < 0:
            continue  # on a link fixed to the world: no joint feels it
        R = world_R[frame.body]
        torque, force = R.T @ wrench[:3], R.T @ wrench[3:]
        bodies[frame.body, :3] += torque + skew(frame.translation) @ force
        bodies[frame.body, 3:] += force
    return bodies
