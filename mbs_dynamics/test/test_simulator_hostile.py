"""The simulator node against hostile input, over real DDS in its own
process (issue 28): a reset into a raised ground, a storm of resets, absurd
commands, bad parameters at start-up and at run time, bad ~/set_state
requests. Each input is refused (or made consistent) with a message that
says what and why, the work stays bounded, and the node keeps serving."""
from __future__ import annotations

import time

import mbs_dynamics as mbs
import numpy as np
import pytest

from oracles import robot_path
from ros_processes import executable, set_parameters
from simulators import Simulator, stamp

PANDA_ARM = [f"panda_joint{k}" for k in range(1, 8)]
SOLO_JOINTS = [f"{leg}_{joint}" for leg in ("FL", "FR", "HL", "HR") for joint in ("HAA", "HFE", "KFE")]


def simulator_exits(start_process, robot, *parameters, ros_arguments=()):
    """A simulator started with `parameters` that must stop: its exit code and output."""
    process = start_process([executable("simulator_node"), "--ros-args", "-p",
                             f"robot_description_file:={robot_path(robot)}", *ros_arguments,
                             *[a for p in parameters for a in ("-p", p)]])
    code = process.wait_exit(60)
    return code, process.output


def base_state(z=0.5, quaternion=(0.0, 0.0, 0.0, 1.0), linear=(0.0, 0.0, 0.0)):
    from mbs_dynamics_interfaces.msg import BaseState

    base = BaseState()
    base.pose.position.z = float(z)
    o = base.pose.orientation
    o.x, o.y, o.z, o.w = (float(x) for x in quaternion)
    base.twist.linear.x, base.twist.linear.y, base.twist.linear.z = (float(x) for x in linear)
    return base


def odometry_after(simulator, odometry, after):
    """The newest odom stamped after `after` (simulated s)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        simulator.spin(0.05)
        if odometry and stamp(odometry[-1]) > after:
            return odometry[-1]
    raise AssertionError(f"no odom after t = {after}:\n{simulator.process.output}")


def test_a_state_inside_the_ground_is_lifted_clear_of_it(start_process, test_node):
    """Solo-12 on its collision geometry: ground_height raised to 0.3 at run
    time and then ~/reset once put the base 88 m in the air within 3 s, the log
    saying only that the world changed. Now the base is lifted onto the
    ground, at the change, at the reset, at start-up and for ~/set_state, and
    each says so; it stays on the ground."""
    from nav_msgs.msg import Odometry

    simulator = Simulator(start_process, test_node, "solo12", "sim_lift", "floating_base:=true",
                          "start_paused:=true", "initial_base_pose:=[0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 1.0]",
                          watch_states=False)
    # at start-up: the legs (0.32 m) reach below the ground
    simulator.process.wait_for(r"the initial state: link '\w+' lies 0\.\d+ m inside the ground: the base lifted "
                               r"0\.\d+ m, clear of it")
    odometry = []
    test_node.create_subscription(Odometry, "/odom", odometry.append, 10)
    assert set_parameters(test_node, "/sim_lift", ground_height=0.3)["ground_height"][0]
    simulator.process.wait_for("the world changed: ground at 0.3 m")
    simulator.process.wait_for(r"the robot where it was: link '\w+' lies 0\.\d+ m inside the ground: the base "
                               r"lifted 0\.\d+ m, clear of it")
    reset = simulator.call("reset")
    assert reset.success and reset.message.startswith("back to the initial state at t = 0; the initial state: link")
    assert "inside the ground: the base lifted" in reset.message, reset.message
    lowest = odometry_after(simulator, odometry, -1.0).pose.pose.position.z
    assert 0.3 < lowest < 0.8, lowest
    step = simulator.call("step", steps=1000)
    assert step.success, step.message
    z = odometry_after(simulator, odometry, 0.999).pose.pose.position.z
    assert 0.3 < z < 0.8, z  # on the raised ground, not flung off it
    # ~/set_state 1 m under the ground
    response = simulator.call("set_state", base_state=[base_state(z=-1.0)])
    assert response.success and "the state asked for: link" in response.message
    assert "inside the ground: the base lifted 1." in response.message, response.message
    assert simulator.call("step", steps=500).success
    z = odometry_after(simulator, odometry, 1.499).pose.pose.position.z
    assert 0.3 < z < 0.8, z
    assert simulator.process.process.poll() is None and "Traceback" not in simulator.process.output


def test_a_fixed_base_inside_a_box_is_refused(start_process, test_node):
    """A fixed base cannot be lifted: a box around one of its links is refused
    with the depth, at start-up (the node stops, one line) and at run time
    (the parameter refused, the node goes on)."""
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    centre = mbs.frame_pose(model, mbs.simulation.initial_configuration(model), "panda_link4")[:3, 3]
    box = [0.2, 0.2, 0.2, *[float(x) for x in centre], 0.0]
    code, output = simulator_exits(start_process, "panda", f"world_boxes:={box}")
    assert code == 1 and "Traceback" not in output, output
    assert "the initial state: link 'panda_link3' lies 0.0599 m inside box 0, and a fixed base cannot be lifted " \
           "clear of it; stopping" in output, output
    simulator = Simulator(start_process, test_node, "panda", "sim_box", "publish_rate:=50.0")
    successful, reason = set_parameters(test_node, "/sim_box", world_boxes=box)["world_boxes"]
    assert not successful and "inside box 0, and a fixed base cannot be lifted clear of it" in reason, reason
    away = [0.2, 0.2, 0.2, 2.0, 2.0, 0.1, 0.0]
    assert set_parameters(test_node, "/sim_box", world_boxes=away)["world_boxes"][0]
    simulator.process.wait_for("the world changed: no ground .*, 1 boxes")
    first = stamp(simulator.latest_state())
    assert stamp(simulator.latest_state(after=first + 0.2, timeout=20)) > first + 0.2  # it goes on


def test_a_storm_of_resets_is_answered(start_process, test_node):
    """200 simultaneous ~/reset calls: 18 were answered within 60 s (rclpy's
    service history of 10 lost the others). Stepping as fast as it can in calls
    up to a publication every 10 simulated seconds, the simulator answers each
    (done, or "busy" when it could not give way soon) and goes on publishing."""
    import rclpy
    from rclpy.qos import QoSProfile
    from std_srvs.srv import Trigger

    simulator = Simulator(start_process, test_node, "panda", "sim_storm", "real_time_factor:=0.0",
                          "publish_rate:=0.1")
    # the test's own client keeps every answer (with rclpy's 10, answers arriving faster than this test takes
    # them would be lost in its own reader)
    client = test_node.create_client(Trigger, "/sim_storm/reset", qos_profile=QoSProfile(depth=1000))
    assert client.wait_for_service(timeout_sec=10)
    futures = [client.call_async(Trigger.Request()) for _ in range(200)]
    deadline = time.monotonic() + 120
    while not all(future.done() for future in futures) and time.monotonic() < deadline:
        rclpy.spin_once(test_node, timeout_sec=0.05)
    answered = [future.result() for future in futures if future.done()]
    assert len(answered) == 200, f"{len(answered)} of 200 answered:\n{simulator.process.output}"
    done = [a for a in answered if a.success]
    assert all(a.message == "back to the initial state at t = 0" for a in done)
    assert all(a.message.startswith("busy: the simulation did not give way within") for a in answered
               if not a.success), {a.message for a in answered}
    assert len(done) > 100, len(done)
    # it goes on: a publication every 20 simulated ms again
    assert set_parameters(test_node, "/sim_storm", publish_rate=50.0)["publish_rate"][0]
    before = len(simulator.states)
    simulator.spin(1.0)
    assert len(simulator.states) > before + 5
    assert simulator.call("reset").success


def test_absurd_commands_are_dropped_naming_the_joint(start_process, test_node):
    """A position target of 1.7e308 paused the simulation blaming "inputs too
    large (|q| up to 1 ...)". Commands not finite or beyond 1e6 are dropped
    and counted, naming the joint and the value; the simulation runs on and
    takes the next good command."""
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    from simulators import SimulatorProcess as Node

    node = Node(start_process, test_node, [f"robot_description_file:={robot_path('panda')}",
                                           f"position_joints:={PANDA_ARM}", "command_timeout:=100.0"])
    start = node.state()
    names = PANDA_ARM
    hold = [start[joint][0] for joint in names]
    huge = list(hold)
    huge[3] = 1.7e308
    node.commands.publish(JointState(name=names, position=huge))
    node.process.wait_for(r"dropped: joint_commands: the position target of 'panda_joint4' is 1\.7e\+308: too large "
                          r"\(at most 1e\+06 in magnitude\)")
    node.commands.publish(JointState(name=names, position=[float("nan")] + hold[1:]))
    node.commands.publish(JointState(name=names, velocity=[0.0] * 3 + [1e9] + [0.0] * 3))
    efforts = node.test_node.create_publisher(Float64MultiArray, "/sim_ns/sim/effort_command", 10)
    unlimited = mbs.Model.from_urdf_file(robot_path("panda")).nv
    efforts.publish(Float64MultiArray(data=[float("inf")] * unlimited))
    counted = {}
    deadline = time.monotonic() + 20
    from diagnostic_msgs.msg import DiagnosticArray

    def take(message):
        for status in message.status:
            if status.name.startswith("/sim_ns/sim:"):
                counted.update({kv.key: kv.value for kv in status.values})

    test_node.create_subscription(DiagnosticArray, "/diagnostics", take, 10)
    while int(counted.get("dropped_invalid", 0)) < 4 and time.monotonic() < deadline:
        node.spin(0.1)
    assert counted.get("dropped_invalid") == "4", (counted, node.process.output)
    assert counted.get("simulation_errors", "0") == "0" and counted["paused"] == "False", counted
    # the next good command is taken: joint 4 moves to it
    goal = list(hold)
    goal[3] = hold[3] + 0.3
    for _ in range(3):
        node.commands.publish(JointState(name=names, position=goal))
        node.spin(0.05)
    deadline = time.monotonic() + 30
    while abs(node.state()["panda_joint4"][0] - goal[3]) > 0.02 and time.monotonic() < deadline:
        node.spin(0.2)
    assert abs(node.state()["panda_joint4"][0] - goal[3]) <= 0.02, node.process.output
    assert "the simulation stopped" not in node.process.output and "Traceback" not in node.process.output


def test_hostile_states_and_steps_are_refused_with_the_reason(start_process, test_node):
    """~/set_state with NaN, a zero quaternion, unknown joints, a base 1e300 m
    away or a twist of 1e200 (once accepted: garbage from then on); ~/step of
    2^32 - 1 steps; the real-time factor at its extremes. Each refusal says
    why; a good request is served after them."""
    from sensor_msgs.msg import JointState

    simulator = Simulator(start_process, test_node, "solo12", "sim_states", "floating_base:=true",
                          "start_paused:=true", "publish_rate:=50.0")
    nan = float("nan")
    refused = {
        "joint_state position has a non-finite value (nan) for joint 'FL_HAA'":
            {"joint_state": JointState(name=SOLO_JOINTS, position=[nan] * 12)},
        "model 'solo' has no joints ['nowhere']": {"joint_state": JointState(name=["nowhere"], position=[0.0])},
        "base_state orientation quaternion (x, y, z, w) has norm 0, not 1":
            {"base_state": [base_state(quaternion=(0.0, 0.0, 0.0, 0.0))]},
        "base_state has non-finite values": {"base_state": [base_state(quaternion=(nan, 0.0, 0.0, 1.0))]},
        "base_state position [0.0, 0.0, 1e+300]: each coordinate at most 10000 m from the origin":
            {"base_state": [base_state(z=1e300)]},
        "the velocity of 'root_joint' is 1e+200: too large (at most 1e+06 in magnitude)":
            {"base_state": [base_state(linear=(1e200, 0.0, 0.0))]},
        "joint_state: the position of 'FL_HAA' is 1e+07: too large":
            {"joint_state": JointState(name=SOLO_JOINTS, position=[1e7] * 12)},
    }
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    if np.isfinite(model.upper_position_limit[model.q_index("FL_HAA")]):  # limited: refused as outside them
        del refused["joint_state: the position of 'FL_HAA' is 1e+07: too large"]
    for message, request in refused.items():
        response = simulator.call("set_state", **request)
        assert not response.success and message in response.message, (message, response.message)
    response = simulator.call("step", steps=2**32 - 1)
    assert not response.success and "4294967295 steps: at most 1000000 per request" in response.message
    good = simulator.call("set_state", base_state=[base_state(z=0.6)])
    assert good.success and good.message == "state set at t = 0.000000 s", good.message
    assert simulator.call("step", steps=10).success
    # the real-time factor at its extremes: accepted, the services answered at each, beyond them refused
    for factor in (1000.0, 0.001):
        assert set_parameters(test_node, "/sim_states", real_time_factor=factor)["real_time_factor"][0]
        assert simulator.call("pause", data=False).success
        assert simulator.call("reset").success
        assert simulator.call("pause", data=True).success
    for factor, reason in ((1e-4, "at least 0.001"), (1001.0, "out of range")):
        successful, message = set_parameters(test_node, "/sim_states", real_time_factor=factor)["real_time_factor"]
        assert not successful and reason in message, message
    assert simulator.call("step", steps=10).success
    assert "Traceback" not in simulator.process.output


def test_unusable_parameters_are_refused_in_one_line(start_process, test_node, tmp_path):
    """world_frame '' was accepted; NaN in world_boxes was reported as "got 7
    values"; world_boxes had no cap (10^4 boxes: real-time factor 0.22, and
    anyone on the domain may set 10^5 at run time); imu_noise [.nan, .nan]
    published NaN IMU readings and 3 values paused the simulation with "too
    many values to unpack". At start-up the node stops with one line; at run
    time the parameter is refused and the node goes on."""
    nan_box = "world_boxes:=[1.0, 1.0, 1.0, 0.0, 0.0, 2.0, 0.0, 1.0, 1.0, .nan, 0.0, 0.0, 2.0, 0.0]"
    stops = {
        "world_frame:=''": "world_frame must be a tf frame id: 1 to 256 printable characters, no white space, no "
                           "leading '/'; got ''; stopping",
        nan_box: "world_boxes: box 1 (values 7 to 13) has size_z nan: each value must be finite; stopping",
        "imu_noise:=[.nan, .nan]": "imu_noise must be [gyroscope, accelerometer] standard deviations: two finite "
                                   "numbers >= 0, got [nan, nan]; stopping",
        "imu_noise:=[0.1, 0.2, 0.3]": "imu_noise must be [gyroscope, accelerometer] standard deviations: two finite "
                                      "numbers >= 0, got 3 values; stopping",
        "imu_bias:=[-1.0, 0.0]": "imu_bias must be [gyroscope, accelerometer] standard deviations: two finite "
                                 "numbers >= 0, got [-1.0, 0.0]; stopping",
        "joint_commands_topic:='bad topic'": "joint_commands_topic 'bad topic' is not a topic name: topic name must "
                                             "not contain characters other than alphanumerics",
    }
    for parameter, message in stops.items():
        code, output = simulator_exits(start_process, "ur5", parameter, "imu_links:=[tool0]")
        assert code == 1 and message in output and "Traceback" not in output, (parameter, output)
    # 1001 boxes in a params file: refused once counted, before any box is made
    boxes = [0.1, 0.1, 0.1, 3.0, 3.0, 0.05, 0.0] * 1001
    params = tmp_path / "boxes.yaml"
    params.write_text("/**:\n  ros__parameters:\n    world_boxes: [" + ", ".join(map(str, boxes)) + "]\n")
    code, output = simulator_exits(start_process, "ur5", ros_arguments=("--params-file", str(params)))
    assert code == 1 and "world_boxes holds 1001 boxes: at most 1000" in output, output
    # at run time
    from sensor_msgs.msg import Imu

    simulator = Simulator(start_process, test_node, "ur5", "sim_params", "publish_rate:=50.0",
                          "imu_links:=[tool0]", "imu_noise:=[0.01, 0.1]", "imu_bias:=[0.001, 0.01]")
    refused = {"world_frame": ("", "world_frame must be a tf frame id"),
               "world_boxes": (boxes, "world_boxes holds 1001 boxes: at most 1000")}
    refused["world_boxes_nan"] = ([1.0, 1.0, 1.0, 0.0, 0.0, 2.0, 0.0, 1.0, 1.0, float("nan"), 0.0, 0.0, 2.0, 0.0],
                                  "world_boxes: box 1 (values 7 to 13) has size_z nan")
    for name, (value, reason) in refused.items():
        parameter = name.removesuffix("_nan")
        successful, message = set_parameters(test_node, "/sim_params", **{parameter: value})[parameter]
        assert not successful and message.startswith(reason), (name, message)
    for frame in ("/world", "my world", "x" * 257):
        assert not set_parameters(test_node, "/sim_params", world_frame=frame)["world_frame"][0], frame
    assert set_parameters(test_node, "/sim_params", world_frame="map")["world_frame"][0]
    # the IMU publishes finite, noisy readings with the covariance of its noise
    readings = []
    subscription = test_node.create_subscription(Imu, "/imu/tool0", readings.append, 10)
    deadline = time.monotonic() + 20
    while len(readings) < 5 and time.monotonic() < deadline:
        simulator.spin(0.05)
    test_node.destroy_subscription(subscription)
    assert len(readings) >= 5, simulator.process.output
    for reading in readings:
        values = [reading.angular_velocity.x, reading.linear_acceleration.z]
        assert np.all(np.isfinite(values)), values
        assert reading.angular_velocity_covariance[0] == pytest.approx(1e-4)
        assert reading.linear_acceleration_covariance[8] == pytest.approx(1e-2)
    first = stamp(simulator.latest_state())
    assert stamp(simulator.latest_state(after=first + 0.2, timeout=20)) > first + 0.2
    assert "Traceback" not in simulator.process.output


# --- the core's parts -----------------------------------------------------------------------------------


def test_imu_noise_is_seeded_and_checked():
    """The IMU noise and bias, out of the node: a seed repeats the draws, the
    bias is constant per axis, the noise has its standard deviation."""
    first = mbs.sensors.ImuNoise(2, (0.1, 0.2), (0.01, 0.02), seed=7)
    again = mbs.sensors.ImuNoise(2, (0.1, 0.2), (0.01, 0.02), seed=7)
    np.testing.assert_array_equal(first.biases, again.biases)
    np.testing.assert_array_equal(first.reading(1, np.zeros(3), np.zeros(3))[0],
                                  again.reading(1, np.zeros(3), np.zeros(3))[0])
    draws = np.array([np.concatenate(first.reading(0, np.zeros(3), np.zeros(3))) for _ in range(20000)])
    np.testing.assert_allclose(draws.mean(axis=0), first.biases[0].ravel(), atol=0.01)
    np.testing.assert_allclose(draws.std(axis=0), [0.1] * 3 + [0.2] * 3, rtol=0.05)
    np.testing.assert_allclose(first.variances, [0.01, 0.04])
    assert not np.any(mbs.sensors.ImuNoise(1, (0.0, 0.0), (0.0, 0.0)).biases)
    for bad, message in (((np.nan, np.nan), r"got \[nan, nan\]"), ((1.0, 2.0, 3.0), "got 3 values"),
                         ((-1.0, 0.0), r"got \[-1.0, 0.0\]")):
        with pytest.raises(ValueError, match="noise must be .* two finite numbers >= 0, " + message):
            mbs.sensors.ImuNoise(1, bad)


def test_penetration_and_lifting_clear_of_the_ground_and_boxes():
    """The deepest point inside the ground or a box (a yawed one), and the lift
    that puts it on the surface: afterwards nothing lies inside."""
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    feet = tuple(mbs.PointContact(foot, (0.0, 0.0, 0.0)) for foot in ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"))
    q = mbs.simulation.initial_configuration(model)
    q[2] = 0.5
    lowest = min(mbs.frame_pose(model, q, foot.frame)[2, 3] for foot in feet)
    ground = mbs.World(mbs.Ground(height=0.3), feet)
    deepest = mbs.simulation.penetration(model, ground, q)
    assert deepest.obstacle == "the ground" and deepest.depth == pytest.approx(0.3 - lowest)
    lifted, lift, before = mbs.simulation.lifted_clear(model, ground, q)
    assert before == deepest and lift == pytest.approx(0.3 - lowest)
    assert mbs.simulation.penetration(model, ground, lifted, 1e-12) is None
    assert min(mbs.frame_pose(model, lifted, foot.frame)[2, 3] for foot in feet) == pytest.approx(0.3)
    yaw = 0.4
    boxes = mbs.World(mbs.Ground(), feet, boxes=(mbs.Box((2.0, 2.0, 1.0), (0.0, 0.0, -0.1),
                                                         (0.0, 0.0, np.sin(yaw / 2), np.cos(yaw / 2))),))
    assert str(mbs.simulation.penetration(model, boxes, q)).endswith(f"lies {0.4 - lowest:.3g} m inside box 0")
    lifted, lift, _ = mbs.simulation.lifted_clear(model, boxes, q)
    assert lift == pytest.approx(0.4 - lowest) and mbs.simulation.penetration(model, boxes, lifted, 1e-12) is None
    clear = q.copy()
    clear[2] += 1.0
    assert mbs.simulation.lifted_clear(model, boxes, clear)[1:] == (0.0, None)
    arm = mbs.Model.from_urdf_file(robot_path("ur5"))
    hand = mbs.World(None, (mbs.PointContact("tool0", (0.0, 0.0, 0.0)),),
                     boxes=(mbs.Box((0.2, 0.2, 0.2), mbs.frame_pose(arm, np.zeros(arm.nq), "tool0")[:3, 3]),))
    with pytest.raises(ValueError, match=r"^link '\w+' lies 0.1 m inside box 0, and a fixed base cannot be lifted"):
        mbs.simulation.lifted_clear(arm, hand, np.zeros(arm.nq))


def test_an_overflowing_target_is_named_in_the_step_error():
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    simulation = mbs.Simulation(model, mbs.World(ground=None),
                                actuators=mbs.Actuators(PANDA_ARM, [100.0] * 7, [10.0] * 7))
    target = np.zeros(model.nv)
    target[model.v_index("panda_joint4")] = 1.7e308
    simulation.set_targets(target)
    with pytest.raises(ValueError, match=r"\|position targets\| up to 1.7e\+308"):
        simulation.step(None, 10)
