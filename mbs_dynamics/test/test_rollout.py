"""mbs.rollout: N simulations under N control sequences, each bit-identical to
a Simulation stepped one step per call with the same inputs; failures kept
per rollout; the same results on any number of threads and on a Dask
cluster of two worker processes."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import mbs_dynamics as mbs
import numpy as np
import pytest

from helpers import FEET, solo12_standing

DT = 1e-3


def stepped(model, world, q0, v0, efforts, actuators=mbs.Actuators(), position_targets=None, velocity_targets=None,
            integrator="rk4"):
    """(q (T, nq), v (T, nv), contact forces (T, k, 3)) of a Simulation
    stepped one step per call."""
    simulation = mbs.Simulation(model, world, DT, integrator, q=q0, v=v0, actuators=actuators)
    qs, vs, forces = [], [], []
    for t in range(efforts.shape[0]):
        simulation.set_targets(None if position_targets is None else position_targets[t],
                               None if velocity_targets is None else velocity_targets[t])
        simulation.step(efforts[t])
        qs.append(simulation.q.copy())
        vs.append(simulation.v.copy())
        forces.append(simulation.contact_forces)
    return np.array(qs), np.array(vs), np.array(forces)


@pytest.fixture(scope="module")
def solo():
    """Solo-12 standing on its four feet, PD actuators on every joint toward
    its stance, four rollouts from perturbed states under random efforts and
    targets around the stance (the first dropped from 2 cm)."""
    model, stance = solo12_standing()
    points = tuple(mbs.PointContact(foot) for foot in FEET)
    world = mbs.World(mbs.Ground(friction=0.8), points)
    joints = list(model.joint_names[1:])
    actuators = mbs.Actuators(joints, [5.0] * len(joints), [0.1] * len(joints))
    rng = np.random.default_rng(7)
    count, steps = 4, 60
    q0 = np.tile(stance, (count, 1))
    q0[:, 7:] += 0.05 * rng.standard_normal((count, model.nq - 7))
    q0[0, 2] += 0.02
    v0 = 0.1 * rng.standard_normal((count, model.nv))
    efforts = rng.standard_normal((count, steps, model.nv))
    efforts[:, :, :6] = 0.0
    targets = np.zeros((count, steps, model.nv))
    targets[:, :, 6:] = stance[7:] + 0.1 * rng.standard_normal((count, steps, model.nv - 6))
    velocity_targets = 0.1 * rng.standard_normal((count, steps, model.nv))
    return dict(model=model, world=world, actuators=actuators, q0=q0, v0=v0, efforts=efforts,
                position_targets=targets, velocity_targets=velocity_targets)


def rolled(solo, **options):
    return mbs.rollout(solo["model"], solo["q0"], solo["v0"], solo["efforts"],
                       position_targets=solo["position_targets"], velocity_targets=solo["velocity_targets"],
                       world=solo["world"], dt=DT, actuators=solo["actuators"], **options)


def test_each_rollout_is_bit_identical_to_a_simulation_stepped_step_by_step(solo):
    result = rolled(solo, threads=2)
    assert np.all(result.done) and np.all(result.steps == 60)
    touching = 0
    for i in range(4):
        q, v, forces = stepped(solo["model"], solo["world"], solo["q0"][i], solo["v0"][i], solo["efforts"][i],
                               solo["actuators"], solo["position_targets"][i], solo["velocity_targets"][i])
        assert np.array_equal(result.q[i], q) and np.array_equal(result.v[i], v)
        assert np.array_equal(result.contact_forces[i], forces)
        touching += np.count_nonzero(forces[:, :, 2] > 0)
    assert touching > 100  # the feet carried it: the contact solver was in every rollout
    assert np.abs(result.q[:, -1] - result.q[:, 0]).max() > 1e-3  # and it moved


def test_one_thread_more_threads_and_a_stride_agree_to_the_bit(solo):
    reference = rolled(solo, threads=1)
    for options in (dict(threads=2), dict(threads=3)):
        result = rolled(solo, **options)
        for name in ("q", "v", "contact_forces", "status", "steps", "unconverged"):
            assert np.array_equal(getattr(result, name), getattr(reference, name)), (options, name)
    strided = rolled(solo, threads=2, stride=20)
    assert strided.q.shape == (4, 3, solo["model"].nq)
    assert np.array_equal(strided.q, reference.q[:, 19::20])
    assert np.array_equal(strided.contact_forces, reference.contact_forces[:, 19::20])


def test_a_rollout_that_fails_stops_alone_with_its_status_and_step(solo):
    efforts = solo["efforts"].copy()
    efforts[1, 17, 8] = np.nan  # rollout 1 cannot take step 17
    targets = solo["position_targets"].copy()
    targets[3, 5, 9] = np.inf  # rollout 3, step 5
    q0 = solo["q0"].copy()
    q0[2, 8] = np.nan  # rollout 2 cannot start
    result = mbs.rollout(solo["model"], q0, solo["v0"], efforts, position_targets=targets,
                         velocity_targets=solo["velocity_targets"], world=solo["world"], actuators=solo["actuators"],
                         threads=2)
    reference = rolled(solo, threads=2)
    assert result.status.tolist() == [0, mbs.inputs.INVALID_INPUT, mbs.inputs.INVALID_INPUT,
                                      mbs.inputs.INVALID_INPUT]
    assert result.steps.tolist() == [60, 17, 0, 5]
    assert np.array_equal(result.q[0], reference.q[0])  # the others go on
    assert np.array_equal(result.q[1, :17], reference.q[1, :17])
    assert np.array_equal(result.q[1, 17:], np.broadcast_to(reference.q[1, 16], (43, solo["model"].nq)))
    # rows repeat the state a rollout stopped at: finite but for the one whose initial state is not
    assert np.all(np.isfinite(result.q[[0, 1, 3]])) and np.all(np.isfinite(result.v[[0, 1, 3]]))
    assert np.array_equal(result.q[2], np.broadcast_to(q0[2], (60, solo["model"].nq)), equal_nan=True)
    assert result.failures() == {
        1: "rollout 1 stopped at step 17: a non-finite value in its state, efforts or targets, or a quaternion far "
           "from unit length",
        2: "rollout 2 stopped at step 0: a non-finite value in its state, efforts or targets, or a quaternion far "
           "from unit length",
        3: "rollout 3 stopped at step 5: a non-finite value in its state, efforts or targets, or a quaternion far "
           "from unit length"}


def test_open_loop_without_contact_and_semi_implicit_euler_match_the_simulation():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    rng = np.random.default_rng(3)
    q0 = mbs.simulation.initial_configuration(model) + 0.1 * rng.standard_normal((3, model.nq))
    efforts = 5.0 * rng.standard_normal((3, 40, model.nv))
    world = mbs.World(ground=None)
    for integrator in ("rk4", "semi_implicit_euler"):
        result = mbs.rollout(model, q0, None, efforts, world=world, integrator=integrator, threads=2)
        for i in range(3):
            q, v, _ = stepped(model, world, q0[i], np.zeros(model.nv), efforts[i], integrator=integrator)
            assert np.array_equal(result.q[i], q) and np.array_equal(result.v[i], v)
    at_rest = mbs.rollout(model, q0, steps=10, world=world)  # no controls: zero efforts for `steps`
    assert at_rest.q.shape == (3, 10, model.nq) and np.all(at_rest.done)


@pytest.mark.parametrize("arguments, message", [
    (dict(q0=np.zeros((2, 5))), r"q0 must have shape \(N, 7\) for model 'mbs_arm7', got \(2, 5\)"),
    (dict(v0=np.zeros((3, 7))), r"v0 must have shape \(2, 7\) for model 'mbs_arm7' and 2 initial configurations"),
    (dict(efforts=np.zeros((2, 4, 6))), r"efforts must have shape \(N, T, nv\) = \(2, T, 7\) .* got \(2, 4, 6\)"),
    (dict(efforts=np.zeros((2, 4, 7)), position_targets=np.zeros((2, 5, 7))),
     r"efforts and targets must have the same number of steps, got \[4, 5\]"),
    (dict(), "rollout needs the number of steps"),
    (dict(steps=10, stride=3), "stride must be an integer >= 1 that divides the 10 steps, got 3"),
    (dict(steps=0), "steps must be an integer >= 1, got 0"),
    (dict(steps=2, threads=0), "threads must be an integer >= 1, got 0"),
    (dict(steps=2, dt=-1.0), "dt must be a positive finite number"),
    (dict(steps=2, actuators=mbs.Actuators(["nope"], [1.0], [1.0])), "actuators: model 'mbs_arm7' has no joint"),
])
def test_wrong_shapes_and_settings_are_refused_with_what_is_wrong(arguments, message):
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    arguments = dict(dict(q0=np.zeros((2, 7))), **arguments)
    q0 = arguments.pop("q0")
    with pytest.raises(ValueError, match=message):
        mbs.rollout(model, q0, world=mbs.World(ground=None), **arguments)


def test_a_dask_cluster_of_two_worker_processes_gives_the_local_results(solo):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster:
        result = rolled(solo, scheduler=cluster.scheduler_address)
        with distributed.Client(cluster) as client:
            workers = set(client.scheduler_info()["workers"])
    assert len(workers) == 2
    local = rolled(solo, threads=2)
    for name in ("q", "v", "contact_forces", "status", "steps", "unconverged"):
        assert np.array_equal(getattr(result, name), getattr(local, name)), name


def test_an_unreachable_scheduler_is_refused_in_one_line(solo):
    with pytest.raises(ValueError, match="cannot use tcp://127.0.0.1:1 as a Dask scheduler"):
        rolled(solo, scheduler="tcp://127.0.0.1:1")


def test_the_rollouts_call_the_simulations_compiled_step():
    """rollout_kernel calls simulate_kernel, Simulation.step's kernel, by its
    address, the version of the types Simulation.step passes it: one compiled
    step serves both (a second copy inlined in the rollouts compiled the whole
    step again). Counted in a fresh process: the suite's other tests call the
    step in other types."""
    script = textwrap.dedent("""
        import numpy as np
        import mbs_dynamics as mbs
        from helpers import FEET, solo12_standing
        from mbs_dynamics.simulation.rollout import rollout_kernel
        from mbs_dynamics.simulation.stepping import simulate_kernel

        model, stance = solo12_standing()
        world = mbs.World(mbs.Ground(friction=0.8), tuple(mbs.PointContact(foot) for foot in FEET))
        joints = list(model.joint_names[1:])
        actuators = mbs.Actuators(joints, [5.0] * len(joints), [0.1] * len(joints))
        targets = np.zeros((2, 5, model.nv))
        # the step first: the other way round, numba's dispatcher would convert a named tuple of the step's to the
        # plain tuple of a version the rollouts compiled, and hide it (test_warmup types the rollouts' call too)
        mbs.Simulation(model, world, 1e-3, actuators=actuators).step(np.zeros(model.nv))
        mbs.rollout(model, np.tile(stance, (2, 1)), None, np.zeros((2, 5, model.nv)), position_targets=targets,
                    velocity_targets=targets, world=world, dt=1e-3, actuators=actuators, threads=2)
        print(len(simulate_kernel.signatures), len(rollout_kernel.signatures))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).parent, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["1", "1"], done.stdout


def test_rollouts_inside_a_pool_worker_run_there_and_agree(solo):
    """A rollout asked for from one of parallel.py's pool threads (a batch's
    worker) runs its shares in that thread, one after another (waiting on its
    own pool could deadlock), with the same bits."""
    from mbs_dynamics import parallel

    reference = rolled(solo, threads=1)
    result = parallel._workers(1).submit(rolled, solo, threads=3).result(timeout=120)
    assert np.array_equal(result.q, reference.q) and np.array_equal(result.v, reference.v)
