"""Frame velocities, accelerations and dJ/dt v in the four representations,
and the SE(3) algebra of mbs.lie: against Pinocchio, against finite
differences along a trajectory, and against the group's own identities."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest
from mbs_dynamics.spatial import lie
from scipy.linalg import expm

from helpers import FLOATING, chain, close
from oracles import Pair, robot_path

REPRESENTATIONS = ("body", "spatial", "hybrid", "mixed")


def sample_frames(model, count=6):
    names = model.frame_names
    return names[:: max(1, len(names) // count)] + [names[-1]]


@pytest.mark.parametrize("name", ["panda", "talos", "solo12"])
def test_frame_velocity_and_acceleration_match_pinocchio(name):
    pair = Pair(robot_path(name), floating_base=name in FLOATING)
    pin, pm, d = pair.pin, pair.pin_model, pair.data
    rng = np.random.default_rng(31)
    q, v, a = pair.random_state(rng)
    pin.forwardKinematics(pm, d, pair.q(q), pair.v(v), pair.v(a))
    pin.updateFramePlacements(pm, d)
    for frame in sample_frames(pair.model):
        fid = pm.getFrameId(frame)

        def motion(reference, classical=False, fid=fid):
            getter = pin.getFrameClassicalAcceleration if classical else pin.getFrameAcceleration
            m = getter(pm, d, fid, reference)
            return np.r_[m.angular, m.linear]

        def velocity(reference, fid=fid):
            m = pin.getFrameVelocity(pm, d, fid, reference)
            return np.r_[m.angular, m.linear]

        classical = motion(pin.LOCAL_WORLD_ALIGNED, classical=True)
        expected_acceleration = {
            "body": motion(pin.LOCAL),
            "spatial": motion(pin.WORLD),
            "hybrid": classical,
            "mixed": np.r_[motion(pin.LOCAL)[:3], classical[3:]],
        }
        expected_velocity = {
            "body": velocity(pin.LOCAL),
            "spatial": velocity(pin.WORLD),
            "hybrid": velocity(pin.LOCAL_WORLD_ALIGNED),
            "mixed": np.r_[velocity(pin.LOCAL)[:3], velocity(pin.LOCAL_WORLD_ALIGNED)[3:]],
        }
        for representation in REPRESENTATIONS:
            close(mbs.frame_velocity(pair.model, q, v, frame, representation), expected_velocity[representation])
            close(mbs.frame_acceleration(pair.model, q, v, a, frame, representation),
                  expected_acceleration[representation])
            close(mbs.frame_velocity(pair.model, q, v, frame, representation),
                  mbs.frame_jacobian(pair.model, q, frame, representation) @ v, 1e-12)


@pytest.mark.parametrize("representation", REPRESENTATIONS)
@pytest.mark.parametrize("robot", ["chain", "solo12"])
def test_frame_acceleration_is_the_derivative_of_frame_velocity(robot, representation):
    """Along q(t) = q ⊕ (v t + a t²/2) with velocity v + a t: central differences."""
    if robot == "chain":
        model = chain("coupled")
        frames = ("l3", "l5", "l6")
    else:
        model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
        frames = ("FL_FOOT", "HR_FOOT", "base_link")
    rng = np.random.default_rng(5)
    q = mbs.integrate(model, model.neutral_configuration(), rng.uniform(-1, 1, model.nv))
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    h = 1e-5
    for frame in frames:
        after = mbs.frame_velocity(model, mbs.integrate(model, q, v * h + a * h * h / 2), v + a * h, frame,
                                   representation)
        before = mbs.frame_velocity(model, mbs.integrate(model, q, -v * h + a * h * h / 2), v - a * h, frame,
                                    representation)
        close(mbs.frame_acceleration(model, q, v, a, frame, representation), (after - before) / (2 * h), 1e-7)


def test_bias_acceleration_is_dJdt_v_without_gravity():
    """frame_acceleration = J a + dJ/dt v, and dJ/dt v does not see gravity."""
    path = robot_path("talos")
    model = mbs.Model.from_urdf_file(path, floating_base=True)
    weightless = mbs.Model.from_urdf_file(path, floating_base=True, gravity=(0, 0, 0))
    rng = np.random.default_rng(8)
    q = mbs.integrate(model, model.neutral_configuration(), rng.uniform(-1, 1, model.nv))
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    for frame in ("left_sole_link", "gripper_right_fingertip_3_link"):
        for representation in REPRESENTATIONS:
            bias = mbs.frame_bias_acceleration(model, q, v, frame, representation)
            close(bias, mbs.frame_bias_acceleration(weightless, q, v, frame, representation), 0)
            close(mbs.frame_acceleration(model, q, v, a, frame, representation),
                  mbs.frame_jacobian(model, q, frame, representation) @ a + bias, 1e-12)
        assert np.all(mbs.frame_bias_acceleration(model, q, 0 * v, frame) == 0)


def axes_chain(mimic):
    """helpers.chain with a prismatic joint along -z, a revolute about a
    tilted axis and the mimic follower about -x (its other joints: a
    planar, a revolute about z, a continuous about x)."""
    import helpers
    original = helpers.CHAIN
    helpers.CHAIN = original.replace('<axis xyz="1 1 0"/>', '<axis xyz="0 0 -1"/>') \
        .replace('<axis xyz="1 0 0"/>', '<axis xyz="0.6 -0.8 0"/>') \
        .replace('<axis xyz="0 1 0"/><mimic', '<axis xyz="-1 0 0"/><mimic')
    try:
        return chain(mimic)
    finally:
        helpers.CHAIN = original


@pytest.mark.parametrize("robot", ["chain", "chain independent", "axes chain", "axes chain independent",
                                   "quadruped", "arm7"])
def test_scalar_placements_give_the_general_paths_numbers(robot):
    """frame_jacobian and centroidal momentum place bodies by
    joints.parent_placement (a revolute joint about a coordinate axis without
    its exact-zero terms) and convert a column as it is made: the numbers of
    the general path to the last bit (frames_motion's hybrid Jacobians and
    the body_poses of joints.forward_pass; the turned columns as the Jacobian
    turns them) on mimic, planar, prismatic and tilted joints."""
    from mbs_dynamics.algorithms import kinematics
    from mbs_dynamics.multibody import joints
    from mbs_dynamics.multibody.workspace import kinematic_views, scratch
    if robot.startswith("chain") or robot.startswith("axes"):
        mimic = "independent" if robot.endswith("independent") else "coupled"
        model = chain(mimic) if robot.startswith("chain") else axes_chain(mimic)
    else:
        model = mbs.Model.from_urdf_file(mbs.bundled_robot(robot), floating_base=robot == "quadruped")
    rng = np.random.default_rng(37)
    frames = tuple(model.frame_names)
    for _ in range(5):
        q = model.neutral_configuration() + rng.uniform(-2, 2, model.nq)
        if model.nq != model.nv:  # a floating base: a unit quaternion
            q[3:7] /= np.linalg.norm(q[3:7])
        hybrid, _, world_R, _ = kinematics.frames_motion(model, q, np.zeros(model.nv), frames)
        for k, frame in enumerate(frames):
            np.testing.assert_array_equal(mbs.frame_jacobian(model, q, frame, "hybrid"), hybrid[k], err_msg=frame)
            turned = world_R[k].T @ hybrid[k].reshape(2, 3, -1)
            body = mbs.frame_jacobian(model, q, frame, "body")
            np.testing.assert_allclose(body, turned.reshape(6, -1), rtol=0, atol=1e-12, err_msg=frame)
        views = [kinematic_views(scratch(model, floats), model.nbodies)[0] for floats in (256, 257)]
        joints.forward_pass(model.packed, q, views[0].R, views[0].p, views[0].S)
        joints.axis_forward_pass(model.packed, q, views[1].R, views[1].p, views[1].S)
        np.testing.assert_array_equal(views[1].R, views[0].R)
        np.testing.assert_array_equal(views[1].p, views[0].p)
        for i, columns in enumerate(model.nv_joint):  # S's columns of each joint (the rest is scratch)
            np.testing.assert_array_equal(views[1].S[i, :, :columns], views[0].S[i, :, :columns])


def test_frame_motion_rejects_bad_input():
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    with pytest.raises(ValueError, match="no frame 'nowhere'"):
        mbs.frame_velocity(model, q, v, "nowhere")
    with pytest.raises(ValueError, match="representation"):
        mbs.frame_acceleration(model, q, v, v, "panda_link7", "local")
    bad = v.copy()
    bad[2] = np.nan
    with pytest.raises(ValueError, match=r"^a has a non-finite value \(nan\) at index \(2,\)"):
        mbs.frame_acceleration(model, q, v, bad, "panda_link7")
    with pytest.raises(ValueError, match="shape"):
        mbs.frame_velocity(model, q, v[:3], "panda_link7")


def test_jacobian_near_overflow_is_returned_and_an_overflowing_one_refused():
    """A spatial Jacobian of a base 1.7e308 from the origin has finite
    entries whose column sums overflow (the kernel's quick test): it is
    returned, equal to the hybrid one's angular rows and o x w added to its
    linear ones; a prismatic joint pushed past the largest float raises."""
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    q = model.neutral_configuration()
    q[:3] = 1.7e308, -1.7e308, 1.5e308
    spatial = mbs.frame_jacobian(model, q, "FL_FOOT", "spatial")
    hybrid = mbs.frame_jacobian(model, q, "FL_FOOT", "hybrid")
    assert np.all(np.isfinite(spatial)) and np.max(np.abs(spatial)) > 1e308
    np.testing.assert_array_equal(spatial[:3], hybrid[:3])
    with pytest.raises(ValueError, match="too large"):
        mbs.frame_jacobian(chain("independent"), np.full(7, 1e308), "l6", "spatial")


# --- SE(3) and spatial algebra ---------------------------------------------


def hat(twist):
    """The 4x4 matrix of a twist [w; v] in se(3)."""
    out = np.zeros((4, 4))
    out[:3, :3], out[:3, 3] = lie.skew(twist[:3]), twist[3:]
    return out


def random_pose(rng):
    return lie.se3_exp(rng.normal(size=6))


def test_se3_exp_and_log():
    rng = np.random.default_rng(2)
    for scale in (1e-9, 1e-3, 1.0, 3.0):
        twist = rng.normal(size=6)
        twist[:3] *= scale / np.linalg.norm(twist[:3])
        T = lie.se3_exp(twist)
        close(T, expm(hat(twist)), 1e-13)  # the matrix exponential
        close(lie.se3_log(T), twist, 1e-9)
    # near pi, where the log is computed from the symmetric part
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    twist = np.r_[(np.pi - 1e-8) * axis, rng.normal(size=3)]
    close(lie.se3_exp(lie.se3_log(lie.se3_exp(twist))), lie.se3_exp(twist), 1e-7)


def test_adjoints_and_their_duals():
    rng = np.random.default_rng(3)
    T1, T2 = random_pose(rng), random_pose(rng)
    V, W, F = rng.normal(size=6), rng.normal(size=6), rng.normal(size=6)
    # Ad(T) V is the twist V seen from the other frame: hat(Ad V) = T hat(V) T^-1
    close(hat(lie.adjoint(T1) @ V), T1 @ hat(V) @ np.linalg.inv(T1), 1e-13)
    close(lie.adjoint(T1 @ T2), lie.adjoint(T1) @ lie.adjoint(T2), 1e-13)
    close(lie.adjoint_dual(T1), np.linalg.inv(lie.adjoint(T1)).T, 1e-13)
    # power is frame independent: (Ad* F) . (Ad V) = F . V
    close((lie.adjoint_dual(T1) @ F) @ (lie.adjoint(T1) @ V), F @ V, 1e-13)
    # ad(V) W is the Lie bracket; Ad(exp V) = exp(ad V)
    close(hat(lie.ad(V) @ W), hat(V) @ hat(W) - hat(W) @ hat(V), 1e-13)
    close(lie.adjoint(lie.se3_exp(V)), expm(lie.ad(V)), 1e-12)
    close(lie.ad_dual(V) @ F @ W, -(F @ (lie.ad(V) @ W)), 1e-13)


def test_adjoint_and_exp_match_pinocchio():
    pin = pytest.importorskip("pinocchio")
    rng = np.random.default_rng(4)
    swap = np.r_[3:6, 0:3]  # Pinocchio's motions are [v; w]
    for _ in range(5):
        V = rng.normal(size=6)
        T = lie.se3_exp(V)
        close(T, pin.exp6(V[swap]).homogeneous, 1e-13)
        close(lie.se3_log(T), pin.log6(pin.SE3(T)).vector[swap], 1e-12)
        close(lie.adjoint(T), pin.SE3(T).action[np.ix_(swap, swap)], 1e-13)


def test_inertia_transform_and_quaternions():
    rng = np.random.default_rng(6)
    inertia_com = np.diag([0.1, 0.2, 0.25])
    I_b = lie.spatial_inertia(2.0, rng.normal(size=3), inertia_com)
    T, V = random_pose(rng), rng.normal(size=6)
    I_a = lie.transform_inertia(T, I_b)
    close(0.5 * (lie.adjoint(T) @ V) @ I_a @ (lie.adjoint(T) @ V), 0.5 * V @ I_b @ V, 1e-12)  # kinetic energy
    close(I_a @ lie.adjoint(T) @ V, lie.adjoint_dual(T) @ (I_b @ V), 1e-12)  # momentum is a wrench
    for _ in range(20):
        quaternion = rng.normal(size=4)
        quaternion /= np.linalg.norm(quaternion)
        quaternion *= np.sign(quaternion[3])
        R = lie.quaternion_to_matrix(*quaternion)
        close(R @ R.T, np.eye(3), 1e-14)  # a few ulps of a 3x3 product
        close(lie.matrix_to_quaternion(R), quaternion, 1e-14)
