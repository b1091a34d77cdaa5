"""Node executables in their own processes, and what the tests ask of them."""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def executable(name: str) -> str:
    """A console script of this environment."""
    path = BIN / name
    if not path.exists():
        found = shutil.which(name)
        assert found, f"console script {name} is not installed"
        return found
    return str(path)


def wait_for_node(test_node, name: str, timeout: float = 15.0) -> None:
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
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
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

    def wait_for(self, pattern: str, timeout: float = 20.0, count: int = 1) -> list[str]:
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

    def wait_exit(self, timeout: float = 20.0) -> int:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{' '.join(self.command)} did not exit; output:\n{self.output}") from None
        self._reader.join(5)
        return code

    def interrupt(self, timeout: float = 20.0) -> int:
        """Ctrl-C, as a person stops a node; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.wait_exit(timeout)

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def set_parameters(test_node, node_name: str, **values) -> dict:
    """Set parameters of the node `node_name` (fully qualified) one request
    each, through its parameter service; {name: (successful, reason)}."""
    import rclpy
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    client = test_node.create_client(SetParameters, f"{node_name}/set_parameters")
    try:
        assert client.wait_for_service(timeout_sec=15.0), f"{node_name}/set_parameters not available"
        results = {}
        for name, value in values.items():
            future = client.call_async(SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()]))
            rclpy.spin_until_future_complete(test_node, future, timeout_sec=15.0)
            assert future.done(), f"{node_name}/set_parameters did not answer"
            result = future.result().results[0]
            results[name] = (result.successful, result.reason)
        return results
    finally:
        test_node.destroy_client(client)
