"""The smooth step, compiled: RK4 in the tangent space at q, or Munthe-Kaas
RK4 (RKMK4) for a floating base (integrators.py's docstring), of
q' = q v, v' = FD(q, v, effort - damping v - friction offset). The simulation takes it where
nothing acts by impulses or implicitly; integrators.step takes it for
'rk4' and 'rkmk4'."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.algorithms.aba import aba_kernel
from mbs_dynamics.multibody.configuration import integrate_kernel
from mbs_dynamics.multibody.model import FLOATING, unpack_model
from mbs_dynamics.multibody.workspace import readonly

# The integrators of the smooth steps (SETTINGS.integrator).
EULER, RK4, RKMK4 = 0, 1, 2
INTEGRATOR_CODES = {"semi_implicit_euler": EULER, "rk4": RK4, "rkmk4": RKMK4}

# The stages' rates of the increment X and of v (4, nv), and the stage's q and v
RungeKuttaStages = namedtuple("RungeKuttaStages", "rate_x rate_v q v")


@njit(cache=True, inline="always")
def add_bracket(x, y, scale, out):
    """out += scale [x, y] = scale ad(x) y for twists x = [w; u], y (lie.ad)."""
    w0, w1, w2, u0, u1, u2 = x[0], x[1], x[2], x[3], x[4], x[5]
    out[0] += scale * (w1 * y[2] - w2 * y[1])
    out[1] += scale * (w2 * y[0] - w0 * y[2])
    out[2] += scale * (w0 * y[1] - w1 * y[0])
    out[3] += scale * (u1 * y[2] - u2 * y[1] + w1 * y[5] - w2 * y[4])
    out[4] += scale * (u2 * y[0] - u0 * y[2] + w2 * y[3] - w0 * y[5])
    out[5] += scale * (u0 * y[1] - u1 * y[0] + w0 * y[4] - w1 * y[3])


@njit(cache=True, inline="always")
def increment_rate(model, increment, velocity, rate, lie_group):
    """rate = X' for the stage q0 ⊕ X moving at `velocity`: the velocity itself,
    or, with lie_group, for each floating joint dexp⁻¹_{-X}(V) = V + ½ [X, V] +
    1/12 [X, [X, V]] - 1/720 ad_X⁴ V (the Bernoulli series to the fourth
    power: beyond what an order-4 method needs)."""
    rate[:] = velocity
    if not lie_group:
        return
    for body in range(model.joint_type.shape[0]):
        if model.joint_type[body] != FLOATING:
            continue
        s = model.v_start[body]
        X, V = increment[s:s + 6], velocity[s:s + 6]
        a1, a2, a3, a4 = np.zeros(6), np.zeros(6), np.zeros(6), np.zeros(6)
        add_bracket(X, V, 1.0, a1)
        add_bracket(X, a1, 1.0, a2)
        add_bracket(X, a2, 1.0, a3)
        add_bracket(X, a3, 1.0, a4)
        for r in range(6):
            rate[s + r] = V[r] + 0.5 * a1[r] + a2[r] / 12.0 - a4[r] / 720.0


@njit(cache=True)
def smooth_step(packed, q, v, actuation, terms, dt, lie_group, stages, q_out, v_out, buffer):
    """(q_out, v_out) one RK4 step (RKMK4 with lie_group) of q' = q v,
    v' = FD(q, v, effort - damping v - offset), the efforts of the ACTUATOR
    records, the damping and friction offset of the JOINT_TERMS records.
    Returns aba_kernel's status."""
    model = unpack_model(packed)
    nv = v.shape[0]
    no_force = np.empty((0, 6))
    increment, tau = np.zeros(nv), np.empty(nv)
    weights = (0.0, 0.5, 0.5, 1.0)
    for s in range(4):
        for r in range(nv):
            increment[r] = 0.0 if s == 0 else weights[s] * dt * stages.rate_x[s - 1, r]
            stages.v[r] = v[r] + (0.0 if s == 0 else weights[s] * dt * stages.rate_v[s - 1, r])
            tau[r] = actuation[r].effort - terms[r].damping * stages.v[r] - terms[r].offset
        integrate_kernel(packed, q, increment, 1.0, stages.q)
        increment_rate(model, increment, stages.v, stages.rate_x[s], lie_group)
        # q, v, tau typed read-only, as the nodes' forward dynamics passes them: one compiled ABA for both
        status = aba_kernel(packed, readonly(stages.q), readonly(stages.v), readonly(tau), no_force, stages.rate_v[s],
                            buffer)
        if status != 0:
            return status
    for r in range(nv):
        increment[r] = dt / 6.0 * (stages.rate_x[0, r] + 2.0 * stages.rate_x[1, r] + 2.0 * stages.rate_x[2, r]
                                   + stages.rate_x[3, r])
        v_out[r] = v[r] + dt / 6.0 * (stages.rate_v[0, r] + 2.0 * stages.rate_v[1, r] + 2.0 * stages.rate_v[2, r]
                                      + stages.rate_v[3, r])
    integrate_kernel(packed, q, increment, 1.0, q_out)
    return 0


@njit(cache=True)
def runge_kutta_step(packed, q, v, actuation, terms, dt, lie_group, buffer):
    """(aba_kernel's status, q1, v1): smooth_step from (q, v), in new arrays."""
    nq, nv = q.shape[0], v.shape[0]
    stages = RungeKuttaStages(np.empty((4, nv)), np.empty((4, nv)), np.empty(nq), np.empty(nv))
    q_out, v_out = np.empty(nq), np.empty(nv)
    status = smooth_step(packed, q, v, actuation, terms, dt, lie_group, stages, q_out, v_out, buffer)
    return status, q_out, v_out
