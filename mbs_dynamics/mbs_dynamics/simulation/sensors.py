"""What a robot's sensors read in a simulation state (q, v, a): an IMU on a
link and a force-torque sensor at a joint, without noise; ImuNoise adds an
IMU's white noise and constant bias to a reading.

IMU: the link frame's orientation (world <- frame, unit quaternion x, y, z,
w), its angular velocity in its own axes, and the proper acceleration of its
origin in its own axes, R^T (d²r/dt² - g): what an accelerometer feels, +g
along the world's up axis at rest.

Force-torque at a joint: the wrench the joint transmits from the parent to
its child, in the child's frame about the joint origin (the RNEA's f_i,
rnea.joint_wrenches_kernel, with the contact forces as external wrenches):
at rest, the weight of everything below the joint, less what the ground
carries of it.
"""
from __future__ import annotations

import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.kinematics import body_poses, frame_acceleration, frame_pose, frame_velocity
from mbs_dynamics.algorithms.rnea import joint_wrenches_kernel
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.multibody.workspace import scratch
from mbs_dynamics.spatial.lie import matrix_to_quaternion


def imu_reading(model: Model, q, v, a, frame: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(orientation (x, y, z, w), angular velocity (3,), proper acceleration
    (3,)) of `frame` at (q, v, a) (module docstring)."""
    R = frame_pose(model, q, frame)[:3, :3]
    angular_velocity = frame_velocity(model, q, v, frame, "body")[:3]
    origin_acceleration = frame_acceleration(model, q, v, a, frame, "hybrid")[3:]
    return matrix_to_quaternion(R), angular_velocity, R.T @ (origin_acceleration - model.gravity)


def point_wrenches(model: Model, q, bodies, points, forces) -> np.ndarray:
    """(nbodies, 6) body wrenches [torque; force] in the body frames about their
    origins of the world forces (k, 3) applied at the world points (k, 3) on
    bodies (k,) (-1: the world, ignored): what the RNEA takes as f_ext."""
    world_R, world_p = body_poses(model, q)
    wrenches = np.zeros((model.nbodies, 6))
    for body, point, force in zip(bodies, points, forces, strict=True):
        if body < 0:
            continue
        R = world_R[body]
        wrenches[body, :3] += R.T @ np.cross(point - world_p[body], force)
        wrenches[body, 3:] += R.T @ force
    return wrenches


def joint_wrenches(model: Model, q, v, a, body_wrenches=None) -> np.ndarray:
    """(nbodies, 6): the wrench [torque; force] each body's joint transmits to
    it from its parent, in its frame about its origin, at (q, v, a) under the
    external body_wrenches (point_wrenches; None: none)."""
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    a = inputs.vector(model, a, model.nv, "a", batch=False)
    f_ext = np.zeros((0, 6)) if body_wrenches is None else np.ascontiguousarray(body_wrenches, dtype=float)
    if f_ext.shape not in ((0, 6), (model.nbodies, 6)):
        raise ValueError(f"body wrenches must have shape ({model.nbodies}, 6), got {f_ext.shape}")
    wrenches = np.empty((model.nbodies, 6))
    status = joint_wrenches_kernel(model.packed, q, v, a, f_ext, wrenches, scratch(model))
    inputs.refuse(model, status, "the joint wrenches", q, (v, "v"), (a, "a"))
    return wrenches


def sensor_joint_body(model: Model, joint: str) -> int:
    """The body whose joint is `joint`: a moving joint (ValueError for a fixed
    joint, whose links are merged into one body, or an unknown one)."""
    if joint not in model.body_joint_names:
        if joint in model.description.joints:
            raise ValueError(f"joint '{joint}' is fixed: its links are one rigid body, between which no wrench "
                             "is computed; put the sensor at a moving joint")
        raise ValueError(f"model '{model.name}' has no joint '{joint}'")
    return model.body_joint_names.index(joint)


class ImuNoise:
    """White noise and a constant bias on the gyroscopes and accelerometers of
    `count` IMUs: `noise` and `bias` are [gyroscope (rad/s), accelerometer
    (m/s^2)] standard deviations, each two finite numbers >= 0 (ValueError
    naming `names`' entry otherwise); each IMU axis' bias is drawn once, here,
    the noise at each reading, from the generator of `seed` (an int, a
    numpy Generator, or None: fresh entropy)."""

    def __init__(self, count: int, noise=(0.0, 0.0), bias=(0.0, 0.0), seed=None,
                 names: tuple[str, str] = ("noise", "bias")):
        self.noise = standard_deviations(noise, names[0])
        bias = standard_deviations(bias, names[1])
        self._generator = np.random.default_rng(seed)
        # (count, 2, 3): each IMU's gyroscope and accelerometer bias
        self.biases = bias[None, :, None] * self._generator.normal(size=(count, 2, 3))

    @property
    def variances(self) -> np.ndarray:
        """[gyroscope, accelerometer] variance of the white noise (a covariance's diagonal)."""
        return self.noise**2

    def reading(self, imu: int, angular_velocity, proper_acceleration) -> tuple[np.ndarray, np.ndarray]:
        """(angular velocity, proper acceleration) of IMU `imu` (an index below
        count) with its bias and a draw of the noise added."""
        drawn = self.biases[imu] + self.noise[:, None] * self._generator.normal(size=(2, 3))
        return (np.asarray(angular_velocity, dtype=float) + drawn[0],
                np.asarray(proper_acceleration, dtype=float) + drawn[1])


def standard_deviations(value, name: str) -> np.ndarray:
    """[gyroscope, accelerometer] standard deviations as an array (2,);
    ValueError saying what is wrong with `name` unless two finite numbers >= 0."""
    deviations = np.asarray(value, dtype=float)
    if deviations.shape != (2,) or not np.all(np.isfinite(deviations)) or np.any(deviations < 0):
        got = deviations.tolist() if deviations.shape == (2,) else f"{deviations.size} values"
        raise ValueError(f"{name} must be [gyroscope, accelerometer] standard deviations: two finite numbers "
                         f">= 0, got {got}")
    return deviations
