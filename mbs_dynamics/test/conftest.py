"""Shared fixtures. The ROS tests talk over real DDS in a domain chosen per run,
so that concurrent runs on one machine never hear each other."""
from __future__ import annotations

import os
import random
import signal
import subprocess

import pytest

from ros_processes import NodeProcess

# One domain per pytest process: pytest-xdist's workers (gw0, gw1, ...) take
# the ones after the run's first, which their controller chose before it
# started them (they inherit its environment).
if "MBS_TEST_DOMAIN_ID" not in os.environ:
    os.environ["MBS_TEST_DOMAIN_ID"] = str(random.SystemRandom().randint(1, 101 - 8))
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
os.environ["ROS_DOMAIN_ID"] = str(int(os.environ["MBS_TEST_DOMAIN_ID"]) + (int(WORKER[2:]) + 1 if WORKER else 0))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ["RCUTILS_LOGGING_BUFFERED_STREAM"] = "0"
os.environ["PYTHONUNBUFFERED"] = "1"

def pytest_report_header(config):
    return f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']}"


@pytest.fixture
def start_process():
    """start_process(command) -> NodeProcess; every process is stopped after the test."""
    processes: list[NodeProcess] = []

    def start(command: list[str]) -> NodeProcess:
        process = NodeProcess(command)
        processes.append(process)
        return process

    yield start
    for process in processes:
        if process.process.poll() is None:
            process.process.send_signal(signal.SIGINT)
            try:
                process.process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="session")
def ros_context():
    """rclpy's default context, initialised once for the test session. rclpy's
    signal handlers are left out: with them a SIGINT or SIGTERM that reaches
    the test process (a child's, or one sent to its process group) shuts the
    context down under every later test; without them Ctrl-C stops pytest as
    usual."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    yield
    rclpy.try_shutdown()


@pytest.fixture(autouse=True)
def ros_context_survives(request):
    """After each test that uses ROS in the test process: its rclpy context is
    still valid. A test that ends it fails here, by name, and the context is
    made again, so that the tests after it fail only for reasons of their own."""
    yield
    if "ros_context" not in request.fixturenames:
        return
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    if not rclpy.ok():
        rclpy.try_shutdown()
        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        pytest.fail(f"{request.node.nodeid} ended the test process's rclpy context", pytrace=False)


@pytest.fixture
def test_node(ros_context):
    """An rclpy node of the test process, on the same DDS domain as the nodes under test."""
    from rclpy.node import Node

    node = Node(f"mbs_test_{os.getpid()}_{random.randrange(1 << 30)}")
    yield node
    node.destroy_node()
