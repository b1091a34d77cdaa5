"""Identification on a real robot's log: FIGAROH's TIAGo arm (data/figaroh_tiago,
SOURCE.md there: a 61 s run at 100 Hz, torques from motor currents),
identified on its first 32 s and scored on the 29 s after, against
example-robot-data's TIAGo URDF as the nominal model.

Measured (relative RMS torque error on the samples the fit uses, arm joints
1-4): training, nominal 0.86 0.32 0.58 0.38 -> identified 0.35 0.11 0.26
0.19; held out, nominal 0.73 0.31 0.48 0.47 -> identified 0.27 0.10 0.17
0.25. No per-joint figure of FIGAROH's authors for this log was found; the
yardstick here is the part of the measured torques above the filter's
cut-off, which no model of the filtered motion predicts (0.26 0.08 0.19
0.13 on training, 0.16 0.06 0.12 0.18 held out): the identified errors stay
within 1.7 times it."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from mbs_dynamics.identification.estimation import fitted_rows
from mbs_dynamics.identification.filtering import filtered
from mbs_dynamics.identification.identify import Options, identify, layout_of, read_samples
from mbs_dynamics.identification.recording import Recording
from oracles import ROBOTS_DIR

DATA = Path(__file__).resolve().parent / "data" / "figaroh_tiago"
TRAINING, VALIDATION = DATA / "training.csv", DATA / "validation.csv"
MEASURED = ("arm_1_joint", "arm_2_joint", "arm_3_joint", "arm_4_joint")
# Recorded, but without a torque: the torso's effort has the lift's weight taken out, the wrist's is zero.
UNMEASURED = ("torso_lift_joint", "arm_5_joint", "arm_6_joint", "arm_7_joint")
# In the URDF, not in the log: made fixed joints (identification refuses a model joint the recording lacks).
NOT_RECORDED = ("wheel_right_joint", "wheel_left_joint", "head_1_joint", "head_2_joint")
# How much the identified model must beat the nominal one, per joint and over the four (measured: at least
# 2.0 per joint, 2.3 over the four on training; 1.9 and 2.5 held out), and how close it must come to the
# torques' content above the cut-off (measured: within 1.46 times on training, 1.66 held out).
PER_JOINT_GAIN, OVERALL_GAIN = 1.6, 2.0
TRAINING_NOISE_RATIO, HELD_OUT_NOISE_RATIO = 1.6, 2.0


def tiago_arm_xml() -> str:
    """example-robot-data's TIAGo without a hand, its wheels and head fixed."""
    xml = (ROBOTS_DIR / "tiago_description/robots/tiago_no_hand.urdf").read_text(encoding="utf-8")
    for joint in NOT_RECORDED:
        xml, count = re.subn(rf'(<joint\s+name="{joint}"\s+type=")\w+"', r'\1fixed"', xml)
        assert count == 1, joint
    return xml


def relative_errors(path: Path, urdf_xml: str, options: Options, parameter_sets) -> dict:
    """On the recording's samples that the fit uses (estimation.fitted_rows), per
    measured joint: each parameter set's RMS torque error and the RMS of the
    measured torque above the cut-off, both relative to the measured torque's RMS."""
    # TODO(lead): the validation API of identification (scoring held-out recordings) replaces this
    # function when it lands: the same read_samples, regressor rows and fitted rows as identify's evaluation.
    samples = read_samples(str(path), urdf_xml, options)
    layout = layout_of(urdf_xml, options)
    joints = layout.joint_coordinates()
    assert layout.actuated_joints == MEASURED
    Y = layout.regressor(samples.q, samples.v, samples.a)[:, joints]
    torque = samples.effort[:, joints]
    used = fitted_rows(layout, samples.v[:, joints])

    def rms(values):
        return np.sqrt(np.sum(used * values**2, axis=0) / np.sum(used, axis=0))

    smooth = filtered(Recording(MEASURED, samples.time, effort=torque), options.cutoff).effort
    scale = rms(torque)
    return {"errors": [rms(Y @ p - torque) / scale for p in parameter_sets], "noise": rms(torque - smooth) / scale}


def test_real_tiago_arm_identified_beats_nominal_on_training_and_held_out():
    urdf_xml = tiago_arm_xml()
    result = identify([str(TRAINING)], urdf_xml, progress=False, excluded_joints=UNMEASURED)
    options = Options(excluded_joints=UNMEASURED)
    parameter_sets = [result.nominal, result.identified]
    training = relative_errors(TRAINING, urdf_xml, options, parameter_sets)
    held_out = relative_errors(VALIDATION, urdf_xml, options, parameter_sets)
    for name, scores in (("training", training), ("held out", held_out)):
        nominal, identified = scores["errors"]
        print(f"{name}: nominal {np.round(nominal, 3)}, identified {np.round(identified, 3)}, "
              f"above the cut-off {np.round(scores['noise'], 3)}")

    # the scoring is identify's own evaluation on the training data
    reports = {report.joint: report for report in result.joints}
    assert tuple(reports) == MEASURED
    for k, joint in enumerate(MEASURED):
        report = reports[joint]
        assert np.isclose(training["errors"][0][k], report.nominal_rms_error / report.torque_rms, rtol=1e-6)
        assert np.isclose(training["errors"][1][k], report.identified_rms_error / report.torque_rms, rtol=1e-6)

    for scores, noise_ratio in ((training, TRAINING_NOISE_RATIO), (held_out, HELD_OUT_NOISE_RATIO)):
        nominal, identified = scores["errors"]
        assert np.all(identified * PER_JOINT_GAIN < nominal), (nominal, identified)
        assert np.mean(identified) * OVERALL_GAIN < np.mean(nominal), (nominal, identified)
        assert np.all(identified < noise_ratio * scores["noise"]), (identified, scores["noise"])
    # the data decide: the base regressor is well conditioned, the fit moved off the prior
    assert result.condition_number < 1e3
    assert not np.allclose(result.identified, result.nominal)
