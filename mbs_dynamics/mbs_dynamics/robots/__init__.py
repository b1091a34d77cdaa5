"""Robots shipped with the package (written by scripts/make_bundled_robots.py).

arm7: 7-DoF arm, fixed base. quadruped: 12-DoF quadruped, load it with a
floating base.
"""
from pathlib import Path

BUNDLED_ROBOTS = ("arm7", "quadruped")


def bundled_robot(name: str) -> str:
    """Path of the URDF of a bundled robot."""
    if name not in BUNDLED_ROBOTS:
        raise ValueError(f"no bundled robot '{name}'; there are: {', '.join(BUNDLED_ROBOTS)}")
    return str(Path(__file__).resolve().parent / f"{name}.urdf")
