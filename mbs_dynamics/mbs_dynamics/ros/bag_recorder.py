"""mbs_dynamics_record: topics recorded to a ROS 2 bag where ROS 2 came from
pip (no ``ros2 bag``); the bag is rosbag2's format version 9, MCAP or sqlite3,
read by rosbags and by ``ros2 bag`` alike.

    mbs_dynamics_record [--output DIR] [--storage mcap|sqlite3] [--duration S]
                        [--use-sim-time] TOPIC[:TYPE] ... [--ros-args ...]

A topic is a name relative to the recorder's namespace (remappings apply);
its type comes from its publishers, or after the colon
(``joint_states:sensor_msgs/msg/JointState``; a topic published with
another type is said, naming both, and waited on). The recorder subscribes
once it sees a publisher, with a QoS that hears every publisher seen (reliable
only if all are, transient local only if all are: a reliable subscription
hears nothing from a best-effort publisher); a publisher it sees later and
cannot hear is warned about. Messages arrive serialized (never deserialized)
and are stamped on arrival with the node's clock (simulated time with
--use-sim-time), as ``ros2 bag record`` stamps them; a thread of its own
writes them, so that a callback never waits for the disk. Each topic's
message definition is ROS 2 kilted's (rosbags' typestore), else the
interface file installed with its package (share/<package>/msg/<Type>.msg).

It stops at Ctrl-C (SIGINT), SIGTERM or --duration seconds (wall clock)
after recording began (its first subscription), and closes the bag with every
message received (a signal while it closes waits for it); then it prints the
count of each topic. A write that fails (a full disk) ends the recording
early, the bag closed readable with what was written up to its last
checkpoint (the core's bags.BagWriter, which writes the bag), said in one
line with the messages written and lost; exit code 1. Messages that outrun
the disk by bags.MAX_QUEUED_BYTES are dropped, counted and warned about; so
are messages that never reached the recorder (gaps in each publisher's
sequence numbers, input_loss.PublisherSequences, where the middleware gives
them: the subscription's queue overflowed while the recorder did not run),
said in the summary as "missed".
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time
from pathlib import Path

from rclpy.clock import Clock, ClockType
from rclpy.exceptions import InvalidTopicNameException
from rclpy.experimental import EventsExecutor
from rclpy.parameter import Parameter
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSCompatibility,
    QoSProfile,
    ReliabilityPolicy,
    qos_check_compatible,
)
from rclpy.validate_topic_name import validate_topic_name
from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
from rosbags.rosbag2 import WriterError
from rosbags.typesys import get_types_from_msg

from mbs_dynamics.bags import MAX_QUEUED_BYTES, STORAGES, BagWriter
from mbs_dynamics.command_line import OneLineErrorParser
from mbs_dynamics.files import FileProblem, check_writable
from mbs_dynamics.ros.input_loss import PublisherSequences, with_message_info
from mbs_dynamics.ros.parameters import ParameterError
from mbs_dynamics.ros.robot_node import ProcessNode
from mbs_dynamics.ros.spinning import ignore_interrupts, spin_nodes, split_ros_args

# Messages a subscription holds before the executor takes them: a 1 kHz
# stream outlasts a 1 s stall.
RECORD_DEPTH = 1000
# Seconds between looks at the graph for publishers.
DISCOVERY_PERIOD = 0.2


class RecordedTopic:
    """A topic to record: its name as given and resolved, its type (given, or
    None until a publisher shows it), and once subscribed its connection in
    the bag, the QoS of the subscription and the messages received."""

    def __init__(self, name: str, resolved: str, message_class: type | None):
        self.name, self.resolved, self.message_class = name, resolved, message_class
        self.connection = None
        self.qos: QoSProfile | None = None
        self.received = 0
        self.dropped = 0  # received while MAX_QUEUED_BYTES waited to be written
        self.sequences = PublisherSequences()  # its publishers' messages that never reached the recorder
        self.warned: set[str] = set()  # what was said about it, once each


class BagRecorder(ProcessNode):
    """Subscribes to its topics once they have publishers and queues what
    arrives (serialized) in the bag; ends its process `duration` s (wall
    clock) after its first subscription, if positive."""

    # rclpy's executor in C++: a message costs it tens of microseconds, where the Python executors rebuild
    # their wait set for each one
    EXECUTOR = EventsExecutor

    def __init__(self, node_name: str, bag: BagWriter, topics: list[tuple[str, str | None]], duration: float = 0.0,
                 **kwargs):
        """topics: (name, type or None) each; a type as pkg/msg/Type."""
        super().__init__(node_name, **kwargs)
        self.bag = bag
        self.topics = [RecordedTopic(name, self.resolve_topic_name(name), message_class(kind) if kind else None)
                       for name, kind in topics]
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)  # the graph is looked at even while sim time stands
        self._discovery = self.create_timer(DISCOVERY_PERIOD, self._discover, clock=self._steady)
        self._duration = duration
        self._duration_timer = None
        self._discover()
        waiting = [topic.resolved for topic in self.topics if topic.connection is None]
        if waiting:
            self.get_logger().info(f"waiting for publishers on {', '.join(waiting)}")

    def _duration_over(self) -> None:
        self.get_logger().info("duration over")
        self.finish()

    def _discover(self) -> None:
        if self.bag.error is not None:
            self.finish()  # the bag is closed at what it holds; the command says why, in one line
            return
        for topic in self.topics:
            publishers = self.get_publishers_info_by_topic(topic.resolved)
            if topic.connection is None and publishers:
                self._subscribe(topic, publishers)
            elif topic.connection is not None:
                self._check_later_publishers(topic, publishers)

    def _subscribe(self, topic: RecordedTopic, publishers) -> None:
        if topic.message_class is None:
            kinds = sorted({info.topic_type for info in publishers})
            if len(kinds) > 1:
                self._say_once(topic, "types", f"{topic.resolved} has publishers of several types {kinds}: give "
                                               f"the one to record as {topic.name}:TYPE")
                return
            try:
                topic.message_class = message_class(kinds[0])
            except ValueError as error:
                self.fail(str(error))
                return
        wanted = type_name(topic.message_class)
        others = sorted({info.topic_type for info in publishers} - {wanted})
        publishers = [info for info in publishers if info.topic_type == wanted]
        if not publishers:
            self._say_once(topic, f"types {others}", f"{topic.resolved} is published as {' and '.join(others)}, "
                                                      f"not {wanted} as asked: waiting for a publisher of {wanted} "
                                                      f"(record {topic.name} without :TYPE to take the type published)")
            return
        offered = [info.qos_profile for info in publishers]
        topic.qos = subscription_qos(offered)
        try:
            topic.connection = add_topic(self.bag, topic.resolved, topic.message_class, offered)
        except (OSError, WriterError, ValueError) as error:
            if self.bag.error is not None:
                self.finish()  # the bag failed meanwhile: said by the command
            else:
                self.fail(f"no message definition for {type_name(topic.message_class)} of {topic.resolved}: {error}")
            return
        connection, bag, clock = topic.connection, self.bag, self.get_clock()

        def record(data: bytes, info) -> None:
            if topic.sequences.observe(info):
                self.get_logger().warning(
                    f"{topic.resolved}: {topic.sequences.lost} message(s) never reached the recorder so far (its "
                    "queue overflowed while it did not run)", throttle_duration_sec=5.0)
            topic.received += 1
            if not bag.put(connection, clock.now().nanoseconds, data) and bag.error is None:
                topic.dropped += 1
                self.get_logger().warning(
                    f"{topic.resolved}: {topic.dropped} message(s) dropped so far: {MAX_QUEUED_BYTES >> 20} MiB wait "
                    f"to be written to {bag.path} (the disk is slower than the topics)", throttle_duration_sec=5.0)

        self.create_subscription(topic.message_class, topic.resolved, with_message_info(record), topic.qos, raw=True)
        if self._duration > 0 and self._duration_timer is None:
            self._duration_timer = self.create_timer(self._duration, self._duration_over, clock=self._steady)
        self.get_logger().info(
            f"recording {topic.resolved} ({type_name(topic.message_class)}, "
            f"{topic.qos.reliability.name.lower().replace('_', ' ')}, "
            f"{topic.qos.durability.name.lower().replace('_', ' ')}; {len(publishers)} publisher(s))")

    def _check_later_publishers(self, topic: RecordedTopic, publishers) -> None:
        for info in publishers:
            key = f"{info.node_namespace.rstrip('/')}/{info.node_name}"
            if info.topic_type != type_name(topic.message_class):
                self._say_once(topic, key, f"{key} publishes {topic.resolved} as {info.topic_type}, not "
                                           f"{type_name(topic.message_class)}: not recorded")
                continue
            compatibility, reason = qos_check_compatible(info.qos_profile, topic.qos)
            if compatibility == QoSCompatibility.ERROR:
                self._say_once(topic, key, f"{key} publishes {topic.resolved} with a QoS this recording cannot "
                                           f"hear ({reason}): not recorded; record again with it running")

    def _say_once(self, topic: RecordedTopic, key: str, message: str) -> None:
        if key not in topic.warned:
            topic.warned.add(key)
            self.get_logger().warning(message)

    def written_and_lost(self) -> tuple[int, int]:
        """(messages in the bag, messages received and not in it) of all topics."""
        written = sum(self.bag.count(topic.connection) for topic in self.topics if topic.connection is not None)
        return written, sum(topic.received for topic in self.topics) - written

    def summary(self) -> str:
        """One line per topic: what was recorded of it (and lost: received,
        not in the bag; missed: never received)."""
        lines = []
        for topic in self.topics:
            if topic.connection is None:
                lines.append(f"  {topic.resolved}: no publisher seen, nothing recorded")
            else:
                written = self.bag.count(topic.connection)
                lost = topic.received - written
                lines.append(f"  {topic.resolved} ({type_name(topic.message_class)}): {written} messages"
                             + (f", {lost} lost" if lost else "")
                             + (f", {topic.sequences.lost} missed" if topic.sequences.lost else ""))
        return "\n".join(lines)


def type_name(message_class: type) -> str:
    """pkg/msg/Type of a message class."""
    package = message_class.__module__.split(".")[0]
    return f"{package}/msg/{message_class.__name__}"


def add_topic(bag: BagWriter, topic: str, message_class: type, offered_qos: list[QoSProfile]):
    """The bag's connection for `topic`, of the type of `message_class`,
    offered with `offered_qos` (OSError: no definition of the type;
    WriterError once writing has failed)."""
    know_type(bag.typestore, message_class)
    return bag.add_topic(topic, type_name(message_class), [bag_qos(qos) for qos in offered_qos])


def know_type(typestore, message_class: type) -> None:
    """Register in rosbags' `typestore` the type of `message_class`, and the
    types it holds, that it lacks, from their installed interface files."""
    name = type_name(message_class)
    if name in typestore.fielddefs:
        return
    for held in held_types(message_class):
        know_type(typestore, held)
    typestore.register(get_types_from_msg(interface_file(name).read_text(), name))


def message_class(name: str) -> type:
    """The message class of `name` (pkg/msg/Type or pkg/Type); ValueError if
    none is installed."""
    parts = name.split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or parts[1] != "msg" or not all(parts):
        raise ValueError(f"'{name}' is not a message type (package/msg/Type)")
    try:
        return getattr(importlib.import_module(f"{parts[0]}.msg"), parts[2])
    except (ImportError, AttributeError):
        raise ValueError(f"no message type {'/'.join(parts)} is installed") from None


def held_types(message_class: type) -> list[type]:
    """The message classes of the fields of `message_class` (in arrays and
    sequences too)."""
    from rosidl_parser.definition import NamespacedType

    held = []
    for slot in message_class.SLOT_TYPES:
        while hasattr(slot, "value_type"):
            slot = slot.value_type
        if isinstance(slot, NamespacedType):
            held.append(message_class_of(slot))
    return held


def message_class_of(slot) -> type:
    return getattr(importlib.import_module(".".join(slot.namespaces)), slot.name)


def interface_file(name: str) -> Path:
    """The installed .msg file of pkg/msg/Type: share/pkg/msg/Type.msg under
    an ament prefix or this Python's; OSError if there is none."""
    package, _, kind = name.split("/")
    prefixes = [*os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep), sys.prefix]
    for prefix in filter(None, prefixes):
        path = Path(prefix, "share", package, "msg", f"{kind}.msg")
        if path.is_file():
            return path
    raise OSError(f"its interface file share/{package}/msg/{kind}.msg is not under {', '.join(filter(None, prefixes))}")


def subscription_qos(offered: list[QoSProfile]) -> QoSProfile:
    """A QoS that hears every publisher offering `offered`: reliable only if
    all are, transient local only if all are; RECORD_DEPTH deep."""
    reliable = all(qos.reliability == ReliabilityPolicy.RELIABLE for qos in offered)
    latched = all(qos.durability == DurabilityPolicy.TRANSIENT_LOCAL for qos in offered)
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=RECORD_DEPTH,
                      reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)


def bag_qos(qos: QoSProfile) -> Qos:
    """A publisher's offered QoS (rclpy's) as the bag's metadata holds it."""

    def duration(value) -> QosTime:
        return QosTime(*divmod(value.nanoseconds, 1_000_000_000))

    return Qos(QosHistory[qos.history.name], qos.depth, QosReliability[qos.reliability.name],
               QosDurability[qos.durability.name], duration(qos.deadline), duration(qos.lifespan),
               QosLiveliness[qos.liveliness.name], duration(qos.liveliness_lease_duration),
               qos.avoid_ros_namespace_conventions)


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = OneLineErrorParser(prog="mbs_dynamics_record",
                           description="Record topics to a ROS 2 bag (rosbag2 version 9) until Ctrl-C.")
    parser.add_argument("topics", nargs="+", metavar="TOPIC[:TYPE]",
                        help="topics relative to the namespace; TYPE (pkg/msg/Type) when the graph should not "
                             "tell it")
    parser.add_argument("--output", "-o", metavar="DIR", default=time.strftime("rosbag2_%Y_%m_%d-%H_%M_%S"),
                        help="the bag's directory, which must not exist (default: rosbag2_<date>-<time>)")
    parser.add_argument("--storage", "-s", choices=tuple(STORAGES), default="mcap", help="default: mcap")
    parser.add_argument("--duration", "-d", type=float, default=0.0, metavar="S",
                        help="stop S seconds (wall clock) after recording began (default: at Ctrl-C)")
    parser.add_argument("--use-sim-time", action="store_true", help="stamp messages with /clock's time")
    arguments = parser.parse_args(argv)
    if not 0 <= arguments.duration < float("inf"):
        parser.error("--duration must be finite and >= 0")
    arguments.topics = [tuple(topic.split(":", 1)) if ":" in topic else (topic, None) for topic in arguments.topics]
    for name, kind in arguments.topics:
        try:
            validate_topic_name(name)
            if kind is not None:
                message_class(kind)
        except (InvalidTopicNameException, ValueError) as error:
            parser.error(str(error).replace("\n", " "))
    if os.path.lexists(arguments.output):
        parser.error(f"--output {arguments.output} exists already: give a new directory")
    try:
        check_writable(arguments.output, "the bag")
    except FileProblem as error:
        parser.error(f"--output: {error}")
    return arguments


def main(argv: list[str] | None = None) -> None:
    argv, ros_args = split_ros_args(sys.argv[1:] if argv is None else argv)
    arguments = parse_arguments(argv)
    bags: list[BagWriter] = []
    recorders: list[BagRecorder] = []

    def recorder(stop):  # the bag made once ROS has started: nothing is left on disk when it cannot
        try:
            bags.append(BagWriter(arguments.output, arguments.storage))
        except FileProblem as error:
            raise ParameterError(f"--output: {error}") from None
        recorders.append(BagRecorder("bag_recorder", bags[0], arguments.topics, arguments.duration, stop=stop,
                                     parameter_overrides=[Parameter("use_sim_time", value=True)]
                                     if arguments.use_sim_time else []))
        return recorders[0]

    try:
        code = spin_nodes([recorder], args=["mbs_dynamics_record", *ros_args])
    finally:
        closing(bags)
    for bag in bags:
        written, lost = recorders[0].written_and_lost() if recorders else (0, 0)
        if bag.error is not None:
            print(f"mbs_dynamics_record: error: {bag.error}; the bag holds the {written} messages written before "
                  f"(readable), {lost} received were lost", file=sys.stderr)
            code = 1
        print(f"bag {bag.path} ({arguments.storage}):")
        print(recorders[0].summary() if recorders else "  nothing recorded")
    sys.exit(code)


def closing(bags: list[BagWriter]) -> None:
    """Close the bags; from here on Ctrl-C and SIGTERM are said and the
    process ends by itself, once the bags are closed (a bag cut short while
    closing would be unreadable)."""
    def wait(signum, frame) -> None:
        if any(bag.closing for bag in bags):
            print(f"mbs_dynamics_record: closing the bag {', '.join(str(bag.path) for bag in bags)}; it is "
                  "readable once closed", file=sys.stderr)

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, wait)
    for bag in bags:
        bag.close()
    ignore_interrupts()  # closed: the process ends now (even while Python finalizes)


if __name__ == "__main__":
    main()
