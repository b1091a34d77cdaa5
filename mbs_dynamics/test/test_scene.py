"""A simulation from plain values (mbs_dynamics.simulation.scene): what the
simulator's parameters make, checked in the core: the world, the actuators'
gains at their bandwidth, the initial state lifted clear of the world, and
every wrong value refused naming its setting."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import close
from oracles import robot_path

import mbs_dynamics as mbs
from mbs_dynamics.simulation.scene import Scene, SceneSettings

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


def test_a_quadruped_on_its_feet_beside_a_box_with_position_control():
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    knees = ("FL_KFE", "FR_KFE")
    settings = SceneSettings(ground_height=-0.1, ground_friction=0.7, contact_frames=FEET,
                             world_boxes=(0.4, 0.4, 0.1, 1.0, 0.0, -0.05, 0.3), position_joints=knees,
                             velocity_joints=("HL_KFE",), actuator_bandwidth=10.0,
                             initial_joint_names=knees, initial_joint_positions=(-1.2, -1.2),
                             initial_base_pose=(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0))
    scene = Scene.build(model, settings)
    world = scene.world
    assert world.ground.height == -0.1 and world.ground.friction == 0.7
    assert [point.frame for point in world.contact_points] == list(FEET)
    assert len(world.boxes) == 1 and world.boxes[0].friction == 0.7
    close(world.boxes[0].orientation, [0.0, 0.0, np.sin(0.15), np.cos(0.15)], 1e-15)
    # gains critically damped at 10 Hz for each joint's inertia at the initial state
    inertia = np.diag(mbs.mass_matrix(model, scene.initial_q))
    omega = 2 * np.pi * 10.0
    m = [inertia[model.v_index(joint)] for joint in (*knees, "HL_KFE")]
    assert scene.actuators.joints == (*knees, "HL_KFE")
    close(scene.actuators.stiffness, [m[0] * omega**2, m[1] * omega**2, 0.0], 1e-12)
    close(scene.actuators.damping, [2 * m[0] * omega, 2 * m[1] * omega, m[2] * omega], 1e-12)
    targets = scene.held_positions(scene.initial_q)
    assert targets[model.v_index("FL_KFE")] == -1.2 and np.count_nonzero(targets) == 2
    # started with the base at 0, the feet below the ground: lifted clear, and said
    simulation, lifted = scene.simulation()
    assert "the base lifted" in lifted
    feet = [mbs.frame_pose(model, simulation.q, foot)[1][2] for foot in FEET]
    assert min(feet) >= -0.1 - 1e-9
    assert simulation.world is world and simulation.dt == settings.dt


@pytest.mark.parametrize("change, says", [
    ({"contact_frames": ("nowhere",)}, "contact_frames: model 'solo' has no frames ['nowhere']"),
    ({"contact_frames": FEET, "contact_points": (0.0, 0.0)}, "contact_points must hold [x, y, z] for each of the 4"),
    ({"initial_joint_names": ("FL_KFE",)}, "initial_joint_names has 1 names, initial_joint_positions 0 values"),
    ({"initial_joint_names": ("FL_KFE",), "initial_joint_positions": (np.nan,)}, "initial_joint_positions must be "
                                                                                "finite"),
    ({"initial_base_pose": (0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 5.0)}, "initial_base_pose must be [x, y, z, qx, qy, qz, "
                                                                 "qw]"),
    ({"position_joints": ("FL_KFE",), "velocity_joints": ("FL_KFE",)}, "joints both in position_joints and "
                                                                       "velocity_joints: ['FL_KFE']"),
    ({"position_joints": ("root_joint",)}, "position_joints/velocity_joints: model 'solo' has no joints "
                                           "['root_joint']"),
    ({"position_joints": ("FL_KFE",), "position_stiffness": (-1.0,)}, "position_stiffness must hold a finite value "
                                                                      ">= 0 for each of its 1 joints"),
    ({"world_boxes": (1.0, 1.0, np.nan, 0.0, 0.0, 0.0, 0.0)}, "world_boxes: box 0 (values 0 to 6) has size_z nan"),
])
def test_a_wrong_setting_is_refused_by_name(change, says):
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    with pytest.raises(ValueError) as refused:
        Scene.build(model, SceneSettings(**change))
    assert says in str(refused.value)


def test_a_fixed_base_inside_a_box_is_refused_with_the_depth():
    """A fixed base cannot be lifted: its contact points inside a box refuse the scene."""
    from mbs_dynamics.contact.geometry import collision_contacts

    path = robot_path("panda")
    model = mbs.Model.from_urdf_file(path)
    collision = collision_contacts(model, open(path).read())
    clear = Scene.build(model, SceneSettings(world_boxes=(0.2, 0.2, 0.2, 2.0, 0.0, 0.1, 0.0)), collision)
    assert len(clear.world.boxes) == 1 and clear.world.contact_geometry is collision
    with pytest.raises(ValueError, match="^the initial state: .* inside"):
        Scene.build(model, SceneSettings(world_boxes=(0.4, 0.4, 0.4, 0.0, 0.0, 0.2, 0.0)), collision)
