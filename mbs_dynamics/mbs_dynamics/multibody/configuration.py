"""The configuration space: q ⊕ v and q1 ⊖ q0 (Müller dynamics §7, kinematics
App. A). Revolute, prismatic and planar coordinates add (their v is dq/dt);
a floating joint moves by the SE(3) exponential of its body twist,
T ← T exp(v dt), its quaternion renormalised so that it stays unit."""
import math

import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.multibody.model import FLOATING, JOINT_NV, Model, unpack_model
from mbs_dynamics.spatial.lie import quaternion_to_matrix, so3_left_jacobian, so3_log


@njit(cache=True)
def integrate_kernel(packed, q, v, dt, out):
    """out = q ⊕ v dt. A floating joint: p += R V(w) u and the quaternion
    z ← z ⊗ (sin(θ/2) w/θ, cos(θ/2)) for (w, u) = v dt (Müller kinematics App. A),
    renormalised with its scalar part >= 0; other joints add. A coupled mimic
    shares its master's coordinates and writes the same values."""
    model = unpack_model(packed)
    joint_type, q_start, v_start, nv_joint = model.joint_type, model.q_start, model.v_start, model.nv_joint
    out[:] = q
    for body in range(joint_type.shape[0]):
        q0, v0 = q_start[body], v_start[body]
        if joint_type[body] != FLOATING:
            for k in range(nv_joint[body]):
                out[q0 + k] = q[q0 + k] + v[v0 + k] * dt
            continue
        x, y, z, s = q[q0 + 3], q[q0 + 4], q[q0 + 5], q[q0 + 6]
        norm = math.sqrt(x * x + y * y + z * z + s * s)
        x, y, z, s = x / norm, y / norm, z / norm, s / norm
        w0, w1, w2 = v[v0] * dt, v[v0 + 1] * dt, v[v0 + 2] * dt
        u0, u1, u2 = v[v0 + 3] * dt, v[v0 + 4] * dt, v[v0 + 5] * dt
        theta2 = w0 * w0 + w1 * w1 + w2 * w2
        theta = math.sqrt(theta2)
        if theta < 1e-4:  # series of (1 - cos θ)/θ², (θ - sin θ)/θ³, sin(θ/2)/θ
            b, c, half = 0.5 - theta2 / 24.0, 1.0 / 6.0 - theta2 / 120.0, 0.5 - theta2 / 48.0
        else:
            b, c, half = (1.0 - math.cos(theta)) / theta2, (theta - math.sin(theta)) / (theta2 * theta), \
                math.sin(0.5 * theta) / theta
        # V(w) u = u + b w x u + c w x (w x u)
        c0, c1, c2 = w1 * u2 - w2 * u1, w2 * u0 - w0 * u2, w0 * u1 - w1 * u0
        d0, d1, d2 = w1 * c2 - w2 * c1, w2 * c0 - w0 * c2, w0 * c1 - w1 * c0
        t0, t1, t2 = u0 + b * c0 + c * d0, u1 + b * c1 + c * d1, u2 + b * c2 + c * d2
        # R t, R of the unit quaternion (x, y, z, s)
        out[q0] = q[q0] + (1 - 2 * (y * y + z * z)) * t0 + 2 * (x * y - z * s) * t1 + 2 * (x * z + y * s) * t2
        out[q0 + 1] = q[q0 + 1] + 2 * (x * y + z * s) * t0 + (1 - 2 * (x * x + z * z)) * t1 + 2 * (y * z - x * s) * t2
        out[q0 + 2] = q[q0 + 2] + 2 * (x * z - y * s) * t0 + 2 * (y * z + x * s) * t1 + (1 - 2 * (x * x + y * y)) * t2
        ex, ey, ez, es = half * w0, half * w1, half * w2, math.cos(0.5 * theta)
        nx = s * ex + x * es + y * ez - z * ey
        ny = s * ey - x * ez + y * es + z * ex
        nz = s * ez + x * ey - y * ex + z * es
        ns = s * es - x * ex - y * ey - z * ez
        norm = math.sqrt(nx * nx + ny * ny + nz * nz + ns * ns)
        if ns < 0.0:
            norm = -norm
        out[q0 + 3], out[q0 + 4], out[q0 + 5], out[q0 + 6] = nx / norm, ny / norm, nz / norm, ns / norm


def floating_base_state(position, orientation, linear_velocity, angular_velocity,
                        tolerance: float = inputs.QUATERNION_TOLERANCE,
                        what: str = "the base") -> tuple[np.ndarray, np.ndarray]:
    """(q (..., 7), v (..., 6)) of a floating joint (DESIGN.md §2) from its pose,
    position (m) and unit quaternion (x, y, z, w), and its body twist split
    into linear (m/s) and angular (rad/s) velocity in the child's axes: the
    layout of nav_msgs/Odometry (pose in its frame_id, twist in its
    child_frame_id). Each argument is (..., 3) or (..., 4), rows alike. A
    quaternion within `tolerance` of unit length is normalised; ValueError
    naming `what` for one further from it or a non-finite value."""
    position, orientation = np.asarray(position, dtype=float), np.asarray(orientation, dtype=float)
    q = np.concatenate([position, orientation], axis=-1)
    v = np.concatenate([np.asarray(angular_velocity, dtype=float), np.asarray(linear_velocity, dtype=float)],
                       axis=-1)
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
        raise ValueError(f"{what} has non-finite values")
    norm = np.linalg.norm(orientation, axis=-1, keepdims=True)
    wrong = np.abs(norm[..., 0] - 1.0) > tolerance
    if np.any(wrong):
        first = float(norm[..., 0][wrong].flat[0])
        raise ValueError(f"{what} orientation quaternion (x, y, z, w) has norm {first:.6g}, not 1 (within "
                         f"{tolerance:g})")
    q[..., 3:7] /= norm
    return q, v


def integrate(model: Model, q, v, dt: float = 1.0) -> np.ndarray:
    """q ⊕ v dt: the configuration reached from q moving at v for dt."""
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    if not np.isfinite(dt):
        raise ValueError(f"dt must be finite, got {dt}")
    out = np.empty(model.nq)
    integrate_kernel(model.packed, q, v, float(dt), out)
    return inputs.finite(model, out, "the integrated configuration", (q, "q"), (v, "v"))


def difference(model: Model, q0, q1) -> np.ndarray:
    """v with integrate(q0, v, 1) = q1 (the log of the floating joints' relative pose)."""
    q0 = inputs.configuration(model, q0, batch=False)
    q1 = inputs.configuration(model, q1, batch=False)
    v = np.zeros(model.nv)
    for body in range(model.nbodies):
        qs, vs = model.q_start[body], model.v_start[body]
        if model.body_joint_names[body] in model._coupled:
            continue
        if model.joint_type[body] == FLOATING:
            R0 = quaternion_to_matrix(*(q0[qs + 3:qs + 7] / np.linalg.norm(q0[qs + 3:qs + 7])))
            R1 = quaternion_to_matrix(*(q1[qs + 3:qs + 7] / np.linalg.norm(q1[qs + 3:qs + 7])))
            w = so3_log(R0.T @ R1)
            v[vs:vs + 3] = w
            v[vs + 3:vs + 6] = np.linalg.solve(so3_left_jacobian(w), R0.T @ (q1[qs:qs + 3] - q0[qs:qs + 3]))
        else:
            n = JOINT_NV[model.joint_type[body]]
            v[vs:vs + n] = q1[qs:qs + n] - q0[qs:qs + n]
    return v

