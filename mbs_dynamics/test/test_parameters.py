"""Parameters declared from their specs: an integer given for a double, at
start-up (-p, a node's parameter_overrides) or at run time, is taken as the
double it means; a value of the wrong type is refused with its name."""
from __future__ import annotations

import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter

from mbs_dynamics.ros.parameters import (EMPTY_DOUBLE_ARRAY, ParameterError, ParameterSpec, declare_parameters)

SPECS = (ParameterSpec("rate", 1.5, "a double", bounds=(0.0, 10.0)),
         ParameterSpec("gains", EMPTY_DOUBLE_ARRAY, "doubles"),
         ParameterSpec("count", 3, "an integer"))


def node_with(ros_args=(), overrides=()) -> Node:
    return Node("parameters_test", cli_args=["--ros-args", *ros_args] if ros_args else None,
                parameter_overrides=list(overrides))


def test_integers_given_at_start_up_are_taken_as_doubles(ros_context):
    node = node_with(["-p", "rate:=2"], [Parameter("gains", value=[1, 2])])
    try:
        declare_parameters(node, SPECS)
        assert node.get_parameter("rate").type_ == Parameter.Type.DOUBLE
        assert node.get_parameter("rate").value == 2.0
        assert node.get_parameter("gains").value == [1.0, 2.0]
        assert node.get_parameter("count").value == 3
    finally:
        node.destroy_node()


def test_defaults_without_overrides_and_integers_at_run_time(ros_context):
    node = node_with()
    try:
        declare_parameters(node, SPECS)
        assert node.get_parameter("rate").value == 1.5
        assert node.describe_parameter("gains").type == Parameter.Type.DOUBLE_ARRAY.value
        result = node.set_parameters([Parameter("rate", value=7)])[0]
        assert result.successful, result.reason
        assert node.get_parameter("rate").value == 7.0
        assert not node.set_parameters([Parameter("rate", value=70.0)])[0].successful  # outside its bounds
    finally:
        node.destroy_node()


def test_a_value_of_the_wrong_type_is_refused_with_its_name(ros_context):
    for given in (["-p", "rate:=fast"], ["-p", "count:=2.5"]):
        node = node_with(given)
        try:
            with pytest.raises(ParameterError, match=f"parameter {given[1].split(':=')[0]}"):
                declare_parameters(node, SPECS)
        finally:
            node.destroy_node()
