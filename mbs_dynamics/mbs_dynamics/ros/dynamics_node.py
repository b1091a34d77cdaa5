"""What the three nodes share: getting the robot from robot_description,
parameters declared with descriptors, and a main() that inits, spins and
shuts down.

robot_description comes, in this order of precedence (DESIGN.md §7), from
the parameter ``robot_description`` (the URDF XML), the parameter
``robot_description_file`` (a path), or the latched ``robot_description``
topic (std_msgs/String, transient local, as robot_state_publisher publishes
it). The node waits for the topic and says so. An unusable URDF stops the
node with a message that names the offending element.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.exceptions import ParameterUninitializedException
from rclpy.parameter import Parameter as RclpyParameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from std_msgs.msg import String

from mbs_dynamics import Model, RobotDescription, URDFError, parse_urdf_file, parse_urdf_string

# How often a node that waits for robot_description says so again (s).
WAITING_REMINDER_PERIOD = 10.0

ROBOT_DESCRIPTION_QOS = QoSProfile(
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


# An empty array parameter: declared by its type (a params file cannot hold an
# empty array, and rclpy would take [] for a byte array); reads as [].
EMPTY_STRING_ARRAY = RclpyParameter.Type.STRING_ARRAY
EMPTY_DOUBLE_ARRAY = RclpyParameter.Type.DOUBLE_ARRAY


@dataclass(frozen=True)
class ParameterSpec:
    """A node parameter: its name, default (which fixes its type) and meaning."""

    name: str
    default: Any  # a value, or EMPTY_STRING_ARRAY / EMPTY_DOUBLE_ARRAY
    description: str
    read_only: bool = False


# Parameters every node has.
COMMON_PARAMETERS = (
    ParameterSpec("robot_description", "",
                  "URDF XML of the robot. Empty: use robot_description_file, else wait for the "
                  "robot_description topic.", read_only=True),
    ParameterSpec("robot_description_file", "",
                  "Path of a URDF file, used when robot_description is empty.", read_only=True),
    ParameterSpec("robot_description_timeout", 0.0,
                  "Seconds to wait for the robot_description topic before giving up; 0 waits for ever.",
                  read_only=True),
    ParameterSpec("floating_base", False,
                  "Add a floating root_joint (6 DoF) above the URDF root link: for legged and humanoid "
                  "robots.", read_only=True),
    ParameterSpec("mimic", "coupled",
                  "Mimic joints: 'coupled' (follow their master, no coordinate of their own) or "
                  "'independent' (free joints).", read_only=True),
    ParameterSpec("gravity", [0.0, 0.0, -9.81],
                  "Gravity in the world frame (m/s^2).", read_only=True),
)


class DynamicsNode(Node):
    """Base of the nodes: declares parameters and obtains the robot.

    Subclasses list their own PARAMETERS and implement on_robot(robot), called
    once with the checked robot description.
    """

    PARAMETERS: Sequence[ParameterSpec] = ()

    def __init__(self, node_name: str, stop: Future | None = None, **kwargs):
        """stop: completed, with the reason, when the node cannot go on."""
        super().__init__(node_name, **kwargs)
        self._stop = stop if stop is not None else Future()
        self.fatal_error: str | None = None
        self.robot: RobotDescription | None = None
        self._description_subscription = None
        self._waiting_timer = None
        for parameter in (*COMMON_PARAMETERS, *self.PARAMETERS):
            self.declare_parameter(
                parameter.name,
                parameter.default,
                ParameterDescriptor(description=parameter.description, read_only=parameter.read_only),
            )
        self._obtain_robot_description()

    def parameter(self, name: str) -> Any:
        """The value of a declared parameter ([] for an unset empty array)."""
        try:
            return self.get_parameter(name).value
        except ParameterUninitializedException:
            return []

    # --- robot_description ---------------------------------------------

    def _obtain_robot_description(self) -> None:
        xml = self.parameter("robot_description")
        path = self.parameter("robot_description_file")
        if xml:
            self._load(lambda: parse_urdf_string(xml), "parameter robot_description")
        elif path:
            self._load(lambda: parse_urdf_file(path), f"file {path}")
        else:
            self._description_subscription = self.create_subscription(
                String, "robot_description", self._on_description_message, ROBOT_DESCRIPTION_QOS
            )
            topic = self._description_subscription.topic_name
            self.get_logger().info(
                f"waiting for the robot description on {topic} (or set the parameter "
                "robot_description or robot_description_file)"
            )
            timeout = self.parameter("robot_description_timeout")
            self._waited = 0.0
            self._waiting_period = WAITING_REMINDER_PERIOD
            if timeout > 0:
                self._waiting_period = min(WAITING_REMINDER_PERIOD, timeout)
            self._waiting_timer = self.create_timer(self._waiting_period, self._still_waiting)

    def _still_waiting(self) -> None:
        self._waited += self._waiting_period
        timeout = self.parameter("robot_description_timeout")
        topic = self._description_subscription.topic_name
        if timeout > 0 and self._waited >= timeout:
            self._fail(f"no robot description arrived on {topic} within {timeout:g} s")
        else:
            self.get_logger().info(f"still waiting for the robot description on {topic} ({self._waited:g} s)")

    def _on_description_message(self, message: String) -> None:
        if self.fatal_error is not None:
            return
        if self.robot is not None:  # a model never changes under a running node
            self.get_logger().warning(
                "a new robot_description arrived: ignored, this node keeps the robot it started with "
                f"('{self.robot.name}'); restart it to load another")
            return
        self.destroy_timer(self._waiting_timer)
        self._load(lambda: parse_urdf_string(message.data), f"topic {self._description_subscription.topic_name}")

    def _load(self, parse: Callable[[], RobotDescription], source: str) -> None:
        try:
            robot = parse()
        except URDFError as error:
            self._fail(f"unusable robot description from {source}: {error}")
            return
        for warning in robot.warnings:
            self.get_logger().warning(f"robot description: {warning}")
        self.robot = robot
        self.get_logger().info(f"robot '{robot.name}' from {source}: {describe_joints(robot)}")
        self.on_robot(robot)

    def _fail(self, message: str) -> None:
        self.fatal_error = message
        self.get_logger().fatal(f"{message}; stopping")
        if not self._stop.done():
            self._stop.set_result(message)

    def on_robot(self, robot: RobotDescription) -> None:
        """Called once the robot description is loaded."""

    def build_model(self, robot: RobotDescription) -> Model:
        """The model of `robot` as the common parameters ask (ValueError if unusable)."""
        return Model(robot, floating_base=self.parameter("floating_base"), mimic=self.parameter("mimic"),
                     gravity=self.parameter("gravity"))

    # --- parameters changed at run time ------------------------------------

    def _settings(self, changes: dict) -> dict:
        """The parameters the node's callbacks use, checked; `changes` overrides
        the current values. Raises ValueError saying what is wrong."""
        raise NotImplementedError

    def check_parameters_at_run_time(self) -> None:
        """Refuse a parameter change that _settings refuses, with its reason;
        apply an accepted one (self.settings, replaced whole so that a callback
        reads a consistent set; the diagnostics period)."""
        self.add_on_set_parameters_callback(self._check_parameters)

    def _check_parameters(self, parameters) -> SetParametersResult:
        changes = {p.name: p.value for p in parameters}
        try:
            settings = self._settings(changes)
        except ValueError as error:
            return SetParametersResult(successful=False, reason=str(error))
        self.settings = settings
        timer = getattr(self, "_diagnostics_timer", None)
        if "diagnostics_period" in changes and timer is not None:
            timer.timer_period_ns = int(settings["diagnostics_period"] * 1e9)
        return SetParametersResult(successful=True)


def describe_joints(robot: RobotDescription) -> str:
    """One line: the joints that move, in model order, and the fixed ones."""
    moving = [f"{j.name} ({j.type}{', mimics ' + j.mimic.joint if j.mimic else ''})"
              for j in robot.joints.values() if j.type != "fixed"]
    fixed = sum(j.type == "fixed" for j in robot.joints.values())
    return (f"{len(robot.links)} links from root '{robot.root}', {len(moving)} moving joints: "
            f"{', '.join(moving) or 'none'}; {fixed} fixed joints")


def timing_values(prefix: str, seconds) -> dict:
    """Mean, p99 and max of compute times (s) as diagnostics values in us."""
    times = np.asarray(seconds, dtype=float) * 1e6
    if not times.size:
        return {}
    return {f"{prefix}_us_mean": f"{times.mean():.1f}", f"{prefix}_us_p99": f"{np.percentile(times, 99):.1f}",
            f"{prefix}_us_max": f"{times.max():.1f}"}


def diagnostic_array(node: Node, title: str, hardware_id: str, message: str, values: dict,
                     warn: bool) -> DiagnosticArray:
    """A /diagnostics message of one status '<node name>: <title>'."""
    status = DiagnosticStatus(name=f"{node.get_name()}: {title}", hardware_id=hardware_id, message=message,
                              level=DiagnosticStatus.WARN if warn else DiagnosticStatus.OK)
    status.values = [KeyValue(key=key, value=str(value)) for key, value in values.items()]
    array = DiagnosticArray(status=[status])
    array.header.stamp = node.get_clock().now().to_msg()
    return array


def spin_nodes(node_factories: Sequence[Callable[[Future], DynamicsNode]], args=None,
               multithreaded: bool = False) -> int:
    """Init rclpy, create the nodes, spin until Ctrl-C or a fatal error, shut down.

    Returns the process exit code: 0 after Ctrl-C or an external shutdown,
    1 when a node stopped on a fatal error.
    """
    rclpy.init(args=args)
    stop = Future()
    nodes: list[DynamicsNode] = []
    # a thread per node and two spare: with three nodes on two threads, rclpy's pool lost the callback of a
    # robot_description that arrived while the other two loaded theirs (2 start-ups in 10; none in 15 like this)
    executor = (MultiThreadedExecutor(num_threads=2 + len(node_factories)) if multithreaded
                else SingleThreadedExecutor())
    try:
        for factory in node_factories:
            nodes.append(factory(stop))
            if stop.done():
                break
        for node in nodes:
            executor.add_node(node)
        if not stop.done():
            executor.spin_until_future_complete(stop)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
    return 1 if stop.done() else 0


def node_main(node_class: type[DynamicsNode], default_name: str, multithreaded: bool = False) -> Callable[[], None]:
    """The console-script entry point of one node: NAME [--ros-args ...];
    multithreaded: serve its callbacks on a MultiThreadedExecutor."""

    def main(args=None) -> None:
        sys.exit(spin_nodes([lambda stop: node_class(default_name, stop=stop)], args=args,
                            multithreaded=multithreaded))

    return main
