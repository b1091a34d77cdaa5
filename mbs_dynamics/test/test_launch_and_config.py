"""The launch file and the config: the launch plan that the launch file and
the bringup both follow (nodes, params files, parameters, remappings, in any
namespace); the launch file's arguments, read from its source where there is
no `launch` package (ROS 2 from pip); every executable it can start is a
declared console script, every config file installed, the config's defaults
the nodes' own; and, where ROS 2 has `ros2 launch`, the launch file starts
the nodes."""
from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import math
import os
import shutil
import sys
from pathlib import Path

import mbs_dynamics as mbs
import numpy as np
import pytest
import yaml
from mbs_dynamics.robots import BUNDLED_ROBOTS
from mbs_dynamics.ros.bringup import NODE_CLASSES as BRINGUP_NODES
from mbs_dynamics.ros.bringup import share_directory
from mbs_dynamics.ros.launch_plan import NODES as DEFAULT_NODES
from mbs_dynamics.ros.launch_plan import CONTROLLER_NODES, VIEW_EXECUTABLE, VIEW_NODE
from mbs_dynamics.ros.parameters import COMMON_PARAMETERS, EMPTY_DOUBLE_ARRAY, EMPTY_STRING_ARRAY

PLAN_NODES = {**DEFAULT_NODES, VIEW_NODE: VIEW_EXECUTABLE, **CONTROLLER_NODES}  # every node a plan can start
from mbs_dynamics.ros.launch_plan import PlanError, node_names, normalized_namespace, plan
from mbs_dynamics.ros.run_monitor import RunMonitor

from ros_processes import wait_for_node

SHARE = Path(share_directory())
LAUNCH_FILE = SHARE / "launch" / "mbs_dynamics.launch.py"
CONFIG_FILE = SHARE / "config" / "mbs_dynamics.yaml"


def console_scripts() -> dict[str, str]:
    """Console scripts declared by the installed mbs_dynamics distribution."""
    entry_points = importlib.metadata.distribution("mbs_dynamics").entry_points
    return {e.name: e.value for e in entry_points if e.group == "console_scripts"}


def launch_file_arguments() -> dict:
    """The launch file's ARGUMENTS table, {name: (default, description)}, as
    written (a default computed by a call, as config_file's: None here)."""
    tree = ast.parse(LAUNCH_FILE.read_text())
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and getattr(statement.targets[0], "id", None) == "ARGUMENTS":
            return {ast.literal_eval(key): (ast.literal_eval(value.elts[0]) if isinstance(value.elts[0], ast.Constant)
                                            else None, ast.literal_eval(value.elts[1]))
                    for key, value in zip(statement.value.keys, statement.value.values, strict=True)}
    raise AssertionError("the launch file has no ARGUMENTS table")


def test_console_scripts_are_declared():
    scripts = console_scripts()
    assert set(scripts) == {"inverse_dynamics_node", "dynamics_server_node", "simulator_node",
                            "mbs_dynamics_bringup", "mbs_dynamics_record", "mbs_dynamics_play_trajectory",
                            "mbs_dynamics_identify", "mbs_dynamics_excitation", "mbs_dynamics_view",
                            "whole_body_controller_node", "whole_body_references_node"}
    for script in scripts:
        assert (Path(sys.executable).parent / script).exists(), script


def test_launch_plan_executables_are_console_scripts_and_configs_installed():
    assert set(PLAN_NODES) == set(BRINGUP_NODES), "the launch plan and the bringup start different nodes"
    scripts = console_scripts()
    for name, executable in PLAN_NODES.items():
        assert executable in scripts, f"the launch plan names {executable}, which is not a console script"
        module = scripts[executable].split(":")[0]
        assert BRINGUP_NODES[name].__module__ == module, (name, executable, module)  # the node the bringup runs
    assert CONFIG_FILE.is_file()
    for robot in BUNDLED_ROBOTS:
        assert (SHARE / "config" / f"{robot}.yaml").is_file(), f"config/{robot}.yaml is not installed"
    assert "package.xml" in os.listdir(SHARE)
    ament_marker = SHARE.parent / "ament_index" / "resource_index" / "packages" / "mbs_dynamics"
    assert ament_marker.is_file()


def test_config_defaults_are_the_nodes_own():
    config = yaml.safe_load(CONFIG_FILE.read_text())
    assert set(config) == {"/**", *(f"/**/{name}" for name in BRINGUP_NODES)}  # any namespace

    def defaults(specs):
        return {p.name: p.default for p in specs}

    def same(a, b):
        if isinstance(a, float) or isinstance(b, float):
            return math.isclose(a, b, rel_tol=0, abs_tol=0)
        return a == b

    common = {name: value for name, value in defaults(COMMON_PARAMETERS).items()
              if value not in (EMPTY_STRING_ARRAY, EMPTY_DOUBLE_ARRAY)}  # a params file cannot hold an empty array
    written = config["/**"]["ros__parameters"]
    assert set(written) == set(common)
    for name, value in written.items():
        assert same(value, common[name]), name
    for node_name, node_class in BRINGUP_NODES.items():
        declared = defaults(node_class.PARAMETERS)
        written = config[f"/**/{node_name}"]["ros__parameters"]
        assert set(written) <= set(declared), f"{node_name}: {set(written) - set(declared)} not declared"
        for name, default in declared.items():
            if default in (EMPTY_STRING_ARRAY, EMPTY_DOUBLE_ARRAY):
                assert name not in written  # a params file cannot hold an empty array
                continue
            assert name in written, f"{node_name}.{name} missing from the config"
            value = written[name]
            if isinstance(default, list):
                assert len(value) == len(default) and all(map(same, value, default)), name
            else:
                assert type(value) is type(default) and same(value, default), f"{node_name}.{name}"


@pytest.mark.parametrize("robot", [*BUNDLED_ROBOTS, "objects", "quadruped_wbc", "talos_wbc"])
def test_robot_configs_set_declared_parameters(robot):
    """config/<robot>.yaml, read after the main config for a bundled robot
    (and objects.yaml for --objects), sets parameters the nodes declare, with
    values of the declared types."""
    config = yaml.safe_load((SHARE / "config" / f"{robot}.yaml").read_text())
    nodes = {"/**": COMMON_PARAMETERS, **{f"/**/{name}": node.PARAMETERS for name, node in BRINGUP_NODES.items()},
             "/**/run_monitor": RunMonitor.PARAMETERS}
    assert set(config) <= set(nodes)
    for node_name, section in config.items():
        declared = {p.name: p.default for p in nodes[node_name]}
        for name, value in section["ros__parameters"].items():
            assert name in declared, f"{robot}.yaml: {node_name}.{name} is not declared"
            default = declared[name]
            if default is EMPTY_STRING_ARRAY:
                assert all(isinstance(x, str) for x in value), name
            elif default is EMPTY_DOUBLE_ARRAY or isinstance(default, list):
                assert all(isinstance(x, float) for x in value), name
            else:
                assert type(value) is type(default), f"{robot}.yaml: {node_name}.{name}"


def test_launch_file_arguments_reach_every_route():
    """The launch file (read from its source: `launch` is not on PyPI) takes
    namespace:= and use_sim_time:=, and leaves the robot empty by default, so
    that the nodes can take robot_description from the topic of their namespace."""
    arguments = launch_file_arguments()
    assert set(arguments) == {"robot", "robot_description_file", "config_file", "namespace", "use_sim_time", "nodes",
                              "closed_loop", "view", "record_file", "objects", "controller"}
    assert arguments["robot"][0] == "" and arguments["robot_description_file"][0] == ""
    assert arguments["namespace"][0] == "" and arguments["use_sim_time"][0] == "false"
    source = LAUNCH_FILE.read_text()
    assert '"nodes": (",".join(NODES)' in source and node_names(",".join(DEFAULT_NODES)) == list(DEFAULT_NODES)
    assert "plan(" in source and "namespace=value[\"namespace\"]" in source  # it follows the plan, namespaced


def test_launch_plan_without_a_robot_leaves_each_node_to_its_namespaces_topic():
    plans = plan(list(DEFAULT_NODES), str(CONFIG_FILE))
    assert [p.name for p in plans] == list(DEFAULT_NODES)
    for p in plans:
        assert p.parameter_files == (str(CONFIG_FILE),) and p.parameters == {} and p.remappings == ()


def test_launch_plan_of_a_closed_loop_in_a_namespace_keeps_every_name_relative():
    robot = mbs.bundled_robot("arm7")
    plans = {p.name: p for p in plan(list(DEFAULT_NODES), str(CONFIG_FILE), "arm7.yaml", robot, use_sim_time=True,
                                     closed_loop=True, namespace="robot1/")}
    for p in plans.values():
        assert p.parameter_files == (str(CONFIG_FILE), "arm7.yaml")
        assert p.parameters["robot_description_file"] == robot and p.parameters["use_sim_time"] is True
        assert ("/clock", "clock") in p.remappings  # this namespace's simulator owns its clock
        assert all(not target.startswith("/") for _, target in p.remappings)
    assert plans["simulator"].parameters["start_on_command"] is True
    assert ("~/joint_efforts", "inverse_dynamics/joint_efforts") in plans["simulator"].remappings
    root = plan(["simulator", "inverse_dynamics"], str(CONFIG_FILE), closed_loop=True)
    assert all(("/clock", "clock") not in p.remappings for p in root)  # the root namespace keeps /clock
    assert plan(["inverse_dynamics"], str(CONFIG_FILE), namespace="robot1")[0].remappings == ()  # no simulator


def test_launch_plan_adds_the_view_on_request_with_its_recording():
    assert VIEW_NODE not in [p.name for p in plan(list(DEFAULT_NODES), str(CONFIG_FILE))]  # never by default
    robot = mbs.bundled_robot("arm7")
    plans = {p.name: p for p in plan(["simulator"], str(CONFIG_FILE), None, robot, namespace="robot1",
                                     record_file="run.html")}
    view = plans[VIEW_NODE]
    assert view.executable == VIEW_EXECUTABLE and ("/clock", "clock") in view.remappings
    assert view.parameters == {"robot_description_file": robot, "record_file": str(Path("run.html").resolve())}
    assert plan(["simulator"], str(CONFIG_FILE), view=True)[-1].parameters == {}


def test_launch_plan_adds_the_whole_body_controller_and_its_references_beside_the_simulator():
    """controller 'wbc': the controller and its references after the chosen
    nodes, with the same files and robot, in the namespace (its simulator's
    clock); refused without the simulator, beside the closed loop, unknown."""
    robot = mbs.bundled_robot("quadruped")
    plans = plan(["simulator"], str(CONFIG_FILE), "quadruped_wbc.yaml", robot, namespace="robot1", controller="wbc")
    assert [(p.name, p.executable) for p in plans] == [("simulator", "simulator_node"), *CONTROLLER_NODES.items()]
    for p in plans:
        assert p.parameter_files == (str(CONFIG_FILE), "quadruped_wbc.yaml")
        assert p.parameters == {"robot_description_file": robot} and p.remappings == (("/clock", "clock"),)
    for nodes, closed_loop, controller, message in (
            (["inverse_dynamics"], False, "wbc", "controller wbc drives the simulator: it needs the simulator node"),
            (["simulator", "inverse_dynamics"], True, "wbc", "controller wbc and closed_loop both command"),
            (["simulator"], False, "mpc", "controller: unknown 'mpc'; choose from wbc")):
        with pytest.raises(PlanError, match=message):
            plan(nodes, str(CONFIG_FILE), closed_loop=closed_loop, controller=controller)


def test_the_objects_config_puts_its_objects_beside_the_arm_where_they_rest():
    """--objects (objects.yaml, after the robot's config, the simulator's
    only): its URDFs resolve through package:// where pip installed them, and
    beside the bundled arm at its initial pose they start clear of it and of
    each other and rest (0.5 s: none moves 0.1 mm)."""
    plans = plan(["simulator", "inverse_dynamics"], str(CONFIG_FILE), "arm7.yaml",
                 objects_config_file=str(SHARE / "config" / "objects.yaml"))
    assert plans[0].parameter_files == (str(CONFIG_FILE), "arm7.yaml", str(SHARE / "config" / "objects.yaml"))
    with pytest.raises(PlanError, match="objects are the simulator's"):
        plan(["inverse_dynamics"], str(CONFIG_FILE), objects_config_file="objects.yaml")
    from mbs_dynamics.contact.geometry import collision_contacts, collision_shapes
    from mbs_dynamics.simulation.scene import Scene, SceneSettings, scene_objects

    settings = {**yaml.safe_load((SHARE / "config" / "arm7.yaml").read_text())["/**/simulator"]["ros__parameters"],
                **yaml.safe_load((SHARE / "config" / "objects.yaml").read_text())["/**/simulator"]["ros__parameters"]}
    objects = scene_objects(settings["world_objects"], settings["world_object_files"], settings["world_object_poses"])
    path = mbs.bundled_robot("arm7")
    model, xml = mbs.Model.from_urdf_file(path), Path(path).read_text()
    scene = Scene.build(model, SceneSettings(initial_joint_names=settings["initial_joint_names"],
                                             initial_joint_positions=settings["initial_joint_positions"],
                                             position_joints=model.joint_names),
                        collision_contacts(model, xml), collision_shapes(model, xml))
    simulation, said = scene.simulation(objects)
    assert said == "" and simulation.objects == ("cube1", "cube2", "cube3", "ball", "can")
    start = {name: simulation.object_state(name)[0][:3] for name in simulation.objects}
    simulation.set_targets(positions=simulation.q)
    simulation.step(steps=500)
    assert max(np.abs(simulation.object_state(name)[0][:3] - p).max() for name, p in start.items()) < 1e-4


@pytest.mark.parametrize("nodes, namespace, closed_loop, message", [
    (["planner"], "/", False, "nodes: unknown planner"),
    (["inverse_dynamics"], "/", True, "closed_loop needs the simulator and inverse_dynamics nodes"),
    (["simulator"], "1robot", False, "namespace '1robot' is not a valid ROS namespace"),
    (["simulator"], "a//b", False, "is not a valid ROS namespace"),
])
def test_launch_plan_refuses_what_cannot_start(nodes, namespace, closed_loop, message):
    with pytest.raises(PlanError, match=message):
        plan(nodes, str(CONFIG_FILE), closed_loop=closed_loop, namespace=namespace)
    assert normalized_namespace("/robot1/") == "/robot1" and normalized_namespace("") == "/"


@pytest.mark.skipif(shutil.which("ros2") is None or importlib.util.find_spec("launch_ros") is None,
                    reason="no `ros2 launch` here (ROS 2 from pip has no launch_ros)")
def test_ros2_launch_starts_the_nodes(start_process, test_node):
    launch = start_process(["ros2", "launch", "mbs_dynamics", "mbs_dynamics.launch.py", "robot:=arm7",
                            "nodes:=inverse_dynamics,dynamics_server", "namespace:=robot1"])
    launch.wait_for("robot 'mbs_arm7' from file", count=2, timeout=60)
    wait_for_node(test_node, "inverse_dynamics")
    assert ("dynamics_server", "/robot1") in test_node.get_node_names_and_namespaces()
    assert launch.interrupt() == 0


def test_readme_lists_every_node_executable_and_parameter():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for name, node_class in {**BRINGUP_NODES, "run_monitor": RunMonitor}.items():
        section = readme.split(f"`{name}`:\n", 1)
        assert len(section) == 2, f"README has no parameter table for {name}"
        table = section[1].strip().split("\n\n", 1)[0]
        for parameter in node_class.PARAMETERS:
            assert f"| `{parameter.name}` |" in table, f"README: {name}.{parameter.name} missing"
    common = readme.split("Every node:\n", 1)[1].strip().split("\n\n", 1)[0]
    for parameter in COMMON_PARAMETERS:
        assert f"| `{parameter.name}` |" in common, f"README: {parameter.name} missing"
    for script in console_scripts():
        assert f"`{script}`" in readme, f"README does not name {script}"


def test_readme_core_example_runs():
    """The README's Python example of the core runs as printed."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    example = readme.split("## The dynamics core (Python, no ROS needed)")[1].split("```python")[1].split("```")[0]
    namespace = {}
    exec(compile(example, "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["v_plus"].shape == (namespace["model"].nv,)
    assert len(namespace["forces"]) == 4
