"""A robot in a world: gravity, obstacles (a ground plane, static boxes)
touched at the robot's contact points, the joints' URDF position limits,
damping and friction, and actuators; the state (t, q, v) advanced by
step(tau, steps). What the simulator node integrates, without ROS.

Every step is compiled (stepping.simulate_kernel), many per call: by
velocity-level time stepping (semi-implicit Euler with the contact, limit and
joint-friction impulses, damping and actuator gains implicit), or, with
integrator 'rk4' (the default) or 'rkmk4', by that integrator when nothing
acts by impulses or implicitly in the step (no point within reach of an
obstacle, no joint at or reaching a limit, no joint friction, no actuator
gain). rk4 is the default: semi_implicit_euler is symplectic only for a
constant mass matrix, and a robot's energy drifts under it
(test_simulation.py).

Actuators (Actuators): a joint with a stiffness is position-controlled, one
with only a damping velocity-controlled, toward the targets of set_targets;
the others take the efforts of step(tau). Each actuator's effort is clamped
to the joint's URDF effort limit.

A state whose contact points lie inside an obstacle is pushed out at
`stabilization` of the depth per step: 0.2 m/s for 1 mm at dt = 1 ms, 24 m/s
for 0.12 m (a robot started below a raised ground flew tens of metres).
penetration() finds the deepest point of a state, lifted_clear() raises a
floating base along the ground's normal until no point lies deeper than the
margin, which is what a state given "relative to the world" means.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.kinematics import body_poses
from mbs_dynamics.algorithms.rnea import nonlinear_effects
from mbs_dynamics.collision.shapes import NO_SHAPES
from mbs_dynamics.contact.constraints import PointContact
from mbs_dynamics.multibody.model import ROOT_JOINT, Model
from mbs_dynamics.multibody.workspace import scratch
from mbs_dynamics.simulation.integrators import INTEGRATORS
from mbs_dynamics.simulation.stepping import (
    ACTUATOR,
    NO_COLLIDE,
    SPHERE,
    INTEGRATOR_CODES,
    PLANE,
    Box,
    ContactStep,
    Ground,
    StepResults,
    check_report,
    copy_records,
    joint_terms,
    new_record,
    new_results,
    obstacle_records,
    position_limits,
    resolve_points,
    simulate_kernel,
    sphere_gaps,
    step_settings,
)

DEFAULT_INTEGRATOR = "rk4"
# How near (m) an obstacle a contact point counts as touching it: its rows join the step; no deeper inside it,
# a state counts as clear of it (penetration).
MARGIN = 1e-4
# Point-obstacle pairs whose distances one pass of penetration() computes at once (memory: 24 bytes a pair per
# temporary array).
PAIRS_PER_PASS = 200_000


@dataclass(frozen=True)
class World:
    """What the robot meets: `ground` (None: no ground) and static `boxes`
    (Box), touched at `contact_points` (PointContact: points fixed in link
    frames, e.g. the feet) and at the points of `contact_geometry` (an object
    with arrays bodies (k,), points (k, 3) in the bodies' frames and radii (k,),
    e.g. contact_geometry.collision_contacts of the URDF's collision elements);
    which of the joints' URDF properties act; and `compliance`, the softness of
    the contact rows (stepping: 0 is rigid)."""

    ground: Ground | None = field(default_factory=Ground)
    contact_points: tuple = ()
    joint_limits: bool = True
    joint_damping: bool = True
    joint_friction: bool = True
    boxes: tuple = ()
    contact_geometry: object = None
    compliance: float = 0.0

    def __post_init__(self):
        points = tuple(self.contact_points)
        for point in points:
            if not isinstance(point, PointContact):
                raise ValueError(f"contact points must be PointContact(frame, point), got {point!r}")
        boxes = tuple(self.boxes)
        for box in boxes:
            if not isinstance(box, Box):
                raise ValueError(f"boxes must be Box(size, position, orientation), got {box!r}")
        if self.ground is not None and not isinstance(self.ground, Ground):
            raise ValueError(f"ground must be a Ground or None, got {self.ground!r}")
        if not (np.isfinite(self.compliance) and 0.0 <= self.compliance <= 1.0):
            raise ValueError(f"compliance must be in [0, 1], got {self.compliance!r}")
        if (points or self.contact_geometry is not None) and self.ground is None and not boxes:
            raise ValueError("contact points need a ground (or boxes) to touch")
        object.__setattr__(self, "contact_points", points)
        object.__setattr__(self, "boxes", boxes)

    @property
    def obstacles(self) -> np.ndarray:
        """The OBSTACLE records (m,): the ground first, then the boxes."""
        return obstacle_records(([self.ground] if self.ground is not None else []) + list(self.boxes))


@dataclass(frozen=True)
class Actuators:
    """PD actuators on `joints` (one-coordinate joints: revolute, continuous,
    prismatic): stiffness (N m/rad or N/m) and damping (N m s/rad or N s/m)
    each; a stiffness > 0 makes the joint position-controlled, a damping alone
    velocity-controlled. Joints not listed take efforts."""

    joints: tuple = ()
    stiffness: tuple = ()
    damping: tuple = ()

    def __post_init__(self):
        for name in ("joints", "stiffness", "damping"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not len(self.joints) == len(self.stiffness) == len(self.damping):
            raise ValueError(f"actuators need a stiffness and a damping per joint: {len(self.joints)} joints, "
                             f"{len(self.stiffness)} stiffnesses, {len(self.damping)} dampings")
        gains = np.array(self.stiffness + self.damping, dtype=float)
        if not np.all(np.isfinite(gains)) or np.any(gains < 0):
            raise ValueError(f"actuator gains must be finite and >= 0, got {gains.tolist()}")
        if len(set(self.joints)) != len(self.joints):
            raise ValueError(f"actuator joints listed twice: {sorted({j for j in self.joints if self.joints.count(j) > 1})}")


def outside_limits(model: Model, q) -> list[str]:
    """The joints whose position in q lies outside their URDF limits."""
    names = {int(model.q_index(name)): name for name in model.joint_names}
    outside = (q < model.lower_position_limit) | (q > model.upper_position_limit)
    return [names[index] for index in np.flatnonzero(outside) if index in names]


def initial_configuration(model: Model, positions: dict | None = None) -> np.ndarray:
    """The neutral configuration moved inside the joint limits (a joint whose
    neutral 0 lies outside them starts at their middle), then `positions`
    (joint name -> value) applied, each checked against its limits."""
    q = model.neutral_configuration()
    limits = position_limits(model)
    limit_q, lower, upper = limits["q"], limits["lower"], limits["upper"]
    outside = (q[limit_q] < lower) | (q[limit_q] > upper)
    q[limit_q[outside]] = 0.5 * (lower[outside] + upper[outside])
    for name, value in (positions or {}).items():
        q[model.q_index(name)] = value
    q = inputs.configuration(model, q, batch=False)
    outside = outside_limits(model, q)
    if outside:
        raise ValueError(f"initial positions outside the joint limits: {outside}")
    return q


def contact_spheres(model: Model, world: World) -> np.ndarray:
    """The SPHERE records of the world's contact points, then of its contact
    geometry's."""
    spheres = resolve_points(model, world.contact_points)
    geometry = world.contact_geometry
    if geometry is None:
        return spheres
    more_bodies = np.asarray(geometry.bodies, dtype=np.int64)
    more_points, more_radii = np.asarray(geometry.points, dtype=float), np.asarray(geometry.radii, dtype=float)
    k = more_bodies.shape[0]
    if more_bodies.shape != (k,) or more_points.shape != (k, 3) or more_radii.shape != (k,):
        raise ValueError(f"contact geometry must have bodies (k,), points (k, 3) and radii (k,), got "
                         f"{more_bodies.shape}, {more_points.shape}, {more_radii.shape}")
    if k and (more_bodies.min() < -1 or more_bodies.max() >= model.nbodies):
        raise ValueError(f"contact geometry bodies must be body indices of model '{model.name}' "
                         f"(0 to {model.nbodies - 1}, or -1)")
    if not (np.all(np.isfinite(more_points)) and np.all(np.isfinite(more_radii)) and np.all(more_radii >= 0)):
        raise ValueError("contact geometry points must be finite, radii finite and >= 0")
    return np.concatenate([spheres, new_record(SPHERE, k, body=more_bodies, centre=more_points, radius=more_radii)])


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


class Simulation:
    """The state (time, q, v) of `model` in `world`, advanced by step(tau,
    steps) at dt (module docstring); `steps` counts the steps since reset.
    `last` is the last call's ContactStep (the result records of its last
    step: the contact forces, every point-obstacle pair's impulses, contact
    velocity and bias, the actuators' efforts, the accelerations, the contact
    wrench on each body; and the call's report: solver sweeps, largest
    residual, steps unconverged, smooth and softened)."""

    def __init__(self, model: Model, world: World = World(), dt: float = 1e-3,
                 integrator: str = DEFAULT_INTEGRATOR, q=None, v=None, actuators: Actuators = Actuators(),
                 tolerance: float = 1e-10, max_iterations: int = 200, stabilization: float = 0.2,
                 margin: float = MARGIN):
        if integrator not in INTEGRATORS:
            raise ValueError(f"integrator must be one of {', '.join(INTEGRATORS)}, got {integrator!r}")
        self._settings = step_settings(dt, stabilization, margin, tolerance, max_iterations,
                                       INTEGRATOR_CODES[integrator])
        self.model, self.dt, self.integrator = model, float(dt), integrator
        self.tolerance = tolerance
        self._buffer = scratch(model)
        self._actuation = new_record(ACTUATOR, model.nv, limit=model.effort_limit, target_q=-1)
        self._results: StepResults | None = None
        self.set_actuators(actuators)
        self.set_world(world)
        self.set_initial_state(initial_configuration(model) if q is None else q,
                               np.zeros(model.nv) if v is None else v)
        self.reset()

    # --- what the robot meets and how it is driven -------------------------------

    def set_world(self, world: World) -> None:
        """What the robot meets from now on; the state goes on (the joints'
        warm starts with it)."""
        if not isinstance(world, World):
            raise ValueError(f"world must be a World, got {world!r}")
        model = self.model
        spheres = contact_spheres(model, world)
        obstacles = world.obstacles
        self.world = world
        self._world = (spheres, obstacles, *joint_terms(model, world.joint_limits, world.joint_damping,
                                                        world.joint_friction), NO_SHAPES, NO_COLLIDE)
        self._settings["compliance"] = world.compliance
        results = new_results(spheres.shape[0], obstacles.shape[0], model.nv, model.nbodies)
        if self._results is not None:
            results.coordinates[...] = self._results.coordinates
        self._results = results
        self.last = None  # its forces are of the old contact points

    @property
    def contact_count(self) -> int:
        """The number of contact points (contact_points, then contact_geometry's)."""
        return self._world[0].shape[0]

    def set_actuators(self, actuators: Actuators) -> None:
        """The PD actuators from now on (Actuators); their targets stay."""
        if not isinstance(actuators, Actuators):
            raise ValueError(f"actuators must be Actuators, got {actuators!r}")
        model = self.model
        stiffness, damping = np.zeros(model.nv), np.zeros(model.nv)
        target_q = np.full(model.nv, -1, dtype=np.int64)
        for name, k, d in zip(actuators.joints, actuators.stiffness, actuators.damping, strict=True):
            if name not in model.joint_names:
                raise ValueError(f"actuators: model '{model.name}' has no joint '{name}'")
            body = model.body_joint_names.index(name)
            if model.nv_joint[body] != 1:
                raise ValueError(f"actuators: joint '{name}' has {model.nv_joint[body]} coordinates: only "
                                 "one-coordinate joints (revolute, continuous, prismatic) take an actuator")
            iv = model.v_index(name)
            stiffness[iv], damping[iv] = k, d
            target_q[iv] = model.q_index(name)
        self.actuators = actuators
        self._actuation["stiffness"], self._actuation["damping"] = stiffness, damping
        self._actuation["target_q"] = target_q

    def set_targets(self, positions=None, velocities=None) -> None:
        """The actuators' targets (nv,), by velocity index: positions of the
        position-controlled coordinates, velocities of all actuated ones (None:
        unchanged). Read where a coordinate has an actuator, ignored elsewhere."""
        for value, target, name in ((positions, "position_target", "position targets"),
                                    (velocities, "velocity_target", "velocity targets")):
            if value is not None:
                self._actuation[target] = inputs.vector(self.model, value, self.model.nv, name, batch=False)

    # --- the state -----------------------------------------------------------------

    def set_initial_state(self, q, v) -> None:
        """The state reset() goes back to (checked as set_state checks)."""
        self.initial_q, self.initial_v = self._checked(q, v)

    def reset(self, q=None, v=None) -> None:
        """Back to time 0 at (q, v), by default the initial state."""
        self.set_state(self.initial_q if q is None else q, self.initial_v if v is None else v)
        self.steps = 0

    def _checked(self, q, v) -> tuple[np.ndarray, np.ndarray]:
        """(q, v) as float arrays, quaternions normalised; ValueError when invalid
        or too large to compute with (the dynamics at (q, v) overflow)."""
        q = np.array(inputs.configuration(self.model, q, batch=False))
        for start, _ in self.model.quaternions:
            q[start:start + 4] /= np.linalg.norm(q[start:start + 4])
        v = np.array(inputs.vector(self.model, v, self.model.nv, "v", batch=False))
        nonlinear_effects(self.model, q, v)
        return q, v

    def set_state(self, q, v) -> None:
        """Put the robot at (q, v) now (quaternions normalised); time goes on,
        the warm starts are dropped."""
        self.q, self.v = self._checked(q, v)
        self._results.contacts["impulse"] = 0.0
        self._results.coordinates["joint_impulse"] = 0.0
        self.last: ContactStep | None = None

    @property
    def contact_forces(self) -> np.ndarray:
        """(k, 3) the mean force of the obstacles on each contact point over the
        last step, world axes."""
        return self.last.forces.copy() if self.last is not None else np.zeros((self.contact_count, 3))

    # --- stepping ------------------------------------------------------------------

    def step(self, tau=None, steps: int = 1) -> ContactStep:
        """`steps` steps of dt under the joint efforts tau (nv,; None: zero) and
        the actuators toward their targets; returns the ContactStep of the call
        (module and class docstrings). On a step that cannot be taken it raises,
        the state left at the step before."""
        model, actuation = self.model, self._actuation
        actuation["effort"] = 0.0 if tau is None else inputs.vector(model, tau, model.nv, "tau", batch=False)
        steps = int(steps)
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self._settings["steps"] = steps
        q_before, v_before = self.q.copy(), self.v.copy()
        results = self._results
        simulate_kernel(model.packed, model.dof_parent, self._world, actuation, self._settings, self.q, self.v,
                        tuple(results), self._buffer)
        report = results.report.copy()
        self.steps += int(report["steps"][0])
        check_report(model, report, "the simulation step", q_before, (v_before, "v"), (actuation["effort"], "tau"),
                     (actuation["position_target"], "position targets"),
                     (actuation["velocity_target"], "velocity targets"))
        self.last = ContactStep(self.q.copy(), self.v.copy(), *(copy_records(records) for records in results[:5]), report[0],
                                self.tolerance)
        return self.last

    @property
    def time(self) -> float:
        """Simulated time (s): steps times dt, so that 1000 steps of 1 ms are 1.0 s exactly."""
        return self.steps * self.dt

