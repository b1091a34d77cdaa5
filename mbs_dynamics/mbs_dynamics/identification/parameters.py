"""The parameters identification fits, and their columns of the regressor.

The joint torques of a robot with joint friction and rotors are linear in

    p = [pi_1 ... pi_n | per joint: Coulomb friction, viscous damping, offset, armature]

(the bodies' inertial parameters, regressor.INERTIAL_PARAMETERS, then the
JOINT_PARAMETERS of each actuated joint), tau = Y_p(q, v, a) p with

    Y_p = [ Y(q, v, a) | tanh(v_j / s), v_j, 1, a_j on joint j's row ]

(the smoothed Coulomb law of joint_friction, s its smoothing velocity). The
offset absorbs a torque sensor's bias; the URDF has no place for it, so it is
reported, not written, and not fitted unless asked for
(DEFAULT_JOINT_PARAMETERS). Actuated joints are the revolute and prismatic joints
with a coordinate of their own (not the floating base, not a coupled mimic),
less those the layout leaves out (a gripper's fingers, say: the bodies they
move are still fitted, through the other joints' torques).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbs_dynamics.algorithms.joint_friction import SMOOTHING_VELOCITY
from mbs_dynamics.algorithms.regressor import (
    INERTIAL_PARAMETERS,
    PARAMETERS_PER_BODY,
    inertial_parameters,
    joint_torque_regressor,
)
from mbs_dynamics.multibody.model import FLOATING, PLANAR, Model

JOINT_PARAMETERS = ("friction", "damping", "offset", "armature")
# What identification fits by default: the offset has no place in a URDF, and
# over a limited range of motion it passes for gravity (cos q ~ 1), pulling
# the inertias with it: fit it only where a torque sensor has a bias.
DEFAULT_JOINT_PARAMETERS = ("friction", "damping", "armature")


@dataclass(frozen=True)
class ParameterLayout:
    """Which parameters a fit has, in the order of p and of Y_p's columns
    (module docstring). joint_parameters: the JOINT_PARAMETERS included, for
    every actuated joint."""

    model: Model
    joint_parameters: tuple[str, ...] = DEFAULT_JOINT_PARAMETERS
    smoothing: float = SMOOTHING_VELOCITY
    excluded_joints: tuple[str, ...] = ()  # joints left out: their torques unused, their parameters not fitted

    def __post_init__(self):
        unknown_joints = set(self.excluded_joints) - set(self.model.joint_names)
        if unknown_joints:
            raise ValueError(f"model '{self.model.name}' has no joints {sorted(unknown_joints)} to leave out")
        object.__setattr__(self, "excluded_joints", tuple(self.excluded_joints))
        unknown = set(self.joint_parameters) - set(JOINT_PARAMETERS)
        if unknown:
            raise ValueError(f"joint parameters must be among {', '.join(JOINT_PARAMETERS)}, got {sorted(unknown)}")
        object.__setattr__(self, "joint_parameters", tuple(p for p in JOINT_PARAMETERS if p in self.joint_parameters))

    @property
    def body_names(self) -> tuple[str, ...]:
        """Each body by the link its joint moves (the root link for a floating base)."""
        description = self.model.description
        return tuple(description.root if joint not in description.joints else description.joints[joint].child
                     for joint in self.model.body_joint_names)

    @property
    def actuated_joints(self) -> tuple[str, ...]:
        model = self.model
        kinds = dict(zip(model.body_joint_names, model.joint_type, strict=True))
        return tuple(name for name in model.joint_names
                     if kinds[name] not in (FLOATING, PLANAR) and name not in self.excluded_joints)

    @property
    def inertial_count(self) -> int:
        return PARAMETERS_PER_BODY * self.model.nbodies

    @property
    def size(self) -> int:
        return self.inertial_count + len(self.joint_parameters) * len(self.actuated_joints)

    @property
    def names(self) -> tuple[str, ...]:
        """'<link>.<parameter>' and '<joint>.<parameter>', in the order of p."""
        return tuple(f"{body}.{name}" for body in self.body_names for name in INERTIAL_PARAMETERS) + tuple(
            f"{joint}.{name}" for joint in self.actuated_joints for name in self.joint_parameters)

    def joint_columns(self, parameter: str) -> np.ndarray:
        """The columns of `parameter` (one of joint_parameters), joint after joint."""
        k = self.joint_parameters.index(parameter)
        return self.inertial_count + k + len(self.joint_parameters) * np.arange(len(self.actuated_joints))

    def joint_coordinates(self) -> np.ndarray:
        """The velocity coordinate of each actuated joint."""
        return np.array([self.model.v_index(name) for name in self.actuated_joints], dtype=np.int64)

    def regressor(self, q, v, a) -> np.ndarray:
        """Y_p(q, v, a): (nv, size), or (batch, nv, size) for a batch of states."""
        Y = joint_torque_regressor(self.model, q, v, a)
        v, a = np.asarray(v, dtype=float), np.asarray(a, dtype=float)
        Y_p = np.zeros(Y.shape[:-1] + (self.size,))
        Y_p[..., :self.inertial_count] = Y
        rows = self.joint_coordinates()
        joint_terms = {"friction": np.tanh(v[..., rows] / self.smoothing), "damping": v[..., rows],
                       "offset": np.ones_like(v[..., rows]), "armature": a[..., rows]}
        for parameter in self.joint_parameters:
            Y_p[..., rows, self.joint_columns(parameter)] = joint_terms[parameter]
        return Y_p

    def nominal(self) -> np.ndarray:
        """p of the model as loaded: its inertias, the URDF's friction and damping,
        its armature, zero offsets."""
        model, rows = self.model, self.joint_coordinates()
        p = np.zeros(self.size)
        p[:self.inertial_count] = inertial_parameters(model)
        values = {"friction": model.friction[rows], "damping": model.damping[rows], "offset": 0.0,
                  "armature": model.armature[rows]}
        for parameter in self.joint_parameters:
            p[self.joint_columns(parameter)] = values[parameter]
        return p

    def body_parameters(self, p) -> np.ndarray:
        """The inertial parameters of p, one row per body (nbodies, 10)."""
        return np.asarray(p)[:self.inertial_count].reshape(self.model.nbodies, PARAMETERS_PER_BODY)

    def joint_values(self, p, parameter: str) -> dict[str, float]:
        """{joint: value} of one of joint_parameters in p."""
        return dict(zip(self.actuated_joints, np.asarray(p)[self.joint_columns(parameter)].tolist(), strict=True))
