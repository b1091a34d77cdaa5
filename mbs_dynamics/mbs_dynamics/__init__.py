"""mbs_dynamics: rigid multibody dynamics from a URDF.

The core (this package minus ``mbs_dynamics.ros``) never imports ROS.

    import mbs_dynamics as mbs
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    tau = mbs.inverse_dynamics(model, q, v, a)
"""
from mbs_dynamics import compiled_calls

compiled_calls.share_inlined_scopes()  # before anything compiles

from mbs_dynamics import parallel, simulation
from mbs_dynamics.algorithms.aba import InverseMassMatrix, SingularMassMatrix, forward_dynamics
from mbs_dynamics.algorithms.centroidal import (
    center_of_mass,
    center_of_mass_velocity,
    centroidal_momentum,
    centroidal_momentum_matrix,
    centroidal_state,
    kinetic_energy,
    potential_energy,
)
from mbs_dynamics.algorithms.crba import mass_matrix
from mbs_dynamics.algorithms.derivatives import coriolis_matrix, inverse_dynamics_derivatives, inverse_dynamics_rate
from mbs_dynamics.algorithms.forward_derivatives import forward_dynamics_derivatives, linearize
from mbs_dynamics.algorithms.joint_friction import joint_friction_torques
from mbs_dynamics.algorithms.kinematics import (
    body_poses,
    frame_acceleration,
    frame_bias_acceleration,
    frame_jacobian,
    frame_jerk,
    frame_pose,
    frame_poses,
    frame_velocity,
)
from mbs_dynamics.algorithms.regressor import inertial_parameters, joint_torque_regressor
from mbs_dynamics.algorithms.rnea import gravity_torques, inverse_dynamics, nonlinear_effects
from mbs_dynamics.contact.constraints import (
    ConstraintSolution,
    FrameContact,
    LoopClosure,
    PointContact,
    contact_forward_dynamics,
    contact_inverse_dynamics,
    impact,
)
from mbs_dynamics.multibody.configuration import difference, integrate
from mbs_dynamics.multibody.model import Frame, Model
from mbs_dynamics.multibody.parsers.urdf import (
    JointDescription,
    LinkDescription,
    RobotDescription,
    URDFError,
    parse_urdf_file,
    parse_urdf_string,
)
from mbs_dynamics.parallel import get_num_threads, set_num_threads
from mbs_dynamics.robots import BUNDLED_ROBOTS, bundled_robot
from mbs_dynamics.simulation import sensors
from mbs_dynamics.simulation.integrators import INTEGRATORS, step
from mbs_dynamics.simulation.objects import WorldObject
from mbs_dynamics.simulation.rollout import Rollouts, rollout
from mbs_dynamics.simulation.simulation import Actuators, Simulation, World
from mbs_dynamics.simulation.stepping import Box, ContactStep, Ground, contact_step
from mbs_dynamics.spatial import lie

__version__ = "0.1.0"

__all__ = [
    "BUNDLED_ROBOTS",
    "INTEGRATORS",
    "Actuators",
    "Box",
    "ConstraintSolution",
    "ContactStep",
    "Frame",
    "FrameContact",
    "Ground",
    "InverseMassMatrix",
    "JointDescription",
    "LinkDescription",
    "LoopClosure",
    "Model",
    "PointContact",
    "RobotDescription",
    "Rollouts",
    "Simulation",
    "SingularMassMatrix",
    "URDFError",
    "World",
    "WorldObject",
    "body_poses",
    "bundled_robot",
    "center_of_mass",
    "center_of_mass_velocity",
    "centroidal_momentum",
    "centroidal_momentum_matrix",
    "centroidal_state",
    "contact_forward_dynamics",
    "contact_inverse_dynamics",
    "contact_step",
    "coriolis_matrix",
    "difference",
    "forward_dynamics",
    "forward_dynamics_derivatives",
    "frame_acceleration",
    "frame_bias_acceleration",
    "frame_jacobian",
    "frame_jerk",
    "frame_pose",
    "frame_poses",
    "frame_velocity",
    "get_num_threads",
    "gravity_torques",
    "impact",
    "inertial_parameters",
    "integrate",
    "inverse_dynamics",
    "inverse_dynamics_derivatives",
    "inverse_dynamics_rate",
    "joint_friction_torques",
    "joint_torque_regressor",
    "kinetic_energy",
    "lie",
    "linearize",
    "mass_matrix",
    "nonlinear_effects",
    "parallel",
    "parse_urdf_file",
    "parse_urdf_string",
    "potential_energy",
    "rollout",
    "sensors",
    "set_num_threads",
    "simulation",
    "step",
]
