"""What the three nodes share: getting the robot from robot_description,
parameters declared with descriptors, and a main() that inits, spins and
shuts down.

robot_description comes, in this order of precedence, from the parameter
``robot_description`` (the URDF XML), the parameter
``robot_description_file`` (a path), or the latched ``robot_description``
topic (std_msgs/String, transient local, as robot_state_publisher publishes
it), relative to the node's namespace. The node waits for the topic and says
so. An unusable URDF stops the node with a message that names the offending
element.

Parameters are declared with their ranges (ParameterSpec.bounds), so that
rclpy refuses a value outside them and `ros2 param describe` shows them; a
change at run time is checked by the node (_settings) before it is taken and
applied after (apply_settings).
"""
from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.guard_condition import GuardCondition
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.exceptions import ParameterException, ParameterUninitializedException
from rclpy.parameter import Parameter as RclpyParameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, SetParametersResult
from std_msgs.msg import String

from mbs_dynamics import Model, RobotDescription, URDFError, parse_urdf_file, parse_urdf_string

# How often a node that waits for robot_description says so again (s).
WAITING_REMINDER_PERIOD = 10.0
# Seconds between repeats of the same warning.
WARNING_PERIOD = 5.0
# The longest a thread waits for the GIL that another holds (Python's default:
# 5 ms). The nodes' threads (the simulator's stepping, the stream of
# joint_states) give it up at every sleep, take and publish, and a busy
# executor thread kept each of them waiting up to 5 ms for it back: the
# simulator reached 0.4-1.3x real time of the 2x asked.
GIL_SWITCH_INTERVAL = 0.0005
# The bounds of every node's diagnostics_period (s): at most 100 messages a
# second, at least one an hour.
DIAGNOSTICS_PERIOD_BOUNDS = (0.01, 3600.0)

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
    """A node parameter: its name, default (which fixes its type), meaning and,
    for a number, the closed interval `bounds` it must lie in."""

    name: str
    default: Any  # a value, or EMPTY_STRING_ARRAY / EMPTY_DOUBLE_ARRAY
    description: str
    read_only: bool = False
    bounds: tuple[float, float] | None = None

    def descriptor(self) -> ParameterDescriptor:
        descriptor = ParameterDescriptor(description=self.description, read_only=self.read_only)
        if self.bounds is not None:
            low, high = self.bounds
            if isinstance(self.default, int) and not isinstance(self.default, bool):
                descriptor.integer_range = [IntegerRange(from_value=int(low), to_value=int(high))]
            else:
                descriptor.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high))]
            descriptor.additional_constraints = f"in [{low:g}, {high:g}]"
        return descriptor


# Parameters every node has.
COMMON_PARAMETERS = (
    ParameterSpec("robot_description", "",
                  "URDF XML of the robot. Empty: use robot_description_file, else wait for the "
                  "robot_description topic.", read_only=True),
    ParameterSpec("robot_description_file", "",
                  "Path of a URDF file, used when robot_description is empty.", read_only=True),
    ParameterSpec("robot_description_timeout", 0.0,
                  "Seconds to wait for the robot_description topic before giving up; 0 waits for ever.",
                  read_only=True, bounds=(0.0, 1e6)),
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
        self._specs = {spec.name: spec for spec in (*COMMON_PARAMETERS, *self.PARAMETERS)}
        # `-p real_time_factor:=2` or `ros2 param set ... 2` gives an integer: taken as the double it means
        overrides = self._parameter_overrides  # rclpy's store of the --ros-args -p values
        for name, override in overrides.items():
            if name in self._specs:
                overrides[name] = as_declared_type(self._specs[name], override)
        self.add_pre_set_parameters_callback(
            lambda parameters: [as_declared_type(self._specs[p.name], p) if p.name in self._specs else p
                                for p in parameters])
        for spec in self._specs.values():
            try:
                self.declare_parameter(spec.name, spec.default, spec.descriptor())
            except (ParameterException, ValueError) as error:  # ValueError: a value outside its declared range
                raise ParameterError(f"parameter {spec.name}: {error}") from None
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
        except Exception as error:  # noqa: BLE001  MemoryError, RecursionError, ...: still a message, not a traceback
            self._fail(f"unusable robot description from {source}: {type(error).__name__}: {error}")
            return
        self.robot = robot
        self.get_logger().info(f"robot '{robot.name}' from {source}: {describe_joints(robot)}")
        self.on_robot(robot)

    def stopping(self) -> None:
        """The process is about to stop: end what a callback may be waiting for
        (the executor waits for running callbacks before the nodes are destroyed)."""

    def finish(self) -> None:
        """End the process normally (exit code 0): the node's work is done."""
        if not self._stop.done():
            self._stop.set_result(None)

    def _fail(self, message: str) -> None:
        self.fatal_error = message
        self.get_logger().fatal(f"{message}; stopping")
        if not self._stop.done():
            self._stop.set_result(message)

    def on_robot(self, robot: RobotDescription) -> None:
        """Called once the robot description is loaded."""

    def build_model(self, robot: RobotDescription) -> Model:
        """The model of `robot` as the common parameters ask (ValueError if
        unusable); its warnings are logged, once per process (the bringup's
        nodes share one robot)."""
        model = Model(robot, floating_base=self.parameter("floating_base"), mimic=self.parameter("mimic"),
                      gravity=self.parameter("gravity"))
        for warning in new_warnings(model):
            self.get_logger().warning(f"robot description: {warning}")
        return model

    # --- parameters changed at run time ------------------------------------

    def _settings(self, changes: dict) -> dict:
        """The parameters the node's callbacks use, checked; `changes` overrides
        the current values. Raises ValueError saying what is wrong."""
        raise NotImplementedError

    def check_parameters_at_run_time(self) -> None:
        """Refuse a parameter change that _settings refuses, with its reason;
        apply an accepted one once it is set (apply_settings)."""
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

    def _check_parameters(self, parameters) -> SetParametersResult:
        changes = {p.name: p.value for p in parameters}
        try:  # (rclpy has refused values outside the declared bounds already)
            self._settings(changes)
        except ValueError as error:
            return SetParametersResult(successful=False, reason=str(error))
        return SetParametersResult(successful=True)

    def _apply_parameters(self, parameters) -> None:
        self.apply_settings(self._settings({}), {p.name for p in parameters})

    def apply_settings(self, settings: dict, changed: set) -> None:
        """Take settings (replaced whole, so that a callback reads a
        consistent set) after the parameters `changed` were set."""
        self.settings = settings
        timer = getattr(self, "_diagnostics_timer", None)
        if "diagnostics_period" in changed and timer is not None:
            timer.timer_period_ns = int(settings["diagnostics_period"] * 1e9)

    def drop(self, reason: str, message: str) -> None:
        """Count a message that cannot be used under `reason` and say why, throttled."""
        self.counts[f"dropped_{reason}"] += 1
        self.get_logger().warning(f"dropped: {message} ({self.counts[f'dropped_{reason}']} so far)",
                                  throttle_duration_sec=WARNING_PERIOD)


_reported_warnings: set[tuple[str, str]] = set()
_reported_lock = threading.Lock()


def new_warnings(model: Model) -> list[str]:
    """The model's warnings that no node of this process has reported yet."""
    with _reported_lock:
        new = [warning for warning in model.warnings if (model.name, warning) not in _reported_warnings]
        _reported_warnings.update((model.name, warning) for warning in new)
    return new


def as_declared_type(spec: ParameterSpec, parameter: RclpyParameter) -> RclpyParameter:
    """`parameter` with integers made doubles where `spec` declares doubles."""
    double = isinstance(spec.default, float)
    doubles = spec.default is EMPTY_DOUBLE_ARRAY or (
        isinstance(spec.default, list) and spec.default and isinstance(spec.default[0], float))
    if double and parameter.type_ == RclpyParameter.Type.INTEGER:
        return RclpyParameter(parameter.name, RclpyParameter.Type.DOUBLE, float(parameter.value))
    if doubles and parameter.type_ == RclpyParameter.Type.INTEGER_ARRAY:
        return RclpyParameter(parameter.name, RclpyParameter.Type.DOUBLE_ARRAY, [float(x) for x in parameter.value])
    return parameter


class ParameterError(ValueError):
    """A parameter given at start-up that the node cannot take (e.g. of the wrong type)."""


class DirectSubscriptions:
    """Subscriptions that no executor serves: a thread of the node's own takes
    their messages (take), after waiting for them (wait) or at points of its
    choosing. An executor rebuilds its wait set of all the node's entities, in
    Python, for every message (about 0.4 ms of CPU here: more than the dynamics
    and the publishing together), and on a busy executor a thread that gives
    up the GIL waits up to the 5 ms switch interval to get it back.

    The subscriptions belong to a hidden helper node that no executor spins.
    Their topics are resolved by the node itself (its name, namespace and
    remappings) and taken as they are by the helper."""

    def __init__(self, node: Node, topics, qos: QoSProfile):
        """topics: (message type, topic, callback(message)) each."""
        self.helper = rclpy.create_node(f"_{node.get_name()}_direct", namespace=node.get_namespace(),
                                        context=node.context, start_parameter_services=False,
                                        use_global_arguments=False)
        # no executor would serve QoS event handlers
        no_events = SubscriptionEventCallbacks(use_default_callbacks=False)
        self.topics = [(self.helper.create_subscription(kind, node.resolve_topic_name(topic), lambda _: None, qos,
                                                        event_callbacks=no_events), callback)
                       for kind, topic, callback in topics]
        self.wake = GuardCondition(None, None, context=node.context)
        self._wait_set = None

    def take(self) -> int:
        """Call the callbacks on every queued message, in arrival order per topic; the number taken."""
        count = 0
        taken_any = True
        while taken_any:
            taken_any = False
            for subscription, callback in self.topics:
                with subscription.handle:
                    taken = subscription.handle.take_message(subscription.msg_type, subscription.raw)
                if taken is not None:
                    taken_any = True
                    count += 1
                    callback(taken[0])
        return count

    def wait(self, timeout_ns: int) -> None:
        """Until a message is queued, wake() is called, or timeout_ns passes."""
        if self._wait_set is None:
            self._wait_set = _rclpy.WaitSet(len(self.topics), 1, 0, 0, 0, 0, self.helper.context.handle)
        wait_set = self._wait_set
        wait_set.clear_entities()
        with self.wake.handle:
            for subscription, _ in self.topics:
                with subscription.handle:
                    wait_set.add_subscription(subscription.handle)
            wait_set.add_guard_condition(self.wake.handle)
        wait_set.wait(timeout_ns)

    def wake_up(self) -> None:
        self.wake.trigger()

    def destroy(self) -> None:
        self.wake.destroy()
        self.helper.destroy_node()


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
    """A /diagnostics message of one status '<fully qualified node name>: <title>'
    (several robots share /diagnostics: their namespaces tell them apart)."""
    status = DiagnosticStatus(name=f"{node.get_fully_qualified_name()}: {title}", hardware_id=hardware_id,
                              message=message,
                              level=DiagnosticStatus.WARN if warn else DiagnosticStatus.OK)
    status.values = [KeyValue(key=key, value=str(value)) for key, value in values.items()]
    array = DiagnosticArray(status=[status])
    array.header.stamp = node.get_clock().now().to_msg()
    return array


def spin_nodes(node_factories: Sequence[Callable[[Future], DynamicsNode]], args=None,
               multithreaded: bool = False) -> int:
    """Init rclpy, create the nodes, spin until Ctrl-C (or SIGTERM) or a node's
    finish() or fatal error, and stop in order: the executor, then the nodes
    (their threads), then the context. rclpy's own signal handler would shut
    the context down at once, under callbacks still running (a log line then
    fails: "publisher's context is invalid"). A second Ctrl-C stops at once.

    Returns the process exit code: 0 after Ctrl-C or a node's finish(), 1
    when a node stopped on a fatal error.
    """
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    stop = Future()
    interrupted = threading.Event()

    def interrupt(signum, frame) -> None:
        interrupted.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C: KeyboardInterrupt

    previous = {number: signal.signal(number, interrupt) for number in (signal.SIGINT, signal.SIGTERM)}
    nodes: list[DynamicsNode] = []
    # a thread per node and two spare: with three nodes on two threads, rclpy's pool lost the callback of a
    # robot_description that arrived while the other two loaded theirs (2 start-ups in 10; none in 15 like this)
    executor = (MultiThreadedExecutor(num_threads=2 + len(node_factories)) if multithreaded
                else SingleThreadedExecutor())
    spinner = threading.Thread(target=_spin, args=(executor, stop), name="executor", daemon=True)
    try:
        for factory in node_factories:
            try:
                nodes.append(factory(stop))
            except ParameterError as error:
                rclpy.logging.get_logger("mbs_dynamics").fatal(f"{error}; stopping")
                stop.set_result(str(error))
            if stop.done():
                break
        for node in nodes:
            executor.add_node(node)
        if not stop.done():
            spinner.start()
            while not (stop.done() or interrupted.is_set() or not spinner.is_alive()):
                interrupted.wait(0.1)
    except KeyboardInterrupt:
        pass
    finally:
        for node in nodes:
            node.stopping()
        executor.shutdown(timeout_sec=5.0)
        if spinner.is_alive():
            spinner.join(5.0)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
        for number, handler in previous.items():
            signal.signal(number, handler)
    return 1 if stop.done() and stop.result() is not None else 0


def _spin(executor, stop: Future) -> None:
    """The executor's thread: spin until stop is done or the executor shuts down."""
    try:
        executor.spin_until_future_complete(stop)
    except ExternalShutdownException:
        pass


def node_main(node_class: type[DynamicsNode], default_name: str, multithreaded: bool = False) -> Callable[[], None]:
    """The console-script entry point of one node: NAME [--ros-args ...];
    multithreaded: serve its callbacks on a MultiThreadedExecutor."""

    def main(args=None) -> None:
        sys.exit(spin_nodes([lambda stop: node_class(default_name, stop=stop)], args=args,
                            multithreaded=multithreaded))

    return main
