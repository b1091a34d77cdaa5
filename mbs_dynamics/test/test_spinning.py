"""How the nodes are served: an executor on a thread of its own that stops
when asked (rclpy's EventsExecutor among them, whose
spin_until_future_complete without a timeout never returns and whose
shutdown hangs while it spins), and subscriptions served apart from their
node, on its resolved topics. The process (spin_nodes, in processes of
their own): a node that is not essential fails alone, Ctrl-C during the
creation, twice back to back and again later, and arguments rcl or the
bringup cannot read, never a traceback."""
from __future__ import annotations

import re
import signal
import threading
import time

import pytest
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.experimental import EventsExecutor
from rclpy.task import Future
from ros_processes import executable
from std_msgs.msg import String

from mbs_dynamics.ros.spinning import STOP_GRACE, STOP_TIMEOUT, ExecutorThread, SubscriptionsThread


@pytest.mark.parametrize("kind", [EventsExecutor, SingleThreadedExecutor, MultiThreadedExecutor])
def test_an_executor_thread_serves_its_nodes_and_stops_at_once(test_node, kind):
    ticks = threading.Event()
    test_node.create_timer(0.01, ticks.set)
    served = ExecutorThread(kind(), [test_node], Future(), "test executor")
    try:
        assert ticks.wait(30.0), "the timer never ran"
    finally:
        start = time.monotonic()
        served.stop()
        stopped_in = time.monotonic() - start
    assert not served.is_alive()
    assert stopped_in < STOP_TIMEOUT / 2, f"stopping took {stopped_in:.2f} s"


def test_subscriptions_thread_takes_the_nodes_topics_with_its_remappings(ros_context):
    import rclpy

    node = rclpy.create_node("subscriber", namespace="/spinning_test",
                             cli_args=["--ros-args", "-r", "~/commands:=/spinning_test/remapped"])
    received = []
    arrived = threading.Event()

    def on_message(message):
        received.append((message.data, threading.current_thread().name))
        arrived.set()

    subscriptions = SubscriptionsThread(node, [(String, "~/commands", on_message)], 10)
    publisher = node.create_publisher(String, "/spinning_test/remapped", 10)
    try:
        deadline = time.monotonic() + 30.0
        while not arrived.is_set() and time.monotonic() < deadline:
            publisher.publish(String(data="hello"))
            arrived.wait(0.1)
    finally:
        subscriptions.destroy()
        node.destroy_node()
    assert received, "nothing arrived on the remapped topic"
    assert received[0] == ("hello", "subscriptions of subscriber")


@pytest.mark.parametrize("kind", [EventsExecutor, SingleThreadedExecutor])
def test_an_error_escaping_a_callback_stops_the_process_and_says_why(test_node, kind):
    """The stop future gets the error (spin_nodes then exits with 1), or on_error is told."""
    def fail():
        raise RuntimeError("broken callback")

    timer = test_node.create_timer(0.01, fail)
    stop = Future()
    served = ExecutorThread(kind(), [test_node], stop, "failing executor")
    try:
        served.thread.join(30.0)
        assert stop.done() and "failing executor: RuntimeError: broken callback" in stop.result()
        assert not served.is_alive()
    finally:
        served.stop()
        test_node.destroy_timer(timer)
    told = []
    timer = test_node.create_timer(0.01, fail)
    served = ExecutorThread(kind(), [test_node], Future(), "watched executor", on_error=told.append)
    try:
        served.thread.join(30.0)
        assert told == ["watched executor: RuntimeError: broken callback"]
    finally:
        served.stop()
        test_node.destroy_timer(timer)


# --- the process: arguments, interrupts, a node that is not essential --------------------------

# A process of toy nodes served by spin_nodes (argv: the nodes, comma-separated, from talker: publishes
# /spinning_test/talk 20 times a second, slow_stop: so does, and takes a minute to stop; breaking: not
# essential, its timer raises at 2 Hz; slow_start: a talker that takes 3 s to be created).
PROCESS = r"""
import sys, time
from rclpy.experimental import EventsExecutor
from std_msgs.msg import String
from mbs_dynamics.ros.robot_node import ProcessNode
from mbs_dynamics.ros.spinning import spin_nodes

class Talker(ProcessNode):
    def __init__(self, name, stop, slow_stop=False):
        super().__init__(name, stop=stop)
        self.slow_stop = slow_stop
        publisher = self.create_publisher(String, "/spinning_test/talk", 10)
        self.create_timer(0.05, lambda: publisher.publish(String(data=name)))
        print(f"{name} created", flush=True)

    def stopping(self):
        print(f"{self.get_name()} stopping", flush=True)
        if self.slow_stop:
            time.sleep(60)

class Breaking(ProcessNode):
    ESSENTIAL = False
    EXECUTOR = EventsExecutor

    def __init__(self, stop):
        super().__init__("breaking", stop=stop)
        self.create_timer(0.5, self.tick)

    def tick(self):
        raise RuntimeError("broken drawing")

    def switch_off(self, reason):
        self.get_logger().error(f"{reason}; switched off")

def slow_start(stop):
    print("creating slowly", flush=True)
    time.sleep(3)
    return Talker("slow_start", stop)

factories = {"talker": lambda stop: Talker("talker", stop), "slow_stop": lambda stop: Talker("slow", stop, True),
             "breaking": Breaking, "slow_start": slow_start}
sys.exit(spin_nodes([factories[name] for name in sys.argv[1].split(",")], args=["spinning_test"]))
"""


def toy_process(start_process, nodes: str):
    import sys

    return start_process([sys.executable, "-c", PROCESS, nodes])


def heard(test_node, count: int, timeout: float = 30.0) -> None:
    """`count` messages on /spinning_test/talk arrive."""
    import rclpy

    received = []
    subscription = test_node.create_subscription(String, "/spinning_test/talk", received.append, 50)
    try:
        deadline = time.monotonic() + timeout
        while len(received) < count:
            assert time.monotonic() < deadline, f"{len(received)} of {count} messages in {timeout} s"
            rclpy.spin_once(test_node, timeout_sec=0.05)
    finally:
        test_node.destroy_subscription(subscription)


def test_a_node_that_is_not_essential_fails_alone(start_process, test_node):
    """Beside an essential node, the failure of one that is not (the view)
    is said once and switches it off; the other serves on. Alone, it stops
    its process (exit code 1), said in one line."""
    process = toy_process(start_process, "talker,breaking")
    process.wait_for("executor of breaking: RuntimeError: broken drawing; switched off", 60)
    heard(test_node, 40)
    assert process.process.poll() is None
    assert process.interrupt() == 0
    assert process.output.count("switched off") == 1 and "Traceback" not in process.output
    alone = toy_process(start_process, "breaking")
    assert alone.wait_exit(60) == 1
    assert "[FATAL]" in alone.wait_for("executor of breaking: RuntimeError: broken drawing; stopping", 1)[0]
    assert "Traceback" not in alone.output


def test_ctrl_c_while_a_node_is_created_stops_it_in_order_and_creates_no_more(start_process):
    process = toy_process(start_process, "slow_start,talker")
    process.wait_for("creating slowly", 60)
    assert process.interrupt(timeout=30) == 0
    assert "slow_start stopping" in process.output and "talker created" not in process.output
    assert "Traceback" not in process.output


def test_a_second_interrupt_after_the_grace_stops_at_once(start_process, test_node):
    """A node that takes a minute to stop: Ctrl-C starts the orderly stop;
    another one STOP_GRACE after it ends the process at once (130), said in
    one line."""
    from mbs_dynamics.ros.spinning import INTERRUPTED_AGAIN

    process = toy_process(start_process, "slow_stop")
    heard(test_node, 5, 60)
    process.process.send_signal(signal.SIGINT)
    process.wait_for("slow stopping", 30)
    deadline = time.monotonic() + 30
    while process.process.poll() is None and time.monotonic() < deadline:
        process.process.send_signal(signal.SIGINT)
        time.sleep(0.2)
    assert process.wait_exit(10) == INTERRUPTED_AGAIN
    assert "interrupted again: stopped at once, without the orderly stop" in process.output
    assert "Traceback" not in process.output


@pytest.mark.parametrize("command", ["mbs_dynamics_view", "simulator_node", "inverse_dynamics_node",
                                     "dynamics_server_node", "mbs_dynamics_bringup"])
def test_arguments_rcl_cannot_parse_are_one_line(start_process, command):
    process = start_process([executable(command), "--ros-args", "-p", "port:=[1,"])
    assert process.wait_exit(60) == 2
    lines = [line for line in process.lines if "[rcl]" not in line]  # rcl's own log line, then ours
    assert lines == [f"{command}: error: --ros-args: failed to initialize rcl: Couldn't parse parameter override "
                     "rule: '-p port:=[1,'. Error: Error parsing an event"], process.output


@pytest.mark.parametrize("content, says", [
    ("/**:\n  ros__parameters:\n    world_boxes: [" + ", ".join(["1.0"] * 100_001) + "]\n",
     "has an array of more than 100000 values (line 3)"),
    ("/**:\n  ros__parameters:\n    a: &x [1.0, 2.0]\n    b: *x\n", "uses a YAML alias (*x): write the value out"),
    ("/**:\n  ros__parameters:\n    a: [1, 2\n", "is not YAML: while parsing a flow sequence"),
    (None, "cannot read params file /dev/zero: not a regular file"),
])
def test_a_params_file_rcl_would_parse_without_end_is_refused_in_one_line(start_process, tmp_path, content, says):
    """100,000 world_boxes in a params file kept rcl's parser busy for over
    400 s, /dev/zero for ever, before any of our code ran: now a line and
    exit code 2 within seconds, for a node and for the bringup's --config."""
    path = "/dev/zero"
    if content is not None:
        path = tmp_path / "params.yaml"
        path.write_text(content)
    for command in (["simulator_node", "--ros-args", "--params-file", str(path)],
                    ["mbs_dynamics_bringup", "--robot", "arm7", "--ros-args", "--params-file", str(path)]):
        started = time.monotonic()
        process = start_process([executable(command[0]), *command[1:]])
        assert process.wait_exit(60) == 2
        assert time.monotonic() - started < 30.0
        expected = f"{command[0]}: error: --params-file: " + (f"params file {path} {says}" if content else says)
        assert len(process.lines) == 1 and process.lines[0].startswith(expected), process.output


def test_a_node_parameter_the_bringup_cannot_read_is_one_line(start_process):
    for value, why in (("[1,", "expected the node content, but found '<stream end>'"),
                       ("{a: 1}", "The given value is not one of the allowed types '{'a': 1}'.")):
        process = start_process([executable("mbs_dynamics_bringup"), "--robot", "arm7", "--ros-args",
                                 "-p", f"view:port:={value}"])
        assert process.wait_exit(60) == 2
        assert process.lines == [f"mbs_dynamics_bringup: error: -p view:port:={value}: '{value}' is not a parameter "
                                 f"value ({why})"], process.output


@pytest.mark.parametrize("command", [["mbs_dynamics_view"], ["mbs_dynamics_bringup", "--nodes", "simulator", "--view"]])
def test_two_interrupts_back_to_back_stop_in_order(start_process, command, tmp_path):
    """Ctrl-C, then repeats from 5 ms on (a terminal and ros2 launch both send
    one; an impatient user more): the orderly stop, the recording written,
    exit code 0, no traceback."""
    import mbs_dynamics as mbs

    record = tmp_path / "run.html"
    arguments = ["--robot", "arm7", "--record", str(record), "--ros-args", "-p", "view:port:=0"] \
        if "mbs_dynamics_bringup" in command else \
        ["--ros-args", "-p", f"robot_description_file:={mbs.bundled_robot('arm7')}", "-p", "port:=0",
         "-p", f"record_file:={record}"]
    process = start_process([executable(command[0]), *command[1:], *arguments])
    process.wait_for("open http://", 60)
    process.process.send_signal(signal.SIGINT)
    first = time.monotonic()
    time.sleep(0.005)
    # Repeats within the grace, while it stops and while Python ends it (which once killed it: exit -2)
    while time.monotonic() - first < 0.8 * STOP_GRACE and process.process.poll() is None:
        process.process.send_signal(signal.SIGINT)
        time.sleep(0.01)
    assert process.wait_exit(60) == 0, process.output
    assert "Traceback" not in process.output and "KeyboardInterrupt" not in process.output
    process.wait_for(rf"view: wrote {re.escape(str(record))} ", 1)
    assert record.is_file()
