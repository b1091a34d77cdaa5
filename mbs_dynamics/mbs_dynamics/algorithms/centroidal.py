"""Centre of mass and centroidal momentum (RBDL §6.5): the spatial momentum
of all bodies, h_O = sum_i ^0X*_i I_i v_i, taken about the centre of mass with
the force transform, k_G = k_O - c x l (not the motion transform), in
world-aligned axes; the kinetic and potential energy from the same pass;
and A_G(q) with h_G = A_G v, whose columns are the CRBA's composite momenta
I^C_i S_i in world axes (crba.composite_momenta), O(n).

The momentum h_O is gathered from the leaves to the roots in body frames (a
force transform per body), with the first moments m c the same way, so no
world placement is formed.
"""
import numpy as np
from numba import njit, types

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.crba import COMPOSITE_FLOATS_PER_BODY, add_moments_to_parent, \
    add_rotational_to_parent, composite_momenta, composite_momentum
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, PACKED_FLAT, RESULT, RESULT_MATRIX, VECTOR, \
    ExactKernel, all_finite, invalid, vectors_fit
from mbs_dynamics.multibody.joints import axis_forward_pass, body_velocity
from mbs_dynamics.multibody.model import Model, body_count, unflatten, unpack_model
from mbs_dynamics.multibody.workspace import kinematic_views, new_scratch, scratch, call_scratch, take, \
    untracked_views
from mbs_dynamics.parallel import run_batch
from mbs_dynamics.spatial.algebra import force_to_parent, inertia_times, rotate, row, store


@njit(cache=True, inline="always")
def center_of_mass_from(total_mass, first_moment):
    """c = (m c) / m, zero for a massless robot."""
    if total_mass <= 0.0:
        return 0.0, 0.0, 0.0
    return first_moment[0] / total_mass, first_moment[1] / total_mass, first_moment[2] / total_mass


@njit(cache=True, inline="always")
def moment_about(c0, c1, c2, k0, k1, k2, l0, l1, l2):
    """k - c x l: an angular momentum k about the origin, taken about the point c."""
    return k0 - (c1 * l2 - c2 * l1), k1 - (c2 * l0 - c0 * l2), k2 - (c0 * l1 - c1 * l0)


# Floats a body of momentum_kernel's layout: its KinematicViews (60), velocity,
# momentum (6 each) and mass and first moment (4): call_scratch's.
MOMENTUM_FLOATS_PER_BODY = 76


@njit(cache=True, inline="always")  # into centroidal_momentum's call: q, v and out counted in and out no more
def momentum_kernel(packed, q, v, out, buffer, energy):
    """out[0:6] = h_G = [k_G; l] (world axes, about the CoM); when `energy`,
    also out[6:9] = c and out[9] = the kinetic energy 1/2 sum_i v_i^T I_i v_i
    (body frames) + 1/2 armature v^2 (out of 10; else of 6, for h_G alone:
    centroidal_momentum). Returns INVALID_INPUT without computing when q or v
    is invalid (inputs.invalid), NONFINITE_RESULT when out overflows, else 0."""
    model = unpack_model(packed)
    if invalid(model, q, v, v[:0]):
        return INVALID_INPUT
    n = model.parent.shape[0]
    kinematics, o = kinematic_views(buffer, n)
    R, p, S = kinematics.R, kinematics.p, kinematics.S
    vel, o = take(buffer, o, (n, 6))
    momentum, o = take(buffer, o, (n, 6))  # of body i and its subtree, body frame
    moment, o = take(buffer, o, (n, 4))  # their mass and first moment, body frame
    h_O, o = take(buffer, o, (6,))  # the whole robot's momentum about the world origin, world axes
    mc_O, o = take(buffer, o, (3,))  # its first moment m c
    axis_forward_pass(packed, q, R, p, S)
    kinetic = 0.0
    for i in range(n):
        v_i, _ = body_velocity(model, i, R, p, S, v, vel)
        h_i = inertia_times(model.mass, model.first_moment, model.rotational_inertia, i, v_i)
        store(momentum, i, h_i)
        moment[i, 0] = model.mass[i]
        moment[i, 1], moment[i, 2], moment[i, 3] = model.first_moment[i, 0], model.first_moment[i, 1], \
            model.first_moment[i, 2]
        if energy:
            for k in range(6):
                kinetic += 0.5 * v_i[k] * h_i[k]
    h_O[:] = 0.0
    mc_O[:] = 0.0
    m_O = 0.0
    for i in range(n - 1, -1, -1):
        lam = model.parent[i]
        # to the parent (the world for a root): the momentum as a force vector, m c -> R (m c) + m p
        h = force_to_parent(R, p, i, row(momentum, i))
        m = moment[i, 0]
        mc = rotate(R, i, (moment[i, 1], moment[i, 2], moment[i, 3]))
        if lam < 0:
            target, target_moment = h_O, mc_O
            m_O += m
        else:
            target, target_moment = momentum[lam], moment[lam, 1:]
            moment[lam, 0] += m
        for r in range(6):
            target[r] += h[r]
        for r in range(3):
            target_moment[r] += mc[r] + m * p[i, r]
    c0, c1, c2 = center_of_mass_from(m_O, mc_O)
    out[0], out[1], out[2] = moment_about(c0, c1, c2, h_O[0], h_O[1], h_O[2], h_O[3], h_O[4], h_O[5])
    out[3], out[4], out[5] = h_O[3], h_O[4], h_O[5]
    if energy:
        out[6], out[7], out[8] = c0, c1, c2
        for k in range(v.shape[0]):  # and the rotors' (model.armature)
            kinetic += 0.5 * model.armature[k] * v[k] * v[k]
        out[9] = kinetic
    return 0 if all_finite(out) else NONFINITE_RESULT


@njit(cache=True, nogil=True)
def momentum_batch_kernel(packed, q, v, out, status):
    """momentum_kernel for each state of a batch (parallel.run_batch), with the
    energy when out has 10 columns."""
    buffer = new_scratch(body_count(packed))
    for b in range(q.shape[0]):
        status[b] = momentum_kernel(packed, q[b], v[b], out[b], buffer, out.shape[1] > 6)


@njit(cache=True, inline="always")  # into its matrix's call: q, A and com counted in and out no more
def momentum_matrix_kernel(packed, q, A, com, buffer):
    """A = A_G (6, nv) and com = c. Column j of A_O is the momentum, about the
    world origin, of the bodies moved by coordinate j at unit speed: I^C_i S_i
    in world axes (summed over the bodies whose joints coordinate j moves: a
    mimic joint's and its master's), k_G = k_O - c x l: the composites'
    masses and first moments first (c), then the columns from the leaves as
    the rotational inertias are completed. Returns the status of
    momentum_kernel."""
    model = unpack_model(packed)
    if invalid(model, q, q[:0], q[:0]):
        return INVALID_INPUT
    parent, v_start, nv_joint = model.parent, model.v_start, model.nv_joint
    n = parent.shape[0]
    composite = composite_momenta(packed, q, buffer, False)
    mass_c, first_moment_c = composite.mass_c, composite.first_moment_c
    for i in range(n - 1, -1, -1):  # the composites' masses and first moments, for c
        add_moments_to_parent(parent, i, mass_c, first_moment_c)
    total_mass = 0.0
    com[0] = com[1] = com[2] = 0.0
    for i in range(n):
        if parent[i] < 0:
            total_mass += mass_c[i]
            for r in range(3):
                com[r] += first_moment_c[i, r]
    c0, c1, c2 = center_of_mass_from(total_mass, com)
    com[0], com[1], com[2] = c0, c1, c2
    distinct = model.shared_coordinates[0] == 0  # no column that two bodies move (a mimic's and its master's)
    if not distinct:
        A[:] = 0.0
    for i in range(n - 1, -1, -1):  # the rotational inertias completed on the way
        for k in range(nv_joint[i]):
            j = v_start[i] + k
            f0, f1, f2, f3, f4, f5 = composite_momentum(composite, i, k)
            k0, k1, k2 = moment_about(c0, c1, c2, f0, f1, f2, f3, f4, f5)
            if distinct:
                A[0, j], A[1, j], A[2, j], A[3, j], A[4, j], A[5, j] = k0, k1, k2, f3, f4, f5
            else:  # summed over the bodies that coordinate j moves
                A[0, j] += k0
                A[1, j] += k1
                A[2, j] += k2
                A[3, j] += f3
                A[4, j] += f4
                A[5, j] += f5
        add_rotational_to_parent(parent, i, composite.inertia_c, False)
    return 0 if all_finite(A) and all_finite(com) else NONFINITE_RESULT


def _centroidal_momentum_call(flat, q, v, h):
    """h = h_G (6,) by momentum_kernel (without the energy) on
    model.packed_flat and a scratch buffer of its own: centroidal_momentum's
    fast path (inputs.ExactKernel). Wrong lengths: INVALID_INPUT."""
    flat, q, v, h = untracked_views((flat, q, v, h))  # borrowed (inputs.ExactKernel): plain arrays
    packed = unflatten(flat)
    if not vectors_fit(packed[1], q, v, v):
        return INVALID_INPUT
    return momentum_kernel(packed, q, v, h, call_scratch(body_count(packed), MOMENTUM_FLOATS_PER_BODY), False)


def _centroidal_momentum_matrix_call(flat, q, A):
    """A = A_G (6, nv) by momentum_matrix_kernel on model.packed_flat and a
    scratch buffer of its own: centroidal_momentum_matrix's fast path
    (inputs.ExactKernel). A wrong length: INVALID_INPUT."""
    flat, q, A = untracked_views((flat, q, A))  # arguments live until it returns: no references counted
    packed = unflatten(flat)
    if not vectors_fit(packed[1], q, A[0], A[0]):
        return INVALID_INPUT
    buffer = call_scratch(body_count(packed), COMPOSITE_FLOATS_PER_BODY)
    com, _ = take(buffer, buffer.shape[0] - 3, (3,))  # past the kernel's layout
    return momentum_matrix_kernel(packed, q, A, com, buffer)


_CENTROIDAL_MOMENTUM = ExactKernel(_centroidal_momentum_call, types.int64, PACKED_FLAT, VECTOR, VECTOR, RESULT)
_CENTROIDAL_MOMENTUM_MATRIX = ExactKernel(_centroidal_momentum_matrix_call, types.int64, PACKED_FLAT, VECTOR,
                                          RESULT_MATRIX)
_centroidal_momentum_entry = _CENTROIDAL_MOMENTUM.entry_global(globals(), "_centroidal_momentum_entry")
_centroidal_momentum_matrix_entry = _CENTROIDAL_MOMENTUM_MATRIX.entry_global(  # then the entry itself
    globals(), "_centroidal_momentum_matrix_entry")
_empty, _ndarray, _float64 = np.empty, inputs.NDARRAY, inputs.FLOAT64  # globals, not attributes: 20 ns a call


def _momentum(model: Model, q, v, energy: bool = True) -> np.ndarray:
    """[h_G (6); c (3); kinetic energy] of shaped q and v, one state or a batch;
    h_G alone (6) without `energy` (an overflow of the energy is no error then)."""
    width = 10 if energy else 6
    if q.ndim == 2:
        out = np.empty((q.shape[0], width))
        status = np.empty(q.shape[0], dtype=np.int64)
        run_batch(momentum_batch_kernel, (model.packed,), (q, v, out, status), model.nbodies)
        failed = status.any()
    else:
        out = np.empty(width)
        status = momentum_kernel(model.packed, q, v, out, scratch(model), energy)
        failed = status != 0
    if failed:
        inputs.refuse(model, status, "the centroidal momentum", q, (v, "v"))
    return out


def center_of_mass(model: Model, q) -> np.ndarray:
    """c (3,), world frame."""
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    return _momentum(model, q, np.zeros(model.nv))[6:9]


def center_of_mass_velocity(model: Model, q, v) -> np.ndarray:
    """dc/dt = l / m (3,), world axes (zero for a massless robot)."""
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    v = inputs.shaped(model, v, model.nv, "v", batch=False)
    linear = _momentum(model, q, v)[3:6]
    return linear / model.total_mass if model.total_mass > 0 else np.zeros(3)


def centroidal_momentum(model: Model, q, v) -> np.ndarray:
    """h_G = [k_G; l] (6,): angular momentum about the CoM and linear momentum,
    world-aligned axes. q, v may carry a leading batch dimension."""
    if type(q) is _ndarray and type(v) is _ndarray and q.ndim == 1 and v.ndim == 1 and q.dtype is _float64 \
            and v.dtype is _float64:  # inputs.exact(q) and inputs.exact(v)
        h = _empty(6)
        if not _centroidal_momentum_entry(model.packed_flat, q, v, h):
            return h
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    inputs.same_batch(q, v)
    return _momentum(model, q, v, energy=False)


def centroidal_state(model: Model, q, v) -> tuple[np.ndarray, np.ndarray]:
    """(h_G (6,), c (3,)): centroidal_momentum and center_of_mass from one pass."""
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    v = inputs.shaped(model, v, model.nv, "v", batch=False)
    out = _momentum(model, q, v)
    return out[:6], out[6:9]


def kinetic_energy(model: Model, q, v):
    """T = 1/2 sum_i v_i^T I_i v_i + 1/2 sum_k armature_k v_k^2 = 1/2 v^T M(q) v (J),
    O(n) from the momentum pass. q, v may carry a leading batch dimension."""
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    inputs.same_batch(q, v)
    return _momentum(model, q, v)[..., 9]


def potential_energy(model: Model, q):
    """V = -m g^T c(q) (J), zero with the CoM at the world origin; dV/dq is
    the gravity torques. q may carry a leading batch dimension."""
    q = inputs.shaped(model, q, model.nq, "q")
    c = _momentum(model, q, np.zeros(q.shape[:-1] + (model.nv,)))[..., 6:9]
    return inputs.finite(model, -model.total_mass * (c @ model.gravity), "the potential energy", (q, "q"))


def centroidal_momentum_matrix(model: Model, q) -> np.ndarray:
    """A_G (6, nv) with h_G = A_G v."""
    if type(q) is _ndarray and q.ndim == 1 and q.dtype is _float64:  # inputs.exact(q)
        A = _empty(model.jacobian_shape)
        if not _centroidal_momentum_matrix_entry(model.packed_flat, q, A):
            return A
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    A = np.empty((6, model.nv))
    status = momentum_matrix_kernel(model.packed, q, A, np.empty(3), scratch(model))
    if status:
        inputs.refuse(model, status, "the centroidal momentum matrix", q)
    return A
