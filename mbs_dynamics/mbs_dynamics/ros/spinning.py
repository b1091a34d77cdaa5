"""A process of nodes: rclpy initialised, the nodes created and served, each
by the executor its class asks for (ProcessNode.EXECUTOR) on a thread of its
own, until Ctrl-C (or SIGTERM) or a node's finish() or fatal error, and an
orderly stop; and a console command's arguments split from rcl's.

A node whose class says it is not ESSENTIAL (the view) never stops the
others: beside them, its failure switches it off alone (switch_off).
Nothing reaches the user as a traceback: arguments rcl cannot parse and a
node that cannot be created are one line. Ctrl-C stops in order, as soon as
the node being created is (no node after it is); a repeat within STOP_GRACE
of the first is the same request (ros2 launch and the terminal both send
one), a later one ends the process at once, without the orderly stop; once
stopped, the ending process ignores them."""
from __future__ import annotations

import atexit
import faulthandler
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from itertools import groupby
from pathlib import Path

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future

from mbs_dynamics.files import read_file
from mbs_dynamics.ros.parameters import ParameterError
from mbs_dynamics.ros.robot_node import ProcessNode, freeze_start_up_objects, start_up_done

# The longest a thread waits for the GIL that another holds (Python's default:
# 5 ms). The nodes' threads (the simulator's stepping, its commands) give it
# up at every sleep, take and publish, and a busy executor thread kept each of
# them waiting up to 5 ms for it back: the simulator reached 0.4-1.3x real
# time of the 2x asked.
GIL_SWITCH_INTERVAL = 0.0005
# The longest one spin of an executor lasts (s) before its thread looks again
# whether to stop: rclpy's EventsExecutor never returns from
# spin_until_future_complete without a timeout, even once the future is done.
SPIN_TIMEOUT = 1.0
# The longest the stop waits for a thread or an executor (s).
STOP_TIMEOUT = 5.0
# Ctrl-Cs (or SIGTERMs) this close (s) after the first are the same request;
# a later one ends the process at once.
STOP_GRACE = 1.0
# Exit code of a process ended at once by a repeated interrupt (128 + SIGINT).
INTERRUPTED_AGAIN = 130
# The largest params file (--params-file) a process reads: it may carry a URDF (at most 64 MiB).
MAX_PARAMS_FILE_BYTES = 64 * 2**20
# The most values of one array in a params file (world_boxes at its cap: 7000); rcl's parser takes seconds
# for 100,000.
MAX_ARRAY_VALUES = 100_000


def essential(node) -> bool:
    """Whether the process stops when `node` fails: its class's ESSENTIAL
    (default True). One that is not (the view), served beside essential
    nodes, is told `switch_off(reason)` instead (its executor thread failed)
    and has switch_off_on_failure set, for its own fail()."""
    return getattr(type(node), "ESSENTIAL", True)


def check_params_files(args: Sequence[str]) -> None:
    """Each --params-file of the command line `args` is a regular file of at
    most MAX_PARAMS_FILE_BYTES whose arrays hold at most MAX_ARRAY_VALUES
    values each, without YAML aliases; ValueError (FileProblem, or what is
    wrong with the YAML) otherwise. rcl parses these files in C before any
    of our code runs, unbounded: /dev/zero never ends, and its time grows
    faster than the square of an array's length (70,000 numbers: 4 s;
    210,000: 101 s)."""
    import yaml

    _, ros_args = split_ros_args(args)
    paths = [ros_args[i + 1] for i, arg in enumerate(ros_args[:-1]) if arg == "--params-file"]
    for path in paths:
        text = read_file(path, "params file", MAX_PARAMS_FILE_BYTES)
        values: list[int] = []  # values so far in each array being read, outermost first
        try:
            for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
                if isinstance(event, yaml.AliasEvent):
                    raise ValueError(f"params file {path} uses a YAML alias (*{event.anchor}): write the value out")
                if isinstance(event, (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)) and values:
                    values[-1] += 1
                    if values[-1] > MAX_ARRAY_VALUES:
                        line = event.start_mark.line + 1 if event.start_mark else "?"
                        raise ValueError(f"params file {path} has an array of more than {MAX_ARRAY_VALUES} values "
                                         f"(line {line})")
                if isinstance(event, yaml.SequenceStartEvent):
                    values.append(0)
                elif isinstance(event, yaml.SequenceEndEvent):
                    values.pop()
        except yaml.YAMLError as error:
            raise ValueError(f"params file {path} is not YAML: {' '.join(str(error).split())}") from None


def schedule_realtime(priority: int) -> int:
    """The calling thread and the middleware's (Fast DDS names its threads
    dds.*: they take the messages in and wake the executor) scheduled
    SCHED_FIFO at `priority`, ahead of every normally scheduled thread of the
    machine; the process's other threads (other executors, numba's workers)
    keep theirs. Returns the middleware's threads raised; OSError when not
    permitted (root, CAP_SYS_NICE or an rtprio limit is needed)."""
    middleware = []
    for task in Path("/proc/self/task").iterdir():
        try:
            if task.joinpath("comm").read_text().startswith("dds."):
                middleware.append(int(task.name))
        except OSError:  # a thread that ended meanwhile
            pass
    parameter = os.sched_param(priority)
    os.sched_setscheduler(0, os.SCHED_FIFO, parameter)
    raised = 0
    for thread in middleware:
        try:
            os.sched_setscheduler(thread, os.SCHED_FIFO, parameter)
            raised += 1
        except ProcessLookupError:
            pass
    return raised


def executor_kind(node: ProcessNode) -> Callable:
    """What makes the executor of `node`: its class's EXECUTOR."""
    return type(node).EXECUTOR


def make_executor(kind: Callable, nodes: int):
    """An executor of `kind` (an EXECUTOR) for `nodes` nodes: a
    MultiThreadedExecutor gets a thread per node and two spare (with three
    nodes on two threads, rclpy's pool lost the callback of a
    robot_description that arrived while the other two loaded theirs)."""
    return MultiThreadedExecutor(num_threads=2 + nodes) if kind is MultiThreadedExecutor else kind()


class ExecutorThread:
    """An executor serving its nodes on a thread of its own until `stop` is
    done; stop() then waits for its callbacks and shuts it down. An error that
    escapes a callback ends the thread and is said: to on_error(message) when
    given, else as the result of `stop` (the process then exits with 1)."""

    def __init__(self, executor, nodes, stop: Future, name: str, on_error: Callable[[str], None] | None = None):
        self.executor, self.stop_future, self.on_error = executor, stop, on_error
        for node in nodes:
            executor.add_node(node)
        self.thread = threading.Thread(target=self._spin, name=name, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        try:
            while not self.stop_future.done():
                self.executor.spin_until_future_complete(self.stop_future, timeout_sec=SPIN_TIMEOUT)
        except ExternalShutdownException:
            pass
        except Exception as error:  # noqa: BLE001  a callback's error must not end the thread unsaid
            message = f"{self.thread.name}: {type(error).__name__}: {error}"
            if self.on_error is not None:
                self.on_error(message)
            else:
                rclpy.logging.get_logger("mbs_dynamics").fatal(f"{message}; stopping")
                if not self.stop_future.done():
                    self.stop_future.set_result(message)

    def is_alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self) -> None:
        """Stop spinning (the stop future done) and shut the executor down.
        Not from the executor's own thread."""
        if not self.stop_future.done():
            self.stop_future.set_result(None)
        self.thread.join(STOP_TIMEOUT)
        if not self.thread.is_alive():  # the EventsExecutor's shutdown hangs while it spins
            self.executor.shutdown(timeout_sec=STOP_TIMEOUT)


class SubscriptionsThread:
    """Subscriptions to topics of `node` served by an EventsExecutor on a
    thread of their own, not by the node's executor: their callbacks wait
    neither for the node's (a long service call) nor for its executor's turn.
    They belong to a hidden helper node; their topics are resolved by `node`
    (its name, namespace and remappings)."""

    def __init__(self, node: Node, topics, qos: QoSProfile, on_error: Callable[[str], None] | None = None):
        """topics: (message type, topic, callback(message)) each; on_error: as
        ExecutorThread's (by default the error is logged and the thread ends)."""
        self.helper = rclpy.create_node(f"_{node.get_name()}_subscriptions", namespace=node.get_namespace(),
                                        context=node.context, start_parameter_services=False,
                                        use_global_arguments=False)
        for kind, topic, callback in topics:
            self.helper.create_subscription(kind, node.resolve_topic_name(topic), callback, qos)
        self._thread = ExecutorThread(EventsExecutor(context=node.context), [self.helper], Future(),
                                      f"subscriptions of {node.get_name()}", on_error=on_error)

    def destroy(self) -> None:
        self._thread.stop()
        self.helper.destroy_node()


def spin_nodes(node_factories: Sequence[Callable[[Future], ProcessNode]], args=None) -> int:
    """Init rclpy, create the nodes, serve them until Ctrl-C (or SIGTERM) or a
    node's finish() or fatal error, and stop in order: the executors, then the
    nodes (their threads), then the context. rclpy's own signal handler would
    shut the context down at once, under callbacks still running (a log line
    then fails: "publisher's context is invalid"). Interrupts: the module
    docstring; the handler stays until the process ends (a command's work
    after this, such as closing a bag, is part of the orderly stop).

    Returns the process exit code: 0 after Ctrl-C or a node's finish(), 1
    when a node stopped on a fatal error, 2 when rcl refused the arguments.
    """
    # A crash in native code (rcl, DDS, a compiled kernel) prints every thread's Python stack on stderr
    faulthandler.enable(all_threads=True)
    program = os.path.basename(args[0]) if args else os.path.basename(sys.argv[0])
    try:
        check_params_files(sys.argv if args is None else args)
    except ValueError as error:
        print(f"{program}: error: --params-file: {error}", file=sys.stderr)
        return 2
    try:
        rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as error:  # noqa: BLE001  rcl's RCLError on arguments it cannot parse: one line
        reason = re.sub(r",? at [^,\s]+:\d+", "", str(error))  # rcl's source locations
        print(f"{program}: error: --ros-args: {reason}", file=sys.stderr)
        return 2
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    freeze_start_up_objects()
    stop = Future()
    interrupted = threading.Event()
    first_interrupt: list[float] = []

    def interrupt(signum, frame) -> None:
        if not first_interrupt:
            first_interrupt.append(time.monotonic())
            interrupted.set()
        elif time.monotonic() - first_interrupt[0] >= STOP_GRACE:
            os.write(2, b"interrupted again: stopped at once, without the orderly stop\n")
            os._exit(INTERRUPTED_AGAIN)

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, interrupt)
    # Python's finalization puts SIG_DFL back in place of a Python handler (not of SIG_IGN): a repeat
    # arriving then killed a process that had stopped in order (exit -2).
    atexit.register(ignore_interrupts)
    nodes: list[ProcessNode] = []
    threads: list[ExecutorThread] = []
    logger = rclpy.logging.get_logger("mbs_dynamics")
    try:
        for factory in node_factories:
            try:
                nodes.append(factory(stop))
            except (ParameterError, ValueError, TypeError) as error:  # rclpy's invalid names and values too
                message = str(error) if isinstance(error, ParameterError) else f"{type(error).__name__}: {error}"
                logger.fatal(f"{message}; stopping")
                stop.set_result(message)
            if stop.done() or interrupted.is_set():
                break
        if not (stop.done() or interrupted.is_set()):
            start_up_done()
            company = any(essential(node) for node in nodes)
            served = sorted(nodes, key=lambda node: id(executor_kind(node)))
            for kind, group in groupby(served, key=executor_kind):
                group = list(group)
                on_error = None
                if company and not any(essential(node) for node in group):
                    for node in group:
                        node.switch_off_on_failure = True
                    on_error = lambda message, group=group: [node.switch_off(message) for node in group]  # noqa: E731
                threads.append(ExecutorThread(make_executor(kind, len(group)), group, stop,
                                              f"executor of {', '.join(node.get_name() for node in group)}",
                                              on_error=on_error))
            watched = [thread for thread in threads if thread.on_error is None]
            while not (stop.done() or interrupted.is_set() or not all(thread.is_alive() for thread in watched)):
                interrupted.wait(0.1)
    except KeyboardInterrupt:
        pass
    finally:
        for node in nodes:
            node.stopping()
        failed = stop.done() and stop.result() is not None
        for thread in threads:
            thread.stop()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
    return 1 if failed else 0


def ignore_interrupts() -> None:
    """Ctrl-C and SIGTERM from now on change nothing: the process has stopped
    in order and is ending."""
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)


def split_ros_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """A console command's own arguments, and from --ros-args on those for rcl."""
    argv = list(argv)
    if "--ros-args" in argv:
        index = argv.index("--ros-args")
        return argv[:index], argv[index:]
    return argv, []


def node_main(node_class: type[ProcessNode], default_name: str) -> Callable[[], None]:
    """The console-script entry point of one node: NAME [--ros-args ...]."""

    def main(args=None) -> None:
        sys.exit(spin_nodes([lambda stop: node_class(default_name, stop=stop)], args=args))

    return main
