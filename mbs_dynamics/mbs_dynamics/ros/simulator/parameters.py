"""The simulator's parameters (PARAMETERS), and the settings its callbacks
read (SimulatorSettings): the node's own, and the scene (mbs.scene), checked
together whenever a parameter changes."""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from mbs_dynamics.multibody.model import Model
from mbs_dynamics.ros.conversions import JointMap
from mbs_dynamics.ros.parameters import EMPTY_DOUBLE_ARRAY, EMPTY_STRING_ARRAY, ParameterSpec, diagnostics_period
from mbs_dynamics.simulation.scene import MAX_WORLD_BOXES, Scene, SceneSettings
from mbs_dynamics.simulation.simulation import DEFAULT_INTEGRATOR

# Wall-clock seconds the simulation may fall behind its real-time factor
# and still catch up (a burst of steps); further behind, after a real stall,
# it goes on from where it is (a longer burst would outrun its controllers).
# A busy machine holds the stepping thread up to 50-150 ms now and then:
# at 0.05 each such hold was lost for good (a real-time factor of 0.93 over
# the second beside two busy processes), at 0.2 it is made up.
MAX_LAG = 0.2
# The longest world_frame (characters).
MAX_FRAME_ID_LENGTH = 256
# The slowest real-time factor other than 0 (below it a simulated second takes over 16 min).
SLOWEST_REAL_TIME_FACTOR = 1e-3
# contact_geometry's values with the URDF's collision elements -> how a mesh touches (contact.geometry.MESH_POINTS)
CONTACT_GEOMETRY = {"collision": "hull", "collision_boxes": "box"}
# Parameters of the world (applied at once) and of the initial state (at the next ~/reset).
WORLD_PARAMETERS = ("ground_height", "ground_friction", "ground_restitution", "contact_frames", "contact_points",
                    "world_boxes", "contact_compliance", "self_collision")
# Those of them that move a surface or a contact point: a change may put the robot inside an obstacle.
GEOMETRY_PARAMETERS = ("ground_height", "contact_frames", "contact_points", "world_boxes")
ACTUATOR_PARAMETERS = ("position_joints", "position_stiffness", "position_damping", "velocity_joints",
                       "velocity_damping", "actuator_bandwidth")
INITIAL_STATE_PARAMETERS = ("initial_joint_names", "initial_joint_positions", "initial_base_pose")

PARAMETERS = (
    ParameterSpec("dt", 0.001, "Integration step (s).", read_only=True, bounds=(1e-5, 0.1)),
    ParameterSpec("integrator", DEFAULT_INTEGRATOR,
                  "'rk4', 'rkmk4' (Munthe-Kaas on SE(3) for the floating base) or 'semi_implicit_euler' (which "
                  "does not keep energy); steps with contact, a joint limit, joint friction or actuator gains "
                  "are time-stepped (first order).",
                  read_only=True),
    ParameterSpec("real_time_factor", 1.0,
                  "Simulated seconds per wall-clock second (at least 0.001); 0 = as fast as possible. A stall "
                  f"of up to {MAX_LAG:g} s (a busy machine) is made up by stepping faster; after a longer one the "
                  "simulation goes on from where it is.",
                  bounds=(0.0, 1000.0)),
    ParameterSpec("publish_rate", 100.0,
                  "Rate (Hz, simulated time) of joint_states, odom, /clock and ~/contact_wrenches.",
                  bounds=(0.1, 1e4)),
    ParameterSpec("publish_clock", True,
                  "Publish /clock (the simulator owns sim time)."),
    ParameterSpec("start_paused", False,
                  "Start paused (~/pause false or ~/step to go on); joint_states are published meanwhile."),
    ParameterSpec("start_on_command", False,
                  "Start paused and run from the first effort command on: a closed loop starts from the "
                  "efforts computed for the initial state.", read_only=True),
    ParameterSpec("lockstep", False,
                  "Wait after each joint_states for an effort command (the next to arrive) before stepping on, at "
                  "most LOCKSTEP_WAIT wall-clock s (then step on, counted): a controller short of CPU sees every "
                  "state and acts on it at once, as in a compiled closed loop; the real-time factor is then a "
                  "bound. The controller must answer every joint_states.", read_only=True),
    ParameterSpec("command_joints", EMPTY_STRING_ARRAY,
                  "Joint order of ~/effort_command; empty = the model's joint order."),
    ParameterSpec("command_timeout", 0.5,
                  "Commands older than this (simulated s) are replaced by zero effort.", bounds=(1e-4, 3600.0)),
    ParameterSpec("initial_joint_names", EMPTY_STRING_ARRAY,
                  "Joints given an initial position; empty = none (each joint starts at 0, or at the "
                  "middle of its limits when 0 is outside them). Applies at the next ~/reset."),
    ParameterSpec("initial_joint_positions", EMPTY_DOUBLE_ARRAY,
                  "Initial positions of initial_joint_names (rad or m). Applies at the next ~/reset."),
    ParameterSpec("initial_base_pose", [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0],
                  "Floating base: initial [x, y, z, qx, qy, qz, qw] in the world frame (x, y and z within 1e4 m "
                  "of 0), lifted until no contact point lies inside the ground or a box (said). Applies at the "
                  "next ~/reset."),
    ParameterSpec("ground_height", 0.0,
                  "Height of the ground plane (m); a fixed base has one only while there are free objects.", bounds=(-1e4, 1e4)),
    ParameterSpec("ground_friction", 0.8,
                  "Coulomb friction coefficient of the ground.", bounds=(0.0, 1e3)),
    ParameterSpec("ground_restitution", 0.0,
                  "Coefficient of restitution of the ground.", bounds=(0.0, 1.0)),
    ParameterSpec("contact_frames", EMPTY_STRING_ARRAY,
                  "Link frames whose points touch the ground (e.g. the feet; a frame may repeat); "
                  "empty = none. At most 1000."),
    ParameterSpec("contact_points", EMPTY_DOUBLE_ARRAY,
                  "[x, y, z] in its frame for each of contact_frames, flattened (e.g. the corners of a "
                  "sole); empty = the frames' origins."),
    ParameterSpec("contact_geometry", "collision",
                  "Where the robot touches the ground and world_boxes when contact_frames is empty: "
                  "'collision' (the URDF's <collision> elements: sphere centres with their radius, box "
                  "corners, cylinder rims, the vertices of each mesh's convex hull), 'collision_boxes' (the "
                  "same, but each mesh by the corners of its bounding box in its own axes: flat soles where "
                  "the sole meshes are nearly flat, as TALOS's, on whose hulls the rigid step softened every "
                  "step) or 'none'.", read_only=True),
    ParameterSpec("mesh_search_paths", EMPTY_STRING_ARRAY,
                  "Directories searched for collision meshes after the ament index (package://) and the "
                  "URDF's own directory.", read_only=True),
    ParameterSpec("world_boxes", EMPTY_DOUBLE_ARRAY,
                  "Static boxes (a step, a table): [size_x, size_y, size_z, x, y, z, yaw] per box (m, rad; "
                  f"world frame, centre), flattened; empty = none. At most {MAX_WORLD_BOXES} boxes: each step "
                  "tests every contact point against every box (the UR5's 296 collision points beside 1000 "
                  "boxes: real-time factor 0.12)."),
    ParameterSpec("world_objects", EMPTY_STRING_ARRAY,
                  "Names of the free objects at start (a letter, then letters, digits or '_'), each of the URDF "
                  "file of world_object_files at its pose of world_object_poses: rigid objects, or free "
                  "articulated ones; ~/spawn and ~/delete add and remove objects at run time. Their pose and "
                  "twist are published on objects/<name>/odom.", read_only=True),
    ParameterSpec("world_object_files", EMPTY_STRING_ARRAY,
                  "The URDF file of each of world_objects: a path, or package://PACKAGE/PATH (each link with an "
                  "<inertial> and <collision> geometry; meshes found beside the file too).", read_only=True),
    ParameterSpec("world_object_poses", EMPTY_DOUBLE_ARRAY,
                  "[x, y, z, qx, qy, qz, qw] of each of world_objects' root link in the world frame, flattened; "
                  "empty = each at the origin. An object inside the ground or a box is lifted clear of it (said); "
                  "one inside the robot or an earlier object is refused.", read_only=True),
    ParameterSpec("max_objects", 100,
                  "The most free objects the world holds: a ~/spawn beyond it is refused (each object costs "
                  "every step some microseconds).", read_only=True, bounds=(0, 10000)),
    ParameterSpec("self_collision", False,
                  "The robot's links collide with each other (their <collision> geometry's convex shapes), but "
                  "for a link and its parent and the pairs robot_description_semantic disables. Free objects "
                  "always collide with the robot and each other."),
    ParameterSpec("robot_description_semantic", "",
                  "The robot's SRDF (XML), whose <disable_collisions> pairs never collide; empty = from the "
                  "latched robot_description_semantic topic, as MoveIt publishes it, when it comes.",
                  read_only=True),
    ParameterSpec("contact_compliance", 0.0,
                  "Softness of the constraint rows: 0 is rigid; 0.01 for a robot lying on its collision meshes "
                  "or against its joint limits (rows that contradict), at a small penetration and a slow creep "
                  "of sticking points. A step the solver cannot converge is solved at ten times it (at least "
                  "0.01), up to twice (softened_steps in the diagnostics).", bounds=(0.0, 1.0)),
    ParameterSpec("position_joints", EMPTY_STRING_ARRAY,
                  "Joints under position control: PD actuators toward the positions of joint_commands, "
                  "implicit in the step, clamped to the URDF effort limits; they hold their initial "
                  "position until commanded."),
    ParameterSpec("position_stiffness", EMPTY_DOUBLE_ARRAY,
                  "Stiffness (N m/rad or N/m) of each of position_joints; empty = from actuator_bandwidth."),
    ParameterSpec("position_damping", EMPTY_DOUBLE_ARRAY,
                  "Damping (N m s/rad or N s/m) of each of position_joints; empty = from actuator_bandwidth."),
    ParameterSpec("velocity_joints", EMPTY_STRING_ARRAY,
                  "Joints under velocity control: damping actuators toward the velocities of joint_commands."),
    ParameterSpec("velocity_damping", EMPTY_DOUBLE_ARRAY,
                  "Damping of each of velocity_joints; empty = from actuator_bandwidth."),
    ParameterSpec("actuator_bandwidth", 20.0,
                  "Hz: the gains not given, for each joint's inertia M_jj at the initial state: stiffness "
                  "M_jj (2 pi f)^2 and damping 2 M_jj 2 pi f (critically damped); velocity joints M_jj 2 pi f.",
                  bounds=(0.01, 1000.0)),
    ParameterSpec("joint_commands_topic", "joint_commands",
                  "sensor_msgs/JointState commands by name, as topic_based_ros2_control's TopicBasedSystem "
                  "sends them: positions of position_joints, velocities of velocity_joints (and of "
                  "position_joints, as their target velocity), efforts of the others (and feedforward).",
                  read_only=True),
    ParameterSpec("imu_links", EMPTY_STRING_ARRAY,
                  "Links with an IMU: sensor_msgs/Imu on imu/<link> (orientation, angular velocity, proper "
                  "acceleration with gravity, in the link frame).", read_only=True),
    ParameterSpec("imu_rate", 200.0, "Rate (Hz, simulated time) of the IMUs.", read_only=True,
                  bounds=(0.1, 1e4)),
    ParameterSpec("imu_noise", [0.0, 0.0],
                  "[gyroscope (rad/s), accelerometer (m/s^2)] standard deviation of the IMUs' white noise: two "
                  "finite numbers >= 0.", read_only=True),
    ParameterSpec("imu_bias", [0.0, 0.0],
                  "[gyroscope, accelerometer] standard deviation of each IMU axis' constant bias, drawn at "
                  "start-up: two finite numbers >= 0.", read_only=True),
    ParameterSpec("ft_joints", EMPTY_STRING_ARRAY,
                  "Moving joints with a force-torque sensor: geometry_msgs/WrenchStamped on ft/<joint>, the "
                  "wrench the joint transmits to its child link (child frame), contact forces included.",
                  read_only=True),
    ParameterSpec("ft_rate", 100.0, "Rate (Hz, simulated time) of the force-torque sensors.", read_only=True,
                  bounds=(0.1, 1e4)),
    ParameterSpec("publish_tf", True,
                  "Floating base: publish tf (world_frame -> the root link) where tf2_msgs is installed.",
                  read_only=True),
    ParameterSpec("world_frame", "world",
                  f"frame_id of odom, tf and ~/contact_wrenches: a tf frame id (1 to {MAX_FRAME_ID_LENGTH} "
                  "printable characters, no white space, no leading '/')."),
    diagnostics_period(", wall clock"),
)


@dataclass(frozen=True)
class SimulatorSettings:
    """What the simulator's callbacks read, replaced whole when a parameter
    changes: the node's own settings and the checked scene."""

    real_time_factor: float
    publish_rate: float
    publish_clock: bool
    command_timeout: float
    world_frame: str
    diagnostics_period: float
    scene: Scene
    command_order: np.ndarray  # ~/effort_command's values -> velocity indices
    position_joints: frozenset
    velocity_joints: frozenset
    effort_joints: frozenset  # the joints that take efforts: neither position nor velocity joints


# The parameters SimulatorSettings is made of (the scene's: SceneSettings' fields).
SETTINGS_PARAMETERS = ("real_time_factor", "publish_rate", "publish_clock", "command_joints", "command_timeout",
                       "world_frame", "diagnostics_period", *(f.name for f in fields(SceneSettings)))


def simulator_settings(values: dict, model: Model, joints: JointMap, collision=None, collision_shapes=None,
                       disabled_collisions=()) -> SimulatorSettings:
    """The settings of the parameter `values` ({name: value} of
    SETTINGS_PARAMETERS) and of the robot's collision geometry (Scene.build's
    arguments); ValueError saying what is wrong."""
    if 0 < values["real_time_factor"] < SLOWEST_REAL_TIME_FACTOR:
        raise ValueError(f"real_time_factor must be 0 (as fast as possible) or at least "
                         f"{SLOWEST_REAL_TIME_FACTOR:g}, got {values['real_time_factor']}")
    frame = values["world_frame"]
    if not (0 < len(frame) <= MAX_FRAME_ID_LENGTH and frame.isprintable() and not frame.startswith("/")
            and not any(c.isspace() for c in frame)):
        raise ValueError(f"world_frame must be a tf frame id: 1 to {MAX_FRAME_ID_LENGTH} printable characters, "
                         f"no white space, no leading '/'; got {frame[:40]!r}"
                         + (f" ({len(frame)} characters)" if len(frame) > 40 else ""))
    for name in ("command_joints", "initial_joint_names", "position_joints", "velocity_joints"):
        names = values[name]
        if len(names) > len(joints.names) or len(set(names)) != len(names):
            raise ValueError(f"{name} names {len(names)} joints, {len(set(names))} of them different: each of "
                             f"the {len(joints.names)} joints of model '{model.name}' at most once")
    scene = Scene.build(model, SceneSettings(**{f.name: values[f.name] for f in fields(SceneSettings)}), collision,
                        collision_shapes, disabled_collisions)
    position_joints, velocity_joints = frozenset(values["position_joints"]), frozenset(values["velocity_joints"])
    return SimulatorSettings(
        real_time_factor=values["real_time_factor"], publish_rate=values["publish_rate"],
        publish_clock=values["publish_clock"], command_timeout=values["command_timeout"], world_frame=frame,
        diagnostics_period=values["diagnostics_period"], scene=scene,
        command_order=joints.command_order(values["command_joints"]), position_joints=position_joints,
        velocity_joints=velocity_joints, effort_joints=frozenset(joints.names) - position_joints - velocity_joints)
