"""integrate / difference on the configuration space: against Pinocchio's
(SE(3) exponential for the floating base), round trips, unit quaternions."""
import mbs_dynamics as mbs
import numpy as np
import pytest

from helpers import chain, close
from oracles import Pair, robot_path


@pytest.mark.parametrize("dt", [1e-3, 0.3, 1.0])
def test_integrate_and_difference_match_pinocchio(dt):
    pair = Pair(robot_path("solo12"), floating_base=True)
    pin = pair.pin
    rng = np.random.default_rng(20)
    for _ in range(5):
        q, v, _ = pair.random_state(rng)
        v *= 3
        q_next = mbs.integrate(pair.model, q, v, dt)
        expected = pin.integrate(pair.pin_model, pair.q(q), pair.v(v) * dt)
        if expected[3:7] @ q_next[3:7] < 0:  # q and -q are the same rotation
            expected[3:7] *= -1
        close(pair.q(q_next), expected, 1e-12)
        if np.linalg.norm(v[:3] * dt) < np.pi:  # within the principal branch of the log
            close(mbs.difference(pair.model, q, q_next), v * dt, 1e-10)
        close(mbs.difference(pair.model, q, q_next),
              pair.P @ pin.difference(pair.pin_model, pair.q(q), pair.q(q_next)), 1e-10)


def test_round_trip_on_a_chain_with_planar_prismatic_and_mimic_joints():
    model = chain("coupled")
    rng = np.random.default_rng(21)
    q, v = rng.uniform(-1, 1, model.nq), rng.normal(size=model.nv)
    close(mbs.difference(model, q, mbs.integrate(model, q, v, 0.7)), 0.7 * v, 1e-14)


def test_quaternion_stays_unit_over_many_steps():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    rng = np.random.default_rng(22)
    q = model.neutral_configuration()
    for _ in range(10000):
        q = mbs.integrate(model, q, rng.normal(size=model.nv) * 5, 1e-3)
    assert abs(np.linalg.norm(q[3:7]) - 1.0) < 1e-12


def test_integrate_refuses_bad_input():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    with pytest.raises(ValueError, match=r"v must have shape \(7,\)"):
        mbs.integrate(model, np.zeros(7), np.zeros(6), 0.1)
    with pytest.raises(ValueError, match="dt must be finite"):
        mbs.integrate(model, np.zeros(7), np.zeros(7), float("nan"))
