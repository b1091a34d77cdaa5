"""ament_python package mbs_dynamics: built by colcon on a full ROS 2 install,
by pip (scripts/setup_venv.sh) where ROS 2 came from PyPI."""
from glob import glob

from setuptools import find_packages, setup

package_name = "mbs_dynamics"

setup(
    name=package_name,
    version="0.1.0",
    description="Rigid multibody dynamics from robot_description, and ROS 2 nodes over it",
    license="BSD-3-Clause",
    packages=find_packages(include=[package_name, package_name + ".*"]),
    package_data={package_name: ["robots/*.urdf"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
        ("share/" + package_name + "/objects", glob("objects/*.urdf")),
    ],
    python_requires=">=3.10",
    install_requires=["setuptools"],
    zip_safe=False,
    entry_points={
        "console_scripts": [
            "inverse_dynamics_node = mbs_dynamics.ros.inverse_dynamics_node:main",
            "dynamics_server_node = mbs_dynamics.ros.dynamics_server_node:main",
            "simulator_node = mbs_dynamics.ros.simulator.node:main",
            "whole_body_controller_node = mbs_dynamics.ros.whole_body_controller_node:main",
            "whole_body_references_node = mbs_dynamics.ros.whole_body_references:main",
            "mbs_dynamics_view = mbs_dynamics.ros.view_node:main",
            "mbs_dynamics_bringup = mbs_dynamics.ros.bringup:main",
            "mbs_dynamics_identify = mbs_dynamics.identification.cli:main",
            "mbs_dynamics_excitation = mbs_dynamics.identification.excitation_cli:main",
            "mbs_dynamics_record = mbs_dynamics.ros.bag_recorder:main",
            "mbs_dynamics_play_trajectory = mbs_dynamics.ros.trajectory_player:main",
        ],
    },
)
