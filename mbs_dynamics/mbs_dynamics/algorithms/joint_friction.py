"""Joint friction as a torque: what the motors must add to overcome each
joint's Coulomb friction and viscous damping (the URDF's <dynamics friction
damping>, model.friction and model.damping), for feedforward compensation:

    tau_f(v) = friction tanh(v / smoothing) + damping v       (the joint feels -tau_f)

Coulomb's friction sign(v) is smoothed around zero velocity by tanh over
`smoothing` (rad/s or m/s; SMOOTHING_VELOCITY by default): odd and continuous,
76 % of the friction at |v| = smoothing, 99.5 % at 3 smoothing, so that a
feedforward at rest does not chatter between +friction and -friction. The
simulator applies the exact, set-valued law instead (stepping).
"""
from __future__ import annotations

import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.multibody.model import Model

# The default smoothing velocity of the Coulomb term (rad/s or m/s).
SMOOTHING_VELOCITY = 0.01


def joint_friction_torques(model: Model, v, smoothing: float = SMOOTHING_VELOCITY) -> np.ndarray:
    """tau_f(v) (nv,) of the module docstring; v may carry a leading batch dimension."""
    if not (np.isfinite(smoothing) and smoothing > 0.0):
        raise ValueError(f"smoothing must be a positive velocity, got {smoothing!r}")
    v = inputs.vector(model, v, model.nv, "v")
    return model.friction * np.tanh(v / smoothing) + model.damping * v
