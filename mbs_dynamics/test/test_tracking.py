"""Computed-torque tracking: the law, and that it converges on the true robot."""
import numpy as np
from mbs_dynamics.algorithms.tracking import computed_torque_acceleration
from oracles import robot_path

import mbs_dynamics as mbs


def test_the_law_and_its_floating_base_difference():
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    rng = np.random.default_rng(2)
    q = model.neutral_configuration()
    q_ref = mbs.integrate(model, q, 0.1 * rng.normal(size=model.nv), 1.0)
    v, v_ref, a_ref = (rng.normal(size=model.nv) for _ in range(3))
    kp, kd = rng.uniform(1, 10, model.nv), 3.0
    a = computed_torque_acceleration(model, q, v, q_ref, v_ref, a_ref, kp, kd)
    assert np.allclose(a, a_ref + kd * (v_ref - v) + kp * mbs.difference(model, q, q_ref))
    assert np.allclose(computed_torque_acceleration(model, q, v, q_ref, v_ref, a_ref, 0.0, 0.0), a_ref)


def test_tracking_error_decays_as_the_second_order_system_it_makes():
    """UR5 started 0.1 rad off a fixed reference, exact model, K_p = 100, K_d = 20
    (critically damped, e(t) = e0 (1 + 10 t) e^(-10 t)): the error after 0.5 s."""
    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    q_ref = np.array([0.3, -1.0, 1.2, -0.5, 0.8, 0.1])
    simulation = mbs.Simulation(model, mbs.World(ground=None), dt=1e-4, q=q_ref - 0.1, integrator="rk4")
    zero = np.zeros(model.nv)
    for _ in range(5000):
        a = computed_torque_acceleration(model, simulation.q, simulation.v, q_ref, zero, zero, 100.0, 20.0)
        simulation.step(mbs.inverse_dynamics(model, simulation.q, simulation.v, a))
    expected = 0.1 * (1 + 10 * 0.5) * np.exp(-10 * 0.5)
    assert np.allclose(q_ref - simulation.q, expected, rtol=2e-3)
