"""The dynamics server over real DDS, in its own process, asked by real
service clients of this test's node: every service against the core computed
here, on Panda (fixed base) and TALOS (floating base); every kind of bad
request answered with success false and a reason while the node keeps
serving; four concurrent clients."""
from __future__ import annotations

import threading
import time

import mbs_dynamics as mbs
import numpy as np
import pytest

from helpers import close
from oracles import random_state, robot_path
from ros_processes import NodeProcess, executable, wait_for_node

SOLES = ("left_sole_link", "right_sole_link")
SERVICES = ("forward_dynamics", "inverse_dynamics", "impact", "dynamics_terms", "inverse_dynamics_trajectory",
            "rollout")


class Server:
    """One dynamics server process and a client per service, on `test_node`."""

    def __init__(self, test_node, robot: str, name: str, *parameters: str, floating_base: bool = False):
        from mbs_dynamics_interfaces import srv

        self.model = mbs.Model.from_urdf_file(robot_path(robot), floating_base=floating_base)
        self.name, self.node = name, test_node
        self.process = NodeProcess([
            executable("dynamics_server_node"), "--ros-args", "-r", f"__node:={name}",
            "-p", f"robot_description_file:={robot_path(robot)}", "-p", f"floating_base:={str(floating_base).lower()}",
            "-p", "diagnostics_period:=0.2", *[a for p in parameters for a in ("-p", p)]])
        kinds = {"forward_dynamics": srv.ForwardDynamics, "inverse_dynamics": srv.InverseDynamics,
                 "impact": srv.Impact, "dynamics_terms": srv.DynamicsTerms,
                 "inverse_dynamics_trajectory": srv.InverseDynamicsTrajectory, "rollout": srv.Rollout}
        self.kinds = kinds
        self.clients = {service: test_node.create_client(kind, f"/{name}/{service}")
                        for service, kind in kinds.items()}

    def wait_ready(self):
        self.process.wait_for(f"\\[{self.name}\\]: serving the dynamics of")
        wait_for_node(self.node, self.name)
        for service, client in self.clients.items():
            assert client.wait_for_service(timeout_sec=60), f"{service} not available"

    def request(self, service: str):
        return self.kinds[service].Request()

    def call(self, service: str, request, timeout: float = 10.0):
        import rclpy

        future = self.clients[service].call_async(request)
        rclpy.spin_until_future_complete(self.node, future, timeout_sec=timeout)
        assert future.done(), f"{service} did not answer; output:\n{self.process.output}"
        return future.result()

    def set_parameter(self, name: str, value):
        import rclpy
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        client = self.node.create_client(SetParameters, f"/{self.name}/set_parameters")
        assert client.wait_for_service(timeout_sec=60)
        future = client.call_async(SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()]))
        rclpy.spin_until_future_complete(self.node, future, timeout_sec=60)
        self.node.destroy_client(client)
        return future.result().results[0]

    def diagnostics(self, timeout: float = 5.0) -> dict:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray

        received = []
        subscription = self.node.create_subscription(DiagnosticArray, "/diagnostics", received.append, 10)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                rclpy.spin_once(self.node, timeout_sec=0.05)
                for array in received:
                    for status in array.status:
                        if status.name == f"/{self.name}: dynamics server":  # the fully qualified node name
                            return {kv.key: kv.value for kv in status.values}
        finally:
            self.node.destroy_subscription(subscription)
        raise AssertionError("no diagnostics")


@pytest.fixture(scope="module")
def client_node(ros_context):
    import os
    import random

    from rclpy.node import Node

    node = Node(f"mbs_server_test_{os.getpid()}_{random.randrange(1 << 30)}")
    yield node
    node.destroy_node()


@pytest.fixture(scope="module")
def panda(client_node):
    server = Server(client_node, "panda", "server_panda")
    yield server
    assert server.process.interrupt() == 0, server.process.output


@pytest.fixture(scope="module")
def talos(client_node):
    server = Server(client_node, "talos", "server_talos", floating_base=True)
    yield server
    assert server.process.interrupt() == 0, server.process.output


@pytest.fixture(scope="module")
def servers(panda, talos):
    for server in (panda, talos):  # started together, made ready together
        server.wait_ready()
    return {"panda": panda, "talos": talos}


# --- requests ----------------------------------------------------------------


def joint_names(model):
    return [name for name in model.joint_names if name != "root_joint"]


def fill_joint_state(message, model, q, v=None, tau=None, order=None):
    """A sensor_msgs/JointState of the model's joints, in `order` (indices into
    the model's joint names)."""
    names = joint_names(model)
    order = range(len(names)) if order is None else order
    message.name = [names[i] for i in order]
    message.position = [float(q[model.q_index(names[i])]) for i in order]
    if v is not None:
        message.velocity = [float(v[model.v_index(names[i])]) for i in order]
    if tau is not None:
        message.effort = [float(tau[model.v_index(names[i])]) for i in order]
    return message


def base_state(q, v):
    from mbs_dynamics_interfaces.msg import BaseState

    state = BaseState()
    state.pose.position.x, state.pose.position.y, state.pose.position.z = (float(x) for x in q[:3])
    o = state.pose.orientation
    o.x, o.y, o.z, o.w = (float(x) for x in q[3:7])
    t = state.twist
    t.angular.x, t.angular.y, t.angular.z = (float(x) for x in v[:3])
    t.linear.x, t.linear.y, t.linear.z = (float(x) for x in v[3:6])
    return state


def contact(frame, kind="point", point=(0.0, 0.0, 0.0), friction=0.0, normal=(0.0, 0.0, 0.0)):
    from mbs_dynamics_interfaces.msg import Contact

    message = Contact(frame=frame, kind=Contact.POINT if kind == "point" else Contact.FRAME,
                      friction_coefficient=float(friction))  # an int would arrive as NaN
    message.point.x, message.point.y, message.point.z = point
    message.normal.x, message.normal.y, message.normal.z = normal
    return message


def state_request(server, service, q, v=None, tau=None, order=None, contacts=()):
    request = server.request(service)
    fill_joint_state(request.joint_state, server.model, q, v, tau, order)
    if server.model.floating_base:
        request.base_state = [base_state(q, v if v is not None else np.zeros(server.model.nv))]
    if contacts:
        request.contacts = list(contacts)
    return request


def by_name(names, values) -> dict:
    return dict(zip(names, values, strict=True))


def joint_part(model, names, values):
    """The entries of `values` (over the model's joints, by `names`) as a vector over v, base zero."""
    out = np.zeros(model.nv)
    for name, value in zip(names, values, strict=True):
        out[model.v_index(name)] = value
    return out


def accel_message(a):
    """geometry_msgs/Accel of a base acceleration [angular; linear]."""
    from geometry_msgs.msg import Accel

    accel = Accel()
    accel.angular.x, accel.angular.y, accel.angular.z = a[:3]
    accel.linear.x, accel.linear.y, accel.linear.z = a[3:6]
    return accel


def vector6(first, second):
    return np.array([first.x, first.y, first.z, second.x, second.y, second.z])


def wrench_array(wrench):
    """[n; f] of a ContactWrench (POINT: f only)."""
    return vector6(wrench.wrench.torque, wrench.wrench.force)


def talos_state(model, rng):
    q, v, tau = random_state(model, rng)
    q[:3] = (0.1, -0.2, 1.0)
    return q, 0.3 * v, tau


# --- each service against the core ---------------------------------------


def test_forward_dynamics_matches_the_core(servers):
    rng = np.random.default_rng(60)
    panda, talos = servers["panda"], servers["talos"]
    model = panda.model
    for _ in range(5):
        q, v, tau = random_state(model, rng)
        order = rng.permutation(len(joint_names(model)))
        response = panda.call("forward_dynamics", state_request(panda, "forward_dynamics", q, v, tau, order))
        assert response.success, response.message
        assert list(response.joint_names) == joint_names(model)
        close(joint_part(model, response.joint_names, response.accelerations), mbs.forward_dynamics(model, q, v, tau))
    # velocities and efforts omitted: zero
    response = panda.call("forward_dynamics", state_request(panda, "forward_dynamics", q))
    close(joint_part(model, response.joint_names, response.accelerations),
          mbs.forward_dynamics(model, q, np.zeros(model.nv), np.zeros(model.nv)))
    # a fixed-base arm holding its hand at a point: contact forward dynamics
    request = state_request(panda, "forward_dynamics", q, v, tau, contacts=[contact("panda_hand", point=(0, 0, 0.1))])
    response = panda.call("forward_dynamics", request)
    assert response.success, response.message
    a, (force,) = mbs.contact_forward_dynamics(model, q, v, tau, [mbs.PointContact("panda_hand", (0, 0, 0.1))])
    close(joint_part(model, response.joint_names, response.accelerations), a)
    close(wrench_array(response.contact_wrenches[0]), np.r_[0, 0, 0, force])
    assert response.contact_wrenches[0].frame == "panda_hand"

    model = talos.model
    for k in range(3):
        q, v, tau = talos_state(model, rng)
        tau[:6] = rng.normal(size=6) * (k > 0)  # a wrench on the base from the request
        request = state_request(talos, "forward_dynamics", q, v, tau)
        if k > 0:
            from geometry_msgs.msg import Wrench

            wrench = Wrench()
            wrench.torque.x, wrench.torque.y, wrench.torque.z = tau[:3]
            wrench.force.x, wrench.force.y, wrench.force.z = tau[3:6]
            request.base_wrench = [wrench]
        response = talos.call("forward_dynamics", request)
        assert response.success, response.message
        a = mbs.forward_dynamics(model, q, v, tau)
        close(joint_part(model, response.joint_names, response.accelerations)[6:], a[6:])
        close(vector6(response.base_acceleration.angular, response.base_acceleration.linear), a[:6])
    # standing on both soles, the left one's contact frame moved to the sole's centre
    offset = (0.01, 0.0, -0.005)
    tau[:6] = 0.0  # no base wrench in this request
    request = state_request(talos, "forward_dynamics", q, v, tau, contacts=[
        contact(SOLES[0], "frame", offset), contact(SOLES[1], "frame")])
    response = talos.call("forward_dynamics", request)
    assert response.success and response.message == "", response.message
    a, forces = mbs.contact_forward_dynamics(model, q, v, tau, [mbs.FrameContact(SOLES[0], offset),
                                                                mbs.FrameContact(SOLES[1])])
    close(joint_part(model, response.joint_names, response.accelerations)[6:], a[6:])
    close(vector6(response.base_acceleration.angular, response.base_acceleration.linear), a[:6])
    for wrench, force in zip(response.contact_wrenches, forces, strict=True):
        close(wrench_array(wrench), force)
    assert response.contact_wrenches[0].point.x == offset[0]


def test_inverse_dynamics_matches_the_core(servers):
    rng = np.random.default_rng(61)
    panda, talos = servers["panda"], servers["talos"]
    model = panda.model
    q, v, a = random_state(model, rng)
    order = rng.permutation(len(joint_names(model)))
    request = state_request(panda, "inverse_dynamics", q, v, order=order)
    names = list(request.joint_state.name)
    request.accelerations = [float(a[model.v_index(n)]) for n in names]
    response = panda.call("inverse_dynamics", request)
    assert response.success, response.message
    close(joint_part(model, response.joint_names, response.efforts), mbs.inverse_dynamics(model, q, v, a))
    response = panda.call("inverse_dynamics", state_request(panda, "inverse_dynamics", q))  # v, a omitted: g(q)
    close(joint_part(model, response.joint_names, response.efforts), mbs.gravity_torques(model, q))

    model = talos.model
    q, v, a = talos_state(model, rng)
    request = state_request(talos, "inverse_dynamics", q, v)
    request.accelerations = [float(a[model.v_index(n)]) for n in request.joint_state.name]
    request.base_acceleration = [accel_message(a)]
    response = talos.call("inverse_dynamics", request)
    assert response.success, response.message
    tau = mbs.inverse_dynamics(model, q, v, a)
    close(joint_part(model, response.joint_names, response.efforts)[6:], tau[6:])
    close(vector6(response.base_wrench.torque, response.base_wrench.force), tau[:6])
    # standing on both soles with friction cones about tilted normals
    q = model.neutral_configuration()
    q[2] = 1.0
    v, a = np.zeros(model.nv), 0.1 * rng.normal(size=model.nv)
    normals = [(0.0, 0.1, 1.0), (0.0, -0.1, 1.0)]
    request = state_request(talos, "inverse_dynamics", q, v, contacts=[
        contact(sole, "frame", friction=0.7, normal=n) for sole, n in zip(SOLES, normals, strict=True)])
    request.accelerations = [float(a[model.v_index(n)]) for n in request.joint_state.name]
    request.base_acceleration = [accel_message(a)]
    response = talos.call("inverse_dynamics", request, timeout=30)
    assert response.success, response.message
    solution = mbs.contact_inverse_dynamics(model, q, v, a, [mbs.FrameContact(s) for s in SOLES],
                                            friction=[0.7, 0.7], normal=normals)
    close(joint_part(model, response.joint_names, response.efforts)[6:], solution[0][6:], 1e-6)
    close(vector6(response.base_wrench.torque, response.base_wrench.force), np.zeros(6), 1e-6)
    for wrench, force in zip(response.contact_wrenches, solution[1], strict=True):
        close(wrench_array(wrench), force, 1e-6)
    # independent: the contact wrenches as external forces leave the efforts to the joints, nothing to the base
    f_ext = {w.frame: wrench_array(w) for w in response.contact_wrenches}
    close(mbs.inverse_dynamics(model, q, v, a, f_ext=f_ext),
          joint_part(model, response.joint_names, response.efforts), 1e-6)


def test_impact_matches_the_core(servers):
    rng = np.random.default_rng(62)
    talos = servers["talos"]
    model = talos.model
    q, v, _ = talos_state(model, rng)
    request = state_request(talos, "impact", q, v, contacts=[contact(s, "frame") for s in SOLES]
                            + [contact("arm_left_7_link", "point", (0.0, 0.0, -0.1))])
    request.restitution = 0.4
    response = talos.call("impact", request)
    assert response.success, response.message
    contacts = [mbs.FrameContact(s) for s in SOLES] + [mbs.PointContact("arm_left_7_link", (0.0, 0.0, -0.1))]
    v_plus, impulses = mbs.impact(model, q, v, contacts, 0.4)
    close(joint_part(model, response.joint_names, response.velocities)[6:], v_plus[6:])
    close(vector6(response.base_twist.angular, response.base_twist.linear), v_plus[:6])
    for wrench, impulse in zip(response.impulses, impulses, strict=True):
        close(wrench_array(wrench), impulse if impulse.size == 6 else np.r_[0, 0, 0, impulse])
    # the contacts' velocities reverse with the restitution: an independent check
    for frame in SOLES:
        close(mbs.frame_velocity(model, q, v_plus, frame), -0.4 * mbs.frame_velocity(model, q, v, frame))


def test_dynamics_terms_match_the_core(servers):
    rng = np.random.default_rng(63)
    for robot, frames in (("panda", ["panda_hand", "panda_link4"]), ("talos", list(SOLES))):
        server = servers[robot]
        model = server.model
        q, v, _ = talos_state(model, rng) if robot == "talos" else random_state(model, rng)
        for representation in ("", "body", "spatial", "hybrid", "mixed"):
            request = state_request(server, "dynamics_terms", q, v)
            request.frames, request.jacobian_representation = frames, representation
            response = server.call("dynamics_terms", request)
            assert response.success, response.message
            n = response.nv
            assert n == model.nv and list(response.joint_names) == list(model.joint_names)
            assert list(response.velocity_index) == [model.v_index(j) for j in model.joint_names]
            close(np.reshape(response.mass_matrix, (n, n)), mbs.mass_matrix(model, q))
            close(response.nonlinear_effects, mbs.nonlinear_effects(model, q, v))
            close(response.gravity_torques, mbs.gravity_torques(model, q))
            close(np.reshape(response.centroidal_momentum_matrix, (6, n)), mbs.centroidal_momentum_matrix(model, q))
            jacobians = np.reshape(response.frame_jacobians, (len(frames), 6, n))
            for J, frame in zip(jacobians, frames, strict=True):
                close(J, mbs.frame_jacobian(model, q, frame, representation or "hybrid"))
            # the terms assemble the equations of motion: M a + h = inverse dynamics
            a = rng.normal(size=n)
            close(np.reshape(response.mass_matrix, (n, n)) @ a + np.asarray(response.nonlinear_effects),
                  mbs.inverse_dynamics(model, q, v, a), 1e-9)


def test_inverse_dynamics_trajectory_and_its_effort_limits(servers):
    from trajectory_msgs.msg import JointTrajectoryPoint

    panda = servers["panda"]
    model = panda.model
    names = joint_names(model)
    rng = np.random.default_rng(64)
    count = 1000
    t = np.linspace(0.0, 2.0, count)[:, None]
    amplitude, frequency = rng.uniform(0.1, 0.4, model.nv), rng.uniform(0.2, 1.0, model.nv)
    q0 = np.array([0.5 * (model.lower_position_limit[i] + model.upper_position_limit[i]) for i in range(model.nq)])
    Q = q0 + amplitude * np.sin(2 * np.pi * frequency * t)
    V = amplitude * 2 * np.pi * frequency * np.cos(2 * np.pi * frequency * t)
    A = -amplitude * (2 * np.pi * frequency) ** 2 * np.sin(2 * np.pi * frequency * t)
    order = rng.permutation(len(names))
    request = panda.request("inverse_dynamics_trajectory")
    request.trajectory.joint_names = [names[i] for i in order]
    columns = [model.v_index(names[i]) for i in order]
    for k in range(count):
        request.trajectory.points.append(JointTrajectoryPoint(
            positions=Q[k, columns].tolist(), velocities=V[k, columns].tolist(),
            accelerations=(30.0 * A[k, columns]).tolist() if k >= count - 50 else A[k, columns].tolist()))
    A[count - 50:] *= 30.0  # the last points too fast for the motors
    response = panda.call("inverse_dynamics_trajectory", request)
    assert response.success, response.message
    efforts = np.reshape(response.efforts, (count, len(names)))
    expected = np.array([mbs.inverse_dynamics(model, Q[k], V[k], A[k]) for k in range(count)])
    close(efforts, expected[:, [model.v_index(n) for n in response.joint_names]])
    limits = np.array([model.effort_limit[model.v_index(n)] for n in response.joint_names])
    over = {(int(k), response.joint_names[j]) for k, j in zip(*np.nonzero(np.abs(efforts) > limits), strict=True)}
    assert over and all(k >= count - 50 for k, _ in over)
    got = set(zip(response.violation_points, response.violation_joints, strict=True))
    assert got == over
    for k, joint, effort, limit in zip(response.violation_points, response.violation_joints,
                                       response.violation_efforts, response.violation_limits, strict=True):
        assert limit == model.effort_limit[model.v_index(joint)] and abs(effort) > limit
        assert effort == efforts[k, response.joint_names.index(joint)]
    assert f"{len(over)} efforts exceed the URDF effort limits" in response.message


# --- bad requests ----------------------------------------------------------


def test_every_bad_request_says_what_is_wrong_and_the_node_keeps_serving(servers):
    rng = np.random.default_rng(65)
    panda, talos = servers["panda"], servers["talos"]
    q, v, tau = random_state(panda.model, rng)
    qt, vt, taut = talos_state(talos.model, rng)

    def panda_fd(**changes):
        request = state_request(panda, "forward_dynamics", q, v, tau)
        for field, value in changes.items():
            setattr(request.joint_state, field, value)
        return request

    def talos_request(service, q=qt, contacts=()):
        request = state_request(talos, service, q, vt, contacts=contacts)
        if service == "impact":
            request.restitution = 0.0
        return request

    names = list(panda_fd().joint_state.name)
    positions = list(panda_fd().joint_state.position)
    n = len(names)
    unit = qt.copy()
    unit[3:7] *= 1.1
    nearly = qt.copy()
    nearly[3:7] *= 1.0005
    fixed_with_base = panda_fd()
    fixed_with_base.base_state = [base_state(qt, vt)]
    floating_without_base = talos_request("forward_dynamics")
    floating_without_base.base_state = []
    too_many = panda.request("inverse_dynamics_trajectory")
    too_many.trajectory.joint_names = names
    bad_terms = state_request(panda, "dynamics_terms", q)
    bad_terms.jacobian_representation = "local"
    unknown_terms_frame = state_request(panda, "dynamics_terms", q)
    unknown_terms_frame.frames = ["panda_hand", "gripper_tip"]
    contacts_on_fixed = state_request(panda, "inverse_dynamics", q, contacts=[contact("panda_hand")])
    one_foot = talos_request("inverse_dynamics", contacts=[contact(SOLES[0], "point", friction=0.5)])
    bad_restitution = talos_request("impact", contacts=[contact(SOLES[0], "frame")])
    bad_restitution.restitution = 1.5
    cases = [
        (panda, "forward_dynamics", panda_fd(name=names[:-1] + ["gripper"]),
         r"names joints model 'panda' does not have: \['gripper'\]"),
        (panda, "forward_dynamics", panda_fd(name=names[:-1], position=positions[:-1]), r"lacks joints \["),
        (panda, "forward_dynamics", panda_fd(position=positions[:-1]), f"has {n - 1} values for {n} joint names"),
        (panda, "forward_dynamics", panda_fd(velocity=[0.0]), f"velocity has 1 values for {n} joint names"),
        (panda, "forward_dynamics", panda_fd(effort=[0.0] * (n + 1)), f"effort has {n + 1} values for {n} joint"),
        (panda, "forward_dynamics", panda_fd(position=[float("nan")] + positions[1:]), "non-finite value"),
        (panda, "forward_dynamics", panda_fd(velocity=[float("inf")] * n), "non-finite value"),
        (panda, "forward_dynamics", panda_fd(name=names[:-1] + [names[0]]), "joint names repeat"),
        (panda, "forward_dynamics", fixed_with_base, "has a fixed base: base_state must be empty"),
        (talos, "forward_dynamics", floating_without_base, "base_state .* is required"),
        (talos, "forward_dynamics", talos_request("forward_dynamics", unit),
         r"quaternion \(x, y, z, w\) has norm 1.1, not 1"),
        (talos, "forward_dynamics", talos_request("forward_dynamics", contacts=[contact("left_foot_sole")]),
         "contacts\\[0\\]: model 'talos' has no frame 'left_foot_sole'"),
        (talos, "forward_dynamics", talos_request("forward_dynamics", contacts=[contact(SOLES[0], "frame")] * 2),
         "rank-deficient: their 12 constraint rows have rank 6"),
        (talos, "impact", talos_request("impact", contacts=[contact(SOLES[0], "point")] * 2),
         "rank-deficient: their 6 constraint rows have rank 3"),
        (talos, "impact", talos_request("impact"), "an impact needs at least one contact"),
        (talos, "impact", bad_restitution, r"restitution must be in \[0, 1\], got 1.5"),
        (talos, "forward_dynamics",
         talos_request("forward_dynamics", contacts=[contact(SOLES[0], "frame", friction=-1)]),
         "negative friction coefficient"),
        (talos, "forward_dynamics",
         talos_request("forward_dynamics", contacts=[contact(SOLES[0], point=(np.nan, 0, 0))]),
         "non-finite values"),
        (panda, "inverse_dynamics", contacts_on_fixed, "has a fixed base: contacts need a floating base"),
        (talos, "inverse_dynamics", one_foot, "the contacts cannot balance the base wrench"),
        (panda, "dynamics_terms", bad_terms, "jacobian_representation must be one of"),
        (panda, "dynamics_terms", unknown_terms_frame, r"has no frames \['gripper_tip'\]"),
        (panda, "inverse_dynamics_trajectory", too_many, "the trajectory has no points"),
    ]
    from mbs_dynamics_interfaces.msg import Contact

    odd_kind = talos_request("forward_dynamics", contacts=[contact(SOLES[0])])
    odd_kind.contacts[0].kind = 7
    cases.append((talos, "forward_dynamics", odd_kind, f"has kind 7: use POINT \\({Contact.POINT}\\) or FRAME"))
    import re

    for server, service, request, message in cases:
        response = server.call(service, request)
        assert not response.success, (service, message)
        assert re.search(message, response.message), (message, response.message)
        # the answer carries nothing but the reason
        for field in ("joint_names", "accelerations", "efforts", "velocities", "mass_matrix"):
            assert not len(getattr(response, field, [])), field
        # and the node serves the next good request
        good = server.call("forward_dynamics", state_request(server, "forward_dynamics",
                                                             q if server is panda else qt))
        assert good.success, good.message
    # a quaternion just off unit length (estimator drift) is normalised
    response = talos.call("forward_dynamics", talos_request("forward_dynamics", nearly))
    assert response.success
    qn = nearly.copy()
    qn[3:7] /= np.linalg.norm(qn[3:7])
    close(joint_part(talos.model, response.joint_names, response.accelerations)[6:],
          mbs.forward_dynamics(talos.model, qn, vt, np.zeros(talos.model.nv))[6:])
    # redundant contacts answered when allowed, with the minimum-norm forces, said
    assert talos.set_parameter("allow_rank_deficient_contacts", True).successful
    response = talos.call("forward_dynamics", talos_request("forward_dynamics",
                                                            contacts=[contact(SOLES[0], "frame")] * 2))
    assert response.success and "the forces are the minimum-norm solution" in response.message
    close(wrench_array(response.contact_wrenches[0]), wrench_array(response.contact_wrenches[1]), 1e-9)
    assert talos.set_parameter("allow_rank_deficient_contacts", False).successful
    # a trajectory longer than allowed; parameters refused with a reason
    result = talos.set_parameter("contact_method", "lagrange")
    assert not result.successful and "contact_method must be one of" in result.reason
    assert panda.set_parameter("max_trajectory_points", 2).successful
    from trajectory_msgs.msg import JointTrajectoryPoint

    too_many.trajectory.points = [JointTrajectoryPoint(positions=positions)] * 3
    response = panda.call("inverse_dynamics_trajectory", too_many)
    assert not response.success and "the request has 3 points: at most 2 (max_trajectory_points)" in response.message
    too_many.trajectory.points = [JointTrajectoryPoint(positions=positions),
                                  JointTrajectoryPoint(positions=positions, velocities=[np.nan] * n)]
    response = panda.call("inverse_dynamics_trajectory", too_many)
    assert not response.success and "trajectory point 1 velocities has a non-finite value" in response.message
    assert panda.set_parameter("max_trajectory_points", 100000).successful
    # every refusal counted
    counts = panda.diagnostics()
    assert int(counts["refused"]) >= 13 and int(counts["inverse_dynamics_trajectory_refused"]) == 3
    assert panda.process.process.poll() is None and talos.process.process.poll() is None


# --- concurrency ------------------------------------------------------------


def test_four_concurrent_clients_get_their_own_answers(servers):
    """4 clients x 500 calls, interleaved on one server (mixed services): every
    answer equals the core's for that client's own request."""
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.node import Node

    talos = servers["talos"]
    model = talos.model
    rng = np.random.default_rng(66)
    clients, calls = 4, 500
    nodes = [Node(f"concurrent_client_{i}_{rng.integers(1 << 30)}") for i in range(clients)]
    executor = MultiThreadedExecutor(num_threads=4)
    for node in nodes:
        executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    errors: list[str] = []

    def run(index: int):
        node = nodes[index]
        local = np.random.default_rng(100 + index)
        fd = node.create_client(talos.kinds["forward_dynamics"], f"/{talos.name}/forward_dynamics")
        terms = node.create_client(talos.kinds["dynamics_terms"], f"/{talos.name}/dynamics_terms")
        assert fd.wait_for_service(timeout_sec=60) and terms.wait_for_service(timeout_sec=60)
        for k in range(calls):
            q, v, tau = talos_state(model, local)
            tau[:6] = 0.0
            use_terms = k % 5 == 4
            request = state_request(talos, "dynamics_terms" if use_terms else "forward_dynamics", q, v, tau)
            if use_terms:
                request.joint_state.effort = []
            done = threading.Event()
            future = (terms if use_terms else fd).call_async(request)
            future.add_done_callback(lambda _, done=done: done.set())
            if not done.wait(60):
                errors.append(f"client {index} call {k}: no answer")
                return
            response = future.result()
            if use_terms:
                error = np.abs(np.asarray(response.nonlinear_effects) - mbs.nonlinear_effects(model, q, v)).max()
            else:
                got = joint_part(model, response.joint_names, response.accelerations)
                got[:6] = vector6(response.base_acceleration.angular, response.base_acceleration.linear)
                expected = mbs.forward_dynamics(model, q, v, tau)
                error = np.abs(got - expected).max() / max(1.0, np.abs(expected).max())
            if not response.success or not error < 1e-9:
                errors.append(f"client {index} call {k}: success {response.success}, error {error:.3g}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    elapsed = time.monotonic() - start
    executor.shutdown()
    for node in nodes:
        node.destroy_node()
    assert not errors, errors[:5]
    counts = talos.diagnostics()
    assert int(counts["forward_dynamics_calls"]) >= clients * calls * 4 // 5
    assert int(counts["dynamics_terms_calls"]) >= clients * calls // 5
    print(f"{clients} x {calls} calls in {elapsed:.1f} s")


# --- hostile requests: bounded, refused with a reason, cheap ones keep flowing ---------------------


def test_huge_values_are_refused_not_answered_with_nan(servers):
    """Velocities of 1e200 or accelerations of 1e308 were answered success: true with NaN."""
    panda, talos = servers["panda"], servers["talos"]
    rng = np.random.default_rng(67)
    q, v, tau = random_state(panda.model, rng)
    huge = np.full(panda.model.nv, 1e200)
    response = panda.call("forward_dynamics", state_request(panda, "forward_dynamics", q, huge, tau))
    assert not response.success and "too large" in response.message, response.message
    request = state_request(panda, "inverse_dynamics", q, v)
    request.accelerations = [1e308] * len(request.joint_state.name)
    response = panda.call("inverse_dynamics", request)
    assert not response.success and "too large" in response.message, response.message
    qt, vt, _ = talos_state(talos.model, rng)
    request = state_request(talos, "impact", qt, vt * 1e200, contacts=[contact(SOLES[0])])
    response = talos.call("impact", request)
    assert not response.success and "too large" in response.message, response.message
    request = state_request(talos, "dynamics_terms", qt, vt * 1e200)
    response = talos.call("dynamics_terms", request)
    assert not response.success and "too large" in response.message, response.message
    # and the parameters that would let a NaN through are bounded
    assert not panda.set_parameter("quaternion_tolerance", 2.0).successful
    assert panda.call("forward_dynamics", state_request(panda, "forward_dynamics", q, v, tau)).success


def test_request_sizes_are_bounded_and_cheap_requests_keep_flowing(servers):
    """40,000 names (one repeated) cost O(N^2) to refuse and three such requests
    held a cheap one for 61 s; 1000 contacts took 16 s and three starved the rest."""
    panda, talos = servers["panda"], servers["talos"]
    rng = np.random.default_rng(68)
    q, v, tau = random_state(panda.model, rng)
    cheap = state_request(panda, "forward_dynamics", q, v, tau)
    names = state_request(panda, "inverse_dynamics", q, v)
    names.joint_state.name = [f"joint_{k}" for k in range(39_999)] + ["joint_0"]
    names.joint_state.position = [0.0] * 40_000
    qt, vt, taut = talos_state(talos.model, rng)
    contacts = state_request(talos, "forward_dynamics", qt, vt, taut,
                             contacts=[contact(SOLES[k % 2], point=(0.001 * k, 0.0, 0.0)) for k in range(1000)])
    trajectory = panda.request("inverse_dynamics_trajectory")
    trajectory.trajectory.joint_names = list(cheap.joint_state.name)
    from trajectory_msgs.msg import JointTrajectoryPoint

    point = JointTrajectoryPoint(positions=list(cheap.joint_state.position))
    trajectory.trajectory.points = [point] * 20_000

    import rclpy

    def call_all(calls, gap=0.0):
        """Send every (server, service, request), `gap` seconds after the first;
        the responses and the seconds each took from the first's sending."""
        started, futures = time.monotonic(), []
        for k, (server, service, request) in enumerate(calls):
            futures.append(server.clients[service].call_async(request))
            if k == 0 and gap:
                while time.monotonic() < started + gap:
                    rclpy.spin_once(panda.node, timeout_sec=0.01)
        answered = {}
        deadline = started + 60
        while len(answered) < len(futures) and time.monotonic() < deadline:
            rclpy.spin_once(panda.node, timeout_sec=0.01)
            for k, future in enumerate(futures):
                if future.done() and k not in answered:
                    answered[k] = (future.result(), time.monotonic() - started)
        assert len(answered) == len(futures), f"{len(futures) - len(answered)} calls unanswered"
        return [answered[k] for k in range(len(futures))]

    results = call_all([(panda, "inverse_dynamics", names)] * 3 + [(panda, "forward_dynamics", cheap)])
    for response, _ in results[:3]:
        assert not response.success and "40000 joint names: at most 4096" in response.message, response.message
    response, seconds = results[3]
    assert response.success and seconds < 20.0, seconds  # held for 61 s once
    response, seconds = call_all([(talos, "forward_dynamics", contacts)])[0]
    assert not response.success and "the request has 1000 contacts: at most 16 (max_contacts)" in response.message
    assert seconds < 10.0, seconds
    assert panda.set_parameter("max_trajectory_points", 100_000).successful
    response, _ = call_all([(panda, "inverse_dynamics_trajectory", trajectory)])[0]
    assert response.success and len(response.efforts) == 20_000 * len(cheap.joint_state.name)
    # large requests one at a time (rclpy serves one request of a service at a time; these are two services):
    # one arriving meanwhile is refused as busy, and a cheap one is answered before the large one ends.
    # Friction cones for 24 contacts: about a second of SLSQP (max_contacts allows 16 by default).
    assert talos.set_parameter("max_contacts", 24).successful
    feet = [f"{side}_sole_link" for side in ("left", "right")]
    slow = state_request(talos, "inverse_dynamics", qt, vt, contacts=[
        contact(feet[k % 2], point=(0.02 * (k // 2 % 4) - 0.03, 0.02 * (k // 8) - 0.02, 0.0), friction=0.8,
                normal=(0.0, 0.0, 1.0)) for k in range(24)])
    terms = state_request(talos, "dynamics_terms", qt)
    terms.frames = [talos.model.frame_names[-1]] * 500
    results = call_all([(talos, "inverse_dynamics", slow), (talos, "dynamics_terms", terms),
                        (talos, "forward_dynamics", state_request(talos, "forward_dynamics", qt, vt))], gap=0.2)
    (large, large_seconds), (refused, _), (answered, cheap_seconds) = results
    assert large_seconds > 0.3, large_seconds  # long enough for the others to arrive meanwhile
    assert not refused.success and refused.message.startswith(
        "busy: another large request is being answered; this one (500 frames) is refused"), refused.message
    assert answered.success and cheap_seconds < large_seconds, (cheap_seconds, large_seconds)
    assert talos.set_parameter("max_contacts", 16).successful
    assert talos.call("dynamics_terms", terms).success  # alone, it is answered
    assert int(panda.diagnostics()["inverse_dynamics_refused"]) >= 3
    assert int(talos.diagnostics()["dynamics_terms_refused"]) >= 1


def rollout_request(server, q0, efforts, **fields):
    """A ~/rollout request of len(q0) rollouts of efforts.shape[1] steps."""
    request = server.request("rollout")
    request.rollouts, request.steps = q0.shape[0], efforts.shape[1]
    request.positions = q0.ravel().tolist()
    request.efforts = efforts.ravel().tolist()
    for name, value in fields.items():
        setattr(request, name, value)
    return request


def test_rollouts_match_the_core_and_bad_batches_are_refused_while_it_keeps_serving(servers):
    from geometry_msgs.msg import Point

    panda, talos = servers["panda"], servers["talos"]
    rng = np.random.default_rng(32)
    model = panda.model
    q0 = np.array([random_state(model, rng)[0] for _ in range(3)])
    efforts = rng.standard_normal((3, 20, model.nv))
    request = rollout_request(panda, q0, efforts, stride=4)
    response = panda.call("rollout", request, timeout=120.0)  # the first may load the kernels
    assert response.success, response.message
    core = mbs.rollout(model, q0, None, efforts, world=mbs.World(ground=None), stride=4)
    assert response.joint_names == list(model.joint_names) and (response.nq, response.nv) == (model.nq, model.nv)
    assert np.array_equal(np.reshape(response.positions, (3, 5, model.nq)), core.q)
    assert np.array_equal(np.reshape(response.velocities, (3, 5, model.nv)), core.v)
    assert list(response.status) == [0, 0, 0] and list(response.steps_taken) == [20, 20, 20]

    # TALOS standing on its sole corners, PD actuators toward its stance: the ground carries it
    talos_model = talos.model
    stance = talos_model.neutral_configuration()
    corners = [(x, y, 0.0) for x in (-0.1, 0.1) for y in (-0.065, 0.065)]
    stance[2] -= min(mbs.frame_pose(talos_model, stance, sole)[2, 3] for sole in SOLES)
    starts = np.tile(stance, (2, 1))
    steps = 10
    joints = list(talos_model.joint_names[1:])
    targets = np.zeros((2, steps, talos_model.nv))
    targets[:, :, 6:] = stance[7:]
    frames = [sole for sole in SOLES for _ in corners]
    request = rollout_request(talos, starts, np.zeros((2, steps, talos_model.nv)), ground=True, friction=1.0,
                              contact_frames=frames,
                              contact_points=[Point(x=x, y=y, z=z) for _ in SOLES for x, y, z in corners],
                              actuated_joints=joints, stiffness=[500.0] * len(joints), damping=[5.0] * len(joints),
                              position_targets=targets.ravel().tolist())
    response = talos.call("rollout", request, timeout=120.0)
    assert response.success, response.message
    world = mbs.World(mbs.Ground(friction=1.0), tuple(mbs.PointContact(f, c) for f in SOLES for c in corners))
    core = mbs.rollout(talos_model, starts, None, np.zeros((2, steps, talos_model.nv)), position_targets=targets,
                       world=world, actuators=mbs.Actuators(joints, [500.0] * len(joints), [5.0] * len(joints)))
    assert np.array_equal(np.reshape(response.positions, core.q.shape), core.q)
    forces = np.reshape(response.contact_forces, (2, steps, len(frames), 3))
    assert np.array_equal(forces, core.contact_forces)
    close(forces[:, -1].sum(axis=1)[:, 2], [talos_model.total_mass * 9.81] * 2, 0.5)

    normal = rollout_request(panda, q0, efforts)
    nan_efforts = efforts.copy()
    nan_efforts[1, 3, 2] = np.nan
    bad_quaternion = starts.copy()
    bad_quaternion[1, 3:7] *= 1.5
    assert panda.set_parameter("max_rollout_steps", 50).successful
    refusals = [
        (panda, rollout_request(panda, q0, efforts), "the request has 60 rollout steps (3 rollouts x 20 steps): at "
                                                     "most 50 (max_rollout_steps)"),
        (panda, rollout_request(panda, q0[:2], efforts[:2, :5], rollouts=3),
         f"positions has {2 * model.nq} values: 3 rollouts x nq = {3 * model.nq} expected"),
        (panda, rollout_request(panda, q0[:2], nan_efforts[:2]),
         "efforts has a non-finite value (nan) at rollout 1, step 3, coordinate 2"),
        (panda, rollout_request(panda, q0[:2], efforts[:2], velocities=[0.0] * 5),
         f"velocities has 5 values: 2 rollouts x nv = {2 * model.nv} expected (or none)"),
        (panda, rollout_request(panda, q0[:2], efforts[:2], stride=3), "stride 3 does not divide the 20 steps"),
        (panda, rollout_request(panda, q0[:2], efforts[:2], dt=float("nan")), "dt must be in (0, 1] s"),
        (panda, rollout_request(panda, q0[:2], efforts[:2], ground=True, contact_frames=["nowhere"]),
         "has no frames ['nowhere']"),
        (panda, rollout_request(panda, q0[:2], efforts[:2], contact_frames=["panda_hand"]),
         "contact points need a ground"),
        (panda, rollout_request(panda, q0[:2], efforts[:2], actuated_joints=["panda_joint1"], stiffness=[1.0]),
         "actuators need a stiffness and a damping per joint: 1 joints, 1 stiffnesses, 0 dampings"),
        (panda, rollout_request(panda, q0[:2], efforts[:2, :0]), "rollouts and steps must be at least 1, got 2 and 0"),
        (talos, rollout_request(talos, bad_quaternion, np.zeros((2, 3, talos_model.nv))),
         "positions of rollout 1: the quaternion of joint 'root_joint' has norm 1.5"),
    ]
    for server, request, message in refusals:
        started = time.monotonic()
        response = server.call("rollout", request, timeout=60.0)
        assert not response.success and message in response.message, response.message
        assert not response.positions and time.monotonic() - started < 30.0
    assert panda.set_parameter("max_rollout_steps", 100_000).successful
    response = panda.call("rollout", normal, timeout=60.0)  # it keeps serving
    assert response.success and np.array_equal(np.reshape(response.positions, (3, 20, model.nq)),
                                                mbs.rollout(model, q0, None, efforts,
                                                            world=mbs.World(ground=None)).q)
