"""SE(3) and spatial algebra in matrix form, for users and for the code that
is not a hot loop (Müller kinematics App. A; RBDL §3; F&O §3). The compiled
recursions use the same operations written over scalars (spatial.py).

Conventions (DESIGN.md §2): a twist is [w; v] (angular first), a wrench
[n; f]; a pose T = (R, p) is the 4x4 homogeneous transform a <- b, so that

    Ad(T)        = [[R, 0], [p~ R, R]]    twists:  V_a = Ad(T) V_b
    Ad*(T)       = Ad(T)^-T = [[R, p~ R], [0, R]]   wrenches: F_a = Ad*(T) F_b
    ad(V)        = [[w~, 0], [v~, w~]]    V x (motion cross product)
    ad*(V)       = -ad(V)^T               V x* (force cross product)

and exp/log map twists to poses: T = exp(V) for the body moving at V for a
unit time.
"""
from __future__ import annotations

import math

import numpy as np


def skew(x) -> np.ndarray:
    """x~ with x~ y = x × y."""
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def so3_exp(w) -> np.ndarray:
    """Rotation exp(w~) (Rodrigues, with the series near 0; Müller kinematics eq. 69)."""
    w = np.asarray(w, dtype=float)
    theta = float(np.linalg.norm(w))
    W = skew(w)
    if theta < 1e-6:
        return np.eye(3) + W + 0.5 * W @ W
    return np.eye(3) + np.sin(theta) / theta * W + (1 - np.cos(theta)) / theta**2 * W @ W


def so3_left_jacobian(w) -> np.ndarray:
    """V(w) with exp([w; u]) = (exp(w~), V(w) u) (Müller kinematics App. A)."""
    w = np.asarray(w, dtype=float)
    theta = float(np.linalg.norm(w))
    W = skew(w)
    if theta < 1e-6:
        return np.eye(3) + 0.5 * W + W @ W / 6.0
    return np.eye(3) + (1 - np.cos(theta)) / theta**2 * W + (theta - np.sin(theta)) / theta**3 * W @ W


def so3_log(R) -> np.ndarray:
    """w with exp(w~) = R, |w| <= pi."""
    R = np.asarray(R, dtype=float)
    cos_theta = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    theta = float(np.arccos(cos_theta))
    vee = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if theta < 1e-6:
        return 0.5 * vee
    if np.pi - theta < 1e-6:  # near pi: from the symmetric part
        axis = np.sqrt(np.maximum((np.diag(R) + 1.0) / 2.0, 0.0))
        k = int(np.argmax(axis))
        others = np.arange(3) != k
        axis[others] = (R[k, others] + R[others, k]) / (4.0 * axis[k])
        axis *= np.sign(vee @ axis) if vee @ axis != 0 else 1.0
        return theta * axis / np.linalg.norm(axis)
    return theta / (2.0 * np.sin(theta)) * vee


def pose(R, p) -> np.ndarray:
    """The 4x4 homogeneous transform of rotation R and translation p."""
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, p
    return T


def se3_exp(twist) -> np.ndarray:
    """T = exp(V) for V = [w; v]: (exp(w~), V(w) v) (Müller kinematics App. A)."""
    twist = np.asarray(twist, dtype=float)
    return pose(so3_exp(twist[:3]), so3_left_jacobian(twist[:3]) @ twist[3:])


def se3_log(T) -> np.ndarray:
    """V = [w; v] with exp(V) = T, |w| <= pi."""
    T = np.asarray(T, dtype=float)
    w = so3_log(T[:3, :3])
    return np.concatenate([w, np.linalg.solve(so3_left_jacobian(w), T[:3, 3])])


def se3_inverse(T) -> np.ndarray:
    T = np.asarray(T, dtype=float)
    return pose(T[:3, :3].T, -T[:3, :3].T @ T[:3, 3])


def adjoint(T) -> np.ndarray:
    """Ad(T) (6x6) mapping twists in frame b to frame a, for T = a <- b."""
    T = np.asarray(T, dtype=float)
    R, p = T[:3, :3], T[:3, 3]
    Ad = np.zeros((6, 6))
    Ad[:3, :3] = Ad[3:, 3:] = R
    Ad[3:, :3] = skew(p) @ R
    return Ad


def adjoint_dual(T) -> np.ndarray:
    """Ad*(T) = Ad(T)^-T (6x6) mapping wrenches in frame b to frame a."""
    T = np.asarray(T, dtype=float)
    R, p = T[:3, :3], T[:3, 3]
    Ad = np.zeros((6, 6))
    Ad[:3, :3] = Ad[3:, 3:] = R
    Ad[:3, 3:] = skew(p) @ R
    return Ad


def ad(twist) -> np.ndarray:
    """ad(V) (6x6): ad(V) W = V x W, the Lie bracket [V, W] of se(3)."""
    twist = np.asarray(twist, dtype=float)
    out = np.zeros((6, 6))
    out[:3, :3] = out[3:, 3:] = skew(twist[:3])
    out[3:, :3] = skew(twist[3:])
    return out


def ad_dual(twist) -> np.ndarray:
    """ad*(V) = -ad(V)^T (6x6): ad*(V) F = V x* F."""
    return -ad(twist).T


def rpy_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """The rotation of URDF's rpy: fixed-axis roll about x, then pitch about y,
    then yaw about z, R = Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch), math.cos(yaw),
                              math.sin(yaw))
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def quaternion_to_matrix(x, y, z, w) -> np.ndarray:
    """Rotation matrix of the unit quaternion (x, y, z, w)."""
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def matrix_to_quaternion(R) -> np.ndarray:
    """Unit quaternion (x, y, z, w), w >= 0, of a rotation matrix (Shepperd's method)."""
    R = np.asarray(R, dtype=float)
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


def spatial_inertia(mass: float, com, inertia_com) -> np.ndarray:
    """The 6x6 spatial inertia about the frame origin of a body with its centre of
    mass at `com` and rotational inertia `inertia_com` about it (RBDL eq. 9)."""
    C = skew(com)
    return np.block([[np.asarray(inertia_com, dtype=float) + mass * C @ C.T, mass * C],
                     [mass * C.T, mass * np.eye(3)]])


def transform_inertia(T, inertia) -> np.ndarray:
    """A 6x6 spatial inertia given in frame b, expressed in frame a (T = a <- b):
    Ad*(T) I Ad(T)^-1, so that momenta transform as wrenches."""
    return adjoint_dual(T) @ inertia @ adjoint(se3_inverse(T))
