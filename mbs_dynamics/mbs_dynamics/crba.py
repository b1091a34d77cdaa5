"""Joint-space mass matrix by the composite rigid body algorithm (F&O eqs.
9-10, RBDL Alg. 2 with its loop corrected: walk j = λ(j) while λ(j) is a
body). O(n·depth); blocks of bodies on different branches stay zero."""
import numpy as np
from numba import njit, prange

from mbs_dynamics import inputs
from mbs_dynamics.inputs import invalid
from mbs_dynamics.joints import body_inertias, forward_pass
from mbs_dynamics.kinematics import Workspace
from mbs_dynamics.model import Model
from mbs_dynamics.spatial import congruence_add, force_to_parent_add


@njit(cache=True)
def composite_inertias(arrays, R, p, composite, work):
    """composite[i]: spatial inertia (6x6, body frame) of body i and all bodies it carries."""
    parent = arrays[0]
    body_inertias(arrays, composite)
    for i in range(parent.shape[0] - 1, -1, -1):
        lam = parent[i]
        if lam >= 0:
            congruence_add(R[i], p[i], composite[i], work, composite[lam])


@njit(cache=True)
def crba_kernel(arrays, q, M, R, p, S, nv_joint, RJ, composite, work, F):
    """M(q); returns 1 without computing when q is invalid (inputs.invalid), else 0."""
    if invalid(arrays, q, q[:0], q[:0]):
        return 1
    parent, v_start = arrays[0], arrays[3]
    forward_pass(arrays, q, R, p, S, nv_joint, RJ)
    composite_inertias(arrays, R, p, composite, work)
    for r in range(M.shape[0]):
        for c in range(M.shape[1]):
            M[r, c] = 0.0
    for i in range(parent.shape[0] - 1, -1, -1):
        ni, vi = nv_joint[i], v_start[i]
        for k in range(ni):  # F = I^C_i S_i
            for r in range(6):
                acc = 0.0
                for c in range(6):
                    acc += composite[i, r, c] * S[i, c, k]
                F[k, r] = acc
        for k in range(ni):  # H_ii = S_i^T F, its lower triangle mirrored: M exactly symmetric
            for m in range(k, ni):
                acc = 0.0
                for r in range(6):
                    acc += S[i, r, m] * F[k, r]
                M[vi + m, vi + k] += acc
                if m != k:
                    M[vi + k, vi + m] += acc
        j = i
        while parent[j] >= 0:
            for k in range(ni):  # F = ^λ(j)X*_j F
                for r in range(6):
                    work[0, r] = 0.0
                force_to_parent_add(R[j], p[j], F[k], work[0])
                for r in range(6):
                    F[k, r] = work[0, r]
            j = parent[j]
            nj, vj = nv_joint[j], v_start[j]
            for k in range(ni):  # H_ji = S_j^T F, H_ij = H_ji^T
                for m in range(nj):
                    acc = 0.0
                    for r in range(6):
                        acc += S[j, r, m] * F[k, r]
                    M[vj + m, vi + k] += acc
                    M[vi + k, vj + m] += acc
    return 0


@njit(cache=True, parallel=True)
def crba_batch_kernel(arrays, q, M, status):
    n = arrays[0].shape[0]
    for b in prange(q.shape[0]):
        status[b] = crba_kernel(arrays, q[b], M[b], np.empty((n, 3, 3)), np.empty((n, 3)), np.empty((n, 6, 6)),
                                np.empty(n, dtype=np.int64), np.empty((3, 3)), np.empty((n, 6, 6)), np.empty((6, 6)),
                                np.empty((6, 6)))


class CrbaWorkspace(Workspace):
    def __init__(self, model: Model):
        super().__init__(model)
        self.composite = np.empty((model.nbodies, 6, 6))
        self.work = np.empty((6, 6))
        self.F = np.empty((6, 6))


def mass_matrix(model: Model, q) -> np.ndarray:
    """M(q), (nv, nv), full and symmetric (CRBA); q may carry a leading batch dimension."""
    q = inputs.shaped(model, q, model.nq, "q")
    if q.ndim == 2:
        M = np.empty((q.shape[0], model.nv, model.nv))
        status = np.empty(q.shape[0], dtype=np.int64)
        crba_batch_kernel(model.arrays, q, M, status)
        failed = bool(status.any())
    else:
        w = CrbaWorkspace.of(model)
        M = np.empty((model.nv, model.nv))
        failed = crba_kernel(model.arrays, q, M, w.R, w.p, w.S, w.nv_joint, w.RJ, w.composite, w.work, w.F)
    if failed:
        inputs.explain(model, q)
    return M
