"""The simulator node in its own process, as the simulator tests drive it:
Simulator (its services, commands and joint_states in the root namespace)
and SimulatorProcess (in a namespace of its own, commanded as
topic_based_ros2_control does)."""
from __future__ import annotations

import time

from oracles import robot_path
from ros_processes import executable, wait_for_node

class Simulator:
    """A simulator process and what its test needs from it."""

    def __init__(self, start_process, test_node, robot, name, *parameters, remaps=(), watch_states=True):
        from mbs_dynamics_interfaces.srv import SetState, Step
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray
        from std_srvs.srv import SetBool, Trigger

        self.node, self.name = test_node, name
        self.process = start_process([
            executable("simulator_node"), "--ros-args", "-r", f"__node:={name}",
            "-p", f"robot_description_file:={robot_path(robot)}", "-p", "diagnostics_period:=0.2",
            *[a for r in remaps for a in ("-r", r)], *[a for p in parameters for a in ("-p", p)]])
        self.process.wait_for(f"\\[{name}\\]: simulating")
        wait_for_node(test_node, name)
        self.states = []
        if watch_states:
            self.watch_states()
        self.command = test_node.create_publisher(Float64MultiArray, f"/{name}/effort_command", 10)
        self.named_command = test_node.create_publisher(JointState, f"/{name}/joint_efforts", 10)
        self.clients = {"reset": test_node.create_client(Trigger, f"/{name}/reset"),
                        "set_state": test_node.create_client(SetState, f"/{name}/set_state"),
                        "pause": test_node.create_client(SetBool, f"/{name}/pause"),
                        "step": test_node.create_client(Step, f"/{name}/step")}
        self.kinds = {"reset": Trigger, "set_state": SetState, "pause": SetBool, "step": Step}
        for client in self.clients.values():
            assert client.wait_for_service(timeout_sec=60)

    def watch_states(self):
        from sensor_msgs.msg import JointState

        self.node.create_subscription(JointState, "/joint_states", self.states.append, 10)

    def call(self, service, **fields):
        import rclpy

        request = self.kinds[service].Request(**fields)
        future = self.clients[service].call_async(request)
        rclpy.spin_until_future_complete(self.node, future, timeout_sec=30)
        assert future.done(), f"{service} did not answer:\n{self.process.output}"
        return future.result()

    def spin(self, seconds):
        import rclpy

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.01)

    def latest_state(self, after: float = -1.0, timeout: float = 60.0):
        """The newest joint_states stamped after `after` (simulated s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.spin(0.02)
            if self.states and stamp(self.states[-1]) > after:
                return self.states[-1]
        raise AssertionError(f"no joint_states after t = {after}:\n{self.process.output}")


def stamp(message) -> float:
    return message.header.stamp.sec + 1e-9 * message.header.stamp.nanosec


def positions(model, message):
    q = model.neutral_configuration()
    for name, value in zip(message.name, message.position, strict=True):
        q[model.q_index(name)] = value
    return q


ARM = [f"panda_joint{k}" for k in range(1, 8)]
FINGERS = ["panda_finger_joint1"]  # the second follows it (a mimic joint)
QUADRUPED_JOINTS = [f"{leg}_{joint}" for leg in ("LF", "RF", "LH", "RH") for joint in ("HAA", "HFE", "KFE")]


class SimulatorProcess:
    """A simulator process, its topics and what the test heard."""

    def __init__(self, start_process, test_node, arguments, name="sim"):
        from sensor_msgs.msg import JointState

        self.test_node, self.name = test_node, name
        self.process = start_process([executable("simulator_node"), "--ros-args", "-r", f"__node:={name}",
                                      "-r", f"__ns:=/{name}_ns", "-p", "diagnostics_period:=0.2",
                                      *[a for p in arguments for a in ("-p", p)]])
        self.process.wait_for(f"\\[{name}_ns.{name}\\]: simulating")
        wait_for_node(test_node, name)
        self.states = []
        test_node.create_subscription(JointState, f"/{name}_ns/joint_states", self.states.append, 10)
        self.commands = test_node.create_publisher(JointState, f"/{name}_ns/joint_commands", 1)

    def spin(self, seconds):
        import rclpy

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rclpy.spin_once(self.test_node, timeout_sec=0.01)

    def state(self, after=0.0):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.spin(0.02)
            if self.states and self.states[-1].header.stamp.sec + 1e-9 * self.states[-1].header.stamp.nanosec > after:
                message = self.states[-1]
                return {n: (p, v, e) for n, p, v, e in zip(message.name, message.position, message.velocity,
                                                            message.effort, strict=True)}
        raise AssertionError(f"no joint_states after {after} s:\n{self.process.output}")

    def heard(self, kind, topic, count=1, timeout=60.0):
        """The first `count` messages on `topic`, from a subscription that is
        first matched with the node's publisher (discovery takes its time on a
        busy machine), then given a generous bound."""
        messages = []
        subscription = self.test_node.create_subscription(kind, topic, messages.append, 10)
        try:
            deadline = time.monotonic() + timeout
            while subscription.get_publisher_count() == 0 and time.monotonic() < deadline:
                self.spin(0.05)
            matched = subscription.get_publisher_count()
            while len(messages) < count and time.monotonic() < deadline:
                self.spin(0.02)
        finally:
            self.test_node.destroy_subscription(subscription)
        publishers = [(info.node_name, info.qos_profile.reliability.name)
                      for info in self.test_node.get_publishers_info_by_topic(topic)]
        assert len(messages) >= count, (
            f"{len(messages)} of {count} messages on {topic} in {timeout:g} s ({matched} publisher(s) matched; "
            f"in the graph: {publishers}):\n{self.process.output}")
        return messages


def topic_based_command(names, positions=(), velocities=(), efforts=()):
    """A JointState as TopicBasedSystem publishes it: every commanded joint
    named, each array holding only the joints with that command interface."""
    from sensor_msgs.msg import JointState

    return JointState(name=list(names), position=list(positions), velocity=list(velocities), effort=list(efforts))
