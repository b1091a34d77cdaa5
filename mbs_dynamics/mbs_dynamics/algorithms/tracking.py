"""Computed-torque tracking: the acceleration that the inverse dynamics turns
into feedforward plus feedback torques,

    a = a_ref + K_d (v_ref - v) + K_p (q_ref - q),

with q_ref - q the configuration difference (configuration.difference: the
log of the relative pose for a floating joint) and the gains per velocity
coordinate. With exact dynamics the tracking error e = q_ref - q then obeys
e'' + K_d e' + K_p e = 0: critically damped for K_d = 2 sqrt(K_p).
"""
from __future__ import annotations

import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.multibody.configuration import difference
from mbs_dynamics.multibody.model import Model


def computed_torque_acceleration(model: Model, q, v, q_ref, v_ref, a_ref, position_gains,
                                 velocity_gains) -> np.ndarray:
    """a (nv,) of the module docstring; gains (nv,) or one number for all coordinates."""
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    v_ref = inputs.vector(model, v_ref, model.nv, "v_ref", batch=False)
    a_ref = inputs.vector(model, a_ref, model.nv, "a_ref", batch=False)
    position_gains = np.broadcast_to(np.asarray(position_gains, dtype=float), (model.nv,))
    velocity_gains = np.broadcast_to(np.asarray(velocity_gains, dtype=float), (model.nv,))
    return a_ref + velocity_gains * (v_ref - v) + position_gains * difference(model, q, q_ref)
