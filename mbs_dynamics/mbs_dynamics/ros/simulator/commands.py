"""The command formats the simulator takes, each a small adapter from one
message to a Command (efforts and the actuators' targets by velocity index);
InvalidInput, naming the joint, drops a bad one. A new format is one class
here and one line in COMMAND_FORMATS.

    ~/effort_command      std_msgs/Float64MultiArray, command_joints order
    ~/joint_efforts       sensor_msgs/JointState efforts by joint name
    joint_commands        sensor_msgs/JointState as topic_based_ros2_control's
                          TopicBasedSystem sends them (joint_commands_topic)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from mbs_dynamics.ros.conversions import InvalidInput, JointMap, interface_values, named_values

# The largest magnitude of a commanded position target (rad or m), velocity target (rad/s or m/s) or effort on a
# joint without a URDF effort limit (N m or N), and of a joint position or velocity of ~/set_state: beyond it a
# value is a mistake (1.7e308 as a position target overflowed the step and paused the simulation).
LARGEST_VALUE = 1e6


@dataclass(frozen=True)
class Command:
    """Efforts (nv,) and, when the format gives them, the actuators' position
    and velocity targets (nv,), by velocity index."""

    effort: np.ndarray
    position_target: np.ndarray | None = None
    velocity_target: np.ndarray | None = None


class CommandFormat:
    """One message type on one topic (relative to the node's namespace)."""

    MESSAGE: type
    TOPIC: str

    def __init__(self, node):
        self.node = node
        self.joints: JointMap = node.joints

    @property
    def topic(self) -> str:
        return self.TOPIC

    def command(self, message, last: Command) -> Command:
        """The command of `message` (`last`: the efforts and targets in force);
        InvalidInput if it cannot be used."""
        raise NotImplementedError


class EffortArray(CommandFormat):
    """Efforts in command_joints order."""

    MESSAGE, TOPIC = Float64MultiArray, "~/effort_command"

    def command(self, message, last):
        order = self.node.settings.command_order
        values = np.asarray(message.data, dtype=float)
        if values.shape != order.shape:
            raise InvalidInput("invalid", f"~/effort_command has {values.size} values for {order.size} "
                                          "command_joints")
        effort = np.zeros(self.node.model.nv)
        effort[order] = values
        return Command(effort)


class JointEfforts(CommandFormat):
    """Efforts by joint name, every joint given (the inverse dynamics node's output)."""

    MESSAGE, TOPIC = JointState, "~/joint_efforts"

    def command(self, message, last):
        match = self.joints.match(message.name)
        if match.missing:
            raise InvalidInput("missing_joint", f"~/joint_efforts lacks joints {list(match.missing)}")
        efforts = named_values(match, message.effort, "~/joint_efforts effort", message.name)
        if efforts is None:
            raise InvalidInput("invalid", "~/joint_efforts has no efforts")
        effort = np.zeros(self.node.model.nv)
        effort[match.v_index] = efforts
        return Command(effort)


class JointCommands(CommandFormat):
    """As TopicBasedSystem sends them: the named joints' positions (of
    position_joints), velocities (of velocity and position joints) and
    efforts (of the others, and feedforward); a joint not named keeps its
    last command; unknown joints are counted, the others applied."""

    MESSAGE = JointState

    @property
    def topic(self) -> str:
        return self.node.parameter("joint_commands_topic")

    def command(self, message, last):
        settings, what, model = self.node.settings, self.topic, self.node.model
        names = list(message.name)
        match = self.joints.match(names)
        if match.unknown:
            self.node.drop("unknown_joint", f"{what} names joints the model does not have: {list(match.unknown)}; "
                                            "the others are applied")
        position_joints, velocity_joints = settings.position_joints, settings.velocity_joints
        positions = interface_values(names, message.position, (position_joints,), f"{what} position")
        velocities = interface_values(names, message.velocity, (velocity_joints, position_joints | velocity_joints),
                                      f"{what} velocity")
        efforts = interface_values(names, message.effort, (settings.effort_joints,), f"{what} effort")
        effort, position_target, velocity_target = (last.effort.copy(), last.position_target.copy(),
                                                    last.velocity_target.copy())
        known = set(self.joints.names)
        for name, value in efforts.items():
            if name in known:
                effort[model.v_index(name)] = value
        for name, value in positions.items():
            if name in position_joints:
                position_target[model.v_index(name)] = value
        for name, value in velocities.items():
            if name in position_joints or name in velocity_joints:
                velocity_target[model.v_index(name)] = value
        return Command(effort, position_target, velocity_target)


# Every format the simulator subscribes to.
COMMAND_FORMATS = (EffortArray, JointEfforts, JointCommands)


def check_large(values: np.ndarray, checked: np.ndarray, joints: JointMap, what: str) -> None:
    """InvalidInput naming the first joint whose value (by velocity index) is
    beyond LARGEST_VALUE where `checked`, or not finite."""
    wrong = ~np.isfinite(values) | ((np.abs(values) > LARGEST_VALUE) & checked)
    if wrong.any():
        index = int(np.flatnonzero(wrong)[0])
        name = joints.model.velocity_joint(index)
        raise InvalidInput("invalid", f"{what} of '{name}' is {values[index]:g}: "
                                      + ("not finite" if not np.isfinite(values[index])
                                         else f"too large (at most {LARGEST_VALUE:g} in magnitude)"))


def clamped_command(command: Command, joints: JointMap, what: str) -> tuple[Command, list[str]]:
    """(The command with its efforts clamped to the URDF effort limits, the
    joints clamped); InvalidInput for a value not finite or beyond
    LARGEST_VALUE (an effort only where no limit clamps it)."""
    limit = joints.effort_limit
    check_large(command.effort, ~np.isfinite(limit), joints, f"{what}: the effort")
    if command.position_target is not None:
        everywhere = np.ones(joints.model.nv, dtype=bool)
        check_large(command.position_target, everywhere, joints, f"{what}: the position target")
        check_large(command.velocity_target, everywhere, joints, f"{what}: the velocity target")
    over = np.abs(command.effort) > limit
    if not over.any():
        return command, []
    names = [name for name, index in zip(joints.names, joints.v_index, strict=True) if over[index]]
    return Command(np.clip(command.effort, -limit, limit), command.position_target, command.velocity_target), names
