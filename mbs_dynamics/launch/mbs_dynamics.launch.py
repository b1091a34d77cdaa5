"""ros2 launch mbs_dynamics mbs_dynamics.launch.py [robot:=arm7|quadruped]
[robot_description_file:=PATH] [config_file:=PARAMS.yaml] [namespace:=NS]
[use_sim_time:=true] [nodes:=inverse_dynamics,simulator] [closed_loop:=true]
[view:=true] [record_file:=RUN.html] [objects:=true] [controller:=wbc]

Starts the mbs_dynamics nodes (default: all three), each in its own process,
with the parameters of config_file, in `namespace`, on the robot of
robot_description_file, or the bundled `robot` (with its config/<robot>.yaml
after config_file), or, with neither, the robot_description topic of the
namespace (robot_state_publisher's). closed_loop: the simulator applies the
inverse dynamics node's efforts, from the first one on. view: the view node
too (the robot in 3-D in a browser), recording to record_file. objects: free objects
beside the robot (config/objects.yaml). controller: wbc adds the whole-body
controller, whose efforts the simulator applies, and its reference node (a
bundled robot then reads config/<robot>_wbc.yaml instead). What starts is
mbs_dynamics.ros.launch_plan's plan, the one mbs_dynamics_bringup follows
where ROS 2 came from pip (no launch).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from mbs_dynamics.robots import bundled_robot
from mbs_dynamics.ros.launch_plan import NODES, node_names, plan

ARGUMENTS = {  # name -> (default, description)
    "robot": ("", "bundled robot (arm7 or quadruped); empty: robot_description_file or the robot_description topic"),
    "robot_description_file": ("", "URDF file of the robot; empty: the bundled robot or the robot_description topic"),
    "config_file": (os.path.join(get_package_share_directory("mbs_dynamics"), "config", "mbs_dynamics.yaml"),
                    "ROS 2 params file of the nodes"),
    "namespace": ("", "namespace of every node (e.g. robot1); empty: the root"),
    "use_sim_time": ("false", "nodes follow the simulated clock"),
    "nodes": (",".join(NODES), "comma-separated nodes to start"),
    "closed_loop": ("false", "the simulator applies the inverse dynamics node's efforts"),
    "view": ("false", "start the view node too: the robot in 3-D in a browser (its log gives the address)"),
    "record_file": ("", "the view node saves what it shows to this .html or .viser file at the end"),
    "objects": ("false", "free objects beside the robot for the simulator (config/objects.yaml)"),
    "controller": ("", "wbc: the whole-body controller drives the simulator, moved by its reference node"),
}


def _nodes(context):
    value = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    robot, robot_config = value["robot"], None
    robot_file = value["robot_description_file"]
    if robot and not robot_file:
        robot_file = bundled_robot(robot)
        name = f"{robot}_{value['controller']}" if value["controller"] else robot
        path = os.path.join(get_package_share_directory("mbs_dynamics"), "config", f"{name}.yaml")
        robot_config = path if os.path.isfile(path) else None
    plans = plan(node_names(value["nodes"]), value["config_file"], robot_config, robot_file,
                 value["use_sim_time"].lower() in ("true", "1"), value["closed_loop"].lower() in ("true", "1"),
                 value["namespace"] or "/", value["view"].lower() in ("true", "1"), value["record_file"],
                 os.path.join(get_package_share_directory("mbs_dynamics"), "config", "objects.yaml")
                 if value["objects"].lower() in ("true", "1") else "", value["controller"])
    return [Node(package="mbs_dynamics", executable=p.executable, name=p.name, namespace=value["namespace"],
                 output="screen", parameters=[*p.parameter_files, p.parameters], remappings=list(p.remappings))
            for p in plans]


def generate_launch_description():
    return LaunchDescription([
        *[DeclareLaunchArgument(name, default_value=default, description=description)
          for name, (default, description) in ARGUMENTS.items()],
        OpaqueFunction(function=_nodes),
    ])
