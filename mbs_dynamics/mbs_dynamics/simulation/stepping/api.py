"""The step from Python: the result records of a call (new_results) and
what they say (ContactStep), the contact points of PointContacts, and
contact_step, one step against the ground."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.aba import singular_mass_matrix
from mbs_dynamics.algorithms.kinematics import frame_placements
from mbs_dynamics.collision.shapes import NO_SHAPES
from mbs_dynamics.contact.constraints import PointContact
from mbs_dynamics.inputs import SINGULAR_MASS_MATRIX
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.multibody.workspace import scratch
from mbs_dynamics.simulation.stepping.actuation import effort_actuation, joint_terms
from mbs_dynamics.simulation.stepping.integrator import EULER
from mbs_dynamics.simulation.stepping.obstacles import DEFAULT_GROUND, Ground, obstacle_records
from mbs_dynamics.simulation.stepping.records import (
    BODY,
    COLLISION,
    CONTACT,
    COORDINATE,
    POINT,
    REPORT,
    SETTINGS,
    SPHERE,
    copy_records,
    new_record,
)
from mbs_dynamics.simulation.stepping.stages import StepResults, simulate_kernel

NO_COLLIDE = np.zeros((1, 1), dtype=np.bool_)  # a world without shapes of bodies: no pair to look up
NO_COLLIDE.setflags(write=False)


# No room for contacts between bodies: nothing is ever written into it, so every call shares it (a
# structured array costs 0.3-0.6 us to make)
NO_COLLISIONS = np.zeros(0, COLLISION)


def new_results(npoints: int, nobstacles: int, nv: int, nbodies: int, collisions: int = 0) -> StepResults:
    """The result records of a step with npoints contact points and
    nobstacles obstacles, with room for `collisions` contacts between bodies,
    zero: no warm start (the kernel sets the gaps)."""
    return StepResults(np.zeros(npoints, POINT), np.zeros((npoints, nobstacles), CONTACT), np.zeros(nv, COORDINATE),
                       np.zeros(nbodies, BODY), np.zeros(collisions, COLLISION) if collisions else NO_COLLISIONS,
                       np.zeros(1, REPORT))


def step_settings(dt: float, stabilization: float, margin: float, tolerance: float, max_iterations: int,
                  integrator: int, compliance: float = 0.0, steps: int = 1) -> np.ndarray:
    """The SETTINGS record (1,) of a call, checked: a copy of a cached one
    (a call of contact_step builds it)."""
    return copy_records(_settings(float(dt), float(stabilization), float(margin), float(tolerance),
                                  int(max_iterations), int(integrator), float(compliance), int(steps)))


@lru_cache(maxsize=64)
def _settings(dt: float, stabilization: float, margin: float, tolerance: float, max_iterations: int,
              integrator: int, compliance: float, steps: int) -> np.ndarray:
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a positive finite number, got {dt}")
    if not 0.0 <= stabilization <= 1.0:
        raise ValueError(f"stabilization must be in [0, 1], got {stabilization}")
    return new_record(SETTINGS, 1, dt=dt, stabilization=stabilization, margin=margin, tolerance=tolerance,
                      max_iterations=max_iterations, integrator=integrator, compliance=compliance, steps=steps)


@dataclass(eq=False, slots=True)
class ContactStep:
    """(q, v) after a call of the step, unpackable as a pair, and the result
    records (records.py) of its last step: `points` (k,), `contacts` (k, m:
    every point with every obstacle), `coordinates` (nv,), `bodies`
    (nbodies,), the contacts between bodies (`collisions`, of the room in
    collision_records) and the call's `report`; `tolerance`, the solver's.
    Slots, not frozen: a frozen dataclass's __init__ cost each call 0.7 us
    more."""

    q: np.ndarray
    v: np.ndarray
    points: np.ndarray
    contacts: np.ndarray
    coordinates: np.ndarray
    bodies: np.ndarray
    collision_records: np.ndarray
    report: np.void
    tolerance: float

    def __iter__(self):
        return iter((self.q, self.v))

    def __getitem__(self, index):
        return (self.q, self.v)[index]

    def __len__(self) -> int:
        return 2

    @property
    def collisions(self) -> np.ndarray:
        """The COLLISION records of the contacts between bodies in the last step."""
        return self.collision_records[:int(self.report["collisions"])]

    @property
    def dropped_collisions(self) -> int:
        """The contacts between bodies over the call that found no room in the records (and were left out)."""
        return int(self.report["dropped"])

    @property
    def forces(self) -> np.ndarray:
        """(k, 3) the mean force of the obstacles on each point over the step, world."""
        return self.points["force"]

    @property
    def gaps(self) -> np.ndarray:
        """(k,) each point's distance from the nearest obstacle at the step's start."""
        return self.points["gap"]

    @property
    def active(self) -> np.ndarray:
        """(k,) the points the solver considered."""
        return self.points["touching"]

    @property
    def impulses(self) -> np.ndarray:
        """(k, 3) the impulses of the first obstacle (the ground's) on each
        point along its axes (n, t1, t2): contact_step's warm start. Every
        obstacle's: contacts["impulse"]."""
        return self.contacts["impulse"][:, 0] if self.contacts.shape[1] else np.zeros((self.contacts.shape[0], 3))

    @property
    def joint_impulses(self) -> np.ndarray:
        """(nv,) the generalised impulse of the joint limits and joint friction."""
        return self.coordinates["joint_impulse"]

    @property
    def applied(self) -> np.ndarray:
        """(nv,) the actuators' efforts."""
        return self.coordinates["applied"]

    @property
    def acceleration(self) -> np.ndarray:
        """(nv,) (v⁺ - v) / dt."""
        return self.coordinates["acceleration"]

    @property
    def body_wrenches(self) -> np.ndarray:
        """(nbodies, 6) the contact forces on each body, [torque; force] in its
        frame about its origin (what sensors.joint_wrenches takes)."""
        return self.bodies["wrench"]

    @property
    def iterations(self) -> int:
        """The solver's sweeps in the last step."""
        return int(self.report["sweeps"])

    @property
    def residual(self) -> float:
        """The largest violation of the Coulomb law over the call's steps (m/s)."""
        return float(self.report["residual"])

    @property
    def converged(self) -> bool:
        return self.residual <= self.tolerance

    @property
    def limits_active(self) -> int:
        """The joint limits in the last step's solver."""
        return int(self.report["limits"])

    @property
    def steps(self) -> int:
        return int(self.report["steps"])

    @property
    def unconverged_steps(self) -> int:
        return int(self.report["unconverged"])

    @property
    def smooth_steps(self) -> int:
        """The steps taken by the smooth integrator."""
        return int(self.report["smooth"])

    @property
    def softened_steps(self) -> int:
        """The steps whose rows were solved softer than the compliance."""
        return int(self.report["softened"])


def check_report(model: Model, report: np.ndarray, what: str, *named) -> None:
    """Raise the error a call's REPORT (1,) says (named: the (value, name)
    inputs to blame, q first), or nothing when it succeeded."""
    status = int(report["status"][0])  # a field of the array: a field of its np.void costs 0.2 us more
    if status == SINGULAR_MASS_MATRIX:
        raise singular_mass_matrix(model, model.velocity_joint(int(report["pivot"][0])))
    inputs.refuse(model, status, what, *named)


@lru_cache(maxsize=32)
def resolve_points(model: Model, points: tuple) -> np.ndarray:
    """The SPHERE records (radius 0) of PointContacts. Read-only: cached."""
    for point in points:
        if not isinstance(point, PointContact):
            raise ValueError(f"contact points must be PointContact(frame, point), got {point!r}")
    spheres = new_record(SPHERE, len(points))
    if points:
        offsets = np.array([np.asarray(point.point, dtype=float) for point in points])
        if offsets.shape != (len(points), 3) or not np.all(np.isfinite(offsets)):
            raise ValueError(f"contact points must be 3 finite numbers each, got {[p.point for p in points]}")
        bodies, rotations, translations = frame_placements(model, tuple(point.frame for point in points))
        spheres["body"], spheres["centre"] = bodies, np.einsum("kij,kj->ki", rotations, offsets) + translations
    spheres.setflags(write=False)
    return spheres


@lru_cache(maxsize=32)
def _step_world(model: Model, points: tuple, ground, joint_limits: bool, joint_damping: bool,
                joint_friction: bool) -> tuple:
    """The World (stages.py) of contact_step's points, ground and joint terms,
    as simulate_kernel takes it. Read-only: cached."""
    return (resolve_points(model, points), obstacle_records([ground]),
            *joint_terms(model, joint_limits, joint_damping, joint_friction), NO_SHAPES, NO_COLLIDE)


def _world(model: Model, points: tuple, ground, options: tuple) -> tuple:
    """_step_world, cached where the ground hashes (not one given its normal as an array)."""
    try:
        return _step_world(model, points, ground, *options)
    except TypeError:
        return _step_world.__wrapped__(model, points, ground, *options)


def _compiled_entry(dispatcher, arguments):
    """The compiled function a numba dispatcher chose for `arguments`, callable
    without its type resolution (a structured array or a named tuple costs
    it about a microsecond each): only for arguments of exactly these types.
    The dispatcher itself where it keeps its overloads otherwise."""
    try:
        return dispatcher.overloads[tuple(dispatcher.typeof_pyval(argument) for argument in arguments)].entry_point
    except (AttributeError, KeyError):
        return dispatcher


# contact_step's result records are made this many calls' at once: a structured array costs 0.3-0.6 us to
# make, a row of one 0.1
RESULTS_POOL = 32


NO_SET_UP = (None, (), None, None)


class _LastStep(threading.local):
    """This thread's last set-up of contact_step, for a loop that passes the
    same model, points, ground and joint options every call: the key, the
    world, the actuation records it rewrites (its own: nothing else reads
    them), their efforts' view, simulate_kernel's compiled entry, the
    SETTINGS record of the last solver options (and their key), and the
    result records of the next calls (StepResults of RESULTS_POOL rows each,
    zero; each call takes the next row, none is taken twice), their
    impulses' and statuses' views and the rows taken."""

    key = NO_SET_UP
    world = actuation = efforts = entry = pool = impulses = statuses = settings = None
    taken, settings_key = RESULTS_POOL, None

    def results(self, npoints: int, nv: int, nbodies: int) -> tuple:
        """The next row's records (new_results', a plain tuple), their rows' pool made anew where used up."""
        if self.taken == RESULTS_POOL:
            self.pool = StepResults(np.zeros((RESULTS_POOL, npoints), POINT),
                                    np.zeros((RESULTS_POOL, npoints, 1), CONTACT),
                                    np.zeros((RESULTS_POOL, nv), COORDINATE), np.zeros((RESULTS_POOL, nbodies), BODY),
                                    None, np.zeros((RESULTS_POOL, 1), REPORT))
            self.impulses = self.pool.contacts["impulse"][:, :, 0]  # (RESULTS_POOL, npoints, 3): the ground's
            self.statuses, self.taken = self.pool.report["status"][:, 0], 0
        pool, row = self.pool, self.taken
        self.taken = row + 1
        return pool.points[row], pool.contacts[row], pool.coordinates[row], pool.bodies[row], NO_COLLISIONS, \
            pool.report[row]


_last_step = _LastStep()


def contact_step(model: Model, q, v, tau, dt: float, points=(), ground: Ground = DEFAULT_GROUND, *, warm_start=None,
                 joint_warm_start=None, tolerance: float = 1e-10, max_iterations: int = 200, stabilization: float = 0.2,
                 margin: float = 1e-4, joint_limits: bool = False, joint_damping: bool = False,
                 joint_friction: bool = False) -> ContactStep:
    """One time step of `dt` with the `points` (PointContact: a point fixed in a
    frame) in unilateral frictional contact with `ground` (stepping's
    docstring): semi-implicit Euler with contact impulses, first order.
    warm_start and joint_warm_start: the previous step's `impulses` and
    `joint_impulses`. Points within `margin` (m) of the ground, or predicted
    to reach it within the step, enter the solver; it stops at `tolerance`
    (m/s) or after `max_iterations` sweeps (then converged is False and the
    step is the last sweep's).

    The joints, from the URDF: joint_limits holds the position limits as
    unilateral constraints (entering the solver as the points do);
    joint_damping applies the viscous damping, implicitly; joint_friction the
    Coulomb friction, as impulses bounded by f dt that stop a joint they can
    hold (f: the static friction from rest, the Stribeck curve's level while
    sliding), and the friction offset as a constant torque."""
    last, points = _last_step, tuple(points)
    # the cached record itself: the kernel only reads it
    settings_key = (dt, stabilization, margin, tolerance, max_iterations)
    if settings_key != last.settings_key:
        last.settings = _settings(float(dt), float(stabilization), float(margin), float(tolerance),
                                  int(max_iterations), EULER, 0.0, 1)
        last.settings_key = settings_key
    q, v = np.array(q, dtype=np.float64), np.array(v, dtype=np.float64)  # the kernel steps them in place
    if q.shape != (model.nq,) or v.shape != (model.nv,):
        inputs.shaped(model, q, model.nq, "q", batch=False)
        inputs.shaped(model, v, model.nv, "v", batch=False)
    tau = inputs.shaped(model, tau, model.nv, "tau", batch=False)
    options = (bool(joint_limits), bool(joint_damping), bool(joint_friction))
    key = last.key
    same = key[0] is model and key[2] is ground and key[3] == options and key[1] == points
    if same:
        world, actuation = last.world, last.actuation
    else:  # set up anew; kept once the kernel has run
        key = (model, points, ground, options)
        world, actuation = _world(*key), effort_actuation(model, tau)
        last.key, last.taken = NO_SET_UP, RESULTS_POOL
    npoints = world[0].shape[0]
    results = last.results(npoints, model.nv, model.nbodies)
    if warm_start is not None:
        warm_start = np.asarray(warm_start, dtype=float)
        if warm_start.shape != (npoints, 3):
            raise ValueError(f"warm_start must have shape ({npoints}, 3), got {warm_start.shape}")
        last.impulses[last.taken - 1] = warm_start
    if joint_warm_start is not None:
        results[2]["joint_impulse"] = inputs.shaped(model, joint_warm_start, model.nv, "joint_warm_start",
                                                    batch=False)
    arguments = (model.packed, model.dof_parent, world, actuation, last.settings, q, v, results, scratch(model))
    if same:
        last.efforts[:] = tau
        last.entry(*arguments)
    else:
        simulate_kernel(*arguments)
        last.key, last.world, last.actuation, last.efforts = key, world, actuation, actuation["effort"]
        last.entry = _compiled_entry(simulate_kernel, arguments)
    if last.statuses[last.taken - 1]:  # one step: a step it cannot take leaves q and v as they were
        check_report(model, results[5], "the contact step", q, (v, "v"), (tau, "tau"))
    return ContactStep(q, v, results[0], results[1], results[2], results[3], NO_COLLISIONS, results[5][0], tolerance)
