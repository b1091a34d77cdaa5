#!/usr/bin/env python3
"""Speed of contact dynamics, measured in one process beside Pinocchio and
MuJoCo on the same robots and states.

    .venv/bin/python benchmarks/contact.py [--calls 1000] [--steps 2000]

1. contact_forward_dynamics per call, for each method: Solo-12 on its four
   point feet, TALOS on its two soles (frame contacts). Beside it, Pinocchio's
   KKT forwardDynamics with the same constraint rows (its frame Jacobians and
   drifts computed in the same call); the ratio, ours (kkt, the default) /
   Pinocchio's.
2. One simulation step with frictional ground contact (exact cones), one
   step per call from a Python loop: our contact_step against MuJoCo's
   mj_step (elliptic cones, Newton solver, its defaults otherwise), the robot
   standing on the same contact points under the same feedforward torques
   and joint PD: Solo-12 on four feet, TALOS on the four corners of each
   sole. Both loops compute the PD law in Python and hand the torques to the
   step (MuJoCo: qfrc_applied); the `springs` column is MuJoCo with the PD
   as its own joint springs and dampers instead (no Python in its loop but
   mj_step). MuJoCo loads the URDF itself; its collision geometry is
   replaced by small spheres at the contact points and a ground plane.

Times are the calling thread's CPU time (time.thread_time), the best of
several repeats: on a busy machine, wall-clock time also counts the time
other processes hold the core, and moves the ratios by tens of per cent.
"""
import argparse
import importlib.metadata
import sys
import time
import timeit
from pathlib import Path

import mujoco
import numpy as np
import pinocchio as pin

import mbs_dynamics as mbs
from core import to_pinocchio  # benchmarks/core.py

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mbs_dynamics" / "test"))
from oracles import mujoco_spec  # noqa: E402  (the tests' MuJoCo import of a URDF)

ROBOTS_DIR = importlib.metadata.distribution("example-robot-data").locate_file(
    "cmeel.prefix/share/example-robot-data/robots")
SOLO12 = str(ROBOTS_DIR / "solo_description/robots/solo12.urdf")
TALOS = str(ROBOTS_DIR / "talos_data/robots/talos_reduced.urdf")
FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")
SOLES = ("left_sole_link", "right_sole_link")
SOLE_CORNERS = [(x, y, 0.0) for x in (-0.1, 0.1) for y in (-0.065, 0.065)]
DT = 1e-3
FRICTION = 1.0
SPHERE = 1e-3  # radius of MuJoCo's contact spheres
# The calling thread's CPU time: what a call costs, without the time other
# processes of a busy machine hold its core (each side is one thread).
CLOCK = time.thread_time


def per_call_us(function, calls: int) -> float:
    return min(timeit.repeat(function, number=calls, repeat=5, timer=CLOCK)) / calls * 1e6


def standing(model, points):
    """The neutral joint angles (Solo-12: its SRDF straight_standing legs), the
    lowest contact point on the ground, at rest."""
    q = model.neutral_configuration()
    if "FL_HFE" in model.joint_names:
        for leg, hfe in (("FL", 0.8), ("FR", 0.8), ("HL", -0.8), ("HR", -0.8)):
            q[model.q_index(f"{leg}_HFE")], q[model.q_index(f"{leg}_KFE")] = hfe, -2 * hfe
    heights = [(mbs.frame_pose(model, q, p.frame) @ np.r_[p.point, 1.0])[2] for p in points]
    q[2] -= min(heights)
    return q


def pinocchio_contact_forward_dynamics(path, model, q, v, tau, contacts):
    """A closure timing Pinocchio's KKT forward dynamics with its own constraint
    rows, and the map P from its accelerations to ours (a = P a_pin)."""
    pin_model = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())
    data = pin_model.createData()
    qp, P = to_pinocchio(model, pin_model, q, v)
    vp, taup = P.T @ v, P.T @ tau
    frames = [pin_model.getFrameId(c.frame) for c in contacts]
    point = isinstance(contacts[0], mbs.PointContact)
    reference = pin.LOCAL_WORLD_ALIGNED if point else pin.LOCAL
    zero = np.zeros(pin_model.nv)

    def call():
        pin.computeJointJacobians(pin_model, data, qp)
        pin.forwardKinematics(pin_model, data, qp, vp, zero)
        pin.updateFramePlacements(pin_model, data)
        rows, drift = [], []
        for frame in frames:
            J = pin.getFrameJacobian(pin_model, data, frame, reference)
            if point:
                rows.append(J[:3])
                drift.append(pin.getFrameClassicalAcceleration(pin_model, data, frame, reference).linear)
            else:
                rows.append(J)
                drift.append(pin.getFrameAcceleration(pin_model, data, frame, reference).vector)
        return pin.forwardDynamics(pin_model, data, qp, vp, taup, np.vstack(rows), np.concatenate(drift))

    return call, P


def contact_forward_dynamics_row(name, path, contacts, label, calls):
    model = mbs.Model.from_urdf_file(path, floating_base=True)
    q = standing(model, [mbs.PointContact(c.frame) for c in contacts])
    rng = np.random.default_rng(1)
    v, tau = 0.1 * rng.normal(size=model.nv), rng.normal(size=model.nv)
    ours = [per_call_us(lambda m=method: mbs.contact_forward_dynamics(model, q, v, tau, contacts, m), calls)
            for method in ("kkt", "schur", "nullspace")]
    pin_call, P = pinocchio_contact_forward_dynamics(path, model, q, v, tau, contacts)
    agreement = np.abs(P @ pin_call() - mbs.contact_forward_dynamics(model, q, v, tau, contacts)[0]).max()
    theirs = per_call_us(pin_call, calls)
    print(f"{name:8} {model.nv:3d} {label:18} {ours[0]:8.1f} {ours[1]:8.1f} {ours[2]:9.1f} {theirs:9.1f} "
          f"{ours[0] / theirs:6.2f}   (max |a - a_pin| = {agreement:.1e})")


def contact_forward_dynamics_table(calls):
    print("contact_forward_dynamics, us per call (Pinocchio: its legacy KKT forwardDynamics, with its frame "
          "Jacobians and drifts)")
    print(f"{'robot':8} {'nv':>3} {'contacts':18} {'kkt':>8} {'schur':>8} {'nullspace':>9} {'pinocchio':>9} "
          f"{'ratio':>6}")
    contact_forward_dynamics_row("solo12", SOLO12, [mbs.PointContact(f) for f in FEET], "4 points", calls)
    contact_forward_dynamics_row("talos", TALOS, [mbs.FrameContact(s) for s in SOLES], "2 sole frames", calls)


def mujoco_model(path, points):
    """MuJoCo's model of the URDF with a free base, its own collision geometry
    replaced by spheres at `points`, on a ground plane."""
    spec = mujoco_spec(path)
    spec.worldbody.first_body().add_freejoint()
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1], friction=[FRICTION, 0, 0])
    for point in points:
        spec.body(point.frame).add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[SPHERE, 0, 0],
                                        pos=list(point.point), friction=[FRICTION, 0, 0], condim=3)
    spec.option.timestep = DT
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    return spec.compile()


def simulation_row(name, path, points, steps):
    """Both simulators hold the robot with the same feedforward torques (contact
    inverse dynamics at rest) and joint PD (MuJoCo: joint springs and damping),
    each joint critically damped at 5 Hz for its own inertia M_ii."""
    model = mbs.Model.from_urdf_file(path, floating_base=True)
    q0 = standing(model, points)
    zero = np.zeros(model.nv)
    feedforward = mbs.contact_inverse_dynamics(model, q0, zero, zero, points, friction=FRICTION)[0]
    omega = 2 * np.pi * 5.0
    inertia = np.diag(mbs.mass_matrix(model, q0))[6:]
    stiffness, damping = omega**2 * inertia, 2 * omega * inertia
    ground = mbs.Ground(friction=FRICTION)
    sweeps, residuals = [], []

    def run(record=False):
        q, v, warm = q0, zero, None
        for _ in range(steps):
            tau = feedforward.copy()
            tau[6:] -= stiffness * (q[7:] - q0[7:]) + damping * v[6:]
            result = mbs.contact_step(model, q, v, tau, DT, points, ground, warm_start=warm)
            q, v = result
            warm = result.impulses
            if record:
                sweeps.append(result.iterations)
                residuals.append(result.residual)
        return q

    q_end = run(record=True)
    ours = min(timeit.repeat(run, number=1, repeat=3, timer=CLOCK)) / steps * 1e6

    def mujoco_run(python_pd):
        """MuJoCo's loop: the same PD law computed in Python and applied as
        generalised forces (python_pd), or applied by MuJoCo itself as joint
        springs and dampers."""
        mj = mujoco_model(path, points)
        data = mujoco.MjData(mj)
        qpos0 = np.zeros(mj.nq)
        qpos0[:3] = q0[:3] + np.array([0, 0, SPHERE])
        qpos0[3:7] = (q0[6], *q0[3:6])
        applied = np.zeros(mj.nv)
        for joint in model.joint_names[1:]:  # MuJoCo orders them as we do (base first): q[7:], v[6:] are the joints
            index, dof = mj.joint(joint).qposadr[0], mj.joint(joint).dofadr[0]
            assert (index, dof) == (model.q_index(joint), model.v_index(joint))
            qpos0[index] = q0[model.q_index(joint)]
            applied[dof] = feedforward[model.v_index(joint)]
            if not python_pd:
                mj.jnt_stiffness[mj.joint(joint).id] = stiffness[model.v_index(joint) - 6]
                mj.qpos_spring[index] = qpos0[index]
                mj.dof_damping[dof] = damping[model.v_index(joint) - 6]

        def run_mujoco():
            data.qpos[:], data.qvel[:] = qpos0, 0.0
            data.qfrc_applied[:] = applied
            for _ in range(steps):
                if python_pd:
                    tau = applied.copy()
                    tau[6:] -= stiffness * (data.qpos[7:] - qpos0[7:]) + damping * data.qvel[6:]
                    data.qfrc_applied[:] = tau
                mujoco.mj_step(mj, data)

        per_step = min(timeit.repeat(run_mujoco, number=1, repeat=3, timer=CLOCK)) / steps * 1e6
        return per_step, data.qpos[2] - qpos0[2]

    theirs, height = mujoco_run(python_pd=True)
    springs, _ = mujoco_run(python_pd=False)
    drift = np.abs(mbs.difference(model, q0, q_end)).max()
    print(f"{name:8} {model.nv:3d} {len(points):6d} {ours:8.1f} {theirs:8.1f} {ours / theirs:6.2f} {springs:8.1f} "
          f"{ours / springs:6.2f} {max(sweeps):7d} {max(residuals):12.1e}   (after {steps * DT:g} s, ours moved "
          f"{drift:.1e}; MuJoCo's base height {height:+.1e} m)")


def simulation_step_table(steps):
    print(f"\none simulation step with frictional ground contact (dt = {DT * 1e3:g} ms, mu = {FRICTION}), "
          f"us per step, mean over {steps} steps standing")
    print(f"{'robot':8} {'nv':>3} {'points':>6} {'ours':>8} {'mj_step':>8} {'ratio':>6} {'springs':>8} {'ratio':>6} "
          f"{'sweeps':>7} {'residual m/s':>12}")
    simulation_row("solo12", SOLO12, [mbs.PointContact(f) for f in FEET], steps)
    simulation_row("talos", TALOS, [mbs.PointContact(s, c) for s in SOLES for c in SOLE_CORNERS], steps)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=2000)
    arguments = parser.parse_args()
    print(f"numpy {np.__version__}, pinocchio {pin.__version__}, mujoco {mujoco.__version__}, "
          f"mbs_dynamics {mbs.__version__}, python {sys.version.split()[0]}")
    contact_forward_dynamics_table(arguments.calls)
    simulation_step_table(arguments.steps)


if __name__ == "__main__":
    main()
