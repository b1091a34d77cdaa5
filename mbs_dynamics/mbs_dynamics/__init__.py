"""mbs_dynamics: rigid multibody dynamics from a URDF.

The core (this package minus ``mbs_dynamics.ros``) never imports ROS.

    import mbs_dynamics as mbs
    robot = mbs.parse_urdf_file(mbs.bundled_robot("arm7"))
"""
from mbs_dynamics.parsers.urdf import (
    JointDescription,
    LinkDescription,
    RobotDescription,
    URDFError,
    parse_urdf_file,
    parse_urdf_string,
)
from mbs_dynamics.robots import BUNDLED_ROBOTS, bundled_robot

__version__ = "0.1.0"

__all__ = [
    "BUNDLED_ROBOTS",
    "JointDescription",
    "LinkDescription",
    "RobotDescription",
    "URDFError",
    "bundled_robot",
    "parse_urdf_file",
    "parse_urdf_string",
]
