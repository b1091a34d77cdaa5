"""The RNEA in its three forms (Müller dynamics §4: body-fixed, spatial,
hybrid; DESIGN.md §5, "all twist representations give the same torques"):
every form against the others to 1e-12 and against Pinocchio, on real
robots with a fixed and a floating base, on a chain with prismatic, planar
and mimic joints, with external wrenches and with batches."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest
from mbs_dynamics.algorithms.rnea import DEFAULT_RNEA_REPRESENTATION, RNEA_REPRESENTATIONS

from helpers import chain, close
from oracles import Pair, robot_path

FORMS = RNEA_REPRESENTATIONS
AGREE = 1e-12  # relative to the largest torque, between forms and against Pinocchio
ROBOTS = {"ur5": False, "panda": False, "solo12": True, "talos": True}  # name: floating base


def forms_agree(function, *args, expected=None, **kwargs):
    """function(*args, representation=form) for every form: all within AGREE of
    each other and of `expected` when given; returns the body form's result."""
    results = {form: function(*args, representation=form, **kwargs) for form in FORMS}
    for form in FORMS:
        close(results[form], results["body"], AGREE)
        if expected is not None:
            close(results[form], expected, AGREE)
    return results["body"]


def test_the_forms_and_the_default():
    assert set(FORMS) == {"body", "spatial", "hybrid"}
    assert DEFAULT_RNEA_REPRESENTATION in FORMS


@pytest.mark.parametrize("name", sorted(ROBOTS))
def test_every_form_matches_pinocchio_on_real_robots(name):
    pair = Pair(robot_path(name), floating_base=ROBOTS[name])
    rng = np.random.default_rng(30)
    for _ in range(3):
        q, v, a = pair.random_state(rng)
        forms_agree(mbs.inverse_dynamics, pair.model, q, v, a, expected=pair.rnea(q, v, a))
        forms_agree(mbs.nonlinear_effects, pair.model, q, v, expected=pair.rnea(q, v, 0 * a))
        forms_agree(mbs.gravity_torques, pair.model, q, expected=pair.rnea(q, 0 * v, 0 * a))
        # the default is one of the forms, bit for bit
        np.testing.assert_array_equal(
            mbs.inverse_dynamics(pair.model, q, v, a),
            mbs.inverse_dynamics(pair.model, q, v, a, representation=DEFAULT_RNEA_REPRESENTATION))


def test_every_form_matches_pinocchio_with_coupled_mimic_joints():
    pair = Pair(robot_path("panda"), mimic="coupled")
    rng = np.random.default_rng(31)
    for _ in range(3):
        q, v, a = pair.random_state(rng)
        forms_agree(mbs.inverse_dynamics, pair.model, q, v, a, expected=pair.rnea(q, v, a))


@pytest.mark.parametrize("mimic", ["coupled", "independent"])
def test_forms_agree_on_a_chain_with_prismatic_planar_and_mimic_joints(mimic):
    """The planar joint's motion subspace turns with theta (its c_J); the body
    form is checked against the Lagrangian on this chain in test_model_and_rnea."""
    model = chain(mimic)
    rng = np.random.default_rng(32)
    for _ in range(5):
        q, v, a = rng.uniform(-2, 2, model.nq), rng.normal(size=model.nv), rng.normal(size=model.nv)
        forms_agree(mbs.inverse_dynamics, model, q, v, a)
        forms_agree(mbs.nonlinear_effects, model, q, v)
        forms_agree(mbs.gravity_torques, model, q)


def jacobian_transpose_torques(pair, q, wrenches):
    """sum_k J_k^T w_k by Pinocchio's frame Jacobians (LOCAL_WORLD_ALIGNED: the
    frame origin's velocity and the angular velocity, world axes), in our order;
    w_k = [n; f] world-aligned about the frame origin."""
    pin, pm = pair.pin, pair.pin_model
    pin.computeJointJacobians(pm, pair.data, pair.q(q))
    pin.updateFramePlacements(pm, pair.data)
    total = np.zeros(pm.nv)
    for frame, wrench in wrenches.items():
        J = pin.getFrameJacobian(pm, pair.data, pm.getFrameId(frame), pin.LOCAL_WORLD_ALIGNED)
        total += J[:3].T @ wrench[3:] + J[3:].T @ wrench[:3]  # Pinocchio: [linear; angular]
    return pair.P @ total


@pytest.mark.parametrize("name, frames", [
    ("talos", ("left_sole_link", "arm_right_7_link", "base_link", "gripper_left_fingertip_1_link")),
    ("ur5", ("tool0", "forearm_link", "base_link")),  # base_link: fixed to the world, felt by no joint
])
def test_external_wrenches_in_every_form(name, frames):
    """tau = RNEA(q, v, a) - sum_k J_k^T w_k (Pinocchio's frame Jacobians): each
    form takes the wrenches in its own axes and reference point."""
    pair = Pair(robot_path(name), floating_base=ROBOTS[name])
    rng = np.random.default_rng(33)
    for _ in range(2):
        q, v, a = pair.random_state(rng)
        wrenches = {frame: rng.normal(size=6) * 50 for frame in frames}
        expected = pair.rnea(q, v, a) - jacobian_transpose_torques(pair, q, wrenches)
        forms_agree(mbs.inverse_dynamics, pair.model, q, v, a, f_ext=wrenches, expected=expected)


@pytest.mark.parametrize("form", FORMS)
def test_batches_equal_one_state_at_a_time_in_every_form(form):
    pair = Pair(robot_path("talos"), floating_base=True)
    model = pair.model
    rng = np.random.default_rng(34)
    q, v, a = (np.array(x) for x in zip(*[pair.random_state(rng) for _ in range(8)], strict=True))
    tau = mbs.inverse_dynamics(model, q, v, a, representation=form)
    h = mbs.nonlinear_effects(model, q, v, representation=form)
    g = mbs.gravity_torques(model, q, representation=form)
    assert tau.shape == h.shape == g.shape == (8, model.nv)
    for k in range(8):
        np.testing.assert_array_equal(tau[k], mbs.inverse_dynamics(model, q[k], v[k], a[k], representation=form))
        np.testing.assert_array_equal(h[k], mbs.nonlinear_effects(model, q[k], v[k], representation=form))
        np.testing.assert_array_equal(g[k], mbs.gravity_torques(model, q[k], representation=form))
        close(tau[k], pair.rnea(q[k], v[k], a[k]), AGREE)


def test_a_batched_chain_with_planar_and_mimic_joints_in_every_form():
    model = chain("coupled")
    rng = np.random.default_rng(35)
    q, v, a = rng.uniform(-2, 2, (6, model.nq)), rng.normal(size=(6, model.nv)), rng.normal(size=(6, model.nv))
    body = forms_agree(mbs.inverse_dynamics, model, q, v, a)
    for k in range(6):
        close(body[k], mbs.inverse_dynamics(model, q[k], v[k], a[k]), 1e-15)


@pytest.mark.parametrize("form", FORMS)
def test_invalid_values_are_reported_in_every_form(form):
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    bad_v = v.copy()
    bad_v[7] = np.nan
    far = q.copy()
    far[3:7] = [0, 0, 0, 2.0]
    with pytest.raises(ValueError, match=r"v has a non-finite value \(nan\) at index \(7,\)"):
        mbs.inverse_dynamics(model, q, bad_v, v, representation=form)
    with pytest.raises(ValueError, match="v has a non-finite value"):
        mbs.nonlinear_effects(model, np.tile(q, (2, 1)), np.tile(bad_v, (2, 1)), representation=form)
    with pytest.raises(ValueError, match="the quaternion of joint 'root_joint', has norm 2"):
        mbs.gravity_torques(model, far, representation=form)
    with pytest.raises(ValueError, match="f_ext is not supported with a batch"):
        mbs.inverse_dynamics(model, np.tile(q, (2, 1)), np.zeros((2, model.nv)), np.zeros((2, model.nv)),
                             f_ext={"LF_FOOT": np.zeros(6)}, representation=form)


@pytest.mark.parametrize("representation", ["mixed", "local", "Body", "", None, 1, ["body"]])
def test_an_unknown_representation_is_a_value_error(representation):
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    q = model.neutral_configuration()
    message = "representation must be one of body, spatial, hybrid, got"
    with pytest.raises(ValueError, match=message):
        mbs.inverse_dynamics(model, q, q, q, representation=representation)
    with pytest.raises(ValueError, match=message):
        mbs.nonlinear_effects(model, q, q, representation=representation)
    with pytest.raises(ValueError, match=message):
        mbs.gravity_torques(model, q, representation=representation)
