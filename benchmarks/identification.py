#!/usr/bin/env python3
"""Speed of identification (issue 19), in one process:

1. the joint torque regressor per call, ours against Pinocchio's
   computeJointTorqueRegressor, on the same robots and states, and a batch of
   1000 (ours: one batched call; Pinocchio: a Python loop);
2. identifying a 6-7 DoF arm from 60 s of 500 Hz data, reading the bag
   included: a synthetic run (a smooth trajectory; torques from a perturbed
   robot's regressor, friction and armature included) written as an MCAP bag,
   then `mbs_dynamics_identify` on it, timed as the command a user runs
   (a fresh process: imports and compiled-kernel loading included) and as
   identify() inside this process, and identify(robust=True) (goal: at most
   1.5 times the plain fit). Goal: < 20 s on two cores;
3. identifying TALOS on a floating base from 60 s at 500 Hz, joint states and
   odometry in an MCAP bag, as the command (goal: under a minute).

    .venv/bin/python benchmarks/identification.py [--robots ur5,panda,talos] [--arms ur5,panda,arm7] [--calls 2000]
"""
import argparse
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path

import numpy as np
import pinocchio as pin
from scipy.spatial.transform import Rotation
from core import ROBOTS, ROBOTS_DIR, load, per_call_us, random_state, to_pinocchio
from mbs_dynamics.identification import data
from mbs_dynamics.identification.identify import identify
from mbs_dynamics.identification.parameters import ParameterLayout

import mbs_dynamics as mbs


def regressor_rows(names, calls: int, rng) -> None:
    print(f"{'robot':8} {'nv':>3} {'function':30} {'ours us':>9} {'pin us':>8} {'ratio':>6}")
    for name in names:
        regressor_row(name, calls, rng)


def regressor_row(name: str, calls: int, rng) -> None:
    model, pin_model, pin_data = load(name)
    q, v, a = random_state(model, rng)
    qp, P = to_pinocchio(model, pin_model, q, v)
    vp, ap = P.T @ v, P.T @ a
    ours = per_call_us(lambda: mbs.joint_torque_regressor(model, q, v, a), calls)
    theirs = per_call_us(lambda: pin.computeJointTorqueRegressor(pin_model, pin_data, qp, vp, ap), calls)
    print(f"{name:8} {model.nv:3d} {'joint_torque_regressor':30} {ours:9.2f} {theirs:8.2f} {ours / theirs:6.2f}")
    states = [random_state(model, rng) for _ in range(1000)]
    Q, V, A = (np.array(x) for x in zip(*states, strict=True))
    pin_states = [(to_pinocchio(model, pin_model, s[0], s[1])[0], P.T @ s[1], P.T @ s[2]) for s in states]
    ours_ms = min(timeit.repeat(lambda: mbs.joint_torque_regressor(model, Q, V, A), number=3, repeat=3)) / 3e-3
    theirs_ms = min(timeit.repeat(lambda: [pin.computeJointTorqueRegressor(pin_model, pin_data, *s)
                                           for s in pin_states], number=3, repeat=3)) / 3e-3
    print(f"{name:8} {model.nv:3d} {'batch 1000 regressors (ms)':30} {ours_ms:9.2f} {theirs_ms:8.2f} "
          f"{ours_ms / theirs_ms:6.2f}   (Pinocchio: Python loop)")


def synthetic_run(model, duration=60.0, rate=500.0, seed=0) -> data.Recording:
    """A sum of sines per joint (periods 10 s / l, l = 1..5) and the torques of the
    model's inertias scaled by 0.6-1.4 with friction 0.3-1.5, damping 0.2-1.5 and
    armature 0.05-0.3 (regressor times parameters)."""
    rng = np.random.default_rng(seed)
    layout = ParameterLayout(model)
    p = layout.nominal()
    p[:layout.inertial_count] *= np.repeat(rng.uniform(0.6, 1.4, model.nbodies), 10)
    for name, low, high in (("friction", 0.3, 1.5), ("damping", 0.2, 1.5), ("armature", 0.05, 0.3)):
        p[layout.joint_columns(name)] = rng.uniform(low, high, len(layout.actuated_joints))
    t = np.arange(0.0, duration, 1.0 / rate)
    w = 2 * np.pi / 10.0 * np.arange(1, 6)
    middle = 0.5 * (np.clip(model.lower_position_limit, -np.pi, np.pi) + np.clip(model.upper_position_limit, -np.pi,
                                                                                   np.pi))
    half_range = 0.5 * np.minimum(np.clip(model.upper_position_limit, -np.pi, np.pi)
                                  - np.clip(model.lower_position_limit, -np.pi, np.pi), 2.0)
    amplitude = rng.uniform(-1, 1, (model.nv, 5)) * (0.4 * half_range)[:, None] / np.arange(1, 6)
    phase = rng.uniform(0, 2 * np.pi, (model.nv, 5))
    angle = w * t[:, None, None] + phase
    q = middle + np.sum(amplitude * np.sin(angle), axis=-1)
    v = np.sum(amplitude * w * np.cos(angle), axis=-1)
    a = -np.sum(amplitude * w**2 * np.sin(angle), axis=-1)
    effort = layout.regressor(q, v, a) @ p
    return data.Recording(tuple(model.joint_names), t, position=q, velocity=v, effort=effort)


# arm: (URDF, joints left out of the identification)
ARMS = {"ur5": (str(ROBOTS_DIR / ROBOTS["ur5"][0]), ()),
        "panda": (str(ROBOTS_DIR / ROBOTS["panda"][0]), ("panda_finger_joint1",)),
        "arm7": (mbs.bundled_robot("arm7"), ())}


def identification_rows(arms) -> None:
    print(f"\n{'arm':8} {'nv':>3} {'samples':>8} {'bag MB':>7} {'command s':>10} {'identify() s':>13} "
          f"{'--robust s':>11} {'ratio':>6}")
    for name in arms:
        urdf, excluded = ARMS[name]
        model = mbs.Model.from_urdf_file(urdf, mimic="independent")
        with tempfile.TemporaryDirectory() as directory:
            bag = data.write_bag(Path(directory) / "run", synthetic_run(model), storage="mcap")
            size = sum(f.stat().st_size for f in Path(bag).rglob("*") if f.is_file()) / 1e6
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "mbs_dynamics.identification.cli", str(bag), "--urdf", urdf,
                            "--output", str(Path(directory) / "identified.urdf"), "--quiet",
                            "--exclude-joints", ",".join(excluded)], check=True,
                           stdout=subprocess.DEVNULL)
            command = time.perf_counter() - started
            xml = Path(urdf).read_text()
            times = {}
            for robust in (False, True, False, True):  # the best of two each, interleaved
                started = time.perf_counter()
                result = identify([bag], xml, progress=False, excluded_joints=excluded, robust=robust)
                times[robust] = min(times.get(robust, np.inf), time.perf_counter() - started)
        print(f"{name:8} {model.nv:3d} {result.samples:8d} {size:7.1f} {command:10.2f} {times[False]:13.2f} "
              f"{times[True]:11.2f} {times[True] / times[False]:6.2f}")


def floating_base_run(model, legs_model, duration=60.0, rate=500.0, seed=0) -> data.Recording:
    """synthetic_run's joint motion on a base moving and turning along sines,
    with the base's odometry, and the torques of the model's inertias scaled
    by 0.6-1.4 with friction and damping."""
    t = np.arange(0.0, duration, 1.0 / rate)
    joints = synthetic_run(legs_model, duration, rate, seed)  # the joints' motion, on the fixed-base model
    assert joints.joint_names == tuple(name for name in model.joint_names if name != "root_joint")
    layout = ParameterLayout(model, ("friction", "damping"))
    rng = np.random.default_rng(seed)
    p = layout.nominal()
    p[:layout.inertial_count] *= np.repeat(rng.uniform(0.6, 1.4, model.nbodies), 10)
    for name, low, high in (("friction", 0.3, 1.5), ("damping", 0.2, 1.5)):
        p[layout.joint_columns(name)] = rng.uniform(low, high, len(layout.actuated_joints))
    position = np.column_stack([0.1 * np.sin(t), 0.05 * np.cos(2 * t), 1.0 + 0 * t])
    velocity = np.column_stack([0.1 * np.cos(t), -0.1 * np.sin(2 * t), 0 * t])
    acceleration = np.column_stack([-0.1 * np.sin(t), -0.2 * np.cos(2 * t), 0 * t])
    # roll, pitch and yaw along sines; the body-frame angular velocity from consecutive orientations
    rotation = Rotation.from_euler("xyz", np.column_stack([0.2 * np.sin(0.5 * t), 0.15 * np.sin(0.8 * t + 1.0),
                                                           0.5 * np.sin(0.7 * t)]))
    step = (rotation[:-1].inv() * rotation[1:]).as_rotvec() * rate
    omega = np.vstack([step[:1], 0.5 * (step[1:] + step[:-1]), step[-1:]])
    R_T = rotation.inv().as_matrix()
    linear = np.einsum("nij,nj->ni", R_T, velocity)
    linear_rate = np.einsum("nij,nj->ni", R_T, acceleration) - np.cross(omega, linear)
    quaternion = rotation.as_quat()  # x, y, z, w
    q = np.column_stack([position, quaternion, joints.position])
    v = np.column_stack([omega, linear, joints.velocity])
    a = np.column_stack([np.gradient(omega, t, axis=0), linear_rate, np.gradient(joints.velocity, t, axis=0)])
    effort = layout.regressor(q, v, a) @ p
    names = tuple(name for name in model.joint_names if name != "root_joint")
    return data.Recording(names, t, position=q[:, 7:], velocity=v[:, 6:], effort=effort[:, 6:],
                          base_position=position, base_orientation=quaternion, base_linear_velocity=linear,
                          base_angular_velocity=omega)


def floating_base_row(name: str) -> None:
    """A humanoid from 60 s at 500 Hz, joint states and odometry in an MCAP bag
    (goal: under a minute on two cores)."""
    urdf = str(ROBOTS_DIR / ROBOTS[name][0])
    model = mbs.Model.from_urdf_file(urdf, floating_base=True)
    with tempfile.TemporaryDirectory() as directory:
        bag = data.write_bag(Path(directory) / "run", floating_base_run(model, mbs.Model.from_urdf_file(urdf)),
                             storage="mcap",
                             odometry_topic="odom")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mbs_dynamics.identification.cli", str(bag), "--urdf", urdf,
                        "--floating-base", "--joint-parameters", "friction,damping", "--output",
                        str(Path(directory) / "identified.urdf"), "--quiet"], check=True, stdout=subprocess.DEVNULL)
        command = time.perf_counter() - started
    layout = ParameterLayout(model, ("friction", "damping"))
    print(f"\n{name} floating base: nv {model.nv}, {layout.size} parameters, 60 s at 500 Hz with odometry: "
          f"mbs_dynamics_identify {command:.1f} s (goal < 60 s)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", default="ur5,panda,talos")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--floating", default="talos", help="floating-base robots to identify ('' for none)")
    arguments = parser.parse_args()
    print(f"numpy {np.__version__}, pinocchio {pin.__version__}, mbs_dynamics {mbs.__version__}, "
          f"python {sys.version.split()[0]}")
    regressor_rows(arguments.robots.split(","), arguments.calls, np.random.default_rng(0))
    identification_rows(arguments.arms.split(","))
    for name in filter(None, arguments.floating.split(",")):
        floating_base_row(name)


if __name__ == "__main__":
    main()
