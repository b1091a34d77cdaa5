"""The base of the nodes (RobotNode): a node of one robot, which obtains the
robot description, declares its parameters, takes their changes at run time,
counts the messages it drops and reports on /diagnostics.

robot_description comes, in this order of precedence, from the parameter
``robot_description`` (the URDF XML), the parameter
``robot_description_file`` (a path), or the latched ``robot_description``
topic (std_msgs/String, transient local, as robot_state_publisher publishes
it), relative to the node's namespace. The node waits for the topic and says
so. An unusable URDF stops the node with a message that names the offending
element.

A parameter change at run time is checked (settings_with) before it is set,
and the node's settings are replaced once it is (apply_settings).

What the node drops is counted by reason (drop); what never reached it, by
topic (create_counted_subscription: gaps in each publisher's sequence
numbers, input_loss.PublisherSequences); both with a throttled warning.
"""
from __future__ import annotations

import gc
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.exceptions import ParameterUninitializedException
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from std_msgs.msg import String

from mbs_dynamics import Model, RobotDescription, URDFError, parse_urdf_file, parse_urdf_string
from mbs_dynamics.ros.conversions import InvalidInput, JointMap, listed, measured_state
from mbs_dynamics.ros.input_loss import PublisherSequences, with_message_info
from mbs_dynamics.ros.parameters import COMMON_PARAMETERS, ParameterSpec, declare_parameters

# How often a node that waits for robot_description says so again (s).
WAITING_REMINDER_PERIOD = 10.0
# Seconds between repeats of the same warning.
WARNING_PERIOD = 5.0
# Unknown joint names warned about, at most (each once), kept by their first
# WARNED_NAME_LENGTH characters (a name can be as long as a message).
MAX_WARNED_NAMES = 1000
WARNED_NAME_LENGTH = 200
# Compute times kept for the diagnostics' percentiles (per timing).
TIMING_WINDOW = 5000

# Whether start_up_done() moves the objects made so far out of the garbage
# collector's full collections: spin_nodes says so, for a process that lives
# as long as its nodes (a test process that makes nodes and drops them keeps
# collecting them).
_freeze_start_up = False


def freeze_start_up_objects(enabled: bool = True) -> None:
    """From now on start_up_done() freezes (or, False, not) what start-up made."""
    global _freeze_start_up
    _freeze_start_up = enabled


def start_up_done() -> None:
    """A node's start-up made its objects (modules, the model, compiled
    kernels: about 150,000): once its garbage is collected, they are left
    out of every later collection (gc.freeze), when freeze_start_up_objects()
    was called. A full collection scanned them all, 40-110 ms on a busy
    machine: a stall of a 1 kHz stream, which then waits in the node's queue."""
    if _freeze_start_up:
        gc.collect()
        gc.freeze()


ROBOT_DESCRIPTION_QOS = QoSProfile(
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


class ProcessNode(Node):
    """A node that spin_nodes serves in a process of its own or with others:
    EXECUTOR makes the executor that serves it (called without arguments;
    spin_nodes gives a MultiThreadedExecutor a thread per node and two spare);
    `stop`, a future it completes to end the process: with None when its work
    is done (finish), with the reason when it cannot go on (fail)."""

    EXECUTOR: Callable = SingleThreadedExecutor

    def __init__(self, node_name: str, stop: Future | None = None, **kwargs):
        super().__init__(node_name, **kwargs)
        self._stop = stop if stop is not None else Future()
        self.fatal_error: str | None = None

    def stopping(self) -> None:
        """The process is about to stop: end what a callback may be waiting for
        (the executor waits for running callbacks before the nodes are destroyed)."""

    def finish(self) -> None:
        """End the process normally (exit code 0): the node's work is done."""
        if not self._stop.done():
            self._stop.set_result(None)

    def fail(self, message: str) -> None:
        """End the process with exit code 1, `message` logged as the reason."""
        self.fatal_error = message
        self.get_logger().fatal(f"{message}; stopping")
        if not self._stop.done():
            self._stop.set_result(message)


class RobotNode(ProcessNode):
    """A node of one robot: declares its parameters (COMMON_PARAMETERS and the
    subclass's PARAMETERS), obtains the robot and counts what it drops.

    A subclass implements on_robot(robot), called once the robot is here
    (model, joints and settings made); settings_with(changes), its settings
    checked, if it has any (and check_parameters_at_run_time if it takes
    changes at run time); and
    diagnostics(), the status report_diagnostics publishes.
    """

    PARAMETERS: Sequence[ParameterSpec] = ()
    FAILURE_PREFIX = ""  # before the message of an error that stops the node

    def __init__(self, node_name: str, stop: Future | None = None, **kwargs):
        """stop: completed, with the reason, when the node cannot go on."""
        super().__init__(node_name, stop, **kwargs)
        self.robot: RobotDescription | None = None
        self.robot_xml: str | None = None  # its URDF text
        self.settings = None  # the node's typed settings (a frozen dataclass), from settings_with
        self.counts: Counter = Counter()
        self._description_subscription = None
        self._waiting_timer = None
        self._diagnostics_timer = None
        self._warned_unknown: set[str] = set()
        self._warned_at: dict[str, float] = {}  # count key -> when it was last said (monotonic s): warning_due
        declare_parameters(self, (*COMMON_PARAMETERS, *self.PARAMETERS))
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
            self._load(lambda: parse_urdf_string(xml), "parameter robot_description", lambda: xml)
        elif path:
            self._load(lambda: parse_urdf_file(path), f"file {path}", lambda: Path(path).read_text(encoding="utf-8"))
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
            self.fail(f"no robot description arrived on {topic} within {timeout:g} s")
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
        self._load(lambda: parse_urdf_string(message.data), f"topic {self._description_subscription.topic_name}",
                   lambda: message.data)

    def _load(self, parse: Callable[[], RobotDescription], source: str, text: Callable[[], str]) -> None:
        """The robot from `parse`; robot_xml its URDF's text (`text`), for what
        the description leaves out (collision geometry)."""
        try:
            robot = parse()
            self.robot_xml = text()
        except URDFError as error:
            self.fail(f"unusable robot description from {source}: {error}")
            return
        except Exception as error:  # noqa: BLE001  MemoryError, RecursionError, ...: still a message, not a traceback
            self.fail(f"unusable robot description from {source}: {type(error).__name__}: {error}")
            return
        self.robot = robot
        self.get_logger().info(f"robot '{robot.name}' from {source}: {describe_joints(robot)}")
        try:
            self.model = self.build_model(robot)
            self.joints = JointMap(self.model)
            self.settings = self.settings_with({})
            self.on_robot(robot)
            start_up_done()
        except (ValueError, OSError) as error:  # a parameter, a file (files.FileProblem), a host, ...
            self.fail(f"{self.FAILURE_PREFIX}{error}")

    def on_robot(self, robot: RobotDescription) -> None:
        """The robot is here: `model`, `joints` and `settings` are made from
        it and the parameters. The node starts serving; a ValueError or
        OSError stops it, said in one line (fail)."""

    def mesh_search_paths(self) -> tuple[str, ...]:
        """Where the URDF's mesh files are looked for after the ament index and
        the Python environment (resources.resolve): the node's parameter
        mesh_search_paths, then the URDF file's directory when the robot came
        from one."""
        search = [str(Path(path).expanduser()) for path in self.parameter("mesh_search_paths")]
        path = self.parameter("robot_description_file")
        if path and not self.parameter("robot_description"):
            search.append(str(Path(path).resolve().parent))
        return tuple(search)

    def build_model(self, robot: RobotDescription) -> Model:
        """The model of `robot` as the common parameters ask (armature_joints and
        armature over the URDF's transmissions; ValueError if unusable); its warnings are logged, once per process (the bringup's
        nodes share one robot)."""
        joints, values = list(self.parameter("armature_joints")), list(self.parameter("armature"))
        if len(joints) != len(values):
            raise ValueError(f"armature_joints names {len(joints)} joints, armature has {len(values)} values")
        model = Model(robot, floating_base=self.parameter("floating_base"), mimic=self.parameter("mimic"),
                      gravity=self.parameter("gravity"), armature=dict(zip(joints, values, strict=True)))
        for warning in new_warnings(model):
            self.get_logger().warning(f"robot description: {warning}")
        return model

    # --- parameters changed at run time ------------------------------------

    def settings_with(self, changes: dict):
        """The settings the node's callbacks use (a frozen dataclass with a
        diagnostics_period), from its parameters with `changes` ({name: value})
        over them, checked; ValueError saying what is wrong. None: the node
        has none."""
        return None

    def parameter_values(self, changes: dict, names) -> dict:
        """{name: value} of the parameters `names`, `changes` over those set."""
        return {name: changes.get(name, self.parameter(name)) for name in names}

    def check_parameters_at_run_time(self) -> None:
        """Refuse a parameter change that settings_with refuses, with its
        reason; apply an accepted one once it is set (apply_settings)."""
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

    def _check_parameters(self, parameters) -> SetParametersResult:
        try:  # (rclpy has refused values outside the declared bounds already)
            self.settings_with({p.name: p.value for p in parameters})
        except ValueError as error:
            return SetParametersResult(successful=False, reason=str(error))
        return SetParametersResult(successful=True)

    def _apply_parameters(self, parameters) -> None:
        self.apply_settings(self.settings_with({}), {p.name for p in parameters})

    def apply_settings(self, settings, changed: set) -> None:
        """Take settings (replaced whole, so that a callback reads a
        consistent set) after the parameters `changed` were set."""
        self.settings = settings
        if "diagnostics_period" in changed and self._diagnostics_timer is not None:
            self._diagnostics_timer.timer_period_ns = int(settings.diagnostics_period * 1e9)

    # --- what was dropped, and the diagnostics ---------------------------------

    def drop(self, reason: str, message: str) -> None:
        """Count a message that cannot be used under `reason` and say why, at
        most once every WARNING_PERIOD per reason (one reason's flood never
        hides another's first warning)."""
        self.counts[f"dropped_{reason}"] += 1
        if self.warning_due(f"dropped_{reason}"):
            self.get_logger().warning(f"dropped: {message} ({self.counts[f'dropped_{reason}']} so far)")

    def warning_due(self, key: str) -> bool:
        """Whether the warning of `key` (a count's) is due: True at most once
        every WARNING_PERIOD per key. Checked before the logger is called: at
        every call, rclpy's throttle_duration_sec looks the caller up in the
        stack (inspect, the source file's real path: ~100 us), too much for
        a warning that a 1 kHz stream may ask for at every message."""
        now = time.monotonic()
        if now - self._warned_at.get(key, -np.inf) < WARNING_PERIOD:
            return False
        self._warned_at[key] = now
        return True

    def raise_priority(self) -> None:
        """The calling thread (the one that serves the input stream) and the
        middleware's threads scheduled SCHED_FIFO at the node's
        realtime_priority parameter (parameters.realtime_priority), or said
        why not. Called from that thread, at its first message."""
        from mbs_dynamics.ros.spinning import schedule_realtime  # spinning runs this module's nodes
        priority = self.parameter("realtime_priority")
        try:
            middleware = schedule_realtime(priority)
        except OSError as error:
            self.get_logger().warning(
                f"realtime_priority {priority}: not permitted ({error.strerror}): needs root, CAP_SYS_NICE or an "
                "rtprio limit (ulimit -r); serving at normal priority")
            return
        self.get_logger().info(f"serving joint_states at real-time priority {priority} (SCHED_FIFO), with "
                               f"{middleware} threads of the middleware")

    def warn_unknown_joints(self, names) -> None:
        """Say once per name (at most MAX_WARNED_NAMES) that a message named
        joints the model does not have, which are ignored."""
        new = [name[:WARNED_NAME_LENGTH] for name in names if name[:WARNED_NAME_LENGTH] not in self._warned_unknown]
        if new and len(self._warned_unknown) < MAX_WARNED_NAMES:
            self._warned_unknown.update(new)
            self.get_logger().warning(f"ignoring joints the model does not have: {listed(new, 20)}")

    def measured(self, message, base) -> tuple[np.ndarray, np.ndarray]:
        """(q, v) of a joint_states message by joint name (names the model
        lacks warned once) and, for a floating base, base = (q_base, v_base)
        of the newest odom; InvalidInput when a floating base has none yet."""
        match = self.joints.match(message.name)
        self.warn_unknown_joints(match.unknown)
        if self.model.floating_base and base is None:
            raise InvalidInput("no_odometry", "no odom received yet: the floating base's state is unknown")
        return measured_state(self.joints, match, message, base if self.model.floating_base else None)

    def dropped(self) -> int:
        """The messages dropped so far, for any reason."""
        # a copy: other threads add keys
        return sum(count for key, count in list(self.counts.items()) if key.startswith("dropped_"))

    def create_counted_subscription(self, kind, topic: str, callback: Callable, qos: QoSProfile, **kwargs):
        """A subscription whose messages that never arrive are counted under
        'lost_<topic>' (lose): the gaps in each publisher's sequence numbers,
        where the middleware gives them (Fast DDS does). callback(message) as
        for create_subscription."""
        sequences = PublisherSequences()
        name = topic.strip("/~").replace("/", "_")

        def receive(message, info) -> None:
            missing = sequences.observe(info)
            if missing:
                self.lose(name, missing)
            callback(message)

        return self.create_subscription(kind, topic, with_message_info(receive), qos, **kwargs)

    def lose(self, topic: str, count: int) -> None:
        """Count `count` messages of `topic` that never reached the node and say so, throttled."""
        self.counts[f"lost_{topic}"] += count
        if self.warning_due(f"lost_{topic}"):
            self.get_logger().warning(
                f"{count} {topic} message(s) never reached the node ({self.counts[f'lost_{topic}']} so far): the "
                "subscription's queue overflowed while the node could not run, or the transport dropped them (a "
                "best-effort message too large for it)")

    def lost(self) -> int:
        """The messages that never reached the node so far, of any topic."""
        return sum(count for key, count in list(self.counts.items()) if key.startswith("lost_"))

    def report_diagnostics(self, title: str) -> None:
        """Publish diagnostics() every diagnostics_period on /diagnostics: one
        status '<fully qualified node name>: <title>' (several robots share
        /diagnostics: their namespaces tell them apart)."""
        self._diagnostics_title = title
        self._diagnostics_publisher = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diagnostics_timer = self.create_timer(self.settings.diagnostics_period, self._publish_diagnostics)

    def diagnostics(self) -> tuple[str, dict, bool]:
        """The node's status: (message, {key: value}, whether to warn)."""
        raise NotImplementedError

    def _publish_diagnostics(self) -> None:
        message, values, warn = self.diagnostics()
        status = DiagnosticStatus(name=f"{self.get_fully_qualified_name()}: {self._diagnostics_title}",
                                  hardware_id=self.robot.name, message=message,
                                  level=DiagnosticStatus.WARN if warn else DiagnosticStatus.OK)
        status.values = [KeyValue(key=key, value=str(value)) for key, value in values.items()]
        array = DiagnosticArray(status=[status])
        array.header.stamp = self.get_clock().now().to_msg()
        self._diagnostics_publisher.publish(array)


_reported_warnings: set[tuple[str, str]] = set()
_reported_lock = threading.Lock()


def new_warnings(model: Model) -> list[str]:
    """The model's warnings that no node of this process has reported yet."""
    with _reported_lock:
        new = [warning for warning in model.warnings if (model.name, warning) not in _reported_warnings]
        _reported_warnings.update((model.name, warning) for warning in new)
    return new


# Moving joints named in the line that describes a robot, at most.
DESCRIBED_JOINTS = 100


def describe_joints(robot: RobotDescription) -> str:
    """One line: the joints that move, in model order (the first
    DESCRIBED_JOINTS), and the fixed ones."""
    moving = [f"{j.name} ({j.type}{', mimics ' + j.mimic.joint if j.mimic else ''})"
              for j in robot.joints.values() if j.type != "fixed"]
    fixed = sum(j.type == "fixed" for j in robot.joints.values())
    more = f" and {len(moving) - DESCRIBED_JOINTS} more" if len(moving) > DESCRIBED_JOINTS else ""
    return (f"{len(robot.links)} links from root '{robot.root}', {len(moving)} moving joints: "
            f"{', '.join(moving[:DESCRIBED_JOINTS]) or 'none'}{more}; {fixed} fixed joints")


def timings() -> deque:
    """The last TIMING_WINDOW compute times (s) of something timed."""
    return deque(maxlen=TIMING_WINDOW)


def timing_values(prefix: str, seconds) -> dict:
    """Mean, p99 and max of compute times (s) as diagnostics values in us."""
    times = np.asarray(seconds, dtype=float) * 1e6
    if not times.size:
        return {}
    return {f"{prefix}_us_mean": f"{times.mean():.1f}", f"{prefix}_us_p99": f"{np.percentile(times, 99):.1f}",
            f"{prefix}_us_max": f"{times.max():.1f}"}
