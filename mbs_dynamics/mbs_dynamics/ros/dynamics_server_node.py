"""Dynamics server node: forward, inverse, contact and impact dynamics as
services (default name ``dynamics_server``)."""
from mbs_dynamics.ros.dynamics_node import DynamicsNode, ParameterSpec, node_main


class DynamicsServerNode(DynamicsNode):
    PARAMETERS = (
        ParameterSpec("quaternion_tolerance", 1e-3,
                      "A base orientation whose quaternion norm differs from 1 by more than this is "
                      "refused; closer ones are normalised."),
        ParameterSpec("max_trajectory_points", 100000,
                      "Longest trajectory ~/inverse_dynamics_trajectory accepts."),
    )


main = node_main(DynamicsServerNode, "dynamics_server")

if __name__ == "__main__":
    main()
