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

from pathlib import Path

import numpy as np
from mbs_dynamics.identification.estimation import fitted_rows
from mbs_dynamics.identification.filtering import filtered
from mbs_dynamics.identification.identify import Options, identify, layout_of, read_samples, validate
from mbs_dynamics.identification.recording import Recording
from oracles import ROBOTS_DIR

DATA = Path(__file__).resolve().parent / "data" / "figaroh_tiago"
TRAINING, VALIDATION = DATA / "training.csv", DATA / "validation.csv"
MEASURED = ("arm_1_joint", "arm_2_joint", "arm_3_joint", "arm_4_joint")
# Recorded, but without a torque: the torso's effort has the lift's weight taken out, the wrist's is zero.
UNMEASURED = ("torso_lift_joint", "arm_5_joint", "arm_6_joint", "arm_7_joint")
# In the URDF, not in the log: held at 0 (--fixed-joints).
NOT_RECORDED = ("wheel_right_joint", "wheel_left_joint", "head_1_joint", "head_2_joint")
# How much the identified model must beat the nominal one, per joint and over the four (measured: at least
# 2.0 per joint, 2.3 over the four on training; 1.9 and 2.5 held out), and how close it must come to the
# torques' content above the cut-off (measured: within 1.46 times on training, 1.66 held out).
PER_JOINT_GAIN, OVERALL_GAIN = 1.6, 2.0
TRAINING_NOISE_RATIO, HELD_OUT_NOISE_RATIO = 1.6, 2.0


def tiago_xml() -> str:
    """example-robot-data's TIAGo without a hand, as shipped."""
    return (ROBOTS_DIR / "tiago_description/robots/tiago_no_hand.urdf").read_text(encoding="utf-8")


def above_cutoff(path: Path, urdf_xml: str, options: Options) -> np.ndarray:
    """Per measured joint, the RMS of the measured torque above the filter's
    cut-off on the samples the fit uses, relative to the measured torque's RMS."""
    samples = read_samples(str(path), urdf_xml, options)
    layout = layout_of(urdf_xml, options)
    joints = layout.joint_coordinates()
    torque = samples.effort[:, joints]
    used = fitted_rows(layout, samples.v[:, joints])
    smooth = filtered(Recording(MEASURED, samples.time, effort=torque), options.cutoff).effort
    return np.sqrt(np.sum(used * (torque - smooth) ** 2, axis=0) / np.sum(used * torque**2, axis=0))


def test_real_tiago_arm_identified_beats_nominal_on_training_and_held_out():
    """From the URDF as shipped: the wheels and head, not in the log, held
    (--fixed-joints); the torso and wrist, without torques, left out."""
    urdf_xml = tiago_xml()
    reading = dict(excluded_joints=UNMEASURED, held_joints=NOT_RECORDED)
    result = identify([str(TRAINING)], urdf_xml, progress=False, **reading)
    parameter_sets = {"nominal": result.nominal, "identified": result.identified}
    options = Options(**reading)
    scores = {name: validate([str(path)], urdf_xml, parameter_sets, progress=False, **reading).errors
              for name, path in (("training", TRAINING), ("held out", VALIDATION))}
    noise = {name: above_cutoff(path, urdf_xml, options) for name, path in (("training", TRAINING),
                                                                           ("held out", VALIDATION))}
    for name, errors in scores.items():
        print(f"{name}: nominal {np.round(errors.relative('nominal'), 3)}, identified "
              f"{np.round(errors.relative('identified'), 3)}, above the cut-off {np.round(noise[name], 3)}")
    assert result.layout.actuated_joints == MEASURED == scores["held out"].joints

    # validation on the training data is identify's own evaluation
    reports = {report.joint: report for report in result.joints}
    for k, joint in enumerate(MEASURED):
        report = reports[joint]
        assert np.isclose(scores["training"].relative("nominal")[k], report.nominal_rms_error / report.torque_rms,
                          rtol=1e-6)
        assert np.isclose(scores["training"].relative("identified")[k],
                          report.identified_rms_error / report.torque_rms, rtol=1e-6)

    for name, noise_ratio in (("training", TRAINING_NOISE_RATIO), ("held out", HELD_OUT_NOISE_RATIO)):
        nominal, identified = scores[name].relative("nominal"), scores[name].relative("identified")
        assert np.all(identified * PER_JOINT_GAIN < nominal), (nominal, identified)
        assert np.mean(identified) * OVERALL_GAIN < np.mean(nominal), (nominal, identified)
        assert np.all(identified < noise_ratio * noise[name]), (identified, noise[name])
    # the data decide: the base regressor is well conditioned, the fit moved off the prior
    assert result.condition_number < 1e3
    assert not np.allclose(result.identified, result.nominal)
