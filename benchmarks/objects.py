#!/usr/bin/env python3
"""Free objects: microseconds per step of the Panda holding its pose (PD)
beside N boxes resting on the ground, N = 1, 10, 100, ours
(mbs.Simulation.step(tau, steps=N): one compiled call) beside MuJoCo's
mj_step(model, data, nstep=N) (one C call) on the same scene: 0.1 m cubes of
1 kg in a grid 0.3 m apart, friction 1, dt = 1 ms, elliptic cones; no
collision geometry on the arm in either (the boxes meet the ground only).
Each the best of five runs from the same start; and how far the boxes moved.

    .venv/bin/python benchmarks/objects.py [--steps 2000]
"""
import argparse
import os
import timeit

import mujoco
import numpy as np

import mbs_dynamics as mbs
from simulation import PANDA, PANDA_POSE, mujoco_pd, pd_gains

from oracles import mujoco_spec  # noqa: E402  (simulation.py put the tests on the path)

SIZE, MASS, SPACING = 0.1, 1.0, 0.3


def box_urdf():
    inertia = MASS * SIZE ** 2 / 6
    return (f'<robot name="box"><link name="body"><inertial><mass value="{MASS}"/><inertia ixx="{inertia}" '
            f'iyy="{inertia}" izz="{inertia}" ixy="0" ixz="0" iyz="0"/></inertial><collision><geometry>'
            f'<box size="{SIZE} {SIZE} {SIZE}"/></geometry></collision></link></robot>')


def grid(count):
    """The boxes' centres: rows of ten from x = 0.6 m, resting on the ground."""
    return [np.array([0.6 + SPACING * (k % 10), SPACING * (k // 10 - (count - 1) // 20), SIZE / 2])
            for k in range(count)]


def ours(count, steps):
    model = mbs.Model.from_urdf_file(PANDA)
    q0 = mbs.simulation.initial_configuration(model, PANDA_POSE)
    stiffness, damping = pd_gains(model, q0, 20.0, 0)
    objects = tuple(mbs.WorldObject(f"box{k}", box_urdf(), position=p) for k, p in enumerate(grid(count)))
    world = mbs.World(objects=objects, max_collisions=0)
    simulation = mbs.Simulation(model, world, q=q0, actuators=mbs.Actuators(model.joint_names, stiffness, damping))
    simulation.set_targets(positions=q0[:model.nv])
    hold = mbs.gravity_torques(model, q0)

    def run():
        simulation.reset()
        simulation.step(hold, steps=steps)
    run()
    seconds = min(timeit.repeat(run, number=1, repeat=5)) / steps
    moved = max(np.abs(simulation.object_state(f"box{k}")[0][:3] - p).max() for k, p in enumerate(grid(count)))
    return seconds * 1e6, moved, simulation.last.unconverged_steps


def theirs(count, steps):
    model = mbs.Model.from_urdf_file(PANDA)
    q0 = mbs.simulation.initial_configuration(model, PANDA_POSE)
    stiffness, damping = pd_gains(model, q0, 20.0, 0)
    spec = mujoco_spec(PANDA)
    spec.option.timestep = 1e-3
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1], friction=[1, 0.005, 0.0001])
    for k, p in enumerate(grid(count)):
        body = spec.worldbody.add_body(name=f"box{k}", pos=p, ipos=[0, 0, 0], mass=MASS,
                                       inertia=[MASS * SIZE ** 2 / 6] * 3)
        body.add_freejoint()
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[SIZE / 2] * 3, friction=[1, 0.005, 0.0001])
    mj = spec.compile()
    hold = mbs.gravity_torques(model, q0)
    qpos0, applied = mujoco_pd(mj, model, q0, list(model.joint_names), hold, stiffness, damping, 0)
    for k, p in enumerate(grid(count)):
        address = mj.joint(mj.body(f"box{k}").jntadr[0]).qposadr[0]
        qpos0[address:address + 7] = (*p, 1.0, 0.0, 0.0, 0.0)
    data = mujoco.MjData(mj)

    def run():
        mujoco.mj_resetData(mj, data)
        data.qpos[:], data.qfrc_applied[:] = qpos0, applied
        mujoco.mj_step(mj, data, nstep=steps)
    run()
    seconds = min(timeit.repeat(run, number=1, repeat=5)) / steps
    moved = max(np.abs(data.qpos[mj.joint(mj.body(f"box{k}").jntadr[0]).qposadr[0]:][:3] - p).max()
                for k, p in enumerate(grid(count)))
    return seconds * 1e6, moved


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    arguments = parser.parse_args()
    print(f"mujoco {mujoco.__version__}, mbs_dynamics {mbs.__version__}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'boxes':>5} {'ours us':>8} {'mj_step':>8} {'ratio':>6}   {'ours moved':>10} {'mj moved':>9}  unconverged")
    for count in (1, 10, 100):
        ours_us, ours_moved, unconverged = ours(count, arguments.steps)
        their_us, their_moved = theirs(count, arguments.steps)
        print(f"{count:5d} {ours_us:8.1f} {their_us:8.1f} {ours_us / their_us:6.2f}   {ours_moved:10.1e} "
              f"{their_moved:9.1e}  {unconverged}")


if __name__ == "__main__":
    main()
