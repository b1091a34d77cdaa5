"""Free objects in a simulation's world and what the step needs of them
beside the robot: WorldObject (a URDF of its own at a pose), and the system
(multibody.assembly: the robot and the objects in one model), the points
with which every body meets the ground and the boxes, the convex shapes
with which bodies meet bodies, and which bodies may meet (collide_matrix):
objects each other and the robot, the robot itself only with self-collision
on, never a body and its parent, nor the link pairs a MoveIt SRDF disables.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbs_dynamics.algorithms.crba import ltl_factor, mass_matrix
from mbs_dynamics.collision.shapes import NO_SHAPES, ShapeSet, shape_set
from mbs_dynamics.simulation.stepping import NO_COLLIDE
from mbs_dynamics.contact.geometry import BodyShapes, collision_contacts, collision_shapes
from mbs_dynamics.multibody.assembly import OBJECT_NAME, assemble
from mbs_dynamics.multibody.model import FLOATING, Model
from mbs_dynamics.multibody.parsers.urdf import URDFError

MAX_OBJECT_VERTICES = 48  # of a mesh's hull as the points an object meets the ground with (contact_geometry's)


@dataclass(frozen=True, eq=False)
class WorldObject:
    """A free object: `name` (a letter, then letters, digits or '_'), its URDF
    (XML text: a link with <inertial> and <collision>; several links joined
    by joints make a free articulated object), its root link's pose at the
    start (position (3,), orientation (x, y, z, w)) and body twist ([ω; v],
    root link axes), the Coulomb friction and restitution of its shapes, and
    where its meshes are found. Refused (ValueError) when its URDF is
    malformed, it has no mass or a singular inertia, or no collision
    geometry to meet anything with."""

    name: str
    urdf: str
    position: tuple = (0.0, 0.0, 0.0)
    orientation: tuple = (0.0, 0.0, 0.0, 1.0)
    twist: tuple = (0.0,) * 6
    friction: float = 1.0
    restitution: float = 0.0
    search_paths: tuple = ()
    model: Model = field(init=False, repr=False)
    points: object = field(init=False, repr=False)
    shapes: BodyShapes = field(init=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not OBJECT_NAME.match(self.name):
            raise ValueError(f"an object's name must be a letter then letters, digits or '_', got {self.name!r}")
        what = f"object '{self.name}'"
        position, orientation, twist = (np.asarray(x, dtype=float) for x in (self.position, self.orientation,
                                                                              self.twist))
        if position.shape != (3,) or orientation.shape != (4,) or twist.shape != (6,) or not (
                np.all(np.isfinite(position)) and np.all(np.isfinite(orientation)) and np.all(np.isfinite(twist))):
            raise ValueError(f"{what}: position (3,), orientation (x, y, z, w) and twist (6,) must be finite numbers")
        norm = np.linalg.norm(orientation)
        if not 0.5 < norm < 2.0:
            raise ValueError(f"{what}: orientation {orientation.tolist()} is not a unit quaternion")
        if not (np.isfinite(self.friction) and self.friction >= 0.0 and np.isfinite(self.restitution)
                and 0.0 <= self.restitution <= 1.0):
            raise ValueError(f"{what}: friction must be >= 0 and restitution in [0, 1]")
        try:
            model = Model.from_urdf_string(self.urdf, floating_base=True)
        except URDFError as error:
            raise ValueError(f"{what}: {error}") from None
        M = mass_matrix(model, model.neutral_configuration())
        if model.total_mass <= 0.0 or ltl_factor(M, model.dof_parent) >= 0:
            raise ValueError(f"{what} has no mass or a singular inertia (total mass {model.total_mass:g} kg): "
                             "each link needs an <inertial> with a positive mass and inertia")
        points = collision_contacts(model, self.urdf, self.search_paths, MAX_OBJECT_VERTICES)
        shapes = collision_shapes(model, self.urdf, self.search_paths)
        if not len(shapes.shapes):
            raise ValueError(f"{what} has no usable <collision> geometry: it would touch nothing"
                             + (f" ({'; '.join(shapes.warnings)})" if shapes.warnings else ""))
        for name, value in (("position", position), ("orientation", orientation / norm), ("twist", twist)):
            object.__setattr__(self, name, tuple(float(x) for x in value))
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "points", points)
        object.__setattr__(self, "shapes", shapes)

    @property
    def q(self) -> np.ndarray:
        """Its coordinates at the start: the pose, its own joints at 0."""
        q = self.model.neutral_configuration()
        q[:7] = self.position + self.orientation
        return q

    @property
    def v(self) -> np.ndarray:
        v = np.zeros(self.model.nv)
        v[:6] = self.twist
        return v


@dataclass(frozen=True)
class System:
    """What a step needs of a world with objects: the system model and its
    Parts, the SPHERE-record inputs of every body's contact points (bodies,
    centres, radii), the ShapeSet of the bodies' shapes and the collide
    matrix (stepping's World)."""

    model: Model
    parts: tuple
    point_bodies: np.ndarray
    point_centres: np.ndarray
    point_radii: np.ndarray
    shapes: ShapeSet
    collide: np.ndarray


def collide_matrix(model: Model, robot_bodies: int, parts, self_collision: bool, disabled=()) -> np.ndarray:
    """(nbodies + 1, nbodies + 1) bool: whether bodies a and b (row a + 1;
    row 0: the world, its fixed links) may touch (module docstring).
    disabled: pairs of body indices never to."""
    n = model.nbodies
    collide = np.ones((n + 1, n + 1), dtype=np.bool_)
    np.fill_diagonal(collide, False)
    robot = np.r_[0, 1:robot_bodies + 1]  # the world's fixed links are the robot's
    if not self_collision:
        collide[np.ix_(robot, robot)] = False
    free_roots = {part.first_body for part in parts} | ({0} if robot_bodies and model.joint_type[0] == FLOATING
                                                        else set())
    for body in range(n):
        if body not in free_roots:  # a body and its parent touch where their joint is
            collide[body + 1, model.parent[body] + 1] = collide[model.parent[body] + 1, body + 1] = False
    for a, b in disabled:
        collide[a + 1, b + 1] = collide[b + 1, a + 1] = False
    return collide


def disabled_body_pairs(model: Model, link_pairs) -> tuple[tuple[int, int], ...]:
    """The body pairs of (link, link) pairs (an SRDF's <disable_collisions>);
    links the model does not have are left out (an SRDF often names more)."""
    pairs = []
    for first, second in link_pairs:
        if first in model.frames and second in model.frames:
            pairs.append((model.frame(first).body, model.frame(second).body))
    return tuple(pairs)


def build_system(robot: Model, objects, robot_points, robot_shapes: BodyShapes | None, self_collision: bool,
                 disabled=(), robot_friction: float = 1.0) -> System:
    """The System of the robot (its contact points: (bodies, centres,
    radii); its BodyShapes, None: none) and the WorldObjects. Without
    objects and self-collision the bodies have no shapes to collide."""
    pairs = [(o.name, o.model.description) for o in objects]
    system, parts = assemble(robot, pairs) if pairs else (robot, ())
    bodies, centres, radii = [robot_points[0]], [robot_points[1]], [robot_points[2]]
    collide_needed = bool(objects) or self_collision
    shape_bodies, shapes, rotations, translations, friction, restitution = [], [], [], [], [], []
    if collide_needed and robot_shapes is not None:
        shape_bodies.append(robot_shapes.bodies)
        shapes += robot_shapes.shapes
        rotations.append(robot_shapes.rotations)
        translations.append(robot_shapes.translations)
        friction += [robot_friction] * len(robot_shapes.shapes)
        restitution += [0.0] * len(robot_shapes.shapes)
    for thing, part in zip(objects, parts, strict=True):
        # the object's own body b is the system's part.first_body + b; its body -1 cannot be (a free root)
        bodies.append(part.first_body + thing.points.bodies)
        centres.append(thing.points.points)
        radii.append(thing.points.radii)
        shape_bodies.append(part.first_body + thing.shapes.bodies)
        shapes += thing.shapes.shapes
        rotations.append(thing.shapes.rotations)
        translations.append(thing.shapes.translations)
        friction += [thing.friction] * len(thing.shapes.shapes)
        restitution += [thing.restitution] * len(thing.shapes.shapes)
    if shapes:
        shape_records = shape_set(shapes, np.concatenate(shape_bodies), np.concatenate(rotations),
                                  np.concatenate(translations), np.array(friction), np.array(restitution))
        collide = collide_matrix(system, robot.nbodies, parts, self_collision, disabled)
        for array in (*shape_records, collide):  # read-only, as NO_SHAPES: one compiled signature for both
            array.setflags(write=False)
    else:
        shape_records, collide = NO_SHAPES, NO_COLLIDE
    return System(system, parts, np.concatenate(bodies).astype(np.int64), np.concatenate(centres).reshape(-1, 3),
                  np.concatenate(radii), shape_records, collide)
