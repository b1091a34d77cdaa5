"""A state consistent with the world: the deepest of the robot's contact
points inside an obstacle (penetration), a floating base lifted clear of
the obstacles (lifted_clear), and a free object placed where it can join the
world (placed_object), which is what a state given "relative to the
world" means: a state whose points lie inside an obstacle is pushed out at
`stabilization` of the depth per step, 24 m/s for 0.12 m at dt = 1 ms."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.kinematics import body_poses
from mbs_dynamics.collision.queries import distance
from mbs_dynamics.multibody.model import ROOT_JOINT, Model
from mbs_dynamics.simulation.objects import WorldObject
from mbs_dynamics.simulation.simulation import MARGIN, PAIRS_PER_PASS, World, contact_spheres
from mbs_dynamics.simulation.stepping import PLANE, sphere_gaps


def body_links(model: Model) -> list[str]:
    """Each body's link: the child of its joint (the URDF root for a floating base)."""
    joints = model.description.joints
    return [joints[name].child if name in joints else model.description.root for name in model.body_joint_names]


@dataclass(frozen=True)
class Penetration:
    """The deepest contact point of a state inside an obstacle: `depth` (m)
    inside it, on `link`, in `obstacle` ('the ground' or 'box <k>', k its index
    in World.boxes)."""

    depth: float
    link: str
    obstacle: str

    def __str__(self) -> str:
        return f"link '{self.link}' lies {self.depth:.3g} m inside {self.obstacle}"


def _obstacle_gaps(positions: np.ndarray, radii: np.ndarray, obstacles: np.ndarray) -> np.ndarray:
    """(k, m): the signed distance (m, negative inside) of each sphere (centre
    positions (k, 3), radii (k,)) from each obstacle (OBSTACLE records), as
    the step measures it."""
    gaps = np.empty((positions.shape[0], obstacles.shape[0]))
    sphere_gaps(np.ascontiguousarray(positions), np.ascontiguousarray(radii), obstacles, gaps)
    return gaps


def _exit_lifts(positions: np.ndarray, radii: np.ndarray, obstacles: np.ndarray, up: np.ndarray) -> np.ndarray:
    """(k,): how far each sphere must move along the unit vector `up` to leave
    its obstacle (one row each): a plane's penetration over the cosine of
    `up` with its normal; a box grown by the radius, the distance to where a
    ray along `up` leaves it (at an edge a little more than the sphere needs)."""
    axes = obstacles["axes"]
    local = np.einsum("kij,kj->ki", axes, positions - obstacles["centre"])
    direction = np.einsum("kij,j->ki", axes, up)
    half = obstacles["half_extents"] + radii[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        exits = np.where(np.abs(direction) > 1e-12, (np.sign(direction) * half - local) / direction, np.inf)
        plane_lift = (radii - local[:, 2]) / direction[:, 2]
    return np.where(obstacles["kind"] == PLANE, plane_lift, exits.min(axis=1))


def _penetrating(model: Model, world: World, q: np.ndarray, spheres: np.ndarray, tolerance: float):
    """(world positions of the spheres' centres (k, 3), the deepest Penetration
    or None, (spheres, obstacles) of the pairs deeper than `tolerance`) at q;
    obstacles whose bounding boxes miss the spheres' are left out, the pairs
    taken PAIRS_PER_PASS at a time."""
    bodies, radii = spheres["body"], spheres["radius"]
    world_R, world_p = body_poses(model, q)
    positions = world_p[bodies] + np.einsum("kij,kj->ki", world_R[bodies], spheres["centre"])
    obstacles = world.obstacles
    low, high = (positions - radii[:, None]).min(axis=0), (positions + radii[:, None]).max(axis=0)
    centres = obstacles["centre"]
    reach = np.einsum("mij,mi->mj", np.abs(obstacles["axes"]), obstacles["half_extents"])
    near = np.flatnonzero((obstacles["kind"] == PLANE) | np.all((centres - reach <= high) & (centres + reach >= low),
                                                                axis=1))
    least, deepest, pairs = -tolerance, None, ([np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)])
    block = max(1, PAIRS_PER_PASS // len(positions))
    for start in range(0, len(near), block):
        chosen = near[start:start + block]
        gaps = _obstacle_gaps(positions, radii, obstacles[chosen])
        inside, obstacle = np.nonzero(gaps < -tolerance)
        pairs[0].append(inside)
        pairs[1].append(chosen[obstacle])
        k, j = np.unravel_index(np.argmin(gaps), gaps.shape)
        if gaps[k, j] < least:
            least, deepest = float(gaps[k, j]), (int(k), int(chosen[j]))
    pairs = (np.concatenate(pairs[0]), np.concatenate(pairs[1]))
    if deepest is None:
        return positions, None, pairs
    box = deepest[1] - (world.ground is not None)
    found = Penetration(-least, body_links(model)[bodies[deepest[0]]], "the ground" if box < 0 else f"box {box}")
    return positions, found, pairs


def _moving_spheres(model: Model, world: World) -> np.ndarray | None:
    """The SPHERE records of the world's contact points that move with the
    robot, or None when there are none or nothing to touch."""
    spheres = contact_spheres(model, world)
    moving = spheres[spheres["body"] >= 0]
    if not len(moving) or not len(world.obstacles):
        return None
    return moving


def penetration(model: Model, world: World, q, tolerance: float = MARGIN) -> Penetration | None:
    """The deepest of the robot's contact points (World.contact_points and
    contact_geometry, those fixed in the world left out) inside an obstacle of
    `world` at q, or None when none lies deeper than `tolerance` (m)."""
    q = inputs.configuration(model, q, batch=False)
    spheres = _moving_spheres(model, world)
    return None if spheres is None else _penetrating(model, world, q, spheres, tolerance)[1]


def lifted_clear(model: Model, world: World, q, tolerance: float = MARGIN) -> tuple[np.ndarray, float,
                                                                                      Penetration | None]:
    """(q, lift, the deepest penetration at the given q or None): a floating
    base translated by `lift` (m) along the ground's normal (world z without
    a ground) until no contact point lies deeper than `tolerance` inside an
    obstacle, the deepest then on its surface (lifted out of a box, a point may
    meet one above it: lifted again, at most once per obstacle). ValueError
    when the robot penetrates and has a fixed base, or still does after that."""
    q = np.array(inputs.configuration(model, q, batch=False))
    spheres = _moving_spheres(model, world)
    if spheres is None:
        return q, 0.0, None
    radii = spheres["radius"]
    up = world.ground.contact_axes[0] if world.ground is not None else np.array([0.0, 0.0, 1.0])
    obstacles, first, lift = world.obstacles, None, 0.0
    for _ in range(len(obstacles) + 1):
        positions, deepest, (points, inside) = _penetrating(model, world, q, spheres, tolerance)
        if deepest is None:
            return q, lift, first
        first = first or deepest
        if not model.floating_base:
            raise ValueError(f"{deepest}, and a fixed base cannot be lifted clear of it")
        step = float(np.max(_exit_lifts(positions[points], radii[points], obstacles[inside], up)))
        base = model.q_index(ROOT_JOINT)
        q[base:base + 3] += step * up
        lift += step
    raise ValueError(f"{first}, and lifted by {lift:.3g} m the robot still penetrates the obstacles")


def _placed_shapes(shapes, world_R: np.ndarray, world_p: np.ndarray):
    """(shape, (rotation, translation) world <- shape, its name) of each of a
    BodyShapes' shapes, its bodies at the poses world_R, world_p."""
    for body, shape, R, t, name in zip(shapes.bodies, shapes.shapes, shapes.rotations, shapes.translations,
                                       shapes.names, strict=True):
        yield shape, ((R, t) if body < 0 else (world_R[body] @ R, world_R[body] @ t + world_p[body])), name


def placed_object(simulation, thing: WorldObject, world: World | None = None, tolerance: float = MARGIN
                  ) -> tuple[WorldObject, str]:
    """(`thing` as it can join the simulation's objects now, what was done ''
    when nothing): lifted along the ground's normal (world z without a ground)
    until none of its points lies inside the ground or a box of `world` (None:
    the simulation's; the robot's collision shapes are its too), as a floating
    base is; ValueError naming the body it would lie inside (a link of the
    robot, another object) and how deep: a body is never pushed out of
    another (two bodies in one another would be thrown apart)."""
    world, said = world or simulation.world, ""
    if (world.ground is not None or world.boxes) and len(thing.points.bodies):
        obstacles = World(world.ground, boxes=world.boxes, contact_geometry=thing.points)
        q, lift, deepest = lifted_clear(thing.model, obstacles, thing.q, tolerance)
        if deepest is not None:
            thing = replace(thing, position=tuple(q[:3]))
            said = f"object '{thing.name}': {deepest}: lifted {lift:.3g} m, clear of it"
    others = []  # (BodyShapes, body poses, whose)
    if world.collision_shapes is not None:
        others.append((world.collision_shapes, body_poses(simulation.model, simulation.q), "the robot"))
    for other in simulation.world.objects:
        others.append((other.shapes, body_poses(other.model, simulation.object_state(other.name)[0]),
                       f"object '{other.name}'"))
    deepest = (-tolerance, "")
    for shape, pose, _ in _placed_shapes(thing.shapes, *body_poses(thing.model, thing.q)):
        for shapes, poses, whose in others:
            for other_shape, other_pose, name in _placed_shapes(shapes, *poses):
                if np.linalg.norm(pose[1] - other_pose[1]) > shape.reach + other_shape.reach + tolerance:
                    continue
                gap = distance(shape, pose, other_shape, other_pose).distance
                if gap < deepest[0]:
                    deepest = (gap, f"{whose} (link '{name.split('/')[0]}')")
    if deepest[1]:
        raise ValueError(f"object '{thing.name}' would lie {-deepest[0]:.3g} m inside {deepest[1]}: refused, "
                         "place it clear of the other bodies")
    return thing, said
