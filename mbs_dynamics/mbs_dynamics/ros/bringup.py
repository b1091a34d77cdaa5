"""mbs_dynamics_bringup: the chosen nodes in one process (each served by the
executor its class asks for, on a thread of its own), configured from a ROS 2
params file: what ``ros2 launch mbs_dynamics mbs_dynamics.launch.py`` starts
(the same launch_plan), for where ROS 2 came from pip (no launch).

    mbs_dynamics_bringup [--robot arm7 | --robot-description-file PATH]
                         [--config PARAMS.yaml] [--nodes inverse_dynamics,simulator]
                         [--namespace NS] [--use-sim-time] [--closed-loop]
                         [--duration S] [--summary-period S] [--plot FILE.svg]
                         [--view] [--record FILE.html|FILE.viser] [--objects]
                         [--controller wbc] [--ros-args ...]

Without --robot or --robot-description-file the nodes read the
robot_description topic of their namespace (robot_state_publisher's). A
bundled robot also reads config/<robot>.yaml (its initial pose, ...) after
the config. --closed-loop feeds the inverse dynamics node's efforts to the
simulator, which starts from the first of them. --namespace (or
--ros-args -r __ns:=NS) puts every node in NS. --duration, --summary-period
and --plot add the run monitor (run_monitor.py): a periodic summary, the end
after that much simulated time, a plot at the end. --view adds the view node
(view_node.py: the robot in 3-D in a browser; it logs the address to open);
--record FILE adds it too and saves the run it shows to FILE at the end.
--objects puts free objects beside the robot (config/objects.yaml: cubes, a
ball and a can where the bundled arm's tool sweeps after its push).
--controller wbc adds the whole-body controller, whose efforts the simulator
applies, and a reference node that moves the CoM along a circle and lifts a
foot; a bundled robot then reads config/<robot>_wbc.yaml instead of
config/<robot>.yaml (its joints under effort, not position, control).
"""
from __future__ import annotations

import argparse
import os
import sys

from mbs_dynamics.command_line import OneLineErrorParser
from mbs_dynamics.files import FileProblem, check_writable
from mbs_dynamics.robots import BUNDLED_ROBOTS, bundled_robot
from mbs_dynamics.ros.dynamics_server_node import DynamicsServerNode
from mbs_dynamics.ros.inverse_dynamics_node import InverseDynamicsNode
from mbs_dynamics.ros.launch_plan import NODES as EXECUTABLES
from mbs_dynamics.ros.launch_plan import (CONTROLLER_NODES, CONTROLLERS, VIEW_NODE, PlanError, node_names,
                                          normalized_namespace, plan)
from mbs_dynamics.ros.run_monitor import RunMonitor
from mbs_dynamics.ros.simulator.node import SimulatorNode
from mbs_dynamics.ros.spinning import spin_nodes, split_ros_args
from mbs_dynamics.ros.view_node import RECORDINGS, ViewNode
from mbs_dynamics.ros.whole_body_controller_node import WholeBodyControllerNode
from mbs_dynamics.ros.whole_body_references import WholeBodyReferencesNode

# Default node name -> node class (the launch plan's nodes).
NODES = {
    "inverse_dynamics": InverseDynamicsNode,
    "dynamics_server": DynamicsServerNode,
    "simulator": SimulatorNode,
}
assert set(NODES) == set(EXECUTABLES)
CONTROLLER_CLASSES = {"whole_body_controller": WholeBodyControllerNode,
                      "whole_body_references": WholeBodyReferencesNode}
assert set(CONTROLLER_CLASSES) == set(CONTROLLER_NODES)
NODE_CLASSES = {**NODES, VIEW_NODE: ViewNode, **CONTROLLER_CLASSES}


def share_directory() -> str:
    """share/mbs_dynamics of this installation (ament index, else the Python prefix)."""
    try:
        from ament_index_python.packages import get_package_share_directory

        return get_package_share_directory("mbs_dynamics")
    except Exception:  # AMENT_PREFIX_PATH unset (a pip venv) or package not indexed
        return os.path.join(sys.prefix, "share", "mbs_dynamics")


def default_config() -> str:
    return os.path.join(share_directory(), "config", "mbs_dynamics.yaml")


def ros_namespace(ros_args: list[str]) -> str | None:
    """The namespace a `-r __ns:=NS` (or --remap) among ros_args gives, if any."""
    for flag, value in zip(ros_args, ros_args[1:]):
        if flag in ("-r", "--remap") and value.startswith("__ns:="):
            return value.split(":=", 1)[1]
    return None


def node_parameters(ros_args: list[str], names) -> tuple[list[str], dict[str, dict]]:
    """ros_args without the `-p NODE:NAME:=VALUE` of the nodes `names`, and
    those as {node: {name: value}} (values read as YAML, as rcl reads them).
    rcl matches NODE only against /NODE: in a namespace such an argument would
    reach no node, so the bringup gives it to its node itself. PlanError on a
    value that is no parameter value."""
    import yaml
    from rclpy.parameter import Parameter

    rest, parameters = [], {name: {} for name in names}
    k = 0
    while k < len(ros_args):
        flag, value = ros_args[k], ros_args[k + 1] if k + 1 < len(ros_args) else ""
        node, _, assignment = value.partition(":")
        if flag in ("-p", "--param") and node in parameters and ":=" in assignment:
            name, text = assignment.split(":=", 1)
            try:
                parameters[node][name] = yaml.safe_load(text)
                Parameter(name, value=parameters[node][name])  # of a type a parameter takes
            except (yaml.YAMLError, TypeError, ValueError) as error:
                why = getattr(error, "problem", None) or str(error)
                raise PlanError(f"-p {value}: '{text}' is not a parameter value ({why})") from None
            k += 2
            continue
        rest.append(flag)
        k += 1
    return rest, parameters


def parse_arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Our own arguments, and the --ros-args part for rclpy."""
    argv, ros_args = split_ros_args(argv)
    parser = OneLineErrorParser(
        prog="mbs_dynamics_bringup",
        description="Start mbs_dynamics nodes in one process from a params file.",
    )
    robot = parser.add_mutually_exclusive_group()
    robot.add_argument("--robot", choices=BUNDLED_ROBOTS, help="a bundled robot")
    robot.add_argument("--robot-description-file", metavar="PATH",
                       help="URDF file of the robot (neither: the robot_description topic of the namespace)")
    parser.add_argument("--config", metavar="YAML", default=None,
                        help=f"ROS 2 params file (default: {default_config()})")
    parser.add_argument("--nodes", default=None,
                        help=f"comma-separated nodes to start, from {', '.join(NODES)} (default: all; with "
                             "--controller, the simulator)")
    parser.add_argument("--namespace", default="/", metavar="NS",
                        help="namespace of every node (default: /; --ros-args -r __ns:=NS does the same)")
    parser.add_argument("--use-sim-time", action="store_true", help="nodes follow /clock")
    parser.add_argument("--closed-loop", action="store_true",
                        help="the simulator applies the inverse dynamics node's efforts, from the first one on")
    parser.add_argument("--duration", type=float, default=0.0, metavar="S",
                        help="stop after S seconds of simulated time (default: at Ctrl-C)")
    parser.add_argument("--summary-period", type=float, default=0.0, metavar="S",
                        help="log a summary (time, real-time factor, efforts, CoM, momentum, energy) every S s")
    parser.add_argument("--plot", metavar="FILE.svg", default="",
                        help="at the end, plot joint positions, efforts, energy and centroidal momentum to FILE.svg")
    parser.add_argument("--view", action="store_true",
                        help="add the view node: the robot in 3-D in a browser (the log gives the address)")
    parser.add_argument("--record", metavar="FILE", default="",
                        help="add the view node and save what it shows to FILE at the end: a self-contained page "
                             "(.html) or a viser recording (.viser)")
    parser.add_argument("--objects", action="store_true",
                        help="free objects beside the robot for the simulator (config/objects.yaml: a stack of "
                             "cubes, a ball, a can, where the bundled arm sweeps)")
    parser.add_argument("--controller", choices=tuple(CONTROLLERS), default="",
                        help="a controller whose efforts the simulator applies: wbc, the whole-body controller and "
                             "a reference node that moves the CoM along a circle and lifts a foot")
    arguments = parser.parse_args(argv)
    if arguments.nodes is None:  # a controller's loop alone by default: the other nodes would share its process
        arguments.nodes = "simulator" if arguments.controller else ",".join(NODES)
    if arguments.record and os.path.splitext(arguments.record)[1] not in RECORDINGS:
        parser.error(f"--record: the file must end in {' or '.join(RECORDINGS)}, got {arguments.record}")
    try:
        arguments.nodes = node_names(arguments.nodes)
    except PlanError as error:
        parser.error(f"--{error}")
    try:
        arguments.namespace = normalized_namespace(ros_namespace(ros_args[1:]) or arguments.namespace)
    except PlanError as error:
        parser.error(f"--namespace: {error}")
    if arguments.closed_loop and not {"simulator", "inverse_dynamics"} <= set(arguments.nodes):
        parser.error("--closed-loop needs the simulator and inverse_dynamics nodes")
    if not (0 <= arguments.duration < float("inf") and 0 <= arguments.summary_period < float("inf")):
        parser.error("--duration and --summary-period must be finite and >= 0")
    if arguments.controller and "simulator" not in arguments.nodes:
        parser.error(f"--controller {arguments.controller} drives the simulator: it needs the simulator node")
    if arguments.controller and arguments.closed_loop:
        parser.error("--controller and --closed-loop both command the simulator's efforts: choose one")
    if arguments.controller and arguments.robot and not robot_config(f"{arguments.robot}_{arguments.controller}"):
        parser.error(f"--controller {arguments.controller}: no config/{arguments.robot}_{arguments.controller}.yaml "
                     f"sets it up for {arguments.robot}")
    if arguments.objects and "simulator" not in arguments.nodes:
        parser.error("--objects are the simulator's: they need the simulator node")
    if arguments.duration > 0 and "simulator" not in arguments.nodes:
        parser.error("--duration counts simulated time: it needs the simulator node")
    arguments.config = arguments.config or default_config()
    if not os.path.isfile(arguments.config):
        parser.error(f"--config: no such file {arguments.config}")
    for option, path, what in (("--plot", arguments.plot, "plot"), ("--record", arguments.record, "recording")):
        try:
            if path:
                check_writable(path, what)
        except FileProblem as error:
            parser.error(f"{option}: {error}")
    return arguments, ros_args


def robot_config(robot: str) -> str | None:
    """config/<robot>.yaml of a bundled robot, if there is one."""
    path = os.path.join(share_directory(), "config", f"{robot}.yaml")
    return path if os.path.isfile(path) else None


def main(argv: list[str] | None = None) -> None:
    from rclpy.parameter import Parameter

    argv = sys.argv[1:] if argv is None else argv
    arguments, ros_args = parse_arguments(argv)
    robot = f"{arguments.robot}_{arguments.controller}" if arguments.controller else arguments.robot
    plans = plan(arguments.nodes, arguments.config, robot_config(robot) if arguments.robot else None,
                 bundled_robot(arguments.robot) if arguments.robot else arguments.robot_description_file or "",
                 arguments.use_sim_time, arguments.closed_loop, arguments.namespace, arguments.view,
                 arguments.record, os.path.join(share_directory(), "config", "objects.yaml") if arguments.objects
                 else "", arguments.controller)
    # The params files go first so that --ros-args -p ... given by the user wins; a plan's own parameters
    # (the robot's file, use_sim_time, the closed loop's start_on_command) are overrides of their node, and
    # then the user's -p NODE:NAME:=VALUE.
    files = plans[0].parameter_files
    try:
        ros_args, targeted = node_parameters(ros_args[1:], [*NODE_CLASSES, "run_monitor"])
    except PlanError as error:
        print(f"mbs_dynamics_bringup: error: {error}", file=sys.stderr)
        sys.exit(2)
    rclpy_args = ["mbs_dynamics_bringup", "--ros-args", *[a for path in files for a in ("--params-file", path)],
                  *ros_args]
    chosen = [(p.name, NODE_CLASSES[p.name], p.parameters, p.remappings) for p in plans]
    if arguments.duration or arguments.summary_period or arguments.plot:
        chosen.append(("run_monitor", RunMonitor, {
            **{k: v for k, v in plans[0].parameters.items() if k != "start_on_command"},
            "duration": arguments.duration, "summary_period": arguments.summary_period,
            "plot_file": os.path.abspath(arguments.plot) if arguments.plot else ""},
            tuple(r for r in plans[0].remappings if r[0] == "/clock")))

    def factory(name, node_class, parameters, remappings):
        overrides = [Parameter(key, value=value) for key, value in {**parameters, **targeted[name]}.items()]
        cli_args = ["--ros-args", *[a for source, target in remappings for a in ("-r", f"{source}:={target}")]]
        return lambda stop: node_class(name, stop=stop, namespace=arguments.namespace, parameter_overrides=overrides,
                                       cli_args=cli_args if remappings else None)

    sys.exit(spin_nodes([factory(*node) for node in chosen], args=rclpy_args))


if __name__ == "__main__":
    main()
