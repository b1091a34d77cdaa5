"""The configuration space: q ⊕ v and q1 ⊖ q0 (Müller dynamics §7, kinematics
App. A). Revolute, prismatic and planar coordinates add (their v is dq/dt);
a floating joint moves by the SE(3) exponential of its body twist,
T ← T exp(v dt), its quaternion renormalised so that it stays unit."""
import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.model import FLOATING, JOINT_NV, Model


def _skew(x):
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def so3_exp(w: np.ndarray) -> np.ndarray:
    """Rotation exp(w~) (Rodrigues, with the series near 0)."""
    theta = float(np.linalg.norm(w))
    W = _skew(w)
    if theta < 1e-6:
        return np.eye(3) + W + 0.5 * W @ W
    return np.eye(3) + np.sin(theta) / theta * W + (1 - np.cos(theta)) / theta**2 * W @ W


def so3_left_jacobian(w: np.ndarray) -> np.ndarray:
    """V(w) with exp([w; u]) = (exp(w~), V(w) u) (Müller kinematics eq. 69)."""
    theta = float(np.linalg.norm(w))
    W = _skew(w)
    if theta < 1e-6:
        return np.eye(3) + 0.5 * W + W @ W / 6.0
    return np.eye(3) + (1 - np.cos(theta)) / theta**2 * W + (theta - np.sin(theta)) / theta**3 * W @ W


def so3_log(R: np.ndarray) -> np.ndarray:
    """w with exp(w~) = R, |w| <= pi."""
    cos_theta = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    theta = float(np.arccos(cos_theta))
    vee = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if theta < 1e-6:
        return 0.5 * vee
    if np.pi - theta < 1e-6:  # near pi: from the symmetric part
        axis = np.sqrt(np.maximum((np.diag(R) + 1.0) / 2.0, 0.0))
        k = int(np.argmax(axis))
        axis[np.arange(3) != k] = (R[k, np.arange(3) != k] + R[np.arange(3) != k, k]) / (4.0 * axis[k])
        axis *= np.sign(vee @ axis) if vee @ axis != 0 else 1.0
        return theta * axis / np.linalg.norm(axis)
    return theta / (2.0 * np.sin(theta)) * vee


def quaternion_to_matrix(x, y, z, w) -> np.ndarray:
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quaternion(R: np.ndarray) -> np.ndarray:
    """Unit quaternion (x, y, z, w), w >= 0, of a rotation matrix (Shepperd's method)."""
    trace = np.trace(R)
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        quaternion = np.array([(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, s / 4])
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        quaternion = np.empty(4)
        quaternion[i] = s / 4
        quaternion[j] = (R[j, i] + R[i, j]) / s
        quaternion[k] = (R[k, i] + R[i, k]) / s
        quaternion[3] = (R[k, j] - R[j, k]) / s
    if quaternion[3] < 0:
        quaternion = -quaternion
    return quaternion / np.linalg.norm(quaternion)


def integrate(model: Model, q, v, dt: float = 1.0) -> np.ndarray:
    """q ⊕ v dt: the configuration reached from q moving at v for dt."""
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    if not np.isfinite(dt):
        raise ValueError(f"dt must be finite, got {dt}")
    out = q.copy()
    for body in range(model.nbodies):
        q0, v0 = model.q_start[body], model.v_start[body]
        if model.body_joint_names[body] in model._coupled:
            continue
        if model.joint_type[body] == FLOATING:
            quaternion = q[q0 + 3:q0 + 7] / np.linalg.norm(q[q0 + 3:q0 + 7])
            R = quaternion_to_matrix(*quaternion)
            w, u = v[v0:v0 + 3] * dt, v[v0 + 3:v0 + 6] * dt
            out[q0:q0 + 3] = q[q0:q0 + 3] + R @ (so3_left_jacobian(w) @ u)
            out[q0 + 3:q0 + 7] = matrix_to_quaternion(R @ so3_exp(w))
        else:
            n = JOINT_NV[model.joint_type[body]]
            out[q0:q0 + n] = q[q0:q0 + n] + v[v0:v0 + n] * dt
    return out


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

