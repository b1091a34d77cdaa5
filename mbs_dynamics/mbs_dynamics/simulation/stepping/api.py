"""The step from Python: the result records of a call (new_results) and
what they say (ContactStep), the contact points of PointContacts, and
contact_step, one step against the ground."""
from __future__ import annotations

import threading
from sys import getrefcount
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit, types
from numba.experimental import structref

from mbs_dynamics import inputs
from mbs_dynamics.algorithms.aba import singular_mass_matrix
from mbs_dynamics.algorithms.kinematics import frame_placements
from mbs_dynamics.collision.shapes import NO_SHAPES
from mbs_dynamics.compiled_calls import call_native, native_function, signature_entry
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
from mbs_dynamics.simulation.stepping.work import work_buffers

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


class PooledContactStep(ContactStep):
    """contact_step's ContactStep: row `row` of the pools of a kept set-up
    (_Pools.records: points, contacts, coordinates, bodies, reports,
    ...), its records viewed when read (a view made from Python costs 0.1 us,
    and a loop reads q, v and the impulses alone). Pickles as a ContactStep."""

    __slots__ = ("pools", "row")

    def __init__(self, q: np.ndarray, v: np.ndarray, pools: tuple, row: int, tolerance: float,
                 ground_impulses: np.ndarray):
        self.q, self.v, self.pools, self.row, self.tolerance, self.ground_impulses = q, v, pools, row, tolerance, \
            ground_impulses

    points = property(lambda self: self.pools[0][self.row])
    contacts = property(lambda self: self.pools[1][self.row])
    coordinates = property(lambda self: self.pools[2][self.row])
    bodies = property(lambda self: self.pools[3][self.row])
    report = property(lambda self: self.pools[4][self.row, 0])
    collision_records = property(lambda self: NO_COLLISIONS)

    def __reduce__(self):
        return ContactStep, (self.q, self.v, self.points, self.contacts, self.coordinates, self.bodies,
                             self.collision_records, self.report, self.tolerance, self.ground_impulses)


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


# contact_step's result records (and the states it returns) are made this many calls' at once (_Pools): a
# structured array costs 0.3-0.6 us to make, a row of one 0.1
RESULTS_POOL = 32

_ndarray, _float64 = np.ndarray, np.dtype(np.float64)


@structref.register
class StepSetupType(types.StructRef):
    """The numba type of StepSetup."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(field_type)) for name, field_type in fields)


class StepSetup(structref.StructRefProxy):
    """What a contact_step call passes to simulate_kernel but its state, in one
    object (one argument to unbox, where passing them cost 23 arrays' unboxing,
    0.8 us a call): the step's NativeFunction (compiled_calls: simulate_kernel
    called by its address, Simulation.step's version, not compiled into
    kept_step_kernel again), simulate_kernel's first five arguments, its scratch
    buffer and its work buffers (work.work_buffers), the pools of result
    records and of the states a call returns (RESULTS_POOL rows each, zero:
    _KeptStep.new_pool) and the empty COLLISION records."""

    def __new__(cls, step, packed, dof_parent, world, actuation, settings, buffer, work_floats, work_ints, points,
                contacts, coordinates, bodies, collisions, reports, q_rows, v_rows):
        return structref.StructRefProxy.__new__(cls, step, packed, dof_parent, world, actuation, settings, buffer,
                                                work_floats, work_ints, points, contacts, coordinates, bodies,
                                                collisions, reports, q_rows, v_rows)


structref.define_proxy(StepSetup, StepSetupType, ["step", "packed", "dof_parent", "world", "actuation", "settings",
                                                  "buffer", "work_floats", "work_ints", "points", "contacts",
                                                  "coordinates", "bodies", "collisions", "reports", "q_rows",
                                                  "v_rows"])


@njit(cache=True)
def replace_pools(setup, points, contacts, coordinates, bodies, reports, q_rows, v_rows):
    """The set-up's pools replaced by new ones (of the same types)."""
    setup.points, setup.contacts, setup.coordinates, setup.bodies = points, contacts, coordinates, bodies
    setup.reports, setup.q_rows, setup.v_rows = reports, q_rows, v_rows


@njit(cache=True, nogil=True)
def kept_step_kernel(setup, row, q, v, tau, warm_start):
    """One step of simulate_kernel (a StepSetup's) from (q, v) under the
    efforts tau into row `row` of the set-up's pools: the state stepped there
    (q and v of any layout, not written), warm started by warm_start ((k, 3),
    the ground's impulses; (0, 3): the row's, zero). Returns the REPORT's
    status."""
    q_next, v_next, contacts, report = setup.q_rows[row], setup.v_rows[row], setup.contacts[row], setup.reports[row]
    q_next[:] = q
    v_next[:] = v
    actuation = setup.actuation
    for r in range(tau.shape[0]):
        actuation[r].effort = tau[r]
    for k in range(warm_start.shape[0]):
        contacts[k, 0].impulse[:] = warm_start[k]
    call_native(setup.step, (setup.packed, setup.dof_parent, setup.world, actuation, setup.settings, q_next, v_next,
                             (setup.points[row], contacts, setup.coordinates[row], setup.bodies[row], setup.collisions,
                              report), setup.buffer, setup.work_floats, setup.work_ints))
    return report[0].status


# kept_step_kernel's inputs of any layout and writability (a user's array, a column of a matrix)
_ANY_VECTOR, _ANY_MATRIX = types.Array(types.float64, 1, "A"), types.Array(types.float64, 2, "A")
NO_WARM_START = np.zeros((0, 3))


class _Pools:
    """RESULTS_POOL rows of contact_step's result records, zero
    (`records`: new_results' without collisions, for npoints points, nv
    coordinates and nbodies bodies: points, contacts, coordinates, bodies,
    reports; then rows of q (nq,) and v (nv,)), the views of each row's
    ground impulses, q and v (what a loop reads) and its ContactStep
    (`results`, its tolerance set by the call that returns it), made at once,
    and the views of each array's bytes (clear); `unused`: their reference
    counts (references) while nothing but this object holds them (counted
    here: no other name holds the records yet)."""

    __slots__ = ("records", "impulses", "q_rows", "v_rows", "results", "bytes", "unused")

    def __init__(self, npoints: int, nq: int, nv: int, nbodies: int):
        self.records = (np.zeros((RESULTS_POOL, npoints), POINT), np.zeros((RESULTS_POOL, npoints, 1), CONTACT),
                        np.zeros((RESULTS_POOL, nv), COORDINATE), np.zeros((RESULTS_POOL, nbodies), BODY),
                        np.zeros((RESULTS_POOL, 1), REPORT), np.zeros((RESULTS_POOL, nq)), np.zeros((RESULTS_POOL, nv)))
        # list() of an array: its rows' views at C speed (an index from Python costs 0.1 us each)
        self.impulses = list(self.records[1]["impulse"][:, :, 0])
        self.q_rows, self.v_rows = list(self.records[5]), list(self.records[6])
        self.results = [PooledContactStep(self.q_rows[row], self.v_rows[row], self.records, row, 0.0,
                                          self.impulses[row]) for row in range(RESULTS_POOL)]
        self.bytes = [records.reshape(-1).view(np.uint8) for records in self.records]
        self.unused = self.references()

    def references(self) -> list:
        """The reference counts of the records (their tuple and each array,
        which every other view of them holds) and of each row's views and
        ContactStep."""
        return [getrefcount(self.records), *map(getrefcount, self.records), *map(getrefcount, self.impulses),
                *map(getrefcount, self.q_rows), *map(getrefcount, self.v_rows), *map(getrefcount, self.results)]

    def clear(self):
        """Every record and state zero again, as new (their bytes: 0.2 us an
        array, where a structured array's own zeroing costs 1 us)."""
        for array_bytes in self.bytes:
            array_bytes.fill(0)


class _KeptStep:
    """A set-up of contact_step kept for a loop that passes the same model,
    points, ground and options every call: what it is for (model, points,
    ground, `options`: the call's keyword values, `terms`: its joint terms as
    booleans; other solver settings alone change only the SETTINGS record,
    `settings`, the set-up's own), simulate_kernel's first five arguments
    (`fixed`), scratch `buffer` and work buffers (`work`: work.work_buffers),
    the StepSetup holding them (`setup`) and the compiled entries of
    kept_step_kernel (`entry`) and replace_pools; the shapes of q, v and the
    warm start; and
    the pools for the next calls (_Pools: each call takes the next row, none
    is taken twice while a result of it is held; `current`, and `spare`, the
    pools before them, taken again once nothing holds them, else new ones),
    their records (`pools`), each row's q, v and ContactStep, and the rows
    taken.
    Slots: an attribute of a threading.local costs 40 ns, and a call reads
    some twenty."""

    __slots__ = ("model", "points", "ground", "options", "terms", "fixed", "buffer", "work", "settings", "setup",
                 "entry", "replace", "q_shape", "v_shape", "warm_shape", "current", "spare", "pools", "q_rows",
                 "v_rows", "results", "taken")

    def __init__(self, model=None, points=(), ground=None, options=(), terms=(), fixed=None, buffer=None):
        """fixed: simulate_kernel's first five arguments (packed, dof_parent,
        world, actuation, settings); buffer: its scratch (None: nothing kept)."""
        self.model, self.points, self.ground, self.options, self.terms = model, points, ground, options, terms
        npoints = fixed[2][0].shape[0] if fixed else 0
        self.q_shape, self.v_shape, self.warm_shape = (getattr(model, "nq", 0),), (getattr(model, "nv", 0),), \
            (npoints, 3)
        self.taken = RESULTS_POOL
        self.fixed, self.buffer = fixed, buffer
        if fixed is None:
            return
        self.settings = fixed[4]
        pools = self.new_pools()
        self.work = work_buffers(model, fixed[2], NO_COLLISIONS)
        records = pools.records
        # simulate_kernel's version for what kept_step_kernel passes it: a pool row's states and result records
        row_results = (*(pool[0] for pool in records[:4]), NO_COLLISIONS, records[4][0])
        step = native_function(simulate_kernel, (*fixed, records[5][0], records[6][0], row_results, buffer, *self.work))
        self.setup = StepSetup(step, *fixed, buffer, *self.work, *records[:4], NO_COLLISIONS, *records[4:])
        setup_type = self.setup._numba_type_
        self.entry = signature_entry(kept_step_kernel, (setup_type, types.int64, _ANY_VECTOR, _ANY_VECTOR,
                                                        _ANY_VECTOR, _ANY_MATRIX))
        pool_types = [setup_type.field_dict[name] for name in ("points", "contacts", "coordinates", "bodies",
                                                               "reports", "q_rows", "v_rows")]
        self.replace = signature_entry(replace_pools, (setup_type, *pool_types))
        self.spare = None
        self.use_pools(pools)

    def step(self, model: Model, q: np.ndarray, v: np.ndarray, tau: np.ndarray, warm_start, joint_warm_start,
             tolerance: float) -> ContactStep:
        """One step from (q, v), float64 of the model's shapes (not written),
        under efforts tau (float64, (nv,)), in the next row of the pools
        (next_pools where used up), warm started by warm_start ((npoints, 3)
        float64, or None) and joint_warm_start ((nv,) float64, or None);
        values checked by the kernel (check_report)."""
        row = self.taken
        if row == RESULTS_POOL:
            self.next_pools()
            row = 0
        self.taken = row + 1
        if joint_warm_start is not None:
            self.pools[2][row]["joint_impulse"] = joint_warm_start
        if self.entry(self.setup, row, q, v, tau, NO_WARM_START if warm_start is None else warm_start):
            # one step: a step it cannot take leaves q and v as they were
            check_report(model, self.pools[4][row], "the contact step", self.q_rows[row], (self.v_rows[row], "v"),
                         (tau, "tau"))
        result = self.results[row]
        result.tolerance = tolerance
        return result

    def new_pools(self) -> _Pools:
        return _Pools(self.warm_shape[0], self.q_shape[0], self.v_shape[0], self.model.nbodies)

    def next_pools(self):
        """The current pools used up: the spare ones the next calls' where
        nothing holds a result of theirs any more (their references as when
        made), cleared, else new ones; the current ones the spare. A loop that
        keeps its last results alone takes turns with two (new ones cost a
        call 0.9 us more: made, viewed, and their memory new to the cache)."""
        pools = self.spare
        if pools is not None and pools.references() == pools.unused:
            pools.clear()
        else:
            pools = self.new_pools()
        self.spare = self.current
        self.replace(self.setup, *pools.records)
        self.use_pools(pools)

    def use_pools(self, pools: _Pools):
        """`pools` (in the set-up) the next calls' rows."""
        self.current, self.pools, self.q_rows, self.v_rows, self.results = pools, pools.records, pools.q_rows, \
            pools.v_rows, pools.results
        self.taken = 0


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
    # the common case, the kept set-up and float64 arrays of the right shapes: nothing converted or made (the kernel
    # steps copies of q and v in the set-up's pools; any layout); their values are checked by the kernel
    if model is kept.model and ground is kept.ground and points == kept.points and options == kept.options \
            and type(tau) is _ndarray and tau.dtype is _float64 and tau.shape == kept.v_shape \
            and joint_warm_start is None:
        # a loop's: the state and warm start of the last call's result, the pools' own arrays (types not checked)
        last = kept.results[kept.taken - 1]
        if q is last.q and v is last.v and (warm_start is None or warm_start is last.ground_impulses) \
                or type(q) is _ndarray and type(v) is _ndarray and q.dtype is _float64 and v.dtype is _float64 \
                and q.shape == kept.q_shape and v.shape == kept.v_shape \
                and (warm_start is None or (type(warm_start) is _ndarray and warm_start.dtype is _float64
                                            and warm_start.shape == kept.warm_shape)):
            return kept.step(model, q, v, tau, warm_start, None, tolerance)
    return _set_up_step(model, q, v, tau, points, ground, warm_start, joint_warm_start, options)


def _set_up_step(model: Model, q, v, tau, points: tuple, ground, warm_start, joint_warm_start,
                 options: tuple) -> ContactStep:
    """contact_step's call that converts and checks its arguments and, where
    the model, points, ground or options differ from the kept set-up's, sets
    up anew (kept once the kernel has run)."""
    dt, tolerance, max_iterations, stabilization, margin, joint_limits, joint_damping, joint_friction = options
    settings = _settings(float(dt), float(stabilization), float(margin), float(tolerance), int(max_iterations),
                         EULER, 0.0, 1)
    q, v = np.asarray(q, dtype=np.float64), np.asarray(v, dtype=np.float64)  # the kernel steps copies of them
    if q.shape != (model.nq,) or v.shape != (model.nv,):
        inputs.shaped(model, q, model.nq, "q", batch=False)
        inputs.shaped(model, v, model.nv, "v", batch=False)
    tau = inputs.shaped(model, tau, model.nv, "tau", batch=False)
    kept, terms = _last_step.kept, (bool(joint_limits), bool(joint_damping), bool(joint_friction))
    if model is not kept.model or ground is not kept.ground or points != kept.points or terms != kept.terms:
        _last_step.forget()
        kept = _KeptStep(model, points, ground, options, terms, (model.packed, model.dof_parent,
                                                                _world(model, points, ground, terms),
                                                                effort_actuation(model, tau), copy_records(settings)),
                         scratch(model))
    elif options != kept.options:  # the solver's settings alone: the same set-up, their record
        kept.options = options
        kept.settings[:] = settings
    if warm_start is not None:
        warm_start = np.asarray(warm_start, dtype=float)
        if warm_start.shape != kept.warm_shape:
            raise ValueError(f"warm_start must have shape {kept.warm_shape}, got {warm_start.shape}")
    if joint_warm_start is not None:
        joint_warm_start = inputs.shaped(model, joint_warm_start, model.nv, "joint_warm_start", batch=False)
    step = kept.step(model, q, v, tau, warm_start, joint_warm_start, tolerance)
    _last_step.kept = kept  # kept once the kernel has run
    return step
