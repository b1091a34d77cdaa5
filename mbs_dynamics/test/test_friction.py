"""Unilateral contact with Coulomb friction (mbs.contact_step): a box at rest,
sliding, on a slope below and above its friction angle; a ball dropped with and
without restitution; Solo-12 standing on four feet; the solver's local step
and its reported accuracy against the Coulomb law checked here independently;
sticking contacts against the bilateral (KKT) impact solution."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest
from mbs_dynamics.contact.coulomb import CoulombProblem, disk_minimizer, solve_coulomb

from helpers import FEET, HALF, G, box, close, rod, solo12_standing
from oracles import robot_path

DT = 1e-3
CORNERS = [mbs.PointContact("box", (sx * HALF, sy * HALF, sz * HALF))
           for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]


def simulate(model, q, v, tau, points, ground, seconds, record=None, **options):
    """Steps of DT for `seconds`; every step converged, pushed and never pulled.
    record(step_result) is called after every step. Returns the final (q, v)."""
    warm = None
    for _ in range(round(seconds / DT)):
        result = mbs.contact_step(model, q, v, tau(q, v) if callable(tau) else tau, DT, points, ground,
                                  warm_start=warm, **options)
        assert result.converged, f"residual {result.residual:.3g} after {result.iterations} sweeps"
        assert np.all(result.impulses[:, 0] >= 0.0)
        if record:
            record(result)
        q, v = result
        warm = result.impulses
    return q, v


def on_slope(angle):
    """A ground plane through the origin tilted by `angle` about y, and the box
    lying flat on it at rest."""
    normal = (np.sin(angle), 0.0, np.cos(angle))
    q = box().neutral_configuration()
    q[:3] = HALF * np.asarray(normal)
    q[3:7] = (0.0, np.sin(angle / 2), 0.0, np.cos(angle / 2))
    return q, np.asarray(normal)


def test_box_rests_for_ten_seconds_without_drift_or_sinking():
    model = box()
    q0 = model.neutral_configuration()
    q0[2] = HALF
    iterations, forces = [], []

    def record(result):
        iterations.append(result.iterations)
        forces.append(result.forces.sum(axis=0))

    q, v = simulate(model, q0, np.zeros(6), np.zeros(6), CORNERS, mbs.Ground(friction=0.5), 10.0, record)
    close(q, q0, 1e-9)  # neither drifts nor sinks, nor turns
    close(v, np.zeros(6), 1e-9)
    # the ground carries the weight, to what the solver's 1e-10 m/s allows: 2 kg x 1e-10 m/s / 1 ms
    close(forces[-1], [0, 0, model.total_mass * G], 1e-8)
    assert max(iterations[10:]) <= 2  # warm-started: a resting contact is solved at once


@pytest.mark.parametrize("direction", [(1.0, 0.0), (1.0, 1.0), (-0.3, 1.0)])
def test_sliding_box_decelerates_at_mu_g_along_its_velocity(direction):
    model, mu, speed = box(), 0.4, 2.0
    q = model.neutral_configuration()
    q[2] = HALF
    v = np.zeros(6)
    v[3:5] = speed * np.asarray(direction) / np.hypot(*direction)
    velocities = []
    q, v = simulate(model, q, v, np.zeros(6), CORNERS, mbs.Ground(friction=mu), 0.8,
                    lambda result: velocities.append(result[1].copy()))
    velocities = np.array(velocities)
    sliding = velocities[: int(speed / (mu * G) / DT) - 1]
    # each step takes mu g dt off the speed, in the direction of motion (an exact
    # cone: a friction pyramid would turn the diagonal slides)
    speeds = np.hypot(sliding[:, 3], sliding[:, 4])
    # per step to what the solver's tolerance (1e-10 m/s) allows in 1 ms; on average to 1e-9
    close(-np.diff(speeds) / DT, np.full(speeds.size - 1, mu * G), 1e-7)
    close((speeds[0] - speeds[-1]) / (DT * (speeds.size - 1)), mu * G, 1e-9)
    close(sliding[:, 3:5] / speeds[:, None], np.tile(np.asarray(direction) / np.hypot(*direction), (len(sliding), 1)),
          1e-8)
    close(sliding[:, [0, 1, 2, 5]], np.zeros((len(sliding), 4)), 1e-9)  # no lift, no tipping, no turning
    # it stops where v0²/(2 mu g) says (to one step's travel), and then sticks
    close(v, np.zeros(6), 1e-9)
    assert abs(np.hypot(q[0], q[1]) - speed**2 / (2 * mu * G)) <= speed * DT


def test_box_on_a_slope_sticks_below_the_friction_angle_and_slides_above():
    mu = 0.5
    for angle, slides in ((np.arctan(mu) - 0.05, False), (np.arctan(mu) + 0.05, True)):
        model = box()
        q0, normal = on_slope(angle)
        ground = mbs.Ground(normal=tuple(normal), friction=mu)
        velocities = []
        q, v = simulate(model, q0, np.zeros(6), np.zeros(6), CORNERS, ground, 1.0,
                        lambda result, velocities=velocities: velocities.append(result[1].copy()))
        downhill = np.array([np.cos(angle), 0.0, -np.sin(angle)])  # world, along the slope
        body_downhill = np.array([1.0, 0.0, 0.0])  # the same in the box's axes
        if not slides:
            close(q, q0, 1e-9)
            close(v, np.zeros(6), 1e-9)
            continue
        along = np.array(velocities)[:, 3:] @ body_downhill
        expected = G * (np.sin(angle) - mu * np.cos(angle))
        close(np.diff(along) / DT, np.full(along.size - 1, expected), 1e-7)
        close((along[-1] - along[0]) / (DT * (along.size - 1)), expected, 1e-9)
        assert np.dot(q[:3] - q0[:3], downhill) > 0.05
        close((q[:3] - q0[:3]) @ normal, 0.0, 1e-9)  # on the slope, not into it


def test_frictionless_slope_accelerates_at_g_sin():
    angle = 0.3
    model = box()
    q0, normal = on_slope(angle)
    velocities = []
    simulate(model, q0, np.zeros(6), np.zeros(6), CORNERS, mbs.Ground(normal=tuple(normal), friction=0.0), 0.2,
             lambda result: velocities.append(result[1][3]))
    close(np.diff(velocities) / DT, np.full(len(velocities) - 1, G * np.sin(angle)), 1e-8)


def ball():
    """A 1 kg point mass (a small ball) at 1 m."""
    urdf = """<robot name="ball"><link name="ball"><inertial><mass value="1.0"/>
    <inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial></link></robot>"""
    model = mbs.Model.from_urdf_string(urdf, floating_base=True)
    q = model.neutral_configuration()
    q[2] = 1.0
    return model, q


@pytest.mark.parametrize("restitution", [0.0, 0.5, 1.0])
def test_dropped_ball_lands_without_penetrating_and_bounces_with_its_restitution(restitution):
    model, q = ball()
    points = [mbs.PointContact("ball")]
    heights, speeds, gaps = [], [], []

    def record(result):
        heights.append(result[0][2])
        speeds.append(result[1][5])
        gaps.append(result.gaps[0])

    simulate(model, q, np.zeros(6), np.zeros(6), points, mbs.Ground(restitution=restitution), 1.2, record)
    heights = np.array(heights)
    assert min(gaps) >= -1e-12 and heights.min() >= -1e-12  # the ground is never passed
    landing = int(np.argmax(np.array(speeds) >= 0.0))  # the first step that does not fall
    assert abs(landing * DT - np.sqrt(2 / G)) <= 3 * DT
    if restitution == 0:
        close(heights[landing:], np.zeros(heights.size - landing), 1e-12)  # stays down
    else:  # back up to e² of the drop, to the first order of the step
        assert abs(heights[landing:].max() - restitution**2) <= 0.01


def test_solo12_standing_on_four_feet_holds_still():
    """The joint torques of contact-consistent inverse dynamics at rest, with a
    light PD on the joints: the robot stands still, and the ground's forces are
    the ones inverse dynamics assumed (four point contacts fix them uniquely)."""
    model, q0 = solo12_standing()
    points = [mbs.PointContact(foot) for foot in FEET]
    mu = 0.8
    feedforward, expected = mbs.contact_inverse_dynamics(model, q0, np.zeros(model.nv), np.zeros(model.nv),
                                                         points, friction=mu)
    joints = slice(6, model.nv)

    def tau(q, v):
        command = feedforward.copy()
        command[joints] -= 5.0 * (q[7:] - q0[7:]) + 0.1 * v[joints]
        return command

    forces = []
    q, v = simulate(model, q0, np.zeros(model.nv), tau, points, mbs.Ground(friction=mu), 2.0,
                    lambda result: forces.append(result.forces))
    close(q, q0, 1e-8)
    close(v, np.zeros(model.nv), 1e-8)
    close(forces[-1], np.array(expected), 1e-8)
    for f in forces[-1]:
        assert np.hypot(f[0], f[1]) <= mu * f[2]


def test_sticking_contacts_match_the_bilateral_impact_solution():
    """When every foot sticks, the step's velocity is the plastic impact of the
    free motion on the bilateral constraints (contact.impact, dense KKT), a
    route that shares neither the factorisation nor the solver."""
    model, q = solo12_standing()
    points = [mbs.PointContact(foot) for foot in FEET]
    rng = np.random.default_rng(7)
    v = 0.01 * rng.normal(size=model.nv)
    tau, _ = mbs.contact_inverse_dynamics(model, q, v, np.zeros(model.nv), points)
    tau[6:] += 0.05 * rng.normal(size=model.nv - 6)
    result = mbs.contact_step(model, q, v, tau, DT, points, mbs.Ground(friction=10.0))
    assert result.converged and np.all(result.impulses[:, 0] > 0)  # all pressed, all stick
    v_free = v + DT * mbs.forward_dynamics(model, q, v, tau)
    v_plus, impulses = mbs.impact(model, q, v_free, points, 0.0)
    close(result[1], v_plus, 1e-9)
    close(result.forces * DT, np.array(impulses), 1e-9)
    close(result[0], mbs.integrate(model, q, v_plus, DT), 1e-12)


def test_disk_minimizer_meets_its_optimality_conditions():
    rng = np.random.default_rng(3)
    for trial in range(300):
        B = rng.normal(size=(2, 2))
        A = B @ B.T if trial % 3 else np.outer(B[0], B[0])  # every third one singular
        g = rng.normal(size=2) * rng.choice([1e-3, 1.0, 1e3])
        radius = rng.choice([0.0, 1e-3, 0.5, 10.0])
        x = np.array(disk_minimizer(A[0, 0], A[0, 1], A[1, 1], g[0], g[1], radius))
        norm = np.linalg.norm(x)
        assert norm <= radius * (1 + 1e-12) + 1e-300
        gradient = A @ x + g
        if norm < radius * (1 - 1e-9):  # inside: stationary
            assert np.linalg.norm(gradient) <= 1e-9 * max(1.0, np.linalg.norm(g))
        elif radius > 0:  # on the circle: the gradient points inwards along -x
            kappa = -(gradient @ x) / norm**2
            assert kappa >= -1e-9
            close(gradient, -kappa * x, 1e-8)
        # no point of the disk does better
        angles = np.linspace(0, 2 * np.pi, 64)
        for r in (radius, 0.5 * radius):
            for y in r * np.c_[np.cos(angles), np.sin(angles)]:
                assert 0.5 * x @ A @ x + g @ x <= 0.5 * y @ A @ y + g @ y + 1e-9 * max(1.0, abs(g).max())


def test_solver_residual_is_the_coulomb_law_violation():
    """Random Delassus problems: at the reported accuracy the impulses obey
    the Coulomb law, checked here from its definition."""
    rng = np.random.default_rng(11)
    for _ in range(50):
        points, nv = rng.integers(1, 6), 12
        Gm = rng.normal(size=(3 * points, nv))
        B = rng.normal(size=(nv, nv))
        W = Gm @ np.linalg.inv(B @ B.T + nv * np.eye(nv)) @ Gm.T
        c = rng.normal(size=3 * points)
        mu = rng.uniform(0.1, 1.5, size=points)
        impulses, u = np.zeros(3 * points), np.empty(3 * points)
        problem = CoulombProblem(W, c, mu, np.zeros(0), np.zeros(0), np.zeros(0))
        sweeps, residual = solve_coulomb(problem, impulses, u, 1e-12, 5000)
        assert residual <= 1e-12 and sweeps < 5000
        close(u, W @ impulses + c, 1e-12)
        for k in range(points):
            lam, vel = impulses[3 * k:3 * k + 3], u[3 * k:3 * k + 3]
            tolerance = 1e-10 * max(1.0, np.abs(c).max())
            assert lam[0] >= 0 and vel[0] >= -tolerance and abs(lam[0] * vel[0]) <= tolerance * max(1, lam[0])
            assert np.linalg.norm(lam[1:]) <= mu[k] * lam[0] * (1 + 1e-12)
            slip = np.linalg.norm(vel[1:])
            if slip > 1e-8:  # sliding: the friction is on the cone, against the slip
                close(lam[1:], -mu[k] * lam[0] * vel[1:] / slip, 1e-6)


def test_contact_step_rejects_bad_input():
    model = box()
    q = model.neutral_configuration()
    with pytest.raises(ValueError, match="dt"):
        mbs.contact_step(model, q, np.zeros(6), np.zeros(6), 0.0, CORNERS)
    with pytest.raises(ValueError, match="warm_start"):
        mbs.contact_step(model, q, np.zeros(6), np.zeros(6), DT, CORNERS, warm_start=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="no frame"):
        mbs.contact_step(model, q, np.zeros(6), np.zeros(6), DT, [mbs.PointContact("nowhere")])
    with pytest.raises(ValueError, match="friction"):
        mbs.Ground(friction=-1.0)
    with pytest.raises(ValueError, match="normal"):
        mbs.Ground(normal=(0.0, 0.0, 0.0))
    bad = np.zeros(6)
    bad[2] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        mbs.contact_step(model, q, bad, np.zeros(6), DT, CORNERS)


@pytest.mark.parametrize("robot", ["solo12", "talos", "talos_full", "tiago_dual"])
def test_sparse_mass_matrix_factorisation(robot):
    """M = L^T L with the tree's sparsity (RBDA §6.5) solves as the dense M does,
    also with mimic couplings (where it falls back to a dense chain)."""
    from mbs_dynamics.algorithms.crba import (
        ltl_factor,
        ltl_factor_dense,
        ltl_solve,
        ltl_solve_dense,
        ltl_solve_transposed,
        ltl_solve_transposed_paths,
    )

    from oracles import random_state

    model = mbs.Model.from_urdf_file(robot_path(robot), floating_base=True)
    rng = np.random.default_rng(5)
    q, _, _ = random_state(model, rng)
    M = mbs.mass_matrix(model, q)
    L = M.copy()
    assert ltl_factor(L, model.dof_parent) == -1
    lower = np.tril(L)
    close(lower.T @ lower, M, 1e-12)
    b = rng.normal(size=model.nv)
    x = b.copy()
    ltl_solve(L, model.dof_parent, x)
    close(M @ x, b, 1e-9)
    assert (model.dof_parent < np.arange(model.nv)).all()
    for i in rng.choice(model.nv, 5, replace=False):  # a row zero off one path to the root, solved along it
        full, chain = np.zeros(model.nv), np.zeros(model.nv)
        full[i] = chain[i] = rng.normal()
        ltl_solve_transposed(L, model.dof_parent, full)
        ltl_solve_transposed_paths(L, model.dof_parent, chain[np.newaxis], i, -1)  # a block of one row
        close(chain, full, 0.0)
    for i, j in rng.choice(model.nv, (5, 2)):  # zero off two paths (two bodies' relative motion)
        full, paths = np.zeros(model.nv), np.zeros(model.nv)
        full[[i, j]] = paths[[i, j]] = rng.normal(size=2) if i != j else rng.normal()
        ltl_solve_transposed(L, model.dof_parent, full)
        ltl_solve_transposed_paths(L, model.dof_parent, paths[np.newaxis], i, j)
        close(paths, full, 1e-15)
        block = np.zeros((3, model.nv))  # rows on the same paths at once: each as if alone, bit for bit
        block[:, [i, j]] = rng.normal(size=(3, 2))
        alone = block.copy()
        ltl_solve_transposed_paths(L, model.dof_parent, block, i, j)
        for row in alone:
            ltl_solve_transposed_paths(L, model.dof_parent, row[np.newaxis], i, j)
        assert np.array_equal(block, alone)
    singular = M.copy()
    singular[-1, -1] = 0.0
    assert ltl_factor(singular, model.dof_parent) == model.nv - 1
    # M as a dense matrix (each coordinate's parent the one before): the dense factor and solve are the tree's,
    # bit for bit
    dense_parents = np.arange(model.nv) - 1
    tree, dense = M.copy(), M.copy()
    assert ltl_factor(tree, dense_parents) == ltl_factor_dense(dense) == -1
    assert np.array_equal(tree, dense)
    x_tree, x_dense = b.copy(), b.copy()
    ltl_solve(tree, dense_parents, x_tree)
    ltl_solve_dense(dense, x_dense)
    assert np.array_equal(x_tree, x_dense)
    close(M @ x_dense, b, 1e-9)
    assert ltl_factor_dense(singular.copy()) == model.nv - 1


def test_frames_motion_against_frame_kinematics():
    """The one-pass kernel of the contact rows against the single-frame functions."""
    from mbs_dynamics.algorithms.kinematics import frames_motion_kernel
    from mbs_dynamics.multibody.workspace import scratch

    from oracles import random_state

    model = mbs.Model.from_urdf_file(robot_path("talos"), floating_base=True)
    rng = np.random.default_rng(9)
    q, v, _ = random_state(model, rng)
    frames = ["left_sole_link", "right_sole_link", "gripper_left_base_link", "torso_2_link"]
    placements = [model.frame(name) for name in frames]
    k = len(frames)
    jacobians, motion = np.empty((k, 6, model.nv)), np.empty((k, 2, 6))
    rotations, positions = np.empty((k, 3, 3)), np.empty((k, 3))
    assert frames_motion_kernel(model.packed, q, v, np.array([f.body for f in placements]),
                                np.array([f.rotation for f in placements]),
                                np.array([f.translation for f in placements]), jacobians, motion, rotations,
                                positions, scratch(model)) == 0
    for i, name in enumerate(frames):
        pose = mbs.frame_pose(model, q, name)
        close(rotations[i], pose[:3, :3], 1e-12)
        close(positions[i], pose[:3, 3], 1e-12)
        close(jacobians[i], mbs.frame_jacobian(model, q, name, "hybrid"), 1e-12)
        close(motion[i, 0], mbs.frame_velocity(model, q, v, name, "hybrid"), 1e-12)
        close(motion[i, 1], mbs.frame_bias_acceleration(model, q, v, name, "hybrid"), 1e-12)


def test_joint_damping_is_implicit_and_exact_per_step():
    inertia, damping = 0.25 + 1e-6, 0.5
    model = rod(damping=damping)
    q, v = np.zeros(1), np.array([2.0])
    for _ in range(1000):
        q, v = mbs.contact_step(model, q, v, np.zeros(1), DT, joint_damping=True)
    close(v, 2.0 * (1 + DT * damping / inertia) ** -1000, 1e-12)  # implicit Euler, step by step
    assert abs(v[0] - 2.0 * np.exp(-damping / inertia)) < 2e-3  # and the exact decay, to first order
    q, v = mbs.contact_step(model, np.zeros(1), np.array([2.0]), np.zeros(1), DT)  # off by default
    assert v[0] == 2.0


def test_joint_friction_stops_the_joint_and_holds_it():
    inertia, friction = 0.25 + 1e-6, 0.3
    model = rod(friction=friction)
    q, v = np.zeros(1), np.array([1.0])
    velocities = []
    for _ in range(1200):
        result = mbs.contact_step(model, q, v, np.zeros(1), DT, joint_friction=True)
        assert result.converged
        q, v = result
        velocities.append(v[0])
    stop = 1.0 * inertia / friction  # decelerates at f / I until it stops, then stays
    k = int(stop / DT)
    close(velocities[: k - 1], 1.0 - friction / inertia * DT * np.arange(1, k), 1e-9)
    assert np.all(np.abs(velocities[k + 1:]) < 1e-15)  # stopped, to rounding
    close(q, 0.5 * 1.0 * stop, 2e-3)
    # a torque below the friction does not move it; above, the excess accelerates it
    result = mbs.contact_step(model, q, np.zeros(1), np.array([0.29]), DT, joint_friction=True)
    assert abs(result[1][0]) < 1e-15 and abs(result.joint_impulses[0] + 0.29 * DT) < 1e-12
    result = mbs.contact_step(model, q, np.zeros(1), np.array([0.5]), DT, joint_friction=True)
    close(result[1], [(0.5 - friction) / inertia * DT], 1e-12)


def test_pendulum_falls_onto_its_joint_limit_and_rests_there():
    """A pendulum (hinge about y, gravity -z) released horizontal swings down,
    the way gravity turns it, onto a limit 0.3 rad away."""
    free = rod(axis="0 1 0")
    q, v = np.zeros(1), np.zeros(1)
    direction = np.sign(mbs.forward_dynamics(free, q, v, np.zeros(1))[0])
    lower, upper = (-10.0, 0.3) if direction > 0 else (-0.3, 10.0)
    stop = 0.3 * direction
    model = rod(axis="0 1 0", lower=lower, upper=upper)
    for _ in range(2000):
        result = mbs.contact_step(model, q, v, np.zeros(1), DT, joint_limits=True)
        assert result.converged
        q, v = result
        assert direction * (q[0] - stop) <= 1e-9  # never past the limit
    close(q, [stop], 1e-9)
    assert abs(v[0]) < 1e-9 and result.limits_active == 1
    # resting on it, the limit carries the gravity torque
    close(result.joint_impulses / DT, mbs.inverse_dynamics(model, q, np.zeros(1), np.zeros(1)), 1e-6)
    without = mbs.contact_step(model, q, np.zeros(1), np.zeros(1), DT)
    assert direction * (without[0][0] - stop) > 0  # without limits it passes


def test_contact_points_given_as_arrays_or_lists_work_as_tuples():
    """A point from a parameter array (the simulator node's contact_points) is
    the same contact as the tuple: the step caches per contact set."""
    model = box()
    q = model.neutral_configuration()
    tau = np.zeros(6)
    reference = mbs.contact_step(model, q, np.zeros(6), tau, DT, CORNERS)
    for convert in (np.array, list):
        points = [mbs.PointContact("box", convert(c.point)) for c in CORNERS]
        assert points == CORNERS and hash(points[0]) == hash(CORNERS[0])
        result = mbs.contact_step(model, q, np.zeros(6), tau, DT, points)
        close(result[1], reference[1], 0.0)


def test_joint_friction_and_limit_on_one_joint():
    """A pendulum with joint friction falls onto its limit and rests there:
    limit and friction together carry the gravity torque. With friction above
    the gravity torque it never moves, even 1e-5 rad from the limit (friction
    holds before the limit is reached)."""
    free = rod(axis="0 1 0")
    q, v = np.zeros(1), np.zeros(1)
    gravity = mbs.inverse_dynamics(free, q, v, v)[0]
    direction = -np.sign(gravity)  # where gravity turns it
    lower, upper = (-10.0, 0.3) if direction > 0 else (-0.3, 10.0)
    model = rod(axis="0 1 0", friction=0.2 * abs(gravity), lower=lower, upper=upper)
    warm = np.zeros(1)
    for _ in range(2000):
        result = mbs.contact_step(model, q, v, np.zeros(1), DT, joint_limits=True, joint_friction=True,
                                  joint_warm_start=warm)
        warm = result.joint_impulses
        assert result.converged
        q, v = result
    close(q, [0.3 * direction], 1e-9)
    assert abs(v[0]) < 1e-9 and result.limits_active == 1 and result.iterations <= 1
    close(result.joint_impulses / DT, mbs.inverse_dynamics(model, q, v, v), 1e-6)
    sticky = rod(axis="0 1 0", friction=2.0 * abs(gravity), lower=lower, upper=upper)
    for start in (0.0, 0.3 * direction - 1e-5 * direction):
        q, v = np.array([start]), np.zeros(1)
        result = mbs.contact_step(sticky, q, v, np.zeros(1), DT, joint_limits=True, joint_friction=True)
        assert result.converged and abs(result[1][0]) < 1e-12 and abs(result[0][0] - start) < 1e-12


def test_contact_step_repeated_set_up_gives_the_first_calls_results():
    """contact_step keeps the last set-up per thread (its world, actuation and
    the kernel's compiled entry): a loop of calls gives, bit for bit, what a
    fresh set-up gives for each state; changing the points, the ground or a
    joint option between calls is seen; a ground given its normal as an array
    (not hashable) is stepped; another thread has its own set-up; bad inputs
    keep their messages on the kept set-up, and it still steps afterwards."""
    import threading

    from mbs_dynamics.simulation.stepping import api

    model, q0 = solo12_standing()
    points = [mbs.PointContact(f) for f in FEET]
    rng = np.random.default_rng(7)
    tau = rng.normal(size=model.nv)
    ground = mbs.Ground(friction=0.8)

    def fresh(*arguments, **options):
        api._last_step.forget()
        return mbs.contact_step(*arguments, **options)

    def same(a, b):
        assert np.array_equal(a.q, b.q) and np.array_equal(a.v, b.v)
        for name in ("points", "contacts", "coordinates", "bodies"):
            assert getattr(a, name).tobytes() == getattr(b, name).tobytes()
        assert a.report.tobytes() == b.report.tobytes()

    q, v, warm = q0, np.zeros(model.nv), None
    for _ in range(5):
        result = mbs.contact_step(model, q, v, tau, DT, points, ground, warm_start=warm)
        same(result, fresh(model, q, v, tau, DT, points, ground, warm_start=warm))
        q, v, warm = result.q, result.v, result.impulses
    # a loop on the kept set-up, past a pool's end: the last call's own q, v and impulses (recognised by identity,
    # not checked again) step as copies of them do
    inputs, results = [], []
    for _ in range(api.RESULTS_POOL + 3):
        inputs.append((q.copy(), v.copy(), None if warm is None else warm.copy()))
        results.append(mbs.contact_step(model, q, v, tau, DT, points, ground, warm_start=warm))
        q, v, warm = results[-1].q, results[-1].v, results[-1].impulses
    for (q_copy, v_copy, warm_copy), result in zip(inputs, results, strict=True):
        same(result, fresh(model, q_copy, v_copy, tau, DT, points, ground, warm_start=warm_copy))
    # each call's records are its own, past the pool's rows (api.RESULTS_POOL made at once)
    kept = [mbs.contact_step(model, q, v, tau, DT, points, ground, warm_start=warm)]
    saved = [records.tobytes() for records in (kept[0].points, kept[0].contacts, kept[0].coordinates, kept[0].bodies)]
    kept += [mbs.contact_step(model, q, v, -tau, DT, points, ground) for _ in range(2 * api.RESULTS_POOL + 1)]
    for records, before in zip((kept[0].points, kept[0].contacts, kept[0].coordinates, kept[0].bodies), saved,
                               strict=True):
        assert records.tobytes() == before
    assert not np.shares_memory(kept[1].points, kept[2].points)
    # what changes between calls is seen
    higher = mbs.Ground(height=-0.01, friction=0.8)
    for call in (lambda: (model, q, v, tau, DT, points[:2], ground), lambda: (model, q, v, tau, DT, points, higher)):
        mbs.contact_step(model, q, v, tau, DT, points, ground)
        same(mbs.contact_step(*call()), fresh(*call()))
    # the solver's settings alone: the same set-up, their own record
    mbs.contact_step(model, q, v, tau, DT, points, ground)
    kept_set_up = api._last_step.kept
    for settings in ({"dt": 2 * DT}, {"dt": DT, "tolerance": 1e-6}, {"dt": DT, "max_iterations": 1},
                     {"dt": DT, "stabilization": 0.5, "margin": 1e-3}):
        result = mbs.contact_step(model, q, v, tau, points=points, ground=ground, **settings)
        assert api._last_step.kept is kept_set_up
        same(result, fresh(model, q, v, tau, points=points, ground=ground, **settings))
        kept_set_up = api._last_step.kept
    mbs.contact_step(model, q, v, tau, DT, points, ground)
    same(mbs.contact_step(model, q, v, tau, DT, points, ground, joint_limits=True),
         fresh(model, q, v, tau, DT, points, ground, joint_limits=True))
    tilted = mbs.Ground(normal=np.array([0.0, 0.1, 1.0]), friction=0.8)
    same(mbs.contact_step(model, q, v, tau, DT, points, tilted), fresh(model, q, v, tau, DT, points, tilted))
    # another thread: its own set-up, the same results
    expected, answers = fresh(model, q, v, tau, DT, points, ground), []
    worker = threading.Thread(target=lambda: answers.append(mbs.contact_step(model, q, v, tau, DT, points, ground)))
    worker.start()
    worker.join(timeout=120)
    same(answers[0], expected)
    # any array-like on the kept set-up (the fast path takes float64 arrays as they are): the same bits, the
    # set-up kept, the caller's arrays left alone
    warm = mbs.contact_step(model, q, v, tau, DT, points, ground).impulses.copy()
    warm_expected = fresh(model, q, v, tau, DT, points, ground, warm_start=warm)
    kept = api._last_step.kept
    readonly_q = q.copy()
    readonly_q.setflags(write=False)
    before = [x.copy() for x in (q, v, tau, warm)]
    for other_q, other_v, other_tau, other_warm in (
            (q, v, tau, warm), (list(q), tuple(v), list(tau), warm.tolist()), (readonly_q, v, tau, warm),
            (np.repeat(q, 2)[::2], np.repeat(v, 2)[::2], tau.astype(np.longdouble), np.asfortranarray(warm)),
            (q.astype(">f8"), v.astype(">f8"), tau, warm.astype(">f8"))):
        result = mbs.contact_step(model, other_q, other_v, other_tau, DT, tuple(points), ground,
                                  warm_start=other_warm)
        same(result, warm_expected)
        np.testing.assert_array_equal(result.impulses, result.contacts["impulse"][:, 0])
    assert api._last_step.kept is kept
    for x, x_before in zip((q, v, tau, warm), before, strict=True):
        np.testing.assert_array_equal(x, x_before)
    # bad inputs on the kept set-up
    mbs.contact_step(model, q, v, tau, DT, points, ground)
    bad_q = q.copy()
    bad_q[3:7] = (0.5, 0.5, 0.5, 0.0)
    for arguments, message in (((bad_q, v, tau), "has norm 0.866"),
                               ((q, np.full(model.nv, np.nan), tau), "v has a non-finite value"),
                               ((q, v, np.full(model.nv, np.inf)), "tau has a non-finite value"),
                               ((q, v, np.zeros(model.nv + 1)), r"tau must have shape \(18,\)"),
                               ((q[None], v, tau), r"q must have shape \(19,\)"),
                               ((q, v[None], tau), r"v must have shape \(18,\)"),
                               ((q, v, tau[None]), r"tau must have shape \(18,\)")):
        with pytest.raises(ValueError, match=message):
            mbs.contact_step(model, *arguments, DT, points, ground)
    with pytest.raises(ValueError, match=r"warm_start must have shape \(4, 3\)"):
        mbs.contact_step(model, q, v, tau, DT, points, ground, warm_start=np.zeros((3, 3)))
    same(mbs.contact_step(model, q, v, tau, DT, points, ground), expected)
    assert api._last_step.kept.entry is not api.kept_step_kernel  # the kept set-up calls the compiled entry


def test_contact_step_takes_its_pools_again_only_once_nothing_holds_their_results():
    """A loop that keeps its last results alone steps in turns in two pools of
    records (api._Pools); a result still held, or any view of its records or
    states, keeps its pool from being taken again: what it holds stays as it
    was, and the steps after are those of new pools."""
    from mbs_dynamics.simulation.stepping import api

    model, q0 = solo12_standing()
    points = [mbs.PointContact(f) for f in FEET]
    tau = np.zeros(model.nv)
    ground = mbs.Ground(friction=0.8)

    def steps(q, v, warm, count):
        """count calls from (q, v, warm): the last result and the pools the calls took."""
        pools = []
        for _ in range(count):
            result = mbs.contact_step(model, q, v, tau, DT, points, ground, warm_start=warm)
            q, v, warm = result.q, result.v, result.impulses
            if not any(taken is api._last_step.kept.current for taken in pools):
                pools.append(api._last_step.kept.current)
        return result, pools

    api._last_step.forget()
    result, pools = steps(q0, np.zeros(model.nv), None, 6 * api.RESULTS_POOL)
    assert len(pools) == 2
    def values(held):
        """What a held result or view reads, as bytes."""
        if isinstance(held, mbs.ContactStep):
            return [np.array(value).tobytes() for value in (held.q, held.v, held.impulses, held.points, held.contacts,
                                                            held.coordinates, held.bodies, held.report)]
        return np.array(held).tobytes()

    for hold in (lambda r: r, lambda r: r.q, lambda r: r.v[3:], lambda r: r.impulses, lambda r: r.points,
                 lambda r: r.contacts["impulse"], lambda r: r.coordinates, lambda r: r.bodies, lambda r: r.report):
        start, held_pools = (result.q.copy(), result.v.copy(), result.impulses.copy()), api._last_step.kept.current
        held = hold(result)
        seen = values(held)
        result = None  # only `held` holds its pool now
        result, pools = steps(*start, 3 * api.RESULTS_POOL)
        assert len(pools) == 2 and not any(taken is held_pools for taken in pools)  # a new pool instead
        assert values(held) == seen
    start, last_pools = (result.q.copy(), result.v.copy(), result.impulses.copy()), api._last_step.kept.current
    del held, result
    result, pools = steps(*start, 3 * api.RESULTS_POOL)
    assert len(pools) == 2 and any(taken is last_pools for taken in pools)  # nothing held: taken again
