"""The joint torque regressor: Y pi + armature a equals the inverse dynamics,
and Y equals Pinocchio's computeJointTorqueRegressor on real robots."""
import numpy as np
import pytest
from mbs_dynamics.algorithms.regressor import PARAMETERS_PER_BODY, inertial_parameters, joint_torque_regressor
from oracles import Pair, random_state, robot_path

import mbs_dynamics as mbs


@pytest.mark.parametrize("robot, floating_base", [("ur5", False), ("panda", False), ("talos", True),
                                                  ("solo12", True)])
def test_regressor_times_parameters_is_inverse_dynamics_and_pinocchios_regressor(robot, floating_base):
    pair = Pair(robot_path(robot), floating_base=floating_base)
    model, pin = pair.model, pair.pin
    rng = np.random.default_rng(7)
    # our body i <- Pinocchio's joint of the same name
    columns = np.concatenate([PARAMETERS_PER_BODY * (pair.pin_model.getJointId(name) - 1)
                              + np.arange(PARAMETERS_PER_BODY) for name in model.body_joint_names])
    pi = inertial_parameters(model)
    for _ in range(3):
        q, v, a = random_state(model, rng)
        Y = joint_torque_regressor(model, q, v, a)
        tau = mbs.inverse_dynamics(model, q, v, a)
        assert np.allclose(Y @ pi, tau, rtol=1e-12, atol=1e-10 * np.abs(tau).max())
        Y_pin = pair.P @ pin.computeJointTorqueRegressor(pair.pin_model, pair.data, pair.q(q), pair.v(v),
                                                         pair.v(a))[:, columns]
        assert np.allclose(Y, Y_pin, rtol=1e-12, atol=1e-10 * np.abs(Y_pin).max())


def test_regressor_batch_equals_one_at_a_time_and_carries_the_armature_apart():
    model = mbs.Model.from_urdf_file(robot_path("ur5"), armature={"elbow_joint": 0.3, "wrist_1_joint": 0.1})
    rng = np.random.default_rng(3)
    states = [random_state(model, rng) for _ in range(5)]
    q, v, a = (np.array(x) for x in zip(*states, strict=True))
    Y = joint_torque_regressor(model, q, v, a)
    assert Y.shape == (5, model.nv, PARAMETERS_PER_BODY * model.nbodies)
    for b in range(5):
        assert np.array_equal(Y[b], joint_torque_regressor(model, q[b], v[b], a[b]))
    tau = mbs.inverse_dynamics(model, q, v, a)
    assert np.allclose(Y @ inertial_parameters(model) + model.armature * a, tau, atol=1e-10)
    assert np.abs(model.armature * a).max() > 0.01  # the armature term is there to be seen


def test_regressor_refuses_bad_states():
    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    q = model.neutral_configuration()
    with pytest.raises(ValueError, match="v"):
        joint_torque_regressor(model, q, np.full(model.nv, np.nan), np.zeros(model.nv))
    with pytest.raises(ValueError):
        joint_torque_regressor(model, q[:-1], np.zeros(model.nv), np.zeros(model.nv))


def test_regressor_with_a_coupled_mimic_joint():
    """The Panda's second finger mimics the first: its body's columns land on the
    master's coordinate with the multiplier, as its torque does."""
    model = mbs.Model.from_urdf_file(robot_path("panda"), mimic="coupled")
    assert model.has_coupled_joints
    rng = np.random.default_rng(5)
    q, v, a = random_state(model, rng)
    Y = joint_torque_regressor(model, q, v, a)
    assert np.allclose(Y @ inertial_parameters(model), mbs.inverse_dynamics(model, q, v, a), atol=1e-10)
