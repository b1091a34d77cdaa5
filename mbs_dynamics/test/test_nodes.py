"""The nodes over real DDS: each starts from its own executable and from the
bringup, gets robot_description through each of its three routes, says it is
waiting, and stops with a clear message (exit code 1) on an unusable URDF."""
from __future__ import annotations

import re
import time

import mbs_dynamics as mbs
import pytest
import yaml

from ros_processes import executable, publish_robot_description, wait_for_node

NODES = {  # default node name -> executable
    "inverse_dynamics": "inverse_dynamics_node",
    "dynamics_server": "dynamics_server_node",
    "simulator": "simulator_node",
}
ROUTES = ("parameter", "file", "topic")

ARM = mbs.bundled_robot("arm7")
QUADRUPED = mbs.bundled_robot("quadruped")
ARM_JOINTS = "7 moving joints: joint1 \\(revolute\\), joint2 .* joint7 \\(revolute\\); 2 fixed joints"


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def params_file(tmp_path, node_names, **parameters) -> str:
    """A ROS 2 params file giving `parameters` to the named nodes."""
    path = tmp_path / "params.yaml"
    # A copy per node: YAML aliases (what safe_dump makes of a shared dict) are refused by rcl.
    path.write_text(yaml.safe_dump({name: {"ros__parameters": dict(parameters)} for name in node_names}))
    return str(path)


def route_arguments(route: str, node_names, xml_path: str, tmp_path, test_node) -> list[str]:
    """--ros-args that hand the URDF of xml_path to the nodes by `route`."""
    if route == "parameter":  # the XML itself, through a params file (a -p would break on ': ')
        return ["--params-file", params_file(tmp_path, node_names, robot_description=read(xml_path))]
    if route == "file":
        return ["-p", f"robot_description_file:={xml_path}"]
    publish_robot_description(test_node, read(xml_path))
    return []


def get_parameters(test_node, node_name: str, names: list[str]) -> dict:
    """Ask a node for parameter values through its parameter service."""
    import rclpy
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python

    client = test_node.create_client(GetParameters, f"/{node_name}/get_parameters")
    try:
        assert client.wait_for_service(timeout_sec=60.0), f"/{node_name}/get_parameters not available"
        future = client.call_async(GetParameters.Request(names=names))
        rclpy.spin_until_future_complete(test_node, future, timeout_sec=60.0)
        assert future.done(), f"/{node_name}/get_parameters did not answer"
        return {n: parameter_value_to_python(v) for n, v in zip(names, future.result().values, strict=True)}
    finally:
        test_node.destroy_client(client)


# --- each node from its own executable ------------------------------------


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", sorted(NODES))
def test_node_gets_the_robot_by_each_route(name, route, start_process, test_node, tmp_path):
    arguments = route_arguments(route, [name], ARM, tmp_path, test_node)
    node = start_process([executable(NODES[name]), "--ros-args", *arguments])
    if route == "topic":
        node.wait_for(f"\\[{name}\\]: waiting for the robot description on /robot_description")
    source = {"parameter": "parameter robot_description", "file": f"file {ARM}",
              "topic": "topic /robot_description"}[route]
    node.wait_for(f"\\[{name}\\]: robot 'mbs_arm7' from {source}: 10 links from root 'base_link', {ARM_JOINTS}")
    wait_for_node(test_node, name)
    values = get_parameters(test_node, name, ["robot_description_file", "floating_base", "mimic"])
    assert values == {"robot_description_file": ARM if route == "file" else "",
                      "floating_base": False, "mimic": "coupled"}
    assert node.interrupt() == 0, node.output


def test_node_name_and_parameters_can_be_set_from_the_command_line(start_process, test_node):
    node = start_process([executable("simulator_node"), "--ros-args", "-r", "__node:=sim2",
                          "-p", f"robot_description_file:={QUADRUPED}", "-p", "floating_base:=true",
                          "-p", "dt:=0.002"])
    node.wait_for("\\[sim2\\]: robot 'mbs_quadruped' .* 12 moving joints")
    wait_for_node(test_node, "sim2")
    assert get_parameters(test_node, "sim2", ["floating_base", "dt", "integrator"]) == {
        "floating_base": True, "dt": 0.002, "integrator": "rk4"}
    assert node.interrupt() == 0


def test_parameter_takes_precedence_over_file_and_file_over_topic(start_process, test_node, tmp_path):
    publish_robot_description(test_node, read(QUADRUPED))
    both = params_file(tmp_path, ["inverse_dynamics"], robot_description=read(ARM),
                       robot_description_file=QUADRUPED)
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "--params-file", both])
    node.wait_for("robot 'mbs_arm7' from parameter robot_description")
    assert node.interrupt() == 0
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-p",
                          f"robot_description_file:={ARM}"])
    node.wait_for(f"robot 'mbs_arm7' from file {ARM}")
    assert "waiting" not in node.output
    assert node.interrupt() == 0


# --- unusable URDFs: a clear message, exit code 1 --------------------------

BROKEN = {
    "parameter": ("<robot name='twin'><link name='a'/><link name='b'/></robot>",
                  "unusable robot description from parameter robot_description: robot 'twin' has 2 root "
                  "links \\(a, b\\)"),
    "file": ("<robot name='r'><link name='a'/><link name='b'/><joint name='elbow' type='ball'>"
             "<parent link='a'/><child link='b'/></joint></robot>",
             "unusable robot description from file .*broken.urdf: joint 'elbow' has unknown type 'ball'"),
    "topic": ("this is not a URDF", "unusable robot description from topic /robot_description: "
              "the URDF is not XML"),
}


@pytest.mark.parametrize("route", ROUTES)
def test_unusable_urdf_stops_the_node_with_a_clear_message(route, start_process, test_node, tmp_path):
    xml, message = BROKEN[route]
    broken = tmp_path / "broken.urdf"
    broken.write_text(xml)
    arguments = route_arguments(route, ["dynamics_server"], str(broken), tmp_path, test_node)
    node = start_process([executable("dynamics_server_node"), "--ros-args", *arguments])
    node.wait_for(f"FATAL.*\\[dynamics_server\\]: {message}.*; stopping")
    assert node.wait_exit() == 1


def test_missing_urdf_file_stops_the_node(start_process):
    node = start_process([executable("simulator_node"), "--ros-args", "-p",
                          "robot_description_file:=/no/such/robot.urdf"])
    node.wait_for("cannot read URDF file /no/such/robot.urdf: No such file or directory; stopping")
    assert node.wait_exit() == 1


def test_waiting_for_the_topic_gives_up_after_the_timeout(start_process):
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-r",
                          "robot_description:=/nobody_publishes_this", "-p", "robot_description_timeout:=1.0"])
    node.wait_for("waiting for the robot description on /nobody_publishes_this")
    node.wait_for("no robot description arrived on /nobody_publishes_this within 1 s; stopping")
    assert node.wait_exit() == 1


# --- the bringup: the chosen nodes in one process ---------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_bringup_starts_all_nodes_by_each_route(route, start_process, test_node, tmp_path):
    arguments = route_arguments(route, list(NODES), QUADRUPED, tmp_path, test_node)
    if route == "file":  # the bringup's own option for it
        arguments, options = [], ["--robot-description-file", QUADRUPED]
    else:
        options = []
    bringup = start_process([executable("mbs_dynamics_bringup"), *options, "--ros-args", *arguments])
    lines = bringup.wait_for("robot 'mbs_quadruped' from .*: 17 links from root 'base_link', 12 moving joints",
                             count=3)
    assert {line.split("[")[3].split("]")[0] for line in lines} == set(NODES)
    for name in NODES:
        wait_for_node(test_node, name)
    assert bringup.interrupt() == 0, bringup.output


def test_bringup_starts_the_chosen_nodes_on_a_bundled_robot(start_process, test_node):
    bringup = start_process([executable("mbs_dynamics_bringup"), "--robot", "arm7",
                             "--nodes", "simulator,inverse_dynamics", "--use-sim-time"])
    bringup.wait_for("robot 'mbs_arm7'", count=2)
    wait_for_node(test_node, "simulator")
    wait_for_node(test_node, "inverse_dynamics")
    assert get_parameters(test_node, "simulator", ["use_sim_time", "robot_description_file", "dt"]) == {
        "use_sim_time": True, "robot_description_file": ARM, "dt": 0.001}
    time.sleep(0.5)
    assert "dynamics_server" not in test_node.get_node_names()
    assert "[dynamics_server]" not in bringup.output
    assert bringup.interrupt() == 0


def test_bringup_reads_its_config(start_process, test_node, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "/**": {"ros__parameters": {"robot_description_file": ARM}},
        "dynamics_server": {"ros__parameters": {"max_trajectory_points": 5000}},
    }))
    bringup = start_process([executable("mbs_dynamics_bringup"), "--config", str(config),
                             "--nodes", "dynamics_server"])
    bringup.wait_for("\\[dynamics_server\\]: robot 'mbs_arm7' from file")
    wait_for_node(test_node, "dynamics_server")
    assert get_parameters(test_node, "dynamics_server", ["max_trajectory_points", "quaternion_tolerance"]) == {
        "max_trajectory_points": 5000, "quaternion_tolerance": 0.001}
    assert bringup.interrupt() == 0


def test_bringup_stops_on_an_unusable_urdf(start_process, tmp_path):
    broken = tmp_path / "broken.urdf"
    broken.write_text(BROKEN["file"][0])
    bringup = start_process([executable("mbs_dynamics_bringup"), "--robot-description-file", str(broken)])
    bringup.wait_for("FATAL.*joint 'elbow' has unknown type 'ball'.*; stopping")
    assert bringup.wait_exit() == 1


@pytest.mark.parametrize("arguments, message", [
    (["--nodes", "planner"], "--nodes: unknown planner"),
    (["--config", "/no/such.yaml"], "--config: no such file /no/such.yaml"),
    (["--robot", "hexapod"], "invalid choice: 'hexapod'"),
])
def test_bringup_refuses_bad_arguments(arguments, message, start_process):
    bringup = start_process([executable("mbs_dynamics_bringup"), *arguments])
    assert bringup.wait_exit() == 2
    assert message in bringup.output


def test_the_readme_run_holds_the_arm_then_lets_it_swing_and_plots(start_process, tmp_path):
    """./dev run's bringup: the closed loop on the bundled arm, with the run
    monitor's summaries and plot, at twice real time to be quick. Held, the
    arm stands still (efforts unchanged, no kinetic energy, the dynamics server
    finds no acceleration); pushed at 3 s, it moves; the run ends by itself."""
    import xml.etree.ElementTree as ElementTree

    plot = tmp_path / "run.svg"
    bringup = start_process([executable("mbs_dynamics_bringup"), "--robot", "arm7", "--closed-loop",
                             "--duration", "5", "--summary-period", "0.5", "--plot", str(plot),
                             "--ros-args", "-p", "simulator:real_time_factor:=2.0"])
    assert bringup.wait_exit(60) == 0, bringup.output
    output = bringup.output
    assert "first effort command: running from t = 0 s" in output
    summaries = [block for block in output.split("[run_monitor]: t = ")[1:] if "efforts (N m, N)" in block]
    assert len(summaries) >= 4, output

    def time_of(summary):
        return float(summary.split(" s")[0])

    def line(summary, start):
        return next(text for text in summary.splitlines() if text.strip().startswith(start))

    # from the first step on (a summary at t = 0 shows the state published while waiting for efforts:
    # zero efforts; the first summary came that early once, the machine at load average 13)
    held = [s for s in summaries if 0.0 < time_of(s) < 2.9]
    moved = [s for s in summaries if time_of(s) > 3.1]
    assert len(held) >= 2 and moved, output
    assert len({line(s, "efforts") for s in held}) == 1, held  # the same torques: nothing moved
    assert all("(kinetic 0.0000 J)" in s.splitlines()[0] for s in held)
    # the server's answer for an earlier summary's state and efforts (at its t: on a busy machine the first
    # answer, for t = 0 before the first step, came two summaries late)
    answers = [re.search(r"forward dynamics of the state and efforts at t = ([\d.]+) s, largest \|acceleration\| "
                         r"(\S+)", s) for s in summaries]
    server = [float(found.group(2)) for found in answers if found and 0.0 < float(found.group(1)) < 2.9]
    assert server and max(server) < 1e-9, output  # the torques balance the arm exactly
    assert "t = 3.00" in output.split("push, {'joint1': 0.8, 'joint3': -0.6}")[0].rsplit("\n", 1)[-1]
    assert any("(kinetic 0.0000 J)" not in s.splitlines()[0] for s in moved), output
    assert "run over after 5 s of simulated time" in output and "applying zero effort" not in output
    svg = ElementTree.parse(plot).getroot()
    texts = [element.text for element in svg.iter("{http://www.w3.org/2000/svg}text")]
    for title in ("joint positions", "joint efforts", "energy, change from the start", "centroidal momentum"):
        assert title in texts
    lines = list(svg.iter("{http://www.w3.org/2000/svg}polyline"))
    assert len(lines) == 7 + 7 + 3 + 6
    assert all(len(line.get("points").split()) > 400 for line in lines)  # 100 Hz for 5 s


# --- deployment: namespaces and several robots in one domain ------------------------------------------


def test_two_closed_loops_run_side_by_side_in_namespaces(start_process, test_node):
    """`./dev run` under --ros-args -r __ns:=/robot1 once stayed at t = 0 (the
    loop was remapped to /inverse_dynamics/joint_efforts, the monitor watched
    /inverse_dynamics and /dynamics_server); two robots side by side both hung.
    Now both run to the end, each on its own topics and simulated clock, and
    /diagnostics tells them apart by their fully qualified names."""
    from diagnostic_msgs.msg import DiagnosticArray
    from rosgraph_msgs.msg import Clock

    statuses, clocks = set(), {"/robot1/clock": [], "/robot2/clock": [], "/clock": []}
    test_node.create_subscription(DiagnosticArray, "/diagnostics",
                                  lambda m: statuses.update(s.name for s in m.status), 50)
    for topic, received in clocks.items():
        test_node.create_subscription(Clock, topic, received.append, 10)
    runs = {namespace: start_process([
        executable("mbs_dynamics_bringup"), "--robot", "arm7", "--closed-loop", "--duration", "6",
        "--summary-period", "0.5", "--ros-args", "-r", f"__ns:=/{namespace}", "-p", "simulator:real_time_factor:=1.5",
        "-p", "diagnostics_period:=0.2"]) for namespace in ("robot1", "robot2")}
    import rclpy

    deadline = time.monotonic() + 90
    while any(run.process.poll() is None for run in runs.values()) and time.monotonic() < deadline:
        rclpy.spin_once(test_node, timeout_sec=0.05)
    for namespace, run in runs.items():
        assert run.wait_exit(60) == 0, run.output
        output = run.output
        assert f"[{namespace}.simulator]: first effort command: running from t = 0 s" in output, output
        # -p simulator:...:= reached the simulator in its namespace (rcl matches it only against /simulator)
        assert "(rk4), real-time factor 1.5, waiting for the first effort command" in output
        assert f"[{namespace}.run_monitor]: run over after 6 s of simulated time" in output
        summaries = [line for line in output.splitlines() if f"[{namespace}.run_monitor]: t = " in line]
        assert len(summaries) >= 3, output
        assert "dynamics server: forward dynamics of the state and efforts at t" in output and "CoM (" in output
        # the commands flowed: most summaries show the efforts holding the arm (a controller starved on a busy
        # machine makes the simulator apply zero effort until commands arrive again: its command_timeout)
        efforts = re.findall(r"efforts \(N m, N\):((?: \S+ [+-][\d.]+)+)", output)
        held = [line for line in efforts if any(abs(float(value)) > 0.005 for value in line.split()[1::2])]
        assert len(efforts) >= 3 and len(held) > len(efforts) / 2, output
        for node in ("simulator", "inverse_dynamics", "dynamics_server"):
            assert any(status.startswith(f"/{namespace}/{node}: ") for status in statuses), (namespace, statuses)
    assert clocks["/robot1/clock"] and clocks["/robot2/clock"] and not clocks["/clock"]


def test_nodes_in_a_namespace_take_the_robot_description_of_their_namespace(start_process, test_node):
    """robot_state_publisher publishes robot_description in the robot's
    namespace: the nodes there read it, each robot its own."""
    from mbs_dynamics.ros.robot_node import ROBOT_DESCRIPTION_QOS
    from std_msgs.msg import String

    publishers = []
    for namespace, path in (("arm_ns", ARM), ("quad_ns", QUADRUPED)):
        publisher = test_node.create_publisher(String, f"/{namespace}/robot_description", ROBOT_DESCRIPTION_QOS)
        publisher.publish(String(data=read(path)))
        publishers.append(publisher)
    arm = start_process([executable("mbs_dynamics_bringup"), "--nodes", "dynamics_server", "--namespace", "arm_ns"])
    quadruped = start_process([executable("inverse_dynamics_node"), "--ros-args", "-r", "__ns:=/quad_ns"])
    arm.wait_for(r"\[arm_ns.dynamics_server\]: robot 'mbs_arm7' from topic /arm_ns/robot_description")
    quadruped.wait_for(r"\[quad_ns.inverse_dynamics\]: robot 'mbs_quadruped' from topic /quad_ns/robot_description")
    assert arm.interrupt() == 0 and quadruped.interrupt() == 0


def test_bringup_without_some_nodes_says_so_once_and_stops_cleanly(start_process, tmp_path):
    """With --nodes simulator the monitor repeated 'no centroidal momentum /
    no forward_dynamics' every second; Ctrl-C printed "publisher's context is
    invalid"; TALOS printed its 12 mimic-on-fixed-joint warnings from every node."""
    from oracles import robot_path

    bringup = start_process([executable("mbs_dynamics_bringup"), "--robot-description-file", robot_path("talos"),
                             "--nodes", "simulator", "--summary-period", "0.2"])
    bringup.wait_for(r"\[run_monitor\]: t = ", count=6, timeout=60)
    assert bringup.interrupt() == 0
    output = bringup.output
    assert output.count("no centroidal momentum on /inverse_dynamics/centroidal_momentum") == 1, output
    assert output.count("no /dynamics_server/forward_dynamics") == 1, output
    assert output.count("12 fixed joints carry a <mimic>, ignored") == 1, output  # two nodes built the model
    closed = start_process([executable("mbs_dynamics_bringup"), "--robot", "arm7", "--closed-loop",
                            "--summary-period", "0.3"])
    closed.wait_for(r"\[run_monitor\]: t = ", count=3, timeout=60)
    assert closed.interrupt() == 0
    for text in (closed.output, output):
        assert "context is invalid" not in text and "Traceback" not in text and "dropped" not in text, text


NODE_PARAMETERS = {  # what once killed, stalled or flooded a node, per node
    "inverse_dynamics": {"diagnostics_period": [1e10, float("inf"), float("nan"), 1e-6]},
    "dynamics_server": {"diagnostics_period": [1e10, float("inf")], "quaternion_tolerance": [2.0, float("nan")]},
    "simulator": {"diagnostics_period": [1e10, float("inf"), 1e-6], "publish_rate": [1e-10, float("inf")],
                  "real_time_factor": [1e-300, -1.0, float("nan")], "command_timeout": [float("inf")]},
}


def test_parameters_outside_their_bounds_are_refused_and_every_node_keeps_going(start_process, test_node):
    """diagnostics_period 1e10 or inf at run time once killed every node with a
    traceback; 1e-6 was accepted (294 messages/s)."""
    from diagnostic_msgs.msg import DiagnosticArray

    from ros_processes import set_parameters

    bringup = start_process([executable("mbs_dynamics_bringup"), "--robot", "arm7", "--ros-args",
                             "-p", "diagnostics_period:=0.2"])
    bringup.wait_for("robot 'mbs_arm7'", count=3)
    for name, values in NODE_PARAMETERS.items():
        wait_for_node(test_node, name)
        for parameter, bad in values.items():
            for value in bad:
                successful, reason = set_parameters(test_node, f"/{name}", **{parameter: value})[parameter]
                assert not successful and reason, (name, parameter, value)
        assert set_parameters(test_node, f"/{name}", diagnostics_period=0.1)["diagnostics_period"][0]
    statuses = []
    test_node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: statuses.extend(
        s.name for s in m.status), 50)
    import rclpy

    expected = [f"/{name}: " + {"inverse_dynamics": "inverse dynamics", "dynamics_server": "dynamics server",
                                "simulator": "simulator"}[name] for name in NODE_PARAMETERS]
    deadline = time.monotonic() + 60.0
    while min(statuses.count(status) for status in expected) < 10 and time.monotonic() < deadline:
        rclpy.spin_once(test_node, timeout_sec=0.05)
    for status in expected:
        assert statuses.count(status) >= 10, statuses
    assert bringup.process.poll() is None
    assert bringup.interrupt() == 0
    assert "Traceback" not in bringup.output


@pytest.mark.parametrize("case", ["/dev/zero", "huge mass", "root_joint floating"])
def test_urdfs_that_cannot_be_used_stop_the_node_with_a_message(case, start_process, tmp_path):
    """/dev/zero was read until memory ran out (a MemoryError traceback); a
    mass of 1e308 loaded and gave NaN; a URDF joint named root_joint gave a
    floating-base model two joints of that name."""
    path, arguments, message = "/dev/zero", [], "cannot read URDF file /dev/zero: not a regular file"
    if case == "huge mass":
        path = tmp_path / "huge.urdf"
        path.write_text("<robot name='r'><link name='a'><inertial><mass value='1e308'/>"
                        "<inertia ixx='1' iyy='1' izz='1' ixy='0' ixz='0' iyz='0'/></inertial></link></robot>")
        message = "link 'a' <inertial> mass is larger than 1e\\+12"
    elif case == "root_joint floating":
        path = tmp_path / "root_joint.urdf"
        path.write_text(ROOT_JOINT_URDF)
        arguments, message = ["-p", "floating_base:=true"], "the URDF has a joint named 'root_joint'"
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-p", f"robot_description_file:={path}",
                          *arguments])
    node.wait_for(f"FATAL.*{message}.*; stopping", timeout=30)
    assert node.wait_exit() == 1
    assert "Traceback" not in node.output


ROOT_JOINT_URDF = (
    "<robot name='r'><link name='a'/><link name='b'><inertial><mass value='1'/><origin xyz='0.5 0 0'/>"
    "<inertia ixx='0.1' iyy='0.1' izz='0.1' ixy='0' ixz='0' iyz='0'/></inertial></link>"
    "<joint name='root_joint' type='revolute'><parent link='a'/><child link='b'/><axis xyz='0 1 0'/>"
    "<limit lower='-3' upper='3' effort='100' velocity='1'/></joint></robot>")


def test_a_fixed_base_joint_named_root_joint_is_an_ordinary_joint(start_process, test_node, tmp_path):
    """On a fixed base the node once published an empty effort vector for it."""
    from ros_processes import Exchange

    path = tmp_path / "root_joint.urdf"
    path.write_text(ROOT_JOINT_URDF)
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-r", "__node:=id_root",
                          "-p", f"robot_description_file:={path}"])
    node.wait_for(r"\[id_root\]: inverse dynamics of 1 coordinates")
    exchange = Exchange(test_node, "id_root")
    exchange.wait_connected()
    reply = exchange.ask(exchange.joint_state(["root_joint"], [0.0], [0.0], 1.0))
    assert list(reply.name) == ["root_joint"] and abs(reply.effort[0] + 0.5 * 9.81) < 1e-9  # holds m g x
    assert node.interrupt() == 0
