"""Excitation trajectories: analytic derivatives, limits, periodicity, the
optimised condition number, the files mbs_dynamics_excitation writes."""
import numpy as np
import pytest
from mbs_dynamics.identification import data
from mbs_dynamics.identification.excitation import ExcitationTrajectory, excitation_trajectory, joint_limits, main
from mbs_dynamics.identification.parameters import ParameterLayout
from oracles import robot_path

import mbs_dynamics as mbs


@pytest.fixture(scope="module")
def ur5():
    layout = ParameterLayout(mbs.Model.from_urdf_file(robot_path("ur5")))
    return layout, *excitation_trajectory(layout, iterations=25, starts=2, seed=3)


def test_derivatives_are_the_series_derivatives_and_the_trajectory_loops(ur5):
    _, trajectory, _ = ur5
    t = np.linspace(0.0, trajectory.period, 2001)
    q, v, a = trajectory.sample(t)
    dt = t[1] - t[0]
    assert np.allclose(np.gradient(q, dt, axis=0)[1:-1], v[1:-1], atol=1e-4 * np.abs(v).max())
    assert np.allclose(np.gradient(v, dt, axis=0)[1:-1], a[1:-1], atol=1e-4 * np.abs(a).max())
    for start, end in zip(trajectory.sample([0.0]), trajectory.sample([trajectory.period]), strict=True):
        assert np.allclose(start, end, atol=1e-12)


def test_the_optimised_trajectory_keeps_the_limits_and_excites_better(ur5):
    layout, trajectory, initial = ur5
    limits = joint_limits(layout)
    q, v, a = trajectory.sample(np.linspace(0.0, trajectory.period, 20001))
    model = layout.model
    q_index = [model.q_index(name) for name in trajectory.joints]
    assert np.all(q >= model.lower_position_limit[q_index]) and np.all(q <= model.upper_position_limit[q_index])
    assert np.all(np.abs(v) <= model.velocity_limit[layout.joint_coordinates()])  # the URDF's
    assert np.all(np.abs(v) <= 1.02 * limits.velocity) and np.all(np.abs(a) <= 1.02 * limits.acceleration)
    assert np.isfinite(trajectory.condition_number)
    assert trajectory.condition_number < 0.7 * initial
    assert np.abs(v).max() > 0.5 * limits.velocity.min()  # it uses the room it has


def test_same_seed_same_trajectory_and_json_round_trip(ur5):
    layout, trajectory, _ = ur5
    again, _ = excitation_trajectory(layout, iterations=25, starts=2, seed=3)
    assert np.array_equal(again.sine, trajectory.sine) and np.array_equal(again.offset, trajectory.offset)
    copy = ExcitationTrajectory.from_json(trajectory.to_json())
    t = np.linspace(0, 3, 7)
    for x, y in zip(copy.sample(t), trajectory.sample(t), strict=True):
        assert np.array_equal(x, y)


def test_the_command_writes_a_trajectory_csv_and_its_coefficients(tmp_path, capsys):
    output = tmp_path / "excitation.csv"
    assert main(["--urdf", robot_path("ur5"), "--output", str(output), "--iterations", "5", "--periods", "2",
                 "--rate", "100"]) == 0
    printed = capsys.readouterr().out
    assert "condition number" in printed and "shoulder_pan_joint" in printed
    recording = data.read_csv(output)
    trajectory = ExcitationTrajectory.from_json(output.with_suffix(".json").read_text())
    assert len(recording) == 2 * 10 * 100 + 1
    q, v, a = trajectory.sample(recording.time)
    assert np.allclose(recording.position, q) and np.allclose(recording.velocity, v)
    assert np.allclose(recording.acceleration, a)
    assert main(["--urdf", str(tmp_path / "missing.urdf"), "--output", str(output)]) == 2
    assert "missing.urdf" in capsys.readouterr().err
