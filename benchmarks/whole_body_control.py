"""One whole-body control cycle (kinematics, dynamics, QP build and DAQP
solve, torques) on Solo-12 (four point feet) and TALOS (two soles), µs per
cycle p50/p99/max over a sequence of perturbed states, beside TSID's own
cycle (computeProblemData + eiquadprog) on the same problem, run in
.venv-tsid (its Pinocchio differs from ours: a separate process, timed there).
The breakdown (p50 of each part): state and dynamics (input checks,
frames_motion, M, h, CoM quantities), assembly (the QP's matrices), QP
(DAQP's update and solve, the torques and the result); the QP's
iterations p50/max.

    .venv/bin/python benchmarks/whole_body_control.py [--cycles N]
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "mbs_dynamics" / "test"))

import test_whole_body_control as wbc  # noqa: E402
from helpers import solo12_standing  # noqa: E402

def timed(controller, states, repeats):
    """(cycle, assembly, QP) times in µs and the QP's iterations of each cycle."""
    parts = {}

    def timing(name, method):
        def timed_method(*args):
            t0 = time.perf_counter()
            out = method(*args)
            parts[name] = time.perf_counter() - t0
            return out
        return timed_method

    controller._assemble_compiled = timing("assembly", controller._assemble_compiled)
    controller._solve = timing("qp", controller._solve)
    times, iterations = [], []
    try:
        for _ in range(repeats):
            for q, v in states:
                t0 = time.perf_counter()
                result = controller.compute(q, v)
                times.append((time.perf_counter() - t0, parts.get("assembly", 0.0), parts.get("qp", 0.0)))
                iterations.append(result.iterations)
    finally:
        del controller._assemble_compiled, controller._solve
    return np.array(times) * 1e6, np.array(iterations)


def main():
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for robot in ("solo12", "talos"):
        model, q0 = solo12_standing() if robot == "solo12" else wbc.talos_standing()
        (wbc.solo_scenario if robot == "solo12" else wbc.talos_scenario).model = model
        q, v = wbc.perturbed(model, q0, rng)
        scenario = (wbc.solo_scenario if robot == "solo12" else wbc.talos_scenario)(q)
        scenario.ours(q, v)  # builds the tasks and contacts, first solve
        states = [wbc.perturbed(model, q0, np.random.default_rng(k), scale=0.005) for k in range(50)]
        parts, iterations = timed(scenario.controller, states, max(1, args.cycles // len(states)))
        ours = parts[:, 0]
        p50, p99 = np.percentile(ours, 50), np.percentile(ours, 99)
        print(f"{robot}: ours p50 {p50:.0f} us, p99 {p99:.0f} us, max {ours.max():.0f} us ({len(ours)} cycles)")
        assembly, qp = np.percentile(parts[:, 1], 50), np.percentile(parts[:, 2], 50)
        state = np.percentile(parts[:, 0] - parts[:, 1] - parts[:, 2], 50)
        print(f"{robot}:   p50 of state and dynamics {state:.0f} us, assembly {assembly:.0f} us, QP {qp:.0f} us; "
              f"QP iterations p50 {np.median(iterations):.0f}, max {iterations.max()}")
        tsid_us = tsid_cycle(scenario, q, v, args.cycles)
        if tsid_us is not None:
            t50, t99 = np.percentile(tsid_us, 50), np.percentile(tsid_us, 99)
            print(f"{robot}: TSID p50 {t50:.0f} us, p99 {t99:.0f} us, max {tsid_us.max():.0f} us; "
                  f"ours / TSID: p50 {p50 / t50:.2f}x, p99 {p99 / t99:.2f}x")


TSID_LOOP = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import tsid_oracle, tsid
problem, cycles = json.load(sys.stdin), int(sys.argv[2])
f, s, q, v, kept = tsid_oracle.build(problem)
times = []
for k in range(cycles):
    t0 = time.perf_counter()
    solution = s.solve(f.computeProblemData(0.0, q, v))
    tau = f.getActuatorForces(solution)
    times.append(time.perf_counter() - t0)
print(json.dumps(times))
"""


def tsid_cycle(scenario, q, v, cycles):
    python = ROOT / ".venv-tsid" / "bin" / "python"
    if not python.exists():
        print("  (no .venv-tsid: scripts/setup_tsid_env.sh makes it; TSID not timed)")
        return None
    captured = {}
    original = wbc.run_tsid
    wbc.run_tsid = lambda problem: captured.setdefault("p", problem) and original(problem)
    try:
        scenario.tsid(q, v)
    finally:
        wbc.run_tsid = original
    done = subprocess.run([str(python), "-c", TSID_LOOP, str(ROOT / "mbs_dynamics" / "test"), str(cycles)],
                          input=json.dumps(captured["p"]), capture_output=True, text=True, timeout=600)
    if done.returncode:
        print("  TSID failed:", done.stderr[-500:])
        return None
    return np.array(json.loads(done.stdout.strip().splitlines()[-1])) * 1e6


if __name__ == "__main__":
    main()
