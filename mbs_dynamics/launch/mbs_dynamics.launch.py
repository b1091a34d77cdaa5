"""ros2 launch mbs_dynamics mbs_dynamics.launch.py [robot:=arm7|quadruped]
[robot_description_file:=PATH] [config_file:=PARAMS.yaml] [use_sim_time:=true]
[nodes:=inverse_dynamics,simulator] [closed_loop:=true]

Starts the mbs_dynamics nodes (default: all three) on the robot of
robot_description_file, or else the bundled `robot` (default: the 7-DoF arm,
with its config/<robot>.yaml after config_file), each in its own process,
with the parameters of config_file. closed_loop: the simulator applies the
inverse dynamics node's efforts, from the first one on. Where ROS 2 came
from pip, the console command mbs_dynamics_bringup starts the same nodes in
one process.
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
    robot_file = LaunchConfiguration("robot_description_file").perform(context)
    files = [LaunchConfiguration("config_file").perform(context)]
    if not robot_file:
        robot = LaunchConfiguration("robot").perform(context)
        robot_file = bundled_robot(robot)
        robot_config = os.path.join(get_package_share_directory("mbs_dynamics"), "config", f"{robot}.yaml")
        if os.path.isfile(robot_config):
            files.append(robot_config)
    common = {"robot_description_file": robot_file, "use_sim_time": LaunchConfiguration("use_sim_time")}
    closed_loop = LaunchConfiguration("closed_loop").perform(context).lower() in ("true", "1")
    if closed_loop and not {"simulator", "inverse_dynamics"} <= set(chosen):
        raise RuntimeError("closed_loop needs the simulator and inverse_dynamics nodes")

    def node(name):
        parameters, remappings = [*files, common], []
        if closed_loop and name == "simulator":
            parameters.append({"start_on_command": True})
            remappings.append(("~/joint_efforts", "/inverse_dynamics/joint_efforts"))
        return Node(package="mbs_dynamics", executable=NODES[name], name=name, output="screen",
                    parameters=parameters, remappings=remappings)

    return [node(name) for name in chosen]


def generate_launch_description():
    share = get_package_share_directory("mbs_dynamics")
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="arm7",
                              description="bundled robot (arm7 or quadruped), when robot_description_file is empty"),
        DeclareLaunchArgument("robot_description_file", default_value="",
                              description="URDF file of the robot"),
        DeclareLaunchArgument("config_file", default_value=os.path.join(share, "config", "mbs_dynamics.yaml"),
                              description="ROS 2 params file of the nodes"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="nodes follow /clock"),
        DeclareLaunchArgument("nodes", default_value=",".join(NODES),
                              description="comma-separated nodes to start"),
        DeclareLaunchArgument("closed_loop", default_value="false",
                              description="the simulator applies the inverse dynamics node's efforts"),
        OpaqueFunction(function=_nodes),
    ])
