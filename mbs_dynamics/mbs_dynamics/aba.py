"""Forward dynamics by the articulated-body algorithm (F&O eqs. 11-14 with
eq. 13's τ_i read as τ_j; RBDL Alg. 3; Shao & Yuan's screw form is the same
algorithm), and M⁻¹x in O(n) reusing the articulated inertias, which depend on
q only (RBDL §5.3, §8.2).

A model with coupled (mimic) joints is not a tree in its coordinates: its
forward dynamics solves M a = tau - h with M from the CRBA instead.
"""
import numpy as np
from numba import njit, prange

from mbs_dynamics import inputs
from mbs_dynamics.inputs import invalid
from mbs_dynamics.joints import body_inertias, forward_pass, joint_bias_add
from mbs_dynamics.kinematics import Workspace
from mbs_dynamics.model import Model
from mbs_dynamics.spatial import (
    congruence_add,
    cross_force_add,
    cross_motion_add,
    inertia_times_motion,
    motion_matrix_to_child,
    motion_to_child,
)

# A joint whose articulated inertia D = S^T I^A S has a pivot below this
# (relative to the robot's largest inertia) moves nothing with mass: M is singular.
SINGULAR_PIVOT = 1e-12


INVALID_INPUT = -2
_NO_FORCE = np.empty((0, 6))


class SingularMassMatrix(ValueError):
    """The mass matrix is singular (a joint carries no mass or inertia)."""


@njit(cache=True)
def invert_small(D, n, out, scale, A):
    """out[:n, :n] = D[:n, :n]^-1 by Gauss-Jordan with partial pivoting; False if
    singular. A: (6, 12) scratch."""
    for r in range(n):
        for c in range(n):
            A[r, c] = D[r, c]
            A[r, n + c] = 1.0 if r == c else 0.0
    for col in range(n):
        pivot = col
        for r in range(col + 1, n):
            if abs(A[r, col]) > abs(A[pivot, col]):
                pivot = r
        if abs(A[pivot, col]) <= SINGULAR_PIVOT * scale:
            return False
        if pivot != col:
            for c in range(2 * n):
                A[col, c], A[pivot, c] = A[pivot, c], A[col, c]
        inv = 1.0 / A[col, col]
        for c in range(2 * n):
            A[col, c] *= inv
        for r in range(n):
            if r != col and A[r, col] != 0.0:
                factor = A[r, col]
                for c in range(2 * n):
                    A[r, c] -= factor * A[col, c]
    for r in range(n):
        for c in range(n):
            out[r, c] = A[r, n + c]
    return True


@njit(cache=True)
def articulated_inertias(arrays, R, p, S, nv_joint, IA, U, Dinv, X, work, augmented, scale):
    """Pass 2 of the ABA for the inertias (q only). Returns the first body whose
    D is singular, or -1. U[i, k] is column k of U_i = I^A_i S_i."""
    parent = arrays[0]
    body_inertias(arrays, IA)
    for i in range(parent.shape[0] - 1, -1, -1):
        ni = nv_joint[i]
        for k in range(ni):
            for r in range(6):
                acc = 0.0
                for c in range(6):
                    acc += IA[i, r, c] * S[i, c, k]
                U[i, k, r] = acc
        for k in range(ni):
            for m in range(ni):
                acc = 0.0
                for r in range(6):
                    acc += S[i, r, k] * U[i, m, r]
                work[k, m] = acc
        if not invert_small(work, ni, Dinv[i], scale, augmented):
            return i
        lam = parent[i]
        if lam < 0:
            continue
        # I^a = I^A - U D^-1 U^T, moved to the parent
        for r in range(6):
            for c in range(6):
                acc = 0.0
                for k in range(ni):
                    for m in range(ni):
                        acc += U[i, k, r] * Dinv[i, k, m] * U[i, m, c]
                work[r, c] = IA[i, r, c] - acc
        for r in range(6):
            for c in range(6):
                IA[i, r, c] = work[r, c]  # I^A_i now holds I^a_i (pass 3 needs only U, D^-1)
        congruence_add(R[i], p[i], IA[i], work, IA[lam])
    return -1


@njit(cache=True)
def bias_and_accelerations(arrays, gravity, S, nv_joint, R, p, IA, U, Dinv, X, pa, c, pA, u, acc, tau, qdd):
    """Passes 2 (bias forces, given pA and c from pass 1) and 3 of the ABA.
    IA holds I^a (from articulated_inertias)."""
    parent, v_start = arrays[0], arrays[3]
    n = parent.shape[0]
    for i in range(n - 1, -1, -1):
        ni, vi = nv_joint[i], v_start[i]
        for k in range(ni):
            t = tau[vi + k]
            for r in range(6):
                t -= S[i, r, k] * pA[i, r]
            u[i, k] = t
        lam = parent[i]
        if lam < 0:
            continue
        # p^a = p^A + I^a c + U D^-1 u, moved to the parent
        for r in range(6):
            total = pA[i, r]
            for col in range(6):
                total += IA[i, r, col] * c[i, col]
            for k in range(ni):
                for m in range(ni):
                    total += U[i, k, r] * Dinv[i, k, m] * u[i, m]
            pa[r] = total
        motion_matrix_to_child(R[i], p[i], X)
        for col in range(6):
            total = 0.0
            for r in range(6):
                total += X[r, col] * pa[r]
            pA[lam, col] += total
    world = pa  # the world's acceleration, -g
    world[0] = world[1] = world[2] = 0.0
    world[3], world[4], world[5] = -gravity[0], -gravity[1], -gravity[2]
    for i in range(n):
        lam = parent[i]
        ni, vi = nv_joint[i], v_start[i]
        if lam < 0:
            motion_to_child(R[i], p[i], world, acc[i])
        else:
            motion_to_child(R[i], p[i], acc[lam], acc[i])
        for r in range(6):
            acc[i, r] += c[i, r]
        for k in range(ni):
            t = 0.0
            for m in range(ni):
                ua = u[i, m]
                for r in range(6):
                    ua -= U[i, m, r] * acc[i, r]
                t += Dinv[i, k, m] * ua
            qdd[vi + k] = t
        for r in range(6):
            total = 0.0
            for k in range(ni):
                total += S[i, r, k] * qdd[vi + k]
            acc[i, r] += total


@njit(cache=True)
def aba_kernel(arrays, gravity, q, v, tau, f_ext, qdd, R, p, S, nv_joint, RJ, IA, U, Dinv, X, work,
               augmented, vel, c, pA, u, acc, scale):
    """qdd = FD(q, v, tau); returns -1, the first body whose D is singular, or
    INVALID_INPUT without computing (inputs.invalid)."""
    if invalid(arrays, q, v, tau):
        return INVALID_INPUT
    parent, kind, v_start = arrays[0], arrays[1], arrays[3]
    mass, first_moment, rotational_inertia = arrays[9], arrays[10], arrays[11]
    forward_pass(arrays, q, R, p, S, nv_joint, RJ)
    singular = articulated_inertias(arrays, R, p, S, nv_joint, IA, U, Dinv, X, work, augmented, scale)
    if singular >= 0:
        return singular
    zero, vJ, Iv = work[0], work[1], work[2]
    for r in range(6):
        zero[r] = 0.0
    for i in range(parent.shape[0]):  # pass 1: velocities, bias accelerations c and forces p^A
        lam = parent[i]
        vi = v_start[i]
        motion_to_child(R[i], p[i], zero if lam < 0 else vel[lam], vel[i])
        for r in range(6):
            s_v = 0.0
            for k in range(nv_joint[i]):
                s_v += S[i, r, k] * v[vi + k]
            vJ[r] = s_v
            vel[i, r] += s_v
            c[i, r] = 0.0
        joint_bias_add(kind[i], arrays[7][i], S[i], v, vi, c[i])
        cross_motion_add(vel[i], vJ, c[i])
        inertia_times_motion(mass[i], first_moment[i], rotational_inertia[i], vel[i], Iv)
        for r in range(6):
            pA[i, r] = 0.0
        cross_force_add(vel[i], Iv, pA[i])
        if f_ext.shape[0] > 0:
            for r in range(6):
                pA[i, r] -= f_ext[i, r]
    bias_and_accelerations(arrays, gravity, S, nv_joint, R, p, IA, U, Dinv, X, work[3], c, pA, u, acc, tau, qdd)
    return -1


class AbaWorkspace(Workspace):
    def __init__(self, model: Model):
        super().__init__(model)
        n = model.nbodies
        self.IA = np.empty((n, 6, 6))
        self.U = np.empty((n, 6, 6))
        self.Dinv = np.empty((n, 6, 6))
        self.X = np.empty((6, 6))
        self.work = np.empty((6, 6))
        self.augmented = np.empty((6, 12))
        self.vel = np.empty((n, 6))
        self.c = np.empty((n, 6))
        self.pA = np.empty((n, 6))
        self.u = np.empty((n, 6))
        self.acc = np.empty((n, 6))


@njit(cache=True, parallel=True)
def aba_batch_kernel(arrays, gravity, q, v, tau, qdd, scale, status):
    n = arrays[0].shape[0]
    no_force = np.empty((0, 6))
    for b in prange(q.shape[0]):
        status[b] = aba_kernel(
            arrays, gravity, q[b], v[b], tau[b], no_force, qdd[b], np.empty((n, 3, 3)), np.empty((n, 3)),
            np.empty((n, 6, 6)), np.empty(n, dtype=np.int64), np.empty((3, 3)), np.empty((n, 6, 6)),
            np.empty((n, 6, 6)), np.empty((n, 6, 6)), np.empty((6, 6)), np.empty((6, 6)), np.empty((6, 12)),
            np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6)), np.empty((n, 6)), scale)


def _singular(model: Model, body: int) -> SingularMassMatrix:
    return SingularMassMatrix(
        f"the mass matrix of model '{model.name}' is singular: joint '{model.body_joint_names[body]}' "
        "moves no mass or inertia (a massless link at the end of a chain?)"
    )


def forward_dynamics(model: Model, q, v, tau, f_ext=None) -> np.ndarray:
    """a = M(q)^-1 (tau - h(q, v) + sum_i J_i^T f_i) by the ABA, O(n).

    f_ext as in inverse_dynamics. q, v, tau may carry a leading batch
    dimension (then f_ext must be None). A singular mass matrix raises
    SingularMassMatrix (a ValueError) naming the joint.
    """
    from mbs_dynamics.rnea import external_wrenches_in_bodies, inverse_dynamics

    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    tau = inputs.shaped(model, tau, model.nv, "tau")
    batch = inputs.same_batch(q, v, tau)
    if f_ext and batch:
        raise ValueError("f_ext is not supported with a batch of states")
    if model.has_coupled_joints:
        from mbs_dynamics.crba import mass_matrix

        M = mass_matrix(model, q)
        bias = inverse_dynamics(model, q, v, np.zeros_like(v), f_ext)
        inputs.vector(model, tau, model.nv, "tau")
        try:
            return np.linalg.solve(M, tau - bias)
        except np.linalg.LinAlgError as error:
            raise SingularMassMatrix(f"the mass matrix of model '{model.name}' is singular") from error
    scale = model.inertia_scale
    if batch:
        qdd = np.empty_like(v)
        status = np.empty(q.shape[0], dtype=np.int64)
        aba_batch_kernel(model.arrays, model.gravity, q, v, tau, qdd, scale, status)
        if np.any(status == INVALID_INPUT):
            inputs.explain(model, q, (v, "v"), (tau, "tau"))
        if np.any(status >= 0):
            raise _singular(model, int(status[status >= 0][0]))
        return qdd
    f_bodies = (external_wrenches_in_bodies(model, inputs.configuration(model, q), f_ext) if f_ext
                else _NO_FORCE)
    w = AbaWorkspace.of(model)
    qdd = np.empty(model.nv)
    status = aba_kernel(model.arrays, model.gravity, q, v, tau, f_bodies, qdd, w.R, w.p, w.S, w.nv_joint,
                        w.RJ, w.IA, w.U, w.Dinv, w.X, w.work, w.augmented, w.vel, w.c, w.pA, w.u, w.acc, scale)
    if status == INVALID_INPUT:
        inputs.explain(model, q, (v, "v"), (tau, "tau"))
    if status >= 0:
        raise _singular(model, status)
    return qdd


class InverseMassMatrix:
    """x -> M(q)^-1 x in O(n) per product, the articulated inertias computed
    once for q and reused (RBDL §5.3). For contact solvers' Schur complements.

        Minv = InverseMassMatrix(model, q)
        y = Minv @ x          # x of shape (nv,) or (nv, k)
    """

    def __init__(self, model: Model, q):
        if model.has_coupled_joints:
            raise ValueError(f"model '{model.name}' has coupled mimic joints: use mass_matrix and a solve")
        self.model = model
        q = inputs.configuration(model, q, batch=False)
        self._w = w = AbaWorkspace(model)
        forward_pass(model.arrays, q, w.R, w.p, w.S, w.nv_joint, w.RJ)
        singular = articulated_inertias(model.arrays, w.R, w.p, w.S, w.nv_joint, w.IA, w.U, w.Dinv, w.X,
                                        w.work, w.augmented, model.inertia_scale)
        if singular >= 0:
            raise _singular(model, singular)
        w.c[:] = 0.0
        self._no_gravity = np.zeros(3)
        self.shape = (model.nv, model.nv)

    def __matmul__(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 2:
            return np.column_stack([self @ column for column in x.T])
        x = inputs.vector(self.model, x, self.model.nv, "x", batch=False)
        w = self._w
        w.pA[:] = 0.0
        y = np.empty(self.model.nv)
        bias_and_accelerations(self.model.arrays, self._no_gravity, w.S, w.nv_joint, w.R, w.p, w.IA, w.U,
                               w.Dinv, w.X, w.work[0], w.c, w.pA, w.u, w.acc, x, y)
        return y
