"""The inverse dynamics node over real DDS, in its own process: joint states
of Panda and TALOS published from this test's node; every effort checked
against the core computed here; reference and differentiate modes; a floating
base with and without contacts; bad input counted while the node keeps
answering."""
from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import close
from oracles import random_state, robot_path
from ros_processes import (
    SOLES,
    Exchange,
    check_realtime_threads,
    efforts_by_name,
    executable,
    fifo_threads,
    joint_values,
    publish_robot_description,
    set_parameters,
    stamp_asker,
    stamp_key,
    wait_for_node,
)
from ros_processes import start_inverse_dynamics as start

import mbs_dynamics as mbs

def test_efforts_and_momentum_match_the_core_on_panda(start_process, test_node):
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    command_joints = [name for name in model.joint_names][::-1]
    node, exchange = start(start_process, test_node, "panda", "id_panda",
                           f"command_joints:=[{','.join(repr(n) for n in command_joints)}]")
    rng = np.random.default_rng(1)
    for k in range(20):
        q, v, _ = random_state(model, rng)
        names, positions, velocities = joint_values(model, q, v)
        order = rng.permutation(len(names))  # any order, and a name the model does not know
        message = exchange.joint_state([names[i] for i in order] + ["conveyor"],
                                       [positions[i] for i in order] + [0.0],
                                       [velocities[i] for i in order] + [1.0], 100.0 + 0.001 * k)
        reply = exchange.ask(message)
        assert reply is not None, node.output
        expected = mbs.inverse_dynamics(model, q, v, np.zeros(model.nv))
        got = efforts_by_name(reply)
        close([got[n] for n in model.joint_names], expected, 1e-9)
        exchange.spin(0.02)
        close(exchange.received["command"][-1].data, expected[::-1], 1e-9)
        momentum = exchange.wait_for("momentum", stamp_key(message))
        h = mbs.centroidal_momentum(model, q, v)
        close([momentum.angular_momentum.x, momentum.angular_momentum.y, momentum.angular_momentum.z,
               momentum.linear_momentum.x, momentum.linear_momentum.y, momentum.linear_momentum.z], h, 1e-9)
        close([momentum.com_position.x, momentum.com_position.y, momentum.com_position.z],
              mbs.center_of_mass(model, q), 1e-9)
        assert momentum.header.frame_id == model.description.root
    assert node.output.count("ignoring joints the model does not have: ['conveyor']") == 1
    counts = exchange.counts()
    assert counts["published"] == "20" and counts["dropped"] == "0"
    # command_joints changed at run time: ~/effort_command in the new order and size
    subset = command_joints[:3]
    assert set_parameters(test_node, "/id_panda", command_joints=subset)["command_joints"][0]
    q, v, _ = random_state(model, rng)
    message = exchange.joint_state(*joint_values(model, q, v), 200.0)
    assert exchange.ask(message) is not None, node.output
    expected = mbs.inverse_dynamics(model, q, v, np.zeros(model.nv))
    deadline = time.monotonic() + 30.0
    while len(exchange.received["command"][-1].data) != len(subset) and time.monotonic() < deadline:
        exchange.spin(0.02)
    close(exchange.received["command"][-1].data, [expected[model.v_index(name)] for name in subset], 1e-9)
    assert node.interrupt() == 0


def talos_state(model, rng):
    q, v, _ = random_state(model, rng)
    q[:3] = (0.1, -0.2, 1.0)
    return q, 0.3 * v


def test_floating_base_with_and_without_contacts_on_talos(start_process, test_node):
    model = mbs.Model.from_urdf_file(robot_path("talos"), floating_base=True)
    free_node, free = start(start_process, test_node, "talos", "id_talos", "floating_base:=true")
    contact_node, contact = start(start_process, test_node, "talos", "id_talos_feet", "floating_base:=true",
                                  f"contact_frames:=[{','.join(SOLES)}]", "contact_type:=frame")
    rng = np.random.default_rng(2)
    names, positions, velocities = joint_values(model, *talos_state(model, rng))
    assert free.ask(free.joint_state(names, positions, velocities, 5.0), timeout=1.0) is None  # no odom yet
    for k in range(5):
        q, v = talos_state(model, rng)
        names, positions, velocities = joint_values(model, q, v)
        frame = "odom" if k < 3 else "world"  # the momentum follows the odometry's frame
        for exchange in (free, contact):
            exchange.send_odometry(q, v, frame)
        free.spin(0.1)
        stamp = 10.0 + k
        reply = free.ask(free.joint_state(names, positions, velocities, stamp))
        tau = mbs.inverse_dynamics(model, q, v, np.zeros(model.nv))
        got = efforts_by_name(reply)
        close([got[n] for n in names], tau[6:], 1e-9)
        momentum = free.wait_for("momentum", stamp_key(reply))
        assert momentum.header.frame_id == frame and momentum.total_mass == model.total_mass
        close([momentum.angular_momentum.x, momentum.angular_momentum.y, momentum.angular_momentum.z,
               momentum.linear_momentum.x, momentum.linear_momentum.y, momentum.linear_momentum.z],
              mbs.centroidal_momentum(model, q, v), 1e-9)
        wrench = free.wait_for("wrench", stamp_key(reply)).wrench
        close([wrench.torque.x, wrench.torque.y, wrench.torque.z, wrench.force.x, wrench.force.y, wrench.force.z],
              tau[:6], 1e-9)
        reply = contact.ask(contact.joint_state(names, positions, velocities, stamp))
        tau, _ = mbs.contact_inverse_dynamics(model, q, v, np.zeros(model.nv),
                                              [mbs.FrameContact(s) for s in SOLES])
        got = efforts_by_name(reply)
        close([got[n] for n in names], tau[6:], 1e-9)
    assert free.counts()["dropped_no_odometry"] == "1"
    assert not contact.received["wrench"]  # with contacts the base is balanced: no base wrench
    assert free_node.interrupt() == 0 and contact_node.interrupt() == 0


def test_reference_mode_and_its_fallback_when_stale(start_process, test_node):
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    node, exchange = start(start_process, test_node, "panda", "id_reference", "acceleration_source:=reference",
                           "reference_timeout:=0.5")
    rng = np.random.default_rng(3)
    q, v, _ = random_state(model, rng)
    q_ref, v_ref, a_ref = random_state(model, rng)
    names, positions, velocities = joint_values(model, q, v)
    reference = exchange.messages["JointTrajectory"]()
    reference.joint_names = names[:-1]  # one joint left to its measured state, zero acceleration
    from trajectory_msgs.msg import JointTrajectoryPoint

    point = JointTrajectoryPoint()
    point.positions = [q_ref[model.q_index(n)] for n in names[:-1]]
    point.velocities = [v_ref[model.v_index(n)] for n in names[:-1]]
    point.accelerations = [a_ref[model.v_index(n)] for n in names[:-1]]
    reference.points = [point]
    exchange.reference.publish(reference)
    exchange.spin(0.1)
    reply = exchange.ask(exchange.joint_state(names, positions, velocities, 1.0))
    last = model.v_index(names[-1])
    q_used, v_used, a_used = q_ref.copy(), v_ref.copy(), a_ref.copy()
    q_used[model.q_index(names[-1])], v_used[last], a_used[last] = q[model.q_index(names[-1])], v[last], 0.0
    got = efforts_by_name(reply)
    close([got[n] for n in names], mbs.inverse_dynamics(model, q_used, v_used, a_used), 1e-9)
    exchange.spin(0.6)  # the reference goes stale: the measured state, zero accelerations
    reply = exchange.ask(exchange.joint_state(names, positions, velocities, 2.0))
    got = efforts_by_name(reply)
    close([got[n] for n in names], mbs.inverse_dynamics(model, q, v, np.zeros(model.nv)), 1e-9)
    node.wait_for("the reference is .* s old \\(reference_timeout 0.5 s\\): using zero accelerations")
    assert node.interrupt() == 0


def test_differentiate_mode_follows_a_velocity_ramp(start_process, test_node):
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    node, exchange = start(start_process, test_node, "panda", "id_differentiate",
                           "acceleration_source:=differentiate", "differentiation_cutoff:=50.0")
    rng = np.random.default_rng(4)
    q, v0, slope = random_state(model, rng)
    names, positions, _ = joint_values(model, q, v0)
    for k in range(150):  # v = v0 + slope t at 1 kHz stamps
        v = v0 + slope * 0.001 * k
        reply = exchange.ask(exchange.joint_state(names, positions, joint_values(model, q, v)[2], 3.0 + 0.001 * k))
        assert reply is not None
    got = efforts_by_name(reply)  # the filter has settled on the slope: e^(-150 x 0.24) left
    close([got[n] for n in names], mbs.inverse_dynamics(model, q, v, slope), 1e-8)
    assert node.interrupt() == 0


def test_bad_input_is_counted_and_the_node_keeps_answering(start_process, test_node):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    from std_msgs.msg import String


    model = mbs.Model.from_urdf_file(robot_path("panda"))
    description = publish_robot_description(test_node, open(robot_path("panda")).read())
    node, exchange = start(start_process, test_node, "panda", "id_bad", source="topic")
    rng = np.random.default_rng(5)
    q, v, _ = random_state(model, rng)
    names, positions, velocities = joint_values(model, q, v)
    bad = [
        exchange.joint_state(names[1:], positions[1:], velocities[1:], 1.0),  # a joint missing
        exchange.joint_state(names, positions[:-1], velocities, 1.1),  # wrong length
        exchange.joint_state(names, positions, velocities[:3], 1.2),  # wrong length
        exchange.joint_state(names, [np.nan] + positions[1:], velocities, 1.3),  # NaN
        exchange.joint_state(names + [names[0]], positions + [0.0], velocities + [0.0], 1.4),  # a name twice
    ]
    for message in bad:
        assert exchange.ask(message, timeout=0.5) is None
    good = exchange.joint_state(names, positions, velocities, 2.0)
    assert exchange.ask(good) is not None
    assert exchange.ask(exchange.joint_state(names, positions, velocities, 1.9), timeout=0.5) is None  # backwards
    # parameters: a wrong value is refused with a reason, a right one taken
    client = test_node.create_client(SetParameters, "/id_bad/set_parameters")
    assert client.wait_for_service(timeout_sec=60)
    import rclpy

    for value, successful in (("bogus", False), ("differentiate", True), ("zero", True)):
        future = client.call_async(SetParameters.Request(
            parameters=[Parameter("acceleration_source", value=value).to_parameter_msg()]))
        rclpy.spin_until_future_complete(test_node, future, timeout_sec=60)
        result = future.result().results[0]
        assert result.successful == successful, result.reason
        if not successful:
            assert "acceleration_source must be one of" in result.reason
    # clamping to the URDF effort limits, reported
    future = client.call_async(SetParameters.Request(
        parameters=[Parameter("clamp_to_effort_limits", value=True).to_parameter_msg()]))
    rclpy.spin_until_future_complete(test_node, future, timeout_sec=60)
    assert future.result().results[0].successful
    fast = [30.0 * x for x in velocities]
    reply = exchange.ask(exchange.joint_state(names, positions, fast, 2.5))
    limits = np.array([model.effort_limit[model.v_index(n)] for n in names])
    unclamped = mbs.inverse_dynamics(model, q, 30.0 * v, np.zeros(model.nv))
    assert np.any(np.abs(unclamped) > limits)
    close([efforts_by_name(reply)[n] for n in names], np.clip(unclamped, -limits, limits), 1e-9)
    node.wait_for(r"efforts clamped to the URDF limits: \[")
    # a new robot_description at run time: refused, said
    description.publish(String(data=open(robot_path("ur5")).read()))
    reply = exchange.ask(exchange.joint_state(names, positions, velocities, 3.0))
    expected = np.clip(mbs.inverse_dynamics(model, q, v, np.zeros(model.nv)), -limits, limits)
    close([efforts_by_name(reply)[n] for n in names], expected, 1e-9)
    node.wait_for("a new robot_description arrived: ignored")
    counts = exchange.counts()
    assert counts["dropped_missing_joint"] == "1"
    assert counts["dropped_invalid"] == "4"
    assert counts["dropped_stamp_backwards"] == "1"
    assert counts["published"] == "3" and counts["clamped"] == "1"
    assert "lacks joints ['panda_joint1']" in node.output
    assert node.process.poll() is None
    assert node.interrupt() == 0


def test_unusable_parameters_stop_the_node_with_a_clear_message(start_process):
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-p",
                          f"robot_description_file:={robot_path('panda')}", "-p", "command_joints:=[elbow]"])
    node.wait_for("command_joints: unknown joints \\['elbow'\\].*; stopping")
    assert node.wait_exit() == 1
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-p",
                          f"robot_description_file:={robot_path('panda')}", "-p", "contact_frames:=[panda_hand]"])
    node.wait_for("contact_frames need a floating base.*; stopping")
    assert node.wait_exit() == 1


def test_reference_age_is_measured_in_sim_time(start_process, test_node):
    """With use_sim_time the reference's age is /clock time: a second of wall
    time without /clock moving leaves it fresh; /clock moving past the timeout
    makes it stale."""
    from rosgraph_msgs.msg import Clock
    from trajectory_msgs.msg import JointTrajectoryPoint

    model = mbs.Model.from_urdf_file(robot_path("panda"))
    clock = test_node.create_publisher(Clock, "/clock", 10)

    def tick(seconds):
        message = Clock()
        message.clock.sec, message.clock.nanosec = int(seconds), int(round((seconds % 1) * 1e9))
        clock.publish(message)

    tick(10.0)
    node, exchange = start(start_process, test_node, "panda", "id_sim_time", "use_sim_time:=true",
                           "acceleration_source:=reference", "reference_timeout:=0.5")
    rng = np.random.default_rng(6)
    q, v, a = random_state(model, rng)
    names, positions, velocities = joint_values(model, q, v)
    for _ in range(5):
        tick(10.0)
        exchange.spin(0.05)
    reference = exchange.messages["JointTrajectory"]()
    reference.joint_names = names
    reference.points = [JointTrajectoryPoint(accelerations=[a[model.v_index(n)] for n in names])]
    exchange.reference.publish(reference)
    exchange.spin(0.2)
    tick(10.2)
    exchange.spin(1.0)  # a second of wall time; 0.2 s of sim time
    got = efforts_by_name(exchange.ask(exchange.joint_state(names, positions, velocities, 10.2)))
    close([got[n] for n in names], mbs.inverse_dynamics(model, q, v, a), 1e-9)
    tick(11.0)
    exchange.spin(0.2)
    got = efforts_by_name(exchange.ask(exchange.joint_state(names, positions, velocities, 11.0)))
    close([got[n] for n in names], mbs.inverse_dynamics(model, q, v, np.zeros(model.nv)), 1e-9)
    node.wait_for("the reference is 1 s old")
    assert node.interrupt() == 0


# --- hostile input ------------------------------------------------------------------


def test_stamps_that_go_back_for_good_are_followed(start_process, test_node):
    """One joint_states stamped far in the future made the node drop every later
    message until the clock caught up; a simulator's ~/reset did the same."""
    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    node, exchange = start(start_process, test_node, "ur5", "id_stamps")
    q, v, _ = random_state(model, np.random.default_rng(8))
    ask = stamp_asker(exchange, *joint_values(model, q, v), timeout=30.0)

    assert ask(10.0) is not None
    assert ask(1e9) is not None  # a bogus stamp, 30 years ahead: taken, it is all the node knows
    assert ask(10.01) is not None  # time went back 1e9 s: followed at once
    node.wait_for("joint_states stamps went back from 1000000000.000000 s to 10.010000 s")
    assert ask(10.5) is not None and ask(10.2, timeout=0.5) is None  # a late message is still dropped
    assert ask(10.6) is not None
    assert ask(11.0) is not None and ask(10.9, timeout=0.5) is None and ask(10.91, timeout=0.5) is None
    assert ask(10.92) is not None  # the third late message in a row: the 11.0 before them was the odd one
    counts = exchange.counts()
    assert counts["dropped_stamp_backwards"] == "3" and counts["stamp_jumps_back"] == "2", counts
    assert node.interrupt() == 0


def test_huge_values_and_many_names_are_dropped_and_cost_little(start_process, test_node):
    """Velocities of 1e155 gave NaN efforts, published as valid (and passed
    through clamp_to_effort_limits); 20,000 names, one repeated, blocked the
    node for 5 s (checked for a repeat in O(N^2)). 10,000 here: a best-effort
    message of 20,000 (480 kB) may not arrive at all."""
    from ros_processes import set_parameters

    model = mbs.Model.from_urdf_file(robot_path("panda"))
    node, exchange = start(start_process, test_node, "panda", "id_huge")
    assert set_parameters(test_node, "/id_huge", clamp_to_effort_limits=True)["clamp_to_effort_limits"][0]
    q, v, _ = random_state(model, np.random.default_rng(9))
    names, positions, velocities = joint_values(model, q, v)
    assert exchange.ask(exchange.joint_state(names, positions, [1e155] * len(names), 1.0), timeout=1.0) is None
    node.wait_for("dropped: joint_states: the inverse dynamics of model 'panda' cannot be computed: the inputs are too "
                  "large")
    many = [f"joint_{k}" for k in range(9_999)] + ["joint_0"]
    started = time.monotonic()
    exchange.joint_states.publish(exchange.joint_state(many, [0.0] * len(many), [], 2.0))
    exchange.joint_states.publish(exchange.joint_state(many[:4000] + many[:2], [0.0] * 4002, [], 2.1))
    reply = exchange.ask(exchange.joint_state(names, positions, velocities, 3.0))
    assert reply is not None and time.monotonic() - started < 10.0
    assert all(np.isfinite(reply.effort))
    counts = exchange.counts()  # the dropped warning is throttled: the counts say what came after
    assert counts["published"] == "1" and counts["dropped_too_many_names"] == "1", counts
    assert counts["dropped_invalid"] == "2", counts
    assert "nan" not in node.output.lower().replace("nanosec", "")
    assert node.interrupt() == 0


def ur5_with_friction(path) -> str:
    """The UR5's URDF with Coulomb friction 1.5 N m and damping 0.4 N m s/rad on every joint."""
    with open(robot_path("ur5"), encoding="utf-8") as file:
        text = file.read().replace('<dynamics damping="0.0" friction="0.0"/>',
                                   '<dynamics damping="0.4" friction="1.5"/>')
    path.write_text(text)
    return str(path)


def test_computed_torque_with_friction_compensation_and_armature(start_process, test_node, tmp_path):
    """acceleration_source reference with gains: the measured state, a = a_ref +
    K_d (v_ref - v) + K_p (q_ref - q); friction compensated at the reference's
    velocities; the armature of two joints set by parameters. Then the gains and
    the compensation changed at run time, bad values refused with a reason."""
    from trajectory_msgs.msg import JointTrajectoryPoint

    urdf = ur5_with_friction(tmp_path / "ur5.urdf")
    armature = {"elbow_joint": 0.3, "wrist_1_joint": 0.1}
    model = mbs.Model.from_urdf_file(urdf, armature=armature)
    assert model.friction.min() == 1.5
    names = [n for n in model.joint_names]
    gain_joints = names[::-1]
    kp = [10.0 * (k + 1) for k in range(len(names))]
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-r", "__node:=id_tracking",
                          "-p", f"robot_description_file:={urdf}", "-p", "acceleration_source:=reference",
                          "-p", "friction_compensation:=reference", "-p", "friction_smoothing:=0.05",
                          "-p", f"armature_joints:=[{','.join(armature)}]",
                          "-p", f"armature:=[{','.join(str(v) for v in armature.values())}]",
                          "-p", f"gain_joints:=[{','.join(gain_joints)}]", "-p", f"position_gains:={kp}",
                          "-p", "velocity_gains:=[7.0]", "-p", "reference_timeout:=10.0"])
    node.wait_for("\\[id_tracking\\]: inverse dynamics of")
    wait_for_node(test_node, "id_tracking")
    exchange = Exchange(test_node, "id_tracking")
    exchange.wait_connected()
    rng = np.random.default_rng(12)
    q, v, _ = random_state(model, rng)
    q_ref, v_ref, a_ref = random_state(model, rng)
    reference = exchange.messages["JointTrajectory"]()
    reference.joint_names = names
    reference.points = [JointTrajectoryPoint(positions=list(q_ref), velocities=list(v_ref),
                                             accelerations=list(a_ref))]
    exchange.reference.publish(reference)
    exchange.spin(0.2)
    gains = np.zeros(model.nv)
    gains[[model.v_index(n) for n in gain_joints]] = kp
    a = a_ref + 7.0 * (v_ref - v) + gains * (q_ref - q)
    expected = mbs.inverse_dynamics(model, q, v, a) + mbs.joint_friction_torques(model, v_ref, 0.05)
    got = efforts_by_name(exchange.ask(exchange.joint_state(names, q, v, 1.0)))
    close([got[n] for n in names], expected, 1e-9)
    # the armature is in there: without it the torques differ by armature * a
    assert abs(got["elbow_joint"] - (expected - model.armature * a)[model.v_index("elbow_joint")]) > 0.01

    results = set_parameters(test_node, "/id_tracking", position_gains=[1.0, 2.0], friction_compensation="sometimes",
                             velocity_gains=[-1.0])
    assert results["position_gains"][0] is False and "2 values for 6 joints" in results["position_gains"][1]
    assert results["friction_compensation"][0] is False and "'sometimes'" in results["friction_compensation"][1]
    assert results["velocity_gains"][0] is False and ">= 0" in results["velocity_gains"][1]
    results = set_parameters(test_node, "/id_tracking", position_gains=[0.0], velocity_gains=[0.0],
                             friction_compensation="measured")
    assert all(ok for ok, _ in results.values())
    # no gains: feedforward at the reference state, friction at the measured velocities
    got = efforts_by_name(exchange.ask(exchange.joint_state(names, q, v, 2.0)))
    close([got[n] for n in names], mbs.inverse_dynamics(model, q_ref, v_ref, a_ref)
          + mbs.joint_friction_torques(model, v, 0.05), 1e-9)
    assert node.interrupt() == 0


def test_armature_parameters_that_do_not_fit_stop_the_node(start_process):
    for parameters, message in ((["armature_joints:=[elbow_joint]", "armature:=[0.1, 0.2]"],
                                 "armature_joints names 1 joints, armature has 2 values"),
                                (["armature_joints:=[elbow]", "armature:=[0.1]"], "no revolute or prismatic joint 'elbow'"),
                                (["armature_joints:=[elbow_joint]", "armature:=[-0.1]"], "must be finite, >= 0")):
        node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-p",
                              f"robot_description_file:={robot_path('ur5')}",
                              *[a for p in parameters for a in ("-p", p)]])
        node.wait_for(f"{message}.*; stopping")
        assert node.wait_exit() == 1


def test_serialized_messages_deserialize_to_the_messages_they_stand_for():
    """The node publishes its outputs as bytes (ros.serialized): with the
    stamp and the float64 fields written in place, they are the message the
    middleware would have made, whatever else it carries (names, frame)."""
    from array import array

    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import WrenchStamped
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from mbs_dynamics.ros.serialized import SerializedMessage
    from mbs_dynamics_interfaces.msg import CentroidalMomentum

    names = [f"joint_{k}" * (k % 4 + 1) for k in range(32)]  # names of every length: any padding
    efforts = SerializedMessage(JointState(name=names, effort=array("d", bytes(8 * 32))), ["effort"])
    values = np.random.default_rng(3).normal(size=32)
    for k, stamp in enumerate((Time(sec=1, nanosec=2), Time(sec=2**31 - 1, nanosec=999_999_999))):
        efforts.values["effort"][:] = values + k
        efforts.set_stamp(stamp)
        message = deserialize_message(efforts.data(), JointState)
        assert list(message.name) == names and message.header.stamp == stamp
        assert list(message.effort) == list(values + k) and not message.position and not message.velocity
    momentum = CentroidalMomentum(total_mass=90.25)
    momentum.header.frame_id = "odom"
    fields = ["com_position", "com_velocity", "linear_momentum", "angular_momentum"]
    serialized = SerializedMessage(momentum, fields)
    for k, field in enumerate(fields):
        serialized.values[field][:] = (k, k + 0.5, -k)
    message = deserialize_message(serialized.data(), CentroidalMomentum)
    assert message.total_mass == 90.25 and message.header.frame_id == "odom"
    assert [[getattr(message, f).x, getattr(message, f).y, getattr(message, f).z] for f in fields] == [
        [k, k + 0.5, -k] for k in range(len(fields))]
    wrench = WrenchStamped()
    wrench.header.frame_id = "base_link"
    serialized = SerializedMessage(wrench, ["wrench.torque", "wrench.force"])
    serialized.values["wrench.force"][:] = (1.0, 2.0, 3.0)
    message = deserialize_message(serialized.data(), WrenchStamped)
    assert (message.wrench.force.x, message.wrench.force.y, message.wrench.force.z) == (1.0, 2.0, 3.0)
    assert (message.wrench.torque.x, message.header.frame_id) == (0.0, "base_link")
    empty = SerializedMessage(Float64MultiArray(data=array("d")), ["data"], stamp=None)
    assert list(deserialize_message(empty.data(), Float64MultiArray).data) == []



def test_a_stream_read_from_its_bytes_gives_the_messages_deserialized():
    """Inputs taken as bytes (ros.serialized.SerializedStream): each message
    equals rclpy's deserialization of it, whether it follows the last one's
    layout (read in place) or not (other names, frame, sizes: deserialized);
    bytes that are no message raise."""
    from array import array

    from nav_msgs.msg import Odometry
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    from mbs_dynamics.ros.serialized import SerializedStream
    from mbs_dynamics.ros.whole_body_messages import JOINT_STATES_FIELDS, ODOMETRY_FIELDS

    rng = np.random.default_rng(4)
    joint_states = SerializedStream(JointState, JOINT_STATES_FIELDS)
    odometry = SerializedStream(Odometry, ODOMETRY_FIELDS)
    names = [f"joint_{k}" * (k % 3 + 1) for k in range(12)]
    in_place, last, last_position = 0, None, None  # messages read in place: the last one's object, updated
    for k in range(8):
        size = 11 if k == 5 else 12  # a message of another layout, then back
        message = JointState(name=names[:size] if k != 3 else names[::-1], position=rng.normal(size=size).tolist(),
                             velocity=rng.normal(size=size).tolist() if k != 6 else [])
        message.header.stamp.sec, message.header.stamp.nanosec = 1_700_000_000 + k, 999_999_999 - k
        message.header.frame_id = "" if k != 4 else "robot"
        taken = joint_states.message(serialize_message(message))
        assert taken == message
        if taken is last:  # read in place: its float64[] arrays refilled, still array('d') (rclpy's type)
            assert taken.position is last_position and isinstance(taken.position, array)
        in_place, last, last_position = in_place + (taken is last), taken, taken.position
        odom = Odometry(child_frame_id="base_link" if k != 2 else "base")
        odom.header.stamp.sec = k
        pose, twist = odom.pose.pose, odom.twist.twist
        pose.position.x, pose.orientation.x, pose.orientation.w, twist.angular.z = rng.normal(size=4)
        odom.pose.covariance[k], odom.twist.covariance[35 - k] = rng.normal(size=2)
        assert odometry.message(serialize_message(odom)) == odom
    assert in_place >= 2  # of the four that followed one of their layout (the padding may differ)
    with pytest.raises(Exception):
        joint_states.message(b"\x00\x01\x00\x00garbage")


def test_the_controller_outputs_bytes_are_its_messages():
    """The whole-body controller's contact forces and markers published as
    bytes (several stamps, indexed fields) deserialize to the messages
    built field by field, for point feet and soles, cycle after cycle."""
    from builtin_interfaces.msg import Time
    from rclpy.serialization import deserialize_message, serialize_message
    from visualization_msgs.msg import MarkerArray

    from helpers import FEET, SOLES, solo12_standing, talos_standing
    from mbs_dynamics.ros.conversions import contact_wrenches
    from mbs_dynamics.ros.whole_body_messages import (ContactForceMessages, MarkerMessages, marker_points,
                                                     whole_body_markers)
    from mbs_dynamics_interfaces.msg import Contact, ContactWrenches

    rng = np.random.default_rng(5)
    robots = ((solo12_standing(), FEET, Contact.POINT), (talos_standing(), SOLES, Contact.FRAME))
    for (model, q), frames, kind in robots:
        forces_messages, markers_messages = ContactForceMessages(frames, kind, "world"), MarkerMessages(model, "world")
        for k, active in enumerate((frames, frames[1:], frames)):
            forces = {frame: rng.normal(size=3 if kind == Contact.POINT else 6) for frame in active}
            com, reference = rng.normal(size=3), rng.normal(size=3)
            stamp = Time(sec=100 + k, nanosec=7 * k)
            message = deserialize_message(forces_messages.data(stamp, forces), ContactWrenches)
            expected = contact_wrenches([Contact(frame=frame, kind=kind) for frame in active], list(forces.values()))
            assert list(message.wrenches) == expected and message.header.stamp == stamp
            assert message.header.frame_id == "world"
            markers = markers_messages.data(q, stamp, forces, com, reference if k != 1 else None)
            origins = marker_points(model, q, forces)[::2]  # each arrow from its contact frame's origin
            assert all(np.allclose(origin, mbs.frame_pose(model, q, frame)[:3, 3], rtol=0, atol=1e-12)
                       for origin, frame in zip(origins, forces, strict=True))
            built = whole_body_markers(model, q, stamp, "world", forces, com, reference if k != 1 else None)
            # (as deserialized: rclpy's serializer leaves the padding between fields as it finds it)
            assert deserialize_message(markers, MarkerArray) == deserialize_message(serialize_message(built),
                                                                                    MarkerArray)
            assert deserialize_message(markers, MarkerArray).markers[-1].header.stamp == stamp

def test_realtime_priority_schedules_the_serving_thread_or_says_why_not(start_process, test_node):
    """realtime_priority: the one thread that serves joint_states and Fast
    DDS's (dds.*) run SCHED_FIFO at it from the first message on, no other
    (numba's workers never), or (without the permission) the node says why
    not and serves at normal priority."""
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    node, exchange = start(start_process, test_node, "panda", "id_realtime", "realtime_priority:=7")
    assert fifo_threads(node.process.pid) == []  # not before the first message
    q, v, _ = random_state(model, np.random.default_rng(4))
    for k in range(2):
        reply = exchange.ask(exchange.joint_state(*joint_values(model, q, v), 1.0 + k))
        assert reply is not None, node.output
        close([efforts_by_name(reply)[n] for n in model.joint_names],
              mbs.inverse_dynamics(model, q, v, np.zeros(model.nv)), 1e-9)
    check_realtime_threads(node, 7)
    assert node.interrupt() == 0
