"""Rollouts: N simulations of the same scene (a model, World, dt, integrator,
actuators and solver settings, as Simulation takes them) from N initial
states under N control sequences of T steps, in parallel; the states and the
contact forces of all, every `stride` steps.

A control sequence is open loop (efforts (N, T, nv)) or the actuators' PD
law toward per-step targets (position and velocity targets (N, T, nv)), or
both. Each rollout is exactly a Simulation stepped one step per call with
that step's efforts and targets (Simulation.step(tau), set_targets), to the
last bit: the same compiled step (stepping.simulate_kernel, one step a
call), the warm starts carried from step to step.

In one process the rollouts are split among `threads` threads (the pool of
parallel.py, the batches'), each with its own work arrays, results and
actuators, each running its rollouts in one compiled call that releases the
GIL (rollout_kernel), which calls the step by its address
(compiled_calls.call_native): Simulation.step's own machine code, not a
copy linked into the rollouts' kernel and compiled again. Given a Dask
scheduler's address, the rollouts are split into tasks on that cluster's
workers, results gathered in order: identical to the local run.

A rollout that cannot take a step (a non-finite input, a result that
overflows, a singular mass matrix) stops there, its status and step
recorded, its later rows holding the state it stopped at; the others go on.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
from numba import njit

from mbs_dynamics.compiled_calls import call_native, native_function
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, SINGULAR_MASS_MATRIX, finite_vector
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.multibody.workspace import untracked_views
from mbs_dynamics.parallel import get_num_threads, run_together
from mbs_dynamics.simulation.simulation import DEFAULT_INTEGRATOR, MARGIN, Actuators, Simulation, World
from mbs_dynamics.simulation.stepping import copy_records, new_results, work_buffers
from mbs_dynamics.simulation.stepping.stages import simulate_kernel

STATUS_NAMES = {0: "done", INVALID_INPUT: "invalid input", NONFINITE_RESULT: "non-finite result",
                SINGULAR_MASS_MATRIX: "singular mass matrix"}
STATUS_MEANINGS = {
    INVALID_INPUT: "a non-finite value in its state, efforts or targets, or a quaternion far from unit length",
    NONFINITE_RESULT: "the step overflows (inputs too large)",
    SINGULAR_MASS_MATRIX: "the mass matrix is singular",
}


@dataclass(frozen=True)
class Rollouts:
    """The rollouts' states after every `stride` steps: q (N, S, nq), v (N, S,
    nv), of the robot (objects not included), row s after step (s + 1) stride;
    contact_forces (N, S, k, 3): the mean force of the obstacles on each of the
    robot's contact points over that step (Simulation.contact_forces); status
    (N,): 0, or the inputs' code of why the rollout stopped (STATUS_NAMES);
    steps (N,): the steps taken (T when done; else the step it could not
    take, whose state and later rows repeat the state before it);
    unconverged (N,): steps whose solver ended above the tolerance."""

    q: np.ndarray
    v: np.ndarray
    contact_forces: np.ndarray
    status: np.ndarray
    steps: np.ndarray
    unconverged: np.ndarray
    stride: int
    dt: float

    @property
    def done(self) -> np.ndarray:
        """(N,) whether each rollout took every step."""
        return self.status == 0

    def failures(self) -> dict[int, str]:
        """{rollout: what stopped it, at which step} of the rollouts that stopped."""
        return {int(i): f"rollout {i} stopped at step {self.steps[i]}: {STATUS_MEANINGS[int(self.status[i])]}"
                for i in np.flatnonzero(self.status)}


@njit(cache=True, nogil=True)
def rollout_kernel(step, packed, dof_parent, world, settings, actuation, results, buffer, work_floats, work_ints, q,
                   v, q_start, v_start, q0, v0, efforts, position_targets, velocity_targets, contact_count, stride,
                   first, every, q_out, v_out, forces_out, status, steps_taken, unconverged):
    """Rollouts first, first + every, ... < N (module docstring), one at a time
    in this workspace, the GIL released (one thread's share): step, the
    NativeFunction of simulate_kernel in the types of the arguments it is
    passed here (RolloutPlan.native_step); the system's q,
    v (from q_start, v_start: the objects' poses, the robot's from q0, v0),
    the actuation and results records (a plain tuple), the scratch buffer
    and the work buffers (work.work_buffers);
    settings: SETTINGS (1,) of one step a call. Efforts and targets of shape
    (N, T, nv), or (0, 0, 0): none (zero efforts; the targets the actuation
    holds). Each step is a call of simulate_kernel, Simulation.step's own
    compiled kernel, by its address (compiled once for both)."""
    # untracked (workspace.untracked_views): simulate_kernel counts no reference to them at each step
    packed, dof_parent, world, settings, actuation, results, buffer, work_floats, work_ints, q, v = untracked_views(
        (packed, dof_parent, world, settings, actuation, results, buffer, work_floats, work_ints, q, v))
    points, contacts, coordinates, collisions, report = results[0], results[1], results[2], results[4], results[5]
    nq, nv = q0.shape[1], v0.shape[1]
    total = q_out.shape[1] * stride
    for i in range(first, q0.shape[0], every):
        q[:] = q_start
        v[:] = v_start
        q[:nq] = q0[i]
        v[:nv] = v0[i]
        # a Simulation reset to (q0, v0): no warm starts
        for k in range(contacts.shape[0]):
            for o in range(contacts.shape[1]):
                contacts[k, o].impulse[:] = 0.0
        for r in range(coordinates.shape[0]):
            coordinates[r].joint_impulse = 0.0
        for c in range(collisions.shape[0]):
            collisions[c].impulse[:] = 0.0
        report[0].collisions = 0
        status[i], steps_taken[i], unconverged[i] = 0, total, 0
        for t in range(total):
            if efforts.shape[0] > 0:
                for r in range(nv):
                    actuation[r].effort = efforts[i, t, r]
            if position_targets.shape[0] > 0:
                for r in range(nv):
                    actuation[r].position_target = position_targets[i, t, r]
            if velocity_targets.shape[0] > 0:
                for r in range(nv):
                    actuation[r].velocity_target = velocity_targets[i, t, r]
            if not (finite_vector(actuation["position_target"]) and finite_vector(actuation["velocity_target"])):
                status[i] = INVALID_INPUT
            else:
                call_native(step, (packed, dof_parent, world, actuation, settings, q, v, results, buffer, work_floats,
                                   work_ints))
                status[i] = report[0].status
                unconverged[i] += report[0].unconverged
            if status[i] != 0:
                steps_taken[i] = t
                for row in range(t // stride, q_out.shape[1]):
                    q_out[i, row] = q[:nq]
                    v_out[i, row] = v[:nv]
                    forces_out[i, row] = 0.0
                break
            if (t + 1) % stride == 0:
                row = (t + 1) // stride - 1
                q_out[i, row] = q[:nq]
                v_out[i, row] = v[:nv]
                for k in range(contact_count):
                    forces_out[i, row, k] = points[k].force


def _controls(model: Model, value, name: str, count: int, steps: int | None) -> np.ndarray | None:
    if value is None:
        return None
    array = np.ascontiguousarray(value, dtype=np.float64)
    if array.ndim != 3 or array.shape[0] != count or array.shape[2] != model.nv \
            or (steps is not None and array.shape[1] != steps):
        expected = f"({count}, {steps if steps is not None else 'T'}, {model.nv})"
        raise ValueError(f"{name} must have shape (N, T, nv) = {expected} for model '{model.name}' and "
                         f"{count} initial states, got {array.shape}")
    return array


def _states(model: Model, q0, v0) -> tuple[np.ndarray, np.ndarray]:
    """(q0 (N, nq), v0 (N, nv)) as float arrays, each quaternion normalised as
    Simulation normalises it; non-finite values are left to the kernel (that
    rollout stops at step 0)."""
    q0 = np.array(q0, dtype=np.float64, ndmin=2)
    if q0.ndim != 2 or q0.shape[1] != model.nq:
        raise ValueError(f"q0 must have shape (N, {model.nq}) for model '{model.name}', got {q0.shape}")
    v0 = np.zeros((q0.shape[0], model.nv)) if v0 is None else np.array(v0, dtype=np.float64, ndmin=2)
    if v0.shape != (q0.shape[0], model.nv):
        raise ValueError(f"v0 must have shape ({q0.shape[0]}, {model.nv}) for model '{model.name}' and "
                         f"{q0.shape[0]} initial configurations, got {v0.shape}")
    for start, _ in model.quaternions:
        for row in q0:
            norm = np.linalg.norm(row[start:start + 4])
            if np.isfinite(norm) and norm > 0:
                row[start:start + 4] /= norm
    return np.ascontiguousarray(q0), np.ascontiguousarray(v0)


class RolloutPlan:
    """A scene ready to roll out: its Simulation template (the compiled step's
    inputs, checked as Simulation checks them) and the rollouts' arrays."""

    def __init__(self, model: Model, world: World, dt: float, integrator: str, actuators: Actuators,
                 tolerance: float, max_iterations: int, stabilization: float, margin: float):
        self.template = Simulation(model, world, dt, integrator, actuators=actuators, tolerance=tolerance,
                                   max_iterations=max_iterations, stabilization=stabilization, margin=margin)
        self.settings = copy_records(self.template._settings)
        self.settings["steps"] = 1

    def workspace(self):
        """(actuation, results, buffer, work floats, work ints, q, v) of one
        thread: the template's copies."""
        sim = self.template
        system = sim._system.model
        results = new_results(*sim._results.contacts.shape, system.nv, system.nbodies, sim._results.collisions.shape[0])
        buffer = np.zeros_like(sim._buffer)
        work = work_buffers(system, sim._world, results.collisions)
        return copy_records(sim._actuation), tuple(results), buffer, *work, sim._q.copy(), sim._v.copy()

    def arguments(self):
        sim = self.template
        system = sim._system.model
        return system.packed, system.dof_parent, sim._world, self.settings

    def native_step(self, workspace):
        """The NativeFunction of the compiled step (simulate_kernel) for these
        arguments and a workspace's: the version Simulation.step calls."""
        packed, dof_parent, world, settings = self.arguments()
        actuation, results, buffer, work_floats, work_ints, q, v = workspace
        return native_function(simulate_kernel, (packed, dof_parent, world, actuation, settings, q, v, results, buffer,
                                                 work_floats, work_ints))


def rollout(model: Model, q0, v0=None, efforts=None, *, steps: int | None = None, position_targets=None,
            velocity_targets=None, world: World = World(), dt: float = 1e-3, integrator: str = DEFAULT_INTEGRATOR,
            actuators: Actuators = Actuators(), tolerance: float = 1e-10, max_iterations: int = 200,
            stabilization: float = 0.2, margin: float = MARGIN, stride: int = 1, threads: int | None = None,
            scheduler: str | None = None) -> Rollouts:
    """N rollouts of T steps (module docstring) from q0 (N, nq) and v0 (N, nv;
    None: at rest) under efforts (N, T, nv; None: zero) and, for the
    actuators, position_targets and velocity_targets (N, T, nv each; None:
    zero), in the scene Simulation(model, world, dt, integrator,
    actuators=actuators, tolerance=..., ...) would simulate. T is the controls'
    second dimension, or `steps` when no control is given. States are kept
    every `stride` steps (T a multiple of it). threads: how many (None:
    mbs.get_num_threads(), at first every core this process may use). scheduler: a Dask scheduler's address
    (tcp://host:8786): the rollouts split into tasks on its workers. Wrong
    shapes and settings raise ValueError;
    a rollout that cannot go on stops alone (Rollouts.status)."""
    q0, v0 = _states(model, q0, v0)
    count = q0.shape[0]
    controls = [_controls(model, value, name, count, steps) for value, name in
                ((efforts, "efforts"), (position_targets, "position targets"), (velocity_targets, "velocity targets"))]
    lengths = {array.shape[1] for array in controls if array is not None}
    if len(lengths) > 1:
        raise ValueError(f"efforts and targets must have the same number of steps, got {sorted(lengths)}")
    if lengths:
        steps = lengths.pop()
    if steps is None:
        raise ValueError("rollout needs the number of steps: controls of shape (N, T, nv) or steps=T")
    if not (isinstance(steps, (int, np.integer)) and steps >= 1):
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if not (isinstance(stride, (int, np.integer)) and 1 <= stride and steps % stride == 0):
        raise ValueError(f"stride must be an integer >= 1 that divides the {steps} steps, got {stride!r}")
    threads = get_num_threads() if threads is None else threads
    if not (isinstance(threads, (int, np.integer)) and threads >= 1):
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    scene = dict(world=world, dt=dt, integrator=integrator, actuators=actuators, tolerance=tolerance,
                 max_iterations=max_iterations, stabilization=stabilization, margin=margin)
    if scheduler:
        return _on_cluster(scheduler, model, q0, v0, controls, int(steps), int(stride), scene)
    plan = RolloutPlan(model, **scene)
    return _run(plan, q0, v0, controls, int(steps), int(stride), int(threads))


_NONE = np.zeros((0, 0, 0))


def _run(plan: RolloutPlan, q0, v0, controls, steps: int, stride: int, threads: int) -> Rollouts:
    model, count = plan.template.model, q0.shape[0]
    rows, contact_count = steps // stride, plan.template.contact_count
    q_out, v_out = np.zeros((count, rows, model.nq)), np.zeros((count, rows, model.nv))
    forces_out = np.zeros((count, rows, contact_count, 3))
    status, steps_taken, unconverged = (np.zeros(count, dtype=np.int64) for _ in range(3))
    efforts, position_targets, velocity_targets = (_NONE if array is None else array for array in controls)
    shared = plan.arguments()
    q_start, v_start = plan.template._q.copy(), plan.template._v.copy()
    inputs = (q0, v0, efforts, position_targets, velocity_targets, contact_count, stride)
    outputs = (q_out, v_out, forces_out, status, steps_taken, unconverged)
    threads = max(1, min(threads, count))
    workspaces = [plan.workspace() for _ in range(threads)]
    step = plan.native_step(workspaces[0])
    run_together([partial(rollout_kernel, step, *shared, *workspace, q_start, v_start, *inputs, w, threads, *outputs)
                  for w, workspace in enumerate(workspaces)])
    return Rollouts(q_out, v_out, forces_out, status, steps_taken, unconverged, stride, plan.template.dt)


def _rollout_task(model, q0, v0, controls, steps, stride, scene, threads):
    """One Dask task: its rollouts in the worker's process."""
    return _run(RolloutPlan(model, **scene), q0, v0, controls, steps, stride, threads)


def _on_cluster(scheduler: str, model: Model, q0, v0, controls, steps: int, stride: int, scene: dict) -> Rollouts:
    """The rollouts split into one task per worker thread of the cluster at
    `scheduler`, each task's rollouts contiguous; gathered in order."""
    import dask

    from mbs_dynamics.identification.runner import Runner

    runner = Runner(scheduler, progress=False)
    try:
        slots = max(1, sum(runner.client.nthreads().values()))
        bounds = np.linspace(0, q0.shape[0], min(slots, q0.shape[0]) + 1).astype(int)
        tasks = [dask.delayed(_rollout_task)(model, q0[a:b], v0[a:b],
                                             [None if c is None else c[a:b] for c in controls], steps, stride,
                                             scene, 1)
                 for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        parts = runner.compute(tasks, None)
    finally:
        runner.close()
    return Rollouts(*(np.concatenate([getattr(part, name) for part in parts]) for name in
                      ("q", "v", "contact_forces", "status", "steps", "unconverged")), stride, parts[0].dt)
