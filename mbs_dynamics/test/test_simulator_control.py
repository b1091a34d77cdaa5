"""The simulator node as a ros2_control loop sees it, over real DDS in its own
process: position and velocity control by joint_commands shaped as
topic_based_ros2_control's TopicBasedSystem sends them (only the joints of
each command interface in each array), IMU and force-torque sensors, the
quadruped standing on its collision geometry under position control; bad
commands counted, the node serving on."""
from __future__ import annotations

import time

import mbs_dynamics as mbs
import numpy as np
import pytest

from oracles import robot_path
from ros_processes import executable, wait_for_node

ARM = [f"panda_joint{k}" for k in range(1, 8)]
FINGERS = ["panda_finger_joint1"]  # the second follows it (a mimic joint)
QUADRUPED_JOINTS = [f"{leg}_{joint}" for leg in ("LF", "RF", "LH", "RH") for joint in ("HAA", "HFE", "KFE")]


class Node:
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


def test_the_panda_moves_to_commanded_positions_and_velocities(start_process, test_node):
    """Arm joints 2-7 under position control, joint 1 under velocity control,
    the finger under effort: one TopicBasedSystem-shaped message moves each
    joint as its interface says; a message whose arrays fit no interface is
    dropped and counted."""
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    node = Node(start_process, test_node, [
        f"robot_description_file:={robot_path('panda')}", f"position_joints:={ARM[1:]}",
        "velocity_joints:=[panda_joint1]", "command_timeout:=10.0"])
    start = node.state()
    targets = {"panda_joint2": 0.3, "panda_joint4": -1.8, "panda_joint6": 1.2}
    goal = [targets.get(joint, start[joint][0]) for joint in ARM[1:]]
    names = ARM + FINGERS
    message = topic_based_command(names, positions=goal, velocities=[0.2], efforts=[5.0])
    for _ in range(5):
        node.commands.publish(message)
        node.spin(0.05)
    node.spin(2.0)
    state = node.state()
    errors = [abs(state[joint][0] - value) for joint, value in zip(ARM[1:], goal, strict=True)]
    assert max(errors) < 0.02, errors  # the PD at 20 Hz against gravity, without feedforward
    assert state["panda_joint1"][1] == pytest.approx(0.2, abs=0.01)
    assert state["panda_finger_joint1"][2] == pytest.approx(min(5.0, model.effort_limit[model.v_index(FINGERS[0])]))
    node.commands.publish(topic_based_command(names, positions=[0.1, 0.2]))  # fits no interface: dropped
    node.process.wait_for("joint_commands position has 2 values for 8 names")
    assert node.process.process.poll() is None


def test_imu_and_force_torque_sensors_of_a_quadruped_held_standing(start_process, test_node):
    """The quadruped on its feet, its legs held by position control: its base
    IMU reads +g upwards at rest; the knee sensors of the four legs carry the
    weight of the body above them."""
    from geometry_msgs.msg import WrenchStamped
    from sensor_msgs.msg import Imu

    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    node = Node(start_process, test_node, [
        f"robot_description_file:={mbs.bundled_robot('quadruped')}", "floating_base:=true",
        "contact_frames:=[LF_FOOT, RF_FOOT, LH_FOOT, RH_FOOT]", "initial_base_pose:=[0.0, 0.0, 0.40, 0.0, 0.0, 0.0, 1.0]",
        f"position_joints:={QUADRUPED_JOINTS}", "imu_links:=[base_link]", "ft_joints:=[LF_HFE, RF_HFE]",
        "imu_rate:=100.0", "ft_rate:=50.0"], name="dog")
    node.state(after=1.0)  # standing for a simulated second
    imu = node.heard(Imu, "/dog_ns/imu/base_link")[-1]
    assert imu.header.frame_id == "base_link"
    acceleration = np.array([imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z])
    assert np.allclose(acceleration, [0.0, 0.0, 9.81], atol=0.05), acceleration
    wrench = node.heard(WrenchStamped, "/dog_ns/ft/LF_HFE")[-1]
    assert wrench.header.frame_id == "LF_THIGH"
    # by symmetry each hip carries a quarter of the base and hips' weight, pushed down on the leg
    legs = {b for b in range(model.nbodies) if model.body_joint_names[b] not in ("root_joint",)
            and model.body_joint_names[b].endswith(("HFE", "KFE"))}
    above = model.mass.sum() - sum(model.mass[b] for b in legs)
    force = np.linalg.norm([wrench.wrench.force.x, wrench.wrench.force.y, wrench.wrench.force.z])
    assert force == pytest.approx(above * 9.81 / 4, rel=0.05)
