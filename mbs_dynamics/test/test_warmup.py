"""The set-up's warm-up (mbs_dynamics.warmup), which fills numba's cache so
that no node compiles on first use."""
import fcntl
import hashlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import mbs_dynamics as mbs
import numpy as np
import pytest
from numba import njit, typeof
from numba.core import compiler, dispatcher, ir, typed_passes, types
from numba.core.compiler_machinery import FunctionPass, register_pass
from oracles import robot_path
from mbs_dynamics import warmup
from mbs_dynamics.simulation.stepping import api as stepping_api
from mbs_dynamics.simulation.stepping import integrator, islands, stages


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


def _step_types(*arguments):
    return [typeof(argument) for argument in arguments]


def _step_arguments(simulation):
    """What Simulation.step passes its compiled step (stages.simulate_kernel)."""
    system = simulation.system
    return (system.packed, system.dof_parent, simulation._world, simulation._actuation, simulation._settings,
            simulation._q, simulation._v, tuple(simulation._results), simulation._buffer, *simulation._work)


@pytest.mark.parametrize("points", [(), ("LF_FOOT",)])
def test_contact_step_and_the_simulation_call_the_step_in_one_signature(points):
    """contact_step's set-up (its world, with the joint terms on or off, its
    records, buffer) has the types of Simulation's (which steps with the
    URDF's limits, damping and friction), so that one compiled step serves
    both: a second signature cost the warm-up ~2.5 CPU-minutes, a user's first
    contact_step as long."""
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    contacts = tuple(mbs.PointContact(frame) for frame in points)
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(), contacts))
    simulation_types = _step_types(*_step_arguments(simulation))
    for terms in (False, True):
        mbs.contact_step(model, q, v, v, 1e-3, contacts, mbs.Ground(height=1.0), joint_limits=terms,
                         joint_damping=terms, joint_friction=terms)
        kept = stepping_api._last_step.kept
        results = (*(pool[0] for pool in kept.pools[:4]), stepping_api.NO_COLLISIONS, kept.pools[4][0])
        assert _step_types(*kept.fixed, kept.q_rows[0], kept.v_rows[0], results, kept.buffer, *kept.work) == \
            simulation_types
        # what the set-up's compiled step passes on: the same arrays
        fields = kept.setup._numba_type_.field_dict
        assert [fields[name] for name in ("packed", "dof_parent", "world", "actuation", "settings", "buffer",
                                          "work_floats", "work_ints")] == _step_types(*kept.fixed, kept.buffer,
                                                                                      *kept.work)


def test_the_tasks_that_load_the_step_start_once_the_simulation_has_compiled_it(monkeypatch):
    """--all on two processes: contact_step and the rollouts wait for the
    simulation's task (the longest), which puts the step in the cache, and
    load it (started beside it, each compiled it again)."""
    events = []

    def run_task(name):
        events.append(("start", name))
        if name == "simulation":
            time.sleep(0.2)  # the others would all start meanwhile on the other thread
        events.append(("end", name))
        return name, 0.0, 0.0

    monkeypatch.setattr(warmup, "run_task", run_task)
    names = list(warmup.TASKS)
    with ThreadPoolExecutor(2) as pool:
        completed = [name for name, _, _ in warmup._completed(pool, names)]
    assert sorted(completed) == sorted(names)
    for name, after in warmup.AFTER.items():
        assert events.index(("start", name)) > events.index(("end", after)), (name, after)


def test_a_compile_in_the_warm_up_holds_the_lock_of_its_function_and_signature(tmp_path, monkeypatch):
    """_serialise_compiles: a compile waits for the lock file of its function
    and signature (another process compiling it holds it), then compiles or
    loads; a signature already compiled takes no lock."""
    monkeypatch.setattr(dispatcher.Dispatcher, "compile", dispatcher.Dispatcher.compile)
    warmup._serialise_compiles(str(tmp_path))

    @njit
    def twice(x):
        return 2.0 * x

    key = f"{twice.py_func.__module__}.{twice.py_func.__qualname__}{(typeof(1.5),)}"
    held = open(tmp_path / hashlib.sha256(key.encode()).hexdigest(), "w")
    fcntl.flock(held, fcntl.LOCK_EX)
    results = []
    caller = threading.Thread(target=lambda: results.append(twice(1.5)))
    caller.start()
    caller.join(0.5)
    assert caller.is_alive() and not results  # waiting for the lock
    fcntl.flock(held, fcntl.LOCK_UN)
    caller.join()
    held.close()
    assert results == [3.0]
    assert twice(2.5) == 5.0 and len(list(tmp_path.iterdir())) == 1


@register_pass(mutates_CFG=False, analysis_only=True)
class _StopAfterTyping(FunctionPass):
    _name = "mbs_stop_after_typing"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state):
        raise compiler._EarlyPipelineCompletion((state.typemap, state.calltypes))


class _TypingOnly(compiler.CompilerBase):
    """numba's front end and type inference (its inlining included), no lowering."""

    def define_pipelines(self):
        passes = compiler.DefaultPassBuilder.define_untyped_pipeline(self.state)
        passes.add_pass(typed_passes.NopythonTypeInference, "type inference")
        passes.add_pass(_StopAfterTyping, "stop after typing")
        passes.finalize()
        return [passes]


def _typed(kernel, arguments):
    """(typemap, calltypes) of `kernel` called with `arguments`: its type inference alone (its callees compiled or
    loaded from the cache on the way), not its lowering."""
    flags = compiler.Flags()
    kernel.targetdescr.options.parse_as_flags(flags, kernel.targetoptions)
    typemap, calltypes = compiler.compile_extra(
        kernel.targetdescr.typing_context, kernel.targetdescr.target_context, kernel.py_func,
        tuple(typeof(argument) for argument in arguments), None, flags, {}, pipeline_class=_TypingOnly)
    return typemap, calltypes


def _callee_types(kernel, arguments, callees):
    """{callee: the set of argument types `kernel` calls it with}, where `kernel` is called with `arguments`."""
    typemap, calltypes = _typed(kernel, arguments)
    found = {callee: set() for callee in callees}
    for expression, signature in calltypes.items():
        if isinstance(expression, ir.Expr) and expression.op == "call":
            function = typemap[expression.func.name]
            if isinstance(function, types.Dispatcher) and function.dispatcher in found:
                found[function.dispatcher].add(tuple(signature.args))
    return found


def test_the_step_calls_the_aba_and_the_rnea_in_the_types_the_nodes_call_them_in(monkeypatch):
    """The step's rnea_kernel and its smooth integrator's aba_kernel take q, v and tau (the RNEA's a) read-only,
    as the nodes' forward dynamics and nonlinear effects pass them (inputs.VECTOR, their ExactKernels' types):
    one compiled version of each in the warm-up, not a second for writable arrays (about 16 CPU-s)."""
    from mbs_dynamics.algorithms.aba import aba_kernel
    from mbs_dynamics.algorithms.rnea import rnea_kernel
    from mbs_dynamics.inputs import VECTOR

    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    smooth_step, calls = integrator.smooth_step, []
    monkeypatch.setattr(integrator, "smooth_step",
                        lambda *arguments: calls.append(arguments) or smooth_step(*arguments))
    warmup.step_callees(model, "LF_FOOT")  # (in the step's own types: the test above)
    aba_types = _callee_types(smooth_step, calls[0], (aba_kernel,))[aba_kernel]
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(), (mbs.PointContact("LF_FOOT"),)), 1e-3)
    rnea_types = _callee_types(stages.simulate_kernel, _step_arguments(simulation), (rnea_kernel,))[rnea_kernel]
    for name, called_types in (("aba_kernel", aba_types), ("rnea_kernel", rnea_types)):
        assert len(called_types) == 1, name
        assert next(iter(called_types))[1:4] == (VECTOR, VECTOR, VECTOR), name


def test_step_callees_compiles_the_callees_in_the_signatures_the_step_calls_them_in(monkeypatch):
    """The warm-up's step_callees compiles the step's Coulomb solver and smooth integrator on the other process,
    for the step to load: in other types than the step's (a change of the step's views, records or model),
    it compiles a version nothing uses (about 20 CPU-s of the first set-up) and the step compiles its own."""
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    called = {callee: set() for callee in (islands.solve_islands, integrator.smooth_step)}
    for module, callee in ((islands, islands.solve_islands), (integrator, integrator.smooth_step)):
        monkeypatch.setattr(module, callee.__name__, lambda *arguments, callee=callee: called[callee].add(
            tuple(typeof(argument) for argument in arguments)) or callee(*arguments))
    warmup.step_callees(model, "LF_FOOT")
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(), (mbs.PointContact("LF_FOOT"),)), 1e-3)
    in_the_step = _callee_types(stages.simulate_kernel, _step_arguments(simulation), called)
    for callee, signatures in called.items():
        assert len(signatures) == 1 and signatures == in_the_step[callee], callee.__name__


def test_the_rollouts_call_the_step_in_the_types_the_simulation_calls_it_in(monkeypatch):
    """The warm-up's rollouts task runs after the simulation's (warmup.AFTER) to use the step it compiled:
    rollout_kernel calls simulate_kernel by its address (compiled_calls.call_native), which must be the version of
    Simulation.step's types, passed exactly those, or a second step compiles (a named tuple of the world's passed on
    as a plain tuple did: the rollouts' task 13 -> 66 CPU-s of the first set-up). Typed: the call in the kernel,
    and the version the rollouts resolve in Python."""
    from mbs_dynamics.compiled_calls import call_native, native_function
    from mbs_dynamics.simulation import rollout

    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    calls, rollout_kernel = [], rollout.rollout_kernel
    monkeypatch.setattr(rollout, "rollout_kernel", lambda *arguments: calls.append(arguments)
                        or rollout_kernel(*arguments))
    warmup.rollouts(model, "LF_FOOT")
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(), (mbs.PointContact("LF_FOOT"),)), 1e-3)
    in_the_simulation = tuple(_step_types(*_step_arguments(simulation)))
    typemap, calltypes = _typed(rollout_kernel, calls[0])
    native_calls = [tuple(signature.args[1]) for expression, signature in calltypes.items()
                    if isinstance(expression, ir.Expr) and expression.op == "call"
                    and getattr(typemap[expression.func.name], "typing_key", None) is call_native]
    assert native_calls == [in_the_simulation]
    # the version the rollouts resolved in Python (its address and types' hash) is Simulation.step's
    assert calls[0][0] == native_function(stages.simulate_kernel, _step_arguments(simulation))
