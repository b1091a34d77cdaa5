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
from mbs_dynamics.compiled_calls import compiled_entry
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
    collision_records) and the call's `report`; `tolerance`, the solver's;
    `ground_impulses`, where the caller made it, the view `impulses` returns.
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
    ground_impulses: np.ndarray | None = None  # a view of contacts' ground impulses made with the records, if any

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
        if self.ground_impulses is not None:
            return self.ground_impulses
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
    as simulate_kernel takes it: of the types of Simulation's, so that one
    compiled step serves both (its spheres writable, as Simulation's are: a
    copy of the cached read-only records; the kernel does not write them).
    Cached."""
    return (resolve_points(model, points).copy(), obstacle_records([ground]),
            *joint_terms(model, joint_limits, joint_damping, joint_friction), NO_SHAPES, NO_COLLIDE)


def _world(model: Model, points: tuple, ground, options: tuple) -> tuple:
    """_step_world, cached where the ground hashes (not one given its normal as an array)."""
    try:
        return _step_world(model, points, ground, *options)
    except TypeError:
        return _step_world.__wrapped__(model, points, ground, *options)


# contact_step's result records are made this many calls' at once: a structured array costs 0.3-0.6 us to
# make, a row of one 0.1
RESULTS_POOL = 32

_ndarray, _float64 = np.ndarray, np.dtype(np.float64)
_copy_rows = np.ndarray.__setitem__  # rows[...] = values: a method looked up once


class _KeptStep:
    """A set-up of contact_step kept for a loop that passes the same model,
    points, ground and options every call: what it is for (model, points,
    ground, `options`: the call's keyword values, `terms`: its joint terms as
    booleans; other solver settings alone change only the SETTINGS record
    in `fixed`), and what a call passes to
    simulate_kernel's compiled `entry`: its first five arguments (`fixed`),
    the actuation records' efforts it rewrites (its own: nothing else reads
    them) and the scratch buffer; the shapes of q, v and the warm start; and
    the result records of the next calls (pools of RESULTS_POOL rows made at
    once, zero; each call takes the next row, none is taken twice) as each
    row's simulate_kernel tuple, report, the ground's impulses (the warm
    start) and status, and the rows taken. Slots: an attribute of a
    threading.local costs 40 ns, and a call reads some twenty."""

    __slots__ = ("model", "points", "ground", "options", "terms", "entry", "fixed", "efforts", "buffer", "q_shape",
                 "v_shape", "warm_shape", "rows", "reports", "impulses", "statuses", "taken")

    def __init__(self, model=None, points=(), ground=None, options=(), terms=(), entry=None, fixed=(), efforts=None,
                 buffer=None):
        self.model, self.points, self.ground, self.options, self.terms = model, points, ground, options, terms
        self.entry, self.fixed, self.efforts, self.buffer = entry, fixed, efforts, buffer
        npoints = fixed[2][0].shape[0] if fixed else 0
        self.q_shape, self.v_shape, self.warm_shape = (getattr(model, "nq", 0),), (getattr(model, "nv", 0),), \
            (npoints, 3)
        self.taken = RESULTS_POOL

    def step(self, model: Model, q: np.ndarray, v: np.ndarray, tau: np.ndarray, warm_start, joint_warm_start,
             tolerance: float) -> ContactStep:
        """One step from (q, v), float64 of the model's shapes (stepped in
        place), under efforts tau (float64, (nv,)), in the next row of result
        records (a pool made anew where used up), warm started by warm_start
        ((npoints, 3) float64, or None) and joint_warm_start ((nv,) float64, or
        None); values checked by the kernel (check_report)."""
        row = self.taken
        if row == RESULTS_POOL:
            self.new_pool()
            row = 0
        self.taken = row + 1
        results = self.rows[row]
        if warm_start is not None:
            _copy_rows(self.impulses[row], Ellipsis, warm_start)
        if joint_warm_start is not None:
            results[2]["joint_impulse"] = joint_warm_start
        _copy_rows(self.efforts, Ellipsis, tau)
        self.entry(*self.fixed, q, v, results, self.buffer)
        if self.statuses[row]:  # one step: a step it cannot take leaves q and v as they were
            check_report(model, results[5], "the contact step", q, (v, "v"), (tau, "tau"))
        return ContactStep(q, v, results[0], results[1], results[2], results[3], NO_COLLISIONS, self.reports[row],
                           tolerance, self.impulses[row])

    def new_pool(self) -> None:
        """RESULTS_POOL rows of result records, zero (new_results' without collisions), as the views a call takes."""
        npoints, nv, nbodies = self.warm_shape[0], self.v_shape[0], self.model.nbodies
        pool = StepResults(np.zeros((RESULTS_POOL, npoints), POINT), np.zeros((RESULTS_POOL, npoints, 1), CONTACT),
                           np.zeros((RESULTS_POOL, nv), COORDINATE), np.zeros((RESULTS_POOL, nbodies), BODY), None,
                           np.zeros((RESULTS_POOL, 1), REPORT))
        # list() of an array: its rows' views at C speed (an index from Python costs 0.1 us each)
        self.rows = list(zip(list(pool.points), list(pool.contacts), list(pool.coordinates), list(pool.bodies),
                             [NO_COLLISIONS] * RESULTS_POOL, list(pool.report), strict=True))
        self.reports, self.impulses = list(pool.report[:, 0]), list(pool.contacts["impulse"][:, :, 0])
        self.statuses, self.taken = pool.report["status"][:, 0], 0


NOTHING_KEPT = _KeptStep()


class _LastStep(threading.local):
    """This thread's kept set-up of contact_step (_KeptStep)."""

    kept = NOTHING_KEPT

    def forget(self):
        """No set-up kept: the next call sets up anew."""
        self.kept = NOTHING_KEPT


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
    kept, points = _last_step.kept, tuple(points)
    options = (dt, tolerance, max_iterations, stabilization, margin, joint_limits, joint_damping, joint_friction)
    # the common case, the kept set-up and float64 arrays of the right shapes: nothing converted or made but the
    # state's copies (the kernel steps them in place); their values are checked by the kernel
    if model is kept.model and ground is kept.ground and points == kept.points and options == kept.options \
            and type(q) is _ndarray and type(v) is _ndarray and type(tau) is _ndarray and q.dtype is _float64 \
            and v.dtype is _float64 and tau.dtype is _float64 and q.shape == kept.q_shape \
            and v.shape == kept.v_shape and tau.shape == kept.v_shape and joint_warm_start is None \
            and (warm_start is None or (type(warm_start) is _ndarray and warm_start.dtype is _float64
                                        and warm_start.shape == kept.warm_shape)):
        return kept.step(model, q.copy(), v.copy(), tau, warm_start, None, tolerance)
    return _set_up_step(model, q, v, tau, points, ground, warm_start, joint_warm_start, options)


def _set_up_step(model: Model, q, v, tau, points: tuple, ground, warm_start, joint_warm_start,
                 options: tuple) -> ContactStep:
    """contact_step's call that converts and checks its arguments and, where
    the model, points, ground or options differ from the kept set-up's, sets
    up anew (kept once the kernel has run)."""
    dt, tolerance, max_iterations, stabilization, margin, joint_limits, joint_damping, joint_friction = options
    # the cached record itself: the kernel only reads it
    settings = _settings(float(dt), float(stabilization), float(margin), float(tolerance), int(max_iterations),
                         EULER, 0.0, 1)
    q, v = np.array(q, dtype=np.float64), np.array(v, dtype=np.float64)  # the kernel steps them in place
    if q.shape != (model.nq,) or v.shape != (model.nv,):
        inputs.shaped(model, q, model.nq, "q", batch=False)
        inputs.shaped(model, v, model.nv, "v", batch=False)
    tau = inputs.shaped(model, tau, model.nv, "tau", batch=False)
    kept, terms = _last_step.kept, (bool(joint_limits), bool(joint_damping), bool(joint_friction))
    if model is not kept.model or ground is not kept.ground or points != kept.points or terms != kept.terms:
        _last_step.forget()
        actuation = effort_actuation(model, tau)
        kept = _KeptStep(model, points, ground, options, terms, simulate_kernel,
                         (model.packed, model.dof_parent, _world(model, points, ground, terms), actuation, settings),
                         actuation["effort"], scratch(model))
    elif options != kept.options:  # the solver's settings alone: the same set-up, their record
        kept.options, kept.fixed = options, (*kept.fixed[:4], settings)
    if warm_start is not None:
        warm_start = np.asarray(warm_start, dtype=float)
        if warm_start.shape != kept.warm_shape:
            raise ValueError(f"warm_start must have shape {kept.warm_shape}, got {warm_start.shape}")
    if joint_warm_start is not None:
        joint_warm_start = inputs.shaped(model, joint_warm_start, model.nv, "joint_warm_start", batch=False)
    if kept.entry is not simulate_kernel:  # the kept set-up
        return kept.step(model, q, v, tau, warm_start, joint_warm_start, tolerance)
    step = kept.step(model, q, v, tau, warm_start, joint_warm_start, tolerance)  # numba's dispatcher: compiles or loads
    kept.entry = compiled_entry(simulate_kernel, (*kept.fixed, q, v, kept.rows[kept.taken - 1], kept.buffer))
    _last_step.kept = kept  # kept once the kernel has run
    return step
