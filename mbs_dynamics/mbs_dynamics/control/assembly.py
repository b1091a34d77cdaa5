"""The whole-body controller's QP built in one compiled call (DESIGN.md §9,
§6): the contacts' rows, the floating-base and torque-limit rows, the
acceleration bounds and the cost H, g of the tasks and the force
regularisation, written into the workspace's arrays from the cycle's
kinematics and dynamics (frames_motion, M, h, the CoM quantities) and flat
tables of the tasks and contacts (packed by the controller each cycle: the
task and contact objects stay the place their gains and references live).
Same arithmetic as the tasks' and contacts' rows() (TSID's definitions).
The kinematics and dynamics themselves come from one compiled call too
(cycle_state_kernel: the algorithms' kernels one after another)."""
import math
from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.algorithms.centroidal import momentum_matrix_kernel
from mbs_dynamics.algorithms.crba import crba_kernel
from mbs_dynamics.algorithms.kinematics import frames_motion_kernel
from mbs_dynamics.algorithms.rnea import rnea_kernel
from mbs_dynamics.inputs import INVALID_INPUT, invalid
from mbs_dynamics.multibody.model import unpack_model
from mbs_dynamics.multibody.workspace import readonly, take
from mbs_dynamics.spatial.algebra import quaternion_to_rotation

# task table columns (one row of TASK_COLUMNS floats per task)
TASK_KIND, TASK_FRAME, TASK_WEIGHT, TASK_MASK, TASK_KP, TASK_KD = 0, 1, 2, 3, 9, 15
TASK_ROTATION, TASK_POSITION, TASK_TWIST, TASK_ACCELERATION = 21, 30, 33, 39
TASK_COLUMNS = 45
COM_TASK, FRAME_TASK, POSTURE_TASK = 0, 1, 2
# contact table columns
CONTACT_KIND, CONTACT_FRAME, CONTACT_KP, CONTACT_KD, CONTACT_WEIGHT = 0, 1, 2, 3, 4
CONTACT_ROTATION, CONTACT_POSITION, CONTACT_TARGET, CONTACT_OFFSET = 5, 14, 17, 23
CONTACT_COLUMNS = 26
POINT_CONTACT, SURFACE_CONTACT = 0, 1
INFINITE_BOUND = 1e10  # what stands for an absent bound in the QP (TSID's)

# assemble_kernel's arguments, by what they hold (namedtuples: numba reads their fields by name)
# the controller's, fixed at its construction: the actuated joints' torque limits (rows: their numbers),
# the position and acceleration bounds (controller.acceleration_bounds), the Hessian's regularisation
Limits = namedtuple("Limits", "torque_rows torque_limit bound_rows position_lower position_upper acceleration_limit "
                              "horizon hessian_regularization")
# the cycle's dynamics and kinematics: M, h; the frames' hybrid Jacobians (k, 6, nv), [twist; drift]
# (k, 2, 6), rotations and origins (frames_motion); the CoM, its velocity, Jacobian and drift (empty
# without a CoM task); the actuated joints' positions and velocities
CycleState = namedtuple("CycleState", "M h J motion frame_R frame_p com com_velocity com_jacobian com_drift "
                                      "q_joints v_joints")
# the tasks (k, TASK_COLUMNS) and contacts (c, CONTACT_COLUMNS) packed as rows, the postures' gains and
# references (p, 5, na) [kp, kd, position, velocity, acceleration] indexed by a posture task's frame
# column; each contact's force regularisation W and force generators G (c, 6, 12: its first size
# columns, 3 or 6 rows in use)
Tables = namedtuple("Tables", "tasks postures contacts regularization generators")
# what the kernel writes: the cost H, g, the equalities A x = b, the inequalities lower <= C x <= upper
# (their dynamic rows: the pyramids' rows are the caller's), Jf (nf, nv: the generalised force is
# Jfᵀ f); rows (6, nv) and work (33,) scratch
QPArrays = namedtuple("QPArrays", "H g A b lower upper C Jf rows work")
# the frames the tasks and contacts read: their bodies (k,) and placements in them, rotations (k, 3, 3)
# and origins (k, 3) (kinematics.frame_placements)
FramePlacements = namedtuple("FramePlacements", "bodies rotations translations")


@njit(cache=True)
def cycle_state_kernel(packed, q, v, frames, cycle, momentum_matrix, mass, buffer):
    """The cycle's CycleState written from (q, v): the frames' hybrid
    Jacobians, [twist; drift] and poses (frames_motion_kernel), M (CRBA),
    h = RNEA(q, v, 0) (body form), the actuated joints' q and v; where
    cycle.com has 3 entries (a CoM task, a floating base of total mass
    `mass`), A_G into momentum_matrix (6, nv) and c, ċ = A_G[3:] v / m,
    J_c = A_G[3:] / m and the drift c̈ at a = 0: the base rows of h hold the
    rate of the total momentum less gravity in base axes, so
    m c̈₀ = R_base h[3:6] + m g. Returns the first failing kernel's status
    (inputs.INVALID_INPUT, NONFINITE_RESULT), else 0."""
    model = unpack_model(packed)
    if invalid(model, q, v, v[:0]):
        return INVALID_INPUT
    M, h, nv = cycle.M, cycle.h, v.shape[0]
    if frames.bodies.shape[0]:
        status = frames_motion_kernel(packed, q, v, frames.bodies, frames.rotations, frames.translations, cycle.J,
                                      cycle.motion, cycle.frame_R, cycle.frame_p, buffer)
        if status:
            return status
    status = crba_kernel(packed, q, M, buffer)
    if status:
        return status
    zero, _ = take(buffer, buffer.shape[0] - nv, (nv,))  # past the RNEA's layout
    zero[:] = 0.0
    status = rnea_kernel(packed, readonly(q), readonly(v), readonly(zero), take(buffer, 0, (0, 6))[0], h, buffer)
    if status:
        return status
    q_joints, v_joints = cycle.q_joints, cycle.v_joints
    nq_base, nu = q.shape[0] - q_joints.shape[0], nv - v_joints.shape[0]
    q_joints[:] = q[nq_base:]
    v_joints[:] = v[nu:]
    if cycle.com.shape[0] == 0:
        return 0
    com, com_velocity, com_jacobian, com_drift = cycle.com, cycle.com_velocity, cycle.com_jacobian, cycle.com_drift
    status = momentum_matrix_kernel(packed, q, momentum_matrix, com, buffer)
    if status:
        return status
    qx, qy, qz, qw = q[3], q[4], q[5], q[6]
    norm = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
    R = quaternion_to_rotation(qx / norm, qy / norm, qz / norm, qw / norm)
    gravity = model.gravity
    for r in range(3):
        linear = 0.0
        for j in range(nv):
            com_jacobian[r, j] = momentum_matrix[3 + r, j] / mass
            linear += momentum_matrix[3 + r, j] * v[j]
        com_velocity[r] = linear / mass
        com_drift[r] = (R[3 * r] * h[3] + R[3 * r + 1] * h[4] + R[3 * r + 2] * h[5]) / mass + gravity[r]
    return 0


@njit(cache=True, inline="always")
def so3_log_of(M):
    """w with exp(w~) = M, |w| <= pi (lie.so3_log)."""
    cos_theta = min(max((M[0, 0] + M[1, 1] + M[2, 2] - 1.0) / 2.0, -1.0), 1.0)
    theta = math.acos(cos_theta)
    v0, v1, v2 = M[2, 1] - M[1, 2], M[0, 2] - M[2, 0], M[1, 0] - M[0, 1]
    if theta < 1e-6:
        return 0.5 * v0, 0.5 * v1, 0.5 * v2
    if math.pi - theta < 1e-6:  # near pi: from the symmetric part
        a = np.empty(3)
        for i in range(3):
            a[i] = math.sqrt(max((M[i, i] + 1.0) / 2.0, 0.0))
        k = 0
        for i in range(1, 3):
            if a[i] > a[k]:
                k = i
        for i in range(3):
            if i != k:
                a[i] = (M[k, i] + M[i, k]) / (4.0 * a[k])
        dot = v0 * a[0] + v1 * a[1] + v2 * a[2]
        s = 1.0 if dot == 0 else (1.0 if dot > 0 else -1.0)
        norm = math.sqrt((s * a[0]) ** 2 + (s * a[1]) ** 2 + (s * a[2]) ** 2)
        return theta * s * a[0] / norm, theta * s * a[1] / norm, theta * s * a[2] / norm
    c = theta / (2.0 * math.sin(theta))
    return c * v0, c * v1, c * v2


@njit(cache=True, inline="always")
def local_rows(R, J, twist, drift, reference_R, reference_p, p, rows, error, velocity, drift_local, scratch3):
    """A frame's rows in its own axes: rows (6, nv) = [Rᵀ J_ω; Rᵀ J_v], the
    pose error [log(Rᵀ R_ref); Rᵀ(p_ref - p)], its twist and drift in its axes."""
    nv = J.shape[1]
    for r in range(3):
        for c in range(nv):
            rows[r, c] = R[0, r] * J[0, c] + R[1, r] * J[1, c] + R[2, r] * J[2, c]
            rows[3 + r, c] = R[0, r] * J[3, c] + R[1, r] * J[4, c] + R[2, r] * J[5, c]
    for r in range(3):
        for c in range(3):
            scratch3[r, c] = R[0, r] * reference_R[0, c] + R[1, r] * reference_R[1, c] + R[2, r] * reference_R[2, c]
    error[0], error[1], error[2] = so3_log_of(scratch3)
    d0, d1, d2 = reference_p[0] - p[0], reference_p[1] - p[1], reference_p[2] - p[2]
    for r in range(3):
        error[3 + r] = R[0, r] * d0 + R[1, r] * d1 + R[2, r] * d2
        for s in range(2):
            velocity[3 * s + r] = R[0, r] * twist[3 * s] + R[1, r] * twist[3 * s + 1] + R[2, r] * twist[3 * s + 2]
            drift_local[3 * s + r] = R[0, r] * drift[3 * s] + R[1, r] * drift[3 * s + 1] \
                + R[2, r] * drift[3 * s + 2]


@njit(cache=True, inline="always")
def add_weighted_rows(weight, rows, rhs, mask, count, H, g):
    """H[:nv, :nv] += w AᵀA, g[:nv] -= w Aᵀb over the rows whose mask is not 0."""
    nv = rows.shape[1]
    for i in range(count):
        if mask[i] == 0.0:
            continue
        for c in range(nv):
            x = weight * rows[i, c]
            if x == 0.0:
                continue
            for d in range(nv):
                H[c, d] += x * rows[i, d]
            g[c] -= x * rhs[i]


@njit(cache=True)
def assemble_kernel(limits, cycle, tables, qp):
    """Writes the cycle's QP (Limits, CycleState, Tables, QPArrays: above)
    into qp. Returns the number of inequality rows written."""
    M, h, J, motion, frame_R, frame_p = cycle.M, cycle.h, cycle.J, cycle.motion, cycle.frame_R, cycle.frame_p
    com, com_velocity, com_jacobian, com_drift = cycle.com, cycle.com_velocity, cycle.com_jacobian, cycle.com_drift
    q_joints, v_joints = cycle.q_joints, cycle.v_joints
    tasks, postures, contacts = tables.tasks, tables.postures, tables.contacts
    regularization, generators = tables.regularization, tables.generators
    H, g, A, b, lower, upper, C, Jf, rows, work = qp
    nv = M.shape[0]
    nu = nv - q_joints.shape[0]  # the floating base's, or 0
    H[:] = 0.0
    g[:] = 0.0
    error, velocity, drift_local, desired = work[0:6], work[6:12], work[12:18], work[18:24]
    scratch3 = work[24:33].reshape(3, 3)
    row, column, in_row = nu, nv, 0
    for ci in range(contacts.shape[0]):
        contact = contacts[ci]
        k = int(contact[CONTACT_FRAME])
        surface = contact[CONTACT_KIND] == SURFACE_CONTACT
        size = 12 if surface else 3
        m = 6 if surface else 3
        R, p, twist, drift = frame_R[k], frame_p[k], motion[k, 0], motion[k, 1]
        kp, kd = contact[CONTACT_KP], contact[CONTACT_KD]
        if surface:
            local_rows(R, J[k], twist, drift, contact[CONTACT_ROTATION:CONTACT_ROTATION + 9].reshape(3, 3),
                       contact[CONTACT_POSITION:CONTACT_POSITION + 3], p, rows, error, velocity, drift_local,
                       scratch3)
            for r in range(6):
                A[row + r, :nv] = rows[r]
                b[row + r] = (kp * error[r] - kd * velocity[r]) - drift_local[r]
        elif contact[CONTACT_OFFSET] == 0.0 and contact[CONTACT_OFFSET + 1] == 0.0 \
                and contact[CONTACT_OFFSET + 2] == 0.0:
            for r in range(3):
                A[row + r, :nv] = J[k, 3 + r]
                b[row + r] = (kp * (contact[CONTACT_POSITION + r] - p[r]) - kd * twist[3 + r]) - drift[3 + r]
                rows[r] = J[k, 3 + r]
        else:  # a rolling sphere's lowest point o = -r n from its centre (contacts.RigidPointContact)
            o = contact[CONTACT_OFFSET:CONTACT_OFFSET + 3]
            for r in range(3):
                r1, r2 = (r + 1) % 3, (r + 2) % 3
                # rows J_lin - [o]x J_ang; velocity ṗ + ω x o; drift p̈0 + ω̇0 x o
                rows[r] = J[k, 3 + r] - (o[r1] * J[k, r2] - o[r2] * J[k, r1])
                point = p[r] + o[r]
                point_velocity = twist[3 + r] + (twist[r1] * o[r2] - twist[r2] * o[r1])
                point_drift = drift[3 + r] + (drift[r1] * o[r2] - drift[r2] * o[r1])
                A[row + r, :nv] = rows[r]
                b[row + r] = (kp * (contact[CONTACT_POSITION + r] - point) - kd * point_velocity) - point_drift
        G = generators[ci]
        for f in range(size):  # Jf = Gᵀ Jc
            for c in range(nv):
                s = 0.0
                for r in range(m):
                    s += G[r, f] * rows[r, c]
                Jf[column - nv + f, c] = s
        W = regularization[ci]
        weight = contact[CONTACT_WEIGHT]
        for f in range(size):
            for e in range(size):
                s = 0.0
                for r in range(m):
                    s += W[r, f] * W[r, e]
                H[column + f, column + e] += weight * s
            s = 0.0
            for r in range(m):
                s += W[r, f] * contact[CONTACT_TARGET + r]
            g[column + f] -= weight * s
        row, column = row + m, column + size
        in_row += 4 * (size // 3) + 1
    nf = column - nv
    if nu:
        for r in range(nu):
            A[r, :nv] = M[r]
            for f in range(nf):
                A[r, nv + f] = -Jf[f, r]
            b[r] = -h[r]
    torque_rows, torque_limit, bound_rows = limits.torque_rows, limits.torque_limit, limits.bound_rows
    horizon = limits.horizon
    for i in range(torque_rows.shape[0]):
        j = nu + torque_rows[i]
        C[in_row, :nv] = M[j]
        for f in range(nf):
            C[in_row, nv + f] = -Jf[f, j]
        lower[in_row] = -torque_limit[i] - h[j]
        upper[in_row] = torque_limit[i] - h[j]
        in_row += 1
    T2 = horizon * horizon
    for i in range(bound_rows.shape[0]):  # controller.acceleration_bounds
        j = bound_rows[i]
        reach = v_joints[j] * horizon
        a_lower = max(2.0 * (limits.position_lower[j] - q_joints[j] - reach) / T2, -limits.acceleration_limit[j])
        a_upper = min(2.0 * (limits.position_upper[j] - q_joints[j] - reach) / T2, limits.acceleration_limit[j])
        lower[in_row] = min(max(a_lower, -INFINITE_BOUND), INFINITE_BOUND)
        upper[in_row] = min(max(a_upper, -INFINITE_BOUND), INFINITE_BOUND)
        in_row += 1
    for t in range(tasks.shape[0]):
        task = tasks[t]
        weight = task[TASK_WEIGHT]
        if weight == 0.0:
            continue
        kind = task[TASK_KIND]
        kp, kd = task[TASK_KP:TASK_KP + 6], task[TASK_KD:TASK_KD + 6]
        if kind == COM_TASK:
            for r in range(3):
                d = task[TASK_ACCELERATION + r] - kp[r] * (com[r] - task[TASK_POSITION + r]) \
                    - kd[r] * (com_velocity[r] - task[TASK_TWIST + r])
                desired[r] = d - com_drift[r]
            add_weighted_rows(weight, com_jacobian, desired, task[TASK_MASK:TASK_MASK + 3], 3, H, g)
        elif kind == FRAME_TASK:
            k = int(task[TASK_FRAME])
            R, twist = frame_R[k], motion[k, 0]
            local_rows(R, J[k], twist, motion[k, 1], task[TASK_ROTATION:TASK_ROTATION + 9].reshape(3, 3),
                       task[TASK_POSITION:TASK_POSITION + 3], frame_p[k], rows, error, velocity, drift_local,
                       scratch3)
            reference_twist, reference_acceleration = task[TASK_TWIST:TASK_TWIST + 6], \
                task[TASK_ACCELERATION:TASK_ACCELERATION + 6]
            for r in range(3):
                for s in range(2):
                    i = 3 * s + r
                    t0 = reference_twist[3 * s] - twist[3 * s]
                    t1 = reference_twist[3 * s + 1] - twist[3 * s + 1]
                    t2 = reference_twist[3 * s + 2] - twist[3 * s + 2]
                    velocity_error = R[0, r] * t0 + R[1, r] * t1 + R[2, r] * t2
                    acceleration = R[0, r] * reference_acceleration[3 * s] \
                        + R[1, r] * reference_acceleration[3 * s + 1] + R[2, r] * reference_acceleration[3 * s + 2]
                    desired[i] = (kp[i] * error[i] + kd[i] * velocity_error + acceleration) - drift_local[i]
            add_weighted_rows(weight, rows, desired, task[TASK_MASK:TASK_MASK + 6], 6, H, g)
        else:  # posture: the actuated diagonal
            P = postures[int(task[TASK_FRAME])]
            for j in range(q_joints.shape[0]):
                H[nu + j, nu + j] += weight
                g[nu + j] -= weight * (P[4, j] - P[0, j] * (q_joints[j] - P[2, j]) - P[1, j] * (v_joints[j] - P[3, j]))
    n = H.shape[0]
    for i in range(n):
        H[i, i] += limits.hessian_regularization
    return in_row
