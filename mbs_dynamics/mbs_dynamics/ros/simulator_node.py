"""Simulator node: integrates the robot with ground contact, effort commands
and sim time (default name ``simulator``)."""
from mbs_dynamics.ros.dynamics_node import (
    EMPTY_DOUBLE_ARRAY,
    EMPTY_STRING_ARRAY,
    DynamicsNode,
    ParameterSpec,
    node_main,
)


class SimulatorNode(DynamicsNode):
    PARAMETERS = (
        ParameterSpec("dt", 0.001, "Integration step (s).", read_only=True),
        ParameterSpec("integrator", "semi_implicit_euler",
                      "'semi_implicit_euler', 'rk4' or 'rkmk' (Munthe-Kaas on SE(3) for the floating base).",
                      read_only=True),
        ParameterSpec("real_time_factor", 1.0,
                      "Simulated seconds per wall-clock second; 0 = as fast as possible."),
        ParameterSpec("publish_rate", 100.0,
                      "Rate (Hz, simulated time) of joint_states and odom."),
        ParameterSpec("publish_clock", True,
                      "Publish /clock (the simulator owns sim time)."),
        ParameterSpec("command_joints", EMPTY_STRING_ARRAY,
                      "Joint order of ~/effort_command; empty = the model's joint order."),
        ParameterSpec("command_timeout", 0.5,
                      "Commands older than this (s) are replaced by zero effort."),
        ParameterSpec("initial_joint_names", EMPTY_STRING_ARRAY,
                      "Joints given an initial position; empty = none."),
        ParameterSpec("initial_joint_positions", EMPTY_DOUBLE_ARRAY,
                      "Initial positions of initial_joint_names (rad or m)."),
        ParameterSpec("initial_base_pose", [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0],
                      "Floating base: initial [x, y, z, qx, qy, qz, qw] in the world frame."),
        ParameterSpec("ground_height", 0.0,
                      "Height of the ground plane (m); the ground is off for a fixed base."),
        ParameterSpec("ground_friction", 0.8,
                      "Coulomb friction coefficient of the ground."),
        ParameterSpec("ground_restitution", 0.0,
                      "Coefficient of restitution of the ground."),
        ParameterSpec("contact_frames", EMPTY_STRING_ARRAY,
                      "Link frames of the ground contact points; empty = none."),
    )


main = node_main(SimulatorNode, "simulator")

if __name__ == "__main__":
    main()
