"""mbs_dynamics_identify: recorded bags (or CSV files) and a nominal URDF in,
the identified URDF out.

    mbs_dynamics_identify BAG [BAG ...] --urdf NOMINAL.urdf --output IDENTIFIED.urdf
        [--topic joint_states] [--floating-base [--odometry-topic odom]]
        [--validate HELD_OUT_BAG ...] [--fixed-joints JOINT[=POSITION],...]
        [--report REPORT.svg] [--scheduler tcp://HOST:8786] ...

Prints a progress bar while reading and reducing, then a table per joint (the
torque RMS error on the data of the nominal and the identified model, which
parameters are identifiable on their own) and a summary; with --validate,
the same errors on held-out recordings. What is wrong gets
one line on stderr: exit code 2 for a malformed command line (argparse's), 1
for files or data that cannot be used (checked before the fit where they
can: the outputs' directories, the scheduler), 130 after Ctrl-C.
"""
from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np

from mbs_dynamics.command_line import EXIT_BAD_DATA, EXIT_INTERRUPTED, OneLineErrorParser, number, say_error
from mbs_dynamics.files import check_writable, read_file, write_file
from mbs_dynamics.identification import report
from mbs_dynamics.identification.estimation import DEFAULT_PRIOR_WEIGHT
from mbs_dynamics.identification.filtering import DEFAULT_CUTOFF
from mbs_dynamics.identification.identify import identify, validate
from mbs_dynamics.identification.parameters import DEFAULT_JOINT_PARAMETERS, JOINT_PARAMETERS
from mbs_dynamics.identification.urdf_writer import identified_urdf
from mbs_dynamics.multibody.parsers.urdf import DEFAULT_STRIBECK_VELOCITY, MAX_MAGNITUDE, MAX_URDF_BYTES

PROG = "mbs_dynamics_identify"


def joint_parameters(text: str) -> tuple[str, ...]:
    """--joint-parameters: names among JOINT_PARAMETERS, comma-separated (none: the inertias alone)."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in JOINT_PARAMETERS]
    if unknown:
        raise argparse.ArgumentTypeError(f"{', '.join(unknown)}: joint parameters are among "
                                         f"{', '.join(JOINT_PARAMETERS)}")
    return names


def joint_values(text: str, quantity: str, default: float | None = None, nonzero: bool = False):
    """JOINT=VALUE, comma-separated (JOINT alone: default, when there is one)
    -> ((joint, value), ...); quantity names VALUE in the messages."""
    values = []
    for item in (item.strip() for item in text.split(",") if item.strip()):
        name, _, value = item.partition("=")
        try:
            number = float(value) if value.strip() or default is None else default
        except ValueError:
            alone = "a joint, or " if default is not None else ""
            raise argparse.ArgumentTypeError(f"{item}: {alone}JOINT={quantity} with {quantity} a number") from None
        if not (np.isfinite(number) and (number != 0.0 or not nonzero)):
            raise argparse.ArgumentTypeError(f"{item}: the {quantity.lower()} must be finite"
                                             + (" and not zero" if nonzero else ""))
        values.append((name.strip(), number))
    return tuple(values)


def parser() -> argparse.ArgumentParser:
    arguments = OneLineErrorParser(
        prog=PROG, description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    arguments.add_argument("recordings", nargs="+", metavar="BAG",
                           help="ROS 2 bags (directories, or their .mcap / .db3 files) or CSV files (.csv)")
    arguments.add_argument("--urdf", required=True, help="the nominal URDF (the prior)")
    arguments.add_argument("--output", required=True, help="where to write the identified URDF")
    arguments.add_argument("--topic", default="joint_states", help="the sensor_msgs/JointState topic")
    arguments.add_argument("--floating-base", action="store_true",
                           help="a floating base, its motion from --odometry-topic (only the actuated joints' "
                                "torques are fitted: the base's wrench needs the contact forces)")
    arguments.add_argument("--odometry-topic", default="odom", help="nav_msgs/Odometry of the floating base")
    arguments.add_argument("--validate", nargs="+", default=[], metavar="BAG_OR_CSV",
                           help="held-out recordings (not fitted): the nominal and the identified model scored on "
                                "them, read and filtered as the others, joint by joint and over all")
    arguments.add_argument("--report", metavar="REPORT.svg", help="plot measured vs predicted torques")
    arguments.add_argument("--scheduler", metavar="ADDRESS",
                           help="an existing Dask cluster's scheduler (tcp://host:8786); local threads if not given")
    arguments.add_argument("--cutoff", type=number(0.0, low_open=True), default=DEFAULT_CUTOFF,
                           help="low-pass cut-off (Hz) of the zero-phase filter before differentiation")
    arguments.add_argument("--joint-parameters", type=joint_parameters, default=",".join(DEFAULT_JOINT_PARAMETERS),
                           help="the joint parameters to identify, among " + ", ".join(JOINT_PARAMETERS)
                           + " (none: the inertias alone); the friction model: friction,damping (Coulomb and "
                           "viscous), with offset (asymmetric Coulomb), with stribeck (static friction falling to "
                           "Coulomb's past the Stribeck velocity)")
    arguments.add_argument("--stribeck-velocity", type=number(0.0, MAX_MAGNITUDE, low_open=True), metavar="V_S",
                           default=argparse.SUPPRESS,  # (the help says the default)
                           help="the Stribeck velocity (rad/s or m/s) of every joint, with stribeck among "
                                "--joint-parameters (default: each joint's <mbs:friction stribeck_velocity> in the "
                                f"nominal URDF, else {DEFAULT_STRIBECK_VELOCITY:g})")
    arguments.add_argument("--exclude-joints", default="", metavar="JOINT,...",
                           help="joints whose torques are not used and whose parameters are not fitted, their "
                                "recorded motion still used (a joint without a torque sensor)")
    arguments.add_argument("--effort-scale", type=partial(joint_values, quantity="GAIN", nonzero=True), default=(), metavar="JOINT=GAIN,...",
                           help="the recorded efforts of these joints times GAIN before anything else (motor "
                                "currents to joint torques: gear ratio times torque constant; -1 flips a sign)")
    arguments.add_argument("--fixed-joints", type=partial(joint_values, quantity="POSITION", default=0.0), default=(), metavar="JOINT[=POSITION],...",
                           help="joints held at a position (default 0) throughout, whether recorded or not, left "
                                "out like --exclude-joints with their mimic followers; the bodies they carry are "
                                "fitted with the body carrying them (a gripper's fingers the logs lack)")
    arguments.add_argument("--prior-weight", type=number(0.0), default=DEFAULT_PRIOR_WEIGHT,
                           help="weight of the prior, the nominal URDF (>= 0, dimensionless): what a unit of the "
                                "entropic divergence of a body's pseudo-inertia from the URDF's costs (Lee, Wensing & "
                                "Park 2020; a body 10%% heavier and larger: 0.02) against the squared torque errors "
                                "relative to each joint's RMS, summed over joints; a joint parameter costs the square "
                                "of its change of the joint's torque relative to the RMS")
    arguments.add_argument("--robust", action="store_true", help="Huber-weighted refits: outliers count less")
    arguments.add_argument("--quiet", action="store_true", help="no progress bars")
    return arguments


def main(argv=None) -> int:
    arguments = parser()
    options = arguments.parse_args(argv)
    options.stribeck_velocity = getattr(options, "stribeck_velocity", None)
    if options.stribeck_velocity is not None and "stribeck" not in options.joint_parameters:
        arguments.error("--stribeck-velocity sets the Stribeck velocity of the stribeck joint parameter, which "
                        "--joint-parameters does not name")
    started = time.monotonic()
    try:
        urdf_xml = read_file(options.urdf, "URDF file", MAX_URDF_BYTES)
        outputs = [check_writable(options.output, "identified URDF")]
        if options.report:
            outputs.append(check_writable(options.report, "report"))
        if len(outputs) == 2 and outputs[0].resolve() == outputs[1].resolve():
            raise ValueError(f"--output and --report name the same file {options.output}")
        missing = [path for path in options.validate if not Path(path).exists()]
        if missing:
            raise ValueError(f"--validate: no such file or directory: {', '.join(missing)}")
        reading = dict(floating_base=options.floating_base,
                       odometry_topic=options.odometry_topic if options.floating_base else None,
                       topic=options.topic, cutoff=options.cutoff, joint_parameters=options.joint_parameters,
                       excluded_joints=tuple(name for name in options.exclude_joints.split(",") if name),
                       held_joints=options.fixed_joints, stribeck_velocity=options.stribeck_velocity,
                       effort_scale=options.effort_scale)
        result = identify(options.recordings, urdf_xml, scheduler=options.scheduler, progress=not options.quiet,
                          prior_weight=options.prior_weight, robust=options.robust, **reading)
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        comment = (f"Identified by {PROG} on {when} from {', '.join(result.sources)}, nominal {options.urdf}")
        write_file(options.output, identified_urdf(urdf_xml, result.layout, result.identified,
                                                   result.fit.identified_bodies, comment), "identified URDF")
    except (ValueError, OSError, MemoryError) as error:  # IdentificationError, URDFError, DataError, FileProblem
        say_error(PROG, error)
        return EXIT_BAD_DATA
    except KeyboardInterrupt:
        say_error(PROG, "interrupted")
        return EXIT_INTERRUPTED
    validation = None
    try:
        if options.validate:
            validation = validate(options.validate, urdf_xml, {"nominal": result.nominal,
                                                              "identified": result.identified},
                                  scheduler=options.scheduler, progress=not options.quiet, **reading)
        if options.report:
            report.write_svg(options.report, result, validation)
    except (ValueError, OSError, MemoryError) as error:
        say_error(PROG, f"{error} (the identified URDF {options.output} was written)")
        return EXIT_BAD_DATA
    except KeyboardInterrupt:
        say_error(PROG, f"interrupted (the identified URDF {options.output} was written)")
        return EXIT_INTERRUPTED
    print(report.joint_table(result))
    print(report.summary(result))
    if validation is not None:
        print(report.validation_table(validation))
    print(f"wrote {options.output}" + (f" and {options.report}" if options.report else "")
          + f" in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
