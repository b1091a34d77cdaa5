"""The joint friction torques (mbs.joint_friction_torques): Coulomb smoothed by
tanh plus viscous, odd, continuous through zero, the exact law away from it;
and the torque that holds a turning joint at its speed in the simulator, whose
friction law is the exact one."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import close, rod

import mbs_dynamics as mbs


def test_coulomb_smoothed_around_zero_and_exact_away_from_it():
    model = rod(friction=0.3, damping=0.2)
    v = np.array([[-2.0], [-0.01], [0.0], [0.01], [2.0]])
    tau = mbs.joint_friction_torques(model, v)
    assert tau.shape == (5, 1)
    close(tau[:, 0], 0.3 * np.tanh(v[:, 0] / 0.01) + 0.2 * v[:, 0], 1e-15)
    close(tau[2], [0.0], 1e-15)  # at rest: no torque, no chatter
    close(tau[3], -tau[1], 1e-15)  # odd
    close(tau[3], [0.3 * np.tanh(1.0) + 0.002], 1e-15)  # 76 % of the friction at the smoothing velocity
    close(tau[4], [0.3 + 0.4], 1e-12)  # away from zero: friction sign(v) + damping v
    close(mbs.joint_friction_torques(model, [1e-3], smoothing=1e-6), [0.3 + 2e-4], 1e-12)
    with pytest.raises(ValueError, match="smoothing must be a positive velocity"):
        mbs.joint_friction_torques(model, [0.0], smoothing=0.0)
    with pytest.raises(ValueError, match="v has a non-finite value"):
        mbs.joint_friction_torques(model, [np.nan])


def test_the_friction_torque_holds_a_turning_joint_at_its_speed_in_the_simulator():
    """A turntable (gravity along its axis) turning at 1 rad/s against exact Coulomb
    friction and implicit damping keeps its speed under tau_f(1 rad/s), and slows
    down without it."""
    model = rod(axis="0 0 1", friction=0.3, damping=0.2)
    for torque, kept in ((lambda v: mbs.joint_friction_torques(model, v), True), (lambda v: np.zeros(1), False)):
        q, v = np.zeros(1), np.array([1.0])
        for _ in range(500):
            q, v = mbs.contact_step(model, q, v, torque(v), 1e-3, joint_friction=True, joint_damping=True)
        if kept:
            close(v, [1.0], 1e-9)
        else:
            assert v[0] < 0.5
