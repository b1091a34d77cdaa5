"""The nodes' parameters: each declared up front with its default, meaning
and, for a number, its range (ParameterSpec), so that rclpy refuses a value
outside it and `ros2 param describe` shows it.

A double parameter takes an integer as the double it means (`-p
real_time_factor:=2` at start-up, `ros2 param set ... 2` at run time).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.parameter import Parameter

# An empty array parameter: declared by its type (a params file cannot hold an
# empty array, and rclpy would take [] for a byte array); reads as [].
EMPTY_STRING_ARRAY = Parameter.Type.STRING_ARRAY
EMPTY_DOUBLE_ARRAY = Parameter.Type.DOUBLE_ARRAY


@dataclass(frozen=True)
class ParameterSpec:
    """A node parameter: its name, default (which fixes its type), meaning and,
    for a number, the closed interval `bounds` it must lie in."""

    name: str
    default: Any  # a value, or EMPTY_STRING_ARRAY / EMPTY_DOUBLE_ARRAY
    description: str
    read_only: bool = False
    bounds: tuple[float, float] | None = None

    @property
    def type(self) -> Parameter.Type:
        return self.default if isinstance(self.default, Parameter.Type) else Parameter.Type.from_parameter_value(
            self.default)

    @property
    def takes_doubles(self) -> bool:
        """Whether its value is a double or an array of doubles."""
        return isinstance(self.default, float) or self.default is EMPTY_DOUBLE_ARRAY or (
            isinstance(self.default, list) and bool(self.default) and isinstance(self.default[0], float))

    def descriptor(self) -> ParameterDescriptor:
        descriptor = ParameterDescriptor(description=self.description, read_only=self.read_only)
        if self.bounds is not None:
            low, high = self.bounds
            if isinstance(self.default, int) and not isinstance(self.default, bool):
                descriptor.integer_range = [IntegerRange(from_value=int(low), to_value=int(high))]
            else:
                descriptor.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high))]
            descriptor.additional_constraints = f"in [{low:g}, {high:g}]"
        return descriptor


# Parameters every node has.
COMMON_PARAMETERS = (
    ParameterSpec("robot_description", "",
                  "URDF XML of the robot. Empty: use robot_description_file, else wait for the "
                  "robot_description topic.", read_only=True),
    ParameterSpec("robot_description_file", "",
                  "Path of a URDF file, used when robot_description is empty.", read_only=True),
    ParameterSpec("robot_description_timeout", 0.0,
                  "Seconds to wait for the robot_description topic before giving up; 0 waits for ever.",
                  read_only=True, bounds=(0.0, 1e6)),
    ParameterSpec("floating_base", False,
                  "Add a floating root_joint (6 DoF) above the URDF root link: for legged and humanoid "
                  "robots.", read_only=True),
    ParameterSpec("mimic", "coupled",
                  "Mimic joints: 'coupled' (follow their master, no coordinate of their own) or "
                  "'independent' (free joints).", read_only=True),
    ParameterSpec("gravity", [0.0, 0.0, -9.81],
                  "Gravity in the world frame (m/s^2).", read_only=True),
    ParameterSpec("armature_joints", EMPTY_STRING_ARRAY,
                  "Joints whose armature (reflected rotor inertia) the armature parameter sets, over the "
                  "URDF's transmissions (drake:rotor_inertia x drake:gear_ratio^2).", read_only=True),
    ParameterSpec("armature", EMPTY_DOUBLE_ARRAY,
                  "The armature (kg m^2, or kg for a prismatic joint) of each of armature_joints, >= 0.",
                  read_only=True),
)


def diagnostics_period(clock: str = "") -> ParameterSpec:
    """The period of a node's /diagnostics status: at most 100 a second, at least one an hour."""
    return ParameterSpec("diagnostics_period", 1.0, f"Period (s{clock}) of the /diagnostics status.",
                         bounds=(0.01, 3600.0))


def realtime_priority() -> ParameterSpec:
    """The SCHED_FIFO priority of the thread that serves a node's input stream (RobotNode.raise_priority)."""
    return ParameterSpec("realtime_priority", 0,
                         "Real-time priority (SCHED_FIFO, 1-99) of the thread that serves joint_states and of the "
                         "middleware's (Fast DDS) threads: ahead of every normally scheduled process (a build, CPU "
                         "hogs); 0 = the normal scheduler. Needs the permission (root, CAP_SYS_NICE or an rtprio "
                         "limit); without it the node says so and runs normally.", read_only=True, bounds=(0, 99))


class ParameterError(ValueError):
    """A parameter given at start-up that the node cannot take (e.g. of the wrong type)."""


def declare_parameters(node: Node, specs: Iterable[ParameterSpec]) -> None:
    """Declare `specs` on `node`, with the values given at start-up (an
    integer for a double taken as that double); from then on an integer set
    for a double is taken as that double too. ParameterError on a value the
    node cannot take."""
    specs = {spec.name: spec for spec in specs}
    for spec in specs.values():
        try:
            if spec.takes_doubles:
                node.declare_parameter(spec.name, _start_value(node, spec), spec.descriptor(), ignore_override=True)
            else:
                node.declare_parameter(spec.name, spec.default, spec.descriptor())
        except (ParameterException, ValueError) as error:  # ValueError: a value outside its declared range
            raise ParameterError(f"parameter {spec.name}: {error}") from None
    node.add_pre_set_parameters_callback(
        lambda parameters: [as_declared_type(specs[p.name], p) if p.name in specs else p for p in parameters])


def _start_value(node: Node, spec: ParameterSpec) -> Any:
    """The value given for `spec` at start-up (-p, a params file, the node's
    parameter_overrides) as its declared type, else its default: read by
    declaring the parameter of any type, then undeclared."""
    given = node.declare_parameter(spec.name, None, ParameterDescriptor(dynamic_typing=True)).value
    node.undeclare_parameter(spec.name)
    if given is None:
        return spec.default
    value = as_declared_type(spec, Parameter(spec.name, value=given))
    if value.type_ != spec.type:  # (declared with it, the value would make the parameter its own type)
        raise ValueError(f"{given!r} is not of its type {spec.type.name}")
    return value.value


def as_declared_type(spec: ParameterSpec, parameter: Parameter) -> Parameter:
    """`parameter` with integers made doubles where `spec` declares doubles."""
    if spec.takes_doubles and parameter.type_ == Parameter.Type.INTEGER:
        return Parameter(parameter.name, Parameter.Type.DOUBLE, float(parameter.value))
    if spec.takes_doubles and parameter.type_ == Parameter.Type.INTEGER_ARRAY:
        return Parameter(parameter.name, Parameter.Type.DOUBLE_ARRAY, [float(x) for x in parameter.value])
    return parameter
