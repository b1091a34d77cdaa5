"""A simulation described by plain values (a node's parameters, a params
file): SceneSettings checked into a Scene (its World, Actuators and initial
configuration, every wrong value a ValueError naming its setting), the free
objects of URDF files at poses (scene_objects), and the Simulation started
from them, lifted clear of the world.

    settings = SceneSettings(contact_frames=("FL_FOOT", ...), world_boxes=(0.4, 0.4, 0.1, 1, 0, 0.05, 0))
    scene = Scene.build(model, settings)
    simulation, lifted = scene.simulation()
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from mbs_dynamics.algorithms.crba import mass_matrix
from mbs_dynamics.contact.constraints import PointContact
from mbs_dynamics.files import read_file
from mbs_dynamics.inputs import QUATERNION_TOLERANCE
from mbs_dynamics.multibody.model import ROOT_JOINT, Model
from mbs_dynamics.multibody.parsers.urdf import MAX_URDF_BYTES
from mbs_dynamics.multibody.resources import ResourceNotFound, resolve
from mbs_dynamics.simulation.objects import WorldObject
from mbs_dynamics.simulation.placement import lifted_clear, placed_object
from mbs_dynamics.simulation.simulation import (
    DEFAULT_INTEGRATOR,
    MARGIN,
    Actuators,
    Simulation,
    World,
    initial_configuration,
)
from mbs_dynamics.simulation.stepping.obstacles import Box, Ground

# Values per box of world_boxes: size (3), centre (3), yaw (m, rad; world frame).
BOX_FIELDS = ("size_x", "size_y", "size_z", "x", "y", "z", "yaw")
BOX_VALUES = len(BOX_FIELDS)
# The most boxes of world_boxes. Every step tests each contact point against each box: the UR5's 296 collision
# points ran at a real-time factor of 1.3 beside 100 boxes and 0.12 beside 1000; Solo-12's 816 at 0.18 beside 100
# (a busy 2-core machine). Without a cap, 10^5 boxes set at run time stalled the simulation.
MAX_WORLD_BOXES = 1000
# The largest distance (m) from the world's origin of a box's centre, of the ground and of a floating base placed
# by a setting or a request, and half the largest size of a box.
WORLD_EXTENT = 1e4
# The most points touching the world given by frame (contact_frames).
MAX_CONTACT_POINTS = 1000
# Values per object pose: position, orientation (x, y, z, w) in the world frame.
POSE_VALUES = 7


@dataclass(frozen=True)
class SceneSettings:
    """What a simulation is made of, as a simulator's parameters give it.

    ground_*: the ground plane (a floating base only). contact_frames and
    contact_points ([x, y, z] in its frame for each frame, flattened; empty:
    the frames' origins) are where the robot touches the ground and the
    boxes; none given: the points of the collision geometry passed to
    Scene.build. world_boxes: [size_x, size_y, size_z, x, y, z, yaw] per box,
    flattened. Actuators: position_joints and velocity_joints with their gains,
    those not given critically damped at actuator_bandwidth (Hz) for each
    joint's inertia at the initial state. The initial state: the named joints'
    positions (the others at 0, or at the middle of their limits when 0 is
    outside them) and the floating base's [x, y, z, qx, qy, qz, qw].
    self_collision: the robot's links meet each other (Scene.build's
    collision shapes) but for a body and its parent and the disabled pairs.
    """

    dt: float = 1e-3
    integrator: str = DEFAULT_INTEGRATOR
    ground_height: float = 0.0
    ground_friction: float = 0.8
    ground_restitution: float = 0.0
    contact_frames: tuple = ()
    contact_points: tuple = ()
    world_boxes: tuple = ()
    contact_compliance: float = 0.0
    position_joints: tuple = ()
    position_stiffness: tuple = ()
    position_damping: tuple = ()
    velocity_joints: tuple = ()
    velocity_damping: tuple = ()
    actuator_bandwidth: float = 20.0
    initial_joint_names: tuple = ()
    initial_joint_positions: tuple = ()
    initial_base_pose: tuple = (0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0)
    self_collision: bool = False

    def __post_init__(self):
        for name, value in vars(self).items():
            if isinstance(value, (list, np.ndarray)):
                object.__setattr__(self, name, tuple(value))


@dataclass(frozen=True)
class Scene:
    """SceneSettings checked against a model: the World (without free
    objects: world_with adds them), the Actuators and the initial
    configuration a Simulation is made of."""

    model: Model
    settings: SceneSettings
    world: World
    actuators: Actuators
    initial_q: np.ndarray = field(repr=False)
    collision: object = field(default=None, repr=False)
    collision_shapes: object = field(default=None, repr=False)
    disabled_collisions: tuple = ()

    @classmethod
    def build(cls, model: Model, settings: SceneSettings, collision=None, collision_shapes=None,
              disabled_collisions=()) -> Scene:
        """The scene of `settings`; collision: the contact points of the
        robot's collision geometry (contact.geometry.collision_contacts), used
        where no contact_frames are given; collision_shapes: its convex shapes
        (contact.geometry.collision_shapes), which free objects and, with
        self_collision, the robot's own links meet; disabled_collisions: the
        (link, link) pairs that never collide (an SRDF's). ValueError naming
        the setting that is wrong; for a fixed base inside a box (it cannot be
        lifted), the box and the depth."""
        if settings.self_collision and collision_shapes is None:
            raise ValueError("self_collision needs the robot's collision geometry (contact_geometry 'collision' or "
                             "'collision_boxes')")
        initial_q = scene_initial_configuration(model, settings)
        scene = cls(model, settings, None, scene_actuators(model, settings, initial_q), initial_q, collision,
                    collision_shapes, tuple(disabled_collisions))
        object.__setattr__(scene, "world", scene.world_with(()))
        if not model.floating_base:
            scene.lifted_clear(initial_q, "the initial state")
        return scene

    def with_collision_pairs(self, disabled_collisions) -> Scene:
        """The scene with other (link, link) pairs that never collide."""
        scene = replace(self, disabled_collisions=tuple(disabled_collisions))
        object.__setattr__(scene, "world", scene.world_with(()))
        return scene

    def world_with(self, objects) -> World:
        """The scene's World with the free `objects` (WorldObject); a fixed
        base's has a ground too once there are objects (to rest on)."""
        return scene_world(self.model, self.settings, self.collision, self.collision_shapes,
                           self.disabled_collisions, tuple(objects))

    def lifted_clear(self, q, what: str, world: World | None = None) -> tuple[np.ndarray, str]:
        """(q with its floating base lifted until no contact point lies inside
        the ground or a box of `world` (None: the scene's), what was lifted (''
        when nothing)). ValueError, starting with `what`, for a fixed base
        inside a box."""
        try:
            lifted, lift, deepest = lifted_clear(self.model, world or self.world, q, MARGIN)
        except ValueError as error:
            raise ValueError(f"{what}: {error}") from None
        return lifted, "" if deepest is None else f"{what}: {deepest}: the base lifted {lift:.3g} m, clear of it"

    def simulation(self, objects=()) -> tuple[Simulation, str]:
        """(The Simulation of the scene at its initial state, lifted clear of
        the world, with the free `objects` (WorldObject, each placed by
        placement.placed_object: lifted clear of the ground and the boxes, or a
        ValueError when inside the robot or an earlier object); what was
        lifted, '' when nothing)."""
        settings = self.settings
        simulation = Simulation(self.model, self.world, settings.dt, settings.integrator, q=self.initial_q,
                                actuators=self.actuators)
        whole = self.world_with(objects)
        start, lifted = self.lifted_clear(simulation.initial_q, "the initial state", whole)
        simulation.reset(start)
        said, placed = [lifted] if lifted else [], []
        for thing in objects:
            thing, lifted_object = placed_object(simulation, thing, whole)
            placed.append(thing)
            simulation.set_world(self.world_with(placed))
            said += [lifted_object] if lifted_object else []
        return simulation, "; ".join(said)

    def held_positions(self, q) -> np.ndarray:
        """The position targets (by velocity index) that hold the actuated
        joints at q: zero elsewhere."""
        model = self.model
        targets = np.zeros(model.nv)
        for name in self.actuators.joints:
            targets[model.v_index(name)] = q[model.q_index(name)]
        return targets


def robot_joints(model: Model) -> tuple[str, ...]:
    """The model's joints with coordinates, the floating base excepted: those a
    setting, a command or a message names."""
    return tuple(name for name in model.joint_names if not (model.floating_base and name == ROOT_JOINT))


def world_boxes(values, friction: float = 1.0, restitution: float = 0.0) -> tuple[Box, ...]:
    """The Box of each [size_x, size_y, size_z, x, y, z, yaw] (m, rad; world
    frame, centre) of `values`, flattened: at most MAX_WORLD_BOXES boxes
    (counted before anything is converted), each value finite, sizes in (0,
    2 WORLD_EXTENT], centres within WORLD_EXTENT; ValueError naming the box and
    the value that is wrong."""
    count = len(values)
    if count % BOX_VALUES:
        raise ValueError(f"world_boxes must hold [{', '.join(BOX_FIELDS)}] for each box ({BOX_VALUES} values "
                         f"each), got {count} values")
    if count > MAX_WORLD_BOXES * BOX_VALUES:
        raise ValueError(f"world_boxes holds {count // BOX_VALUES} boxes: at most {MAX_WORLD_BOXES} (each step "
                         "tests every contact point against every box)")
    boxes = np.asarray(values, dtype=float).reshape(-1, BOX_VALUES)
    with np.errstate(invalid="ignore"):
        wrong = ~np.isfinite(boxes)
        wrong[:, :3] |= ~((boxes[:, :3] > 0) & (boxes[:, :3] <= 2 * WORLD_EXTENT))
        wrong[:, 3:6] |= ~(np.abs(boxes[:, 3:6]) <= WORLD_EXTENT)
    if wrong.any():
        box, field_index = (int(x[0]) for x in np.nonzero(wrong))
        value = boxes[box, field_index]
        rule = ("each value must be finite" if not np.isfinite(value)
                else f"a size must be > 0 and at most {2 * WORLD_EXTENT:g} m" if field_index < 3
                else f"a centre must lie within {WORLD_EXTENT:g} m of the origin")
        raise ValueError(f"world_boxes: box {box} (values {BOX_VALUES * box} to {BOX_VALUES * box + BOX_VALUES - 1}) "
                         f"has {BOX_FIELDS[field_index]} {value:g}: {rule}")
    return tuple(Box(size=box[:3], position=box[3:6], orientation=(0.0, 0.0, np.sin(box[6] / 2), np.cos(box[6] / 2)),
                     friction=friction, restitution=restitution) for box in boxes)


def scene_world(model: Model, settings: SceneSettings, collision=None, collision_shapes=None,
                disabled_collisions=(), objects=()) -> World:
    """The World of `settings` with the free `objects` (ValueError on a bad
    setting); Scene.build's arguments."""
    frames = list(settings.contact_frames)
    if len(frames) > MAX_CONTACT_POINTS:
        raise ValueError(f"contact_frames has {len(frames)} frames: at most {MAX_CONTACT_POINTS}")
    if frames and not model.floating_base:
        raise ValueError("contact_frames need a floating base (floating_base: true): a fixed base has no ground")
    unknown = [frame for frame in frames if frame not in model.frames]
    if unknown:
        raise ValueError(f"contact_frames: model '{model.name}' has no frames {unknown[:10]}")
    points = np.asarray(settings.contact_points, dtype=float)
    if points.size == 0:
        points = np.zeros((len(frames), 3))
    elif points.shape != (3 * len(frames),) or not np.all(np.isfinite(points)):
        raise ValueError(f"contact_points must hold [x, y, z] for each of the {len(frames)} contact_frames "
                         f"({3 * len(frames)} finite values), got {points.tolist()[:12]}")
    ground = Ground(height=settings.ground_height, friction=settings.ground_friction,
                    restitution=settings.ground_restitution) if model.floating_base or objects else None
    boxes = world_boxes(settings.world_boxes, settings.ground_friction, settings.ground_restitution)
    obstacles = ground is not None or bool(boxes)
    geometry = collision if not frames and obstacles and collision is not None and len(collision.bodies) else None
    contact_points = tuple(PointContact(frame, point) for frame, point in zip(frames, points.reshape(-1, 3),
                                                                              strict=True)) if obstacles else ()
    return World(ground, contact_points, boxes=boxes, contact_geometry=geometry,
                 compliance=settings.contact_compliance, objects=objects, collision_shapes=collision_shapes,
                 self_collision=settings.self_collision, disabled_collisions=disabled_collisions)


def scene_initial_configuration(model: Model, settings: SceneSettings) -> np.ndarray:
    """The initial q of `settings` (ValueError on a bad setting)."""
    names, positions = list(settings.initial_joint_names), np.asarray(settings.initial_joint_positions, float)
    if len(names) != len(positions):
        raise ValueError(f"initial_joint_names has {len(names)} names, initial_joint_positions "
                         f"{len(positions)} values (set both at once)")
    if not np.all(np.isfinite(positions)):
        raise ValueError(f"initial_joint_positions must be finite, got {positions.tolist()}")
    unknown = [name for name in names if name not in robot_joints(model)]
    if unknown:
        raise ValueError(f"initial_joint_names: model '{model.name}' has no joints {unknown[:10]}")
    q = initial_configuration(model, dict(zip(names, positions, strict=True)))
    if model.floating_base:
        pose = np.asarray(settings.initial_base_pose, dtype=float)
        if (pose.shape != (7,) or not np.all(np.isfinite(pose)) or np.abs(pose[:3]).max() > WORLD_EXTENT
                or abs(np.linalg.norm(pose[3:]) - 1) > QUATERNION_TOLERANCE):
            raise ValueError(f"initial_base_pose must be [x, y, z, qx, qy, qz, qw] with |x|, |y|, |z| <= "
                             f"{WORLD_EXTENT:g} and a unit quaternion, got {pose.tolist()[:7]}")
        q[:7] = pose  # the Simulation normalises the quaternion
    return q


def scene_actuators(model: Model, settings: SceneSettings, initial_q: np.ndarray) -> Actuators:
    """The Actuators of `settings` (ValueError on a bad setting): gains given,
    or critically damped at actuator_bandwidth for each joint's inertia M_jj at
    the initial state: stiffness M_jj (2 pi f)^2 and damping 2 M_jj 2 pi f;
    velocity joints M_jj 2 pi f."""
    position, velocity = list(settings.position_joints), list(settings.velocity_joints)
    both = sorted(set(position) & set(velocity))
    if both:
        raise ValueError(f"joints both in position_joints and velocity_joints: {both}")
    unknown = [name for name in position + velocity if name not in robot_joints(model)]
    if unknown:
        raise ValueError(f"position_joints/velocity_joints: model '{model.name}' has no joints {unknown[:10]}")
    inertia = np.diag(mass_matrix(model, initial_q))
    omega = 2 * np.pi * settings.actuator_bandwidth

    def gains(name, joints, default):
        given = np.asarray(getattr(settings, name), dtype=float)
        if given.size == 0:
            return default(np.array([inertia[model.v_index(joint)] for joint in joints]))
        if given.shape != (len(joints),) or not np.all(np.isfinite(given)) or np.any(given < 0):
            raise ValueError(f"{name} must hold a finite value >= 0 for each of its {len(joints)} joints, "
                             f"got {given.tolist()[:12]}")
        return given

    stiffness = gains("position_stiffness", position, lambda m: m * omega**2)
    damping = gains("position_damping", position, lambda m: 2 * m * omega)
    velocity_damping = gains("velocity_damping", velocity, lambda m: m * omega)
    return Actuators(position + velocity, np.concatenate([stiffness, np.zeros(len(velocity))]),
                     np.concatenate([damping, velocity_damping]))


def scene_objects(names, files, poses, search_paths=(), max_objects: int = 100, friction: float = 1.0
                  ) -> tuple[WorldObject, ...]:
    """The WorldObjects named `names`, each of the URDF file of `files` (a
    path, or package://PACKAGE/PATH) at its pose [x, y, z, qx, qy, qz, qw] of
    `poses` (world frame, flattened; empty: each at the origin), their meshes
    found beside their file and in search_paths; at most max_objects of them.
    ValueError naming the object that cannot be made and why."""
    names, files, poses = list(names), list(files), np.asarray(poses, dtype=float)
    if len(names) > max_objects:
        raise ValueError(f"world_objects names {len(names)} objects: at most max_objects ({max_objects})")
    if len(files) != len(names):
        raise ValueError(f"world_objects names {len(names)} objects, world_object_files has {len(files)} files: "
                         "one for each")
    if poses.size == 0:
        poses = np.tile([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], len(names))
    if poses.shape != (POSE_VALUES * len(names),):
        raise ValueError(f"world_object_poses must hold [x, y, z, qx, qy, qz, qw] for each of the {len(names)} "
                         f"world_objects ({POSE_VALUES * len(names)} values), got {poses.size}")
    objects = []
    for name, uri, pose in zip(names, files, poses.reshape(-1, POSE_VALUES), strict=True):
        if not (np.all(np.isfinite(pose)) and np.abs(pose[:3]).max() <= WORLD_EXTENT
                and abs(np.linalg.norm(pose[3:]) - 1) <= QUATERNION_TOLERANCE):
            raise ValueError(f"world_object_poses: object '{name}' has {pose.tolist()}: |x|, |y|, |z| <= "
                             f"{WORLD_EXTENT:g} and a unit quaternion, finite")
        try:
            path = resolve(uri, search_paths)
        except ResourceNotFound as error:
            raise ValueError(f"world_object_files: object '{name}': {error}") from None
        urdf = read_file(path, f"object '{name}' URDF", MAX_URDF_BYTES)
        objects.append(WorldObject(name, urdf, position=tuple(pose[:3]), orientation=tuple(pose[3:]),
                                   friction=friction, search_paths=(str(Path(path).parent), *search_paths)))
    return tuple(objects)
