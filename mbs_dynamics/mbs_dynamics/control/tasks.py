"""Tasks of the whole-body controller: each turns the robot's state into rows
A a = b on the joint accelerations a (DESIGN.md §9), weighted in the QP's
cost as w ||A a - b||². Gains and error definitions are TSID's
(TaskComEquality, TaskSE3Equality in the local frame, TaskJointPosture), in
this package's angular-first order."""
from __future__ import annotations

import numpy as np

from mbs_dynamics.inputs import QUATERNION_TOLERANCE
from mbs_dynamics.spatial.lie import quaternion_to_matrix, so3_log

POSE, POSITION, ORIENTATION = "pose", "position", "orientation"
MASKS = {POSE: np.ones(6, dtype=bool), POSITION: np.r_[False, False, False, True, True, True],
         ORIENTATION: np.r_[True, True, True, False, False, False]}


def finite_vector(value, size: int, what: str) -> np.ndarray:
    """value as a float64 copy of shape (size,) (a scalar is repeated); a
    wrong shape or a NaN or infinite entry raises ValueError naming `what`."""
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be numbers, got {value!r}") from None
    if array.ndim == 0:
        array = np.full(size, float(array))
    if array.shape != (size,):
        raise ValueError(f"{what} must have {size} values, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} has a non-finite value: {array.tolist()}")
    return array


def gains(value, size: int, what: str) -> np.ndarray:
    array = finite_vector(value, size, what)
    if np.any(array < 0):
        raise ValueError(f"{what} must not be negative, got {array.tolist()}")
    return array


def weight(value, what: str) -> float:
    w = float(finite_vector(value, 1, what)[0])
    if w < 0:
        raise ValueError(f"{what} must not be negative, got {w}")
    return w


def rotation_matrix(value, what: str) -> np.ndarray:
    """A 3x3 rotation, or a unit quaternion (x, y, z, w) turned into one."""
    array = np.array(value, dtype=np.float64)
    if array.shape == (4,):
        q = finite_vector(array, 4, what)
        norm = np.linalg.norm(q)
        if abs(norm - 1.0) > QUATERNION_TOLERANCE:
            raise ValueError(f"{what} must be a unit quaternion (x, y, z, w), its norm is {norm:.6g}")
        return quaternion_to_matrix(*(q / norm))
    R = finite_vector(array.ravel(), 9, what).reshape(3, 3) if array.size == 9 else None
    if R is None:
        raise ValueError(f"{what} must be a 3x3 rotation matrix or a quaternion (x, y, z, w), "
                         f"got shape {array.shape}")
    if np.max(np.abs(R.T @ R - np.eye(3))) > 1e-6 or np.linalg.det(R) < 0:
        raise ValueError(f"{what} is not a rotation matrix (RᵀR ≠ 1 or det R < 0)")
    return R


class Versioned:
    """Counts its attribute assignments (`version`): the controller packs a
    task's or contact's row of the compiled assembly's tables again only
    when the count moved. Gains, weights and references are assigned (the
    setters copy what they are given); an array changed in place is not
    seen."""

    version = 0

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        object.__setattr__(self, "version", self.version + 1)


class Task(Versioned):
    """A weighted task: rows(state) -> (A (m, nv), b (m,))."""

    name = "task"

    def __init__(self, weight_value: float):
        self.weight = weight(weight_value, f"the weight of the {self.name} task")

    def set_weight(self, value) -> None:
        self.weight = weight(value, f"the weight of the {self.name} task")


class CenterOfMassTask(Task):
    """The CoM acceleration c̈ = J_c a + c̈₀ driven to c̈_ref - Kp (c - c_ref)
    - Kd (ċ - ċ_ref), world axes (TaskComEquality). Needs a floating base:
    c̈₀ comes from the base rows of the nonlinear effects."""

    name = "centre of mass"

    def __init__(self, kp=10.0, kd=None, weight=1.0, mask=(True, True, True)):
        super().__init__(weight)
        self.kp = gains(kp, 3, "the CoM task's kp")
        self.kd = gains(2.0 * np.sqrt(self.kp) if kd is None else kd, 3, "the CoM task's kd")
        self.mask = np.array(mask, dtype=bool).reshape(3)
        self.position = None  # the state's CoM until set
        self.velocity = np.zeros(3)
        self.acceleration = np.zeros(3)

    def set_reference(self, position, velocity=(0.0, 0.0, 0.0), acceleration=(0.0, 0.0, 0.0)) -> None:
        position = finite_vector(position, 3, "the CoM reference position")
        velocity = finite_vector(velocity, 3, "the CoM reference velocity")
        self.acceleration = finite_vector(acceleration, 3, "the CoM reference acceleration")
        self.position, self.velocity = position, velocity

    def rows(self, state):
        if self.position is None:
            self.position = state.com.copy()
        desired = self.acceleration - self.kp * (state.com - self.position) - self.kd * (state.com_velocity
                                                                                         - self.velocity)
        return state.com_jacobian[self.mask], (desired - state.com_drift)[self.mask]


class FrameTask(Task):
    """A frame's pose (or its position or orientation: mask) in its own axes,
    as TSID's TaskSE3Equality in the local frame: the error [log(Rᵀ R_ref);
    Rᵀ(p_ref - p)], the rows J_local a = Kp e + Kd (Rᵀ V_ref - V_local)
    + Rᵀ A_ref - J̇v_local, with V = [ω; ṗ] (world-aligned references, ṗ the
    frame origin's velocity, A its classical acceleration). Gains are 6
    values [angular; linear] or one."""

    name = "frame"

    def __init__(self, frame: str, kp=10.0, kd=None, weight=1.0, mask=POSE):
        super().__init__(weight)
        self.frame = frame
        self.name = f"frame '{frame}'"
        self.kp = gains(kp, 6, f"the {self.name} task's kp")
        self.kd = gains(2.0 * np.sqrt(self.kp) if kd is None else kd, 6, f"the {self.name} task's kd")
        if isinstance(mask, str):
            if mask not in MASKS:
                raise ValueError(f"mask must be one of {', '.join(MASKS)} or 6 booleans, got {mask!r}")
            mask = MASKS[mask]
        self.mask = np.array(mask, dtype=bool).reshape(6)
        self.rotation = self.position = None  # the state's pose until set
        self.twist = np.zeros(6)
        self.acceleration = np.zeros(6)

    def set_reference(self, pose=None, *, position=None, rotation=None, twist=(0.0,) * 6,
                      acceleration=(0.0,) * 6) -> None:
        """pose: 4x4 world <- frame; or position (3) and/or rotation (3x3 or
        quaternion x, y, z, w); twist [ω; ṗ] and acceleration [ω̇; p̈] in world axes."""
        if pose is not None:
            T = finite_vector(np.asarray(pose, dtype=float).ravel(), 16, f"the {self.name} reference pose")
            rotation, position = T.reshape(4, 4)[:3, :3], T.reshape(4, 4)[:3, 3]
        new_rotation = self.rotation if rotation is None else rotation_matrix(
            rotation, f"the {self.name} reference rotation")
        new_position = self.position if position is None else finite_vector(
            position, 3, f"the {self.name} reference position")
        twist = finite_vector(twist, 6, f"the {self.name} reference twist")
        acceleration = finite_vector(acceleration, 6, f"the {self.name} reference acceleration")
        self.rotation, self.position, self.twist, self.acceleration = new_rotation, new_position, twist, acceleration

    def rows(self, state):
        k = state.frame_index[self.frame]
        R, p = state.frame_rotation[k], state.frame_position[k]
        if self.rotation is None:
            self.rotation = R.copy()
        if self.position is None:
            self.position = p.copy()
        J, twist, drift = state.frame_jacobian[k], state.frame_twist[k], state.frame_drift[k]
        Rt = R.T
        J_local = np.vstack((Rt @ J[:3], Rt @ J[3:]))
        error = np.concatenate((so3_log(Rt @ self.rotation), Rt @ (self.position - p)))
        velocity_error = np.concatenate((Rt @ (self.twist[:3] - twist[:3]), Rt @ (self.twist[3:] - twist[3:])))
        desired = self.kp * error + self.kd * velocity_error + np.concatenate(
            (Rt @ self.acceleration[:3], Rt @ self.acceleration[3:]))
        drift_local = np.concatenate((Rt @ drift[:3], Rt @ drift[3:]))
        return J_local[self.mask], (desired - drift_local)[self.mask]


class OrientationTask(FrameTask):
    """A frame's orientation only (the base orientation: the root link's frame)."""

    def __init__(self, frame: str, kp=10.0, kd=None, weight=1.0):
        super().__init__(frame, kp, kd, weight, mask=ORIENTATION)

    def set_reference(self, rotation=None, *, angular_velocity=(0.0,) * 3, angular_acceleration=(0.0,) * 3,
                      **kwargs) -> None:
        super().set_reference(rotation=rotation, twist=np.r_[finite_vector(
            angular_velocity, 3, f"the {self.name} reference angular velocity"), 0, 0, 0],
            acceleration=np.r_[finite_vector(angular_acceleration, 3,
                                             f"the {self.name} reference angular acceleration"), 0, 0, 0])


class PostureTask(Task):
    """The actuated joints' accelerations driven to a_ref - Kp (q - q_ref) -
    Kd (v - v_ref) (TaskJointPosture). References: one value per actuated
    coordinate (the controller's joint order) or {joint name: value}."""

    name = "posture"

    def __init__(self, kp=10.0, kd=None, weight=1e-3):
        super().__init__(weight)
        self._kp, self._kd = kp, kd
        self.position = None  # the state's posture until set
        self.velocity = self.acceleration = None
        self.joint_order = None

    def bind(self, joint_names: tuple, coordinates: dict) -> None:
        """Called by the controller: the actuated joints and {name: index}."""
        n = len(joint_names)
        self.joint_order, self.coordinates = joint_names, coordinates
        self.kp = gains(self._kp, n, "the posture task's kp")
        self.kd = gains(2.0 * np.sqrt(self.kp) if self._kd is None else self._kd, n, "the posture task's kd")
        self.velocity, self.acceleration = np.zeros(n), np.zeros(n)

    def _values(self, value, what):
        if isinstance(value, dict):
            unknown = sorted(set(value) - set(self.coordinates))
            if unknown:
                raise ValueError(f"the posture {what} names unknown joints: {', '.join(unknown)}")
            out = np.zeros(len(self.joint_order)) if what != "position" or self.position is None \
                else self.position.copy()
            for name, x in value.items():
                out[self.coordinates[name]] = finite_vector(x, 1, f"the posture {what} of '{name}'")[0]
            return out
        return finite_vector(value, len(self.joint_order), f"the posture {what}")

    def set_reference(self, position, velocity=None, acceleration=None) -> None:
        if self.joint_order is None:
            raise ValueError("the posture task must be added to a controller before its reference is set")
        position = self._values(position, "position")
        velocity = np.zeros(len(self.joint_order)) if velocity is None else self._values(velocity, "velocity")
        acceleration = np.zeros(len(self.joint_order)) if acceleration is None else self._values(
            acceleration, "acceleration")
        self.position, self.velocity, self.acceleration = position, velocity, acceleration

    def rows(self, state):
        q, v = state.joint_positions, state.joint_velocities
        if self.position is None:
            self.position = q.copy()
        desired = self.acceleration - self.kp * (q - self.position) - self.kd * (v - self.velocity)
        return state.joint_selection, desired
