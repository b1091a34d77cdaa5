"""Integrators: convergence at their orders (RKMK4 order 4 on a tumbling free
body, where RK4 with naive composition drops to order 2), energy drift of a
passive chain, conservation of spatial momentum in free flight, unit
quaternions."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest

from oracles import robot_path

BOX = """<robot name="box"><link name="box"><inertial><origin xyz="0.01 -0.02 0.03"/><mass value="2"/>
  <inertia ixx="0.05" iyy="0.2" izz="0.3" ixy="0.01" ixz="0" iyz="0.02"/></inertial></link></robot>"""


def simulate(model, q, v, dt, steps, method, tau=None):
    tau = np.zeros(model.nv) if tau is None else tau
    for _ in range(steps):
        q, v = mbs.step(model, q, v, tau, dt, method)
    return q, v


def error(model, reference, state):
    return np.linalg.norm(mbs.difference(model, reference[0], state[0])) + np.linalg.norm(reference[1] - state[1])


@pytest.mark.parametrize("method, order", [("semi_implicit_euler", 1), ("rk4", 2), ("rkmk4", 4)])
def test_convergence_order_on_a_tumbling_free_body(method, order):
    model = mbs.Model.from_urdf_string(BOX, floating_base=True, gravity=(0, 0, 0))
    q0 = model.neutral_configuration()
    v0 = np.array([0.3, 4.0, 0.2, 0.5, -0.1, 0.2])  # near the unstable middle axis
    T = 0.4
    reference = simulate(model, q0, v0, T / 1600, 1600, "rkmk4")
    errors = [error(model, reference, simulate(model, q0, v0, T / n, n, method)) for n in (20, 40)]
    measured = np.log2(errors[0] / errors[1])
    assert order - 0.35 < measured < order + 0.6, f"{method}: order {measured:.2f}, errors {errors}"


def energy(model, q, v):
    return mbs.kinetic_energy(model, q, v) + mbs.potential_energy(model, q)


@pytest.mark.parametrize("method, order", [("semi_implicit_euler", 1), ("rk4", 4)])
def test_energy_drift_of_a_passive_chain_shrinks_at_the_order(method, order):
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    rng = np.random.default_rng(3)
    q0, v0 = rng.uniform(-1, 1, model.nq), rng.normal(size=model.nv)
    E0 = energy(model, q0, v0)
    drifts = []
    for dt in (4e-3, 2e-3):
        q, v, worst = q0, v0, 0.0
        for _ in range(int(round(0.2 / dt))):
            q, v = mbs.step(model, q, v, np.zeros(model.nv), dt, method)
            worst = max(worst, abs(energy(model, q, v) - E0))
        drifts.append(worst)
    measured = np.log2(drifts[0] / drifts[1])
    assert order - 0.4 < measured < order + 0.8, f"{method}: order {measured:.2f}, drifts {drifts}"


def test_free_flight_conserves_spatial_momentum_and_unit_quaternion():
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True, gravity=(0, 0, 0))
    rng = np.random.default_rng(4)
    q, v = mbs.integrate(model, model.neutral_configuration(), rng.uniform(-1, 1, model.nv)), rng.normal(size=model.nv)
    h0 = mbs.centroidal_momentum(model, q, v)
    start = model.q_index("root_joint") + 3
    for _ in range(100):
        q, v = mbs.step(model, q, v, np.zeros(model.nv), 2e-3, "rkmk4")
        assert abs(np.linalg.norm(q[start:start + 4]) - 1.0) < 1e-12
    drift = np.abs(mbs.centroidal_momentum(model, q, v) - h0).max()
    assert drift < 1e-7 * max(1.0, np.abs(h0).max()), drift


def test_bad_step_arguments():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    with pytest.raises(ValueError, match="method must be one of"):
        mbs.step(model, q, v, v, 1e-3, "leapfrog")
    with pytest.raises(ValueError, match="dt must be"):
        mbs.step(model, q, v, v, -1e-3)
    with pytest.raises(ValueError, match="tau"):
        mbs.step(model, q, v, v[:2], 1e-3)
