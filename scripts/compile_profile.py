"""Where the warm-up's compile time goes, in CPU seconds (the machine may be
shared: wall-clock is noise). Runs warm-up tasks (mbs_dynamics.warmup.TASKS)
in an empty numba cache and prints, per compiled function, its compile's CPU
seconds without (excl) and with (incl) the functions it compiled on the way,
and the numba passes of its own; then, per LLVM code library, the function
passes (each function optimised when lowered), the module passes (after its
callees' modules are linked in, which are optimised again there) and the
machine code generation.

    .venv/bin/python scripts/compile_profile.py simulation
    .venv/bin/python scripts/compile_profile.py +collision_queries simulation

A task named +NAME runs first and is not counted (the warm-up's other worker
compiles it). NUMBA_LLVM_PASS_TIMINGS=1 adds the step kernel's ten slowest
LLVM passes of each kind. Wraps numba's event hooks and codegen methods (numba
as pinned in constraints.txt).
"""
from __future__ import annotations

import collections
import os
import sys
import tempfile
import time

os.environ.setdefault("NUMBA_CACHE_DIR", tempfile.mkdtemp(prefix="mbs_compile_profile_"))

import numba.core.event as numba_event  # noqa: E402
from numba.core import codegen  # noqa: E402

# --- per compiled function: its compile's CPU-s, and its numba passes -----------------------------------------


class _Compile:
    def __init__(self, name):
        self.name, self.start, self.nested = name, time.process_time(), 0.0
        self.passes, self.open_passes = collections.Counter(), []


_compiling: list[_Compile] = []
compiles: list[tuple[str, float, float, collections.Counter]] = []  # name, inclusive, exclusive, passes


class _Listener(numba_event.Listener):
    def on_start(self, event):
        if event.kind == "numba:compile":
            function = event.data["dispatcher"].py_func
            _compiling.append(_Compile(f"{function.__module__.rsplit('.', 1)[-1]}.{function.__qualname__}"))
        elif _compiling:
            frame = _compiling[-1]
            frame.open_passes.append((event.data["name"].split(" ")[0], time.process_time(), frame.nested))

    def on_end(self, event):
        if event.kind == "numba:compile":
            frame = _compiling.pop()
            inclusive = time.process_time() - frame.start
            compiles.append((frame.name, inclusive, inclusive - frame.nested, frame.passes))
            if _compiling:
                _compiling[-1].nested += inclusive
        elif _compiling and _compiling[-1].open_passes:
            frame = _compiling[-1]
            name, start, nested = frame.open_passes.pop()
            frame.passes[name] += time.process_time() - start - (frame.nested - nested)


_listener = _Listener()
numba_event.register("numba:compile", _listener)
numba_event.register("numba:run_pass", _listener)

# --- per LLVM code library: function passes, module passes, code generation -----------------------------------

libraries: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def _timed(cls, method, field):
    original = getattr(cls, method)

    def timed(self, *arguments):
        start = time.process_time()
        result = original(self, *arguments)
        libraries[self.name][field] += time.process_time() - start
        return result

    setattr(cls, method, timed)


_timed(codegen.CPUCodeLibrary, "_optimize_functions", "function passes")
_timed(codegen.CPUCodeLibrary, "_optimize_final_module", "module passes")
_timed(codegen.JITCodeLibrary, "_finalize_specific", "machine code")


def main() -> None:
    import mbs_dynamics as mbs
    from mbs_dynamics import warmup
    from mbs_dynamics.simulation.stepping.stages import simulate_kernel

    names = sys.argv[1:] or ["simulation"]
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    for name in names:
        if name.startswith("+"):
            warmup.TASKS[name[1:]](model, "LF_FOOT")
    compiles.clear()
    libraries.clear()
    start = time.process_time()
    for name in names:
        if not name.startswith("+"):
            task_start = time.process_time()
            warmup.TASKS[name](model, "LF_FOOT")
            print(f"task {name}: {time.process_time() - task_start:.1f} CPU-s")
    print(f"all counted tasks: {time.process_time() - start:.1f} CPU-s")

    print("\ncompiles, slowest first (CPU-s): excl incl function [its slowest numba passes]")
    for name, inclusive, exclusive, passes in sorted(compiles, key=lambda c: -c[2])[:20]:
        slowest = ", ".join(f"{p} {t:.1f}" for p, t in passes.most_common(4) if t >= 0.2)
        print(f"{exclusive:7.1f} {inclusive:7.1f}  {name}  [{slowest}]")

    fields = ("function passes", "module passes", "machine code")
    totals = collections.Counter()
    for counts in libraries.values():
        totals.update(counts)
    print("\nLLVM, all libraries (CPU-s): " + ", ".join(f"{field} {totals[field]:.1f}" for field in fields))
    for name, counts in sorted(libraries.items(), key=lambda item: -sum(item[1].values()))[:10]:
        print(f"  {name[:50]:50s} " + " ".join(f"{field} {counts[field]:5.1f}" for field in fields))

    if os.environ.get("NUMBA_LLVM_PASS_TIMINGS") == "1":
        for overload in simulate_kernel.overloads.values():
            kinds = collections.defaultdict(collections.Counter)
            for record in overload.library.recorded_timings:
                kind = "function passes" if record.name.startswith("Function passes") else record.name
                for timing in record.timings.list_records():
                    if timing.pass_name != "Total":
                        kinds[kind][timing.pass_name.split(" #")[0]] += timing.user_time
            for kind, passes in kinds.items():
                print(f"\nsimulate_kernel, {kind}, slowest LLVM passes (user s): "
                      + ", ".join(f"{p} {t:.1f}" for p, t in passes.most_common(10)))


if __name__ == "__main__":
    main()
