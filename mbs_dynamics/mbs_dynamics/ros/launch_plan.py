"""What the launch file and mbs_dynamics_bringup start, decided in one place:
which nodes, with which params files, parameters and remappings. Plain data,
no ROS import, so that it is tested where `ros2 launch` does not exist.

Every name a node uses is relative to its namespace, so the same plan runs
under any namespace and several robots side by side in one ROS domain:

* robot_description: the file given (robot_description_file, or a bundled
  robot's); with neither, each node reads the robot_description topic of its
  namespace (robot_state_publisher's).
* closed_loop: the simulator's ~/joint_efforts is remapped to the inverse
  dynamics node's of the same namespace (inverse_dynamics/joint_efforts),
  and it starts on the first command.
* A simulator in a namespace other than the root owns that namespace's
  simulated time: every node of the plan uses <namespace>/clock instead of
  /clock (the remap /clock:=clock), so that several simulators can share a
  domain. In the root namespace, /clock as usual.
* view: the view node (mbs_dynamics_view) besides the chosen nodes, with the
  same robot; record_file, when given, is its recording.
* controller 'wbc': the whole_body_controller node, whose efforts the
  simulator applies (its simulator/joint_efforts), and the
  whole_body_references node that moves it (the robot's config, e.g.
  config/quadruped_wbc.yaml, sets both up; the caller passes it as the
  robot's config).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

# Default node name -> console script.
NODES = {
    "inverse_dynamics": "inverse_dynamics_node",
    "dynamics_server": "dynamics_server_node",
    "simulator": "simulator_node",
}
# The view node: started on request (view), never by default.
VIEW_NODE, VIEW_EXECUTABLE = "view", "mbs_dynamics_view"
# Controllers started on request beside the simulator: name -> {node name: console script}.
CONTROLLERS = {"wbc": {"whole_body_controller": "whole_body_controller_node",
                       "whole_body_references": "whole_body_references_node"}}
CONTROLLER_NODES = {name: script for nodes in CONTROLLERS.values() for name, script in nodes.items()}


class PlanError(ValueError):
    """Launch arguments that do not make a plan; the message says why."""


@dataclass(frozen=True)
class NodePlan:
    """One node to start: its name, console script, params files (in order,
    later ones win), parameters set on top of them, and remappings."""

    name: str
    executable: str
    parameter_files: tuple[str, ...]
    parameters: dict = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()


def normalized_namespace(namespace: str) -> str:
    """'/' or '/a/b' (a leading slash, no trailing one); PlanError on an invalid one."""
    inner = namespace.strip().strip("/")
    for token in inner.split("/") if inner else ():
        if not (token and (token[0].isalpha() or token[0] == "_") and all(c.isalnum() or c == "_" for c in token)):
            raise PlanError(f"namespace '{namespace}' is not a valid ROS namespace (tokens of letters, digits and "
                            "'_', not starting with a digit, between '/')")
    return "/" + inner


def node_names(text: str) -> list[str]:
    """The nodes of a comma-separated list; PlanError on an unknown or empty one."""
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in NODES]
    if unknown or not chosen:
        raise PlanError(f"nodes: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(NODES)}")
    return chosen


def plan(nodes: list[str], config_file: str, robot_config_file: str | None = None,
         robot_description_file: str = "", use_sim_time: bool = False, closed_loop: bool = False,
         namespace: str = "/", view: bool = False, record_file: str = "", objects_config_file: str = "",
         controller: str = "") -> list[NodePlan]:
    """The nodes to start (module docstring). robot_config_file: a bundled
    robot's config, read after config_file; objects_config_file (free objects
    for the simulator, config/objects.yaml) after it; controller: '' or one
    of CONTROLLERS."""
    namespace = normalized_namespace(namespace)
    unknown = [name for name in nodes if name not in NODES]
    if unknown:
        raise PlanError(f"nodes: unknown {', '.join(unknown)}; choose from {', '.join(NODES)}")
    if closed_loop and not {"simulator", "inverse_dynamics"} <= set(nodes):
        raise PlanError("closed_loop needs the simulator and inverse_dynamics nodes")
    if objects_config_file and "simulator" not in nodes:
        raise PlanError("objects are the simulator's: they need the simulator node")
    if controller and controller not in CONTROLLERS:
        raise PlanError(f"controller: unknown '{controller}'; choose from {', '.join(CONTROLLERS)}")
    if controller and "simulator" not in nodes:
        raise PlanError(f"controller {controller} drives the simulator: it needs the simulator node")
    if controller and closed_loop:
        raise PlanError(f"controller {controller} and closed_loop both command the simulator's efforts: choose one")
    files = tuple(path for path in (config_file, robot_config_file, objects_config_file) if path)
    common = {"use_sim_time": True} if use_sim_time else {}
    if robot_description_file:
        common["robot_description_file"] = os.path.abspath(robot_description_file)
    remap_clock = (("/clock", "clock"),) if namespace != "/" and "simulator" in nodes else ()
    plans = []
    for name in nodes:
        parameters, remappings = dict(common), remap_clock
        if closed_loop and name == "simulator":
            parameters["start_on_command"] = True
            remappings += (("~/joint_efforts", "inverse_dynamics/joint_efforts"),)
        plans.append(NodePlan(name, NODES[name], files, parameters, remappings))
    for name, executable in CONTROLLERS.get(controller, {}).items():
        plans.append(NodePlan(name, executable, files, dict(common), remap_clock))
    if view or record_file:
        parameters = dict(common, record_file=os.path.abspath(record_file)) if record_file else dict(common)
        plans.append(NodePlan(VIEW_NODE, VIEW_EXECUTABLE, files, parameters, remap_clock))
    return plans
