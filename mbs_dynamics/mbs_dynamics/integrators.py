"""Time integration of q' = q v (the floating base's pose moves by its body
twist), v' = a(q, v), selectable by name (Müller dynamics §7):

    semi_implicit_euler   v1 = v + dt a(q, v), q1 = q ⊕ dt v1 (order 1, symplectic
                          Euler: bounded energy error for conservative systems)
    rk4                   classical Runge-Kutta in the tangent space at q, the
                          stage configurations composed with ⊕ but the
                          increment's rate taken as the twist itself: order 4
                          for joints, order 2 for a floating base's orientation
    rkmk4                 Munthe-Kaas RK4: the floating base's increment X with
                          q = q0 exp(X) has X' = dexp⁻¹_{-X}(V) (Müller dynamics
                          §7), integrated by RK4: order 4 everywhere

Every configuration is formed by configuration.integrate, so a quaternion stays
unit to rounding.
"""
from __future__ import annotations

import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.aba import forward_dynamics
from mbs_dynamics.configuration import integrate
from mbs_dynamics.lie import ad
from mbs_dynamics.model import FLOATING, Model

INTEGRATORS = ("semi_implicit_euler", "rk4", "rkmk4")


def _floating_blocks(model: Model) -> list[int]:
    return [int(model.v_start[body]) for body in range(model.nbodies) if model.joint_type[body] == FLOATING]


def dexp_inverse(increment: np.ndarray, twist: np.ndarray) -> np.ndarray:
    """dexp⁻¹_{-X}(V) = V + ½ [X, V] + 1/12 [X, [X, V]] - 1/720 ad_X⁴ V + ...: the
    rate of X for q = q0 exp(X) moving at body twist V (Bernoulli series, to the
    fourth power: beyond what an order-4 method needs)."""
    A = ad(increment)
    AV = A @ twist
    A2V = A @ AV
    return twist + 0.5 * AV + A2V / 12.0 - (A @ (A @ A2V)) / 720.0


def step(model: Model, q, v, tau, dt: float, method: str = "semi_implicit_euler", acceleration=None):
    """(q1, v1) one step of `dt` from (q, v) under the joint forces tau.
    acceleration(q, v) -> a replaces forward_dynamics(model, q, v, tau) (for
    contact dynamics, damping, ...)."""
    if method not in INTEGRATORS:
        raise ValueError(f"method must be one of {', '.join(INTEGRATORS)}, got {method!r}")
    dt = float(dt)
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a positive finite number, got {dt}")
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    if acceleration is None:
        tau = inputs.vector(model, tau, model.nv, "tau", batch=False)

        def acceleration(q, v):
            return forward_dynamics(model, q, v, tau)

    if method == "semi_implicit_euler":
        v1 = inputs.finite(model, v + dt * acceleration(q, v), "the step's velocity", (q, "q"), (v, "v"))
        return integrate(model, q, v1, dt), v1
    blocks = _floating_blocks(model) if method == "rkmk4" else []

    def rates(increment, velocity):
        """(X', v') at the stage q0 ⊕ X moving at `velocity`."""
        increment_rate = velocity.copy()
        for start in blocks:
            increment_rate[start:start + 6] = dexp_inverse(increment[start:start + 6], velocity[start:start + 6])
        return increment_rate, acceleration(integrate(model, q, increment), velocity)

    zero = np.zeros(model.nv)
    k1x, k1v = rates(zero, v)
    k2x, k2v = rates(0.5 * dt * k1x, v + 0.5 * dt * k1v)
    k3x, k3v = rates(0.5 * dt * k2x, v + 0.5 * dt * k2v)
    k4x, k4v = rates(dt * k3x, v + dt * k3v)
    increment = dt / 6.0 * (k1x + 2 * k2x + 2 * k3x + k4x)
    v1 = inputs.finite(model, v + dt / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v), "the step's velocity", (q, "q"),
                       (v, "v"))
    return integrate(model, q, increment), v1
