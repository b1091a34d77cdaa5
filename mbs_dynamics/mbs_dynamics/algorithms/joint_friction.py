"""Joint friction as a torque: what the motors must add to overcome each
joint's friction, for feedforward compensation (and what identification
fits). Per velocity coordinate, with the model's arrays:

    tau_f(v) = (F_c + (F_s - F_c) exp(-(v / v_s)^2)) tanh(v / s) + F_v v + o
                                                              (the joint feels -tau_f)

    F_c  Coulomb friction     model.friction          URDF <dynamics friction>
    F_v  viscous friction     model.damping           URDF <dynamics damping>
    F_s  static friction      model.static_friction   <mbs:friction static>, F_c where absent
    v_s  Stribeck velocity    model.stribeck_velocity <mbs:friction stribeck_velocity>
    o    offset               model.friction_offset   <mbs:friction offset>, 0 where absent

F_s >= F_c: from rest a joint breaks away at F_s, and the friction falls to
F_c as it speeds up past v_s (the Stribeck effect); with F_s = F_c it is
Coulomb's law. The offset o makes it asymmetric: the friction sliding
forward is F_c + o, backward F_c - o, and a joint at rest holds against
applied torques in [o - F_s, o + F_s]. Coulomb's sign(v) is smoothed around
zero velocity by tanh over `smoothing` (rad/s or m/s; SMOOTHING_VELOCITY by
default): odd and continuous, 76 % of the friction at |v| = smoothing,
99.5 % at 3 smoothing, so that a feedforward at rest does not chatter
between +F_s and -F_s. The simulator applies the exact, set-valued law
instead (simulation.stepping: sliding_friction is its level, o a constant
joint torque).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.multibody.model import Model

# The default smoothing velocity of the Coulomb term (rad/s or m/s).
SMOOTHING_VELOCITY = 0.01


def joint_friction_torques(model: Model, v, smoothing: float = SMOOTHING_VELOCITY) -> np.ndarray:
    """tau_f(v) (nv,) of the module docstring; v may carry a leading batch dimension."""
    if not (np.isfinite(smoothing) and smoothing > 0.0):
        raise ValueError(f"smoothing must be a positive velocity, got {smoothing!r}")
    v = inputs.vector(model, v, model.nv, "v")
    level = model.friction + (model.static_friction - model.friction) * np.exp(-(v / model.stribeck_velocity) ** 2)
    return level * np.tanh(v / smoothing) + model.damping * v + model.friction_offset


@njit(cache=True, inline="always")
def sliding_friction(coulomb, static, stribeck_velocity, v):
    """The friction's magnitude sliding at velocity v, F_c + (F_s - F_c)
    exp(-(v / v_s)^2) (module docstring), for one coordinate: F_s at rest."""
    ratio = v / stribeck_velocity
    return coulomb + (static - coulomb) * math.exp(-ratio * ratio)
