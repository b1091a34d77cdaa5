"""Joint-space mass matrix by the composite rigid body algorithm (F&O eqs.
9-10, RBDL Alg. 2 with its loop corrected: walk j = λ(j) while λ(j) is a
body), in world axes: with every composite inertia I^C_i and motion subspace
^0X_i S_i expressed about the world origin, F = I^C_i S_i needs no transform
on its way up the tree, and H_ji = S_j^T F is a dot product. O(n·depth);
blocks of bodies on different branches stay zero.

A compact spatial inertia (m, h = m c, I_O) about a point is additive, so the
composite inertias are sums of ten numbers, not 6x6 congruences.
"""
from collections import namedtuple

import numpy as np
from numba import njit, types

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.kinematics import place_in_world
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, PACKED_FLAT, RESULT_MATRIX, VECTOR, ExactKernel, \
    all_finite, invalid, vectors_fit
from mbs_dynamics.multibody.joints import joint_placement, joint_world_subspace, world_subspace
from mbs_dynamics.multibody.model import Model, body_count, unflatten, unpack_model
from mbs_dynamics.multibody.workspace import kinematic_views, new_scratch, scratch, call_scratch, take, untracked_views
from mbs_dynamics.parallel import run_batch
from mbs_dynamics.spatial.algebra import inertia_times, row


@njit(cache=True, inline="always")
def world_body_inertia(model, i, world_R, world_p, mass_w, first_moment_w, inertia_w, full):
    """(mass_w[i], first_moment_w[i], inertia_w[i]): body i's spatial inertia about
    the world origin in world axes. A body's inertia about its origin o, moved to
    the world origin (rotated, then shifted by p = o):
    h_W = h' + m p,  I_W = I' + m(|p|^2 1 - p p^T) - (h' p^T + p h'^T) + 2 (h'.p) 1,
    with h' = R h and I' = R I_O R^T (the parallel-axis theorem about o, not the CoM).
    I_W's upper triangle alone unless `full` (composite_momenta's)."""
    R, p, m, first_moment = world_R[i], world_p[i], model.mass[i], model.first_moment
    h0 = R[0, 0] * first_moment[i, 0] + R[0, 1] * first_moment[i, 1] + R[0, 2] * first_moment[i, 2]
    h1 = R[1, 0] * first_moment[i, 0] + R[1, 1] * first_moment[i, 1] + R[1, 2] * first_moment[i, 2]
    h2 = R[2, 0] * first_moment[i, 0] + R[2, 1] * first_moment[i, 1] + R[2, 2] * first_moment[i, 2]
    p0, p1, p2 = p[0], p[1], p[2]
    diagonal = m * (p0 * p0 + p1 * p1 + p2 * p2) + 2.0 * (h0 * p0 + h1 * p1 + h2 * p2)
    h, I = (h0, h1, h2), model.rotational_inertia[i]  # noqa: E741
    for r in range(3):
        # row r of R I_O
        a0 = R[r, 0] * I[0, 0] + R[r, 1] * I[1, 0] + R[r, 2] * I[2, 0]
        a1 = R[r, 0] * I[0, 1] + R[r, 1] * I[1, 1] + R[r, 2] * I[2, 1]
        a2 = R[r, 0] * I[0, 2] + R[r, 1] * I[1, 2] + R[r, 2] * I[2, 2]
        for c in range(r, 3):
            value = a0 * R[c, 0] + a1 * R[c, 1] + a2 * R[c, 2] - m * p[r] * p[c] - (h[r] * p[c] + p[r] * h[c])
            if r == c:
                value += diagonal
            inertia_w[i, r, c] = value
            if full:
                inertia_w[i, c, r] = value
    mass_w[i] = m
    first_moment_w[i, 0], first_moment_w[i, 1], first_moment_w[i, 2] = h0 + m * p0, h1 + m * p1, h2 + m * p2


@njit(cache=True)
def world_body_inertias(packed, world_R, world_p, mass_w, first_moment_w, inertia_w):
    """world_body_inertia of every body."""
    model = unpack_model(packed)
    for i in range(model.parent.shape[0]):
        world_body_inertia(model, i, world_R, world_p, mass_w, first_moment_w, inertia_w, True)


@njit(cache=True, inline="always")
def add_to_parent(parent, i, mass_c, first_moment_c, inertia_c, full):
    """Body i's composite inertia added to its parent's (none for a root):
    once i's is complete, after all of its children's were added to it (about
    one point, additive). The rotational inertia's upper triangle alone
    unless `full` (world_body_inertia's)."""
    add_moments_to_parent(parent, i, mass_c, first_moment_c)
    add_rotational_to_parent(parent, i, inertia_c, full)


@njit(cache=True, inline="always")
def add_moments_to_parent(parent, i, mass_c, first_moment_c):
    """add_to_parent's mass and first moment (the CMM sums them in a pass of
    their own, for the centre of mass before the columns)."""
    lam = parent[i]
    if lam >= 0:
        mass_c[lam] += mass_c[i]
        for r in range(3):
            first_moment_c[lam, r] += first_moment_c[i, r]


@njit(cache=True, inline="always")
def add_rotational_to_parent(parent, i, inertia_c, full):
    """add_to_parent's rotational inertia (the upper triangle unless `full`)."""
    lam = parent[i]
    if lam >= 0:
        for r in range(3):
            for c in range(0 if full else r, 3):
                inertia_c[lam, r, c] += inertia_c[i, r, c]


@njit(cache=True, inline="always")
def composite_sums(packed, mass_c, first_moment_c, inertia_c):
    """World inertias of bodies (world_body_inertias) -> composites: each body's plus
    those of every body it carries, summed leaves to root (add_to_parent)."""
    model = unpack_model(packed)
    for i in range(model.parent.shape[0] - 1, -1, -1):
        add_to_parent(model.parent, i, mass_c, first_moment_c, inertia_c, True)


@njit(cache=True)
def world_motion_subspaces(packed, S, world_R, world_p, out):
    """out[i, k] = ^0X_i S_i[:, k] for every body (joints.world_subspace)."""
    model = unpack_model(packed)
    for i in range(model.parent.shape[0]):
        world_subspace(model, i, S, world_R, world_p, out)


# What the CRBA needs from q (composite_momenta): each body's composite inertia
# (mass_c, first_moment_c, inertia_c: the upper triangle of its rotational part)
# and motion subspace S_world about the world origin in world axes.
CompositeViews = namedtuple("CompositeViews", ("mass_c", "first_moment_c", "inertia_c", "S_world"))
# Floats a body of composite_momenta's layout: its KinematicViews (60) and
# CompositeViews (49): a call's scratch (call_scratch) on the stack up
# to 35 bodies (TALOS's 33 too, where call_scratch's was on the heap).
COMPOSITE_FLOATS_PER_BODY = 109


@njit(cache=True, inline="always")
def composite_momenta(packed, q, buffer, placed):
    """The CompositeViews of `buffer` at q, after its KinematicViews (world
    placements), each body's own inertia in place of its composite: the
    caller completes them from the leaves (add_to_parent after a body's
    columns, in the loop that reads them: one pass where composite_sums
    took one of its own). Where `placed`, the joint placements R, p of the
    KinematicViews are those at q already (a pass at q on the same buffer
    left them: rnea_kernel's), not computed again."""
    model = unpack_model(packed)
    n = model.parent.shape[0]
    kinematics, o = kinematic_views(buffer, n)
    mass_c, o = take(buffer, o, (n,))
    first_moment_c, o = take(buffer, o, (n, 3))
    inertia_c, o = take(buffer, o, (n, 3, 3))
    S_world, o = take(buffer, o, (n, 6, 6))
    R, p, S, world_R, world_p = kinematics.R, kinematics.p, kinematics.S, kinematics.world_R, kinematics.world_p
    for i in range(n):  # body_poses_kernel, world_motion_subspaces and world_body_inertias in one pass
        if not placed:
            joint_placement(model, i, q, R, p)
        place_in_world(i, model.parent[i], R, p, world_R, world_p)
        joint_world_subspace(model, i, q, S, world_R, world_p, S_world)
        world_body_inertia(model, i, world_R, world_p, mass_c, first_moment_c, inertia_c, False)
    return CompositeViews(mass_c, first_moment_c, inertia_c, S_world)


@njit(cache=True, inline="always")
def composite_momentum(composite, i, k):
    """I^C_i (^0X_i S_i)[:, k], a 6-tuple: the momentum of body i's subtree
    (its composite complete: composite_momenta) moved by column k at unit
    speed, world axes, about the world origin (a
    tuple, kept in registers: stored to scratch and read back, the UR5's M
    took 10 % longer, TALOS's 13 %)."""
    return inertia_times(composite.mass_c, composite.first_moment_c, composite.inertia_c, i,
                         row(composite.S_world[i], k), True)


@njit(cache=True, inline="always")
def composite_inertias(packed, model, q, M, buffer, full, placed):
    """M += the CRBA's H (F&O eqs. 9-10), from the leaves: f = I^C_i S_i[:, k]
    (world axes, about the world origin), H_ji = S_j^T f for i's own
    coordinates j (H_ii), then for each j on the path to the root; and the
    armature on the diagonal. Touches only the entries of coordinates on one
    path to the root: both triangles if `full`, else the lower alone (what
    the sparse factor reads, without the column stores of the upper);
    placed: composite_momenta's."""
    parent, v_start, nv_joint = model.parent, model.v_start, model.nv_joint
    composite = composite_momenta(packed, q, buffer, placed)
    S = composite.S_world
    for i in range(parent.shape[0] - 1, -1, -1):
        ni, vi = nv_joint[i], v_start[i]
        for k in range(ni):
            f0, f1, f2, f3, f4, f5 = composite_momentum(composite, i, k)
            for m in range(k, ni):  # H_ii = S_i^T F, its lower triangle mirrored: M exactly symmetric
                value = S[i, m, 0] * f0 + S[i, m, 1] * f1 + S[i, m, 2] * f2 + S[i, m, 3] * f3 + S[i, m, 4] * f4 \
                    + S[i, m, 5] * f5
                M[vi + m, vi + k] += value
                if m != k and full:
                    M[vi + k, vi + m] += value
            j = parent[i]
            while j >= 0:  # H_ji = S_j^T F, H_ij = H_ji^T
                nj, vj = nv_joint[j], v_start[j]
                for m in range(nj):
                    value = S[j, m, 0] * f0 + S[j, m, 1] * f1 + S[j, m, 2] * f2 + S[j, m, 3] * f3 \
                        + S[j, m, 4] * f4 + S[j, m, 5] * f5
                    M[vi + k, vj + m] += value
                    if full:
                        M[vj + m, vi + k] += value
                j = parent[j]
        add_to_parent(parent, i, composite.mass_c, composite.first_moment_c, composite.inertia_c, False)
    for k in range(M.shape[0]):
        M[k, k] += model.armature[k]


@njit(cache=True, inline="always")  # into mass_matrix's call: q and M counted in and out no more (crba_kernel's)
def crba(packed, q, M, buffer):
    """M(q) by the CRBA (composite_inertias), every entry written. Returns
    INVALID_INPUT without computing when q is invalid (inputs.invalid),
    NONFINITE_RESULT when M overflows, else 0."""
    model = unpack_model(packed)
    if invalid(model, q, q[:0], q[:0]):
        return INVALID_INPUT
    for r in range(M.shape[0]):
        for c in range(M.shape[1]):
            M[r, c] = 0.0
    composite_inertias(packed, model, q, M, buffer, True, False)
    return 0 if all_finite(M) else NONFINITE_RESULT


@njit(cache=True)
def crba_kernel(packed, q, M, buffer):
    """crba, compiled once for the callers that need not inline it (batches,
    the coupled forward dynamics, mass_matrix's checked path)."""
    return crba(packed, q, M, buffer)


@njit(cache=True)
def crba_paths_kernel(packed, dof_parent, q, M, buffer, placed):
    """crba_kernel writing only the entries M[k, j] of each coordinate k
    and those j on its path to the root (dof_parent), the lower triangle, the
    rest left as they were: what the sparse factor (ltl_factor) reads, at a cost
    that grows with the coordinates and their depth, not with their square
    (a hundred free objects: nv = 609). placed (np.bool_: a literal would be
    compiled apart): the buffer holds the joint placements at q, rnea_kernel's
    on it (composite_momenta). Same returns."""
    model = unpack_model(packed)
    if invalid(model, q, q[:0], q[:0]):
        return INVALID_INPUT
    for k in range(M.shape[0]):
        j = k
        while j >= 0:
            M[k, j] = 0.0
            j = dof_parent[j]
    composite_inertias(packed, model, q, M, buffer, False, placed)
    for k in range(M.shape[0]):
        j = k
        while j >= 0:
            if not np.isfinite(M[k, j]):
                return NONFINITE_RESULT
            j = dof_parent[j]
    return 0


@njit(cache=True, nogil=True)
def crba_batch_kernel(packed, q, M, status):
    """crba_kernel for each state of a batch (parallel.run_batch)."""
    buffer = new_scratch(body_count(packed))
    for b in range(q.shape[0]):
        status[b] = crba_kernel(packed, q[b], M[b], buffer)


def _mass_matrix_call(flat, q, M):
    """crba on model.packed_flat and a scratch buffer of its own:
    mass_matrix's fast path (inputs.ExactKernel). A wrong length: INVALID_INPUT."""
    flat, q, M = untracked_views((flat, q, M))  # arguments live until it returns: no references counted
    packed = unflatten(flat)
    if not (vectors_fit(packed[1], q, M[0], M[0]) and M.shape[0] == M.shape[1]):
        return INVALID_INPUT
    return crba(packed, q, M, call_scratch(body_count(packed), COMPOSITE_FLOATS_PER_BODY))


_MASS_MATRIX = ExactKernel(_mass_matrix_call, types.int64, PACKED_FLAT, VECTOR, RESULT_MATRIX)
_mass_matrix_entry = _MASS_MATRIX.entry_global(globals(), "_mass_matrix_entry")  # then the entry itself
_empty, _ndarray, _float64 = np.empty, inputs.NDARRAY, inputs.FLOAT64  # globals, not attributes: 20 ns a call


def mass_matrix(model: Model, q) -> np.ndarray:
    """M(q), (nv, nv), full and symmetric (CRBA); q may carry a leading batch dimension."""
    if type(q) is _ndarray and q.ndim == 1 and q.dtype is _float64:  # inputs.exact(q)
        M = _empty(model.mass_matrix_shape)
        if not _mass_matrix_entry(model.packed_flat, q, M):
            return M
    q = inputs.shaped(model, q, model.nq, "q")
    if q.ndim == 2:
        M = np.empty((q.shape[0], model.nv, model.nv))
        status = np.empty(q.shape[0], dtype=np.int64)
        run_batch(crba_batch_kernel, (model.packed,), (q, M, status), model.nbodies)
        failed = status.any()
    else:
        M = np.empty((model.nv, model.nv))
        status = crba_kernel(model.packed, q, M, scratch(model))
        failed = status != 0
    if failed:
        inputs.refuse(model, status, "the mass matrix", q)
    return M


# --- M = L^T L with the tree's sparsity (Featherstone RBDA §6.5) ---------------
# L is lower triangular with L[k, j] != 0 only for j on k's path to the root
# (model.dof_parent): factoring and solving cost O(sum of depth²) instead of O(n³).


@njit(cache=True)
def ltl_factor(M, dof_parent):
    """Overwrite the lower triangle of M (symmetric, positive definite) with L,
    M = L^T L (RBDA Table 6.3, LTL). Returns the coordinate whose pivot is not
    positive (M singular there), or -1."""
    for k in range(M.shape[0] - 1, -1, -1):
        if not M[k, k] > 0.0:
            return k
        pivot = np.sqrt(M[k, k])
        M[k, k] = pivot
        i = dof_parent[k]
        while i >= 0:
            M[k, i] /= pivot
            i = dof_parent[i]
        i = dof_parent[k]
        while i >= 0:
            j, factor = i, M[k, i]  # in a register (a store into M could otherwise change it: reloaded each time)
            while j >= 0:
                M[i, j] -= factor * M[k, j]
                j = dof_parent[j]
            i = dof_parent[i]
    return -1


@njit(cache=True, inline="always")
def ltl_solve_transposed(L, dof_parent, x):
    """x <- L^-T x (back substitution up the tree, RBDA Table 6.4)."""
    for i in range(x.shape[0] - 1, -1, -1):
        value = x[i] / L[i, i]
        x[i] = value
        j = dof_parent[i]
        while j >= 0:
            x[j] -= L[i, j] * value
            j = dof_parent[j]


@njit(cache=True, inline="always")
def ltl_solve_transposed_paths(L, dof_parent, X, deepest, other):
    """X <- X L^-1 (each row x <- L^-T x) for rows X (rows, n) zero outside
    the paths from coordinates `deepest` and `other` (-1: none) to the root:
    the result is zero outside them too (rows of the Jacobian of one body,
    or of the relative velocity of two). The union of the paths is walked by
    decreasing coordinate, each one's descendants first, once for all rows."""
    a, b = deepest, other
    if b < 0:  # one path: without the union's branches
        while a >= 0:
            pivot = L[a, a]
            for g in range(X.shape[0]):
                X[g, a] /= pivot
            j = dof_parent[a]
            while j >= 0:
                factor = L[a, j]
                for g in range(X.shape[0]):
                    X[g, j] -= factor * X[g, a]
                j = dof_parent[j]
            a = dof_parent[a]
    while a >= 0 or b >= 0:
        i = max(a, b)
        pivot = L[i, i]
        for g in range(X.shape[0]):
            X[g, i] /= pivot
        j = dof_parent[i]
        while j >= 0:
            factor = L[i, j]
            for g in range(X.shape[0]):
                X[g, j] -= factor * X[g, i]
            j = dof_parent[j]
        if a == i:
            a = dof_parent[a]
        if b == i:
            b = dof_parent[b]


@njit(cache=True, inline="always")
def ltl_solve_lower(L, dof_parent, x):
    """x <- L^-1 x (forward substitution down the tree)."""
    for i in range(x.shape[0]):
        total = x[i]  # summed in a register: stored at each term, each waited on the store before
        j = dof_parent[i]
        while j >= 0:
            total -= L[i, j] * x[j]
            j = dof_parent[j]
        x[i] = total / L[i, i]


@njit(cache=True)
def ltl_solve(L, dof_parent, x):
    """x <- M^-1 x = L^-1 L^-T x."""
    ltl_solve_transposed(L, dof_parent, x)
    ltl_solve_lower(L, dof_parent, x)


# The same on a dense matrix (dof_parent[i] = i - 1, each coordinate's parent the one before): each entry
# gets the same operations in the same order (the same bits), along rows instead of a walk of the parents
# (whose loop waited on each parent's load: in the Coulomb solver's polish, TALOS's 24 rows, most of its time).


@njit(cache=True)
def ltl_factor_dense(A):
    """ltl_factor of a dense A (dof_parent[i] = i - 1)."""
    for k in range(A.shape[0] - 1, -1, -1):
        if not A[k, k] > 0.0:
            return k
        pivot = np.sqrt(A[k, k])
        A[k, k] = pivot
        for i in range(k):
            A[k, i] /= pivot
        for i in range(k):  # each entry once a k: any order of the rows
            factor = A[k, i]
            for j in range(i + 1):
                A[i, j] -= factor * A[k, j]
    return -1


@njit(cache=True)
def ltl_solve_dense(L, x):
    """ltl_solve with ltl_factor_dense's L: x <- L^-1 L^-T x."""
    for i in range(x.shape[0] - 1, -1, -1):  # L^-T: each x[j] once an i
        x[i] /= L[i, i]
        value = x[i]
        for j in range(i):
            x[j] -= L[i, j] * value
    for i in range(x.shape[0]):  # L^-1: each sum in the parents' order, i - 1 down to 0
        total = x[i]
        for j in range(i - 1, -1, -1):
            total -= L[i, j] * x[j]
        x[i] = total / L[i, i]


@njit(cache=True)
def ltl_solve_rows(L, dof_parent, X):
    """X <- M^-1 X for a matrix X, M = L^T L: ltl_solve on every column at once,
    as operations on whole rows (contiguous, vectorised)."""
    n, m = X.shape
    for i in range(n - 1, -1, -1):  # L^-T
        pivot = 1.0 / L[i, i]
        for c in range(m):
            X[i, c] *= pivot
        j = dof_parent[i]
        while j >= 0:
            factor = L[i, j]
            for c in range(m):
                X[j, c] -= factor * X[i, c]
            j = dof_parent[j]
    for i in range(n):  # L^-1
        j = dof_parent[i]
        while j >= 0:
            factor = L[i, j]
            for c in range(m):
                X[i, c] -= factor * X[j, c]
            j = dof_parent[j]
        pivot = 1.0 / L[i, i]
        for c in range(m):
            X[i, c] *= pivot
