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

Free objects (World.objects, objects.py) are stepped with the robot, as one
system model: the robot's q and v are the system's first nq and nv, each
object's state is read and set by name (object_state, set_object_state), and
set_world adds and removes objects while the rest goes on.

A state whose contact points lie inside an obstacle is pushed out at
`stabilization` of the depth per step (placement.py: a state consistent
with the world).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.rnea import nonlinear_effects
from mbs_dynamics.contact.constraints import PointContact
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.multibody.workspace import scratch
from mbs_dynamics.simulation.integrators import INTEGRATORS
from mbs_dynamics.simulation.objects import System, WorldObject, build_system, disabled_body_pairs
from mbs_dynamics.simulation.stepping import (
    ACTUATOR,
    SPHERE,
    INTEGRATOR_CODES,
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
    step_settings,
    work_buffers,
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
    the contact rows (stepping: 0 is rigid).

    Free `objects` (WorldObject, distinct names) meet the ground and the boxes
    at their collision geometry's points, and each other and the robot's
    `collision_shapes` (contact.geometry.collision_shapes of the URDF) by
    convex collision; with `self_collision` the robot's links meet each other
    too, but for `disabled_collisions` ((link, link) pairs: a MoveIt SRDF's)
    and a body and its parent. Up to `max_collisions` contact points between
    bodies per step (the rest are left out and counted)."""

    ground: Ground | None = field(default_factory=Ground)
    contact_points: tuple = ()
    joint_limits: bool = True
    joint_damping: bool = True
    joint_friction: bool = True
    boxes: tuple = ()
    contact_geometry: object = None
    compliance: float = 0.0
    objects: tuple = ()
    collision_shapes: object = None
    self_collision: bool = False
    disabled_collisions: tuple = ()
    max_collisions: int = 512

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
        objects = tuple(self.objects)
        for thing in objects:
            if not isinstance(thing, WorldObject):
                raise ValueError(f"objects must be WorldObject, got {thing!r}")
        names = [thing.name for thing in objects]
        if len(set(names)) != len(names):
            raise ValueError(f"objects must have distinct names, got {sorted(names)}")
        if self.self_collision and self.collision_shapes is None:
            raise ValueError("self_collision needs the robot's collision_shapes")
        disabled = tuple(tuple(pair) for pair in self.disabled_collisions)
        if not all(len(pair) == 2 and all(isinstance(link, str) for link in pair) for pair in disabled):
            raise ValueError("disabled_collisions must be (link, link) pairs of names")
        if not (isinstance(self.max_collisions, (int, np.integer)) and 0 <= self.max_collisions <= 100_000):
            raise ValueError(f"max_collisions must be an integer in [0, 100000], got {self.max_collisions!r}")
        object.__setattr__(self, "contact_points", points)
        object.__setattr__(self, "boxes", boxes)
        object.__setattr__(self, "objects", objects)
        object.__setattr__(self, "disabled_collisions", disabled)

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
        self._system: System | None = None
        self._results: StepResults | None = None
        self.set_world(world)
        self.set_actuators(actuators)
        self.set_initial_state(initial_configuration(model) if q is None else q,
                               np.zeros(model.nv) if v is None else v)
        self.reset()

    # --- what the robot meets and how it is driven -------------------------------

    def set_world(self, world: World) -> None:
        """What the robot meets from now on; the state goes on (the joints'
        warm starts with it), and the objects that stay keep theirs: a new
        object starts at its pose and twist."""
        if not isinstance(world, World):
            raise ValueError(f"world must be a World, got {world!r}")
        model, before = self.model, self._system
        robot_points = contact_spheres(model, world)
        system = build_system(model, world.objects, (robot_points["body"], robot_points["centre"],
                                                     robot_points["radius"]),
                              world.collision_shapes, world.self_collision,
                              disabled_body_pairs(model, world.disabled_collisions))
        whole = system.model
        spheres = new_record(SPHERE, len(system.point_bodies), body=system.point_bodies, centre=system.point_centres,
                             radius=system.point_radii)
        self._world = (spheres, world.obstacles, *joint_terms(whole, world.joint_limits, world.joint_damping,
                                                              world.joint_friction), system.shapes, system.collide)
        self._settings["compliance"] = world.compliance
        results = new_results(len(spheres), len(world.obstacles), whole.nv, whole.nbodies,
                              world.max_collisions if len(system.shapes.shapes) > 1 else 0)
        actuation = new_record(ACTUATOR, whole.nv, limit=whole.effort_limit, target_q=-1)
        q, v = whole.neutral_configuration(), np.zeros(whole.nv)
        for part, thing in zip(system.parts, world.objects, strict=True):
            q[part.q_slice], v[part.v_slice] = thing.q, thing.v
        if before is not None:
            q[:model.nq], v[:model.nv] = self.q, self.v
            actuation[:model.nv] = self._actuation[:model.nv]
            results.coordinates[:model.nv] = self._results.coordinates[:model.nv]
            for part in system.parts:
                kept = next((old for old in before.parts if old.name == part.name and old.nq == part.nq), None)
                if kept is not None:
                    q[part.q_slice], v[part.v_slice] = self._q[kept.q_slice], self._v[kept.v_slice]
        self._system, self._results, self._actuation = system, results, actuation
        self._q, self._v = q, v
        self.q, self.v = q[:model.nq], v[:model.nv]  # the robot's: views of the system's state
        self._buffer = scratch(whole)
        self._work = work_buffers(whole, self._world, results.collisions)
        self._robot_points = len(robot_points)
        self.world = world
        self.last = None  # its forces are of the old contact points

    @property
    def contact_count(self) -> int:
        """The number of the robot's contact points (contact_points, then
        contact_geometry's): the first of the step's points, the objects'
        after them."""
        return self._robot_points

    @property
    def system(self) -> Model:
        """The model the step takes: the robot's, or with objects the robot and
        the objects (multibody.assembly)."""
        return self._system.model

    @property
    def objects(self) -> tuple[str, ...]:
        return tuple(part.name for part in self._system.parts)

    def _part(self, name: str):
        part = next((part for part in self._system.parts if part.name == name), None)
        if part is None:
            raise ValueError(f"the world has no object '{name}' (objects: {', '.join(self.objects) or 'none'})")
        return part

    def object_state(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(q, v) of an object: its root's pose [x, y, z, qx, qy, qz, qw] and body
        twist [ω; v] first (DESIGN's floating joint), then its own joints."""
        part = self._part(name)
        return self._q[part.q_slice].copy(), self._v[part.v_slice].copy()

    def set_object_state(self, name: str, q, v) -> None:
        """Put an object at (q, v) now (object_state's layout; the quaternion
        normalised); its warm starts go on."""
        part = self._part(name)
        thing = next(thing for thing in self.world.objects if thing.name == name)
        q = np.array(inputs.configuration(thing.model, q, batch=False))
        q[3:7] /= np.linalg.norm(q[3:7])
        v = inputs.vector(thing.model, v, thing.model.nv, "v", batch=False)
        self._q[part.q_slice], self._v[part.v_slice] = q, v

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
        robot = self._actuation[:model.nv]
        robot["stiffness"], robot["damping"], robot["target_q"] = stiffness, damping, target_q

    def set_targets(self, positions=None, velocities=None) -> None:
        """The actuators' targets (nv,), by velocity index: positions of the
        position-controlled coordinates, velocities of all actuated ones (None:
        unchanged). Read where a coordinate has an actuator, ignored elsewhere."""
        for value, target, name in ((positions, "position_target", "position targets"),
                                    (velocities, "velocity_target", "velocity targets")):
            if value is not None:
                self._actuation[target][:self.model.nv] = inputs.vector(self.model, value, self.model.nv, name,
                                                                       batch=False)

    # --- the state -----------------------------------------------------------------

    def set_initial_state(self, q, v) -> None:
        """The state reset() goes back to (checked as set_state checks)."""
        self.initial_q, self.initial_v = self._checked(q, v)

    def reset(self, q=None, v=None) -> None:
        """Back to time 0 at (q, v), by default the initial state; the objects
        at their poses and twists."""
        self.set_state(self.initial_q if q is None else q, self.initial_v if v is None else v)
        for part, thing in zip(self._system.parts, self.world.objects, strict=True):
            self._q[part.q_slice], self._v[part.v_slice] = thing.q, thing.v
        self._results.collisions["impulse"] = 0.0
        self._results.report["collisions"] = 0
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
        self.q[:], self.v[:] = self._checked(q, v)
        self._results.contacts["impulse"] = 0.0
        self._results.coordinates["joint_impulse"] = 0.0
        self.last: ContactStep | None = None

    @property
    def contact_forces(self) -> np.ndarray:
        """(k, 3) the mean force of the obstacles on each contact point over the
        last step, world axes."""
        return self.last.forces[:self.contact_count].copy() if self.last is not None \
            else np.zeros((self.contact_count, 3))

    # --- stepping ------------------------------------------------------------------

    def step(self, tau=None, steps: int = 1) -> ContactStep:
        """`steps` steps of dt under the joint efforts tau (nv,; None: zero) and
        the actuators toward their targets; returns the ContactStep of the call
        (module and class docstrings). On a step that cannot be taken it raises,
        the state left at the step before."""
        model, actuation, system = self.model, self._actuation, self._system.model
        actuation["effort"][:model.nv] = 0.0 if tau is None else inputs.vector(model, tau, model.nv, "tau",
                                                                               batch=False)
        steps = int(steps)
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        self._settings["steps"] = steps
        q_before, v_before = self._q.copy(), self._v.copy()
        results = self._results
        simulate_kernel(system.packed, system.dof_parent, self._world, actuation, self._settings, self._q, self._v,
                        tuple(results), self._buffer, *self._work)
        report = results.report.copy()
        self.steps += int(report["steps"][0])
        check_report(system, report, "the simulation step", q_before, (v_before, "v"), (actuation["effort"], "tau"),
                     (actuation["position_target"], "position targets"),
                     (actuation["velocity_target"], "velocity targets"))
        self.last = ContactStep(self.q.copy(), self.v.copy(), *(copy_records(records) for records in results[:5]),
                                report[0], self.tolerance)
        return self.last

    @property
    def time(self) -> float:
        """Simulated time (s): steps times dt, so that 1000 steps of 1 ms are 1.0 s exactly."""
        return self.steps * self.dt

