#!/usr/bin/env python3
"""Simulation steps per second, headless, at dt = 1 ms: how many times real
time the simulator can run.

    .venv/bin/python benchmarks/simulation.py [--seconds 5] [--node-seconds 5]

1. mbs.Simulation (the simulator node's core: ground contact, the URDF joint
   limits, damping and friction), beside MuJoCo's mj_step on the same robot
   and contact points:
   - TALOS standing on the four corners of each sole under feedforward
     torques and joint PD (benchmarks/contact.py's set-up);
   - Panda held by its gravity torques, with semi-implicit Euler and with RK4.
2. The simulator node in its own process at real_time_factor 0 (as fast as
   it goes), publishing at 100 Hz: steps per wall-clock second of ~/step
   calls of STEPS_PER_CALL steps each, from the initial state each time
   (~/reset before each). TALOS starts standing on the same sole corners,
   Panda in the closed loop's pose, each under a constant command
   (feedforward; gravity torques). A call lasts 0.5 simulated s: under
   feedforward alone, without feedback, TALOS starts to tip over after
   about 1 s, and a falling TALOS is another benchmark.
"""
import argparse
import importlib.metadata
import os
import random
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

import mbs_dynamics as mbs
from contact import DT, FRICTION, SOLE_CORNERS, SOLES, SPHERE, TALOS, mujoco_model, standing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mbs_dynamics" / "test"))
from ros_processes import NodeProcess, executable  # noqa: E402

ROBOTS_DIR = importlib.metadata.distribution("example-robot-data").locate_file(
    "cmeel.prefix/share/example-robot-data/robots")
PANDA = str(ROBOTS_DIR / "panda_description/urdf/panda.urdf")
STEPS_PER_CALL = 500
PANDA_POSE = {"panda_joint2": 0.6, "panda_joint4": -1.5, "panda_joint6": 1.8}


def talos_standing():
    """(model, world, q0, torques(q, v)): TALOS on its sole corners, feedforward
    from contact inverse dynamics at rest, joint PD critically damped at 5 Hz."""
    model = mbs.Model.from_urdf_file(TALOS, floating_base=True)
    points = tuple(mbs.PointContact(s, c) for s in SOLES for c in SOLE_CORNERS)
    q0 = standing(model, points)
    zero = np.zeros(model.nv)
    feedforward = mbs.contact_inverse_dynamics(model, q0, zero, zero, list(points), friction=FRICTION)[0]
    omega = 2 * np.pi * 5.0
    inertia = np.diag(mbs.mass_matrix(model, q0))[6:]
    stiffness, damping = omega**2 * inertia, 2 * omega * inertia

    def torques(q, v):
        tau = feedforward.copy()
        tau[6:] -= stiffness * (q[7:] - q0[7:]) + damping * v[6:]
        return tau

    return model, mbs.World(mbs.Ground(friction=FRICTION), points), q0, torques, feedforward


def steps_per_second(simulation, torques, seconds):
    steps = int(round(seconds / simulation.dt))
    start = time.perf_counter()
    for _ in range(steps):
        simulation.step(torques(simulation.q, simulation.v))
    return steps / (time.perf_counter() - start)


def mujoco_steps_per_second(model, points, q0, feedforward, seconds):
    mj = mujoco_model(TALOS, points)
    data = mujoco.MjData(mj)
    data.qpos[:3] = q0[:3] + np.array([0, 0, SPHERE])
    data.qpos[3:7] = (q0[6], *q0[3:6])
    for joint in model.joint_names[1:]:
        data.qpos[mj.joint(joint).qposadr[0]] = q0[model.q_index(joint)]
        data.qfrc_applied[mj.joint(joint).dofadr[0]] = feedforward[model.v_index(joint)]
    steps = int(round(seconds / DT))
    start = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(mj, data)
    return steps / (time.perf_counter() - start)


def core_table(seconds):
    print(f"mbs.Simulation, headless, dt = {DT * 1e3:g} ms, {seconds:g} simulated s each")
    print(f"{'robot':34} {'steps/s':>9} {'x real time':>11} {'us/step':>8}   check")
    model, world, q0, torques, feedforward = talos_standing()
    simulation = mbs.Simulation(model, world, DT, q=q0)
    for _ in range(100):  # the kernels loaded, the warm start filled
        simulation.step(torques(simulation.q, simulation.v))
    rate = steps_per_second(simulation, torques, seconds)
    moved = np.abs(mbs.difference(model, q0, simulation.q)).max()
    print(f"{'talos, 8 sole corners, PD':34} {rate:9.0f} {rate * DT:11.1f} {1e6 / rate:8.1f}   "
          f"moved {moved:.1e} from the start")
    theirs = mujoco_steps_per_second(model, list(world.contact_points), q0, feedforward, seconds)
    print(f"{'  MuJoCo mj_step, same points':34} {theirs:9.0f} {theirs * DT:11.1f} {1e6 / theirs:8.1f}   "
          f"ours / MuJoCo time per step {theirs / rate:.2f}")
    panda = mbs.Model.from_urdf_file(PANDA)
    held = mbs.simulation.initial_configuration(panda, PANDA_POSE)
    for integrator in ("semi_implicit_euler", "rk4"):
        simulation = mbs.Simulation(panda, mbs.World(ground=None), DT, integrator, q=held)
        rate = steps_per_second(simulation, lambda q, v: mbs.gravity_torques(panda, q), seconds)
        moved = np.abs(simulation.q - held).max()
        print(f"{'panda, g(q) each step, ' + integrator:34} {rate:9.0f} {rate * DT:11.1f} {1e6 / rate:8.1f}   "
              f"moved {moved:.1e} rad")


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


def core_final(model, world, q0, tau, steps=STEPS_PER_CALL):
    """Joint name -> position after `steps` core Simulation steps from q0 under tau."""
    simulation = mbs.Simulation(model, world, DT, q=q0)
    for _ in range(steps):
        simulation.step(tau)
    return {name: float(simulation.q[model.q_index(name)]) for name in model.joint_names
            if name != mbs.model.ROOT_JOINT}


def node_table(seconds):
    import rclpy

    os.environ.setdefault("ROS_DOMAIN_ID", str(random.SystemRandom().randint(150, 200)))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    rclpy.init()
    print(f"\nthe simulator node at real_time_factor 0, publishing at 100 Hz, {seconds:g} wall-clock s each "
          f"in ~/step calls of {STEPS_PER_CALL} steps")
    print(f"{'robot':34} {'steps/s':>9} {'x real time':>11}   check")
    model, world, q0, _, feedforward = talos_standing()
    joints = list(model.joint_names[1:])
    corners = [x for _ in SOLES for corner in SOLE_CORNERS for x in corner]
    frames = [s for s in SOLES for _ in SOLE_CORNERS]
    rate, moved = node_rate(["-p", f"robot_description_file:={TALOS}", "-p", "floating_base:=true",
                             "-p", f"contact_frames:={frames}", "-p", f"contact_points:={corners}",
                             "-p", f"initial_base_pose:={q0[:7].tolist()}",
                             "-p", f"initial_joint_names:={joints}",
                             "-p", f"initial_joint_positions:={[float(q0[model.q_index(j)]) for j in joints]}",
                             "-p", f"ground_friction:={FRICTION}"],
                            feedforward[6:], seconds, core_final(model, world, q0, feedforward))
    print(f"{'talos, 8 sole corners, feedforward':34} {rate:9.0f} {rate * DT:11.1f}   "
          f"{moved:.1e} rad from the core's steps")
    panda = mbs.Model.from_urdf_file(PANDA)
    held = mbs.simulation.initial_configuration(panda, PANDA_POSE)
    hold = mbs.gravity_torques(panda, held)
    rate, moved = node_rate(["-p", f"robot_description_file:={PANDA}",
                             "-p", f"initial_joint_names:={list(PANDA_POSE)}",
                             "-p", f"initial_joint_positions:={list(PANDA_POSE.values())}"],
                            hold, seconds, core_final(panda, mbs.World(ground=None), held, hold))
    print(f"{'panda, g(q) held':34} {rate:9.0f} {rate * DT:11.1f}   {moved:.1e} rad from the core's steps")
    rclpy.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="simulated seconds per core row")
    parser.add_argument("--node-seconds", type=float, default=5.0, help="wall-clock seconds per node row; 0: none")
    arguments = parser.parse_args()
    print(f"numpy {np.__version__}, mujoco {mujoco.__version__}, mbs_dynamics {mbs.__version__}, "
          f"python {sys.version.split()[0]}")
    core_table(arguments.seconds)
    if arguments.node_seconds > 0:
        node_table(arguments.node_seconds)


if __name__ == "__main__":
    main()
