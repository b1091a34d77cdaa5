"""Excitation trajectories on real robots (example-robot-data's UR5, Panda):
the Fourier series and its derivatives, the optimisation's gradient, limits
kept between the samples, the condition number lowered, reproducibility,
the CSV and JSON files and the command line. Few harmonics and iterations:
the optimisation's quality at the defaults is measured, not tested here."""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import close
from mbs_dynamics.identification import excitation as ex
from mbs_dynamics.identification import fourier_trajectory as ft
from mbs_dynamics.identification.data import read_csv
from mbs_dynamics.identification.excitation_cli import main
from mbs_dynamics.identification.parameters import ParameterLayout
from oracles import robot_path

import mbs_dynamics as mbs

HARMONICS = 3
ITERATIONS = 20
FINE_TIMES = 4000  # random times a period at which the limits are checked, besides the optimiser's samples


@pytest.fixture(scope="module")
def ur5():
    return mbs.Model.from_urdf_file(robot_path("ur5"))


@pytest.fixture(scope="module")
def optimised(ur5):
    return ex.optimise_excitation(ur5, harmonics=HARMONICS, max_iterations=ITERATIONS, seed=1)


def random_trajectory(rng, joints=3, harmonics=4, period=7.0):
    """Random free coefficients, the first harmonic tied (v(0) = a(0) = 0)."""
    coefficients = rng.normal(size=(joints, 2 * harmonics - 1)) @ ft.tied_coefficients(harmonics).T
    return ft.ExcitationTrajectory(tuple(f"j{k}" for k in range(joints)), period, coefficients[:, 0],
                                   coefficients[:, 1:harmonics + 1], coefficients[:, harmonics + 1:])


def model_torques(model, trajectory, times):
    """The model's torques on the trajectory's joints: inverse dynamics with the
    URDF's joint friction, the other coordinates held at the middle of their range."""
    q_j, v_j, a_j = trajectory.sample(times)
    q = np.tile(ex.middle_configuration(model), (len(times), 1))
    v, a = np.zeros((len(times), model.nv)), np.zeros((len(times), model.nv))
    columns = [model.v_index(name) for name in trajectory.joint_names]
    q[:, [model.q_index(name) for name in trajectory.joint_names]] = q_j
    v[:, columns], a[:, columns] = v_j, a_j
    return (mbs.inverse_dynamics(model, q, v, a) + mbs.joint_friction_torques(model, v))[:, columns]


def test_velocity_and_acceleration_are_the_derivatives_and_the_motion_loops_from_rest():
    trajectory = random_trajectory(np.random.default_rng(0))
    times, h = np.random.default_rng(1).uniform(0.0, 20.0, 50), 1e-5
    _, v, a = trajectory.sample(times)
    q_plus, v_plus, _ = trajectory.sample(times + h)
    q_minus, v_minus, _ = trajectory.sample(times - h)
    close(v, (q_plus - q_minus) / (2 * h), 1e-7)
    close(a, (v_plus - v_minus) / (2 * h), 1e-7)
    start, end = (np.hstack(state) for state in (trajectory.sample([0.0]), trajectory.sample([trajectory.period])))
    close(end, start, 1e-12)  # periodic: q, v, a at T equal those at 0
    close(np.hstack(trajectory.sample([0.0])[1:]), 0.0, 1e-12)  # at rest at t = 0
    pulsations = 2 * np.pi / trajectory.period * np.arange(1, trajectory.harmonics + 1)
    close(trajectory.start(), trajectory.offsets - trajectory.cosine @ (1 / pulsations), 1e-12)
    assert np.max(np.abs(v)) > 0.1  # it moves


def test_the_gradient_and_the_torque_jacobian_are_the_finite_differences(ur5):
    layout = ParameterLayout(ur5)
    joints = layout.actuated_joints
    hold = ex.middle_configuration(ur5)
    problem = ex.ExcitationProblem(layout, ex.excitation_base_parameters(layout, joints, hold), joints,
                                   ft.ExcitationLimits.from_model(ur5, joints), 10.0, HARMONICS, hold, 60)
    x = ex.random_start(problem, np.random.default_rng(2))
    gradient, jacobian = problem.derivatives(x)
    h = 1e-6
    for i in np.random.default_rng(3).choice(x.size, 8, replace=False):
        step = np.zeros_like(x)
        step[i] = h
        (f_plus, torque_plus), (f_minus, torque_minus) = problem.values(x + step), problem.values(x - step)
        assert gradient[i] == pytest.approx((f_plus - f_minus) / (2 * h), rel=1e-4, abs=1e-6)
        close(jacobian[:, i], (torque_plus - torque_minus).ravel() / (2 * h), 1e-5)
    # the torques the problem limits are the model's inverse dynamics with its joint friction
    coefficients = problem.coefficients(x)
    trajectory = ft.ExcitationTrajectory(joints, 10.0, coefficients[:, 0], coefficients[:, 1:HARMONICS + 1],
                                         coefficients[:, HARMONICS + 1:])
    close(problem.values(x)[1], model_torques(ur5, trajectory, problem.times), 1e-9)


def test_the_optimised_trajectory_keeps_its_limits_between_the_samples(ur5, optimised):
    limits = optimised.limits
    times = np.random.default_rng(4).uniform(0.0, optimised.period, FINE_TIMES)
    q, v, a = optimised.sample(times)
    assert np.all((q >= limits.lower) & (q <= limits.upper))
    assert np.all(np.abs(v) <= limits.velocity)
    assert np.all(np.abs(a) <= limits.acceleration)
    # the velocities use their bounds: the limits bind, so they are what keeps the motion in
    assert np.max(np.abs(v) / limits.velocity) > 0.95
    # torques are held at the optimiser's samples: between them, within the URDF's effort limits
    columns = [ur5.v_index(name) for name in optimised.joint_names]
    assert np.all(np.abs(model_torques(ur5, optimised, times)) <= ur5.effort_limit[columns])
    for quantity in ("position", "velocity", "acceleration", "effort"):
        assert np.all(optimised.margins[quantity] >= 0.0), quantity
    assert optimised.margins["velocity"].min() < 0.05


def test_a_tight_effort_limit_is_kept(ur5):
    joints = ("shoulder_lift_joint", "elbow_joint")
    limits = ft.ExcitationLimits.from_model(ur5, joints, effort_scale=0.2)
    # more iterations than the others: at 20 the solve is marginal, and tiny rounding differences (BLAS threads
    # after other tests) decide whether it ends within the limits
    trajectory = ex.optimise_excitation(ur5, joints, harmonics=HARMONICS, max_iterations=4 * ITERATIONS, limits=limits)
    times = np.linspace(0.0, trajectory.period, 2000)
    usage = np.max(np.abs(model_torques(ur5, trajectory, times)), axis=0) / limits.effort
    assert np.all(usage <= 1.02)  # held at 60 samples a period: 2 % between them
    assert usage.max() > 0.9  # the limit binds (without it the shoulder needs some 0.4 of its effort limit)


def test_the_condition_number_drops_from_the_random_start(optimised):
    assert np.isfinite(optimised.condition_number)
    assert optimised.condition_number < optimised.initial_condition_number / 2.0
    assert optimised.condition_number < 15.0


def test_the_same_seed_gives_the_same_trajectory(ur5):
    def run(seed):
        return ex.optimise_excitation(ur5, harmonics=2, max_iterations=5, seed=seed)

    first, again, other = run(3), run(3), run(4)
    for name in ("offsets", "sine", "cosine"):
        np.testing.assert_array_equal(getattr(first, name), getattr(again, name))
    assert first.condition_number == again.condition_number
    assert not np.array_equal(first.sine, other.sine)


def test_held_joints_stay_still_and_count_fewer_base_parameters(ur5):
    joints = ("shoulder_lift_joint", "elbow_joint")
    layout = ParameterLayout(ur5)
    hold = ex.middle_configuration(ur5)
    some = ex.excitation_base_parameters(layout, joints, hold)
    every = ex.excitation_base_parameters(layout, layout.actuated_joints, hold)
    assert 0 < some.independent.size < every.independent.size
    trajectory = ex.optimise_excitation(ur5, joints, harmonics=2, max_iterations=5)
    assert trajectory.joint_names == joints and trajectory.sample([0.0, 1.0])[0].shape == (2, 2)
    assert np.isfinite(trajectory.condition_number)


def test_limits_from_the_urdf(ur5):
    joints = ("shoulder_pan_joint", "wrist_3_joint")
    limits = ft.ExcitationLimits.from_model(ur5, joints)
    close(limits.upper, 2 * np.pi * (1 - 2 * ft.POSITION_MARGIN), 1e-12)  # UR5: +-2 pi
    close(limits.velocity, ft.VELOCITY_SCALE * np.array([3.15, 3.2]), 1e-12)
    close(limits.acceleration, ft.ACCELERATION_PER_VELOCITY * np.array([3.15, 3.2]), 1e-12)
    close(limits.effort, ft.EFFORT_SCALE * np.array([150.0, 28.0]), 1e-12)
    given = ft.ExcitationLimits.from_model(ur5, joints, acceleration={"wrist_3_joint": 1.5}, effort_scale=None)
    close(given.acceleration, [ft.ACCELERATION_PER_VELOCITY * 3.15, 1.5], 1e-12)
    assert np.all(np.isinf(given.effort))
    with pytest.raises(ValueError, match="elbow_joint"):
        ft.ExcitationLimits.from_model(ur5, joints, acceleration={"elbow_joint": 1.0})
    with pytest.raises(ValueError, match="actuated joints"):
        ex.optimise_excitation(ur5, ["no_such_joint"])
    with pytest.raises(ValueError, match="2 harmonics"):
        ex.optimise_excitation(ur5, harmonics=1)


def test_the_csv_and_the_coefficients_read_back_equal(optimised, tmp_path):
    csv_path, json_path = ft.write_trajectory(tmp_path / "excitation.csv", optimised, rate=50.0, periods=2)
    assert json_path == tmp_path / "excitation.json"
    recording = read_csv(csv_path)
    expected = optimised.to_recording(50.0, 2)
    assert recording.joint_names == optimised.joint_names
    assert len(recording) == 2 * 10 * 50 + 1 and recording.time[-1] == 2 * optimised.period
    for quantity in ("time", "position", "velocity", "acceleration"):
        np.testing.assert_array_equal(getattr(recording, quantity), getattr(expected, quantity))
    assert recording.effort is None
    close(recording.velocity[[0, -1]], 0.0, 1e-12)  # starts and ends at rest
    again = ft.ExcitationTrajectory.load_coefficients(json_path)
    times = np.linspace(0.0, 10.0, 77)
    for mine, theirs in zip(optimised.sample(times), again.sample(times), strict=True):
        np.testing.assert_array_equal(mine, theirs)
    assert again.condition_number == optimised.condition_number
    np.testing.assert_array_equal(again.margins["position"], optimised.margins["position"])
    assert json.loads(json_path.read_text())["harmonics"] == HARMONICS


def test_the_approach_is_a_rest_to_rest_quintic_within_the_limits(optimised):
    start, goal = np.zeros(len(optimised.joint_names)), optimised.start()
    duration = ft.approach_duration(start, goal, optimised.limits)
    times = np.linspace(-0.5, duration + 0.5, 3001)
    q, v, a = ft.approach(start, goal, times, duration)
    close(q[0], start, 1e-12)
    close(q[-1], goal, 1e-12)
    close(np.vstack([v[[0, -1]], a[[0, -1]]]), 0.0, 1e-12)
    assert np.all(np.abs(v) <= optimised.limits.velocity * (1 + 1e-9))
    assert np.all(np.abs(a) <= optimised.limits.acceleration * (1 + 1e-6))
    h = times[1] - times[0]
    close(v[1:-1], (q[2:] - q[:-2]) / (2 * h), 1e-5)
    # the shortest: one of the joints reaches its velocity or acceleration bound
    assert max(np.max(np.abs(v) / optimised.limits.velocity), np.max(np.abs(a) / optimised.limits.acceleration)) > 0.99


def test_the_command_line_writes_the_trajectory_and_reports(tmp_path, capsys):
    output = tmp_path / "ur5.csv"
    status = main(["--urdf", robot_path("ur5"), "--output", str(output), "--harmonics", "2", "--iterations", "5",
                   "--rate", "20", "--periods", "1", "--joints", "shoulder_lift_joint", "elbow_joint"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "condition number of the base regressor" in printed and "|acceleration| <=" in printed
    recording = read_csv(output)
    assert recording.joint_names == ("shoulder_lift_joint", "elbow_joint") and len(recording) == 201
    coefficients = json.loads(output.with_suffix(".json").read_text())
    assert f"{coefficients['condition_number']:.4g}" in printed

    assert main(["--urdf", robot_path("ur5"), "--output", str(output), "--joints", "no_such_joint"]) == 1
    assert "no_such_joint" in capsys.readouterr().err
    assert main(["--urdf", str(tmp_path / "missing.urdf"), "--output", str(output)]) == 1
