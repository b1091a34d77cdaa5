"""Centre of mass and centroidal momentum (RBDL §6.5): the spatial momentum
of all bodies, h_O = sum_i ^0X*_i I_i v_i, taken about the centre of mass with
the force transform, k_G = k_O - c x l (not the motion transform), in
world-aligned axes; and A_G(q) with h_G = A_G v, built in O(n) from the
composite inertias of the CRBA."""
import numpy as np
from numba import njit, prange

from mbs_dynamics import inputs
from mbs_dynamics.inputs import invalid
from mbs_dynamics.crba import CrbaWorkspace, composite_inertias
from mbs_dynamics.kinematics import body_poses_kernel
from mbs_dynamics.model import Model
from mbs_dynamics.spatial import force_to_parent_add, inertia_times_motion, motion_to_child


@njit(cache=True)
def momentum_kernel(arrays, q, v, R, p, S, nv_joint, RJ, world_R, world_p, vel, tmp, out):
    """out[0:6] = h_O = [k_O; l] (world axes, about the world origin); out[6:9] = m c.
    Returns 1 without computing when q or v is invalid (inputs.invalid), else 0."""
    if invalid(arrays, q, v, v[:0]):
        return 1
    parent, v_start = arrays[0], arrays[3]
    mass, first_moment, rotational_inertia = arrays[9], arrays[10], arrays[11]
    body_poses_kernel(arrays, q, R, p, S, nv_joint, RJ, world_R, world_p)
    for k in range(9):
        out[k] = 0.0
    for r in range(6):
        tmp[0, r] = 0.0
    for i in range(parent.shape[0]):
        lam = parent[i]
        motion_to_child(R[i], p[i], tmp[0] if lam < 0 else vel[lam], vel[i])
        for r in range(6):
            for k in range(nv_joint[i]):
                vel[i, r] += S[i, r, k] * v[v_start[i] + k]
        inertia_times_motion(mass[i], first_moment[i], rotational_inertia[i], vel[i], tmp[1])
        force_to_parent_add(world_R[i], world_p[i], tmp[1], out)
        for r in range(3):
            out[6 + r] += mass[i] * world_p[i, r] + (world_R[i, r, 0] * first_moment[i, 0]
                                                     + world_R[i, r, 1] * first_moment[i, 1]
                                                     + world_R[i, r, 2] * first_moment[i, 2])
    return 0


@njit(cache=True)
def momentum_matrix_kernel(arrays, q, A, R, p, S, nv_joint, RJ, world_R, world_p, composite, work):
    """A = A_O: column j is the momentum, about the world origin, of the bodies
    moved by coordinate j at unit speed: ^0X*_i I^C_i S_i."""
    parent, v_start = arrays[0], arrays[3]
    body_poses_kernel(arrays, q, R, p, S, nv_joint, RJ, world_R, world_p)
    composite_inertias(arrays, R, p, composite, work)
    for r in range(6):
        for c in range(A.shape[1]):
            A[r, c] = 0.0
    for i in range(parent.shape[0]):
        for k in range(nv_joint[i]):
            for r in range(6):
                acc = 0.0
                for c in range(6):
                    acc += composite[i, r, c] * S[i, c, k]
                work[0, r] = acc
                work[1, r] = 0.0
            force_to_parent_add(world_R[i], world_p[i], work[0], work[1])
            for r in range(6):
                A[r, v_start[i] + k] += work[1, r]


@njit(cache=True, parallel=True)
def momentum_batch_kernel(arrays, q, v, out, status):
    n = arrays[0].shape[0]
    for b in prange(q.shape[0]):
        status[b] = momentum_kernel(arrays, q[b], v[b], np.empty((n, 3, 3)), np.empty((n, 3)), np.empty((n, 6, 6)),
                        np.empty(n, dtype=np.int64), np.empty((3, 3)), np.empty((n, 3, 3)), np.empty((n, 3)),
                        np.empty((n, 6)), np.empty((2, 6)), out[b])


class MomentumWorkspace(CrbaWorkspace):
    def __init__(self, model: Model):
        super().__init__(model)
        self.vel = np.empty((model.nbodies, 6))
        self.tmp = np.empty((2, 6))


def _momentum(model: Model, q, v):
    """h_O (6,) and the centre of mass (3,), of shaped q and v."""
    w = MomentumWorkspace.of(model)
    out = np.empty(9)
    if momentum_kernel(model.arrays, q, v, w.R, w.p, w.S, w.nv_joint, w.RJ, w.world_R, w.world_p, w.vel, w.tmp,
                       out):
        inputs.explain(model, q, (v, "v"))
    return out[:6], out[6:] / model.total_mass if model.total_mass > 0 else np.zeros(3)


def _about_com(h_O: np.ndarray, com: np.ndarray) -> np.ndarray:
    """k_G = k_O - c x l (the force transform), for one or N momenta."""
    h_G = h_O.copy()
    c, linear = com.T, h_O.T[3:]
    h_G.T[0] -= c[1] * linear[2] - c[2] * linear[1]
    h_G.T[1] -= c[2] * linear[0] - c[0] * linear[2]
    h_G.T[2] -= c[0] * linear[1] - c[1] * linear[0]
    return h_G


def center_of_mass(model: Model, q) -> np.ndarray:
    """c (3,), world frame."""
    q = inputs.configuration(model, q, batch=False)
    return _momentum(model, q, np.zeros(model.nv))[1]


def center_of_mass_velocity(model: Model, q, v) -> np.ndarray:
    """dc/dt = l / m (3,), world axes."""
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    h_O, _ = _momentum(model, q, v)
    return h_O[3:] / model.total_mass


def centroidal_momentum(model: Model, q, v) -> np.ndarray:
    """h_G = [k_G; l] (6,): angular momentum about the CoM and linear momentum,
    world-aligned axes. q, v may carry a leading batch dimension."""
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    if inputs.same_batch(q, v):
        out = np.empty((q.shape[0], 9))
        status = np.empty(q.shape[0], dtype=np.int64)
        momentum_batch_kernel(model.arrays, q, v, out, status)
        if status.any():
            inputs.explain(model, q, (v, "v"))
        com = out[:, 6:] / model.total_mass if model.total_mass > 0 else np.zeros((q.shape[0], 3))
        return _about_com(out[:, :6], com)
    h_O, com = _momentum(model, q, v)
    return _about_com(h_O, com)


def centroidal_momentum_matrix(model: Model, q) -> np.ndarray:
    """A_G (6, nv) with h_G = A_G v."""
    q = inputs.configuration(model, q, batch=False)
    w = MomentumWorkspace.of(model)
    A = np.empty((6, model.nv))
    momentum_matrix_kernel(model.arrays, q, A, w.R, w.p, w.S, w.nv_joint, w.RJ, w.world_R, w.world_p,
                           w.composite, w.work)
    # the centre of mass from the poses just computed: m c = sum_i (R_i h_i + m_i p_i)
    first_moment = np.einsum("bij,bj->i", w.world_R, model.first_moment) + model.mass @ w.world_p
    com = first_moment / model.total_mass if model.total_mass > 0 else np.zeros(3)
    return _about_com(A.T, com).T
