"""The launch file and the config: every executable the launch file names is a
declared console script, every config file it names is installed, the config's
defaults are the nodes' own; and, where ROS 2 has `ros2 launch`, the launch
file starts the nodes."""
from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import math
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from ros_processes import wait_for_node

from mbs_dynamics.ros.bringup import NODES as BRINGUP_NODES
from mbs_dynamics.ros.bringup import share_directory
from mbs_dynamics.ros.dynamics_node import COMMON_PARAMETERS, EMPTY_DOUBLE_ARRAY, EMPTY_STRING_ARRAY
from mbs_dynamics.ros.run_monitor import RunMonitor
from mbs_dynamics.robots import BUNDLED_ROBOTS

SHARE = Path(share_directory())
LAUNCH_FILE = SHARE / "launch" / "mbs_dynamics.launch.py"
CONFIG_FILE = SHARE / "config" / "mbs_dynamics.yaml"


def console_scripts() -> dict[str, str]:
    """Console scripts declared by the installed mbs_dynamics distribution."""
    entry_points = importlib.metadata.distribution("mbs_dynamics").entry_points
    return {e.name: e.value for e in entry_points if e.group == "console_scripts"}


def launch_file_strings():
    """The launch file's NODES table and every string constant in it."""
    tree = ast.parse(LAUNCH_FILE.read_text())
    nodes = None
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and getattr(statement.targets[0], "id", None) == "NODES":
            nodes = ast.literal_eval(statement.value)
    constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return nodes, constants


def test_console_scripts_are_declared():
    scripts = console_scripts()
    assert set(scripts) == {"inverse_dynamics_node", "dynamics_server_node", "simulator_node",
                            "mbs_dynamics_bringup"}
    for script in scripts:
        assert (Path(sys.executable).parent / script).exists(), script


def test_launch_file_names_declared_executables_and_installed_configs():
    nodes, constants = launch_file_strings()
    assert nodes is not None, "the launch file has no NODES table"
    assert set(nodes) == set(BRINGUP_NODES), "the launch file and the bringup start different nodes"
    scripts = console_scripts()
    for name, executable in nodes.items():
        assert executable in scripts, f"launch file names {executable}, which is not a console script"
        module = scripts[executable].split(":")[0]
        assert module.endswith(f"{name}_node"), (name, executable)
    configs = [c for c in constants if c.endswith((".yaml", ".yml")) and not c.startswith(".")]  # not f"{robot}.yaml"
    assert configs, "the launch file names no config file"
    for config in [*configs, *(f"{robot}.yaml" for robot in BUNDLED_ROBOTS)]:
        assert (SHARE / "config" / config).is_file(), f"config/{config} is not installed"
    assert "package.xml" in os.listdir(SHARE)
    ament_marker = SHARE.parent / "ament_index" / "resource_index" / "packages" / "mbs_dynamics"
    assert ament_marker.is_file()


def test_config_defaults_are_the_nodes_own():
    config = yaml.safe_load(CONFIG_FILE.read_text())
    assert set(config) == {"/**", *BRINGUP_NODES}

    def defaults(specs):
        return {p.name: p.default for p in specs}

    def same(a, b):
        if isinstance(a, float) or isinstance(b, float):
            return math.isclose(a, b, rel_tol=0, abs_tol=0)
        return a == b

    common = defaults(COMMON_PARAMETERS)
    written = config["/**"]["ros__parameters"]
    assert set(written) == set(common)
    for name, value in written.items():
        assert same(value, common[name]), name
    for node_name, node_class in BRINGUP_NODES.items():
        declared = defaults(node_class.PARAMETERS)
        written = config[node_name]["ros__parameters"]
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


@pytest.mark.parametrize("robot", BUNDLED_ROBOTS)
def test_robot_configs_set_declared_parameters(robot):
    """config/<robot>.yaml, read after the main config for a bundled robot,
    sets parameters the nodes declare, with values of the declared types."""
    config = yaml.safe_load((SHARE / "config" / f"{robot}.yaml").read_text())
    nodes = {"/**": COMMON_PARAMETERS, **{name: node.PARAMETERS for name, node in BRINGUP_NODES.items()},
             "run_monitor": RunMonitor.PARAMETERS}
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


@pytest.mark.skipif(shutil.which("ros2") is None or importlib.util.find_spec("launch_ros") is None,
                    reason="no `ros2 launch` here (ROS 2 from pip has no launch_ros)")
def test_ros2_launch_starts_the_nodes(start_process, test_node):
    launch = start_process(["ros2", "launch", "mbs_dynamics", "mbs_dynamics.launch.py",
                            "nodes:=inverse_dynamics,dynamics_server"])
    launch.wait_for("robot 'mbs_arm7' from file", count=2, timeout=60)
    wait_for_node(test_node, "inverse_dynamics")
    wait_for_node(test_node, "dynamics_server")
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
