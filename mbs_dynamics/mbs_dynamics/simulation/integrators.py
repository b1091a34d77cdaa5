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
from mbs_dynamics.algorithms.aba import forward_dynamics, refuse_forward_dynamics
from mbs_dynamics.multibody.configuration import integrate
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.multibody.workspace import scratch
from mbs_dynamics.simulation.stepping.actuation import effort_actuation, joint_terms
from mbs_dynamics.simulation.stepping.integrator import runge_kutta_step

INTEGRATORS = ("semi_implicit_euler", "rk4", "rkmk4")


def step(model: Model, q, v, tau, dt: float, method: str = "semi_implicit_euler"):
    """(q1, v1) one step of `dt` from (q, v) under the joint forces tau; rk4
    and rkmk4 by the simulation's compiled step (stepping.integrator)."""
    if method not in INTEGRATORS:
        raise ValueError(f"method must be one of {', '.join(INTEGRATORS)}, got {method!r}")
    dt = float(dt)
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a positive finite number, got {dt}")
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    tau = inputs.vector(model, tau, model.nv, "tau", batch=False)
    if method == "semi_implicit_euler":
        v1 = inputs.finite(model, v + dt * forward_dynamics(model, q, v, tau), "the step's velocity", (q, "q"),
                           (v, "v"))
        return integrate(model, q, v1, dt), v1
    terms, _ = joint_terms(model, False, False, False)
    status, q1, v1 = runge_kutta_step(model.packed, q, v, effort_actuation(model, tau), terms, dt, method == "rkmk4",
                                      scratch(model))
    refuse_forward_dynamics(model, status, q, v, tau)
    return q1, inputs.finite(model, v1, "the step's velocity", (q, "q"), (v, "v"))
