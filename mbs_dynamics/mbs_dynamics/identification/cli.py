"""mbs_dynamics_identify: recorded bags (or CSV files) and a nominal URDF in,
the identified URDF out.

    mbs_dynamics_identify BAG [BAG ...] --urdf NOMINAL.urdf --output IDENTIFIED.urdf
        [--topic joint_states] [--floating-base [--odometry-topic odom]]
        [--report REPORT.svg] [--scheduler tcp://HOST:8786] ...

Prints a progress bar while reading and reducing, then a table per joint (the
torque RMS error on the data of the nominal and the identified model, which
parameters are identifiable on their own) and a summary. Bad input gets one
message on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from mbs_dynamics.identification import data, report
from mbs_dynamics.identification.estimation import DEFAULT_PRIOR_WEIGHT
from mbs_dynamics.identification.identify import IdentificationError, identify
from mbs_dynamics.identification.parameters import DEFAULT_JOINT_PARAMETERS, JOINT_PARAMETERS
from mbs_dynamics.identification.urdf_writer import identified_urdf
from mbs_dynamics.parsers.urdf import URDFError

EXIT_BAD_INPUT = 2


def parser() -> argparse.ArgumentParser:
    arguments = argparse.ArgumentParser(
        prog="mbs_dynamics_identify", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    arguments.add_argument("recordings", nargs="+", metavar="BAG",
                           help="ROS 2 bags (directories, or their .mcap / .db3 files) or CSV files (.csv)")
    arguments.add_argument("--urdf", required=True, help="the nominal URDF (the prior)")
    arguments.add_argument("--output", required=True, help="where to write the identified URDF")
    arguments.add_argument("--topic", default="joint_states", help="the sensor_msgs/JointState topic")
    arguments.add_argument("--floating-base", action="store_true",
                           help="a floating base, its motion from --odometry-topic (only the actuated joints' "
                                "torques are fitted: the base's wrench needs the contact forces)")
    arguments.add_argument("--odometry-topic", default="odom", help="nav_msgs/Odometry of the floating base")
    arguments.add_argument("--report", metavar="REPORT.svg", help="plot measured vs predicted torques")
    arguments.add_argument("--scheduler", metavar="ADDRESS",
                           help="an existing Dask cluster's scheduler (tcp://host:8786); local threads if not given")
    arguments.add_argument("--cutoff", type=float, default=data.DEFAULT_CUTOFF,
                           help="low-pass cut-off (Hz) of the zero-phase filter before differentiation")
    arguments.add_argument("--joint-parameters", default=",".join(DEFAULT_JOINT_PARAMETERS),
                           help="the joint parameters to identify, among " + ", ".join(JOINT_PARAMETERS))
    arguments.add_argument("--exclude-joints", default="", metavar="JOINT,...",
                           help="joints whose torques are not used and whose parameters are not fitted (a "
                                "gripper's fingers, a joint without a torque sensor)")
    arguments.add_argument("--prior-weight", type=float, default=DEFAULT_PRIOR_WEIGHT,
                           help="pull toward the nominal URDF, relative to the data")
    arguments.add_argument("--robust", action="store_true", help="Huber-weighted refits: outliers count less")
    arguments.add_argument("--quiet", action="store_true", help="no progress bars")
    return arguments


def main(argv=None) -> int:
    options = parser().parse_args(argv)
    started = time.monotonic()
    try:
        urdf_xml = Path(options.urdf).read_text(encoding="utf-8")
        joint_parameters = tuple(name.strip() for name in options.joint_parameters.split(",") if name.strip())
        result = identify(options.recordings, urdf_xml, scheduler=options.scheduler, progress=not options.quiet,
                          floating_base=options.floating_base,
                          odometry_topic=options.odometry_topic if options.floating_base else None,
                          topic=options.topic, cutoff=options.cutoff, joint_parameters=joint_parameters,
                          prior_weight=options.prior_weight, robust=options.robust,
                          excluded_joints=tuple(name for name in options.exclude_joints.split(",") if name))
    except (IdentificationError, URDFError, data.DataError, OSError, ValueError) as error:
        print(f"mbs_dynamics_identify: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    comment = (f"Identified by mbs_dynamics_identify on {when} from {', '.join(result.sources)}, "
               f"nominal {options.urdf}")
    Path(options.output).write_text(identified_urdf(urdf_xml, result.layout, result.identified,
                                                    result.fit.identified_bodies, comment), encoding="utf-8")
    if options.report:
        report.write_svg(options.report, result)
    print(report.joint_table(result))
    print(report.summary(result))
    print(f"wrote {options.output}" + (f" and {options.report}" if options.report else "")
          + f" in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
