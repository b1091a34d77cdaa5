"""Identification on a robot whose logs lack some of its URDF's joints (the
Panda's gripper fingers), and held-out validation: the command line and the
Python API score the nominal and the identified model on runs not fitted."""
from __future__ import annotations

import re

import numpy as np
import pytest
from mbs_dynamics.command_line import EXIT_BAD_DATA
from mbs_dynamics.identification import cli, data
from mbs_dynamics.identification.base_parameters import base_parameters
from mbs_dynamics.identification.excitation import middle_configuration, optimise_excitation
from mbs_dynamics.identification.identify import identify, validate
from mbs_dynamics.identification.parameters import ParameterLayout
from mbs_dynamics.identification.urdf_writer import identified_urdf
from oracles import robot_path
from test_identification import perturbed_robot, simulated_run, smooth_trajectory

import mbs_dynamics as mbs

FINGER = "panda_finger_joint1"  # panda_finger_joint2 mimics it
HELD = ((FINGER, 0.0),)


def fingers_fixed(urdf_xml: str) -> str:
    """The URDF with both finger joints fixed at 0 (what a user did by hand)."""
    def fixed(match):
        return match.group(0).replace('type="prismatic"', 'type="fixed"')

    xml = re.sub(r'<joint name="panda_finger_joint[12]" type="prismatic">.*?</joint>', fixed, urdf_xml, flags=re.S)
    return re.sub(r'\s*<mimic joint="panda_finger_joint1"/>', "", xml)


@pytest.fixture(scope="module")
def panda_runs(tmp_path_factory):
    """The true Panda (nominal URDF off by 20-40 %, friction, armature) with its
    fingers closed, simulated along two excitations (fitted) and a sum of
    sines (held out); the bags hold the seven arm joints, not the fingers."""
    directory = tmp_path_factory.mktemp("panda_identification")
    nominal_xml = open(robot_path("panda"), encoding="utf-8").read()
    nominal = mbs.Model.from_urdf_string(nominal_xml)
    layout = ParameterLayout(nominal, held_joints=HELD)
    p_true = perturbed_robot(layout, np.random.default_rng(7))
    true_xml = identified_urdf(nominal_xml, layout, p_true, np.flatnonzero(nominal.mass > 0))
    true, arm = mbs.Model.from_urdf_string(fingers_fixed(true_xml)), mbs.Model.from_urdf_string(
        fingers_fixed(nominal_xml))
    t = np.arange(0.0, 20.0, 1e-3)
    references = [(t, *optimise_excitation(nominal, layout=layout, seed=seed, max_iterations=15).sample(t))
                  for seed in (1, 2)]
    t, q, v, a = smooth_trajectory(arm, 3, 12.0, rate=1000.0)
    references.append((t, q + middle_configuration(arm), v, a))  # about mid-range: the Panda's limits are not at 0
    runs = [simulated_run(true, arm, reference) for reference in references]
    paths = [data.write_bag(directory / f"run{k}", run) for k, run in enumerate(runs)]
    (directory / "nominal.urdf").write_text(nominal_xml)
    return directory, paths[:2], paths[2], nominal_xml


def test_held_joints_leave_the_base_parameters_of_the_robot_without_them():
    """Holding the finger gives the base parameters of the URDF with the fingers
    fixed: 5 fewer than when the base parameters let it move."""
    nominal_xml = open(robot_path("panda"), encoding="utf-8").read()
    nominal = mbs.Model.from_urdf_string(nominal_xml)
    held = len(base_parameters(ParameterLayout(nominal, held_joints=HELD)).independent)
    fixed = len(base_parameters(ParameterLayout(mbs.Model.from_urdf_string(fingers_fixed(nominal_xml)))).independent)
    excluded = len(base_parameters(ParameterLayout(nominal, excluded_joints=(FINGER,))).independent)
    assert held == fixed and excluded > held, (held, fixed, excluded)


@pytest.mark.parametrize("arguments, message", [
    ((), f"lacks joints ['{FINGER}'] of model 'panda'"),
    (("--exclude-joints", FINGER), f"--fixed-joints {FINGER}"),
    (("--fixed-joints", "panda_finger_joint2"), f"joint 'panda_finger_joint2' mimics '{FINGER}'"),
    (("--exclude-joints", "panda_finger_joint2"), f"leave out '{FINGER}', and 'panda_finger_joint2' follows it"),
    (("--fixed-joints", f"{FINGER}=0.5"), f"joint '{FINGER}' cannot be held at 0.5: its limits are [0, 0.04]"),
    (("--fixed-joints", f"{FINGER}=wide"), "POSITION a number"),
    (("--fixed-joints", "no_such_joint"), "has no joints ['no_such_joint'] to hold"),
    (("--fixed-joints", FINGER, "--exclude-joints", FINGER), "both left out and held"),
    (("--fixed-joints", FINGER, "--validate", "no_such.bag"), "--validate: no such file or directory: no_such.bag"),
])
def test_joints_the_logs_lack_get_a_message_naming_what_to_do(panda_runs, tmp_path, capsys, arguments, message):
    directory, fitted, _, _ = panda_runs
    try:
        status = cli.main([str(fitted[0]), "--urdf", str(directory / "nominal.urdf"), "--output",
                           str(tmp_path / "x.urdf"), "--quiet", *arguments])
    except SystemExit as exit:  # argparse's, for a malformed command line
        status = exit.code
    error = capsys.readouterr().err
    assert status in (EXIT_BAD_DATA, 2) and message in error and "Traceback" not in error, error
    assert "lacks joints" not in message or f"--fixed-joints {FINGER}" in error
    assert not (tmp_path / "x.urdf").exists()


def test_identify_with_the_fingers_held_and_validate_held_out(panda_runs, tmp_path, capsys):
    """From logs of the arm's seven joints and the URDF as shipped (fingers and
    all): the fingers held, the identified model predicts the held-out run
    within 1 % (each joint within 2 %), the nominal one not within 5 %
    (measured: 0.10 % and 7.6 %); the printed validation, the
    report and the Python API's scoring of the written URDF agree."""
    directory, fitted, held_out, nominal_xml = panda_runs
    output, svg = tmp_path / "identified.urdf", tmp_path / "report.svg"
    status = cli.main([*map(str, fitted), "--urdf", str(directory / "nominal.urdf"), "--output", str(output),
                       "--fixed-joints", FINGER, "--validate", str(held_out), "--report", str(svg), "--quiet"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    table = printed[printed.index("held-out validation"):]
    overall = re.search(r"all joints\s+([\d.]+) %\s+([\d.]+) %", table)
    nominal_error, identified_error = float(overall.group(1)) / 100, float(overall.group(2)) / 100
    assert identified_error < 0.01 and nominal_error > 0.05, table
    assert all(joint in table for joint in (f"panda_joint{k}" for k in range(1, 8))) and FINGER not in table
    assert "RMS relative to the torques'" in printed and "weighted torque error" not in printed
    assert svg.read_text().count("held out: panda_joint") == 7
    # the written URDF scored by the Python API, fingers held as in the fit: its own parameters are the identified
    written = validate([held_out], output.read_text(), progress=False, held_joints={FINGER: 0.0})
    assert written.errors.overall("URDF") == pytest.approx(identified_error, abs=1e-4)
    nominal = validate([held_out], nominal_xml, progress=False, held_joints=[FINGER])
    assert nominal.errors.overall("URDF") == pytest.approx(nominal_error, abs=1e-4)
    relative = written.errors.relative("URDF")
    assert relative.shape == (7,) and np.all(relative < 0.02), relative
    # the fingers kept their joints in the identified URDF
    assert mbs.Model.from_urdf_file(output).joint_names == mbs.Model.from_urdf_string(nominal_xml).joint_names


def test_efforts_that_are_not_the_joint_torques_are_named(panda_runs):
    """A joint whose efforts have the opposite sign (a wiring or convention
    mistake): the warning names it and what to check."""
    directory, fitted, _, nominal_xml = panda_runs
    run = data.read_bag(fitted[0], progress=False)
    flipped = run.replace(effort=run.effort * np.where(np.array(run.joint_names) == "panda_joint2", -1.0, 1.0))
    bag = data.write_bag(directory / "flipped", flipped)
    result = identify([bag], nominal_xml, progress=False, held_joints=[FINGER])
    warning = next(w for w in result.warnings if "not joint torques" in w or "are those efforts" in w)
    assert "panda_joint2 (" in warning and "panda_joint4" not in warning and "opposite sign" in warning


def test_efforts_scaled_per_joint_and_joints_left_out_that_never_move(panda_runs, tmp_path, capsys):
    """Motor currents: --effort-scale turns a joint's recorded efforts into
    torques (here undoing a gain of -1/50 put on panda_joint2), and without it
    the warning names the joint; a finger left out that never moved is named
    in the excitation message with the option to hold it instead."""
    directory, fitted, _, nominal_xml = panda_runs
    run = data.read_bag(fitted[0], progress=False)
    currents = run.replace(effort=run.effort * np.where(np.array(run.joint_names) == "panda_joint2", -0.02, 1.0))
    bag = data.write_bag(tmp_path / "currents", currents)
    as_is = identify([bag], nominal_xml, progress=False, held_joints=[FINGER])
    assert any("panda_joint2 (" in w for w in as_is.warnings)
    scaled = identify([bag], nominal_xml, progress=False, held_joints=[FINGER], effort_scale={"panda_joint2": -50.0})
    reference = identify([fitted[0]], nominal_xml, progress=False, held_joints=[FINGER])
    np.testing.assert_allclose(scaled.errors.relative("identified"), reference.errors.relative("identified"),
                               rtol=1e-6)
    assert not any("are those efforts" in w for w in scaled.warnings)
    # the finger recorded at rest, and left out rather than held
    with_finger = run.replace(joint_names=run.joint_names + (FINGER,),
                              **{quantity: np.hstack([getattr(run, quantity), np.zeros((len(run), 1))])
                                 for quantity in ("position", "velocity", "effort")})
    bag = data.write_bag(tmp_path / "finger", with_finger)
    status = cli.main([str(bag), "--urdf", str(directory / "nominal.urdf"), "--output", str(tmp_path / "x.urdf"),
                       "--quiet", "--exclude-joints", FINGER])
    error = capsys.readouterr().err
    assert status == EXIT_BAD_DATA and f"joints left out that barely moved: {FINGER}" in error, error
    assert f"--fixed-joints {FINGER}" in error
    try:
        cli.main([str(bag), "--urdf", "x.urdf", "--output", str(tmp_path / "y.urdf"), "--effort-scale",
                  "panda_joint2=0"])
    except SystemExit as exit:
        assert exit.code == 2
    assert "the gain must be finite and not zero" in capsys.readouterr().err
