"""The whole-body controller: task-space inverse dynamics as one dense QP per
cycle over x = [a; f] (joint accelerations, contact force variables), the
torques following from the actuated rows, as TSID's
InverseDynamicsFormulationAccForce (DESIGN.md §9):

    min  Σ_tasks w ||A a - b||² + Σ_contacts w_c ||W (G f - F_ref)||² + ε ||x||²
    s.t. M_u a + h_u = J_u^T f                 floating-base rows, exact
         J_c a = a_c* - J̇_c v                  each contact's acceleration
         friction pyramids, normal force bounds  per contact (rows on f)
         -τ_max <= M_a a + h_a - J_a^T f <= τ_max   URDF effort limits
         a_lo <= a_j <= a_hi                   URDF position limits (and
                                               acceleration limits) as bounds

solved by DAQP (a dual active-set solver, the method of TSID's eiquadprog;
the equalities eliminated first, its eq_reduction), one solver and
workspace per contact set (allocated when the set is first used),
warm-started from its last active set.
Bad input: NaN or wrongly shaped q, v and references, unknown frames and
invalid settings raise ValueError with the reason; a QP without a solution
(contacts that cannot hold the robot, limits that conflict) returns a result
whose status says so and whose torques are the last solved ones (zero before
the first), `feasible` False."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import daqp

from mbs_dynamics import inputs
from mbs_dynamics.compiled_calls import compiled_entry
from mbs_dynamics.algorithms.kinematics import frame_placements
from mbs_dynamics.control import assembly
from mbs_dynamics.control.contacts import RigidContact, RigidPointContact, RigidSurfaceContact
from mbs_dynamics.control.support import SupportPolygon, held_points
from mbs_dynamics.control.tasks import CenterOfMassTask, FrameTask, PostureTask, Task, finite_vector
from mbs_dynamics.multibody.model import FLOATING, Model
from mbs_dynamics.multibody.workspace import new_scratch

HESSIAN_REGULARIZATION = 1e-8  # TSID's DEFAULT_HESSIAN_REGULARIZATION on every variable
INFINITE_BOUND = assembly.INFINITE_BOUND
MAX_WORKSPACES = 64  # contact sets kept with their solvers
# DAQP's exit flags: > 0 solved; the others as the status a ControlResult reports
_DAQP_FAILURES = {-1: "primal infeasible", -2: "cycling", -3: "unbounded", -4: "max iterations", -5: "nonconvex",
                  -6: "rank-deficient equalities: contacts that hold the same motion twice, as two on one body"}
_DAQP_EQUALITY = 5  # a constraint's sense: an equality
# the built-in tasks and contacts the compiled assembly builds (by their rows(): a subclass
# with rows of its own takes the general path)
_TASK_KINDS = {CenterOfMassTask.rows: assembly.COM_TASK, FrameTask.rows: assembly.FRAME_TASK,
               PostureTask.rows: assembly.POSTURE_TASK}
_CONTACT_KINDS = {RigidPointContact.rows: assembly.POINT_CONTACT, RigidSurfaceContact.rows: assembly.SURFACE_CONTACT}
_ndarray, _float64 = inputs.NDARRAY, inputs.FLOAT64  # globals, not attributes: 20 ns a call


@dataclass
class State:
    """What the tasks and contacts read in one cycle (world axes; frames'
    Jacobians hybrid [ω; ṗ], their twists and drifts J̇v = [ω̇; p̈] at a = 0)."""

    q: np.ndarray
    v: np.ndarray
    frame_index: dict
    frame_jacobian: np.ndarray
    frame_twist: np.ndarray
    frame_drift: np.ndarray
    frame_rotation: np.ndarray
    frame_position: np.ndarray
    joint_positions: np.ndarray
    joint_velocities: np.ndarray
    joint_selection: np.ndarray
    com: np.ndarray | None = None
    com_velocity: np.ndarray | None = None
    com_jacobian: np.ndarray | None = None
    com_drift: np.ndarray | None = None
    frame_motion: np.ndarray | None = None  # (k, 2, 6): [twist; drift] of each frame


@dataclass
class ControlResult:
    """One cycle's answer. tau: the actuated joints' torques (controller.joint_names
    order); a (nv,); forces: {contact: force (3,) of a point contact, wrench
    [n; f] (6,) about a surface contact's frame origin, world axes}; corner_forces:
    {surface contact: (4, 3) in its frame's axes}. status: 'solved', or why not
    ('primal infeasible', 'max iterations', ...): then feasible is False and tau
    the last solved torques (a, forces from that cycle)."""

    tau: np.ndarray
    a: np.ndarray
    forces: dict
    corner_forces: dict = field(default_factory=dict)
    status: str = "solved"
    feasible: bool = True
    iterations: int = 0
    message: str = ""
    com: np.ndarray | None = None  # the state's CoM the cycle used (with a CoM task)


class _Cycle:
    """What one set of tasks and contacts needs each cycle, made when the set
    changes: the frames they read, whether the compiled assembly builds all
    their rows, the contact set's workspace, and the cycle's kinematics and
    dynamics (assembly.CycleState), written in place by
    assembly.cycle_state_kernel, with the State whose arrays are views of it
    (q and v: the controller's copies of the cycle's)."""

    def __init__(self, controller, tasks: tuple, contacts: tuple):
        model = controller.model
        self.tasks, self.contacts = tasks, contacts
        self.frames = tuple(dict.fromkeys([c.frame for c in contacts]
                                          + [t.frame for t in tasks if isinstance(t, FrameTask)]))
        self.compiled = all(_TASK_KINDS.get(type(t).rows) is not None for t in tasks) and all(
            _CONTACT_KINDS.get(type(c).rows) is not None for c in contacts)
        com_task = any(isinstance(t, CenterOfMassTask) for t in tasks)
        self.key = tuple(c.name for c in contacts)
        self.size = model.nv + sum(c.size for c in contacts)
        self.work = controller._workspace(self.key, self.size, contacts)
        k, nv, nc = len(self.frames), model.nv, 3 if com_task else 0
        self.placements = assembly.FramePlacements(*frame_placements(model, self.frames))
        self.q, self.v = np.zeros(model.nq), np.zeros(nv)
        self.cycle = assembly.CycleState(
            np.zeros((nv, nv)), np.zeros(nv), np.zeros((k, 6, nv)), np.zeros((k, 2, 6)), np.zeros((k, 3, 3)),
            np.zeros((k, 3)), np.zeros(nc), np.zeros(nc), np.zeros((nc, nv)), np.zeros(nc),
            np.zeros(controller.na), np.zeros(controller.na))
        self.momentum_matrix = np.zeros((6 if com_task else 0, nv))
        self.mass = float(model.total_mass)
        self.buffer = new_scratch(model.nbodies)
        c = self.cycle
        self.state = State(self.q, self.v, {name: i for i, name in enumerate(self.frames)}, c.J, c.motion[:, 0],
                           c.motion[:, 1], c.frame_R, c.frame_p, c.q_joints, c.v_joints, controller.joint_selection,
                           frame_motion=c.motion)
        if com_task:
            self.state.com, self.state.com_velocity = c.com, c.com_velocity
            self.state.com_jacobian, self.state.com_drift = c.com_jacobian, c.com_drift
        self.entry = None  # cycle_state_kernel's compiled version for these arrays' types

    def update(self, packed) -> int:
        """The cycle's kinematics and dynamics of self.q, self.v; a kernel status."""
        arguments = (packed, self.q, self.v, self.placements, self.cycle, self.momentum_matrix, self.mass,
                     self.buffer)
        if self.entry is None:  # numba's dispatcher types the namedtuples' fields once
            status = assembly.cycle_state_kernel(*arguments)
            self.entry = compiled_entry(assembly.cycle_state_kernel, arguments)
            return status
        return self.entry(*arguments)


class _Workspace:
    """The QP's matrices and its solver for one contact set, allocated once."""

    def __init__(self, nv, n, n_eq, n_in, settings):
        self.H, self.g = np.zeros((n, n)), np.zeros(n)
        # DAQP takes one constraint matrix [A; C] with bounds [b; lower] <= . <= [b; upper]: A, C, b,
        # lower, upper are views of them (b is written in the lower bounds, copied to the upper)
        self.constraints = np.zeros((n_eq + n_in, n))
        self.lower_bounds, self.upper_bounds = np.zeros(n_eq + n_in), np.zeros(n_eq + n_in)
        self.A, self.C = self.constraints[:n_eq], self.constraints[n_eq:]
        self.b, self.lower, self.upper = self.lower_bounds[:n_eq], self.lower_bounds[n_eq:], self.upper_bounds[n_eq:]
        self.sense = np.zeros(n_eq + n_in, dtype=np.int32)
        self.sense[:n_eq] = _DAQP_EQUALITY
        self.solver = daqp.Model()
        self.solver.settings = settings
        self.initialized = False
        self.contacts = ()  # the contacts whose constant rows C holds (held: an id is not reused meanwhile)
        # the compiled assembly's: generalised force = Jfᵀ f, scratch, the contacts' tables
        self.Jf, self.rows, self.scratch = np.zeros((n - nv, nv)), np.zeros((6, nv)), np.zeros(33)
        self.contact_table = self.regularization = self.generators = None
        self.contact_versions = []  # each contact's version its row was packed at
        self.qp = assembly.QPArrays(self.H, self.g, self.A, self.b, self.lower, self.upper, self.C, self.Jf, self.rows,
                                    self.scratch)


class WholeBodyController:
    """Task-space inverse dynamics on `model` (a floating base for balance;
    a fixed base works without CoM tasks). Tasks are added with add_task,
    contacts with add_contact / remove_contact (by frame name) at any time;
    compute(q, v) solves one cycle.

    torque_limits: the URDF's effort limits as constraints (scaled by
    torque_limit_scale); position_limit_horizon T: each joint with URDF
    position limits keeps q + v T + a T²/2 within them (a bound on a);
    acceleration_limit: |a_j| bound on the actuated joints (scalar or per joint; inf: none)."""

    def __init__(self, model: Model, torque_limits: bool = True, torque_limit_scale: float = 1.0,
                 position_limit_horizon: float = 0.1, acceleration_limit=np.inf, max_iterations: int = 1000,
                 hessian_regularization: float = HESSIAN_REGULARIZATION):
        self.model = model
        self.floating = model.nbodies > 0 and model.joint_type[0] == FLOATING and model.parent[0] < 0
        self.nu = 6 if self.floating else 0
        nq_base = 7 if self.floating else 0
        if model.nq - nq_base != model.nv - self.nu or any(
                model.joint_type[b] == FLOATING for b in range(1 if self.floating else 0, model.nbodies)):
            raise ValueError(f"model '{model.name}': the whole-body controller needs one coordinate per "
                             f"velocity beyond the floating base (no inner floating joints)")
        self.nq_base = nq_base
        self.na = model.nv - self.nu
        self.joint_names = tuple(name for name in model.joint_names if model.v_index(name) >= self.nu)
        self.base_frame = model.description.root
        self.joint_selection = np.zeros((self.na, model.nv))
        self.joint_selection[:, self.nu:] = np.eye(self.na)
        self._actuated = np.arange(self.nu, model.nv)
        self.tasks: list[Task] = []
        self.contacts: dict[str, RigidContact] = {}
        scale = float(finite_vector(torque_limit_scale, 1, "torque_limit_scale")[0])
        if scale <= 0:
            raise ValueError(f"torque_limit_scale must be positive, got {scale}")
        effort = model.effort_limit[self.nu:] * scale
        torque_rows = np.flatnonzero(np.isfinite(effort)) if torque_limits else np.zeros(0, dtype=np.int64)
        horizon = float(finite_vector(position_limit_horizon, 1, "position_limit_horizon")[0])
        if horizon <= 0:
            raise ValueError(f"position_limit_horizon must be positive, got {horizon}")
        limit = np.array(np.broadcast_to(np.asarray(acceleration_limit, dtype=float), (self.na,)))
        if np.any(np.isnan(limit)) or np.any(limit < 0):
            raise ValueError(f"acceleration_limit must be non-negative numbers (inf: none), got {acceleration_limit}")
        lower, upper = model.lower_position_limit[nq_base:], model.upper_position_limit[nq_base:]
        self.limits = assembly.Limits(
            torque_rows=torque_rows, torque_limit=effort[torque_rows],
            bound_rows=np.flatnonzero(np.isfinite(lower) | np.isfinite(upper) | np.isfinite(limit)),
            position_lower=lower, position_upper=upper, acceleration_limit=limit, horizon=horizon,
            hessian_regularization=float(hessian_regularization))
        self.settings = dict(iter_limit=int(max_iterations), eq_reduction=1)
        self._workspaces: dict[tuple, _Workspace] = {}
        self._last: ControlResult | None = None
        # the compiled assembly's task tables, the tasks they were packed from and their versions then
        self._task_table = self._posture_table = None
        self._packed_tasks, self._task_versions = (), ()
        self._assemble_entry = None  # assemble_kernel's compiled version for this controller's argument types
        self._cycle: _Cycle | None = None  # the current tasks' and contacts' (made again when they change)
        self._support = ((), None)  # the contacts (with their versions) and their support polygon

    # ---- tasks and contacts -------------------------------------------------
    def add_task(self, task: Task) -> Task:
        if not isinstance(task, Task):
            raise ValueError(f"add_task takes a Task, got {type(task).__name__}")
        if isinstance(task, FrameTask):
            self.model.frame(task.frame)  # an unknown frame raises ValueError here
        if isinstance(task, CenterOfMassTask) and not self.floating:
            raise ValueError(f"model '{self.model.name}' has a fixed base: the CoM task needs a floating base")
        if isinstance(task, PostureTask):
            task.bind(self.joint_names, {name: k for k, name in enumerate(self.joint_names)})
        self.tasks.append(task)
        return task

    def remove_task(self, task: Task) -> None:
        self.tasks.remove(task)

    def add_contact(self, contact: RigidContact) -> RigidContact:
        """Adds (or replaces) the contact at contact.frame; its reference pose
        is the frame's pose at the next cycle unless set."""
        if not isinstance(contact, RigidContact):
            raise ValueError(f"add_contact takes a RigidPointContact or RigidSurfaceContact, "
                             f"got {type(contact).__name__}")
        self.model.frame(contact.frame)
        self.contacts[contact.name] = contact
        return contact

    def remove_contact(self, name: str) -> RigidContact:
        contact = self.contacts.pop(name, None)
        if contact is None:
            known = ", ".join(self.contacts) or "none"
            raise ValueError(f"no contact '{name}' to remove (contacts: {known})")
        return contact

    def support_polygon(self, contacts=None) -> SupportPolygon | None:
        """The support polygon of the contacts' held points (support.py), of
        those named in `contacts` if given (all: kept while they and their
        references are unchanged); None before their first cycle or where they
        span no area."""
        if contacts is not None:
            return self._polygon([self.contacts[name] for name in contacts])
        key = tuple((contact, contact.version) for contact in self.contacts.values())
        if key != self._support[0]:
            self._support = (key, self._polygon(self.contacts.values()))
        return self._support[1]

    def _polygon(self, contacts) -> SupportPolygon | None:
        points = held_points(contacts)
        try:
            return None if points is None else SupportPolygon(points, self.model.gravity)
        except ValueError:
            return None

    # ---- one cycle ------------------------------------------------------------
    def state(self, q, v) -> State:
        """The kinematics and centroidal quantities of (q, v) the tasks read
        (arrays of its own: the next cycle does not change them)."""
        cycle = self._cycle_of(q, v)
        state = cycle.state
        copies = {name: getattr(state, name) for name in State.__dataclass_fields__}
        copies.update({name: value.copy() for name, value in copies.items() if isinstance(value, np.ndarray)})
        copies["frame_index"] = dict(state.frame_index)
        return State(**copies)

    def _cycle_of(self, q, v) -> _Cycle:
        """The current tasks' and contacts' _Cycle with its state computed
        for (q, v), checked: a wrong shape, NaN, a bad quaternion raise
        ValueError with the reason (inputs)."""
        model = self.model
        tasks, contacts = tuple(self.tasks), tuple(self.contacts.values())
        cycle = self._cycle
        if cycle is None or tasks != cycle.tasks or contacts != cycle.contacts:
            cycle = self._cycle = _Cycle(self, tasks, contacts)
        if type(q) is _ndarray and type(v) is _ndarray and q.shape == cycle.q.shape and v.shape == cycle.v.shape \
                and q.dtype is _float64 and v.dtype is _float64:  # the kernel checks their values
            cycle.q[:] = q
            cycle.v[:] = v
        else:
            cycle.q[:] = inputs.configuration(model, q, batch=False)
            cycle.v[:] = inputs.vector(model, v, model.nv, "v", batch=False)
        status = cycle.update(model.packed)
        if status:
            inputs.refuse(model, status, "the controller's state", inputs.configuration(model, q, batch=False),
                          (inputs.vector(model, v, model.nv, "v", batch=False), "v"))
        return cycle

    def compute(self, q, v) -> ControlResult:
        cycle = self._cycle_of(q, v)
        state, contacts, work = cycle.state, cycle.contacts, cycle.work
        M, h = cycle.cycle.M, cycle.cycle.h
        constant = len(work.contacts) == len(contacts) and all(
            a is b for a, b in zip(work.contacts, contacts))  # the pyramids' rows are in place
        if cycle.compiled:
            Jf = self._assemble_compiled(state, contacts, work, cycle.cycle, constant)
        else:
            Jf = self._assemble(state, contacts, work, M, h, constant)
        work.contacts = contacts
        return self._solve(work, contacts, state, M, h, Jf)

    def _constant_rows(self, contacts, work) -> None:
        """The rows of C that depend on the contact set alone: the pyramids'
        (with their bounds) and the acceleration bounds' unit rows."""
        C, lower, upper, nv, nu = work.C, work.lower, work.upper, self.model.nv, self.nu
        C[:] = 0.0
        column, in_row = nv, 0
        for contact in contacts:
            rows = contact.B.shape[0]
            C[in_row:in_row + rows, column:column + contact.size] = contact.B
            lower[in_row:in_row + rows] = contact.lower
            upper[in_row:in_row + rows] = contact.upper
            column, in_row = column + contact.size, in_row + rows
        bound_rows = self.limits.bound_rows
        first = in_row + len(self.limits.torque_rows)
        C[first + np.arange(len(bound_rows)), nu + bound_rows] = 1.0

    def _assemble_compiled(self, state, contacts, work, cycle, constant) -> np.ndarray:
        """The QP of the cycle built by assembly.assemble_kernel from tables
        of the tasks and contacts (the built-in kinds); returns Jf. A row is
        packed again only when its object's version moved (tasks.Versioned)."""
        index = state.frame_index
        if not constant:
            self._constant_rows(contacts, work)
            work.contact_table = np.zeros((len(contacts), assembly.CONTACT_COLUMNS))
            work.contact_versions = [None] * len(contacts)
            work.regularization = np.zeros((len(contacts), 6, 12))
            work.generators = np.zeros((len(contacts), 6, 12))
            for i, contact in enumerate(contacts):
                W, G = contact.regularization, contact.generator(state)
                work.regularization[i, :W.shape[0], :W.shape[1]] = W
                work.generators[i, :G.shape[0], :G.shape[1]] = G
        for i, contact in enumerate(contacts):
            if contact.rotation is None or contact.position is None:
                k = index[contact.frame]
                offset = contact.offset if contact.kind == "point" else 0.0
                contact.capture(state.frame_rotation[k], state.frame_position[k] + offset)
            if work.contact_versions[i] != contact.version:
                self._pack_contact(contact, index[contact.frame], work.contact_table[i])
                work.contact_versions[i] = contact.version
        tasks = self.tasks
        for task in tasks:
            if task.position is None or getattr(task, "rotation", 0) is None:
                self._capture(task, state)
        versions = tuple(task.version for task in tasks)
        packed = self._packed_tasks
        if len(packed) != len(tasks) or any(a is not b for a, b in zip(packed, tasks)):
            self._packed_tasks = tuple(tasks)
            self._task_table = np.zeros((len(tasks), assembly.TASK_COLUMNS))
            self._task_versions = (None,) * len(tasks)
            postures = sum(isinstance(task, PostureTask) for task in tasks)
            self._posture_table = np.zeros((postures, 5, self.na))
        if versions != self._task_versions:
            posture = 0
            for i, task in enumerate(tasks):
                if versions[i] != self._task_versions[i]:
                    self._pack_task(task, index, self._task_table[i], self._posture_table, posture)
                posture += isinstance(task, PostureTask)
            self._task_versions = versions
        task_table, posture_table, table = self._task_table, self._posture_table, work.contact_table
        arguments = (self.limits, cycle, assembly.Tables(task_table, posture_table, table, work.regularization,
                                                          work.generators), work.qp)
        if self._assemble_entry is None:  # numba's dispatcher types the namedtuples' fields once
            assembly.assemble_kernel(*arguments)
            self._assemble_entry = compiled_entry(assembly.assemble_kernel, arguments)
        else:  # the arrays are the controller's own, of the types of its first call
            self._assemble_entry(*arguments)
        return work.Jf

    @staticmethod
    def _capture(task, state) -> None:
        """A task without a reference holds what the state has at its first cycle."""
        if isinstance(task, FrameTask):
            k = state.frame_index[task.frame]
            if task.rotation is None:
                task.rotation = state.frame_rotation[k].copy()
            if task.position is None:
                task.position = state.frame_position[k].copy()
        elif isinstance(task, CenterOfMassTask):
            task.position = state.com.copy()
        else:
            task.position = state.joint_positions.copy()

    @staticmethod
    def _pack_contact(contact, frame: int, row: np.ndarray) -> None:
        """A contact's row of the assembly's contact table (assembly.CONTACT_*)."""
        row[:] = 0.0
        row[assembly.CONTACT_KIND] = _CONTACT_KINDS[type(contact).rows]
        row[assembly.CONTACT_FRAME] = frame
        row[assembly.CONTACT_KP], row[assembly.CONTACT_KD] = contact.kp, contact.kd
        row[assembly.CONTACT_WEIGHT] = contact.regularization_weight
        row[assembly.CONTACT_ROTATION:assembly.CONTACT_ROTATION + 9] = contact.rotation.ravel()
        row[assembly.CONTACT_POSITION:assembly.CONTACT_POSITION + 3] = contact.position
        target = contact.regularization_target
        row[assembly.CONTACT_TARGET:assembly.CONTACT_TARGET + len(target)] = target
        if contact.kind == "point":
            row[assembly.CONTACT_OFFSET:assembly.CONTACT_OFFSET + 3] = contact.offset

    @staticmethod
    def _pack_task(task, frame_index: dict, row: np.ndarray, postures: np.ndarray, posture: int) -> None:
        """A task's row of the assembly's task table (assembly.TASK_*); a
        posture's gains and references go to its row `posture` of postures."""
        kind = _TASK_KINDS[type(task).rows]
        row[:] = 0.0
        row[assembly.TASK_KIND], row[assembly.TASK_WEIGHT] = kind, task.weight
        if kind == assembly.FRAME_TASK:
            row[assembly.TASK_FRAME] = frame_index[task.frame]
            row[assembly.TASK_MASK:assembly.TASK_MASK + 6] = task.mask
            row[assembly.TASK_KP:assembly.TASK_KP + 6] = task.kp
            row[assembly.TASK_KD:assembly.TASK_KD + 6] = task.kd
            row[assembly.TASK_ROTATION:assembly.TASK_ROTATION + 9] = task.rotation.ravel()
            row[assembly.TASK_POSITION:assembly.TASK_POSITION + 3] = task.position
            row[assembly.TASK_TWIST:assembly.TASK_TWIST + 6] = task.twist
            row[assembly.TASK_ACCELERATION:assembly.TASK_ACCELERATION + 6] = task.acceleration
        elif kind == assembly.COM_TASK:
            row[assembly.TASK_MASK:assembly.TASK_MASK + 3] = task.mask
            row[assembly.TASK_KP:assembly.TASK_KP + 3] = task.kp
            row[assembly.TASK_KD:assembly.TASK_KD + 3] = task.kd
            row[assembly.TASK_POSITION:assembly.TASK_POSITION + 3] = task.position
            row[assembly.TASK_TWIST:assembly.TASK_TWIST + 3] = task.velocity
            row[assembly.TASK_ACCELERATION:assembly.TASK_ACCELERATION + 3] = task.acceleration
        else:
            row[assembly.TASK_FRAME] = posture  # its row in the posture table
            postures[posture] = (task.kp, task.kd, task.position, task.velocity, task.acceleration)

    def _assemble(self, state, contacts, work, M, h, constant) -> np.ndarray:
        """The QP of the cycle from the tasks' and contacts' rows() (any Task
        or RigidContact subclass); returns Jf."""
        nv, nu, n = self.model.nv, self.nu, work.H.shape[0]
        H, g, A, b, C, lower, upper = work.H, work.g, work.A, work.b, work.C, work.lower, work.upper
        if not constant:
            self._constant_rows(contacts, work)
        nf = n - nv
        Jf = np.zeros((nf, nv))  # generalised force = Jf^T f
        row, column, in_row = nu, nv, 0
        H[:] = 0.0
        g[:] = 0.0
        for contact in contacts:
            Jc, rhs = contact.rows(state)
            m = Jc.shape[0]
            A[row:row + m, :nv] = Jc
            b[row:row + m] = rhs
            G = contact.generator(state)
            Jf[column - nv:column - nv + contact.size] = G.T @ Jc
            W, target = contact.regularization, contact.regularization_target
            block = slice(column, column + contact.size)
            H[block, block] += contact.regularization_weight * (W.T @ W)
            g[block] -= contact.regularization_weight * (W.T @ target)
            row, column, in_row = row + m, column + contact.size, in_row + contact.B.shape[0]
        if nu:
            A[:nu, :nv] = M[:nu]
            A[:nu, nv:] = -Jf[:, :nu].T
            b[:nu] = -h[:nu]
        # torque limits on the actuated rows: tau = M_a a + h_a - J_a^T f
        limits = self.limits
        rows = limits.torque_rows
        k = len(rows)
        if k:
            joints = nu + rows
            C[in_row:in_row + k, :nv] = M[joints]
            C[in_row:in_row + k, nv:] = -Jf[:, joints].T
            lower[in_row:in_row + k] = -limits.torque_limit - h[joints]
            upper[in_row:in_row + k] = limits.torque_limit - h[joints]
            in_row += k
        rows = limits.bound_rows
        k = len(rows)
        if k:
            a_lower, a_upper = self.acceleration_bounds(state)
            lower[in_row:in_row + k] = a_lower[rows]
            upper[in_row:in_row + k] = a_upper[rows]
            in_row += k
        for task in self.tasks:
            if task.weight == 0.0:
                continue
            At, bt = task.rows(state)
            if At is self.joint_selection:  # the posture: the actuated diagonal
                H[self._actuated, self._actuated] += task.weight
                g[nu:nv] -= task.weight * bt
                continue
            H[:nv, :nv] += task.weight * (At.T @ At)
            g[:nv] -= task.weight * (At.T @ bt)
        H.flat[::n + 1] += limits.hessian_regularization
        return Jf

    def acceleration_bounds(self, state: State) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on the actuated accelerations: reach no position limit within
        the horizon T (q + v T + a T²/2), and |a| <= acceleration_limit."""
        limits = self.limits
        T = limits.horizon
        q, v = state.joint_positions, state.joint_velocities
        with np.errstate(invalid="ignore"):
            lower = np.maximum(2.0 * (limits.position_lower - q - v * T) / T**2, -limits.acceleration_limit)
            upper = np.minimum(2.0 * (limits.position_upper - q - v * T) / T**2, limits.acceleration_limit)
        return np.clip(lower, -INFINITE_BOUND, INFINITE_BOUND), np.clip(upper, -INFINITE_BOUND, INFINITE_BOUND)

    def _workspace(self, key, n, contacts) -> _Workspace:
        work = self._workspaces.get(key)
        if work is None:
            n_eq = self.nu + sum(c.motion_rows for c in contacts)
            n_in = sum(c.B.shape[0] for c in contacts) + len(self.limits.torque_rows) + len(self.limits.bound_rows)
            if len(self._workspaces) >= MAX_WORKSPACES:
                self._workspaces.pop(next(iter(self._workspaces)))
            work = self._workspaces[key] = _Workspace(self.model.nv, n, n_eq, n_in, self.settings)
        return work

    def _solve(self, work, contacts, state, M, h, Jf) -> ControlResult:
        solver, nv, nu = work.solver, self.model.nv, self.nu
        n_eq = len(work.b)
        work.upper_bounds[:n_eq] = work.b
        if work.initialized:  # warm: from the last cycle's active set
            status = solver.update(work.H, work.g, work.constraints, work.upper_bounds, work.lower_bounds)
        else:
            status, _ = solver.setup(work.H, work.g, work.constraints, work.upper_bounds, work.lower_bounds,
                                     work.sense)
            work.initialized = True
        iterations = 0
        com = None if state.com is None else state.com.copy()  # the cycle's: the next one writes state.com
        if status >= 0:
            x, _, status, info = solver.solve()
            iterations = info["iterations"]
        if status <= 0:
            for key, kept in list(self._workspaces.items()):  # no warm start from a failed solve
                if kept is work:
                    del self._workspaces[key]
            self._cycle = None  # it holds that workspace
            status = _DAQP_FAILURES.get(status, f"DAQP exit flag {status}")
            last = self._last
            message = (f"the QP has no solution ({status}): contacts {', '.join(self.contacts) or 'none'}; "
                       + ("holding the last solved torques" if last else "no solved cycle yet: zero torques"))
            if last is None:
                return ControlResult(np.zeros(self.na), np.zeros(nv), {}, {}, status, False, iterations, message, com)
            return ControlResult(last.tau.copy(), last.a.copy(), dict(last.forces), dict(last.corner_forces),
                                 status, False, iterations, message, com)
        a, f = x[:nv], x[nv:]
        tau = M[nu:] @ a + h[nu:] - Jf[:, nu:].T @ f
        forces, corners, column = {}, {}, 0
        for contact in contacts:
            fc = f[column:column + contact.size].copy()
            forces[contact.name] = contact.wrench(fc, state)
            if contact.kind == "surface":
                corners[contact.name] = fc.reshape(4, 3)
            column += contact.size
        self._last = ControlResult(tau, a, forces, corners, "solved", True, iterations, com=com)
        return self._last
