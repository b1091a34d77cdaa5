"""How the nodes are served: an executor on a thread of its own that stops
when asked (rclpy's EventsExecutor among them, whose
spin_until_future_complete without a timeout never returns and whose
shutdown hangs while it spins), and subscriptions served apart from their
node, on its resolved topics."""
from __future__ import annotations

import threading
import time

import pytest
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.experimental import EventsExecutor
from rclpy.task import Future
from std_msgs.msg import String

from mbs_dynamics.ros.spinning import STOP_TIMEOUT, ExecutorThread, SubscriptionsThread


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
