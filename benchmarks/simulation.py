#!/usr/bin/env python3
"""Simulation steps, headless, at dt = 1 ms: the compiled step beside MuJoCo's
mj_step on the same robots, contacts and control, and the simulator node
beside the core.

    .venv/bin/python benchmarks/simulation.py [--steps 2000] [--node-seconds 5]

1. Microseconds per step, ours (mbs.Simulation.step(tau, steps=N): N steps in
   one compiled call) and MuJoCo's mj_step, each the best of five runs of
   --steps steps from the same start:
   - TALOS standing on the four corners of each sole (MuJoCo: small spheres
     there, elliptic cones), Solo-12 on its four feet: feedforward torques
     from contact inverse dynamics and joint PD critically damped at 5 Hz for
     each joint's inertia (ours: PD actuators, implicit; MuJoCo: joint
     springs and dampers);
   - the Panda under position control (PD at 20 Hz, gravity feedforward);
   - the Panda under its gravity torques alone, with our default integrator
     (rk4) and semi-implicit Euler (no MuJoCo row: information).
   Each row says how far the robot moved from its start (both simulators)
   and our solver's unconverged steps.
2. Free objects and collisions between bodies, beside MuJoCo (objects.py's
   table): the Panda beside 1, 10, 100 boxes on the ground and, with its
   collision meshes, beside 10 boxes on a table; TALOS with self-collision
   on against off.
3. Rollouts (mbs.rollout) beside mujoco.rollout with the same threads (1
   and every core), Solo-12 and TALOS standing as in 1, each rollout from
   its own stance: steps per second of all rollouts together
   (mbs.rollout runs on a thread pool over its GIL-free kernel).
4. The simulator node in its own process, paused, at real_time_factor 0:
   steps per wall-clock second of ~/step calls of STEPS_PER_CALL steps each
   (a ~/step takes them in compiled calls and publishes at its end), beside
   the core's steps per second on the same set-up; and how far the node's
   final joint positions are from the core's.
The machine's load average is printed first: on a shared machine the ratios
move by some 10 %.
"""
import argparse
import importlib.metadata
import os
import random
import sys
import time
import timeit
from pathlib import Path

import mujoco
import numpy as np

import mbs_dynamics as mbs
from contact import DT, FEET, FRICTION, SOLE_CORNERS, SOLES, SOLO12, SPHERE, TALOS, mujoco_model, standing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mbs_dynamics" / "test"))
from oracles import mujoco_spec  # noqa: E402
from ros_processes import NodeProcess, executable  # noqa: E402
from ros_domain import use_private_ros_domain  # noqa: E402  (benchmarks/ros_domain.py)

ROBOTS_DIR = importlib.metadata.distribution("example-robot-data").locate_file(
    "cmeel.prefix/share/example-robot-data/robots")
PANDA = str(ROBOTS_DIR / "panda_description/urdf/panda.urdf")
STEPS_PER_CALL = 20000
PANDA_POSE = {"panda_joint2": 0.6, "panda_joint4": -1.5, "panda_joint6": 1.8}


# A humanoid's leg joints' PD (N m/rad, N m s/rad): enough to stand on its soles.
LEG_STIFFNESS, LEG_DAMPING = 2000.0, 50.0


def pd_gains(model, q0, frequency, first):
    """Stiffness and damping critically damped at `frequency` (Hz) for each
    coordinate's inertia M_ii from velocity index `first` on."""
    omega = 2 * np.pi * frequency
    inertia = np.diag(mbs.mass_matrix(model, q0))[first:]
    return omega**2 * inertia, 2 * omega * inertia


def standing_setup(path, points):
    """(model, q0, feedforward, joints, stiffness, damping) of a legged robot
    standing on `points` (contact.py's standing pose)."""
    model = mbs.Model.from_urdf_file(path, floating_base=True)
    q0 = standing(model, points)
    zero = np.zeros(model.nv)
    feedforward = mbs.contact_inverse_dynamics(model, q0, zero, zero, list(points), friction=FRICTION)[0]
    stiffness, damping = pd_gains(model, q0, 5.0, 6)
    joints = list(model.joint_names[1:])
    # Gains from each joint's own M_ii leave a humanoid's ankles 10-26 N m/rad, against the ~900 its weight
    # needs over its feet: TALOS fell over in a few seconds (in MuJoCo too); its legs are held stiff instead.
    legs = np.array(["leg" in joint for joint in joints])
    stiffness, damping = np.where(legs, LEG_STIFFNESS, stiffness), np.where(legs, LEG_DAMPING, damping)
    return model, q0, feedforward, joints, stiffness, damping


def our_time(simulation, tau, steps):
    """Microseconds per step of `steps` steps in one call from the initial state."""
    def run():
        simulation.reset()
        simulation.step(tau, steps=steps)
    run()
    return min(timeit.repeat(run, number=1, repeat=5)) / steps * 1e6


def mujoco_time(mj, qpos0, applied, steps):
    """MuJoCo's microseconds per step of `steps` steps in one call,
    mj_step(nstep=steps), from qpos0 at rest, and |qpos - qpos0| after."""
    data = mujoco.MjData(mj)

    def run():
        mujoco.mj_resetData(mj, data)
        data.qpos[:], data.qfrc_applied[:] = qpos0, applied
        mujoco.mj_step(mj, data, nstep=steps)
    run()
    return min(timeit.repeat(run, number=1, repeat=5)) / steps * 1e6, np.abs(data.qpos - qpos0)


def mujoco_pd(mj, model, q0, joints, feedforward, stiffness, damping, base):
    """MuJoCo's qpos0 and applied forces for our q0 and feedforward, the PD as
    joint springs (at q0) and dampers; base: the number of our leading velocity
    coordinates that are a floating base."""
    qpos0, applied = np.zeros(mj.nq), np.zeros(mj.nv)
    if base:
        qpos0[:3] = q0[:3] + np.array([0, 0, SPHERE])
        qpos0[3:7] = (q0[6], *q0[3:6])
    for joint in joints:
        index, dof, v = mj.joint(joint).qposadr[0], mj.joint(joint).dofadr[0], model.v_index(joint)
        qpos0[index] = q0[model.q_index(joint)]
        applied[dof] = feedforward[v]
        mj.jnt_stiffness[mj.joint(joint).id] = stiffness[v - base]
        mj.qpos_spring[index] = qpos0[index]
        mj.dof_damping[dof] = damping[v - base]
    return qpos0, applied


def print_row(label, ours, theirs, moved, their_moved, unconverged):
    ratio = f"{ours / theirs:6.2f}" if theirs else "      "
    mj = f"{theirs:8.1f}" if theirs else "        "
    moved_mj = f"{their_moved:.1e}" if theirs else "      -"
    print(f"{label:40} {ours:8.1f} {mj} {ratio}   {moved:.1e} {moved_mj}   {unconverged}")


def legged_row(label, path, points, steps):
    model, q0, feedforward, joints, stiffness, damping = standing_setup(path, points)
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(friction=FRICTION), points, joint_limits=False,
                                                 joint_damping=False, joint_friction=False), DT, q=q0,
                                actuators=mbs.Actuators(joints, stiffness, damping))
    targets = np.zeros(model.nv)
    targets[6:] = q0[7:]
    simulation.set_targets(positions=targets)
    ours = our_time(simulation, feedforward, steps)
    moved = np.abs(mbs.difference(model, q0, simulation.q)).max()
    mj = mujoco_model(path, points)
    qpos0, applied = mujoco_pd(mj, model, q0, joints, feedforward, stiffness, damping, 6)
    theirs, their_moved = mujoco_time(mj, qpos0, applied, steps)
    print_row(label, ours, theirs, moved, their_moved.max(), simulation.last.unconverged_steps)


def panda_rows(steps):
    model = mbs.Model.from_urdf_file(PANDA)
    q0 = mbs.simulation.initial_configuration(model, PANDA_POSE)
    joints = list(model.joint_names)
    stiffness, damping = pd_gains(model, q0, 20.0, 0)
    hold = mbs.gravity_torques(model, q0)
    simulation = mbs.Simulation(model, mbs.World(ground=None), DT, q=q0,
                                actuators=mbs.Actuators(joints, stiffness, damping))
    simulation.set_targets(positions=q0[:model.nv])
    ours = our_time(simulation, hold, steps)
    moved = np.abs(simulation.q - q0).max()
    spec = mujoco_spec(PANDA)
    spec.option.timestep = DT
    mj = spec.compile()
    qpos0, applied = mujoco_pd(mj, model, q0, joints, hold, stiffness, damping, 0)
    theirs, their_moved = mujoco_time(mj, qpos0, applied, steps)
    print_row("panda, position control (20 Hz)", ours, theirs, moved, their_moved.max(),
              simulation.last.unconverged_steps)
    for integrator in ("rk4", "semi_implicit_euler"):
        simulation = mbs.Simulation(model, mbs.World(ground=None), DT, integrator, q=q0)
        ours = our_time(simulation, hold, steps)
        print_row(f"panda, g(q0) alone, {integrator}", ours, None, np.abs(simulation.q - q0).max(), None,
                  simulation.last.unconverged_steps)


def core_table(steps):
    print(f"us per step, dt = {DT * 1e3:g} ms, best of 5 runs of {steps} steps from the start "
          f"(ours: one compiled call)")
    print(f"{'set-up':40} {'ours':>8} {'mj_step':>8} {'ratio':>6}   {'moved':>7} {'mj':>7}   unconverged")
    legged_row("talos, 8 sole corners, PD, legs stiff", TALOS, tuple(mbs.PointContact(s, c) for s in SOLES
                                                              for c in SOLE_CORNERS), steps)
    legged_row("solo12, 4 feet, PD 5 Hz", SOLO12, tuple(mbs.PointContact(f) for f in FEET), steps)
    panda_rows(steps)


def rollout_setup(path, points, count, steps, seed=5):
    """Our arguments and MuJoCo's for `count` rollouts of `steps` steps of a
    legged robot standing (standing_setup's PD and feedforward), each from the
    stance with its joints moved by up to 0.02 rad (the same in both): (model,
    our keyword arguments, MuJoCo's model, initial states (count, nstate) and
    controls (count, steps, nv: qfrc_applied))."""
    model, q0, feedforward, joints, stiffness, damping = standing_setup(path, points)
    rng = np.random.default_rng(seed)
    starts = np.tile(q0, (count, 1))
    starts[:, 7:] += rng.uniform(-0.02, 0.02, (count, model.nq - 7))
    targets = np.zeros((count, steps, model.nv))
    targets[:, :, 6:] = q0[7:]
    ours = dict(q0=starts, efforts=np.broadcast_to(feedforward, (count, steps, model.nv)).copy(),
                position_targets=targets, dt=DT,
                world=mbs.World(mbs.Ground(friction=FRICTION), points, joint_limits=False, joint_damping=False,
                                joint_friction=False),
                actuators=mbs.Actuators(joints, stiffness, damping))
    mj = mujoco_model(path, points)
    qpos0, applied = mujoco_pd(mj, model, q0, joints, feedforward, stiffness, damping, 6)
    data = mujoco.MjData(mj)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    initial = np.zeros((count, mujoco.mj_stateSize(mj, spec)))
    for i in range(count):
        mujoco.mj_resetData(mj, data)
        data.qpos[:] = qpos0
        for joint in joints:
            data.qpos[mj.joint(joint).qposadr[0]] = starts[i, model.q_index(joint)]
        mujoco.mj_getState(mj, data, initial[i], spec)
    controls = np.broadcast_to(applied, (count, steps, mj.nv)).copy()
    return model, ours, mj, initial, controls


def rollout_rates(path, points, count, steps, threads):
    """Steps per second (all rollouts' steps over the wall-clock time of the
    call, best of 3) of ours and of mujoco.rollout, at
    `threads` threads; and our rollouts' unconverged steps, how many stopped."""
    from mujoco import rollout as mujoco_rollout

    model, ours, mj, initial, controls = rollout_setup(path, points, count, steps)
    def run():
        return mbs.rollout(model, ours["q0"], None, ours["efforts"], position_targets=ours["position_targets"],
                           world=ours["world"], dt=DT, actuators=ours["actuators"], threads=threads)
    result = run()  # loads the kernels
    rates = {"ours": count * steps / min(timeit.repeat(run, number=1, repeat=3))}
    datas = [mujoco.MjData(mj) for _ in range(threads)]
    spec = mujoco.mjtState.mjSTATE_QFRC_APPLIED

    def run_mujoco():
        return mujoco_rollout.rollout(mj, datas, initial, controls, control_spec=spec)
    run_mujoco()
    rates["mujoco"] = count * steps / min(timeit.repeat(run_mujoco, number=1, repeat=3))
    return rates, int(result.unconverged.sum()), int(np.count_nonzero(result.status))


def rollout_table(count, steps):
    """Ours (mbs.rollout) beside mujoco.rollout, same scenes, same threads."""
    cores = mbs.parallel.available_cores()
    print(f"\nrollouts: {count} rollouts of {steps} steps (dt = {DT * 1e3:g} ms) standing under feedforward and PD, "
          f"from stances moved by up to 0.02 rad; steps per second, best of 3 (mujoco.rollout: qfrc_applied "
          f"controls, joint springs and dampers)")
    print(f"{'set-up':34} {'threads':>7} {'ours':>10} {'mujoco':>10} {'ours/mj':>8}   unconverged stopped")
    for label, path, points in (
            ("solo12, 4 feet, PD 5 Hz", SOLO12, tuple(mbs.PointContact(f) for f in FEET)),
            ("talos, 8 sole corners, PD, legs stiff", TALOS, tuple(mbs.PointContact(s, c) for s in SOLES
                                                           for c in SOLE_CORNERS))):
        for threads in sorted({1, cores}):
            rates, unconverged, stopped = rollout_rates(path, points, count, steps, threads)
            print(f"{label:34} {threads:7d} {rates['ours']:10.0f} {rates['mujoco']:10.0f} "
                  f"{rates['ours'] / rates['mujoco']:8.2f}   "
                  f"{unconverged:11d} {stopped:7d}")


def node_rate(arguments, command, seconds, final_q, steps=STEPS_PER_CALL):
    """Steps per wall-clock second of a simulator node process at real_time_factor
    0, paused, from ~/step calls of `steps` each, each from the initial state
    (~/reset, which also drops the command: it is sent again), and the largest
    difference of the node's final joint positions from final_q (joint name ->
    position), the core Simulation's."""
    import rclpy
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from std_srvs.srv import Trigger

    from mbs_dynamics_interfaces.srv import Step

    node = rclpy.create_node(f"simulation_benchmark_{random.randrange(1 << 30)}")
    publisher = node.create_publisher(Float64MultiArray, "/simulator/effort_command", 10)
    states = []
    node.create_subscription(JointState, "/joint_states", states.append, 10)
    step, reset = node.create_client(Step, "/simulator/step"), node.create_client(Trigger, "/simulator/reset")
    process = NodeProcess([executable("simulator_node"), "--ros-args", "-p", "real_time_factor:=0.0",
                           "-p", "start_paused:=true", "-p", "command_timeout:=1000.0", *arguments])

    def call(client, request):
        future = client.call_async(request)
        rclpy.spin_until_future_complete(node, future, timeout_sec=60)
        if not (future.done() and future.result().success):
            raise RuntimeError(f"{client.srv_name} failed:\n{process.output}")

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.01)

    try:
        process.wait_for("simulating", timeout=60)
        assert step.wait_for_service(timeout_sec=10) and reset.wait_for_service(timeout_sec=10)
        stepping, calls, moved = 0.0, -1, 0.0  # the first call loads the kernels: not counted
        while stepping < seconds:
            call(reset, Trigger.Request())
            publisher.publish(Float64MultiArray(data=command.tolist()))
            spin(0.1)  # paused, the node takes commands every 10 ms
            start = time.perf_counter()
            call(step, Step.Request(steps=steps))
            if calls >= 0:
                stepping += time.perf_counter() - start
            calls += 1
            spin(0.05)
            last = states[-1]
            moved = max(moved, max(abs(x - final_q[name]) for name, x in zip(last.name, last.position, strict=True)))
        return calls * steps / stepping, moved
    finally:
        process.interrupt()
        node.destroy_node()


def core_run(simulation, tau, steps=STEPS_PER_CALL) -> tuple[float, dict]:
    """The core's steps per second in calls of `steps` from the initial state,
    and joint name -> position after one call."""
    model = simulation.model
    simulation.reset()
    simulation.step(tau, steps=steps)
    final = {name: float(simulation.q[model.q_index(name)]) for name in model.joint_names
             if name != mbs.multibody.model.ROOT_JOINT}
    per_call = min(timeit.repeat(lambda: (simulation.reset(), simulation.step(tau, steps=steps)), number=1,
                                 repeat=5))
    return steps / per_call, final


def gain_arguments(joints, stiffness, damping) -> list[str]:
    return ["-p", f"position_joints:={joints}", "-p", f"position_stiffness:={[float(k) for k in stiffness]}",
            "-p", f"position_damping:={[float(d) for d in damping]}"]


def node_table(seconds):
    import rclpy

    use_private_ros_domain()
    rclpy.init()
    print(f"\nthe simulator node paused at real_time_factor 0, {seconds:g} wall-clock s each in ~/step calls of "
          f"{STEPS_PER_CALL} steps, beside the core in calls of as many")
    print(f"{'set-up':34} {'node steps/s':>12} {'core steps/s':>12} {'node/core':>9}   check")
    points = tuple(mbs.PointContact(s, c) for s in SOLES for c in SOLE_CORNERS)
    model, q0, feedforward, joints, stiffness, damping = standing_setup(TALOS, points)
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(friction=FRICTION), points), DT, q=q0,
                                actuators=mbs.Actuators(joints, stiffness, damping))
    core, final = core_run(simulation, feedforward)
    corners = [x for _ in SOLES for corner in SOLE_CORNERS for x in corner]
    frames = [s for s in SOLES for _ in SOLE_CORNERS]
    rate, moved = node_rate(["-p", f"robot_description_file:={TALOS}", "-p", "floating_base:=true",
                             "-p", f"contact_frames:={frames}", "-p", f"contact_points:={corners}",
                             "-p", f"initial_base_pose:={q0[:7].tolist()}",
                             "-p", f"initial_joint_names:={joints}",
                             "-p", f"initial_joint_positions:={[float(q0[model.q_index(j)]) for j in joints]}",
                             "-p", f"ground_friction:={FRICTION}", *gain_arguments(joints, stiffness, damping)],
                            feedforward[6:], seconds, final)
    print(f"{'talos, 8 sole corners, PD, legs stiff':34} {rate:12.0f} {core:12.0f} {rate / core:9.2f}   "
          f"{moved:.1e} rad from the core's steps")
    panda = mbs.Model.from_urdf_file(PANDA)
    held = mbs.simulation.initial_configuration(panda, PANDA_POSE)
    hold = mbs.gravity_torques(panda, held)
    joints = list(panda.joint_names)
    stiffness, damping = pd_gains(panda, held, 20.0, 0)
    simulation = mbs.Simulation(panda, mbs.World(ground=None), DT, q=held,
                                actuators=mbs.Actuators(joints, stiffness, damping))
    simulation.set_targets(positions=held[:panda.nv])
    core, final = core_run(simulation, hold)
    rate, moved = node_rate(["-p", f"robot_description_file:={PANDA}",
                             "-p", f"initial_joint_names:={list(PANDA_POSE)}",
                             "-p", f"initial_joint_positions:={list(PANDA_POSE.values())}",
                             *gain_arguments(joints, stiffness, damping)],
                            hold, seconds, final)
    print(f"{'panda, position control (20 Hz)':34} {rate:12.0f} {core:12.0f} {rate / core:9.2f}   "
          f"{moved:.1e} rad from the core's steps")
    rclpy.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--steps", type=int, default=2000, help="steps per core run")
    parser.add_argument("--node-seconds", type=float, default=5.0, help="wall-clock seconds per node row; 0: none")
    parser.add_argument("--rollouts", type=int, default=32, help="rollouts per rollout row; 0: no rollout rows")
    parser.add_argument("--rollout-steps", type=int, default=500, help="steps of each rollout")
    parser.add_argument("--only-rollouts", action="store_true", help="the rollout rows alone")
    arguments = parser.parse_args()
    print(f"numpy {np.__version__}, mujoco {mujoco.__version__}, mbs_dynamics {mbs.__version__}, "
          f"python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.2f}")
    if arguments.only_rollouts:
        rollout_table(arguments.rollouts, arguments.rollout_steps)
        return
    core_table(arguments.steps)
    from objects import objects_table  # objects.py imports this file's helpers
    objects_table(arguments.steps)
    if arguments.rollouts > 0:
        rollout_table(arguments.rollouts, arguments.rollout_steps)
    if arguments.node_seconds > 0:
        node_table(arguments.node_seconds)


if __name__ == "__main__":
    main()
