"""Derivatives of the dynamics (Müller dynamics §2, §6): analytic partial
derivatives of inverse and forward dynamics, the Coriolis matrix from the
Christoffel symbols, the time derivative of the inverse-dynamics torques and
the linearised state-space model.

Müller dynamics §6.1 (sensitivity of the EOM, for linearisation and optimal
control) and §6.3 (their time derivatives, for series elastic actuators).
The partial derivatives are Lie brackets, in world axes about the world origin.
Perturbing coordinate j by δ moves the subtree of joint j rigidly by the screw
S_j δ, which changes every world quantity X attached to it by the bracket
S_j x X (Müller dynamics §2: dS_k/dq_j = [S_j, S_k] for j before k). With
F_i, I^C_i the wrench and inertia of body i's subtree and
B_i = v_i x* I_i - I_i (v_i x) + (I_i v_i) x̄ (x̄ h: ψ -> ψ x* h), summed over
the subtree as B^C_i, the velocity and acceleration of joint j's parent give

    ψ_j = S_j x v_λ,  φ_j = S_j x a_λ - ψ_j x v_λ,  χ_j = (v_j + v_λ) x S_j

and, for joint j on the path from body k to the root (j ⪯ k):

    dτ_k/dq_j = -S_k^T (I^C_k φ_j + B^C_k ψ_j)      dτ_j/dq_k = S_j^T (S_k x* F_k - I^C_k φ_k - B^C_k ψ_k)
    dτ_k/dv_j = S_k^T (B^C_k S_j + I^C_k χ_j)        dτ_j/dv_k = S_j^T (B^C_k S_k + I^C_k χ_k)

(in the first, the change of S_k, S_j x S_k, cancels against S_j x* F_k).
That is Carpentier and Mansard's result (RSS 2018) in bracket form; the cost
is O(n·depth), like the CRBA. The Coriolis matrix is the same sum with half
of B (the Christoffel-consistent factorisation: Ṁ - 2C is skew), not Müller
dynamics eq. 84 (DESIGN.md §7, misprint 13).

Coordinates with v = body twist (the floating base) are perturbed on the
right, q ⊕ δ = integrate(q, δ): the derivatives are in the tangent space.
A planar joint is a chain of its three columns x, y, theta: its linear
columns turn with its parent, not with its body.
"""
import numpy as np
from numba import njit, prange

from mbs_dynamics import inputs
from mbs_dynamics.aba import SingularMassMatrix, aba_kernel, forward_dynamics
from mbs_dynamics.crba import composite_sums, ltl_factor, ltl_solve_rows, world_body_inertias, world_motion_subspaces
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, SINGULAR_MASS_MATRIX, all_finite, invalid
from mbs_dynamics.joints import body_acceleration, body_jerk, body_velocity, forward_pass
from mbs_dynamics.kinematics import body_poses_kernel
from mbs_dynamics.lie import ad
from mbs_dynamics.model import FLOATING, PLANAR, Model, unpack_model
from mbs_dynamics.spatial import force_cross, force_to_parent_add, inertia_apply, motion_cross, motion_to_parent
from mbs_dynamics.workspace import kinematic_views, new_scratch, scratch, take

# The derivative kernels lay out per-column vectors besides the per-body arrays.
FLOATS_PER_BODY = 512

# rows of the per-column vectors (columns[i, k, row])
_S, _PSI, _PHI, _CHI, _U, _W, _DFQ, _DFV, _SDOT = range(9)
_DC = _DFV  # the Coriolis kernel's I^C dS/dt + B^C S / 2 (it has no dF/dv)


@njit(cache=True, inline="always")
def _dot(x, y):
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2] + x[3] * y[3] + x[4] * y[4] + x[5] * y[5]


@njit(cache=True, inline="always")
def _composite_apply(mass_c, first_moment_c, inertia_c, i, x, out, scale):
    """out += scale * I^C_i x."""
    h = first_moment_c[i]
    y = inertia_apply(mass_c[i], h[0], h[1], h[2], inertia_c[i], x[0], x[1], x[2], x[3], x[4], x[5])
    for r in range(6):
        out[r] += scale * y[r]


@njit(cache=True, inline="always")
def _b_apply(T, G, i, x, out, scale):
    """out += scale * B^C_i x. B = v x* I - I (v x) + (I v) x̄ is [[T, 0], [-2 G~, 0]]
    (its right half vanishes): T = [w~, I_O] - (h u^T + u h^T) + 2 (u.h) 1 - k~ and
    G = the linear momentum m u - h x w of the body moving at v = [w; u] with
    I v = [k; G]; composites are sums."""
    x0, x1, x2 = x[0], x[1], x[2]
    for r in range(3):
        out[r] += scale * (T[i, r, 0] * x0 + T[i, r, 1] * x1 + T[i, r, 2] * x2)
    g0, g1, g2 = G[i, 0], G[i, 1], G[i, 2]
    out[3] -= 2.0 * scale * (g1 * x2 - g2 * x1)
    out[4] -= 2.0 * scale * (g2 * x0 - g0 * x2)
    out[5] -= 2.0 * scale * (g0 * x1 - g1 * x0)


@njit(cache=True, inline="always")
def _b_transpose_apply(T, G, i, y, out):
    """out = B^C_i^T y = [T^T n + 2 G x f; 0] for y = [n; f] (see _b_apply)."""
    n0, n1, n2, f0, f1, f2 = y[0], y[1], y[2], y[3], y[4], y[5]
    g0, g1, g2 = G[i, 0], G[i, 1], G[i, 2]
    out[0] = T[i, 0, 0] * n0 + T[i, 1, 0] * n1 + T[i, 2, 0] * n2 + 2.0 * (g1 * f2 - g2 * f1)
    out[1] = T[i, 0, 1] * n0 + T[i, 1, 1] * n1 + T[i, 2, 1] * n2 + 2.0 * (g2 * f0 - g0 * f2)
    out[2] = T[i, 0, 2] * n0 + T[i, 1, 2] * n1 + T[i, 2, 2] * n2 + 2.0 * (g0 * f1 - g1 * f0)
    out[3] = out[4] = out[5] = 0.0


@njit(cache=True, inline="always")
def _set(out, x):
    for r in range(6):
        out[r] = x[r]


@njit(cache=True, inline="always")
def _cross_into(a, b, out):
    """out = a x b (motion)."""
    _set(out, motion_cross(a[0], a[1], a[2], a[3], a[4], a[5], b[0], b[1], b[2], b[3], b[4], b[5]))


@njit(cache=True, inline="always")
def derivative_views(buffer, n):
    """The derivative kernels' layout of their scratch buffer."""
    R, p, S, RJ, world_R, world_p, o = kinematic_views(buffer, n)
    vel, o = take(buffer, o, (n, 6))  # body axes, then world
    acc, o = take(buffer, o, (n, 6))
    velocity, o = take(buffer, o, (n, 6))  # world axes, about the world origin
    acceleration, o = take(buffer, o, (n, 6))
    mass_c, o = take(buffer, o, (n,))
    first_moment_c, o = take(buffer, o, (n, 3))
    inertia_c, o = take(buffer, o, (n, 3, 3))
    T, o = take(buffer, o, (n, 3, 3))
    G, o = take(buffer, o, (n, 3))
    F, o = take(buffer, o, (n, 6))
    S_world, o = take(buffer, o, (n, 6, 6))
    columns, o = take(buffer, o, (n, 6, 9, 6))
    work, o = take(buffer, o, (4, 6))
    spare, o = take(buffer, o, (6 * n,))
    return (R, p, S, RJ, world_R, world_p, vel, acc, velocity, acceleration, mass_c, first_moment_c, inertia_c,
            T, G, F, S_world, columns, work, spare)


@njit(cache=True)
def subtree_quantities(arrays, q, v, a, gravity, views):
    """World velocities and accelerations (with -gravity at the root) of every
    body; and of every subtree: its inertia I^C, B^C (as T, G; _b_apply) and the
    wrench F = sum of I a + v x* I v (F&O eq. 5, in world axes)."""
    (R, p, S, RJ, world_R, world_p, vel, acc, velocity, acceleration, mass_c, first_moment_c, inertia_c,
     T, G, F, S_world, columns, work, spare) = views
    parent = arrays[0]
    n = parent.shape[0]
    body_poses_kernel(arrays, q, R, p, S, RJ, world_R, world_p)
    world_motion_subspaces(arrays, S, world_R, world_p, S_world)
    world_body_inertias(arrays, world_R, world_p, mass_c, first_moment_c, inertia_c)
    for i in range(n):
        j0, j1, j2, j3, j4, j5 = body_velocity(arrays, i, R, p, S, v, vel)
        body_acceleration(arrays, i, R, p, S, v, a, vel, acc, j0, j1, j2, j3, j4, j5, gravity)
    for i in range(n):
        motion_to_parent(world_R[i], world_p[i], vel[i], velocity[i])
        motion_to_parent(world_R[i], world_p[i], acc[i], acceleration[i])
        m, h, I = mass_c[i], first_moment_c[i], inertia_c[i]  # noqa: E741
        w0, w1, w2, u0, u1, u2 = velocity[i, 0], velocity[i, 1], velocity[i, 2], velocity[i, 3], \
            velocity[i, 4], velocity[i, 5]
        k0, k1, k2, g0, g1, g2 = inertia_apply(m, h[0], h[1], h[2], I, w0, w1, w2, u0, u1, u2)
        x = acceleration[i]
        f = inertia_apply(m, h[0], h[1], h[2], I, x[0], x[1], x[2], x[3], x[4], x[5])
        c = force_cross(w0, w1, w2, u0, u1, u2, k0, k1, k2, g0, g1, g2)
        for r in range(6):
            F[i, r] = f[r] + c[r]
        G[i, 0], G[i, 1], G[i, 2] = g0, g1, g2
        # T = [w~, I_O] - (h u^T + u h^T) + 2 (u.h) 1 - k~
        w, u, k = (w0, w1, w2), (u0, u1, u2), (k0, k1, k2)
        uh = u0 * h[0] + u1 * h[1] + u2 * h[2]
        for r in range(3):
            r1, r2 = (r + 1) % 3, (r + 2) % 3
            for col in range(3):
                # (w~ I)[r, col] = w[r1] I[r2, col] - w[r2] I[r1, col]; (I w~)[r, col] likewise by columns
                c1, c2 = (col + 1) % 3, (col + 2) % 3
                value = w[r1] * I[r2, col] - w[r2] * I[r1, col] - (I[r, c1] * w[c2] - I[r, c2] * w[c1]) \
                    - (h[r] * u[col] + u[r] * h[col])
                if col == r:
                    value += 2.0 * uh
                elif col == r1:
                    value += k[r2]
                else:
                    value -= k[r1]
                T[i, r, col] = value
    composite_sums(arrays, mass_c, first_moment_c, inertia_c)
    for i in range(n - 1, -1, -1):
        lam = parent[i]
        if lam >= 0:
            for r in range(3):
                G[lam, r] += G[i, r]
                for col in range(3):
                    T[lam, r, col] += T[i, r, col]
            for r in range(6):
                F[lam, r] += F[i, r]


@njit(cache=True, inline="always")
def column_parent_motion(arrays, i, k, v, a, velocity, acceleration, gravity, S_world, vp, ap, vj):
    """For column k of body i: vp, ap = the velocity and acceleration of the frame
    the column moves (its joint's parent; for a planar joint, after the columns
    before k), and vj = the velocity of the frame the column is fixed in."""
    lam, kind, v0 = arrays[0][i], arrays[1][i], arrays[3][i]
    for r in range(6):
        vp[r] = velocity[lam, r] if lam >= 0 else 0.0
        ap[r] = acceleration[lam, r] if lam >= 0 else 0.0
    if lam < 0:
        ap[3], ap[4], ap[5] = -gravity[0], -gravity[1], -gravity[2]
    if kind != PLANAR:
        _set(vj, velocity[i])
        return
    for c in range(k + 1):  # the planar chain x, y, theta
        s, rate = S_world[i, c], v[v0 + c]
        for r in range(6):
            vj[r] = vp[r] + s[r] * rate
        if c == k:
            break
        e = motion_cross(vj[0], vj[1], vj[2], vj[3], vj[4], vj[5], s[0], s[1], s[2], s[3], s[4], s[5])
        for r in range(6):
            ap[r] += s[r] * a[v0 + c] + e[r] * rate
            vp[r] = vj[r]
    if k == 2:
        _set(vj, velocity[i])


@njit(cache=True, inline="always")
def moved_by(kind, perturbed, column):
    """Whether a column of a joint turns when the joint's `perturbed` column moves:
    all of a floating joint's do (they are fixed in its body), a planar joint's
    linear columns do not follow its theta."""
    return not (kind == PLANAR and perturbed == 2 and column < 2)


@njit(cache=True)
def id_derivatives_kernel(packed, q, v, a, tau, dtau_dq, dtau_dv, M, buffer):
    """tau = ID(q, v, a) and its partial derivatives dtau/dq (tangent space),
    dtau/dv, dtau/da = M, O(n·depth) (module docstring). Returns INVALID_INPUT
    without computing (inputs.invalid), NONFINITE_RESULT on overflow, else 0."""
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, a):
        return INVALID_INPUT
    parent, kind, v_start, nv_joint, gravity = arrays[0], arrays[1], arrays[3], arrays[13], arrays[14]
    n = parent.shape[0]
    views = derivative_views(buffer, n)
    (R, p, S, RJ, world_R, world_p, vel, acc, velocity, acceleration, mass_c, first_moment_c, inertia_c,
     T, G, F, S_world, columns, work, spare) = views
    subtree_quantities(arrays, q, v, a, gravity, views)
    vp, ap, vj, sum_v = work[0], work[1], work[2], work[3]
    for i in range(n):
        for k in range(nv_joint[i]):
            col, s = columns[i, k], S_world[i, k]
            column_parent_motion(arrays, i, k, v, a, velocity, acceleration, gravity, S_world, vp, ap, vj)
            _set(col[_S], s)
            _cross_into(s, vp, col[_PSI])
            _cross_into(s, ap, col[_PHI])
            psi = col[_PSI]
            e = motion_cross(psi[0], psi[1], psi[2], psi[3], psi[4], psi[5], vp[0], vp[1], vp[2], vp[3], vp[4],
                             vp[5])
            for r in range(6):
                col[_PHI, r] -= e[r]
                sum_v[r] = vj[r] + vp[r]
            _cross_into(sum_v, s, col[_CHI])
            for r in range(6):
                col[_U, r] = 0.0
            _composite_apply(mass_c, first_moment_c, inertia_c, i, s, col[_U], 1.0)
            _b_transpose_apply(T, G, i, s, col[_W])
            _set(col[_DFQ], force_cross(s[0], s[1], s[2], s[3], s[4], s[5], F[i, 0], F[i, 1], F[i, 2], F[i, 3],
                                        F[i, 4], F[i, 5]))
            _composite_apply(mass_c, first_moment_c, inertia_c, i, col[_PHI], col[_DFQ], -1.0)
            _b_apply(T, G, i, col[_PSI], col[_DFQ], -1.0)
            for r in range(6):
                col[_DFV, r] = 0.0
            _b_apply(T, G, i, s, col[_DFV], 1.0)
            _composite_apply(mass_c, first_moment_c, inertia_c, i, col[_CHI], col[_DFV], 1.0)
    tau[:] = 0.0
    dtau_dq[:] = 0.0
    dtau_dv[:] = 0.0
    M[:] = 0.0
    for i in range(n):
        for kn in range(nv_joint[i]):
            cn, out = v_start[i] + kn, columns[i, kn]
            tau[cn] += _dot(out[_S], F[i])
            j = i
            while j >= 0:
                for km in range(nv_joint[j]):
                    cm, moving = v_start[j] + km, columns[j, km]
                    by_q = -(_dot(out[_U], moving[_PHI]) + _dot(out[_W], moving[_PSI]))
                    by_v = _dot(out[_W], moving[_S]) + _dot(out[_U], moving[_CHI])
                    inertia = _dot(out[_U], moving[_S])
                    if j == i:
                        if not moved_by(kind[i], km, kn):
                            by_q = _dot(out[_S], moving[_DFQ])
                        dtau_dq[cn, cm] += by_q
                        dtau_dv[cn, cm] += by_v
                        M[cn, cm] += inertia
                        continue
                    dtau_dq[cn, cm] += by_q
                    dtau_dv[cn, cm] += by_v
                    M[cn, cm] += inertia
                    dtau_dq[cm, cn] += _dot(moving[_S], out[_DFQ])
                    dtau_dv[cm, cn] += _dot(moving[_S], out[_DFV])
                    M[cm, cn] += inertia
                j = parent[j]
    return 0 if all_finite(dtau_dq) and all_finite(dtau_dv) and all_finite(M) else NONFINITE_RESULT


@njit(cache=True)
def coriolis_kernel(packed, q, v, C, buffer):
    """C(q, v) = sum_i J_i^T (I_i dJ_i/dt + 1/2 B_i J_i) in world axes (the
    Christoffel-consistent factorisation: C v = h - g, dM/dt - 2C skew), O(n·depth).
    Returns the status of id_derivatives_kernel."""
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, v):
        return INVALID_INPUT
    parent, v_start, nv_joint, gravity = arrays[0], arrays[3], arrays[13], arrays[14]
    n = parent.shape[0]
    views = derivative_views(buffer, n)
    (R, p, S, RJ, world_R, world_p, vel, acc, velocity, acceleration, mass_c, first_moment_c, inertia_c,
     T, G, F, S_world, columns, work, spare) = views
    vp, ap, vj = work[0], work[1], work[2]
    no_acceleration = spare[:v.shape[0]]
    no_acceleration[:] = 0.0
    subtree_quantities(arrays, q, v, no_acceleration, gravity, views)
    for i in range(n):
        for k in range(nv_joint[i]):
            col, s = columns[i, k], S_world[i, k]
            column_parent_motion(arrays, i, k, v, no_acceleration, velocity, acceleration, gravity, S_world, vp, ap,
                                 vj)
            _set(col[_S], s)
            _cross_into(vj, s, col[_SDOT])  # dS/dt: S is fixed in the frame moving at vj
            for r in range(6):
                col[_U, r] = 0.0
                col[_DC, r] = 0.0
            _composite_apply(mass_c, first_moment_c, inertia_c, i, s, col[_U], 1.0)
            _b_transpose_apply(T, G, i, s, col[_W])
            _composite_apply(mass_c, first_moment_c, inertia_c, i, col[_SDOT], col[_DC], 1.0)
            _b_apply(T, G, i, s, col[_DC], 0.5)
    C[:] = 0.0
    for i in range(n):
        for kn in range(nv_joint[i]):
            cn, out = v_start[i] + kn, columns[i, kn]
            j = i
            while j >= 0:
                for km in range(nv_joint[j]):
                    cm, moving = v_start[j] + km, columns[j, km]
                    C[cn, cm] += _dot(out[_U], moving[_SDOT]) + 0.5 * _dot(out[_W], moving[_S])
                    if j != i:
                        C[cm, cn] += _dot(moving[_S], out[_DC])
                j = parent[j]
    return 0 if all_finite(C) else NONFINITE_RESULT


def _buffer(model: Model) -> np.ndarray:
    return scratch(model, FLOATS_PER_BODY)


@njit(cache=True, parallel=True)
def id_derivatives_batch_kernel(packed, q, v, a, dtau_dq, dtau_dv, M, status):
    for b in prange(q.shape[0]):
        status[b] = id_derivatives_kernel(packed, q[b], v[b], a[b], np.empty(v.shape[1]), dtau_dq[b], dtau_dv[b],
                                          M[b], new_scratch(packed[1][0], FLOATS_PER_BODY))


def _states(model: Model, q, v, x, x_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """q, v, x shaped, one state or a batch of N (then N > 0)."""
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    x = inputs.shaped(model, x, model.nv, x_name)
    return q, v, x, inputs.same_batch(q, v, x)


def inverse_dynamics_derivatives(model: Model, q, v, a) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dtau_dq, dtau_dv, dtau_da), each (nv, nv), of tau = ID(q, v, a), analytic
    (Lie brackets, module docstring), O(n·depth). dtau_dq is taken in the tangent
    space: column k is d/dh ID(integrate(q, h e_k), v, a) at h = 0 (for the
    floating base, a body-frame perturbation with v and a held in body axes).
    dtau_da = M(q). A batch of N states (q (N, nq), ...) gives (N, nv, nv) each,
    computed in parallel."""
    q, v, a, batch = _states(model, q, v, a, "a")
    nv = model.nv
    shape = (batch, nv, nv) if batch else (nv, nv)
    dtau_dq, dtau_dv, M = np.empty(shape), np.empty(shape), np.empty(shape)
    if batch:
        status = np.empty(batch, dtype=np.int64)
        id_derivatives_batch_kernel(model.packed, q, v, a, dtau_dq, dtau_dv, M, status)
        failed = np.flatnonzero(status)
        if failed.size:
            b = failed[0]
            inputs.refuse(model, status[b], f"the inverse dynamics derivatives of state {b}", q[b],
                          (v[b], f"v[{b}]"), (a[b], f"a[{b}]"))
    else:
        status = id_derivatives_kernel(model.packed, q, v, a, np.empty(nv), dtau_dq, dtau_dv, M, _buffer(model))
        inputs.refuse(model, status, "the inverse dynamics derivatives", q, (v, "v"), (a, "a"))
    return dtau_dq, dtau_dv, M


def coriolis_matrix(model: Model, q, v) -> np.ndarray:
    """C(q, v) (nv, nv) with C v = h(q, v) - g(q) and dM/dt - 2C skew-symmetric:
    for coordinates with v = dq/dt, C[i, j] = sum_k Γ_ijk v_k with the
    Christoffel symbols Γ_ijk = (dM_ij/dq_k + dM_ik/dq_j - dM_jk/dq_i) / 2.
    Built as sum_i J_i^T (I_i dJ_i/dt + B_i J_i) in world axes, O(n·depth)
    (not Müller dynamics eq. 84, whose Ṁ - 2C is not skew: DESIGN.md §7, misprint 13)."""
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    v = inputs.shaped(model, v, model.nv, "v", batch=False)
    C = np.empty((model.nv, model.nv))
    inputs.refuse(model, coriolis_kernel(model.packed, q, v, C, _buffer(model)), "the Coriolis matrix", q, (v, "v"))
    return C


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


@njit(cache=True, parallel=True)
def fd_derivatives_batch_kernel(packed, dof_parent, q, v, tau, a, use_aba, da_dq, da_dv, Minv, status):
    nv = v.shape[1]
    for b in prange(q.shape[0]):
        status[b] = fd_derivatives_kernel(packed, dof_parent, q[b], v[b], tau[b], a[b], use_aba, da_dq[b], da_dv[b],
                                          Minv[b], np.empty((nv, nv)), np.empty(nv),
                                          new_scratch(packed[1][0], FLOATS_PER_BODY))


def _forward_dynamics_derivatives(model: Model, q, v, tau, batch, da_dq, da_dv, Minv):
    """forward_dynamics_derivatives of shaped states into the given (nv, nv) or (N, nv, nv) arrays."""
    use_aba = not model.has_coupled_joints
    a = np.empty(v.shape) if use_aba else forward_dynamics(model, q, v, tau)  # coupled mimics: M and a solve
    if batch:
        status = np.empty(batch, dtype=np.int64)
        fd_derivatives_batch_kernel(model.packed, model.dof_parent, q, v, tau, a, use_aba, da_dq, da_dv, Minv,
                                    status)
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


@njit(cache=True)
def id_rate_kernel(packed, q, v, a, jerk_in, tau_rate, buffer):
    """d tau/dt along q(t) with dv/dt = a, da/dt = jerk_in: the RNEA differentiated
    in time, O(n). Body axes (F&O eqs. 1-8): with the body jerks J_i (joints.body_jerk),
        dF_i/dt = I J_i + A_i x* I V_i + V_i x* I A_i,
        dtau_i/dt = S_i^T dF_i/dt + (dS_i/dt)^T F_i,
        dF_λ/dt += ^iX_λ^T (dF_i/dt + vJ_i x* F_i)   (d/dt ^iX_λ = -(vJ_i x) ^iX_λ).
    Returns the status of id_derivatives_kernel."""
    arrays = unpack_model(packed)
    if invalid(arrays, q, v, a) or invalid(arrays, q, jerk_in, jerk_in):
        return INVALID_INPUT
    parent, kind, v_start, nv_joint, gravity = arrays[0], arrays[1], arrays[3], arrays[13], arrays[14]
    mass, first_moment, rotational_inertia = arrays[9], arrays[10], arrays[11]
    n = parent.shape[0]
    R, p, S, RJ, _, _, o = kinematic_views(buffer, n)
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    jerk, o = take(buffer, o, (n, 6))
    joint_twist, o = take(buffer, o, (n, 6))
    force, o = take(buffer, o, (n, 6))
    force_rate, o = take(buffer, o, (n, 6))
    work, o = take(buffer, o, (2, 6))
    forward_pass(arrays, q, R, p, S, RJ)
    for i in range(n):
        j0, j1, j2, j3, j4, j5 = body_velocity(arrays, i, R, p, S, v, vel)
        body_acceleration(arrays, i, R, p, S, v, a, vel, acc, j0, j1, j2, j3, j4, j5, gravity)
        body_jerk(arrays, i, R, p, S, v, a, jerk_in, vel, acc, jerk, j0, j1, j2, j3, j4, j5, work[0])
        joint_twist[i, 0], joint_twist[i, 1], joint_twist[i, 2] = j0, j1, j2
        joint_twist[i, 3], joint_twist[i, 4], joint_twist[i, 5] = j3, j4, j5
        m, h, I_O = mass[i], first_moment[i], rotational_inertia[i]
        V, A, J = vel[i], acc[i], jerk[i]
        mv = inertia_apply(m, h[0], h[1], h[2], I_O, V[0], V[1], V[2], V[3], V[4], V[5])
        ma = inertia_apply(m, h[0], h[1], h[2], I_O, A[0], A[1], A[2], A[3], A[4], A[5])
        mj = inertia_apply(m, h[0], h[1], h[2], I_O, J[0], J[1], J[2], J[3], J[4], J[5])
        c = force_cross(V[0], V[1], V[2], V[3], V[4], V[5], mv[0], mv[1], mv[2], mv[3], mv[4], mv[5])
        d = force_cross(A[0], A[1], A[2], A[3], A[4], A[5], mv[0], mv[1], mv[2], mv[3], mv[4], mv[5])
        e = force_cross(V[0], V[1], V[2], V[3], V[4], V[5], ma[0], ma[1], ma[2], ma[3], ma[4], ma[5])
        for r in range(6):
            force[i, r] = ma[r] + c[r]
            force_rate[i, r] = mj[r] + d[r] + e[r]
    tau_rate[:] = 0.0
    for i in range(n - 1, -1, -1):
        v0, f, df = v_start[i], force[i], force_rate[i]
        for k in range(nv_joint[i]):
            tau_rate[v0 + k] += S[i, 0, k] * df[0] + S[i, 1, k] * df[1] + S[i, 2, k] * df[2] \
                + S[i, 3, k] * df[3] + S[i, 4, k] * df[4] + S[i, 5, k] * df[5]
        if kind[i] == PLANAR:  # dS/dt of the linear columns: -theta_dot axis x S (joints.joint_bias_add)
            axis, theta_dot = arrays[7][i], v[v0 + 2]
            for k in range(2):
                s3, s4, s5 = S[i, 3, k], S[i, 4, k], S[i, 5, k]
                tau_rate[v0 + k] -= theta_dot * ((axis[1] * s5 - axis[2] * s4) * f[3]
                                                 + (axis[2] * s3 - axis[0] * s5) * f[4]
                                                 + (axis[0] * s4 - axis[1] * s3) * f[5])
        lam = parent[i]
        if lam >= 0:
            t = joint_twist[i]
            e = force_cross(t[0], t[1], t[2], t[3], t[4], t[5], f[0], f[1], f[2], f[3], f[4], f[5])
            for r in range(6):
                work[1, r] = df[r] + e[r]
            force_to_parent_add(R[i], p[i], work[1], force_rate[lam])
            force_to_parent_add(R[i], p[i], f, force[lam])
    return 0 if all_finite(tau_rate) else NONFINITE_RESULT


def inverse_dynamics_rate(model: Model, q, v, a, j) -> np.ndarray:
    """d tau/dt (nv,) of tau = ID(q, v, a) along a trajectory through (q, v, a) with
    d³q/dt³ = j: the torque rate series-elastic actuators and jerk-limited
    controllers need. O(n) (the RNEA differentiated in time, id_rate_kernel);
    equals dtau_dq v + dtau_dv a + M j (inverse_dynamics_derivatives)."""
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    v = inputs.shaped(model, v, model.nv, "v", batch=False)
    a = inputs.shaped(model, a, model.nv, "a", batch=False)
    j = inputs.shaped(model, j, model.nv, "j", batch=False)
    tau_rate = np.empty(model.nv)
    inputs.refuse(model, id_rate_kernel(model.packed, q, v, a, j, tau_rate, scratch(model)), "the torque rate", q,
                  (v, "v"), (a, "a"), (j, "j"))
    return tau_rate
