"""Inverse dynamics node: joint_states in; feedforward torques and centroidal
momentum out (default name ``inverse_dynamics``)."""
from mbs_dynamics.ros.dynamics_node import EMPTY_STRING_ARRAY, DynamicsNode, ParameterSpec, node_main


class InverseDynamicsNode(DynamicsNode):
    PARAMETERS = (
        ParameterSpec("acceleration_source", "zero",
                      "Joint accelerations used: 'zero' (gravity and velocity-product compensation), "
                      "'reference' (from ~/reference) or 'differentiate' (filtered derivative of the "
                      "measured velocities)."),
        ParameterSpec("reference_timeout", 0.1,
                      "A reference older than this (s) is stale: fall back to 'zero'."),
        ParameterSpec("differentiation_cutoff", 50.0,
                      "Cut-off frequency (Hz) of the velocity-derivative filter."),
        ParameterSpec("command_joints", EMPTY_STRING_ARRAY,
                      "Joint order of ~/effort_command; empty = the model's joint order."),
        ParameterSpec("clamp_to_effort_limits", False,
                      "Clamp efforts to the URDF effort limits (reported)."),
        ParameterSpec("contact_frames", EMPTY_STRING_ARRAY,
                      "Frames in contact (floating base): contact-consistent inverse dynamics; "
                      "empty = none."),
        ParameterSpec("diagnostics_period", 1.0,
                      "Period (s) of the /diagnostics status."),
    )


main = node_main(InverseDynamicsNode, "inverse_dynamics")

if __name__ == "__main__":
    main()
