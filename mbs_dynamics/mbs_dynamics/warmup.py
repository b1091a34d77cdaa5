"""Compiles the compiled kernels once, filling numba's on-disk cache, so that
nothing stalls on first use (compiling takes seconds per kernel; loading one
from the cache, milliseconds).

    python -m mbs_dynamics.warmup          what the nodes use, as they call it
    python -m mbs_dynamics.warmup --all    and everything else (the tests)

scripts/setup_venv.sh runs the first after installing (the second for
`./dev test`); on a ROS 2 install run `python3 -m mbs_dynamics.warmup` once
after `colcon build`.

numba compiles on one core, so the tasks below run in one process per core
(--jobs), in the order of NODE_TASKS and OTHER_TASKS (those of AFTER once the
task whose kernels they load is done). A kernel is compiled in the signature of its
call (array types, read-only or not, single state or batch), so each task
calls the core functions exactly as the nodes do. Tasks may share helper
kernels: a function needed in one signature by two processes at once is
compiled by one while the other waits, then loads it (_serialise_compiles:
the simulation's step loads the collision queries' narrow phase so), and two
signatures of one function compiled at once would write its cache entries at
once, which numba does not guard against (both could take the same data
file), so the workers serialise their cache writes (_serialise_cache_writes).
"""
from __future__ import annotations

import argparse
import atexit
import fcntl
import hashlib
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

import numpy as np

import mbs_dynamics as mbs
from mbs_dynamics.algorithms.kinematics import REPRESENTATIONS
from mbs_dynamics.contact.constraints import METHODS as CONTACT_METHODS


# --- the tasks: each calls a group of core functions that share kernels ---------
# Each takes a model and one of its frames: the warm-up's is the bundled
# quadruped, floating base, and its foot (the kernels' signatures do not
# depend on the robot); a node's, its own robot and root link (preload).


def _state(model):
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    return q, v, np.tile(q, (2, 1)), np.zeros((2, model.nv))


def inverse_dynamics(model, frame):
    """The inverse dynamics node; the dynamics server (its trajectories: a batch)."""
    q, v, qs, vs = _state(model)
    mbs.inverse_dynamics(model, q, v, v)
    mbs.inverse_dynamics(model, q, v, v, f_ext={frame: np.zeros(6)})
    mbs.inverse_dynamics(model, qs, vs, vs)
    mbs.nonlinear_effects(model, q, v)
    mbs.gravity_torques(model, q)


def forward_dynamics(model, frame):
    """The dynamics server (for the run monitor too), the simulator's rk4 and
    rkmk4; M^-1 of the ABA for the server's contact_method schur (which a
    model with coupled mimic joints has not)."""
    q, v, _, _ = _state(model)
    mbs.forward_dynamics(model, q, v, v)
    if not model.has_coupled_joints:
        mbs.InverseMassMatrix(model, q) @ v


def mass_matrix(model, frame):
    """The dynamics server's dynamics_terms (and its contacts, the simulator's step)."""
    q, _, _, _ = _state(model)
    mbs.mass_matrix(model, q)


def centroidal(model, frame):
    """The inverse dynamics node's centroidal momentum; the dynamics server's
    A_G; the run monitor's energies."""
    q, v, _, _ = _state(model)
    mbs.centroidal_state(model, q, v)
    mbs.centroidal_momentum_matrix(model, q)
    mbs.kinetic_energy(model, q, v)
    mbs.potential_energy(model, q)


def kinematics(model, frame):
    """The dynamics server's Jacobians, in every representation."""
    q, _, _, _ = _state(model)
    for representation in REPRESENTATIONS:
        mbs.frame_jacobian(model, q, frame, representation)
    mbs.frame_pose(model, q, frame)


def contact_forward(model, frame):
    """The dynamics server's contact services (every contact_method)."""
    q, v, _, _ = _state(model)
    for contacts in ([mbs.PointContact(frame)], [mbs.FrameContact(frame)]):
        for method in CONTACT_METHODS:
            if not (method == "schur" and model.has_coupled_joints):
                mbs.contact_forward_dynamics(model, q, v, v, contacts, method=method)
        mbs.impact(model, q, v, contacts)


def contact_inverse(model, frame):
    """The inverse dynamics node's contacts, the dynamics server's (a floating base's)."""
    if not model.floating_base:
        return
    q, v, _, _ = _state(model)
    for contacts in ([mbs.PointContact(frame)], [mbs.FrameContact(frame)]):
        mbs.contact_inverse_dynamics(model, q, v, v, contacts)
        mbs.contact_inverse_dynamics(model, q, v, v, contacts, friction=[1.0])


def simulation(model, frame):
    """The simulator: a step with ground contact, joint limits, damping and
    friction, in each integrator."""
    world = mbs.World(mbs.Ground(), (mbs.PointContact(frame),))
    for integrator in mbs.INTEGRATORS:
        simulation = mbs.Simulation(model, world, 1e-3, integrator)
        simulation.step(np.zeros(model.nv))


def collision_queries(model, frame):
    """mbs_dynamics.collision's distance and contact points: the narrow phase
    and the contact manifold, in the signatures the simulation's step calls
    them in too (beside whose compile this one runs: _serialise_compiles)."""
    from mbs_dynamics.collision import box, contact_points, distance, sphere
    pose = (np.eye(3), np.ones(3))
    distance(box((1.0, 1.0, 1.0)), None, sphere(0.5), pose)
    contact_points(box((1.0, 1.0, 1.0)), None, sphere(0.5), pose, margin=0.1)


def step_callees(model, frame):
    """The step's Coulomb solver and smooth integrator (with its ABA): the
    callees the simulation's step compiles apart, in its signatures (its
    untracked views are arrays of the same types), called without rows or
    steps to take: run on the other process while the step's task inlines
    the step, which then loads them (_serialise_compiles)."""
    from mbs_dynamics.simulation.stepping.integrator import RungeKuttaStages, smooth_step
    from mbs_dynamics.simulation.stepping.islands import IslandScratch, solve_islands
    from mbs_dynamics.simulation.stepping.rows import Rows

    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(), (mbs.PointContact(frame),)), 1e-3)
    system = simulation.system  # (a model with coupled joints steps as the whole tree)
    nq, nv = system.nq, system.nv
    dof_parent = system.dof_parent.view()
    dof_parent.flags.writeable = False  # as the step passes it
    none = np.zeros(0)
    solve_islands(Rows(np.zeros((0, nv)), np.zeros(0, np.int64), np.zeros(0, np.int64), none, none), dof_parent,
                  none, none, none, none, simulation._settings[0], none, none,
                  IslandScratch(np.zeros(0, np.int64), none))
    stages = RungeKuttaStages(np.zeros((4, nv)), np.zeros((4, nv)), np.zeros(nq), np.zeros(nv))
    terms = simulation._world[2].copy()  # writable, as the step's views are
    smooth_step(system.packed, system.neutral_configuration(), np.zeros(nv), simulation._actuation, terms, 1e-3,
                True, stages, np.zeros(nq), np.zeros(nv), simulation._buffer)


def rollouts(model, frame):
    """The dynamics server's ~/rollout: rollouts on threads with ground contact and PD actuators."""
    q, v, qs, vs = _state(model)
    world = mbs.World(mbs.Ground(), (mbs.PointContact(frame),))
    joint = next((name for name, count in zip(model.body_joint_names, model.nv_joint, strict=True)
                  if count == 1 and name in model.joint_names), None)
    actuators = mbs.Actuators((joint,), (1.0,), (0.1,)) if joint else mbs.Actuators()
    zeros = np.zeros((2, 2, model.nv))
    mbs.rollout(model, qs, vs, zeros, position_targets=zeros, velocity_targets=zeros, world=world,
                actuators=actuators, threads=2)


def rnea_forms(model, frame):
    """Beyond the nodes: the RNEA in its world forms."""
    q, v, qs, vs = _state(model)
    for representation in ("spatial", "hybrid"):
        mbs.inverse_dynamics(model, q, v, v, f_ext={frame: np.zeros(6)}, representation=representation)
        mbs.inverse_dynamics(model, qs, vs, vs, representation=representation)


def batches(model, frame):
    """Beyond the nodes: batches of forward dynamics, mass matrices, momenta."""
    _, _, qs, vs = _state(model)
    mbs.forward_dynamics(model, qs, vs, vs)
    mbs.mass_matrix(model, qs)
    mbs.centroidal_momentum(model, qs, vs)


# Two links, the second's joint following the first's: a model with a coupled mimic joint.
COUPLED_PAIR = (
    '<robot name="coupled"><link name="a"/>'
    + "".join(f'<link name="{link}"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" '
              f'ixz="0" iyz="0"/></inertial></link>' for link in "bc")
    + '<joint name="j1" type="continuous"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/></joint>'
    '<joint name="j2" type="continuous"><parent link="b"/><child link="c"/><axis xyz="1 0 0"/>'
    '<mimic joint="j1" multiplier="2"/></joint></robot>')


def coupled_mimic(model, frame):
    """Beyond the nodes (whose preload runs forward_dynamics on their own
    robot): forward dynamics of a model with a coupled mimic joint."""
    coupled = mbs.Model.from_urdf_string(COUPLED_PAIR)
    mbs.forward_dynamics(coupled, np.zeros(1), np.zeros(1), np.zeros(1))


def frame_motion(model, frame):
    """Beyond the nodes: frame accelerations and jerks."""
    q, v, _, _ = _state(model)
    mbs.frame_acceleration(model, q, v, v, frame, "hybrid")
    mbs.frame_jerk(model, q, v, v, v, frame, "hybrid")


def derivatives(model, frame):
    """Beyond the nodes: the derivatives of the dynamics, single states and
    batches (one task: the forward dynamics' derivatives compile the inverse's)."""
    q, v, qs, vs = _state(model)
    mbs.inverse_dynamics_derivatives(model, q, v, v)
    mbs.inverse_dynamics_derivatives(model, qs, vs, vs)
    mbs.forward_dynamics_derivatives(model, q, v, v)
    mbs.linearize(model, q, v, v)
    mbs.forward_dynamics_derivatives(model, qs, vs, vs)
    mbs.linearize(model, qs, vs, vs)


def coriolis(model, frame):
    q, v, _, _ = _state(model)
    mbs.coriolis_matrix(model, q, v)


def id_rate(model, frame):
    q, v, _, _ = _state(model)
    mbs.inverse_dynamics_rate(model, q, v, v, v)


def contact_step(model, frame):
    """Beyond the nodes: contact_step called directly (its defaults)."""
    q, v, _, _ = _state(model)
    mbs.contact_step(model, q, v, v, 1e-3, [mbs.PointContact(frame)], mbs.Ground(height=1.0))


def regressor(model, frame):
    """mbs_dynamics_identify (a batch per chunk), and one state."""
    q, v, qs, vs = _state(model)
    mbs.joint_torque_regressor(model, q, v, v)
    mbs.joint_torque_regressor(model, qs, vs, vs)


def whole_body_control(model, frame):
    """The whole-body controller's cycle (its QP assembly kernel)."""
    from mbs_dynamics.control import CenterOfMassTask, PostureTask, RigidPointContact, WholeBodyController
    controller = WholeBodyController(model)
    controller.add_contact(RigidPointContact(frame))
    controller.add_task(CenterOfMassTask())
    controller.add_task(PostureTask())
    q, v, _, _ = _state(model)
    controller.compute(q, v)


# What the nodes call, then the rest, in the order the processes take them up.
# The simulation first: it is the longest by far (its step kernel inlines the
# stepping: about half of the nodes' compile time), so one process compiles it
# from the start while the others take the rest in turn. Next the step's callees
# that numba compiles apart, in the step's signatures: the collision queries (the
# narrow phase and manifold) and step_callees (the Coulomb solver, the smooth
# integrator and its ABA), which another process compiles while the step's inline
# pass runs; the step, finding them compiled or compiling (_serialise_compiles),
# loads them (44 -> 13 CPU-s for its body_pairs; it may wait for them: DESIGN.md).
# The step's aba, rnea and crba are the nodes' versions (its model typed read-only),
# compiled once by whichever process needs them first. Then the kernels that others
# call (aba, kinematics, rnea, crba) before those others (contact), which then load
# them from the cache rather than compile them a second time. The rollouts last
# (the dynamics server preloads them: left to it, the first run's server compiled
# them at its start), once the step is in the cache (AFTER): their kernel calls it by its address and compiles
# alone in about 1.5 CPU-s (linked in, the step was optimised again: 12). mbs_dynamics_identify's
# regressor is left to the rest (`./dev run` does not call it; its first call
# compiles it, about 4 CPU-s).
NODE_TASKS = (simulation, collision_queries, step_callees, forward_dynamics, kinematics, inverse_dynamics, mass_matrix,
              centroidal, contact_forward, contact_inverse, rollouts)
OTHER_TASKS = (derivatives, rnea_forms, id_rate, frame_motion, coriolis, batches, contact_step, coupled_mimic,
               regressor, whole_body_control)
TASKS = {task.__name__: task for task in NODE_TASKS + OTHER_TASKS}
# Tasks that call the simulation's step kernel in its signature (contact_step's set-up is typed as Simulation's; the
# rollouts call it from their kernel, both by its address), started only once the simulation's task has put it in the
# cache, which they then load: started beside it, each compiled it again (contact_step ~2.5 CPU-minutes); now they
# would wait for it (_serialise_compiles), holding a worker.
AFTER = {contact_step.__name__: simulation.__name__, rollouts.__name__: simulation.__name__}
# The tasks of dense computations (O(nv^2) memory, O(nv^3) time), and the most coordinates of a model a node
# preloads them for: a 5000-joint model's contact forward dynamics took 368 s at start-up.
DENSE_TASKS = (mass_matrix, contact_forward, contact_inverse)
DENSE_PRELOAD_DOF = 500


def preload(model, tasks, frame: str | None = None) -> None:
    """Run `tasks` once on `model` (the dense ones only up to
    DENSE_PRELOAD_DOF coordinates), at `frame` (default: the root link): a
    node does before it serves, so that its first message or request does
    not wait for numba to load the kernels from its cache (tens to hundreds
    of ms; a stalled stream overflows its queue)."""
    frame = frame or model.description.root
    for task in tasks:
        if not (task in DENSE_TASKS and model.nv > DENSE_PRELOAD_DOF):
            task(model, frame)


# --- running them -----------------------------------------------------------------


def _serialise_cache_writes() -> None:
    """numba saves a cache entry by reading the function's index, picking the
    first free data file number, writing the index, then the data file: two
    processes saving two signatures of one function at once can both pick
    the same number, and an index then points at another signature's code.
    Each save here holds an exclusive lock on the cache directory."""
    from numba.core import caching

    save = caching.IndexDataCacheFile.save
    if getattr(save, "serialised", False):
        return

    def locked_save(self, key, data):
        directory = os.open(self._cache_path, os.O_RDONLY)
        try:
            fcntl.flock(directory, fcntl.LOCK_EX)
            save(self, key, data)
        finally:
            os.close(directory)  # releases the lock

    locked_save.serialised = True
    caching.IndexDataCacheFile.save = locked_save


def _serialise_compiles(lock_directory: str) -> None:
    """Two processes that need one function in one signature (the step's
    callees: compiled by the task whose kernels they are, while the step's
    compile reaches them) compile it once: each compile holds an exclusive
    lock on a file of `lock_directory` named after the function and the
    signature, and the one that waited for it then loads it from the cache
    (numba's Dispatcher.compile looks there first). The locks nest as the
    calls do, in one direction (no kernel calls itself), so they cannot
    deadlock."""
    from numba.core import dispatcher, sigutils

    compile_signature = dispatcher.Dispatcher.compile
    if getattr(compile_signature, "serialised", False):
        return

    def locked_compile(self, signature):
        argument_types, _ = sigutils.normalize_signature(signature)
        if tuple(argument_types) in self.overloads:
            return compile_signature(self, signature)
        function = self.py_func
        key = f"{function.__module__}.{function.__qualname__}{tuple(argument_types)}"
        lock = os.open(os.path.join(lock_directory, hashlib.sha256(key.encode()).hexdigest()),
                       os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return compile_signature(self, signature)
        finally:
            os.close(lock)  # releases the lock

    locked_compile.serialised = True
    dispatcher.Dispatcher.compile = locked_compile


def _start_worker(lock_directory: str) -> None:
    _serialise_cache_writes()
    _serialise_compiles(lock_directory)
    atexit.register(_exit_without_teardown)


def _exit_without_teardown() -> None:
    """A worker's exit, its tasks done (their results sent, its cache files
    written and closed), without the interpreter's teardown, which frees
    every module numba compiled one by one: 2-4 s after a large compile,
    which the warm-up waited for. Registered last, it runs first of the
    exit handlers."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


_model = None


def run_task(name: str) -> tuple[str, float, float]:
    """Runs task `name` (TASKS) on the quadruped; returns (name, seconds,
    CPU seconds of its process)."""
    global _model
    _serialise_cache_writes()
    start, cpu_start = time.perf_counter(), time.process_time()
    if _model is None:
        _model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    TASKS[name](_model, "LF_FOOT")
    return name, time.perf_counter() - start, time.process_time() - cpu_start


def _completed(pool: ProcessPoolExecutor, names: list[str]):
    """Runs the tasks `names` on `pool`, each of AFTER once the task it
    waits for is done; yields run_task's results as they complete."""
    waiting: dict[str, list[str]] = {}
    for name in names:
        if AFTER.get(name) in names:
            waiting.setdefault(AFTER[name], []).append(name)
    pending = {pool.submit(run_task, name) for name in names if AFTER.get(name) not in names}
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            result = future.result()
            pending |= {pool.submit(run_task, name) for name in waiting.pop(result[0], ())}
            yield result


def warm_up(everything: bool = False, jobs: int | None = None, verbose: bool = False) -> float:
    """Runs the node tasks (and with `everything`, the rest) on `jobs`
    processes (default: one per available core); returns the seconds it took.
    A task that fails fails the warm-up."""
    start = time.perf_counter()
    names = [task.__name__ for task in NODE_TASKS + (OTHER_TASKS if everything else ())]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    jobs = max(1, min(jobs or cores, len(names)))
    if jobs == 1:
        results = map(run_task, names)
    else:
        # fresh interpreters (numba's threads do not survive a fork); a worker
        # that dies raises BrokenProcessPool here rather than hanging
        locks = tempfile.TemporaryDirectory(prefix="mbs_dynamics_warmup_")
        pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
                                   initargs=(locks.name,))
        results = _completed(pool, names)
    try:
        for name, seconds, cpu_seconds in results:
            if verbose:
                print(f"  {name}: {seconds:.1f} s ({cpu_seconds:.1f} s CPU) at {time.perf_counter() - start:.1f} s",
                      flush=True)
    finally:
        if jobs > 1:
            pool.shutdown(cancel_futures=True)
            locks.cleanup()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description="Compile mbs_dynamics' kernels into numba's cache.")
    parser.add_argument("--all", action="store_true", help="also what no node uses (derivatives, ...)")
    parser.add_argument("--jobs", type=int, default=None, help="processes (default: one per core)")
    parser.add_argument("--verbose", action="store_true", help="print each task's seconds")
    arguments = parser.parse_args()
    seconds = warm_up(arguments.all, arguments.jobs, arguments.verbose)
    print(f"mbs_dynamics: compiled kernels ready ({seconds:.1f} s)")


if __name__ == "__main__":
    main()
