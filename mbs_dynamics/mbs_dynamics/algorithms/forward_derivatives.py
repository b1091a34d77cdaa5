"""Derivatives of the forward dynamics (Müller dynamics §6): a = FD(q, v, tau)
and -M^-1 dID/dq, -M^-1 dID/dv, M^-1 (dFD = -M^-1 dID at a = FD), from the
inverse dynamics' derivatives (derivatives.py) and M's tree-sparse factor;
the linearised state-space model (linearize)."""
import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.aba import SingularMassMatrix, aba_kernel, forward_dynamics
from mbs_dynamics.algorithms.crba import ltl_factor, ltl_solve_rows
from mbs_dynamics.algorithms.derivatives import FLOATS_PER_BODY, _buffer, _states, id_derivatives_kernel
from mbs_dynamics.inputs import NONFINITE_RESULT, SINGULAR_MASS_MATRIX, all_finite
from mbs_dynamics.multibody.model import FLOATING, Model, body_count
from mbs_dynamics.multibody.workspace import new_scratch
from mbs_dynamics.parallel import run_batch
from mbs_dynamics.spatial.lie import ad


@njit(cache=True)
def fd_derivatives_kernel(packed, dof_parent, q, v, tau, a, use_aba, da_dq, da_dv, Minv, M, tau_work, buffer):
    """a = FD(q, v, tau) (by the ABA when use_aba, else given) and its partial
    derivatives -M^-1 dID/dq, -M^-1 dID/dv and M^-1 (Müller dynamics §6: dFD = -M^-1 dID
    at a = FD), the solves with M's tree-sparse factors (crba.ltl_solve_rows).
    M, tau_work: (nv, nv) and (nv,) scratch. Returns 0, INVALID_INPUT,
    NONFINITE_RESULT or SINGULAR_MASS_MATRIX."""
    if use_aba:
        status = aba_kernel(packed, q, v, tau, tau_work[:0].reshape((0, 6)), a, buffer)
        if status != 0:
            return status if status > 0 else SINGULAR_MASS_MATRIX
    status = id_derivatives_kernel(packed, q, v, a, tau_work, da_dq, da_dv, M, buffer)
    if status != 0:
        return status
    if ltl_factor(M, dof_parent) >= 0:
        return SINGULAR_MASS_MATRIX
    for r in range(M.shape[0]):
        for c in range(M.shape[0]):
            da_dq[r, c] = -da_dq[r, c]
            da_dv[r, c] = -da_dv[r, c]
            Minv[r, c] = 1.0 if r == c else 0.0
    ltl_solve_rows(M, dof_parent, da_dq)
    ltl_solve_rows(M, dof_parent, da_dv)
    ltl_solve_rows(M, dof_parent, Minv)
    return 0 if all_finite(da_dq) and all_finite(da_dv) and all_finite(Minv) else NONFINITE_RESULT


@njit(cache=True, nogil=True)
def fd_derivatives_batch_kernel(packed, dof_parent, use_aba, q, v, tau, a, da_dq, da_dv, Minv, status):
    """fd_derivatives_kernel for each state of a batch (parallel.run_batch)."""
    nv = v.shape[1]
    M, tau_work, buffer = np.empty((nv, nv)), np.empty(nv), new_scratch(body_count(packed), FLOATS_PER_BODY)
    for b in range(q.shape[0]):
        status[b] = fd_derivatives_kernel(packed, dof_parent, q[b], v[b], tau[b], a[b], use_aba, da_dq[b], da_dv[b],
                                          Minv[b], M, tau_work, buffer)


def _forward_dynamics_derivatives(model: Model, q, v, tau, batch, da_dq, da_dv, Minv):
    """forward_dynamics_derivatives of shaped states into the given (nv, nv) or (N, nv, nv) arrays."""
    use_aba = not model.has_coupled_joints
    a = np.empty(v.shape) if use_aba else forward_dynamics(model, q, v, tau)  # coupled mimics: M and a solve
    if batch:
        status = np.empty(batch, dtype=np.int64)
        run_batch(fd_derivatives_batch_kernel, (model.packed, model.dof_parent, use_aba),
                  (q, v, tau, a, da_dq, da_dv, Minv, status), model.nbodies)
        failed = np.flatnonzero(status)
        if failed.size:  # the single state says what is wrong
            b = failed[0]
            _forward_dynamics_derivatives(model, q[b], v[b], tau[b], 0, da_dq[b], da_dv[b], Minv[b])
        return
    nv = model.nv
    status = fd_derivatives_kernel(model.packed, model.dof_parent, q, v, tau, a, use_aba, da_dq, da_dv, Minv,
                                   np.empty((nv, nv)), np.empty(nv), _buffer(model))
    if status == SINGULAR_MASS_MATRIX:
        forward_dynamics(model, q, v, tau)  # raises the error that names the joint
        raise SingularMassMatrix(f"the mass matrix of model '{model.name}' is singular at this q")
    inputs.refuse(model, status, "the forward dynamics derivatives", q, (v, "v"), (tau, "tau"))


def forward_dynamics_derivatives(model: Model, q, v, tau) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(da_dq, da_dv, da_dtau), each (nv, nv), of a = FD(q, v, tau):
    -M^-1 dtau_dq and -M^-1 dtau_dv at a = FD(q, v, tau), and M^-1 (Müller dynamics §6).
    dq in the tangent space, as in inverse_dynamics_derivatives. A singular
    mass matrix raises SingularMassMatrix. A batch of N states gives (N, nv, nv)
    each, computed in parallel."""
    q, v, tau, batch = _states(model, q, v, tau, "tau")
    shape = (batch, model.nv, model.nv) if batch else (model.nv, model.nv)
    da_dq, da_dv, Minv = np.empty(shape), np.empty(shape), np.empty(shape)
    _forward_dynamics_derivatives(model, q, v, tau, batch, da_dq, da_dv, Minv)
    return da_dq, da_dv, Minv


def linearize(model: Model, q, v, tau) -> tuple[np.ndarray, np.ndarray]:
    """(A, B) of the state-space model d(δx)/dt = A δx + B δu about (q, v, tau), for
    x = (δq, v), δq the tangent-space coordinates of q' = integrate(q, δq), and u = tau:

        A = [[-1/2 ad(v_base) for a floating base (0 elsewhere), 1],
             [da_dq,                                               da_dv]],
        B = [[0], [M^-1]]       (forward_dynamics_derivatives).

    The upper-left block is the exact derivative of δq' = dexp^-1(v) at δq = 0
    (q moving at the body twist v, seen from the fixed chart at q); it vanishes
    for joints whose v is dq/dt. A is (2 nv, 2 nv), B (2 nv, nv); a batch of N
    states (a horizon) gives (N, 2 nv, 2 nv) and (N, 2 nv, nv), in parallel."""
    q, v, tau, batch = _states(model, q, v, tau, "tau")
    nv = model.nv
    leading = (batch,) if batch else ()
    A, B = np.zeros(leading + (2 * nv, 2 * nv)), np.zeros(leading + (2 * nv, nv))
    _forward_dynamics_derivatives(model, q, v, tau, batch, A[..., nv:, :nv], A[..., nv:, nv:], B[..., nv:, :])
    A[..., range(nv), range(nv, 2 * nv)] = 1.0
    for body in np.flatnonzero(model.joint_type == FLOATING):
        block = slice(model.v_start[body], model.v_start[body] + 6)
        twists = v[..., block].reshape(-1, 6)
        A[..., block, block] = np.array([-0.5 * ad(twist) for twist in twists]).reshape(leading + (6, 6))
    return A, B
