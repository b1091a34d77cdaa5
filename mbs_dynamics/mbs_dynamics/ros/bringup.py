"""mbs_dynamics_bringup: the chosen nodes in one process (MultiThreadedExecutor),
configured from a ROS 2 params file: what ``ros2 launch mbs_dynamics
mbs_dynamics.launch.py`` starts, for where ROS 2 came from pip (no launch).

    mbs_dynamics_bringup [--robot arm7 | --robot-description-file PATH]
                         [--config PARAMS.yaml] [--nodes inverse_dynamics,simulator]
                         [--use-sim-time] [--closed-loop]
                         [--duration S] [--summary-period S] [--plot FILE.svg]
                         [--ros-args ...]

A bundled robot also reads config/<robot>.yaml (its initial pose, ...) after
the config. --closed-loop feeds the inverse dynamics node's efforts to the
simulator, which starts from the first of them. --duration, --summary-period
and --plot add the run monitor (run_monitor.py): a periodic summary, the end
after that much simulated time, a plot at the end.
"""
from __future__ import annotations

import argparse
import os
import sys

from mbs_dynamics.robots import BUNDLED_ROBOTS, bundled_robot
from mbs_dynamics.ros.dynamics_node import spin_nodes
from mbs_dynamics.ros.dynamics_server_node import DynamicsServerNode
from mbs_dynamics.ros.inverse_dynamics_node import InverseDynamicsNode
from mbs_dynamics.ros.run_monitor import RunMonitor
from mbs_dynamics.ros.simulator_node import SimulatorNode

# Default node name -> node class.
NODES = {
    "inverse_dynamics": InverseDynamicsNode,
    "dynamics_server": DynamicsServerNode,
    "simulator": SimulatorNode,
}


def share_directory() -> str:
    """share/mbs_dynamics of this installation (ament index, else the Python prefix)."""
    try:
        from ament_index_python.packages import get_package_share_directory

        return get_package_share_directory("mbs_dynamics")
    except Exception:  # AMENT_PREFIX_PATH unset (a pip venv) or package not indexed
        return os.path.join(sys.prefix, "share", "mbs_dynamics")


def default_config() -> str:
    return os.path.join(share_directory(), "config", "mbs_dynamics.yaml")


def parse_arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Our own arguments, and the --ros-args part for rclpy."""
    ros_args: list[str] = []
    if "--ros-args" in argv:
        index = argv.index("--ros-args")
        argv, ros_args = argv[:index], argv[index:]
    parser = argparse.ArgumentParser(
        prog="mbs_dynamics_bringup",
        description="Start mbs_dynamics nodes in one process from a params file.",
    )
    robot = parser.add_mutually_exclusive_group()
    robot.add_argument("--robot", choices=BUNDLED_ROBOTS, help="a bundled robot")
    robot.add_argument("--robot-description-file", metavar="PATH", help="URDF file of the robot")
    parser.add_argument("--config", metavar="YAML", default=None,
                        help=f"ROS 2 params file (default: {default_config()})")
    parser.add_argument("--nodes", default=",".join(NODES),
                        help=f"comma-separated nodes to start, from {', '.join(NODES)} (default: all)")
    parser.add_argument("--use-sim-time", action="store_true", help="nodes follow /clock")
    parser.add_argument("--closed-loop", action="store_true",
                        help="the simulator applies the inverse dynamics node's efforts, from the first one on")
    parser.add_argument("--duration", type=float, default=0.0, metavar="S",
                        help="stop after S seconds of simulated time (default: at Ctrl-C)")
    parser.add_argument("--summary-period", type=float, default=0.0, metavar="S",
                        help="log a summary (time, real-time factor, efforts, CoM, momentum, energy) every S s")
    parser.add_argument("--plot", metavar="FILE.svg", default="",
                        help="at the end, plot joint positions, efforts, energy and centroidal momentum to FILE.svg")
    arguments = parser.parse_args(argv)
    arguments.nodes = [name.strip() for name in arguments.nodes.split(",") if name.strip()]
    unknown = [name for name in arguments.nodes if name not in NODES]
    if unknown or not arguments.nodes:
        parser.error(f"--nodes: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(NODES)}")
    if arguments.closed_loop and not {"simulator", "inverse_dynamics"} <= set(arguments.nodes):
        parser.error("--closed-loop needs the simulator and inverse_dynamics nodes")
    if arguments.duration < 0 or arguments.summary_period < 0:
        parser.error("--duration and --summary-period must be >= 0")
    if arguments.duration > 0 and "simulator" not in arguments.nodes:
        parser.error("--duration counts simulated time: it needs the simulator node")
    arguments.config = arguments.config or default_config()
    if not os.path.isfile(arguments.config):
        parser.error(f"--config: no such file {arguments.config}")
    return arguments, ros_args


def robot_config(robot: str) -> str | None:
    """config/<robot>.yaml of a bundled robot, if there is one."""
    path = os.path.join(share_directory(), "config", f"{robot}.yaml")
    return path if os.path.isfile(path) else None


def main(argv: list[str] | None = None) -> None:
    from rclpy.parameter import Parameter

    argv = sys.argv[1:] if argv is None else argv
    arguments, ros_args = parse_arguments(argv)
    overrides = [Parameter("use_sim_time", value=True)] if arguments.use_sim_time else []
    robot_file = bundled_robot(arguments.robot) if arguments.robot else arguments.robot_description_file
    if robot_file:
        overrides.append(Parameter("robot_description_file", value=os.path.abspath(robot_file)))
    # The params files go first so that --ros-args -p ... given by the user wins.
    if ros_args:
        ros_args = ros_args[1:]
    params_files = [arguments.config]
    if arguments.robot and robot_config(arguments.robot):
        params_files.append(robot_config(arguments.robot))
    rclpy_args = ["mbs_dynamics_bringup", "--ros-args",
                  *[a for path in params_files for a in ("--params-file", path)], *ros_args]
    own = {name: [] for name in (*NODES, "run_monitor")}  # parameters and arguments of one node only
    remaps = {name: [] for name in own}
    if arguments.closed_loop:
        own["simulator"].append(Parameter("start_on_command", value=True))
        remaps["simulator"] += ["-r", "~/joint_efforts:=/inverse_dynamics/joint_efforts"]
    own["run_monitor"] += [Parameter("duration", value=arguments.duration),
                           Parameter("summary_period", value=arguments.summary_period),
                           Parameter("plot_file", value=os.path.abspath(arguments.plot) if arguments.plot else "")]
    chosen = {name: NODES[name] for name in arguments.nodes}
    if arguments.duration or arguments.summary_period or arguments.plot:
        chosen["run_monitor"] = RunMonitor

    def factory(name, node_class):
        return lambda stop: node_class(name, stop=stop, parameter_overrides=[*overrides, *own[name]],
                                       cli_args=["--ros-args", *remaps[name]] if remaps[name] else None)

    sys.exit(spin_nodes([factory(name, node_class) for name, node_class in chosen.items()], args=rclpy_args,
                        multithreaded=True))


if __name__ == "__main__":
    main()
