"""Inverse dynamics by the recursive Newton-Euler algorithm (F&O eqs. 1-8,
RBDL Alg. 1 with its misprint corrected: the bias acceleration includes
v_i x (S_i qd_i), as in RBDL Alg. 3). Body-frame form; gravity enters as the
acceleration -g of the world."""
import numpy as np
from numba import njit, prange

from mbs_dynamics import inputs
from mbs_dynamics.inputs import invalid
from mbs_dynamics.joints import forward_pass, joint_bias_add
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
    parent, kind, v_start = arrays[0], arrays[1], arrays[3]
    mass, first_moment, rotational_inertia, nv_joint, gravity = arrays[9], arrays[10], arrays[11], arrays[13], \
        arrays[14]
    n = parent.shape[0]
    R, p, S, RJ, _, _, o = kinematic_views(buffer, n)
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    force, o = take(buffer, o, (n, 6))
    vJ, o = take(buffer, o, (6,))
    forward_pass(arrays, q, R, p, S, RJ)
    has_external = f_ext.shape[0] > 0
    for i in range(n):
        lam = parent[i]
        if lam < 0:  # the world: at rest, accelerating at -g
            pw0 = pw1 = pw2 = pv0 = pv1 = pv2 = 0.0
            aw0 = aw1 = aw2 = 0.0
            av0, av1, av2 = -gravity[0], -gravity[1], -gravity[2]
        else:
            pw0, pw1, pw2, pv0, pv1, pv2 = vel[lam, 0], vel[lam, 1], vel[lam, 2], vel[lam, 3], vel[lam, 4], vel[lam, 5]
            aw0, aw1, aw2, av0, av1, av2 = acc[lam, 0], acc[lam, 1], acc[lam, 2], acc[lam, 3], acc[lam, 4], acc[lam, 5]
        # child <- parent: [R^T w; R^T (v - p x w)]
        x, y, z = p[i, 0], p[i, 1], p[i, 2]
        t0, t1, t2 = pv0 - (y * pw2 - z * pw1), pv1 - (z * pw0 - x * pw2), pv2 - (x * pw1 - y * pw0)
        u0, u1, u2 = av0 - (y * aw2 - z * aw1), av1 - (z * aw0 - x * aw2), av2 - (x * aw1 - y * aw0)
        for k in range(3):
            r0, r1, r2 = R[i, 0, k], R[i, 1, k], R[i, 2, k]
            vel[i, k] = r0 * pw0 + r1 * pw1 + r2 * pw2
            vel[i, 3 + k] = r0 * t0 + r1 * t1 + r2 * t2
            acc[i, k] = r0 * aw0 + r1 * aw1 + r2 * aw2
            acc[i, 3 + k] = r0 * u0 + r1 * u1 + r2 * u2
        v0 = v_start[i]
        if nv_joint[i] == 1:
            qd, qdd = v[v0], a[v0]
            for r in range(6):
                s_r = S[i, r, 0]
                vJ[r] = s_r * qd
                vel[i, r] += s_r * qd
                acc[i, r] += s_r * qdd
        else:
            for r in range(6):
                s_v = 0.0
                s_a = 0.0
                for k in range(nv_joint[i]):
                    s_v += S[i, r, k] * v[v0 + k]
                    s_a += S[i, r, k] * a[v0 + k]
                vJ[r] = s_v
                vel[i, r] += s_v
                acc[i, r] += s_a
            joint_bias_add(kind[i], arrays[7][i], S[i], v, v0, acc[i])
        w0, w1, w2, l0, l1, l2 = vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3], vel[i, 4], vel[i, 5]
        j0, j1, j2, j3, j4, j5 = vJ[0], vJ[1], vJ[2], vJ[3], vJ[4], vJ[5]
        # a += v x vJ = [w x jw; w x jv + l x jw]
        b0 = acc[i, 0] + w1 * j2 - w2 * j1
        b1 = acc[i, 1] + w2 * j0 - w0 * j2
        b2 = acc[i, 2] + w0 * j1 - w1 * j0
        b3 = acc[i, 3] + w1 * j5 - w2 * j4 + l1 * j2 - l2 * j1
        b4 = acc[i, 4] + w2 * j3 - w0 * j5 + l2 * j0 - l0 * j2
        b5 = acc[i, 5] + w0 * j4 - w1 * j3 + l0 * j1 - l1 * j0
        acc[i, 0], acc[i, 1], acc[i, 2], acc[i, 3], acc[i, 4], acc[i, 5] = b0, b1, b2, b3, b4, b5
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
    from mbs_dynamics.kinematics import body_poses

    world_R, world_p = body_poses(model, q)
    bodies = np.zeros((model.nbodies, 6))
    for name, wrench in f_ext.items():
        frame = model.frame(name)
        wrench = inputs.vector(model, wrench, 6, f"f_ext['{name}']", batch=False)
        if frame.body < 0:
            continue  # on a link fixed to the world: no joint feels it
        R = world_R[frame.body]
        torque, force = R.T @ wrench[:3], R.T @ wrench[3:]
        bodies[frame.body, :3] += torque + np.cross(frame.translation, force)
        bodies[frame.body, 3:] += force
    return bodies
