"""Forward dynamics by the articulated-body algorithm (F&O eqs. 11-14 with
eq. 13's τ_i read as τ_j; RBDL Alg. 3; Shao & Yuan's screw form is the same
algorithm), and M⁻¹x in O(n) reusing the articulated inertias, which depend on
q only (RBDL §5.3, §8.2).

A model with coupled (mimic) joints is not a tree in its coordinates: its
forward dynamics solves M a = tau - h with M from the CRBA instead, in one
compiled call (M = L^T L, crba.ltl_factor) for one state without applied
wrenches, else with numpy's solve.
"""
from collections import namedtuple

import numpy as np
from numba import njit, types

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.crba import crba_kernel, ltl_factor, ltl_solve, mass_matrix
from mbs_dynamics.algorithms.rnea import external_wrenches_in_bodies, inverse_dynamics, rnea_kernel
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, PACKED_FLAT, RESULT, SINGULAR_MASS_MATRIX, VECTOR, \
    ExactKernel, all_finite, invalid, vectors_fit
from mbs_dynamics.multibody.joints import REST, body_velocity, gravity_acceleration, joint_bias, joint_placement, \
    motion_subspace, parent_row, subspace_times
from mbs_dynamics.multibody.model import PRISMATIC, REVOLUTE, Model, body_count, unflatten, unpack_model
from mbs_dynamics.multibody.workspace import kinematic_views, new_scratch, readonly, scratch, take, untracked_views
from mbs_dynamics.parallel import run_batch
from mbs_dynamics.spatial.algebra import add, congruence_add, force_cross, force_to_parent, inertia_times, motion_cross, \
    motion_to_child, row, spatial_inertia_matrix, store, store_add

# A joint whose articulated inertia D = S^T I^A S has a pivot below this
# (relative to the robot's largest inertia) moves nothing with mass: M is singular.
SINGULAR_PIVOT = 1e-12

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


# The ABA's layout of the scratch buffer (aba_views): the kinematics, then per
# body the articulated inertia I^A (I^a after pass 2), U = I^A S by columns,
# D^-1, the velocity v, bias acceleration c, bias force p^A, u = tau - S^T p^A
# and the acceleration a; 6x6 and 6x12 scratch.
AbaViews = namedtuple("AbaViews", ("R", "p", "S", "IA", "U", "Dinv", "vel", "c", "pA", "u", "acc", "work",
                                   "augmented"))


@njit(cache=True, inline="always")
def aba_views(buffer, n):
    """The AbaViews of the scratch buffer."""
    kinematics, o = kinematic_views(buffer, n)
    IA, o = take(buffer, o, (n, 6, 6))
    U, o = take(buffer, o, (n, 6, 6))
    Dinv, o = take(buffer, o, (n, 6, 6))
    vel, o = take(buffer, o, (n, 6))
    c, o = take(buffer, o, (n, 6))
    pA, o = take(buffer, o, (n, 6))
    u, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    work, o = take(buffer, o, (6, 6))
    augmented, o = take(buffer, o, (6, 12))
    return AbaViews(kinematics.R, kinematics.p, kinematics.S, IA, U, Dinv, vel, c, pA, u, acc, work, augmented)


@njit(cache=True, inline="always")
def place_body(model, i, q, views):
    """Body i's placement in its parent (R, p), motion subspace S and, as the
    start of its articulated inertia, its own 6x6 inertia I^A_i = I_i."""
    joint_placement(model, i, q, views.R, views.p)
    motion_subspace(model, i, q, views.S)
    spatial_inertia_matrix(model.mass[i], model.first_moment[i], model.rotational_inertia[i], views.IA[i])


@njit(cache=True, inline="always")
def body_bias(model, i, v, f_ext, views):
    """Pass 1 of the ABA for body i (F&O eq. 11): its velocity v_i, bias
    acceleration c_i = c_J + v_i x S_i qd_i and bias force
    p^A_i = v_i x* I_i v_i - f_ext_i."""
    v_i, vJ = body_velocity(model, i, views.R, views.p, views.S, v, views.vel)
    store(views.c, i, add(joint_bias(model, i, views.S, v), motion_cross(v_i, vJ)))
    store(views.pA, i, force_cross(v_i, inertia_times(model.mass, model.first_moment, model.rotational_inertia,
                                                      i, v_i)))
    if f_ext.shape[0] > 0:
        for r in range(6):
            views.pA[i, r] -= f_ext[i, r]


@njit(cache=True, inline="always")
def articulated_inertia(model, i, views, scale):
    """Pass 2 of the ABA for body i's inertia (q only; F&O eq. 12, RBDL Alg. 3),
    its children done: U_i = I^A_i S_i, D_i = S_i^T U_i + the joint's armature,
    I^a_i = I^A_i - U_i D_i^-1 U_i^T, and I^A_λ += ^iX_λ^T I^a_i ^iX_λ. False
    when D_i is singular. U[i, k] is column k of U_i; pass 3 needs only U and
    D^-1. A revolute or prismatic joint's S = [s; 0] or [0; s]: U from three
    columns of I^A, D a scalar."""
    R, p, S, IA, U, Dinv, work = views.R, views.p, views.S, views.IA, views.U, views.Dinv, views.work
    ni, kind, lam = model.nv_joint[i], model.joint_type[i], model.parent[i]
    if kind == REVOLUTE or kind == PRISMATIC:
        o = 0 if kind == REVOLUTE else 3
        s0, s1, s2 = S[i, o, 0], S[i, o + 1, 0], S[i, o + 2, 0]
        for r in range(6):
            U[i, 0, r] = IA[i, r, o] * s0 + IA[i, r, o + 1] * s1 + IA[i, r, o + 2] * s2
        D = model.armature[model.v_start[i]] + s0 * U[i, 0, o] + s1 * U[i, 0, o + 1] + s2 * U[i, 0, o + 2]
        if abs(D) <= SINGULAR_PIVOT * scale:
            return False
        Dinv[i, 0, 0] = d = 1.0 / D
        if lam < 0:
            return True
        for r in range(6):  # I^a = I^A - U D^-1 U^T, symmetric
            scaled = U[i, 0, r] * d
            for c in range(r, 6):
                IA[i, r, c] -= scaled * U[i, 0, c]
                IA[i, c, r] = IA[i, r, c]
    else:
        for k in range(ni):
            for r in range(6):
                total = 0.0
                for c in range(6):
                    total += IA[i, r, c] * S[i, c, k]
                U[i, k, r] = total
        for k in range(ni):
            for m in range(ni):
                total = model.armature[model.v_start[i] + k] if k == m else 0.0
                for r in range(6):
                    total += S[i, r, k] * U[i, m, r]
                work[k, m] = total
        if not invert_small(work, ni, Dinv[i], scale, views.augmented):
            return False
        if lam < 0:
            return True
        for r in range(6):  # I^a = I^A - U D^-1 U^T, symmetric
            for c in range(r, 6):
                total = 0.0
                for k in range(ni):
                    for m in range(ni):
                        total += U[i, k, r] * Dinv[i, k, m] * U[i, m, c]
                IA[i, r, c] -= total
                if c != r:
                    IA[i, c, r] = IA[i, r, c]
    congruence_add(R[i], p[i], IA[i], work, IA[lam])
    return True


@njit(cache=True, inline="always")
def articulated_bias(model, i, views, tau):
    """Pass 2 of the ABA for body i's bias force (F&O eq. 12), its inertia done
    (articulated_inertia) and its children's forces in p^A_i: u_i = tau_i -
    S_i^T p^A_i, and p^A_λ += ^λX_i^* (p^A_i + I^a_i c_i + U_i D_i^-1 u_i)."""
    S, IA, U, Dinv, c, pA, u = views.S, views.IA, views.U, views.Dinv, views.c, views.pA, views.u
    ni, vi, lam = model.nv_joint[i], model.v_start[i], model.parent[i]
    for k in range(ni):
        t = tau[vi + k]
        for r in range(6):
            t -= S[i, r, k] * pA[i, r]
        u[i, k] = t
    if lam < 0:
        return
    Dinv_u0 = Dinv[i, 0, 0] * u[i, 0] if ni == 1 else 0.0
    work = views.work
    for r in range(6):
        total = pA[i, r]
        for col in range(6):
            total += IA[i, r, col] * c[i, col]
        if ni == 1:
            total += U[i, 0, r] * Dinv_u0
        else:
            for k in range(ni):
                for m in range(ni):
                    total += U[i, k, r] * Dinv[i, k, m] * u[i, m]
        work[0, r] = total
    store_add(pA, lam, force_to_parent(views.R, views.p, i, row(work, 0)))


@njit(cache=True, inline="always")
def body_acceleration_aba(model, i, views, gravity, qdd):
    """Pass 3 of the ABA for body i (F&O eqs. 13-14), its parent's acceleration
    known: a'_i = ^iX_λ a_λ + c_i, qdd_i = D_i^-1 (u_i - U_i^T a'_i), a_i = a'_i + S_i qdd_i.
    `gravity`: the acceleration the world has, [0; -g] (joints.gravity_acceleration)."""
    S, U, Dinv, u, acc = views.S, views.U, views.Dinv, views.u, views.acc
    ni, vi = model.nv_joint[i], model.v_start[i]
    a_i = add(motion_to_child(views.R, views.p, i, parent_row(acc, model.parent[i], gravity)), row(views.c, i))
    store(acc, i, a_i)
    if ni == 1:
        ua = u[i, 0]
        for r in range(6):
            ua -= U[i, 0, r] * a_i[r]
        qdd[vi] = Dinv[i, 0, 0] * ua
        for r in range(6):
            acc[i, r] += S[i, r, 0] * qdd[vi]
        return
    for k in range(ni):
        t = 0.0
        for m in range(ni):
            ua = u[i, m]
            for r in range(6):
                ua -= U[i, m, r] * a_i[r]
            t += Dinv[i, k, m] * ua
        qdd[vi + k] = t
    store_add(acc, i, subspace_times(S, i, ni, qdd, vi))


@njit(cache=True)
def aba_kernel(packed, q, v, tau, f_ext, qdd, buffer):
    """qdd = FD(q, v, tau); returns 0, INVALID_INPUT without computing
    (inputs.invalid), NONFINITE_RESULT when qdd overflows, or -1 - i when the
    D of body i is singular (singular_body). The three passes of the ABA, each
    one loop over the bodies."""
    model = unpack_model(packed)
    if invalid(model, q, v, tau):
        return INVALID_INPUT
    n = model.parent.shape[0]
    views = aba_views(buffer, n)
    scale = model.inertia_scale[0]
    for i in range(n):
        place_body(model, i, q, views)
        body_bias(model, i, v, f_ext, views)
    for i in range(n - 1, -1, -1):
        if not articulated_inertia(model, i, views, scale):
            return -1 - i
        articulated_bias(model, i, views, tau)
    gravity = gravity_acceleration(model.gravity)
    for i in range(n):
        body_acceleration_aba(model, i, views, gravity, qdd)
    return 0 if all_finite(qdd) else NONFINITE_RESULT


@njit(cache=True, nogil=True)
def aba_batch_kernel(packed, q, v, tau, qdd, status):
    """aba_kernel for each state of a batch (parallel.run_batch)."""
    no_force, buffer = np.empty((0, 6)), new_scratch(body_count(packed))
    for b in range(q.shape[0]):
        # each state typed read-only, as a single one is (_forward_dynamics_call): one compiled ABA for both
        status[b] = aba_kernel(packed, readonly(q[b]), readonly(v[b]), readonly(tau[b]), no_force, qdd[b], buffer)


@njit(cache=True)
def inverse_mass_setup(packed, q, buffer):
    """The articulated inertias at q, kept in `buffer` for inverse_mass_apply:
    aba_kernel at rest (its other passes cost little beside them, and one
    compiled ABA is shorter to compile than two); returns the first singular
    body or -1."""
    nv = unpack_model(packed).armature.shape[0]
    rest, qdd = np.zeros(nv), np.empty(nv)
    status = aba_kernel(packed, readonly(q), readonly(rest), readonly(rest), np.empty((0, 6)), qdd, buffer)
    return -1 - status if status < 0 else -1


@njit(cache=True)
def inverse_mass_apply(packed, buffer, x, y):
    """y = M^-1 x: passes 2 and 3 of the ABA without velocity or gravity."""
    model = unpack_model(packed)
    n = model.parent.shape[0]
    views = aba_views(buffer, n)
    views.c[:] = 0.0
    views.pA[:] = 0.0
    for i in range(n - 1, -1, -1):
        articulated_bias(model, i, views, x)
    for i in range(n):
        body_acceleration_aba(model, i, views, REST, y)


@njit(cache=True)
def inverse_mass_apply_columns(packed, buffer, X, Y):
    """Y = M^-1 X, column by column (inverse_mass_apply)."""
    x, y = np.empty(X.shape[0]), np.empty(X.shape[0])
    for k in range(X.shape[1]):
        x[:] = X[:, k]
        inverse_mass_apply(packed, buffer, x, y)
        Y[:, k] = y


def _forward_dynamics_call(flat, q, v, tau, qdd):
    """aba_kernel without applied wrenches, on model.packed_flat and a scratch
    buffer of its own: forward_dynamics' fast path (inputs.ExactKernel).
    Wrong lengths: INVALID_INPUT."""
    flat, q, v, tau, qdd = untracked_views((flat, q, v, tau, qdd))  # borrowed (inputs.ExactKernel): plain arrays
    packed = unflatten(flat)
    if not vectors_fit(packed[1], q, v, tau):
        return INVALID_INPUT
    buffer = new_scratch(body_count(packed))
    return aba_kernel(packed, q, v, tau, take(buffer, 0, (0, 6))[0], qdd, buffer)


def _coupled_forward_dynamics_call(flat, dof_parent, q, v, tau, qdd):
    """qdd = M^-1 (tau - h) for a model with coupled (mimic) joints, in one
    compiled call: M by crba_kernel, h by rnea_kernel at a = 0, M = L^T L
    factored along dof_parent (crba.ltl_factor). forward_dynamics' fast path
    for such models (inputs.ExactKernel); any trouble (wrong lengths, a
    pivot that is not positive, a result that is not finite) returns a
    status, and forward_dynamics' dense path says what it is."""
    flat, dof_parent, q, v, tau, qdd = untracked_views((flat, dof_parent, q, v, tau, qdd))
    packed = unflatten(flat)
    nv = v.shape[0]
    if not (vectors_fit(packed[1], q, v, tau) and dof_parent.shape[0] == nv):
        return INVALID_INPUT
    buffer = new_scratch(body_count(packed))
    M = np.empty((nv, nv))
    status = crba_kernel(packed, q, M, buffer)
    if status:
        return status
    zero, _ = take(buffer, buffer.shape[0] - nv, (nv,))  # past the RNEA's layout
    zero[:] = 0.0
    status = rnea_kernel(packed, q, v, readonly(zero), take(buffer, 0, (0, 6))[0], qdd, buffer)
    if status:
        return status
    for k in range(nv):
        qdd[k] = tau[k] - qdd[k]
    if ltl_factor(M, dof_parent) >= 0:
        return SINGULAR_MASS_MATRIX
    ltl_solve(M, dof_parent, qdd)
    return 0 if all_finite(qdd) else NONFINITE_RESULT


_COUPLED_FORWARD_DYNAMICS = ExactKernel(_coupled_forward_dynamics_call, types.int64, PACKED_FLAT,
                                        types.Array(types.int64, 1, "C", readonly=True), VECTOR, VECTOR, VECTOR,
                                        RESULT)
_FORWARD_DYNAMICS = ExactKernel(_forward_dynamics_call, types.int64, PACKED_FLAT, VECTOR, VECTOR, VECTOR, RESULT)
_empty = np.empty  # a global, not an attribute of np: 20 ns a call


def singular_mass_matrix(model: Model, joint: str | None) -> SingularMassMatrix:
    """The error of a singular mass matrix, naming the joint that moves nothing."""
    where = f": joint '{joint}' moves no mass or inertia (a massless link at the end of a chain?)" if joint else ""
    return SingularMassMatrix(f"the mass matrix of model '{model.name}' is singular{where}")


def refuse_forward_dynamics(model: Model, status, q, v, tau) -> None:
    """Raise what aba_kernel's status (or a batch's statuses) reports, if anything."""
    status = np.asarray(status)
    inputs.refuse(model, status, "the forward dynamics", q, (v, "v"), (tau, "tau"))
    if np.any(status < 0):
        raise singular_mass_matrix(model, model.body_joint_names[-1 - int(status[status < 0].flat[0])])


def forward_dynamics(model: Model, q, v, tau, f_ext=None) -> np.ndarray:
    """a = M(q)^-1 (tau - h(q, v) + sum_i J_i^T f_i) by the ABA, O(n).

    f_ext as in inverse_dynamics. q, v, tau may carry a leading batch
    dimension (then f_ext must be None). A singular mass matrix raises
    SingularMassMatrix (a ValueError) naming the joint.
    """
    if f_ext is None:
        qdd = _empty(model.nv)
        try:
            if model.has_coupled_joints:
                status = _COUPLED_FORWARD_DYNAMICS.call(model.packed_flat, model.dof_parent, q, v, tau, qdd)
            else:
                status = _FORWARD_DYNAMICS.call(model.packed_flat, q, v, tau, qdd)
            if not status:
                return qdd
        except TypeError:  # not arrays of float64: the checked path converts them
            pass
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    tau = inputs.shaped(model, tau, model.nv, "tau")
    batch = inputs.same_batch(q, v, tau)
    if f_ext and batch:
        raise ValueError("f_ext is not supported with a batch of states")
    if model.has_coupled_joints and not (batch or f_ext):  # the compiled path, on converted inputs
        qdd = _empty(model.nv)
        if not _COUPLED_FORWARD_DYNAMICS.call(model.packed_flat, model.dof_parent, q, v, tau, qdd):
            return qdd
    if model.has_coupled_joints:  # a batch, applied wrenches, or an error to explain
        M = mass_matrix(model, q)
        bias = inverse_dynamics(model, q, v, np.zeros_like(v), f_ext)
        inputs.vector(model, tau, model.nv, "tau")
        try:
            qdd = np.linalg.solve(M, (tau - bias)[..., None])[..., 0]  # a stack of vectors, not a matrix
        except np.linalg.LinAlgError:
            raise singular_mass_matrix(model, coupled_singular_joint(model, M)) from None
        if not inputs.all_finite(qdd):  # a vanishing pivot, or inputs too large
            joint = coupled_singular_joint(model, M)
            if joint is not None:
                raise singular_mass_matrix(model, joint)
            raise inputs.overflow(model, "the forward dynamics", (q, "q"), (v, "v"), (tau, "tau"))
        return qdd
    if batch:
        qdd = np.empty_like(v)
        status = np.empty(q.shape[0], dtype=np.int64)
        run_batch(aba_batch_kernel, (model.packed,), (q, v, tau, qdd, status), model.nbodies)
        failed = status.any()
    else:
        f_bodies = (external_wrenches_in_bodies(model, inputs.configuration(model, q), f_ext) if f_ext
                    else _NO_FORCE)
        qdd = np.empty(model.nv)
        status = aba_kernel(model.packed, q, v, tau, f_bodies, qdd, scratch(model))
        failed = status != 0
    if failed:
        refuse_forward_dynamics(model, status, q, v, tau)
    return qdd


def coupled_singular_joint(model: Model, M) -> str | None:
    """The joint at the first vanishing pivot of the mass matrix M (or of any
    in a batch (N, nv, nv)) in the elimination M = L D L^T, a pivot vanishing
    relative to the largest diagonal entry; None when there is none. Names
    the joint of a singular M on the coupled-mimic path, where the ABA (which
    names it as it goes) does not run."""
    for matrix in np.reshape(M, (-1, model.nv, model.nv)):
        scale = max(float(np.abs(np.diagonal(matrix)).max(initial=0.0)), 1e-300)
        work = np.array(matrix)
        for k in range(model.nv):
            pivot = work[k, k]
            if not pivot > SINGULAR_PIVOT * scale:
                return model.velocity_joint(k)
            work[k + 1:, k + 1:] -= np.outer(work[k + 1:, k] / pivot, work[k, k + 1:])
    return None


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
        self._buffer = new_scratch(model.nbodies)  # its own: it outlives the call
        singular = inverse_mass_setup(model.packed, q, self._buffer)
        if singular >= 0:
            raise singular_mass_matrix(model, model.body_joint_names[singular])
        self.shape = (model.nv, model.nv)

    def __matmul__(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 2:
            if not (x.shape[0] == self.model.nv and np.all(np.isfinite(x))):
                return np.column_stack([self @ column for column in x.T])  # says what is wrong
            y = np.empty(x.shape)
            inverse_mass_apply_columns(self.model.packed, self._buffer, x, y)
            return y
        x = inputs.vector(self.model, x, self.model.nv, "x", batch=False)
        y = np.empty(self.model.nv)
        inverse_mass_apply(self.model.packed, self._buffer, x, y)
        return y
