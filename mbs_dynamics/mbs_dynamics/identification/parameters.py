"""The parameters identification fits, and their columns of the regressor.

The joint torques of a robot with joint friction and rotors are linear in

    p = [pi_1 ... pi_n | per joint: F_c, F_s - F_c, F_v, o, armature]

(the bodies' inertial parameters, regressor.INERTIAL_PARAMETERS, then the
JOINT_PARAMETERS of each actuated joint: Coulomb friction, its Stribeck
excess, viscous damping, offset, armature), tau = Y_p(q, v, a) p with

    Y_p = [ Y(q, v, a) | tanh(v_j / s), exp(-(v_j / v_sj)^2) tanh(v_j / s), v_j, 1, a_j on joint j's row ]

(the friction torque of joint_friction, s its smoothing velocity, v_sj the
joint's Stribeck velocity: fixed, not fitted, so that the torque stays
linear in p). Which JOINT_PARAMETERS a layout has chooses the friction model:

    friction, damping           Coulomb and viscous, symmetric (the default, with the armature)
    + offset                    asymmetric Coulomb: F_c + o sliding forward, F_c - o backward
    + stribeck                  Stribeck: F_s when breaking away, falling to F_c past v_s

The offset also absorbs a torque sensor's bias; over a limited range of
motion it passes for gravity, so it is not fitted unless asked for
(DEFAULT_JOINT_PARAMETERS). A parameter a layout leaves out is 0 in Y_p p.
Actuated joints are the revolute and prismatic joints with a coordinate of
their own (not the floating base, not a coupled mimic), less those the
layout leaves out (excluded: a joint without a torque sensor, whose motion
is still recorded and used) and those it holds (held: a gripper's fingers
that the recording lacks, held at a value throughout: their mimic followers
with them, and the bodies they carry fitted with the body that carries
them, through the other joints' torques).
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
from mbs_dynamics.multibody.parsers.urdf import MAX_MAGNITUDE

JOINT_PARAMETERS = ("friction", "stribeck", "damping", "offset", "armature")
# What identification fits by default: Coulomb and viscous friction and the
# armature. The offset, over a limited range of motion, passes for gravity
# (cos q ~ 1), pulling the inertias with it; the Stribeck excess needs data at
# low speeds: fit them where the friction is asymmetric (or a torque sensor
# has a bias) and where the robot was recorded slowly through v_s.
DEFAULT_JOINT_PARAMETERS = ("friction", "damping", "armature")
# The parameters that fit Coulomb's sign(v), smoothed: with one of them, a
# joint's torque is left out of the fit where it moves too slowly (estimation.fitted_rows).
COULOMB_PARAMETERS = ("friction", "stribeck")


@dataclass(frozen=True)
class ParameterLayout:
    """Which parameters a fit has, in the order of p and of Y_p's columns
    (module docstring). joint_parameters: the JOINT_PARAMETERS included, for
    every actuated joint; stribeck_velocity: v_s of every joint (rad/s or
    m/s), None: each joint's of the model (its URDF's <mbs:friction
    stribeck_velocity>, else DEFAULT_STRIBECK_VELOCITY)."""

    model: Model
    joint_parameters: tuple[str, ...] = DEFAULT_JOINT_PARAMETERS
    smoothing: float = SMOOTHING_VELOCITY
    excluded_joints: tuple[str, ...] = ()  # joints left out: their torques unused, their parameters not fitted
    held_joints: tuple[tuple[str, float], ...] = ()  # (joint, position): left out and held there, v = a = 0
    stribeck_velocity: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "excluded_joints", tuple(self.excluded_joints))
        object.__setattr__(self, "held_joints", tuple((name, float(value)) for name, value in self.held_joints))
        for option, names in (("leave out", self.excluded_joints), ("hold", [name for name, _ in self.held_joints])):
            self._check_joints(option, names)
        for name, value in self.held_joints:
            k = self.model.q_index(name)
            lower, upper = self.model.lower_position_limit[k], self.model.upper_position_limit[k]
            if not (np.isfinite(value) and lower <= value <= upper):
                raise ValueError(f"joint '{name}' cannot be held at {value:g}: its limits are [{lower:g}, {upper:g}]")
        both = set(self.excluded_joints) & set(self.held)
        if both:
            raise ValueError(f"joints {sorted(both)} are both left out and held: a held joint is left out too")
        unknown = set(self.joint_parameters) - set(JOINT_PARAMETERS)
        if unknown:
            raise ValueError(f"joint parameters must be among {', '.join(JOINT_PARAMETERS)}, got {sorted(unknown)}")
        object.__setattr__(self, "joint_parameters", tuple(p for p in JOINT_PARAMETERS if p in self.joint_parameters))
        if self.stribeck_velocity is not None and not (np.isfinite(self.stribeck_velocity)
                                                       and 0.0 < self.stribeck_velocity <= MAX_MAGNITUDE):
            raise ValueError(f"the Stribeck velocity must be above 0 and finite (rad/s or m/s), got "
                             f"{self.stribeck_velocity!r}")

    def _check_joints(self, option: str, names) -> None:
        """ValueError for a joint the layout cannot leave out or hold: unknown, a
        mimic follower (its master names it), the floating base, a planar joint."""
        model = self.model
        followers = model.mimic_masters()
        unknown = sorted(set(names) - set(model.joint_names) - set(followers))
        if unknown:
            raise ValueError(f"model '{model.name}' has no joints {unknown} to {option}; its joints: "
                             f"{', '.join(model.joint_names)}")
        for name in names:
            if name in followers:
                raise ValueError(f"joint '{name}' mimics '{followers[name]}' (it has no coordinate of its own): "
                                 f"{option} '{followers[name]}', and '{name}' follows it")
        kinds = dict(zip(model.body_joint_names, model.joint_type, strict=True))
        several = [name for name in names if kinds[name] in (FLOATING, PLANAR)]
        if several:
            raise ValueError(f"joints {several} have several coordinates: only revolute and prismatic joints can "
                             f"be {'held' if option == 'hold' else 'left out'}")

    @property
    def held(self) -> dict[str, float]:
        """{joint: the position it is held at}."""
        return dict(self.held_joints)

    def hold(self, q, v, a) -> None:
        """The held joints at their positions, at rest, in states q (N, nq), v, a (N, nv): in place."""
        for name, value in self.held_joints:
            q[:, self.model.q_index(name)] = value
            v[:, self.model.v_index(name)] = 0.0
            a[:, self.model.v_index(name)] = 0.0

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
        left_out = set(self.excluded_joints) | set(self.held)
        return tuple(name for name in model.joint_names if kinds[name] not in (FLOATING, PLANAR)
                     and name not in left_out)

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

    @property
    def stribeck_velocities(self) -> np.ndarray:
        """v_s of each actuated joint (the class docstring)."""
        if self.stribeck_velocity is not None:
            return np.full(len(self.actuated_joints), float(self.stribeck_velocity))
        return self.model.stribeck_velocity[self.joint_coordinates()]

    @property
    def fits_coulomb(self) -> bool:
        """Whether the layout fits Coulomb's smoothed sign(v) (COULOMB_PARAMETERS)."""
        return any(name in self.joint_parameters for name in COULOMB_PARAMETERS)

    def regressor(self, q, v, a) -> np.ndarray:
        """Y_p(q, v, a): (nv, size), or (batch, nv, size) for a batch of states."""
        Y = joint_torque_regressor(self.model, q, v, a)
        v, a = np.asarray(v, dtype=float), np.asarray(a, dtype=float)
        Y_p = np.zeros(Y.shape[:-1] + (self.size,))
        Y_p[..., :self.inertial_count] = Y
        rows = self.joint_coordinates()
        sign = np.tanh(v[..., rows] / self.smoothing)
        joint_terms = {"friction": sign, "damping": v[..., rows], "offset": np.ones_like(v[..., rows]),
                       "armature": a[..., rows]}
        if "stribeck" in self.joint_parameters:
            joint_terms["stribeck"] = np.exp(-(v[..., rows] / self.stribeck_velocities) ** 2) * sign
        for parameter in self.joint_parameters:
            Y_p[..., rows, self.joint_columns(parameter)] = joint_terms[parameter]
        return Y_p

    def nominal(self) -> np.ndarray:
        """p of the model as loaded: its inertias, the URDF's joint friction
        (<dynamics>, <mbs:friction>: F_s - F_c for the Stribeck excess), its
        armature."""
        model, rows = self.model, self.joint_coordinates()
        p = np.zeros(self.size)
        p[:self.inertial_count] = inertial_parameters(model)
        values = {"friction": model.friction[rows], "stribeck": (model.static_friction - model.friction)[rows],
                  "damping": model.damping[rows], "offset": model.friction_offset[rows],
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
