"""ros2 launch mbs_dynamics mbs_dynamics.launch.py [robot_description_file:=PATH]
[config_file:=PARAMS.yaml] [use_sim_time:=true] [nodes:=inverse_dynamics,simulator]

Starts the mbs_dynamics nodes (default: all three) on the robot of
robot_description_file (default: the bundled 7-DoF arm), each in its own
process, with the parameters of config_file. Where ROS 2 came from pip, the
console command mbs_dynamics_bringup starts the same nodes in one process.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from mbs_dynamics.robots import bundled_robot

# Node name -> executable.
NODES = {
    "inverse_dynamics": "inverse_dynamics_node",
    "dynamics_server": "dynamics_server_node",
    "simulator": "simulator_node",
}


def _nodes(context):
    chosen = [n.strip() for n in LaunchConfiguration("nodes").perform(context).split(",") if n.strip()]
    unknown = [n for n in chosen if n not in NODES]
    if unknown:
        raise RuntimeError(f"nodes: unknown {', '.join(unknown)}; choose from {', '.join(NODES)}")
    parameters = [
        LaunchConfiguration("config_file"),
        {
            "robot_description_file": LaunchConfiguration("robot_description_file"),
            "use_sim_time": LaunchConfiguration("use_sim_time"),
        },
    ]
    return [
        Node(package="mbs_dynamics", executable=NODES[name], name=name, output="screen", parameters=parameters)
        for name in chosen
    ]


def generate_launch_description():
    share = get_package_share_directory("mbs_dynamics")
    return LaunchDescription([
        DeclareLaunchArgument("robot_description_file", default_value=bundled_robot("arm7"),
                              description="URDF file of the robot"),
        DeclareLaunchArgument("config_file", default_value=os.path.join(share, "config", "mbs_dynamics.yaml"),
                              description="ROS 2 params file of the nodes"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="nodes follow /clock"),
        DeclareLaunchArgument("nodes", default_value=",".join(NODES),
                              description="comma-separated nodes to start"),
        OpaqueFunction(function=_nodes),
    ])
