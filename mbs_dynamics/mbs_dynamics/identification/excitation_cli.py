"""mbs_dynamics_excitation: optimise an excitation trajectory for a URDF
(excitation.py) and write it as a CSV file with its Fourier coefficients as
JSON beside it.

    mbs_dynamics_excitation --urdf robot.urdf --output excitation.csv [--joints j1 j2 ...]
        [--period 10] [--harmonics 5] [--rate 500] [--periods 5] [--seed 0]

It prints the limits kept, the condition number of the base regressor before
(the random start) and after the optimisation, and the margins left to each
limit. Exit status 0 on success; 2 for a malformed command line or values out
of their bounds (one line, argparse's); 1 when the robot or the files are
unusable, or the optimisation failed or found no trajectory identification
can use (condition number at or above base_parameters.MAX_CONDITION_NUMBER):
one line on stderr saying why, and nothing written.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from mbs_dynamics.command_line import EXIT_BAD_DATA, EXIT_INTERRUPTED, OneLineErrorParser, number, say_error
from mbs_dynamics.files import check_writable
from mbs_dynamics.identification import excitation, fourier_trajectory
from mbs_dynamics.identification.base_parameters import MAX_CONDITION_NUMBER
from mbs_dynamics.identification.parameters import JOINT_PARAMETERS, ParameterLayout
from mbs_dynamics.multibody.model import Model

PROG = "mbs_dynamics_excitation"
# What an excitation trajectory is optimised for by default (--parameters).
EXCITED_PARAMETERS = tuple(name for name in JOINT_PARAMETERS if name != "stribeck")

DEFAULT_RATE = 500.0  # Hz: the rows of the CSV file; a player interpolates between them
# Periods written: a recording of several lets the identification average them (noise down by sqrt(periods))
# and drop the first, where the controller settles onto the motion.
DEFAULT_PERIODS = 5


def arguments(argv=None) -> argparse.Namespace:
    parser = OneLineErrorParser(
        prog=PROG,
        description="Optimise a periodic excitation trajectory (finite Fourier series, Swevers et al. 1997) for "
                    "identifying a robot's inertial and joint parameters, within its limits; write it as CSV "
                    "(time, position/<joint>, velocity/<joint>, acceleration/<joint>) and its coefficients as "
                    "JSON beside it.")
    parser.add_argument("--urdf", required=True, help="the robot's URDF file")
    parser.add_argument("--output", required=True, help="the CSV file to write (its coefficients go to .json)")
    parser.add_argument("--joints", nargs="+", help="the joints to move (default: every actuated joint); the "
                        "others stay still at the middle of their range")
    parser.add_argument("--period", type=number(0.0, low_open=True), default=excitation.PERIOD, help="base period T in s (default "
                        "%(default)s)")
    parser.add_argument("--harmonics", type=number(2, excitation.MAX_HARMONICS, integer=True),
                        default=excitation.HARMONICS, help=f"harmonics L, 2 to {excitation.MAX_HARMONICS} (default "
                        "%(default)s)")
    parser.add_argument("--rate", type=number(0.0, low_open=True), default=DEFAULT_RATE, help="rows per second in the CSV (default "
                        "%(default)s)")
    parser.add_argument("--periods", type=number(1, integer=True), default=DEFAULT_PERIODS, help="periods written (default "
                        "%(default)s)")
    parser.add_argument("--seed", type=number(0, integer=True), default=0, help="seed of the random start (default %(default)s)")
    parser.add_argument("--iterations", type=number(1, integer=True), default=excitation.MAX_ITERATIONS, help="SLSQP iterations at "
                        "most (default %(default)s)")
    parser.add_argument("--floating-base", action="store_true", help="load the URDF with a floating base, held "
                        "at rest at the origin: its wrench rows count (a robot on a force plate)")
    parser.add_argument("--parameters", nargs="*", default=list(EXCITED_PARAMETERS), choices=JOINT_PARAMETERS,
                        help="the joint parameters identified besides the inertias (default: all but stribeck, "
                             "which an excitation at speed barely shows)")
    parser.add_argument("--position-margin", type=number(0.0, 0.5, high_open=True), default=fourier_trajectory.POSITION_MARGIN,
                        help="fraction of each joint's range kept free at either end (default %(default)s)")
    parser.add_argument("--velocity-scale", type=number(0.0, low_open=True), default=fourier_trajectory.VELOCITY_SCALE,
                        help="fraction of the URDF velocity limits used (default %(default)s)")
    parser.add_argument("--acceleration-limit", nargs="+", metavar="A|JOINT=A",
                        help="acceleration limit in rad/s^2 or m/s^2, for every joint or per joint (default: "
                             f"{fourier_trajectory.ACCELERATION_PER_VELOCITY:g}/s times the URDF velocity limit)")
    parser.add_argument("--effort-scale", type=number(0.0, low_open=True), default=fourier_trajectory.EFFORT_SCALE,
                        help="fraction of the URDF effort limits the model's torques may use (default "
                             "%(default)s)")
    parser.add_argument("--no-effort-limits", action="store_true", help="do not check the model's torques")
    options = parser.parse_args(argv)
    try:
        options.acceleration_limit = acceleration_limits(options.acceleration_limit)
        options.output, options.coefficients = fourier_trajectory.trajectory_paths(options.output)
        highest = options.harmonics / options.period  # Hz
        if not highest < options.rate / 2:
            raise ValueError(f"--period {options.period:g} s with {options.harmonics} harmonics puts the highest at "
                             f"{highest:.3g} Hz, which rows at --rate {options.rate:g} Hz cannot follow (they need "
                             "more than twice as many a second): lengthen the period or raise the rate")
        fourier_trajectory.check_trajectory_size(len(options.joints) if options.joints else 1, options.period,
                                         options.periods, options.rate)
    except ValueError as error:
        parser.error(str(error))
    return options


def acceleration_limits(values):
    """--acceleration-limit: None, one number, or {joint: number}, each
    positive and finite; ValueError otherwise."""
    if not values:
        return None

    def limit(text: str, what: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0.0):
            raise ValueError(f"--acceleration-limit: {what} must be a positive finite number, got {text!r}")
        return value

    if len(values) == 1 and "=" not in values[0]:
        return limit(values[0], "the limit")
    limits = {}
    for value in values:
        joint, separator, text = value.partition("=")
        if not separator:
            raise ValueError(f"--acceleration-limit takes one number or JOINT=VALUE pairs, got {value!r}")
        limits[joint] = limit(text, f"{joint}'s limit")
    return limits


def run(options: argparse.Namespace) -> None:
    model = Model.from_urdf_file(options.urdf, floating_base=options.floating_base)
    layout = ParameterLayout(model, tuple(options.parameters))
    joints = tuple(options.joints) if options.joints else layout.actuated_joints
    fourier_trajectory.check_trajectory_size(len(joints), options.period, options.periods, options.rate)
    check_writable(options.output, "trajectory file")
    check_writable(options.coefficients, "coefficients file")
    limits = fourier_trajectory.ExcitationLimits.from_model(
        model, joints, options.position_margin, options.velocity_scale, options.acceleration_limit,
        None if options.no_effort_limits else options.effort_scale)
    print(f"{model.name}: exciting {len(joints)} joints, period {options.period:g} s, {options.harmonics} harmonics; "
          "limits kept (SI units):")
    for line in limits.describe():
        print(f"  {line}")
    start = time.perf_counter()
    trajectory = excitation.optimise_excitation(model, joints, period=options.period, harmonics=options.harmonics,
                                                limits=limits, layout=layout, seed=options.seed,
                                                max_iterations=options.iterations)
    print(f"condition number of the base regressor: {trajectory.initial_condition_number:.4g} (random start, "
          f"seed {options.seed}) -> {trajectory.condition_number:.4g} ({trajectory.message}; "
          f"{time.perf_counter() - start:.1f} s)")
    if not trajectory.condition_number < MAX_CONDITION_NUMBER:
        raise ValueError(f"the excitation found has a base regressor's condition number of "
                         f"{trajectory.condition_number:.3g}, not below the {MAX_CONDITION_NUMBER:.0e} identification "
                         "accepts: some base parameter stays unexcited within these limits; nothing written (try "
                         "more --iterations, another --seed, a longer --period or wider limits)")
    print("margins left (fraction of each limit unused at the worst time):")
    for quantity, margins in trajectory.margins.items():
        print(f"  {quantity}: " + ", ".join(f"{name} {value:.3f}" for name, value in zip(
            joints, np.asarray(margins), strict=True)))
    csv_path, json_path = fourier_trajectory.write_trajectory(options.output, trajectory, options.rate, options.periods)
    print(f"wrote {csv_path} ({options.periods} periods at {options.rate:g} Hz, starting and ending at rest at "
          f"q = {np.array2string(trajectory.start(), precision=4)}) and its coefficients {json_path}")


def main(argv=None) -> int:
    options = arguments(argv)
    try:
        run(options)
    except (ValueError, OSError, MemoryError) as error:  # URDFError, DataError and FileProblem are ValueErrors
        say_error(PROG, error)
        return EXIT_BAD_DATA
    except KeyboardInterrupt:
        say_error(PROG, "interrupted")
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
