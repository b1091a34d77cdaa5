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
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, all_finite, invalid
from mbs_dynamics.crba import mass_matrix
from mbs_dynamics.joints import body_inertias, body_velocity, forward_pass, joint_bias_add
from mbs_dynamics.model import Model, unpack_model
from mbs_dynamics.rnea import external_wrenches_in_bodies, inverse_dynamics
from mbs_dynamics.spatial import congruence_add, inertia_apply
from mbs_dynamics.workspace import kinematic_views, new_scratch, scratch, take

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


@njit(cache=True, inline="always")
def aba_views(buffer, n):
    """The ABA's layout of the scratch buffer."""
    R, p, S, RJ, _, _, o = kinematic_views(buffer, n)
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
    pa, o = take(buffer, o, (6,))
    return R, p, S, RJ, IA, U, Dinv, vel, c, pA, u, acc, work, augmented, pa


@njit(cache=True)
def articulated_inertias(arrays, R, p, S, IA, U, Dinv, work, augmented):
    """Pass 2 of the ABA for the inertias (q only). Returns the first body whose
    D is singular, or -1. U[i, k] is column k of U_i = I^A_i S_i; IA[i] ends as
    I^a_i = I^A_i - U_i D_i^-1 U_i^T (pass 3 needs only U and D^-1)."""
    parent, nv_joint, scale = arrays[0], arrays[13], arrays[15]
    body_inertias(arrays, IA)
    for i in range(parent.shape[0] - 1, -1, -1):
        ni = nv_joint[i]
        for k in range(ni):
            for r in range(6):
                acc = 0.0
                for c in range(6):
                    acc += IA[i, r, c] * S[i, c, k]
                U[i, k, r] = acc
        if ni == 1:
            D = 0.0
            for r in range(6):
                D += S[i, r, 0] * U[i, 0, r]
            if abs(D) <= SINGULAR_PIVOT * scale:
                return i
            Dinv[i, 0, 0] = 1.0 / D
        else:
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
        for r in range(6):  # I^a = I^A - U D^-1 U^T, symmetric
            for c in range(r, 6):
                acc = 0.0
                for k in range(ni):
                    for m in range(ni):
                        acc += U[i, k, r] * Dinv[i, k, m] * U[i, m, c]
                IA[i, r, c] -= acc
                if c != r:
                    IA[i, c, r] = IA[i, r, c]
        congruence_add(R[i], p[i], IA[i], work, IA[lam])
    return -1


@njit(cache=True)
def bias_and_accelerations(arrays, gravity, S, R, p, IA, U, Dinv, c, pA, u, acc, pa, tau, qdd):
    """Passes 2 (bias forces, given pA and c from pass 1) and 3 of the ABA
    (F&O eqs. 12-14). IA holds I^a (from articulated_inertias); pa: 6 scratch."""
    parent, v_start, nv_joint = arrays[0], arrays[3], arrays[13]
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
        # p^a = p^A + I^a c + U D^-1 u, moved to the parent: [R n + p x (R f); R f]
        Dinv_u0 = 0.0
        if ni == 1:
            Dinv_u0 = Dinv[i, 0, 0] * u[i, 0]
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
            pa[r] = total
        pa0, pa1, pa2, pa3, pa4, pa5 = pa[0], pa[1], pa[2], pa[3], pa[4], pa[5]
        Ri, x, y, z = R[i], p[i, 0], p[i, 1], p[i, 2]
        f0 = Ri[0, 0] * pa3 + Ri[0, 1] * pa4 + Ri[0, 2] * pa5
        f1 = Ri[1, 0] * pa3 + Ri[1, 1] * pa4 + Ri[1, 2] * pa5
        f2 = Ri[2, 0] * pa3 + Ri[2, 1] * pa4 + Ri[2, 2] * pa5
        pA[lam, 0] += Ri[0, 0] * pa0 + Ri[0, 1] * pa1 + Ri[0, 2] * pa2 + y * f2 - z * f1
        pA[lam, 1] += Ri[1, 0] * pa0 + Ri[1, 1] * pa1 + Ri[1, 2] * pa2 + z * f0 - x * f2
        pA[lam, 2] += Ri[2, 0] * pa0 + Ri[2, 1] * pa1 + Ri[2, 2] * pa2 + x * f1 - y * f0
        pA[lam, 3] += f0
        pA[lam, 4] += f1
        pA[lam, 5] += f2
    for i in range(n):
        lam = parent[i]
        ni, vi = nv_joint[i], v_start[i]
        # a = ^iX_λ a_λ + c: [R^T w; R^T (v - p x w)], the world accelerating at -g
        if lam < 0:
            aw0 = aw1 = aw2 = 0.0
            av0, av1, av2 = -gravity[0], -gravity[1], -gravity[2]
        else:
            aw0, aw1, aw2, av0, av1, av2 = acc[lam, 0], acc[lam, 1], acc[lam, 2], acc[lam, 3], acc[lam, 4], \
                acc[lam, 5]
        x, y, z = p[i, 0], p[i, 1], p[i, 2]
        t0, t1, t2 = av0 - (y * aw2 - z * aw1), av1 - (z * aw0 - x * aw2), av2 - (x * aw1 - y * aw0)
        for k in range(3):
            r0, r1, r2 = R[i, 0, k], R[i, 1, k], R[i, 2, k]
            acc[i, k] = r0 * aw0 + r1 * aw1 + r2 * aw2 + c[i, k]
            acc[i, 3 + k] = r0 * t0 + r1 * t1 + r2 * t2 + c[i, 3 + k]
        if ni == 1:
            ua = u[i, 0]
            for r in range(6):
                ua -= U[i, 0, r] * acc[i, r]
            qdd[vi] = Dinv[i, 0, 0] * ua
            for r in range(6):
                acc[i, r] += S[i, r, 0] * qdd[vi]
            continue
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
def velocity_pass(arrays, q, v, f_ext, S, R, p, vel, c, pA):
    """Pass 1 of the ABA (F&O eq. 11): body velocities v_i, bias accelerations
    c_i = c_J + v_i x S_i qd_i and bias forces p^A_i = v_i x* I_i v_i - f_ext_i."""
    parent, kind, v_start, nv_joint = arrays[0], arrays[1], arrays[3], arrays[13]
    mass, first_moment, rotational_inertia = arrays[9], arrays[10], arrays[11]
    has_external = f_ext.shape[0] > 0
    for i in range(parent.shape[0]):
        j0, j1, j2, j3, j4, j5 = body_velocity(arrays, i, R, p, S, v, vel)
        for r in range(6):
            c[i, r] = 0.0
        if nv_joint[i] > 1:
            joint_bias_add(kind[i], arrays[7][i], S[i], v, v_start[i], c[i])
        w0, w1, w2, l0, l1, l2 = vel[i, 0], vel[i, 1], vel[i, 2], vel[i, 3], vel[i, 4], vel[i, 5]
        # c += v x vJ = [w x jw; w x jv + l x jw]
        c[i, 0] += w1 * j2 - w2 * j1
        c[i, 1] += w2 * j0 - w0 * j2
        c[i, 2] += w0 * j1 - w1 * j0
        c[i, 3] += w1 * j5 - w2 * j4 + l1 * j2 - l2 * j1
        c[i, 4] += w2 * j3 - w0 * j5 + l2 * j0 - l0 * j2
        c[i, 5] += w0 * j4 - w1 * j3 + l0 * j1 - l1 * j0
        h = first_moment[i]
        k0, k1, k2, g0, g1, g2 = inertia_apply(mass[i], h[0], h[1], h[2], rotational_inertia[i],
                                               w0, w1, w2, l0, l1, l2)
        # p^A = v x* [k; g] = [w x k + l x g; w x g]
        pA[i, 0] = w1 * k2 - w2 * k1 + l1 * g2 - l2 * g1
        pA[i, 1] = w2 * k0 - w0 * k2 + l2 * g0 - l0 * g2
        pA[i, 2] = w0 * k1 - w1 * k0 + l0 * g1 - l1 * g0
        pA[i, 3] = w1 * g2 - w2 * g1
        pA[i, 4] = w2 * g0 - w0 * g2
        pA[i, 5] = w0 * g1 - w1 * g0
        if has_external:
            for r in range(6):
                pA[i, r] -= f_ext[i, r]


@njit(cache=True)
def aba_kernel(packed, q, v, tau, f_ext, qdd, buffer):
    """qdd = FD(q, v, tau); returns 0, INVALID_INPUT without computing
    (inputs.invalid), NONFINITE_RESULT when qdd overflows, or -1 - i when the
    D of body i is singular (singular_body)."""
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, tau):
        return INVALID_INPUT
    R, p, S, RJ, IA, U, Dinv, vel, c, pA, u, acc, work, augmented, pa = aba_views(buffer, arrays[0].shape[0])
    forward_pass(arrays, q, R, p, S, RJ)
    singular = articulated_inertias(arrays, R, p, S, IA, U, Dinv, work, augmented)
    if singular >= 0:
        return -1 - singular
    velocity_pass(arrays, q, v, f_ext, S, R, p, vel, c, pA)
    bias_and_accelerations(arrays, arrays[14], S, R, p, IA, U, Dinv, c, pA, u, acc, pa, tau, qdd)
    return 0 if all_finite(qdd) else NONFINITE_RESULT


@njit(cache=True, parallel=True)
def aba_batch_kernel(packed, q, v, tau, qdd, status):
    no_force = np.empty((0, 6))
    for b in prange(q.shape[0]):
        status[b] = aba_kernel(packed, q[b], v[b], tau[b], no_force, qdd[b], new_scratch(packed[1][0]))


@njit(cache=True)
def inverse_mass_setup(packed, q, buffer):
    """The articulated inertias at q, kept in `buffer` for inverse_mass_apply;
    returns the first singular body or -1."""
    arrays = unpack_model(packed)
    R, p, S, RJ, IA, U, Dinv, vel, c, pA, u, acc, work, augmented, pa = aba_views(buffer, arrays[0].shape[0])
    forward_pass(arrays, q, R, p, S, RJ)
    return articulated_inertias(arrays, R, p, S, IA, U, Dinv, work, augmented)


@njit(cache=True)
def inverse_mass_apply(packed, buffer, x, y):
    """y = M^-1 x: passes 2 and 3 of the ABA without velocity or gravity."""
    arrays = unpack_model(packed)
    R, p, S, RJ, IA, U, Dinv, vel, c, pA, u, acc, work, augmented, pa = aba_views(buffer, arrays[0].shape[0])
    for i in range(c.shape[0]):
        for r in range(6):
            c[i, r] = 0.0
            pA[i, r] = 0.0
    no_gravity = work[0, :3]
    for r in range(3):
        no_gravity[r] = 0.0
    bias_and_accelerations(arrays, no_gravity, S, R, p, IA, U, Dinv, c, pA, u, acc, pa, x, y)


@njit(cache=True)
def inverse_mass_apply_columns(packed, buffer, X, Y):
    """Y = M^-1 X, column by column (inverse_mass_apply)."""
    x, y = np.empty(X.shape[0]), np.empty(X.shape[0])
    for k in range(X.shape[1]):
        x[:] = X[:, k]
        inverse_mass_apply(packed, buffer, x, y)
        Y[:, k] = y


def singular_mass_matrix(model: Model, joint: str | None) -> SingularMassMatrix:
    """The error of a singular mass matrix, naming the joint that moves nothing."""
    where = f": joint '{joint}' moves no mass or inertia (a massless link at the end of a chain?)" if joint else ""
    return SingularMassMatrix(f"the mass matrix of model '{model.name}' is singular{where}")


def _refuse(model: Model, status, q, v, tau) -> None:
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
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    tau = inputs.shaped(model, tau, model.nv, "tau")
    batch = inputs.same_batch(q, v, tau)
    if f_ext and batch:
        raise ValueError("f_ext is not supported with a batch of states")
    if model.has_coupled_joints:
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
        aba_batch_kernel(model.packed, q, v, tau, qdd, status)
        failed = status.any()
    else:
        f_bodies = (external_wrenches_in_bodies(model, inputs.configuration(model, q), f_ext) if f_ext
                    else _NO_FORCE)
        qdd = np.empty(model.nv)
        status = aba_kernel(model.packed, q, v, tau, f_bodies, qdd, scratch(model))
        failed = status != 0
    if failed:
        _refuse(model, status, q, v, tau)
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
