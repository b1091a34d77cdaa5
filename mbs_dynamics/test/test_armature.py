"""Rotor inertia (armature): read from the URDF's transmissions in Drake's
convention or given in code, on the mass matrix diagonal of the RNEA, CRBA,
ABA and their derivatives, against Pinocchio with model.armature set and
against our own algorithms' consistency (tau = M a + h, FD = ID^-1)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import close
from oracles import Pair, random_state, robot_path

import mbs_dynamics as mbs

TRANSMISSION = """<transmission name="{name}"><type>transmission_interface/SimpleTransmission</type>
<joint name="{joint}"><hardwareInterface>hardware_interface/EffortJointInterface</hardwareInterface></joint>
<actuator name="{name}_motor">{inner}</actuator></transmission>"""


def with_transmissions(path: str, transmissions: list[str]) -> str:
    """The URDF at `path` with Drake's namespace declared and `transmissions` added."""
    xml = open(path).read()
    start = xml.index("<robot") + len("<robot")
    xml = xml[:start] + ' xmlns:drake="http://drake.mit.edu"' + xml[start:]
    end = xml.rindex("</robot>")
    return xml[:end] + "".join(transmissions) + xml[end:]


def test_transmissions_give_rotor_inertia_times_gear_ratio_squared():
    xml = with_transmissions(robot_path("ur5"), [
        TRANSMISSION.format(name="t1", joint="shoulder_pan_joint",
                            inner='<drake:rotor_inertia value="2e-5"/><drake:gear_ratio value="100"/>'),
        TRANSMISSION.format(name="t2", joint="elbow_joint", inner='<drake:rotor_inertia value="3e-4"/>'),
        TRANSMISSION.format(name="t3", joint="wrist_1_joint", inner='<mechanicalReduction>50</mechanicalReduction>'),
        TRANSMISSION.format(name="t4", joint="no_such_joint", inner='<drake:rotor_inertia value="1"/>'),
        TRANSMISSION.format(name="t5", joint="wrist_2_joint", inner='<drake:rotor_inertia value="-1"/>'),
    ])
    model = mbs.Model.from_urdf_string(xml)
    expected = np.zeros(model.nv)
    expected[model.v_index("shoulder_pan_joint")] = 2e-5 * 100**2
    expected[model.v_index("elbow_joint")] = 3e-4  # no gear ratio: 1
    close(model.armature, expected, 1e-15)
    assert any("'no_such_joint'" in w and "ignored" in w for w in model.warnings)
    assert any("negative rotor_inertia" in w for w in model.warnings)
    # given in code: over the URDF's, joint by joint
    model = mbs.Model.from_urdf_string(xml, armature={"elbow_joint": 0.5, "wrist_3_joint": 0.25})
    expected[model.v_index("elbow_joint")], expected[model.v_index("wrist_3_joint")] = 0.5, 0.25
    close(model.armature, expected, 1e-15)


def test_bad_armature_is_refused_with_the_joint_named():
    path = robot_path("ur5")
    for armature, message in (({"elbow_joint": -1.0}, "'elbow_joint' must be finite, >= 0"),
                              ({"elbow_joint": np.nan}, "'elbow_joint' must be finite"),
                              ({"elbow_joint": "heavy"}, "'elbow_joint' must be a number"),
                              ({"nope": 1.0}, "no revolute or prismatic joint 'nope'"),
                              ([1.0] * 6, "must be a dict")):
        with pytest.raises(ValueError, match=message):
            mbs.Model.from_urdf_file(path, armature=armature)
    xml = with_transmissions(path, [TRANSMISSION.format(name="t", joint="elbow_joint",
                                                        inner='<drake:rotor_inertia value="much"/>')])
    with pytest.raises(mbs.URDFError, match="transmission 't': rotor_inertia value 'much' is not a number"):
        mbs.Model.from_urdf_string(xml)


@pytest.mark.parametrize("name", ["ur5", "solo12"])
def test_armature_matches_pinocchio(name):
    pair = Pair(robot_path(name), floating_base=name == "solo12")
    rng = np.random.default_rng(3)
    joints = [j for j in pair.model.joint_names if j != "root_joint"]
    armature = {joint: value for joint, value in zip(joints, rng.uniform(0.01, 0.5, len(joints)), strict=True)}
    model = pair.model = mbs.Model.from_urdf_file(robot_path(name), floating_base=name == "solo12",
                                                  mimic="independent", armature=armature)
    pin, pm, d, P = pair.pin, pair.pin_model, pair.data, pair.P
    pm.armature = pair.v(model.armature)
    for _ in range(3):
        q, v, a = random_state(model, rng)
        qp, vp = pair.q(q), pair.v(v)
        close(mbs.inverse_dynamics(model, q, v, a), pair.rnea(q, v, a))
        for form in ("spatial", "hybrid"):
            close(mbs.inverse_dynamics(model, q, v, a, representation=form), pair.rnea(q, v, a))
        M = pin.crba(pm, d, qp)
        M = np.triu(M) + np.triu(M, 1).T
        close(mbs.mass_matrix(model, q), P @ M @ P.T)
        tau = a
        close(mbs.forward_dynamics(model, q, v, tau), P @ pin.aba(pm, d, qp, vp, pair.v(tau)))
        ours = mbs.forward_dynamics_derivatives(model, q, v, tau)
        for mine, theirs in zip(ours, pin.computeABADerivatives(pm, d, qp, vp, pair.v(tau)), strict=True):
            close(mine, P @ theirs @ P.T, 1e-9)
        dq, dv, da = mbs.inverse_dynamics_derivatives(model, q, v, a)
        close(da, mbs.mass_matrix(model, q), 1e-13)
        close(mbs.inverse_dynamics_rate(model, q, v, a, v), dq @ v + dv @ a + da @ v, 1e-9)
        close(mbs.kinetic_energy(model, q, v), pin.computeKineticEnergy(pm, d, qp, vp), 1e-12)
        close(mbs.kinetic_energy(model, q, v), 0.5 * v @ mbs.mass_matrix(model, q) @ v, 1e-12)
        Minv = mbs.InverseMassMatrix(model, q)
        close(Minv @ mbs.mass_matrix(model, q), np.eye(model.nv), 1e-9)


def test_the_simulator_moves_the_rotors_too():
    """A UR5 whose joints carry armature, released from rest in our simulator
    (no friction, no damping): after one step v = dt M^-1 (tau - g) of the
    model with armature, not of the one without; and so for rk4."""
    path = robot_path("ur5")
    armature = {name: 0.2 for name in ("shoulder_lift_joint", "elbow_joint", "wrist_1_joint")}
    with_rotors, without = mbs.Model.from_urdf_file(path, armature=armature), mbs.Model.from_urdf_file(path)
    q = np.array([0.3, -1.0, 1.2, -0.5, 0.8, 0.1])
    tau = np.array([1.0, -20.0, 5.0, 2.0, 1.0, 0.5])
    dt = 1e-4
    expected = mbs.forward_dynamics(with_rotors, q, np.zeros(6), tau)
    other = mbs.forward_dynamics(without, q, np.zeros(6), tau)
    assert np.abs(expected - other).max() > 1.0
    for integrator in ("semi_implicit_euler", "rk4"):
        simulation = mbs.Simulation(with_rotors, mbs.World(ground=None), dt=dt, q=q, integrator=integrator)
        simulation.step(tau)
        assert np.allclose(simulation.v / dt, expected, rtol=1e-3, atol=1e-3)
