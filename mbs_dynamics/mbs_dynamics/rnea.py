"""Inverse dynamics by the recursive Newton-Euler algorithm (F&O eqs. 1-8,
RBDL Alg. 1 with its misprint corrected: the bias acceleration includes
v_i x (S_i qd_i), as in RBDL Alg. 3). Body-frame form; gravity enters as the
acceleration -g of the world."""
import numpy as np
from numba import njit, prange

from mbs_dynamics import inputs
from mbs_dynamics.joints import forward_pass, joint_bias_add
from mbs_dynamics.kinematics import Workspace
from mbs_dynamics.model import Model
from mbs_dynamics.spatial import (
    cross_force_add,
    cross_motion_add,
    force_to_parent_add,
    inertia_times_motion,
    motion_to_child,
)


@njit(cache=True)
def rnea_kernel(arrays, gravity, q, v, a, f_ext, tau, R, p, S, nv_joint, RJ, vel, acc, force, tmp):
    """tau = ID(q, v, a); f_ext[i]: wrench on body i (body frame, about its origin), or none (0 rows)."""
    parent, kind, v_start = arrays[0], arrays[1], arrays[3]
    mass, first_moment, rotational_inertia = arrays[9], arrays[10], arrays[11]
    forward_pass(arrays, q, R, p, S, nv_joint, RJ)
    n = parent.shape[0]
    # tmp[0] = 0 (the world's velocity), tmp[1] = -g (the world's acceleration), tmp[2] = v_J, tmp[3] = I v
    for k in range(6):
        tmp[0, k] = 0.0
        tmp[1, k] = 0.0
    tmp[1, 3], tmp[1, 4], tmp[1, 5] = -gravity[0], -gravity[1], -gravity[2]
    for i in range(n):
        lam = parent[i]
        v0 = v_start[i]
        if lam < 0:
            motion_to_child(R[i], p[i], tmp[0], vel[i])
            motion_to_child(R[i], p[i], tmp[1], acc[i])
        else:
            motion_to_child(R[i], p[i], vel[lam], vel[i])
            motion_to_child(R[i], p[i], acc[lam], acc[i])
        vJ = tmp[2]
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
        cross_motion_add(vel[i], vJ, acc[i])
        inertia_times_motion(mass[i], first_moment[i], rotational_inertia[i], acc[i], force[i])
        inertia_times_motion(mass[i], first_moment[i], rotational_inertia[i], vel[i], tmp[3])
        cross_force_add(vel[i], tmp[3], force[i])
        if f_ext.shape[0] > 0:
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


@njit(cache=True, parallel=True)
def rnea_batch_kernel(arrays, gravity, q, v, a, tau):
    n = arrays[0].shape[0]
    no_force = np.empty((0, 6))
    for b in prange(q.shape[0]):
        R = np.empty((n, 3, 3))
        p = np.empty((n, 3))
        S = np.empty((n, 6, 6))
        nv_joint = np.empty(n, dtype=np.int64)
        RJ = np.empty((3, 3))
        vel = np.empty((n, 6))
        acc = np.empty((n, 6))
        force = np.empty((n, 6))
        tmp = np.empty((4, 6))
        rnea_kernel(arrays, gravity, q[b], v[b], a[b], no_force, tau[b], R, p, S, nv_joint, RJ,
                    vel, acc, force, tmp)


class RneaWorkspace(Workspace):
    def __init__(self, model: Model):
        super().__init__(model)
        n = model.nbodies
        self.vel = np.empty((n, 6))
        self.acc = np.empty((n, 6))
        self.force = np.empty((n, 6))
        self.tmp = np.empty((4, 6))


_NO_FORCE = np.empty((0, 6))


def _rnea(model: Model, q, v, a, f_ext_bodies=_NO_FORCE, gravity=None) -> np.ndarray:
    """RNEA on checked inputs, one state or a batch."""
    gravity = model.gravity if gravity is None else gravity
    if q.ndim == 2:
        tau = np.empty((q.shape[0], model.nv))
        rnea_batch_kernel(model.arrays, gravity, q, v, a, tau)
        return tau
    w = RneaWorkspace.of(model)
    tau = np.empty(model.nv)
    rnea_kernel(model.arrays, gravity, q, v, a, f_ext_bodies, tau, w.R, w.p, w.S, w.nv_joint, w.RJ,
                w.vel, w.acc, w.force, w.tmp)
    return tau


def inverse_dynamics(model: Model, q, v, a, f_ext=None) -> np.ndarray:
    """tau = M(q) a + C(q, v) v + g(q) - sum_i J_i^T f_i (RNEA, O(n)).

    f_ext: {frame name: wrench [n; f]} applied by the environment ON the robot,
    in world-aligned axes about the frame's origin (the convention of
    contact forces, DESIGN.md §2). q, v, a may carry a leading batch dimension
    (then f_ext must be None).
    """
    q = inputs.configuration(model, q)
    v = inputs.vector(model, v, model.nv, "v")
    a = inputs.vector(model, a, model.nv, "a")
    batch = inputs.same_batch(q, v, a)
    if f_ext:
        if batch:
            raise ValueError("f_ext is not supported with a batch of states")
        return _rnea(model, q, v, a, external_wrenches_in_bodies(model, q, f_ext))
    return _rnea(model, q, v, a)


def nonlinear_effects(model: Model, q, v) -> np.ndarray:
    """h(q, v) = C(q, v) v + g(q) = RNEA(q, v, 0)."""
    q = inputs.configuration(model, q)
    v = inputs.vector(model, v, model.nv, "v")
    inputs.same_batch(q, v)
    return _rnea(model, q, v, np.zeros_like(v))


def gravity_torques(model: Model, q) -> np.ndarray:
    """g(q) = RNEA(q, 0, 0)."""
    q = inputs.configuration(model, q)
    zero = np.zeros(q.shape[:-1] + (model.nv,))
    return _rnea(model, q, zero, zero)


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
