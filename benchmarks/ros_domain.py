"""A DDS domain of the benchmark's own, on this machine only.

A node on domain 0, another benchmark or a test run beside it would otherwise publish
into the measured node (one run's node dropped 463 foreign joint_states). The tests
take domains 1-101 (mbs_dynamics/test/conftest.py); the benchmarks take 150-232.
Call before rclpy is initialised and before any node process starts: child processes
inherit the environment.
"""
import os
import random

FIRST_DOMAIN, LAST_DOMAIN = 150, 232


def use_private_ros_domain() -> int:
    """Set ROS_DOMAIN_ID (unless the caller chose one) and localhost-only discovery;
    returns the domain."""
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(FIRST_DOMAIN, LAST_DOMAIN)))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    return int(os.environ["ROS_DOMAIN_ID"])
