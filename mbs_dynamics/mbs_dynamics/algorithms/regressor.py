"""The joint torque regressor: inverse dynamics is linear in the inertial
parameters,

    tau = Y(q, v, a) pi + armature a,

with pi the 10 parameters of each body in Pinocchio's order (INERTIAL_PARAMETERS)

    [m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]

(c the centre of mass, I the rotational inertia about the body origin, both in
the body frame), body after body: Y is (nv, 10 nbodies), Pinocchio's
computeJointTorqueRegressor. The body's wrench I a + v x* I v (F&O eq. 3) is
linear in its parameters, f_i = Y_i(v_i, a_i) pi_i (newton_euler_column), and
joint j carries every wrench of its subtree (F&O eqs. 5-6):

    Y[j, i] = S_j^T ^jX_i^* Y_i      for j on the path from body i to the root.
"""
import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.rnea import body_motion_views
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, all_finite, invalid
from mbs_dynamics.multibody.joints import body_acceleration, body_velocity
from mbs_dynamics.multibody.model import Model, body_count, unpack_model
from mbs_dynamics.multibody.workspace import new_scratch, scratch
from mbs_dynamics.parallel import run_batch
from mbs_dynamics.spatial.algebra import add, force_cross, force_to_parent

# The 10 inertial parameters of a body, in the order of its columns of Y.
INERTIAL_PARAMETERS = ("m", "mc_x", "mc_y", "mc_z", "I_xx", "I_xy", "I_yy", "I_xz", "I_yz", "I_zz")
PARAMETERS_PER_BODY = len(INERTIAL_PARAMETERS)


@njit(cache=True, inline="always")
def parameters_inertia_times(parameters, x):
    """I x = [I_O w + h x l; m l - h x w] for x = [w; l] and the spatial inertia
    of the 10 inertial parameters (m, h, I_O in INERTIAL_PARAMETERS order)."""
    m, h0, h1, h2, ixx, ixy, iyy, ixz, iyz, izz = parameters
    w0, w1, w2, l0, l1, l2 = x
    return (ixx * w0 + ixy * w1 + ixz * w2 + h1 * l2 - h2 * l1,
            ixy * w0 + iyy * w1 + iyz * w2 + h2 * l0 - h0 * l2,
            ixz * w0 + iyz * w1 + izz * w2 + h0 * l1 - h1 * l0,
            m * l0 - (h1 * w2 - h2 * w1),
            m * l1 - (h2 * w0 - h0 * w2),
            m * l2 - (h0 * w1 - h1 * w0))


@njit(cache=True, inline="always")
def newton_euler_column(column, a, v):
    """Column `column` of the body regressor Y_i(v, a): the wrench I a + v x* I v
    (F&O eq. 3) of the inertia whose parameter `column` is 1 and the others 0."""
    unit = (1.0 if column == 0 else 0.0, 1.0 if column == 1 else 0.0, 1.0 if column == 2 else 0.0,
            1.0 if column == 3 else 0.0, 1.0 if column == 4 else 0.0, 1.0 if column == 5 else 0.0,
            1.0 if column == 6 else 0.0, 1.0 if column == 7 else 0.0, 1.0 if column == 8 else 0.0,
            1.0 if column == 9 else 0.0)
    return add(parameters_inertia_times(unit, a), force_cross(v, parameters_inertia_times(unit, v)))


@njit(cache=True)
def regressor_kernel(packed, q, v, a, Y, buffer):
    """Y (nv, 10 nbodies) = the joint torque regressor at (q, v, a) (module
    docstring), gravity included as the world's acceleration. Returns
    INVALID_INPUT without computing (inputs.invalid), NONFINITE_RESULT when Y
    overflows, else 0."""
    model = unpack_model(packed)
    if invalid(model, q, v, a):
        return INVALID_INPUT
    n = model.parent.shape[0]
    R, p, S, vel, acc, _ = body_motion_views(packed, q, buffer)
    Y[:, :] = 0.0
    for i in range(n):
        v_i, vJ = body_velocity(model, i, R, p, S, v, vel)
        a_i = body_acceleration(model, i, R, p, S, v, a, acc, v_i, vJ, model.gravity)
        for column in range(PARAMETERS_PER_BODY):
            f = newton_euler_column(column, a_i, v_i)
            j = i
            while j >= 0:
                v0 = model.v_start[j]
                for k in range(model.nv_joint[j]):
                    t = 0.0
                    for r in range(6):
                        t += S[j, r, k] * f[r]
                    Y[v0 + k, PARAMETERS_PER_BODY * i + column] += t
                if model.parent[j] >= 0:
                    f = force_to_parent(R, p, j, f)
                j = model.parent[j]
    return 0 if all_finite(Y) else NONFINITE_RESULT


@njit(cache=True, nogil=True)
def regressor_batch_kernel(packed, q, v, a, Y, status):
    """regressor_kernel for each state of a batch (parallel.run_batch)."""
    buffer = new_scratch(body_count(packed))
    for b in range(q.shape[0]):
        status[b] = regressor_kernel(packed, q[b], v[b], a[b], Y[b], buffer)


def joint_torque_regressor(model: Model, q, v, a) -> np.ndarray:
    """Y(q, v, a) (nv, 10 nbodies) with inverse_dynamics(q, v, a) = Y pi + armature a
    for pi = inertial_parameters(model) (module docstring). q, v, a may carry a
    leading batch dimension (then Y is (batch, nv, 10 nbodies), computed in
    parallel)."""
    q = inputs.shaped(model, q, model.nq, "q")
    v = inputs.shaped(model, v, model.nv, "v")
    a = inputs.shaped(model, a, model.nv, "a")
    columns = PARAMETERS_PER_BODY * model.nbodies
    if inputs.same_batch(q, v, a):
        Y = np.empty((q.shape[0], model.nv, columns))
        status = np.empty(q.shape[0], dtype=np.int64)
        run_batch(regressor_batch_kernel, (model.packed,), (q, v, a, Y, status), model.nbodies)
        failed = status.any()
    else:
        Y = np.empty((model.nv, columns))
        status = regressor_kernel(model.packed, q, v, a, Y, scratch(model))
        failed = status != 0
    if failed:
        inputs.refuse(model, status, "the joint torque regressor", q, (v, "v"), (a, "a"))
    return Y


def inertial_parameters(model: Model) -> np.ndarray:
    """pi (10 nbodies,): each body's [m, h = m c, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]
    about its origin (INERTIAL_PARAMETERS), body after body."""
    I = model.rotational_inertia
    return np.column_stack([model.mass, model.first_moment, I[:, 0, 0], I[:, 0, 1], I[:, 1, 1], I[:, 0, 2],
                            I[:, 1, 2], I[:, 2, 2]]).ravel()
