"""Compiles the compiled kernels once, filling numba's on-disk cache, so that
nothing stalls on first use (compiling takes seconds per kernel; loading one
from the cache, milliseconds).

    python -m mbs_dynamics.warmup          what the nodes use, as they call it
    python -m mbs_dynamics.warmup --all    and everything else (the tests)

scripts/setup_venv.sh runs the first after installing (the second for
`./dev test`); on a ROS 2 install run `python3 -m mbs_dynamics.warmup` once
after `colcon build`.

numba compiles on one core, so the tasks below run in one process per core
(--jobs), in the order of NODE_TASKS and OTHER_TASKS. A kernel is compiled in the signature of its
call (array types, read-only or not, single state or batch), so each task
calls the core functions exactly as the nodes do. Tasks may share helper
kernels: two processes may compile one and write its cache entries at once,
which numba does not guard against (both could take the same data file), so
the workers serialise their cache writes (_serialise_cache_writes).
"""
from __future__ import annotations

import argparse
import fcntl
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np

import mbs_dynamics as mbs
from mbs_dynamics.contact import METHODS as CONTACT_METHODS
from mbs_dynamics.kinematics import REPRESENTATIONS


# --- the tasks: each calls a group of core functions that share kernels ---------
# The models are the bundled quadruped, floating base (the contact functions
# need one; the kernels' signatures do not depend on the robot).


def _state(model):
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    return q, v, np.tile(q, (2, 1)), np.zeros((2, model.nv))


def inverse_dynamics(model):
    """The inverse dynamics node; the dynamics server (its trajectories: a batch)."""
    q, v, qs, vs = _state(model)
    mbs.inverse_dynamics(model, q, v, v)
    mbs.inverse_dynamics(model, q, v, v, f_ext={"LF_FOOT": np.zeros(6)})
    mbs.inverse_dynamics(model, qs, vs, vs)
    mbs.nonlinear_effects(model, q, v)
    mbs.gravity_torques(model, q)


def forward_dynamics(model):
    """The dynamics server (for the run monitor too), the simulator's rk4 and
    rkmk4; M^-1 of the ABA for the server's contact_method schur."""
    q, v, _, _ = _state(model)
    mbs.forward_dynamics(model, q, v, v)
    mbs.InverseMassMatrix(model, q) @ v


def mass_matrix(model):
    """The dynamics server's dynamics_terms (and its contacts, the simulator's step)."""
    q, _, _, _ = _state(model)
    mbs.mass_matrix(model, q)


def centroidal(model):
    """The inverse dynamics node's centroidal momentum; the dynamics server's
    A_G; the run monitor's energies."""
    q, v, _, _ = _state(model)
    mbs.centroidal_state(model, q, v)
    mbs.centroidal_momentum_matrix(model, q)
    mbs.kinetic_energy(model, q, v)
    mbs.potential_energy(model, q)


def kinematics(model):
    """The dynamics server's Jacobians, in every representation."""
    q, _, _, _ = _state(model)
    for representation in REPRESENTATIONS:
        mbs.frame_jacobian(model, q, "LF_FOOT", representation)
    mbs.frame_pose(model, q, "LF_FOOT")


def contact(model):
    """The dynamics server's contact services (every contact_method) and the
    inverse dynamics node's contacts."""
    q, v, _, _ = _state(model)
    for contacts in ([mbs.PointContact("LF_FOOT")], [mbs.FrameContact("LF_FOOT")]):
        for method in CONTACT_METHODS:
            mbs.contact_forward_dynamics(model, q, v, v, contacts, method=method)
        mbs.impact(model, q, v, contacts)
        mbs.contact_inverse_dynamics(model, q, v, v, contacts)
        mbs.contact_inverse_dynamics(model, q, v, v, contacts, friction=[1.0])


def simulation(model):
    """The simulator: a step with ground contact, joint limits, damping and
    friction, in each integrator."""
    world = mbs.World(mbs.Ground(), (mbs.PointContact("LF_FOOT"),))
    for integrator in mbs.INTEGRATORS:
        simulation = mbs.Simulation(model, world, 1e-3, integrator)
        simulation.step(np.zeros(model.nv))


def rnea_forms(model):
    """Beyond the nodes: the RNEA in its world forms."""
    q, v, qs, vs = _state(model)
    for representation in ("spatial", "hybrid"):
        mbs.inverse_dynamics(model, q, v, v, f_ext={"LF_FOOT": np.zeros(6)}, representation=representation)
        mbs.inverse_dynamics(model, qs, vs, vs, representation=representation)


def batches(model):
    """Beyond the nodes: batches of forward dynamics, mass matrices, momenta."""
    _, _, qs, vs = _state(model)
    mbs.forward_dynamics(model, qs, vs, vs)
    mbs.mass_matrix(model, qs)
    mbs.centroidal_momentum(model, qs, vs)


def frame_motion(model):
    """Beyond the nodes: frame accelerations and jerks."""
    q, v, _, _ = _state(model)
    mbs.frame_acceleration(model, q, v, v, "LF_FOOT", "hybrid")
    mbs.frame_jerk(model, q, v, v, v, "LF_FOOT", "hybrid")


def derivatives(model):
    """Beyond the nodes: the derivatives of the dynamics, single states and
    batches (one task: the forward dynamics' derivatives compile the inverse's)."""
    q, v, qs, vs = _state(model)
    mbs.inverse_dynamics_derivatives(model, q, v, v)
    mbs.inverse_dynamics_derivatives(model, qs, vs, vs)
    mbs.forward_dynamics_derivatives(model, q, v, v)
    mbs.linearize(model, q, v, v)
    mbs.forward_dynamics_derivatives(model, qs, vs, vs)
    mbs.linearize(model, qs, vs, vs)


def coriolis(model):
    q, v, _, _ = _state(model)
    mbs.coriolis_matrix(model, q, v)


def id_rate(model):
    q, v, _, _ = _state(model)
    mbs.inverse_dynamics_rate(model, q, v, v, v)


def contact_step(model):
    """Beyond the nodes: contact_step called directly (its defaults)."""
    q, v, _, _ = _state(model)
    mbs.contact_step(model, q, v, v, 1e-3, [mbs.PointContact("LF_FOOT")], mbs.Ground(height=1.0))


# What the nodes call, then the rest, in the order the processes take them up:
# the long tasks first, and the kernels that others call (aba, kinematics, rnea,
# crba) before those others (simulation, contact), which then load them from
# the cache rather than compile them a second time.
def regressor(model):
    """mbs_dynamics_identify (a batch per chunk), and one state."""
    q, v, qs, vs = _state(model)
    mbs.joint_torque_regressor(model, q, v, v)
    mbs.joint_torque_regressor(model, qs, vs, vs)


# (mbs_dynamics_identify is a command a user runs like a node: its regressor is warmed with them)
NODE_TASKS = (forward_dynamics, kinematics, inverse_dynamics, mass_matrix, centroidal, simulation, contact, regressor)
OTHER_TASKS = (derivatives, rnea_forms, id_rate, frame_motion, coriolis, batches, contact_step)
TASKS = {task.__name__: task for task in NODE_TASKS + OTHER_TASKS}


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


_model = None


def run_task(name: str) -> tuple[str, float]:
    """Runs task `name` (TASKS) on the quadruped; returns (name, seconds)."""
    global _model
    _serialise_cache_writes()
    start = time.perf_counter()
    if _model is None:
        _model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    TASKS[name](_model)
    return name, time.perf_counter() - start


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
        pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
        results = (future.result() for future in as_completed([pool.submit(run_task, name) for name in names]))
    try:
        for name, seconds in results:
            if verbose:
                print(f"  {name}: {seconds:.1f} s", flush=True)
    finally:
        if jobs > 1:
            pool.shutdown(cancel_futures=True)
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
