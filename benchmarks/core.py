#!/usr/bin/env python3
"""Speed of the dynamics core against Pinocchio, measured side by side in
one process on the same robots and states (DESIGN.md §6).

    .venv/bin/python benchmarks/core.py [--robots ur5,panda,solo12,talos] [--calls 500]
                                        [--functions mass_matrix,frame_jacobian,...]

--functions times only the per-call rows whose function names start with
one of the given names, and no batches.

Prints, per robot and function, microseconds per call from Python (the best
of several repeats) and the ratio ours / Pinocchio; inverse dynamics also in
each form of the RNEA (rows "inverse_dynamics body", "... spatial",
"... hybrid", each against pin.rnea) and which of them is fastest (the default
of mbs.inverse_dynamics should be); the Jacobian of a frame (an end effector
or a foot) in the body and hybrid forms against Pinocchio's LOCAL and
LOCAL_WORLD_ALIGNED computeFrameJacobian; on the Panda, forward dynamics with
its finger's mimic joint coupled (the CRBA path) against Pinocchio's ABA of
the uncoupled model (its ABA refuses mimic joints); then batches of
1000 inverse and forward dynamics, ours (one batched call) against
Pinocchio's threaded batch (rneaInParallel, abaInParallel over a ModelPool)
on 1, 2, ... threads up to the cores available, and against a Python loop of
Pinocchio's single calls (the load average is printed first: the batches
need idle cores to scale). Ours and
Pinocchio's are timed in alternation, the best of 40 repeats each, so that a
busy machine slows both alike. Goals (issue 32): ratio <= 1.3 on the UR5,
Panda and Solo-12, <= 1.0 on TALOS; the batches ahead of
Pinocchio's threaded batch on the same threads.
"""
import argparse
import importlib.metadata
import os
import sys
import timeit

import numpy as np
import pinocchio as pin

import mbs_dynamics as mbs
from mbs_dynamics.algorithms.rnea import DEFAULT_RNEA_REPRESENTATION, RNEA_REPRESENTATIONS

ROBOTS_DIR = importlib.metadata.distribution("example-robot-data").locate_file(
    "cmeel.prefix/share/example-robot-data/robots")
ROBOTS = {  # name: (URDF, floating base, the frame of the Jacobian rows)
    "ur5": ("ur_description/urdf/ur5_robot.urdf", False, "tool0"),
    "panda": ("panda_description/urdf/panda.urdf", False, "panda_hand"),
    "solo12": ("solo_description/robots/solo12.urdf", True, "FL_FOOT"),
    "talos": ("talos_data/robots/talos_reduced.urdf", True, "gripper_left_base_link"),
}


def per_call_us(ours, theirs, calls: int) -> tuple[float, float]:
    """Microseconds per call of each, timed in alternation (the best of 40 runs of `calls` calls)."""
    ours_s, theirs_s = [], []
    for _ in range(40):
        ours_s.append(timeit.timeit(ours, number=calls))
        theirs_s.append(timeit.timeit(theirs, number=calls))
    return min(ours_s) / calls * 1e6, min(theirs_s) / calls * 1e6


def random_state(model, rng):
    q = model.neutral_configuration()
    for name in model.joint_names:
        i = model.q_index(name)
        if name == "root_joint":
            quaternion = rng.normal(size=4)
            q[i:i + 3], q[i + 3:i + 7] = rng.normal(size=3), quaternion / np.linalg.norm(quaternion)
        else:
            q[i] = rng.uniform(-1, 1)
    return q, rng.normal(size=model.nv), rng.normal(size=model.nv)


def to_pinocchio(model, pin_model, q, v):
    """Pinocchio's q and a velocity-permutation P with ours = P @ pinocchio's."""
    qp = pin.neutral(pin_model)
    P = np.zeros((model.nv, pin_model.nv))
    for name in model.joint_names:
        joint = pin_model.joints[pin_model.getJointId(name)]
        qi, vi = model.q_index(name), model.v_index(name)
        if joint.nq == 2 and joint.nv == 1:
            qp[joint.idx_q:joint.idx_q + 2] = np.cos(q[qi]), np.sin(q[qi])
        else:
            qp[joint.idx_q:joint.idx_q + joint.nq] = q[qi:qi + joint.nq]
        if joint.nv == 6:
            P[vi:vi + 3, joint.idx_v + 3:joint.idx_v + 6] = np.eye(3)
            P[vi + 3:vi + 6, joint.idx_v:joint.idx_v + 3] = np.eye(3)
        else:
            P[vi:vi + joint.nv, joint.idx_v:joint.idx_v + joint.nv] = np.eye(joint.nv)
    return qp, P


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", default=",".join(ROBOTS))
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--functions", default=None,
                        help="only the per-call rows starting with these names (comma-separated), no batches")
    arguments = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"numpy {np.__version__}, pinocchio {pin.__version__}, mbs_dynamics {mbs.__version__}, "
          f"python {sys.version.split()[0]}")
    print(f"{mbs.parallel.available_cores()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'robot':8} {'nv':>3} {'function':28} {'ours us':>9} {'pin us':>8} {'ratio':>6}")
    for name in arguments.robots.split(","):
        benchmark_robot(name, arguments.calls, rng, None if arguments.functions is None
                        else tuple(arguments.functions.split(",")))


def load(name: str):
    """Our model, Pinocchio's model and its data, of the same robot (ROBOTS)."""
    path, floating, _ = ROBOTS[name]
    path = str(ROBOTS_DIR / path)
    model = mbs.Model.from_urdf_file(path, floating_base=floating, mimic="independent")
    pin_model = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
                 else pin.buildModelFromUrdf(path))
    return model, pin_model, pin_model.createData()


def benchmark_robot(name: str, calls: int, rng, functions: tuple[str, ...] | None = None) -> None:
    """The per-call rows of robot `name` (those starting with one of `functions`,
    when given: then no batches) and its batches."""
    model, pin_model, data = load(name)
    frame = ROBOTS[name][2]
    frame_id = pin_model.getFrameId(frame)
    q, v, a = random_state(model, rng)
    qp, P = to_pinocchio(model, pin_model, q, v)
    vp, ap = P.T @ v, P.T @ a

    def rnea():
        return pin.rnea(pin_model, data, qp, vp, ap)

    cases = [("inverse_dynamics", lambda: mbs.inverse_dynamics(model, q, v, a), rnea)] + [
        (f"inverse_dynamics {form}", lambda form=form: mbs.inverse_dynamics(model, q, v, a, representation=form), rnea)
        for form in RNEA_REPRESENTATIONS
    ] + [
        ("forward_dynamics", lambda: mbs.forward_dynamics(model, q, v, a),
         lambda: pin.aba(pin_model, data, qp, vp, ap)),
        ("mass_matrix", lambda: mbs.mass_matrix(model, q), lambda: pin.crba(pin_model, data, qp)),
        ("nonlinear_effects", lambda: mbs.nonlinear_effects(model, q, v),
         lambda: pin.nonLinearEffects(pin_model, data, qp, vp)),
        ("centroidal_momentum", lambda: mbs.centroidal_momentum(model, q, v),
         lambda: pin.computeCentroidalMomentum(pin_model, data, qp, vp)),
        ("centroidal_momentum_matrix", lambda: mbs.centroidal_momentum_matrix(model, q),
         lambda: pin.computeCentroidalMap(pin_model, data, qp)),
        # body: Pinocchio's LOCAL, hybrid: its LOCAL_WORLD_ALIGNED ([v; w] where ours is [w; v])
        ("frame_jacobian body", lambda: mbs.frame_jacobian(model, q, frame, "body"),
         lambda: pin.computeFrameJacobian(pin_model, data, qp, frame_id, pin.LOCAL)),
        ("frame_jacobian hybrid", lambda: mbs.frame_jacobian(model, q, frame, "hybrid"),
         lambda: pin.computeFrameJacobian(pin_model, data, qp, frame_id, pin.LOCAL_WORLD_ALIGNED)),
    ]
    if name == "panda":  # the finger's mimic joint coupled (8 coordinates); Pinocchio's ABA has no mimic joints
        coupled = mbs.Model.from_urdf_file(str(ROBOTS_DIR / ROBOTS[name][0]), mimic="coupled")
        qc, vc = coupled.neutral_configuration(), np.zeros(coupled.nv)
        for joint in coupled.joint_names:
            qc[coupled.q_index(joint)], vc[coupled.v_index(joint)] = q[model.q_index(joint)], v[model.v_index(joint)]
        tc = rng.normal(size=coupled.nv)
        cases.append(("forward_dynamics mimic", lambda: mbs.forward_dynamics(coupled, qc, vc, tc),
                      lambda: pin.aba(pin_model, data, qp, vp, ap)))
    if functions is not None:
        cases = [case for case in cases if case[0].startswith(functions)]
    forms = {}
    for function, ours, theirs in cases:
        ours()
        ours_us, theirs_us = per_call_us(ours, theirs, calls)
        print(f"{name:8} {model.nv:3d} {function:28} {ours_us:9.2f} {theirs_us:8.2f} {ours_us / theirs_us:6.2f}")
        if function.startswith("inverse_dynamics "):
            forms[function.split()[1]] = ours_us
    if functions is not None:
        return
    fastest = min(forms, key=forms.get)
    print(f"{name:8} {model.nv:3d} fastest RNEA form: {fastest} "
          f"(default: {DEFAULT_RNEA_REPRESENTATION}; "
          + ", ".join(f"{form} {us / forms[fastest]:.2f}x" for form, us in forms.items()) + ")")
    benchmark_batches(name, model, pin_model, data, P, rng)


def benchmark_batches(name: str, model, pin_model, data, P, rng, size: int = 1000) -> None:
    """Batches of `size` inverse and forward dynamics: ours against Pinocchio's
    threaded batch on the same threads, 1 to all cores, and its Python loop."""
    states = [random_state(model, rng) for _ in range(size)]
    Q, V, A = (np.array(x) for x in zip(*states, strict=True))
    pin_states = [(to_pinocchio(model, pin_model, s[0], s[1])[0], P.T @ s[1], P.T @ s[2]) for s in states]
    Qp, Vp, Ap = (np.asfortranarray(np.array(x).T) for x in zip(*pin_states, strict=True))  # (n, size) columns
    out = np.empty((pin_model.nv, size), order="F")

    def batch_us(function):
        function()
        return min(timeit.repeat(function, number=3, repeat=5)) / 3 * 1e6

    cases = (("inverse_dynamics", mbs.inverse_dynamics, pin.rneaInParallel, pin.rnea),
             ("forward_dynamics", mbs.forward_dynamics, pin.abaInParallel, pin.aba))
    threads_default = mbs.get_num_threads()
    for function, ours, theirs, theirs_single in cases:
        for threads in range(1, mbs.parallel.available_cores() + 1):
            mbs.set_num_threads(threads)
            pool = pin.ModelPool(pin_model, threads)
            ours_us = batch_us(lambda: ours(model, Q, V, A))
            theirs_us = batch_us(lambda: theirs(threads, pool, Qp, Vp, Ap, out))
            label = f"batch {size} {function}"
            print(f"{name:8} {model.nv:3d} {label:28} {ours_us:9.0f} {theirs_us:8.0f} {ours_us / theirs_us:6.2f}   "
                  f"(us per batch, {threads} thread{'s' if threads > 1 else ''}; Pinocchio: "
                  f"{theirs.__name__})")
        mbs.set_num_threads(threads_default)
        ours_us = batch_us(lambda: ours(model, Q, V, A))
        loop_us = batch_us(lambda: [theirs_single(pin_model, data, *s) for s in pin_states])
        print(f"{name:8} {model.nv:3d} {label:28} {ours_us:9.0f} {loop_us:8.0f} {ours_us / loop_us:6.2f}   "
              f"(us per batch, {threads_default} threads; Pinocchio: a Python loop of {theirs_single.__name__})")

if __name__ == "__main__":
    main()
