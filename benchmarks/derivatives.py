#!/usr/bin/env python3
"""Speed of the derivatives of the dynamics (issue 8) against Pinocchio,
measured side by side in one process on the same robots and states.

    .venv/bin/python benchmarks/derivatives.py [--robots talos,solo12,panda] [--calls 2000]

Prints microseconds per call from Python (the best of seven repeats, ours and
Pinocchio's taking turns, so that a busy machine slows both alike) and the
ratio ours / Pinocchio, after checking that both give the same matrices
(for linearize: its blocks da_dq, da_dv and M^-1).
Goals (issue 32): forward_dynamics_derivatives at most 1.0x
computeABADerivatives on TALOS, linearize at most 1.5x of it.
Then a horizon of 100 states linearised in one batched call (parallel)
against a Python loop of computeABADerivatives. Functions Pinocchio lacks
(the torque rate, the frame jerk, the linearised model) are printed against
the Pinocchio function closest in work.
"""
import argparse
import sys
import timeit

import numpy as np
import pinocchio as pin
from core import load, random_state, to_pinocchio

import mbs_dynamics as mbs

def paired_us(ours, theirs, calls: int, repeats: int = 7) -> tuple[float, float]:
    """Microseconds per call of ours and theirs, the best of `repeats` turns each, taken alternately."""
    best = [float("inf"), float("inf")]
    for _ in range(repeats):
        for k, function in enumerate((ours, theirs)):
            best[k] = min(best[k], timeit.timeit(function, number=calls) / calls * 1e6)
    return best[0], best[1]


FRAMES = {"talos": "left_sole_link", "solo12": "FL_FOOT", "panda": "panda_hand", "ur5": "tool0"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", default="talos,solo12,panda")
    parser.add_argument("--calls", type=int, default=2000)
    arguments = parser.parse_args()
    print(f"numpy {np.__version__}, pinocchio {pin.__version__}, mbs_dynamics {mbs.__version__}, "
          f"python {sys.version.split()[0]}")
    print(f"{'robot':8} {'nv':>3} {'ours':30} {'Pinocchio':26} {'ours us':>8} {'pin us':>8} {'ratio':>6} "
          f"{'max diff':>9}")
    rng = np.random.default_rng(0)
    for name in arguments.robots.split(","):
        benchmark_robot(name, arguments.calls, rng)


def benchmark_robot(name: str, calls: int, rng) -> None:
    model, pin_model, data = load(name)
    q, v, a = random_state(model, rng)
    j = rng.normal(size=model.nv)
    qp, P = to_pinocchio(model, pin_model, q, v)
    vp, ap = P.T @ v, P.T @ a
    frame = FRAMES[name]

    def ours_as_pinocchio(matrices):
        return [P.T @ m @ P for m in matrices]

    def rnea_derivatives():
        return pin.computeRNEADerivatives(pin_model, data, qp, vp, ap)

    def aba_derivatives():
        return pin.computeABADerivatives(pin_model, data, qp, vp, ap)

    def coriolis():
        return [pin.computeCoriolisMatrix(pin_model, data, qp, vp)]

    def linearize_blocks():
        A, B = mbs.linearize(model, q, v, a)
        nv = model.nv
        return A[nv:, :nv], A[nv:, nv:], B[nv:]

    def inverse_derivatives():
        return mbs.inverse_dynamics_derivatives(model, q, v, a)

    def forward_derivatives():
        return mbs.forward_dynamics_derivatives(model, q, v, a)

    def coriolis_matrix():
        return [mbs.coriolis_matrix(model, q, v)]

    # (ours, the call timed, Pinocchio's, its call, ours as Pinocchio's matrices or None: not compared)
    cases = [
        ("inverse_dynamics_derivatives", inverse_derivatives, "computeRNEADerivatives", rnea_derivatives,
         inverse_derivatives),
        ("forward_dynamics_derivatives", forward_derivatives, "computeABADerivatives", aba_derivatives,
         forward_derivatives),
        ("coriolis_matrix", coriolis_matrix, "computeCoriolisMatrix", coriolis, coriolis_matrix),
        ("linearize", lambda: mbs.linearize(model, q, v, a), "computeABADerivatives", aba_derivatives,
         linearize_blocks),
        ("inverse_dynamics_rate", lambda: mbs.inverse_dynamics_rate(model, q, v, a, j),
         "rnea", lambda: pin.rnea(pin_model, data, qp, vp, ap), None),
        ("frame_jerk", lambda: mbs.frame_jerk(model, q, v, a, j, frame, "hybrid"),
         "getFrameClassicalAcceleration",
         lambda: (pin.forwardKinematics(pin_model, data, qp, vp, ap),
                  pin.getFrameClassicalAcceleration(pin_model, data, pin_model.getFrameId(frame),
                                                    pin.LOCAL_WORLD_ALIGNED)), None),
    ]
    for function, ours, pin_function, theirs, ours_matrices in cases:
        difference = ""
        if ours_matrices is not None:
            mine = ours_as_pinocchio(ours_matrices())
            reference = [np.array(m) for m in theirs()]
            difference = f"{max(float(np.abs(x - y).max()) for x, y in zip(mine, reference, strict=True)):9.1e}"
        ours_us, theirs_us = paired_us(ours, theirs, calls)
        print(f"{name:8} {model.nv:3d} {function:30} {pin_function:26} {ours_us:8.2f} {theirs_us:8.2f} "
              f"{ours_us / theirs_us:6.2f} {difference}")
    states = [random_state(model, rng) for _ in range(100)]
    Q, V, U = (np.array(x) for x in zip(*states, strict=True))
    pin_states = [(to_pinocchio(model, pin_model, s[0], s[1])[0], P.T @ s[1], P.T @ s[2]) for s in states]
    ours_us, theirs_us = paired_us(lambda: mbs.linearize(model, Q, V, U),
                                   lambda: [pin.computeABADerivatives(pin_model, data, *s) for s in pin_states],
                                   max(1, calls // 100))
    print(f"{name:8} {model.nv:3d} {'batch 100 linearize':30} {'loop computeABADerivatives':26} {ours_us:8.0f} "
          f"{theirs_us:8.0f} {ours_us / theirs_us:6.2f}")


if __name__ == "__main__":
    main()
