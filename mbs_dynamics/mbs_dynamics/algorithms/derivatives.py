"""Derivatives of the dynamics (Müller dynamics §2, §6): analytic partial
derivatives of the inverse dynamics, the Coriolis matrix from the
Christoffel symbols and the time derivative of the inverse-dynamics torques;
those of the forward dynamics and the linearised state-space model are in
forward_derivatives.py.

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
from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.crba import composite_sums, world_body_inertias, world_motion_subspaces
from mbs_dynamics.algorithms.kinematics import body_poses_kernel
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, all_finite, invalid
from mbs_dynamics.multibody.joints import body_acceleration, body_jerk, body_velocity, forward_pass
from mbs_dynamics.multibody.model import PLANAR, Model, body_count, unpack_model
from mbs_dynamics.multibody.workspace import kinematic_views, new_scratch, scratch, take
from mbs_dynamics.parallel import run_batch
from mbs_dynamics.spatial.algebra import add, force_cross, force_to_parent, inertia_times, motion_cross, motion_to_parent, \
    row, store, store_add

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
    y = inertia_times(mass_c, first_moment_c, inertia_c, i, x)
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


# The derivative kernels' layout of their scratch buffer (derivative_views): the
# kinematics; body twists and accelerations in body axes (vel, acc), then in
# world axes about the world origin (velocity, acceleration); the subtrees'
# composite inertias, B^C as (T, G) (_b_apply) and wrenches F; the world joint
# screws; the per-column vectors columns[i, k, row] (rows _S ... _SDOT); 4 x 6
# and 6 n floats of scratch.
DerivativeViews = namedtuple("DerivativeViews", (
    "R", "p", "S", "world_R", "world_p", "vel", "acc", "velocity", "acceleration", "mass_c", "first_moment_c",
    "inertia_c", "T", "G", "F", "S_world", "columns", "work", "spare"))


@njit(cache=True, inline="always")
def derivative_views(buffer, n):
    """The DerivativeViews of the scratch buffer."""
    kinematics, o = kinematic_views(buffer, n)
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    velocity, o = take(buffer, o, (n, 6))
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
    return DerivativeViews(kinematics.R, kinematics.p, kinematics.S, kinematics.world_R, kinematics.world_p, vel, acc,
                           velocity, acceleration, mass_c, first_moment_c, inertia_c, T, G, F, S_world, columns, work,
                           spare)


@njit(cache=True)
def subtree_quantities(packed, q, v, a, gravity, views):
    """World velocities and accelerations (with -gravity at the root) of every
    body; and of every subtree: its inertia I^C, B^C (as T, G; _b_apply) and the
    wrench F = sum of I a + v x* I v (F&O eq. 5, in world axes)."""
    model = unpack_model(packed)
    R, p, S, world_R = views.R, views.p, views.S, views.world_R
    world_p, vel, acc, velocity = views.world_p, views.vel, views.acc, views.velocity
    acceleration, mass_c = views.acceleration, views.mass_c
    first_moment_c, inertia_c = views.first_moment_c, views.inertia_c
    T, G, F, S_world = views.T, views.G, views.F, views.S_world
    parent = model.parent
    n = parent.shape[0]
    body_poses_kernel(packed, q, R, p, S, world_R, world_p)
    world_motion_subspaces(packed, S, world_R, world_p, S_world)
    world_body_inertias(packed, world_R, world_p, mass_c, first_moment_c, inertia_c)
    for i in range(n):
        v_i, vJ = body_velocity(model, i, R, p, S, v, vel)
        body_acceleration(model, i, R, p, S, v, a, acc, v_i, vJ, gravity)
    for i in range(n):
        V = motion_to_parent(world_R, world_p, i, row(vel, i))
        dV = motion_to_parent(world_R, world_p, i, row(acc, i))
        store(velocity, i, V)
        store(acceleration, i, dV)
        h, I = first_moment_c[i], inertia_c[i]  # noqa: E741
        w0, w1, w2, u0, u1, u2 = V
        IV = inertia_times(mass_c, first_moment_c, inertia_c, i, V)
        k0, k1, k2, g0, g1, g2 = IV
        store(F, i, add(inertia_times(mass_c, first_moment_c, inertia_c, i, dV), force_cross(V, IV)))  # F&O eq. 3
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
    composite_sums(packed, mass_c, first_moment_c, inertia_c)
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
def column_parent_motion(model, i, k, v, a, velocity, acceleration, gravity, S_world, vp, ap, vj):
    """For column k of body i: vp, ap = the velocity and acceleration of the frame
    the column moves (its joint's parent; for a planar joint, after the columns
    before k), and vj = the velocity of the frame the column is fixed in."""
    lam, kind, v0 = model.parent[i], model.joint_type[i], model.v_start[i]
    for r in range(6):
        vp[r] = velocity[lam, r] if lam >= 0 else 0.0
        ap[r] = acceleration[lam, r] if lam >= 0 else 0.0
    if lam < 0:
        ap[3], ap[4], ap[5] = -gravity[0], -gravity[1], -gravity[2]
    if kind != PLANAR:
        vj[:] = velocity[i]
        return
    for c in range(k + 1):  # the planar chain x, y, theta
        s, rate = S_world[i, c], v[v0 + c]
        for r in range(6):
            vj[r] = vp[r] + s[r] * rate
        if c == k:
            break
        e = motion_cross(vj, s)
        for r in range(6):
            ap[r] += s[r] * a[v0 + c] + e[r] * rate
            vp[r] = vj[r]
    if k == 2:
        vj[:] = velocity[i]


@njit(cache=True, inline="always")
def moved_by(kind, perturbed, column):
    """Whether a column of a joint turns when the joint's `perturbed` column moves:
    all of a floating joint's do (they are fixed in its body), a planar joint's
    linear columns do not follow its theta."""
    return not (kind == PLANAR and perturbed == 2 and column < 2)


@njit(cache=True)
def column_inertias(packed, buffer):
    """Per column k of body i (columns[i, k]): S, U = I^C_i S and W = B^C_i^T S,
    which depend on q and v only."""
    model = unpack_model(packed)
    views = derivative_views(buffer, model.parent.shape[0])
    mass_c, first_moment_c, inertia_c = views.mass_c, views.first_moment_c, views.inertia_c
    T, G, S_world, columns = views.T, views.G, views.S_world, views.columns
    for i in range(model.parent.shape[0]):
        for k in range(model.nv_joint[i]):
            col, s = columns[i, k], S_world[i, k]
            store(col, _S, s)
            for r in range(6):
                col[_U, r] = 0.0
            _composite_apply(mass_c, first_moment_c, inertia_c, i, s, col[_U], 1.0)
            _b_transpose_apply(T, G, i, s, col[_W])


@njit(cache=True)
def column_motions(packed, v, a, buffer):
    """Per column (after column_inertias, with the accelerations of a): ψ, φ, χ
    (module docstring), dF/dq = S x* F - I^C φ - B^C ψ and dF/dv = B^C S + I^C χ."""
    model = unpack_model(packed)
    views = derivative_views(buffer, model.parent.shape[0])
    gravity, velocity, acceleration = model.gravity, views.velocity, views.acceleration
    mass_c, first_moment_c, inertia_c = views.mass_c, views.first_moment_c, views.inertia_c
    T, G, F, S_world, columns = views.T, views.G, views.F, views.S_world, views.columns
    vp, ap, vj, sum_v = views.work[0], views.work[1], views.work[2], views.work[3]
    for i in range(model.parent.shape[0]):
        for k in range(model.nv_joint[i]):
            col, s = columns[i, k], S_world[i, k]
            column_parent_motion(model, i, k, v, a, velocity, acceleration, gravity, S_world, vp, ap, vj)
            store(col, _PSI, motion_cross(s, vp))
            store(col, _PHI, motion_cross(s, ap))
            psi = col[_PSI]
            e = motion_cross(psi, vp)
            for r in range(6):
                col[_PHI, r] -= e[r]
                sum_v[r] = vj[r] + vp[r]
            store(col, _CHI, motion_cross(sum_v, s))
            store(col, _DFQ, force_cross(s, row(F, i)))
            _composite_apply(mass_c, first_moment_c, inertia_c, i, col[_PHI], col[_DFQ], -1.0)
            _b_apply(T, G, i, col[_PSI], col[_DFQ], -1.0)
            for r in range(6):
                col[_DFV, r] = 0.0
            _b_apply(T, G, i, s, col[_DFV], 1.0)
            _composite_apply(mass_c, first_moment_c, inertia_c, i, col[_CHI], col[_DFV], 1.0)


@njit(cache=True)
def column_pairs(packed, buffer, M, dtau_dq, dtau_dv, inertia, partials):
    """Over the pairs of columns n, m with m on n's path to the root (a coupled
    mimic shares its master's coordinate: pairs of a coordinate add up): when
    `inertia`, M = dtau/da (U_n . S_m, after column_inertias) plus the rotors'
    armature on the diagonal; when `partials`, dtau/dq and dtau/dv (after
    column_motions; the module docstring's formulas). One pass for both."""
    model = unpack_model(packed)
    parent, kind, v_start, nv_joint = model.parent, model.joint_type, model.v_start, model.nv_joint
    columns = derivative_views(buffer, parent.shape[0]).columns
    if inertia:
        M[:] = 0.0
    if partials:
        dtau_dq[:] = 0.0
        dtau_dv[:] = 0.0
    for i in range(parent.shape[0]):
        for kn in range(nv_joint[i]):
            cn, out = v_start[i] + kn, columns[i, kn]
            j = i
            while j >= 0:
                for km in range(nv_joint[j]):
                    cm, moving = v_start[j] + km, columns[j, km]
                    if inertia:
                        inertia_nm = _dot(out[_U], moving[_S])
                        M[cn, cm] += inertia_nm
                        if j != i:
                            M[cm, cn] += inertia_nm
                    if not partials:
                        continue
                    by_q = -(_dot(out[_U], moving[_PHI]) + _dot(out[_W], moving[_PSI]))
                    dtau_dv[cn, cm] += _dot(out[_W], moving[_S]) + _dot(out[_U], moving[_CHI])
                    if j == i:
                        if not moved_by(kind[i], km, kn):
                            by_q = _dot(out[_S], moving[_DFQ])
                        dtau_dq[cn, cm] += by_q
                        continue
                    dtau_dq[cn, cm] += by_q
                    dtau_dq[cm, cn] += _dot(moving[_S], out[_DFQ])
                    dtau_dv[cm, cn] += _dot(moving[_S], out[_DFV])
                j = parent[j]
    if inertia:
        for k in range(M.shape[0]):
            M[k, k] += model.armature[k]


@njit(cache=True)
def id_derivatives_kernel(packed, q, v, a, tau, dtau_dq, dtau_dv, M, buffer):
    """tau = ID(q, v, a) and its partial derivatives dtau/dq (tangent space),
    dtau/dv, dtau/da = M, O(n·depth) (module docstring). Returns INVALID_INPUT
    without computing (inputs.invalid), NONFINITE_RESULT on overflow, else 0."""
    model = unpack_model(packed)
    if invalid(model, q, v, a):
        return INVALID_INPUT
    parent, v_start, nv_joint = model.parent, model.v_start, model.nv_joint
    views = derivative_views(buffer, parent.shape[0])
    subtree_quantities(packed, q, v, a, model.gravity, views)
    column_inertias(packed, buffer)
    column_motions(packed, v, a, buffer)
    F, S_world = views.F, views.S_world
    tau[:] = 0.0
    for i in range(parent.shape[0]):
        for k in range(nv_joint[i]):
            tau[v_start[i] + k] += _dot(S_world[i, k], F[i])
    for k in range(tau.shape[0]):  # the rotors (model.armature)
        tau[k] += model.armature[k] * a[k]
    column_pairs(packed, buffer, M, dtau_dq, dtau_dv, True, True)
    return 0 if all_finite(dtau_dq) and all_finite(dtau_dv) and all_finite(M) else NONFINITE_RESULT


@njit(cache=True)
def coriolis_kernel(packed, q, v, C, buffer):
    """C(q, v) = sum_i J_i^T (I_i dJ_i/dt + 1/2 B_i J_i) in world axes (the
    Christoffel-consistent factorisation: C v = h - g, dM/dt - 2C skew), O(n·depth).
    Returns the status of id_derivatives_kernel."""
    model = unpack_model(packed)
    if invalid(model, q, v, v):
        return INVALID_INPUT
    parent, v_start, nv_joint, gravity = model.parent, model.v_start, model.nv_joint, model.gravity
    n = parent.shape[0]
    views = derivative_views(buffer, n)
    velocity, acceleration, mass_c = views.velocity, views.acceleration, views.mass_c
    first_moment_c, inertia_c = views.first_moment_c, views.inertia_c
    T, G, S_world, columns = views.T, views.G, views.S_world, views.columns
    work, spare = views.work, views.spare
    vp, ap, vj = work[0], work[1], work[2]
    no_acceleration = spare[:v.shape[0]]
    no_acceleration[:] = 0.0
    subtree_quantities(packed, q, v, no_acceleration, gravity, views)
    for i in range(n):
        for k in range(nv_joint[i]):
            col, s = columns[i, k], S_world[i, k]
            column_parent_motion(model, i, k, v, no_acceleration, velocity, acceleration, gravity, S_world, vp, ap,
                                 vj)
            store(col, _S, s)
            store(col, _SDOT, motion_cross(vj, s))  # dS/dt: S is fixed in the frame moving at vj
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


@njit(cache=True, nogil=True)
def id_derivatives_batch_kernel(packed, q, v, a, dtau_dq, dtau_dv, M, status):
    """id_derivatives_kernel for each state of a batch (parallel.run_batch)."""
    tau, buffer = np.empty(v.shape[1]), new_scratch(body_count(packed), FLOATS_PER_BODY)
    for b in range(q.shape[0]):
        status[b] = id_derivatives_kernel(packed, q[b], v[b], a[b], tau, dtau_dq[b], dtau_dv[b], M[b], buffer)


def _states(model: Model, q, v, x, x_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """q, v, x shaped, one state or a batch of N (then N > 0)."""
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    x = inputs.shaped(model, x, model.nv, x_name)
    if q.ndim == v.ndim == x.ndim == 1:  # one state, at no cost
        return q, v, x, 0
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
        run_batch(id_derivatives_batch_kernel, (model.packed,), (q, v, a, dtau_dq, dtau_dv, M, status), model.nbodies)
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
def id_rate_kernel(packed, q, v, a, jerk_in, tau_rate, buffer):
    """d tau/dt along q(t) with dv/dt = a, da/dt = jerk_in: the RNEA differentiated
    in time, O(n). Body axes (F&O eqs. 1-8): with the body jerks J_i (joints.body_jerk),
        dF_i/dt = I J_i + A_i x* I V_i + V_i x* I A_i,
        dtau_i/dt = S_i^T dF_i/dt + (dS_i/dt)^T F_i,
        dF_λ/dt += ^iX_λ^T (dF_i/dt + vJ_i x* F_i)   (d/dt ^iX_λ = -(vJ_i x) ^iX_λ).
    Returns the status of id_derivatives_kernel."""
    model = unpack_model(packed)
    if invalid(model, q, v, a) or invalid(model, q, jerk_in, jerk_in):
        return INVALID_INPUT
    parent, kind, v_start, nv_joint = model.parent, model.joint_type, model.v_start, model.nv_joint
    gravity = model.gravity
    mass, first_moment, rotational_inertia = model.mass, model.first_moment, model.rotational_inertia
    n = parent.shape[0]
    kinematics, o = kinematic_views(buffer, n)
    R, p, S = kinematics.R, kinematics.p, kinematics.S
    vel, o = take(buffer, o, (n, 6))
    acc, o = take(buffer, o, (n, 6))
    jerk, o = take(buffer, o, (n, 6))
    joint_twist, o = take(buffer, o, (n, 6))
    force, o = take(buffer, o, (n, 6))
    force_rate, o = take(buffer, o, (n, 6))
    forward_pass(packed, q, R, p, S)
    for i in range(n):
        v_i, vJ = body_velocity(model, i, R, p, S, v, vel)
        a_i = body_acceleration(model, i, R, p, S, v, a, acc, v_i, vJ, gravity)
        body_jerk(model, i, R, p, S, v, a, jerk_in, jerk, v_i, a_i, vJ)
        store(joint_twist, i, vJ)
        mv = inertia_times(mass, first_moment, rotational_inertia, i, v_i)
        ma = inertia_times(mass, first_moment, rotational_inertia, i, a_i)
        mj = inertia_times(mass, first_moment, rotational_inertia, i, row(jerk, i))
        store(force, i, add(ma, force_cross(v_i, mv)))
        store(force_rate, i, add(mj, add(force_cross(a_i, mv), force_cross(v_i, ma))))
    tau_rate[:] = 0.0
    for i in range(n - 1, -1, -1):
        v0, f, df = v_start[i], force[i], force_rate[i]
        for k in range(nv_joint[i]):
            tau_rate[v0 + k] += S[i, 0, k] * df[0] + S[i, 1, k] * df[1] + S[i, 2, k] * df[2] \
                + S[i, 3, k] * df[3] + S[i, 4, k] * df[4] + S[i, 5, k] * df[5]
        if kind[i] == PLANAR:  # dS/dt of the linear columns: -theta_dot axis x S (joints.joint_bias)
            axis, theta_dot = model.axis[i], v[v0 + 2]
            for k in range(2):
                s3, s4, s5 = S[i, 3, k], S[i, 4, k], S[i, 5, k]
                tau_rate[v0 + k] -= theta_dot * ((axis[1] * s5 - axis[2] * s4) * f[3]
                                                 + (axis[2] * s3 - axis[0] * s5) * f[4]
                                                 + (axis[0] * s4 - axis[1] * s3) * f[5])
        lam = parent[i]
        if lam >= 0:
            store_add(force_rate, lam, force_to_parent(R, p, i, add(row(force_rate, i),
                                                                    force_cross(row(joint_twist, i), f))))
            store_add(force, lam, force_to_parent(R, p, i, row(force, i)))
    for k in range(tau_rate.shape[0]):  # the rotors: d/dt (armature a)
        tau_rate[k] += model.armature[k] * jerk_in[k]
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
