"""Node executables in their own processes, and what the tests ask of them."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from oracles import robot_path

BIN = Path(sys.executable).parent


def executable(name: str) -> str:
    """A console script of this environment."""
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        assert found, f"console script {name} is not installed"
        return found
    return str(path)


def wait_for_node(test_node, name: str, timeout: float = 60.0) -> None:
    """The node is in the ROS graph (discovered over DDS)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if name in test_node.get_node_names():
            return
        time.sleep(0.1)
    raise AssertionError(f"node {name} not discovered; graph has {test_node.get_node_names()}")


class NodeProcess:
    """A node executable in its own process, its output collected line by line."""

    def __init__(self, command: list[str]):
        self.command = command
        self.lines: list[str] = []
        self._changed = threading.Condition()
        # a session of its own: a signal the process sends to its process group never reaches pytest
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, start_new_session=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 60.0, count: int = 1) -> list[str]:
        """The first `count` output lines matching `pattern`; fails after `timeout` s."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                matches = [line for line in self.lines if regex.search(line)]
                if len(matches) >= count:
                    return matches[:count]
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.process.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"{count} line(s) matching {pattern!r} not seen from {' '.join(self.command)} "
                        f"(exit code {self.process.poll()}); output:\n" + "\n".join(self.lines)
                    )
                self._changed.wait(min(remaining, 0.2))

    def wait_exit(self, timeout: float = 60.0) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{' '.join(self.command)} did not exit; output:\n{self.output}") from None
        self._reader.join(5)
        return code

    def interrupt(self, timeout: float = 60.0) -> int:
        """Ctrl-C, as a person stops a node; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.wait_exit(timeout)

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def node_status(message, name: str) -> dict | None:
    """The values of the node `name`'s (fully qualified) status in a /diagnostics message, if there."""
    for status in message.status:
        if status.name.startswith(f"{name}: "):
            return {kv.key: kv.value for kv in status.values}
    return None


def set_parameters(test_node, node_name: str, **values) -> dict:
    """Set parameters of the node `node_name` (fully qualified) one request
    each, through its parameter service; {name: (successful, reason)}."""
    import rclpy
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    client = test_node.create_client(SetParameters, f"{node_name}/set_parameters")
    try:
        assert client.wait_for_service(timeout_sec=60.0), f"{node_name}/set_parameters not available"
        results = {}
        for name, value in values.items():
            future = client.call_async(SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()]))
            rclpy.spin_until_future_complete(test_node, future, timeout_sec=60.0)
            assert future.done(), f"{node_name}/set_parameters did not answer"
            result = future.result().results[0]
            results[name] = (result.successful, result.reason)
        return results
    finally:
        test_node.destroy_client(client)


class Exchange:
    """Publishes joint_states (and odom, ~/reference) to one inverse dynamics
    node and collects what it publishes, by stamp."""

    def __init__(self, test_node, name: str):
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        from mbs_dynamics.ros.inverse_dynamics_node import COMMAND_QOS, STREAM_QOS
        from mbs_dynamics_interfaces.msg import CentroidalMomentum
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        from trajectory_msgs.msg import JointTrajectory

        self.node, self.name = test_node, name
        # joint_states and odom are the node's relative topics: /joint_states, /odom
        self.joint_states = test_node.create_publisher(JointState, "/joint_states", STREAM_QOS)
        self.odometry = test_node.create_publisher(Odometry, "/odom", STREAM_QOS)
        self.reference = test_node.create_publisher(JointTrajectory, f"/{name}/reference", COMMAND_QOS)
        self.received = {"efforts": {}, "command": [], "momentum": {}, "wrench": {}, "diagnostics": []}
        received = self.received
        test_node.create_subscription(JointState, f"/{name}/joint_efforts",
                                      lambda m: received["efforts"].__setitem__(stamp_key(m), m), COMMAND_QOS)
        test_node.create_subscription(Float64MultiArray, f"/{name}/effort_command",
                                      lambda m: received["command"].append(m), COMMAND_QOS)
        test_node.create_subscription(CentroidalMomentum, f"/{name}/centroidal_momentum",
                                      lambda m: received["momentum"].__setitem__(stamp_key(m), m), COMMAND_QOS)
        test_node.create_subscription(WrenchStamped, f"/{name}/base_wrench",
                                      lambda m: received["wrench"].__setitem__(stamp_key(m), m), COMMAND_QOS)
        test_node.create_subscription(DiagnosticArray, "/diagnostics",
                                      lambda m: received["diagnostics"].append(m), 10)
        self.messages = {"JointState": JointState, "Odometry": Odometry, "JointTrajectory": JointTrajectory}

    def wait_connected(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.joint_states.get_subscription_count() and all(
                    self.node.count_publishers(f"/{self.name}/{topic}")
                    for topic in ("joint_efforts", "effort_command", "centroidal_momentum")):
                self.spin(0.5)  # let the node's publishers match our subscriptions, too
                return
            self.spin(0.05)
        raise AssertionError(f"{self.name} did not connect")

    def spin(self, seconds: float):
        import rclpy

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.01)

    def joint_state(self, names, positions, velocities, stamp: float):
        message = self.messages["JointState"]()
        message.header.stamp.sec, message.header.stamp.nanosec = int(stamp), int(round((stamp % 1) * 1e9))
        message.name, message.position, message.velocity = list(names), list(positions), list(velocities)
        return message

    def send_odometry(self, q, v, frame_id: str = "odom"):
        message = self.messages["Odometry"]()
        message.header.frame_id, message.child_frame_id = frame_id, "base_link"
        pose, twist = message.pose.pose, message.twist.twist
        pose.position.x, pose.position.y, pose.position.z = q[:3]
        pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = q[3:7]
        twist.angular.x, twist.angular.y, twist.angular.z = v[:3]
        twist.linear.x, twist.linear.y, twist.linear.z = v[3:6]
        self.odometry.publish(message)

    def ask(self, message, timeout: float = 30.0):
        """Publish joint_states and wait for the efforts with its stamp."""
        key = stamp_key(message)
        self.joint_states.publish(message)
        deadline = time.monotonic() + timeout
        while key not in self.received["efforts"] and time.monotonic() < deadline:
            self.spin(0.005)
        return self.received["efforts"].get(key)

    def wait_for(self, channel: str, key, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while key not in self.received[channel] and time.monotonic() < deadline:
            self.spin(0.005)
        return self.received[channel][key]

    def counts(self, timeout: float = 30.0) -> dict:
        """The node's diagnostics values, from a status it published after
        this call: one published before may still wait in the subscription's
        queue (`ask` returns on the efforts, leaving the rest untaken) and
        would say what was counted before. A node on sim time stamps far from
        the wall clock: its statuses are taken as they come."""
        since = time.time()
        self.received["diagnostics"].clear()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.spin(0.05)
            for array in self.received["diagnostics"]:
                stamp = array.header.stamp.sec + 1e-9 * array.header.stamp.nanosec
                if since - 86400.0 < stamp < since:
                    continue
                for status in array.status:
                    if status.name.startswith(f"/{self.name}:"):  # the fully qualified node name
                        return {kv.key: kv.value for kv in status.values}
        raise AssertionError("no diagnostics")


def stamp_key(message):
    return (message.header.stamp.sec, message.header.stamp.nanosec)


def publish_robot_description(node, xml: str):
    """A latched robot_description, as robot_state_publisher offers it."""
    from mbs_dynamics.ros.robot_node import ROBOT_DESCRIPTION_QOS
    from std_msgs.msg import String

    publisher = node.create_publisher(String, "/robot_description", ROBOT_DESCRIPTION_QOS)
    publisher.publish(String(data=xml))
    return publisher


# --- the inverse dynamics node ------------------------------------------------

SOLES = ["left_sole_link", "right_sole_link"]


def joint_values(model, q, v):
    """(names, positions, velocities) of the model's joints, as a JointState carries them."""
    names = [name for name in model.joint_names if name != "root_joint"]
    return (names, [q[model.q_index(n)] for n in names], [v[model.v_index(n)] for n in names])


def start_inverse_dynamics(start_process, test_node, robot, name, *parameters, source="file"):
    """The node in its own process, given the robot by file (or, source='topic',
    by whoever publishes /robot_description)."""
    given = ["-p", f"robot_description_file:={robot_path(robot)}"] if source == "file" else []
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-r", f"__node:={name}", *given,
                          "-p", "diagnostics_period:=0.2", *[a for p in parameters for a in ("-p", p)]])
    node.wait_for(f"\\[{name}\\]: inverse dynamics of")
    wait_for_node(test_node, name)
    exchange = Exchange(test_node, name)
    exchange.wait_connected()
    return node, exchange


def efforts_by_name(message) -> dict:
    return dict(zip(message.name, message.effort, strict=True))


def stamp_asker(exchange, names, positions, velocities, timeout: float):
    """ask(stamp, timeout=timeout): the node's efforts for the joint state
    stamped `stamp` (s), None when none come within the timeout."""

    def ask(stamp, timeout=timeout):
        return exchange.ask(exchange.joint_state(names, positions, velocities, stamp), timeout=timeout)

    return ask


def spin_until(test_node, condition, timeout: float, what: str) -> None:
    """Spin test_node until condition() holds; AssertionError saying `what` after timeout s."""
    import rclpy

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        rclpy.spin_once(test_node, timeout_sec=0.05)


def fifo_threads(pid: int) -> list[tuple[str, int]]:
    """(name, priority) of the threads of process `pid` that run SCHED_FIFO."""
    threads = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if os.sched_getscheduler(int(task.name)) == os.SCHED_FIFO:
                threads.append((task.joinpath("comm").read_text().strip(),
                                os.sched_getparam(int(task.name)).sched_priority))
        except (ProcessLookupError, FileNotFoundError):  # a thread that ended meanwhile
            pass
    return threads


def check_realtime_threads(node, priority: int) -> None:
    """After a node with realtime_priority `priority` served its first
    joint_states: it said it serves them SCHED_FIFO at that priority, and
    then exactly one thread of its own and Fast DDS's (dds.*) run so, no
    other (numba's workers never); or it said why it may not, and none do."""
    said = node.wait_for(f"serving joint_states at real-time priority {priority} \\(SCHED_FIFO\\)|realtime_priority "
                         f"{priority}: not permitted \\(.+\\): needs root, CAP_SYS_NICE or an rtprio limit")
    threads = fifo_threads(node.process.pid)
    if "serving joint_states" in said[0]:
        assert {p for _, p in threads} == {priority}, threads
        assert len([name for name, _ in threads if not name.startswith("dds.")]) == 1, threads
        assert any(name.startswith("dds.") for name, _ in threads), threads
    else:
        assert threads == []
