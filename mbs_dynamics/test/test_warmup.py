"""The set-up's warm-up (mbs_dynamics.warmup), which fills numba's cache so
that no node compiles on first use."""
import mbs_dynamics as mbs
import numpy as np
from oracles import robot_path
from mbs_dynamics import warmup
from mbs_dynamics.simulation.stepping import simulate_kernel


def test_every_task_runs():
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    for task in warmup.NODE_TASKS + warmup.OTHER_TASKS:
        task(model, "LF_FOOT")
    assert set(warmup.TASKS) == {task.__name__ for task in warmup.NODE_TASKS + warmup.OTHER_TASKS}


def test_a_node_preloads_at_its_root_link_and_leaves_out_dense_tasks_of_a_large_model(monkeypatch):
    """What the inverse dynamics node and the dynamics server call before they serve: a fixed base too, and the
    Panda's coupled mimic finger (which has no M^-1 of the ABA: its server refused to start)."""
    panda = mbs.Model.from_urdf_file(robot_path("panda"))
    warmup.preload(panda, warmup.NODE_TASKS)
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    called = []
    tasks = [lambda m, f, task=task: called.append((task.__name__, f)) or task(m, f) for task in warmup.NODE_TASKS]
    monkeypatch.setattr(warmup, "DENSE_TASKS", tuple(tasks[k] for k, task in enumerate(warmup.NODE_TASKS)
                                                     if task in warmup.DENSE_TASKS))
    warmup.preload(model, tasks)
    assert called == [(task.__name__, model.description.root) for task in warmup.NODE_TASKS]
    called.clear()
    monkeypatch.setattr(warmup, "DENSE_PRELOAD_DOF", model.nv - 1)
    warmup.preload(model, tasks)
    assert [name for name, _ in called] == [task.__name__ for task in warmup.NODE_TASKS
                                           if task not in (warmup.mass_matrix, warmup.contact_forward,
                                                           warmup.contact_inverse)]


def test_the_warm_up_runs_in_worker_processes():
    assert warmup.warm_up(jobs=2) > 0


def test_the_step_compiles_once_with_the_joint_terms_on_or_off():
    """The simulator steps with the URDF's damping and friction (read-only
    model arrays); contact_step's defaults leave them out: one signature for
    both, or the simulator's first step compiled for seconds."""
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    mbs.contact_step(model, q, v, v, 1e-3)
    signatures = set(simulate_kernel.signatures)
    mbs.contact_step(model, q, v, v, 1e-3, joint_limits=True, joint_damping=True, joint_friction=True)
    mbs.Simulation(model).step(v)
    assert set(simulate_kernel.signatures) == signatures
