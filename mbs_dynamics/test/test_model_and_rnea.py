"""The model, forward kinematics and RNEA: spatial algebra against explicit
6x6 matrices, real robots against Pinocchio, synthetic chains with prismatic,
planar and mimic joints against the Lagrangian by finite differences."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest
from mbs_dynamics.multibody.model import unpack_model
from mbs_dynamics.spatial import algebra as spatial
from numba import njit

from helpers import FLOATING, chain, close, mass_matrix_by_rnea
from oracles import REAL_ROBOTS, Pair, robot_path


def skew(x):
    return np.array([[0, -x[2], x[1]], [x[2], 0, -x[0]], [-x[1], x[0], 0]])


# --- spatial algebra (RBDL §3) against explicit 6x6 matrices --------------


def crm(m):
    """The 6x6 matrix of m x (motion cross product, Featherstone's crm)."""
    return np.block([[skew(m[:3]), np.zeros((3, 3))], [skew(m[3:]), skew(m[:3])]])


def test_spatial_operations_match_their_6x6_matrices():
    rng = np.random.default_rng(0)
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    R = np.array(spatial.rotation_about_axis(*axis, 0.7)).reshape(3, 3)
    close(R @ R.T, np.eye(3), 1e-15)
    close(R @ axis, axis, 1e-15)
    p, m, f = rng.normal(size=3), rng.normal(size=6), rng.normal(size=6)
    X = np.zeros((6, 6))  # child <- parent on motion vectors
    X[:3, :3] = X[3:, 3:] = R.T
    X[3:, :3] = -R.T @ skew(p)
    out = np.empty((6, 6))
    Rs, ps = R[None], p[None]  # the operators read body 0 of per-body arrays
    close(np.array(spatial.motion_to_child(Rs, ps, 0, tuple(m))), X @ m, 1e-14)
    close(np.array(spatial.motion_to_parent(Rs, ps, 0, tuple(m))), np.linalg.solve(X, m), 1e-14)
    close(np.array(spatial.force_to_parent(Rs, ps, 0, tuple(f))), X.T @ f, 1e-15)
    close(np.array(spatial.motion_cross(tuple(m), tuple(f))), crm(m) @ f, 1e-15)
    close(np.array(spatial.force_cross(tuple(m), tuple(f))), -crm(m).T @ f, 1e-15)
    mass, com = 2.0, rng.normal(size=3)
    inertia_com = np.diag([0.1, 0.2, 0.25])
    inertia_origin = inertia_com + mass * (com @ com * np.eye(3) - np.outer(com, com))
    I6 = np.block([[inertia_com + mass * skew(com) @ skew(com).T, mass * skew(com)],
                   [mass * skew(com).T, mass * np.eye(3)]])  # RBDL eq. 9
    spatial.spatial_inertia_matrix(mass, mass * com, inertia_origin, out)
    close(out, I6, 1e-15)
    inertia = (np.array([mass]), (mass * com)[None], inertia_origin[None])
    close(np.array(spatial.inertia_times(*inertia, 0, tuple(m))), I6 @ m, 1e-14)
    close(np.array(spatial.newton_euler(*inertia, 0, tuple(f), tuple(m))), I6 @ f - crm(m).T @ I6 @ m, 1e-14)
    symmetric = rng.normal(size=(6, 6))
    symmetric += symmetric.T  # articulated inertias are general symmetric matrices
    for M in (I6, symmetric):
        start = rng.normal(size=(6, 6))
        acc, work = start.copy(), np.empty((6, 6))
        spatial.congruence_add(R, p, M, work, acc)
        close(acc, start + X.T @ M @ X, 1e-14)
    quaternion = rng.normal(size=4)
    quaternion /= np.linalg.norm(quaternion)
    R = np.array(spatial.quaternion_to_rotation(*quaternion)).reshape(3, 3)
    x, y, z, w = quaternion
    angle = 2 * np.arctan2(np.linalg.norm([x, y, z]), w)
    expected = np.array(spatial.rotation_about_axis(*(np.array([x, y, z]) / np.linalg.norm([x, y, z])), angle))
    close(R, expected.reshape(3, 3), 1e-14)


# --- the model ------------------------------------------------------------


def test_bundled_arm_model():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    assert (model.nq, model.nv, model.nbodies) == (7, 7, 7)
    assert model.joint_names == tuple(f"joint{i}" for i in range(1, 8))
    assert [model.q_index(f"joint{i}") for i in range(1, 8)] == list(range(7))
    # base_link is fixed to the world; tool and tcp are merged into link7.
    assert model.total_mass == pytest.approx(20.7 - 3.0, rel=1e-12)
    assert model.frame("base_link").body == -1 and model.frame("tcp").body == 6
    assert set(model.frame_names) == {"base_link", *(f"link{i}" for i in range(1, 8)), "tool", "tcp"}
    np.testing.assert_array_equal(model.effort_limit, [176, 176, 110, 110, 110, 40, 40])
    assert model.damping[0] == 0.5 and model.friction[6] == 0.05
    with pytest.raises(ValueError, match="has no joint 'joint8'"):
        model.q_index("joint8")
    with pytest.raises(ValueError, match="has no frame 'gripper'"):
        model.frame("gripper")


@njit
def _body_count_of(packed):
    return unpack_model(packed).parent.shape[0]


def test_a_packed_model_shorter_than_its_layout_raises():
    """lay_out_model views the model's fields unchecked and checks the
    layout's ends once: a float or an int array one short raises."""
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    floats, ints = model.packed
    assert _body_count_of((floats, ints)) == model.nbodies
    for short in ((floats[:-1], ints), (floats, ints[:-1])):
        with pytest.raises(ValueError, match="model layout larger than its buffers"):
            _body_count_of(short)


def test_floating_base_and_mimic_options():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    assert (model.nq, model.nv) == (19, 18) and model.joint_names[0] == "root_joint"
    assert model.q_index("LF_HAA") == 7 and model.v_index("LF_HAA") == 6
    assert model.total_mass == pytest.approx(12.4, rel=1e-12)
    np.testing.assert_array_equal(model.neutral_configuration()[:7], [0, 0, 0, 0, 0, 0, 1])
    coupled = mbs.Model.from_urdf_file(robot_path("panda"))
    independent = mbs.Model.from_urdf_file(robot_path("panda"), mimic="independent")
    assert (coupled.nv, independent.nv) == (8, 9)
    # the coupled finger moves its master's coordinate: a column of A_G that two bodies share
    assert (coupled.shared_coordinates.tolist(), independent.shared_coordinates.tolist()) == ([1], [0])
    with pytest.raises(ValueError, match="mimic joint"):
        coupled.v_index("panda_finger_joint2")
    with pytest.raises(ValueError, match="mimic must be"):
        mbs.Model.from_urdf_file(robot_path("panda"), mimic="loose")


# --- forward kinematics and RNEA against Pinocchio -----------------------

PINOCCHIO_ROBOTS = sorted(set(REAL_ROBOTS) - {"talos_full"})


@pytest.mark.parametrize("name", PINOCCHIO_ROBOTS)
def test_frame_poses_match_pinocchio(name):
    pair = Pair(robot_path(name), floating_base=name in FLOATING)
    rng = np.random.default_rng(1)
    for _ in range(3):
        q, _, _ = pair.random_state(rng)
        for frame in pair.model.frame_names[:: max(1, len(pair.model.frame_names) // 15)]:
            close(mbs.frame_pose(pair.model, q, frame), pair.frame_pose(q, frame), 1e-12)


@pytest.mark.parametrize("name", PINOCCHIO_ROBOTS)
def test_inverse_dynamics_matches_pinocchio(name):
    pair = Pair(robot_path(name), floating_base=name in FLOATING)
    rng = np.random.default_rng(2)
    for _ in range(5):
        q, v, a = pair.random_state(rng)
        close(mbs.inverse_dynamics(pair.model, q, v, a), pair.rnea(q, v, a))
        close(mbs.nonlinear_effects(pair.model, q, v), pair.rnea(q, v, 0 * a))
        close(mbs.gravity_torques(pair.model, q), pair.rnea(q, 0 * v, 0 * a))


def test_coupled_mimic_inverse_dynamics_matches_pinocchio_mimic():
    pair = Pair(robot_path("panda"), mimic="coupled")
    rng = np.random.default_rng(3)
    for _ in range(5):
        q, v, a = pair.random_state(rng)
        close(mbs.inverse_dynamics(pair.model, q, v, a), pair.rnea(q, v, a))


def test_external_wrenches_match_pinocchio():
    pair = Pair(robot_path("talos"), floating_base=True)
    pin, pm, model = pair.pin, pair.pin_model, pair.model
    rng = np.random.default_rng(4)
    q, v, a = pair.random_state(rng)
    wrenches = {"left_sole_link": rng.normal(size=6), "arm_right_7_link": rng.normal(size=6),
                "base_link": rng.normal(size=6)}
    # Pinocchio: forces per joint, in the joint frame, about the joint origin.
    pin.forwardKinematics(pm, pair.data, pair.q(q))
    pin.updateFramePlacements(pm, pair.data)
    fext = [pin.Force.Zero() for _ in range(pm.njoints)]
    for frame, (torque, force) in ((f, (w[:3], w[3:])) for f, w in wrenches.items()):
        frame_id = pm.getFrameId(frame)
        origin = pair.data.oMf[frame_id].translation
        world = pin.Force(force, torque + np.cross(origin, force))  # about the world origin
        joint = pm.frames[frame_id].parentJoint
        fext[joint] += pair.data.oMi[joint].actInv(world)
    close(mbs.inverse_dynamics(model, q, v, a, f_ext=wrenches), pair.rnea(q, v, a, fext))


# --- synthetic chains: the Lagrangian, by finite differences --------------


def potential_energy(model, q):
    world_R, world_p = mbs.body_poses(model, q)
    coms = np.einsum("bij,bj->bi", world_R, model.first_moment) + model.mass[:, None] * world_p
    return -float(np.sum(coms @ model.gravity))


@pytest.mark.parametrize("mimic", ["coupled", "independent"])
def test_rnea_is_the_lagrangian_on_a_chain_with_prismatic_planar_and_mimic_joints(mimic):
    """tau = M a + dM/dt v - 1/2 d(v^T M v)/dq + dV/dq (v = dq/dt for these joints)."""
    model = chain(mimic)
    assert model.nv == (6 if mimic == "coupled" else 7)
    rng = np.random.default_rng(6)
    q, v, a = rng.uniform(-1, 1, model.nq), rng.normal(size=model.nv), rng.normal(size=model.nv)
    h = 1e-6
    M = mass_matrix_by_rnea(model, q)
    close(M, M.T, 1e-12)
    assert np.linalg.eigvalsh(M)[0] > 0
    dM_dt = (mass_matrix_by_rnea(model, q + h * v) - mass_matrix_by_rnea(model, q - h * v)) / (2 * h)
    dT_dq = np.array([(v @ mass_matrix_by_rnea(model, q + h * e) @ v - v @ mass_matrix_by_rnea(model, q - h * e) @ v)
                      / (4 * h) for e in np.eye(model.nq)])
    dV_dq = np.array([(potential_energy(model, q + h * e) - potential_energy(model, q - h * e)) / (2 * h)
                      for e in np.eye(model.nq)])
    lagrangian = M @ a + dM_dt @ v - dT_dq + dV_dq
    close(mbs.inverse_dynamics(model, q, v, a), lagrangian, 1e-7)  # finite differences of O(h^2)
    close(mbs.gravity_torques(model, q), dV_dq, 1e-7)
    close(mbs.potential_energy(model, q), potential_energy(model, q), 1e-12)
    close(mbs.kinetic_energy(model, q, v), 0.5 * v @ M @ v, 1e-12)


# --- batches and bad input ------------------------------------------------


def test_batch_equals_one_state_at_a_time():
    pair = Pair(robot_path("talos"), floating_base=True)
    rng = np.random.default_rng(7)
    states = [pair.random_state(rng) for _ in range(20)]
    q, v, a = (np.array(x) for x in zip(*states, strict=True))
    tau = mbs.inverse_dynamics(pair.model, q, v, a)
    assert tau.shape == (20, pair.model.nv)
    for k in range(20):
        np.testing.assert_array_equal(tau[k], mbs.inverse_dynamics(pair.model, q[k], v[k], a[k]))
    np.testing.assert_allclose(mbs.gravity_torques(pair.model, q)[3],
                               mbs.gravity_torques(pair.model, q[3]), rtol=0, atol=0)


def test_bad_inputs_raise_value_errors_that_say_what_and_where():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    with pytest.raises(ValueError, match=r"q must have shape \(19,\).*got \(18,\)"):
        mbs.inverse_dynamics(model, q[:-1], v, v)
    with pytest.raises(ValueError, match=r"v has a non-finite value \(nan\) at index \(4,\)"):
        mbs.inverse_dynamics(model, q, np.where(np.arange(18) == 4, np.nan, 0.0), v)
    with pytest.raises(ValueError, match=r"a has a non-finite value \(inf\)"):
        mbs.inverse_dynamics(model, q, v, np.full(18, np.inf))
    far = q.copy()
    far[3:7] = [0, 0, 0, 0.5]
    with pytest.raises(ValueError, match=r"q\[3:7\], the quaternion of joint 'root_joint', has norm 0.5"):
        mbs.gravity_torques(model, far)
    with pytest.raises(ValueError, match="same leading size"):
        mbs.inverse_dynamics(model, np.tile(q, (3, 1)), np.zeros((2, 18)), np.zeros((3, 18)))
    with pytest.raises(ValueError, match="has no frame 'hand'"):
        mbs.inverse_dynamics(model, q, v, v, f_ext={"hand": np.zeros(6)})
    with pytest.raises(ValueError, match="has no frame 'nowhere'"):
        mbs.frame_pose(model, q, "nowhere")


def test_nearly_unit_quaternions_are_normalised():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    rng = np.random.default_rng(8)
    q = model.neutral_configuration()
    q[7:] = rng.uniform(-1, 1, 12)
    quaternion = rng.normal(size=4)
    q[3:7] = quaternion / np.linalg.norm(quaternion)
    v, a = rng.normal(size=18), rng.normal(size=18)
    scaled = q.copy()
    scaled[3:7] *= 1 + 5e-4
    close(mbs.inverse_dynamics(model, scaled, v, a), mbs.inverse_dynamics(model, q, v, a), 1e-14)
    q_before = scaled.copy()
    mbs.inverse_dynamics(model, scaled, v, a)
    np.testing.assert_array_equal(scaled, q_before)  # inputs are never mutated
