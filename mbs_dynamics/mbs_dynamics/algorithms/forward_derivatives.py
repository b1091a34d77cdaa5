"""Derivatives of the forward dynamics (Müller dynamics §6): a = FD(q, v, tau)
and -M^-1 dID/dq, -M^-1 dID/dv, M^-1 (dFD = -M^-1 dID at a = FD), and the
linearised state-space model (linearize), in one compiled pass each.

The inverse dynamics' derivative columns (derivatives.py) give M at no extra
cost, so a is solved from M's tree-sparse factor, a = M^-1 (tau - ID(q, v, 0)),
instead of by a separate ABA: the pass runs at a = 0, then moves the world
accelerations and subtree wrenches to a (both are linear in a). M^-1 comes
from the same factor and multiplies dID/dq and dID/dv (BLAS).
"""
import numpy as np
from numba import njit
from numba.extending import register_jitable

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.aba import SingularMassMatrix, forward_dynamics
from mbs_dynamics.algorithms.crba import ltl_factor, ltl_solve, ltl_solve_rows
from mbs_dynamics.algorithms.derivatives import _U, FLOATS_PER_BODY, _dot, _states, column_inertias, \
    column_motions, column_pairs, derivative_views, subtree_quantities
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, SINGULAR_MASS_MATRIX, all_finite, invalid
from mbs_dynamics.multibody.model import FLOATING, Model, body_count, unpack_model
from mbs_dynamics.multibody.workspace import FLOATS_FIXED, new_scratch, scratch, take
from mbs_dynamics.parallel import run_batch
from mbs_dynamics.spatial.algebra import inertia_times


@register_jitable
def fd_floats_per_body(n, nv):
    """Floats per body of the buffer of fd_derivatives_kernel and linearize_kernel:
    the derivative kernels' layout, then three (nv, nv) matrices, a (nv,) and two (n, 6).
    Compiled where a kernel calls it, plain Python (no dispatch) elsewhere."""
    bodies = max(n, 1)  # a model of fixed joints only has none
    return FLOATS_PER_BODY + (3 * nv * nv + nv + 12 * n + bodies - 1) // bodies


@njit(cache=True, inline="always")
def _fd_matrices(buffer, n, nv):
    """The (nv, nv) matrices M, dtau_dq, dtau_dv, a (nv,) and dA, D (n, 6)
    after the derivative kernels' layout (fd_floats_per_body)."""
    o = n * FLOATS_PER_BODY + FLOATS_FIXED
    M, o = take(buffer, o, (nv, nv))
    dtau_dq, o = take(buffer, o, (nv, nv))
    dtau_dv, o = take(buffer, o, (nv, nv))
    a, o = take(buffer, o, (nv,))
    dA, o = take(buffer, o, (n, 6))
    D, o = take(buffer, o, (n, 6))
    return M, dtau_dq, dtau_dv, a, dA, D


@njit(cache=True)
def accelerations_from_factor(packed, dof_parent, tau, buffer):
    """a = M^-1 (tau - S^T F) from M's factor L, with F the subtree wrenches of
    subtree_quantities at a = 0; then the world accelerations and wrenches moved
    to a: ΔA_i = ΔA_λ + S_i a_i and ΔF_i = I^C_i ΔA_λ + Σ_{j in subtree i} U_j a_j
    (U = I^C S, column_inertias). M's factor L, a and the scratch dA, D: _fd_matrices."""
    model = unpack_model(packed)
    parent, v_start, nv_joint = model.parent, model.v_start, model.nv_joint
    n = parent.shape[0]
    views = derivative_views(buffer, n)
    L, _, _, a, dA, D = _fd_matrices(buffer, n, tau.shape[0])
    mass_c, first_moment_c, inertia_c = views.mass_c, views.first_moment_c, views.inertia_c
    F, S_world, columns, acceleration = views.F, views.S_world, views.columns, views.acceleration
    for k in range(a.shape[0]):
        a[k] = tau[k]
    for i in range(n):
        for k in range(nv_joint[i]):
            a[v_start[i] + k] -= _dot(S_world[i, k], F[i])
    ltl_solve(L, dof_parent, a)
    for i in range(n):
        lam = parent[i]
        for r in range(6):
            dA[i, r] = dA[lam, r] if lam >= 0 else 0.0
            D[i, r] = 0.0
        for k in range(nv_joint[i]):
            rate = a[v_start[i] + k]
            for r in range(6):
                dA[i, r] += S_world[i, k, r] * rate
                D[i, r] += columns[i, k, _U, r] * rate
    for i in range(n - 1, -1, -1):
        lam = parent[i]
        if lam >= 0:
            for r in range(6):
                D[lam, r] += D[i, r]
    for i in range(n):
        lam = parent[i]
        if lam >= 0:
            dF = inertia_times(mass_c, first_moment_c, inertia_c, i, (dA[lam, 0], dA[lam, 1], dA[lam, 2],
                                                                       dA[lam, 3], dA[lam, 4], dA[lam, 5]))
            for r in range(6):
                F[i, r] += dF[r]
        for r in range(6):
            F[i, r] += D[i, r]
            acceleration[i, r] += dA[i, r]


@njit(cache=True)
def fd_partials(packed, dof_parent, q, v, tau, Minv, buffer):
    """a = FD(q, v, tau), M^-1 into Minv, and dtau/dq, dtau/dv of the inverse
    dynamics at a, left in the buffer (_fd_matrices; module docstring).
    Returns 0, INVALID_INPUT, NONFINITE_RESULT or SINGULAR_MASS_MATRIX."""
    model = unpack_model(packed)
    if invalid(model, q, v, tau):
        return INVALID_INPUT
    n, nv = model.parent.shape[0], v.shape[0]
    views = derivative_views(buffer, n)
    M, dtau_dq, dtau_dv, a, _, _ = _fd_matrices(buffer, n, nv)
    a[:] = 0.0
    subtree_quantities(packed, q, v, a, model.gravity, views)
    column_inertias(packed, buffer)
    column_pairs(packed, buffer, M, dtau_dq, dtau_dv, True, False)
    if not all_finite(M):
        return NONFINITE_RESULT
    if ltl_factor(M, dof_parent) >= 0:
        return SINGULAR_MASS_MATRIX
    accelerations_from_factor(packed, dof_parent, tau, buffer)
    column_motions(packed, v, a, buffer)
    column_pairs(packed, buffer, M, dtau_dq, dtau_dv, False, True)
    for r in range(nv):
        for c in range(nv):
            Minv[r, c] = 1.0 if r == c else 0.0
    ltl_solve_rows(M, dof_parent, Minv)
    return 0 if all_finite(Minv) else NONFINITE_RESULT  # a non-finite dtau makes its product with M^-1 so


@njit(cache=True)
def fd_derivatives_kernel(packed, dof_parent, q, v, tau, da_dq, da_dv, Minv, buffer):
    """-M^-1 dID/dq, -M^-1 dID/dv at a = FD(q, v, tau), and M^-1 (Müller dynamics
    §6: dFD = -M^-1 dID at a = FD). Returns the status of fd_partials."""
    status = fd_partials(packed, dof_parent, q, v, tau, Minv, buffer)
    if status != 0:
        return status
    nv = v.shape[0]
    _, dtau_dq, dtau_dv, _, _, _ = _fd_matrices(buffer, body_count(packed), nv)
    np.dot(Minv, dtau_dq, da_dq)
    np.dot(Minv, dtau_dv, da_dv)
    for r in range(nv):
        for c in range(nv):
            da_dq[r, c] = -da_dq[r, c]
            da_dv[r, c] = -da_dv[r, c]
    return 0 if all_finite(da_dq) and all_finite(da_dv) else NONFINITE_RESULT


@njit(cache=True)
def linearize_kernel(packed, dof_parent, q, v, tau, A, B, buffer):
    """A, B of linearize, written in place (every element). Returns the status of fd_partials."""
    nv = v.shape[0]
    Minv = B[nv:]
    status = fd_partials(packed, dof_parent, q, v, tau, Minv, buffer)
    if status != 0:
        return status
    model = unpack_model(packed)
    product, dtau_dq, dtau_dv, _, _, _ = _fd_matrices(buffer, model.parent.shape[0], nv)  # M's factor is spent
    np.dot(Minv, dtau_dq, product)
    for r in range(nv):
        for c in range(nv):
            A[nv + r, c] = -product[r, c]
    np.dot(Minv, dtau_dv, product)
    for r in range(nv):
        for c in range(nv):
            A[nv + r, nv + c] = -product[r, c]
        for c in range(2 * nv):
            A[r, c] = 0.0
        A[r, nv + r] = 1.0
        for c in range(nv):
            B[r, c] = 0.0
    for i in range(model.parent.shape[0]):  # -1/2 ad(v) = -1/2 [[w~, 0], [u~, w~]]
        if model.joint_type[i] != FLOATING:
            continue
        o = model.v_start[i]
        for half in range(2):
            x, y, z = v[o + 3 * half], v[o + 3 * half + 1], v[o + 3 * half + 2]
            for block in range(half, 2):
                r, c = o + 3 * block, o + 3 * (block - half)
                A[r, c + 1], A[r, c + 2] = 0.5 * z, -0.5 * y
                A[r + 1, c], A[r + 1, c + 2] = -0.5 * z, 0.5 * x
                A[r + 2, c], A[r + 2, c + 1] = 0.5 * y, -0.5 * x
    return 0 if all_finite(A) else NONFINITE_RESULT


@njit(cache=True, nogil=True)
def fd_derivatives_batch_kernel(packed, dof_parent, q, v, tau, da_dq, da_dv, Minv, status):
    """fd_derivatives_kernel for each state of a batch (parallel.run_batch)."""
    n, nv = body_count(packed), v.shape[1]
    buffer = new_scratch(n, fd_floats_per_body(n, nv))
    for b in range(q.shape[0]):
        status[b] = fd_derivatives_kernel(packed, dof_parent, q[b], v[b], tau[b], da_dq[b], da_dv[b], Minv[b], buffer)


@njit(cache=True, nogil=True)
def linearize_batch_kernel(packed, dof_parent, q, v, tau, A, B, status):
    """linearize_kernel for each state of a batch (parallel.run_batch)."""
    n, nv = body_count(packed), v.shape[1]
    buffer = new_scratch(n, fd_floats_per_body(n, nv))
    for b in range(q.shape[0]):
        status[b] = linearize_kernel(packed, dof_parent, q[b], v[b], tau[b], A[b], B[b], buffer)


def _fd_buffer(model: Model) -> np.ndarray:
    return scratch(model, fd_floats_per_body(model.nbodies, model.nv))


def _refuse(model: Model, status, q, v, tau) -> None:
    """Raise what a kernel's status says (nothing for 0); a singular mass matrix by
    forward_dynamics' error, which names the joint."""
    if status == SINGULAR_MASS_MATRIX:
        forward_dynamics(model, q, v, tau)
        raise SingularMassMatrix(f"the mass matrix of model '{model.name}' is singular at this q")
    inputs.refuse(model, status, "the forward dynamics derivatives", q, (v, "v"), (tau, "tau"))


def _refuse_first(model: Model, status, q, v, tau) -> None:
    """After a batch: raise what its first failed state's status says, as for that state alone."""
    failed = np.flatnonzero(status)
    if failed.size:
        b = failed[0]
        _refuse(model, status[b], q[b], v[b], tau[b])


def forward_dynamics_derivatives(model: Model, q, v, tau) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(da_dq, da_dv, da_dtau), each (nv, nv), of a = FD(q, v, tau):
    -M^-1 dtau_dq and -M^-1 dtau_dv at a = FD(q, v, tau), and M^-1 (Müller dynamics §6).
    dq in the tangent space, as in inverse_dynamics_derivatives. A singular
    mass matrix raises SingularMassMatrix. A batch of N states gives (N, nv, nv)
    each, computed in parallel."""
    q, v, tau, batch = _states(model, q, v, tau, "tau")
    nv = model.nv
    if batch:
        da_dq, da_dv, Minv = np.empty((batch, nv, nv)), np.empty((batch, nv, nv)), np.empty((batch, nv, nv))
        status = np.empty(batch, dtype=np.int64)
        run_batch(fd_derivatives_batch_kernel, (model.packed, model.dof_parent), (q, v, tau, da_dq, da_dv, Minv, status),
                  model.nbodies)
        _refuse_first(model, status, q, v, tau)
        return da_dq, da_dv, Minv
    da_dq, da_dv, Minv = np.empty((nv, nv)), np.empty((nv, nv)), np.empty((nv, nv))
    status = fd_derivatives_kernel(model.packed, model.dof_parent, q, v, tau, da_dq, da_dv, Minv, _fd_buffer(model))
    if status:
        _refuse(model, status, q, v, tau)
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
    if batch:
        A, B = np.empty((batch, 2 * nv, 2 * nv)), np.empty((batch, 2 * nv, nv))
        status = np.empty(batch, dtype=np.int64)
        run_batch(linearize_batch_kernel, (model.packed, model.dof_parent), (q, v, tau, A, B, status), model.nbodies)
        _refuse_first(model, status, q, v, tau)
        return A, B
    A, B = np.empty((2 * nv, 2 * nv)), np.empty((2 * nv, nv))
    status = linearize_kernel(model.packed, model.dof_parent, q, v, tau, A, B, _fd_buffer(model))
    if status:
        _refuse(model, status, q, v, tau)
    return A, B
