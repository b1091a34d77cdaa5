#!/usr/bin/env python3
"""Latency of the inverse dynamics node (or of the whole-body controller
node): TALOS joint_states (and odom) at 1 kHz from one process, the node in a
second, the efforts received in a third.

    .venv/bin/python benchmarks/inverse_dynamics_latency.py [--seconds 30] [--rate 1000]
        [--contacts]   (contact-consistent torques on the two soles)
        [--controller solo12|talos]   (the whole_body_controller node instead:
                       that robot standing on its four feet / two soles, the
                       CoM, base orientation and posture tasks of its default
                       parameters; issue 33's goal p99 < 1 ms / 2 ms)
        [--queue-depth N]   (the node's input_queue_depth: its joint_states
                       queue; default the node's own, 1000 for inverse
                       dynamics, 1 for the controller)
        [--parameter NAME:=VALUE]...   (more parameters of the node, such as
                       the controller's contact_forces_rate:=100)
        [--realtime-priority N]   (SCHED_FIFO at N for the node's joint_states
                       thread, the publisher and the receiver, with their Fast
                       DDS threads, as a real-time driver and controller would
                       run; needs the permission)

Prints the latency from the input's stamp (the publisher's wall clock) to the
receipt of the efforts with that stamp (p50, p99, max), the messages lost,
the node's own counts of them (the publisher's sequence numbers; its
stamps), and the node's CPU use (its process, from /proc). Goals (issue 32):
p99 < 2 ms on a quiet 2-core machine, nothing lost, every loss counted by
the node.

The publisher and the receiver are as light as a driver and a controller in
C++: no conversion in the loop, and no garbage collection (their objects of
set-up frozen, gc.freeze; nothing the collector tracks made per message):
a full collection of this Python process's 150,000 objects took 90-110 ms
on a busy machine, a stall that was counted as the node's latency (the
publisher stamps before it allocates) and sent the stream in a burst.
"""
import argparse
import gc
from array import array
import importlib.metadata
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from ros_domain import use_private_ros_domain  # benchmarks/ros_domain.py

ROOT = Path(__file__).resolve().parents[1]

ROBOTS_DIR = importlib.metadata.distribution("example-robot-data").locate_file(
    "cmeel.prefix/share/example-robot-data/robots")
TALOS = str(ROBOTS_DIR / "talos_data/robots/talos_reduced.urdf")
NODE = "id_latency"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (and its reaped children), s."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def receive(seconds: float, capacity: int, priority: int, ready, results) -> None:
    """The receiving process: latency of every ~/joint_efforts message (at
    most `capacity` of them)."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.experimental import EventsExecutor
    from rclpy.qos import QoSProfile
    from rclpy.task import Future
    from sensor_msgs.msg import JointState

    from mbs_dynamics.ros.inverse_dynamics_node import COMMAND_QOS
    from mbs_dynamics.ros.spinning import schedule_realtime

    rclpy.init()
    node = rclpy.create_node("latency_receiver")
    # preallocated: nothing the garbage collector tracks is made per message
    stamps_ns, latencies = np.zeros(capacity, dtype=np.int64), np.zeros(capacity)
    received = np.zeros(1, dtype=np.int64)

    def on_efforts(message):
        now = time.time()
        k = received[0]
        if k < capacity:
            stamp = message.header.stamp
            stamps_ns[k] = stamp.sec * 1_000_000_000 + stamp.nanosec
            latencies[k] = now - (stamp.sec + 1e-9 * stamp.nanosec)
            received[0] = k + 1

    # the node's own reliable QoS, with a queue that outlasts this harness's pauses
    queue = QoSProfile(history=COMMAND_QOS.history, depth=1000, reliability=COMMAND_QOS.reliability)
    node.create_subscription(JointState, f"/{NODE}/joint_efforts", on_efforts, queue)
    diagnostics = {}

    def on_diagnostics(message):
        for status in message.status:
            if status.name.startswith(f"/{NODE}:"):  # the fully qualified node name
                diagnostics.update({kv.key: kv.value for kv in status.values})

    monitor = rclpy.create_node("latency_monitor")
    monitor.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    while node.count_publishers(f"/{NODE}/joint_efforts") == 0:
        time.sleep(0.05)
    # rclpy's executor in C++, without the Python executors' per-message overhead: the harness as light as it can be
    executor = EventsExecutor()
    executor.add_node(node)
    executor.add_node(monitor)
    gc.collect()
    gc.freeze()
    if priority:
        schedule_realtime(priority)
    ready.set()
    executor.spin_until_future_complete(Future(), timeout_sec=seconds + 1.0)  # (+1 s: the last diagnostics)
    executor.shutdown()
    count = int(received[0])
    results.put((stamps_ns[:count], latencies[:count], diagnostics))
    node.destroy_node()
    rclpy.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--contacts", action="store_true")
    parser.add_argument("--controller", choices=("solo12", "talos"), default=None)
    parser.add_argument("--realtime-priority", type=int, default=0)
    parser.add_argument("--queue-depth", type=int, default=0)
    parser.add_argument("--parameter", action="append", default=[])
    arguments = parser.parse_args()
    use_private_ros_domain()

    import rclpy
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState

    import mbs_dynamics as mbs
    from mbs_dynamics.ros.inverse_dynamics_node import STREAM_QOS
    from mbs_dynamics.ros.spinning import schedule_realtime

    if arguments.controller:
        sys.path.insert(0, str(ROOT / "mbs_dynamics" / "test"))
        from helpers import FEET, SOLES, robot_path, solo12_standing, talos_standing

        solo = arguments.controller == "solo12"
        model, q = solo12_standing() if solo else talos_standing()
        urdf = robot_path(arguments.controller)
        parameters = ["-p", f"robot_description_file:={urdf}", "-p", "floating_base:=true",
                      "-p", f"contact_frames:=[{','.join(FEET if solo else SOLES)}]",
                      "-p", f"contact_type:={'point' if solo else 'surface'}",
                      "-p", f"efforts_topic:=/{NODE}/joint_efforts"]
        executable = "whole_body_controller_node"
    else:
        model = mbs.Model.from_urdf_file(TALOS, floating_base=True)
        q = model.neutral_configuration()
        q[2] = 1.0
        parameters = ["-p", f"robot_description_file:={TALOS}", "-p", "floating_base:=true"]
        executable = "inverse_dynamics_node"
    if arguments.contacts:
        parameters += ["-p", "contact_frames:=[left_sole_link,right_sole_link]", "-p", "contact_type:=frame"]
    if arguments.realtime_priority:
        parameters += ["-p", f"realtime_priority:={arguments.realtime_priority}"]
    if arguments.queue_depth:
        parameters += ["-p", f"input_queue_depth:={arguments.queue_depth}"]
    for parameter in arguments.parameter:
        parameters += ["-p", parameter]
    executable = os.environ.get("MBS_NODE_EXECUTABLE", Path(sys.executable).parent / executable)
    node_process = subprocess.Popen([str(executable), "--ros-args", "-r", f"__node:={NODE}", *parameters],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    period = 1.0 / arguments.rate
    count = int(arguments.seconds * arguments.rate)
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: its own rclpy
    ready, results = context.Event(), context.Queue()
    receiver = context.Process(target=receive, args=(arguments.seconds + 8.0, count + 1000,
                                                     arguments.realtime_priority, ready, results))
    receiver.start()

    rclpy.init()
    node = rclpy.create_node("latency_publisher")
    joint_states = node.create_publisher(JointState, "/joint_states", STREAM_QOS)
    odometry = node.create_publisher(Odometry, "/odom", STREAM_QOS)
    names = [name for name in model.joint_names if name != "root_joint"]
    rng = np.random.default_rng(0)
    if arguments.controller:  # standing still
        positions = [float(q[model.q_index(name)]) for name in names]
    else:
        positions = [float(x) for x in 0.1 * rng.normal(size=len(names))]
    odom = Odometry()
    odom.header.frame_id = "odom"
    odom.pose.pose.position.x, odom.pose.pose.position.y, odom.pose.pose.position.z = (float(x) for x in q[:3])
    orientation = odom.pose.pose.orientation
    orientation.x, orientation.y, orientation.z, orientation.w = (float(x) for x in q[3:7])
    if not ready.wait(60.0):
        sys.exit("the node did not come up:\n" + node_process.stdout.read())
    while joint_states.get_subscription_count() == 0:
        time.sleep(0.05)
    for _ in range(20):  # odom first: without it the node drops joint_states
        odom.header.stamp = node.get_clock().now().to_msg()
        odometry.publish(odom)
        time.sleep(0.01)

    message = JointState(name=names, position=positions)
    step = 1e-5 if arguments.controller else 0.001  # rad/s: a standing robot's joints barely move
    velocities = [array("d", [step * (k % 1000)] * len(names)) for k in range(1000)]
    sent_ns = np.zeros(count, dtype=np.int64)
    gc.collect()
    gc.freeze()
    if arguments.realtime_priority:
        schedule_realtime(arguments.realtime_priority)
    # the schedule starts now: a start before the set-up above sent its first 200 messages in one burst
    cpu_start, wall_start = cpu_seconds(node_process.pid), time.monotonic()
    next_time = time.monotonic()
    for k in range(count):
        now = time.time()
        message.header.stamp.sec, message.header.stamp.nanosec = int(now), int((now % 1) * 1e9)
        sent_ns[k] = message.header.stamp.sec * 1_000_000_000 + message.header.stamp.nanosec
        message.velocity = velocities[k % 1000]  # the publisher as light as a driver: no conversions
        if k % 10 == 0:  # first: the controller refuses a state whose odom is stale (the set-up's, for the first)
            odom.header.stamp = message.header.stamp
            odometry.publish(odom)
        joint_states.publish(message)
        next_time += period
        delay = next_time - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    sent_seconds = time.monotonic() - wall_start
    time.sleep(1.0)
    cpu = cpu_seconds(node_process.pid) - cpu_start
    received_ns, latencies, diagnostics = results.get(timeout=arguments.seconds + 30)
    received = np.unique(received_ns).size
    receiver.join(10)
    node_process.send_signal(2)
    try:
        node_process.wait(10)
    except subprocess.TimeoutExpired:
        node_process.kill()
    node.destroy_node()
    rclpy.shutdown()

    stamps = 1e-9 * received_ns
    latencies = 1e3 * latencies
    first = stamps < stamps.min() + 1.0
    robot = {"solo12": "Solo-12 under the whole-body controller (4 feet)",
             "talos": "TALOS under the whole-body controller (2 soles)"}.get(arguments.controller, "TALOS")
    print(f"{robot} ({model.nv} coordinates, floating base{', 2 sole contacts' if arguments.contacts else ''}): "
          f"{count} joint_states in {sent_seconds:.1f} s ({count / sent_seconds:.0f} Hz)")
    print(f"latency stamp -> efforts received: p50 {np.percentile(latencies, 50):.3f} ms, "
          f"p99 {np.percentile(latencies, 99):.3f} ms, max {latencies.max():.3f} ms")
    missing = np.flatnonzero(~np.isin(sent_ns, received_ns)).tolist()
    if missing:
        print(f"  lost messages (index in the stream): {missing[:20]}{' ...' if len(missing) > 20 else ''}")
    print(f"  after the first second: p50 {np.percentile(latencies[~first], 50):.3f} ms, "
          f"p99 {np.percentile(latencies[~first], 99):.3f} ms, max {latencies[~first].max():.3f} ms")
    print(f"lost: {count - received} of {count} (the node received {diagnostics.get('received', '?')}, "
          f"published {diagnostics.get('published', '?')}, dropped {diagnostics.get('dropped', '?')}, counted "
          f"{diagnostics.get('lost_joint_states', 0)} lost, {diagnostics.get('missed_estimate', '?')} missing by "
          f"the stamps); "
          f"node CPU: {100 * cpu / (sent_seconds + 1.0):.0f} % of one core, {1e6 * cpu / max(received, 1):.0f} us a "
          f"message answered (the CPU time, unlike the latency, hardly grows with the machine's load); node "
          f"compute per message: "
          f"mean {diagnostics.get('compute_us_mean', diagnostics.get('cycle_us_mean', '?'))} us, "
          f"p99 {diagnostics.get('compute_us_p99', diagnostics.get('cycle_us_p99', '?'))} us")


if __name__ == "__main__":
    main()
