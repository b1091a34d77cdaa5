#!/usr/bin/env python3
"""Round-trip latency and throughput of the dynamics server: TALOS (floating
base), the server in its own process, the clients in others.

    .venv/bin/python benchmarks/dynamics_server.py [--calls 500] [--seconds 10]

Prints, per service: the round trip (request sent -> response received, as a
client sees it: p50, p99) next to the core's compute time for the same
request in this process; the 1000-point ~/inverse_dynamics_trajectory; and the
throughput of ~/forward_dynamics with 1 and with 4 client processes calling
back to back. Goals (issue 6): forward_dynamics p50 < 2 ms; a 1000-point
trajectory < 50 ms.
"""
import argparse
import importlib.metadata
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from ros_domain import use_private_ros_domain  # benchmarks/ros_domain.py

ROBOTS_DIR = importlib.metadata.distribution("example-robot-data").locate_file(
    "cmeel.prefix/share/example-robot-data/robots")
TALOS = str(ROBOTS_DIR / "talos_data/robots/talos_reduced.urdf")
NODE = "server_benchmark"
SOLES = ("left_sole_link", "right_sole_link")


def requests(model):
    """{label: (service, request, core computation)} on TALOS standing with its
    joints at random angles, moving."""
    from geometry_msgs.msg import Accel
    from trajectory_msgs.msg import JointTrajectoryPoint

    import mbs_dynamics as mbs
    from mbs_dynamics_interfaces import msg, srv

    rng = np.random.default_rng(0)
    names = [name for name in model.joint_names if name != "root_joint"]
    q = model.neutral_configuration()
    q[2] = 1.0
    q[7:] = 0.1 * rng.normal(size=model.nq - 7)
    v, tau, a = 0.1 * rng.normal(size=model.nv), rng.normal(size=model.nv), 0.1 * rng.normal(size=model.nv)
    tau[:6] = 0.0
    joint = [model.v_index(n) for n in names]
    base = msg.BaseState()
    base.pose.position.z, base.pose.orientation.w = 1.0, 1.0
    (base.twist.angular.x, base.twist.angular.y, base.twist.angular.z,
     base.twist.linear.x, base.twist.linear.y, base.twist.linear.z) = v[:6].tolist()
    soles = [msg.Contact(frame=s, kind=msg.Contact.FRAME, friction_coefficient=0.7) for s in SOLES]
    core_soles = [mbs.FrameContact(s) for s in SOLES]

    def state(kind, contacts=(), efforts=True):
        request = kind.Request()
        request.joint_state.name, request.joint_state.position = names, q[7:].tolist()
        request.joint_state.velocity = v[joint].tolist()
        if efforts and kind is srv.ForwardDynamics:
            request.joint_state.effort = tau[joint].tolist()
        request.base_state = [base]
        if contacts:
            request.contacts = list(contacts)
        return request

    inverse = state(srv.InverseDynamics)
    inverse.accelerations = a[joint].tolist()
    accel = Accel()
    accel.angular.x, accel.angular.y, accel.angular.z = a[:3].tolist()
    accel.linear.x, accel.linear.y, accel.linear.z = a[3:6].tolist()
    inverse.base_acceleration = [accel]
    inverse_contacts = state(srv.InverseDynamics, soles)
    inverse_contacts.accelerations, inverse_contacts.base_acceleration = inverse.accelerations, [accel]
    impact = state(srv.Impact, soles)
    impact.restitution = 0.2
    terms = state(srv.DynamicsTerms)
    terms.frames = list(SOLES)
    trajectory = srv.InverseDynamicsTrajectory.Request()
    trajectory.trajectory.joint_names = names
    t = np.linspace(0.0, 1.0, 1000)[:, None]
    Q, V = q[7:] + 0.2 * np.sin(2 * np.pi * t), 0.4 * np.pi * np.cos(2 * np.pi * t) * np.ones(len(names))
    A = -0.8 * np.pi**2 * np.sin(2 * np.pi * t) * np.ones(len(names))
    trajectory.trajectory.points = [JointTrajectoryPoint(positions=Q[k].tolist(), velocities=V[k].tolist(),
                                                         accelerations=A[k].tolist()) for k in range(1000)]
    Qf = np.tile(model.neutral_configuration(), (1000, 1))
    Qf[:, 7:] = Q
    Vf, Af = np.zeros((1000, model.nv)), np.zeros((1000, model.nv))
    Vf[:, 6:], Af[:, 6:] = V, A
    return {
        "forward_dynamics": ("forward_dynamics", state(srv.ForwardDynamics),
                             lambda: mbs.forward_dynamics(model, q, v, tau)),
        "forward_dynamics, 2 sole contacts": ("forward_dynamics", state(srv.ForwardDynamics, soles),
                                              lambda: mbs.contact_forward_dynamics(model, q, v, tau, core_soles)),
        "inverse_dynamics": ("inverse_dynamics", inverse, lambda: mbs.inverse_dynamics(model, q, v, a)),
        "inverse_dynamics, 2 soles, cones": (
            "inverse_dynamics", inverse_contacts,
            lambda: mbs.contact_inverse_dynamics(model, q, v, a, core_soles, friction=[0.7, 0.7])),
        "impact, 2 soles": ("impact", impact, lambda: mbs.impact(model, q, v, core_soles, 0.2)),
        "dynamics_terms, 2 Jacobians": ("dynamics_terms", terms, lambda: (
            mbs.mass_matrix(model, q), mbs.nonlinear_effects(model, q, v), mbs.gravity_torques(model, q),
            mbs.centroidal_momentum_matrix(model, q), [mbs.frame_jacobian(model, q, s, "hybrid") for s in SOLES])),
        "inverse_dynamics_trajectory, 1000 points": ("inverse_dynamics_trajectory", trajectory,
                                                     lambda: mbs.inverse_dynamics(model, Qf, Vf, Af)),
    }


def client(service_kinds, node_name):
    import rclpy
    from mbs_dynamics_interfaces import srv

    kinds = {"forward_dynamics": srv.ForwardDynamics, "inverse_dynamics": srv.InverseDynamics,
             "impact": srv.Impact, "dynamics_terms": srv.DynamicsTerms,
             "inverse_dynamics_trajectory": srv.InverseDynamicsTrajectory}
    node = rclpy.create_node(node_name)
    clients = {name: node.create_client(kinds[name], f"/{NODE}/{name}") for name in service_kinds}
    for name, service_client in clients.items():
        if not service_client.wait_for_service(timeout_sec=60):
            sys.exit(f"{name} is not available")
    return node, clients


def call(node, service_client, request):
    import rclpy

    future = service_client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=30)
    response = future.result()
    if response is None or not response.success:
        sys.exit(f"no good answer: {None if response is None else response.message}")
    return response


def server_diagnostics(node) -> dict:
    """The server's latest /diagnostics values (it publishes them every second)."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray

    values = {}

    def take(message):
        for status in message.status:
            if status.name == f"/{NODE}: dynamics server":  # the fully qualified node name
                values.update({kv.key: kv.value for kv in status.values})

    subscription = node.create_subscription(DiagnosticArray, "/diagnostics", take, 10)
    deadline = time.monotonic() + 3.0
    while not values and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    node.destroy_subscription(subscription)
    return values


def throughput(seconds, start, results, index):
    """A client process calling ~/forward_dynamics back to back from `start`."""
    import rclpy

    import mbs_dynamics as mbs

    rclpy.init()
    model = mbs.Model.from_urdf_file(TALOS, floating_base=True)
    _, request, _ = requests(model)["forward_dynamics"]
    node, clients = client(["forward_dynamics"], f"throughput_{index}")
    call(node, clients["forward_dynamics"], request)
    start.wait()
    calls, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        call(node, clients["forward_dynamics"], request)
        calls += 1
    results.put(calls)
    node.destroy_node()
    rclpy.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=10.0)
    arguments = parser.parse_args()
    use_private_ros_domain()

    import rclpy

    import mbs_dynamics as mbs

    model = mbs.Model.from_urdf_file(TALOS, floating_base=True)
    executable = os.environ.get("MBS_NODE_EXECUTABLE", Path(sys.executable).parent / "dynamics_server_node")
    server = subprocess.Popen([str(executable), "--ros-args", "-r", f"__node:={NODE}", "-p",
                               f"robot_description_file:={TALOS}", "-p", "floating_base:=true"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        rclpy.init()
        cases = requests(model)
        node, clients = client(sorted({service for service, _, _ in cases.values()}), "latency_client")
        print(f"TALOS ({model.nv} coordinates, floating base); dynamics server in its own process, this client "
              f"in another; round trip in ms over {arguments.calls} calls (100 for the trajectory) after 20 "
              "warm-up calls; core: the same computation in this process; callback: the server's time in its "
              "callback (mean over the service's calls, from /diagnostics)")
        print(f"{'request':42s} {'p50':>8s} {'p99':>8s} {'max':>8s} {'core':>8s} {'callback':>8s}")
        for label, (service, request, compute) in cases.items():
            calls = 100 if "trajectory" in label else arguments.calls
            for _ in range(20):
                call(node, clients[service], request)
                compute()
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                call(node, clients[service], request)
                times.append(time.perf_counter() - start)
            core = []
            for _ in range(min(calls, 200)):
                start = time.perf_counter()
                compute()
                core.append(time.perf_counter() - start)
            times, core = np.array(times) * 1e3, np.array(core) * 1e3
            callback = float(server_diagnostics(node).get(f"{service}_us_mean", "nan")) * 1e-3
            print(f"{label:42s} {np.percentile(times, 50):8.3f} {np.percentile(times, 99):8.3f} "
                  f"{times.max():8.3f} {np.median(core):8.3f} {callback:8.3f}")
        node.destroy_node()
        rclpy.shutdown()

        context = multiprocessing.get_context("spawn")  # fresh interpreters: their own rclpy
        for count in (1, 4):
            start, results = context.Event(), context.Queue()
            processes = [context.Process(target=throughput, args=(arguments.seconds, start, results, i))
                         for i in range(count)]
            for process in processes:
                process.start()
            time.sleep(8.0)  # the clients load and find the service
            start.set()
            totals = [results.get(timeout=arguments.seconds + 60) for _ in processes]
            for process in processes:
                process.join(10)
            print(f"forward_dynamics throughput, {count} client process{'es' if count > 1 else ''} calling back to "
                  f"back for {arguments.seconds:g} s: {sum(totals) / arguments.seconds:.0f} answers/s "
                  f"(per client: {', '.join(str(t) for t in totals)} calls)")
    finally:
        server.send_signal(2)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()


if __name__ == "__main__":
    main()
