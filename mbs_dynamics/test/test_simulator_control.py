"""The simulator node as a ros2_control loop sees it, over real DDS in its own
process: position and velocity control by joint_commands shaped as
topic_based_ros2_control's TopicBasedSystem sends them (only the joints of
each command interface in each array), IMU and force-torque sensors, the
quadruped standing on its collision geometry under position control; bad
commands counted, the node serving on."""
from __future__ import annotations


import mbs_dynamics as mbs
import numpy as np
import pytest

from oracles import robot_path
from simulators import ARM, FINGERS, QUADRUPED_JOINTS, topic_based_command
from simulators import SimulatorProcess as Node

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
    # the mean of 20 readings (0.2 s): one reading, taken when the node's last chunk of steps came, once read
    # 9.696 in a CI run (the stance's last sway)
    imus = node.heard(Imu, "/dog_ns/imu/base_link", count=20)
    assert {imu.header.frame_id for imu in imus} == {"base_link"}
    acceleration = np.mean([[imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z]
                            for imu in imus], axis=0)
    assert np.allclose(acceleration, [0.0, 0.0, 9.81], atol=0.05), acceleration
    wrench = node.heard(WrenchStamped, "/dog_ns/ft/LF_HFE")[-1]
    assert wrench.header.frame_id == "LF_THIGH"
    # by symmetry each hip carries a quarter of the base and hips' weight, pushed down on the leg
    legs = {b for b in range(model.nbodies) if model.body_joint_names[b] not in ("root_joint",)
            and model.body_joint_names[b].endswith(("HFE", "KFE"))}
    above = model.mass.sum() - sum(model.mass[b] for b in legs)
    force = np.linalg.norm([wrench.wrench.force.x, wrench.wrench.force.y, wrench.wrench.force.z])
    assert force == pytest.approx(above * 9.81 / 4, rel=0.05)
