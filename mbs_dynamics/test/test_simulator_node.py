"""The simulator node over real DDS, in its own process: its steps equal the
core's Simulation step for step; effort commands by array and by name; the
services; bad commands counted."""
from __future__ import annotations

import time

import mbs_dynamics as mbs
import numpy as np
import pytest

from helpers import close
from oracles import robot_path
from ros_processes import executable, spin_until
from simulators import Simulator, positions, stamp


def test_steps_equal_the_core_and_the_services_work(start_process, test_node):
    from std_msgs.msg import Float64MultiArray

    model = mbs.Model.from_urdf_file(robot_path("panda"))
    simulator = Simulator(start_process, test_node, "panda", "sim_panda", "start_paused:=true",
                          "publish_rate:=1000.0")
    first = simulator.latest_state()
    assert stamp(first) == 0.0  # paused: the initial state, published meanwhile
    core = mbs.Simulation(model, mbs.World(ground=None), 1e-3)
    close(positions(model, first), core.q, 1e-15)
    response = simulator.call("step", steps=200)
    assert response.success and abs(response.time - 0.2) < 1e-9
    for _ in range(200):  # the node's steps are the core's: zero effort, the arm falls
        core.step(np.zeros(model.nv))
    state = simulator.latest_state(after=0.19)
    assert abs(stamp(state) - 0.2) < 1e-9
    close(positions(model, state), core.q, 1e-12)
    assert np.abs(core.q - mbs.simulation.initial_configuration(model)).max() > 1e-3  # it moved
    # an effort command holds it: the gravity torques where it is, at rest, by array
    from sensor_msgs.msg import JointState

    q = positions(model, state)
    hold = mbs.gravity_torques(model, q)
    assert simulator.call("set_state", joint_state=JointState(name=list(state.name),
                                                              position=list(state.position))).success
    simulator.command.publish(Float64MultiArray(data=hold.tolist()))
    simulator.spin(0.3)
    assert simulator.call("step", steps=100).success
    core.set_state(q, np.zeros(model.nv))
    for _ in range(100):
        core.step(hold)
    assert np.abs(core.q - q).max() < 1e-9  # held
    state = simulator.latest_state(after=0.29)
    close(positions(model, state), core.q, 1e-12)
    close(list(state.effort), hold, 1e-12)
    # the services: reset, refusals that say why
    assert not simulator.call("step", steps=0).success
    assert simulator.call("pause", data=False).success
    refused = simulator.call("step", steps=1)
    assert not refused.success and "not paused" in refused.message
    assert simulator.call("pause", data=True).success
    assert simulator.call("reset").success
    state = simulator.latest_state(after=-1.0)
    simulator.spin(0.2)
    assert stamp(simulator.states[-1]) == 0.0
    bad = simulator.call("set_state", joint_state=JointState(name=["panda_joint4"], position=[0.5]))
    assert not bad.success and "outside the joint limits: ['panda_joint4']" in bad.message
    bad = simulator.call("set_state", joint_state=JointState(name=["elbow"], position=[0.5]))
    assert not bad.success and "has no joints ['elbow']" in bad.message
    # bad commands: dropped, counted, the node goes on
    simulator.command.publish(Float64MultiArray(data=[1.0, 2.0]))
    simulator.command.publish(Float64MultiArray(data=[float("nan")] * model.nv))
    simulator.process.wait_for("dropped: ~/effort_command has 2 values for 8 command_joints")
    assert simulator.call("step", steps=10).success
    assert simulator.process.process.poll() is None
    assert simulator.process.interrupt() == 0, simulator.process.output


def test_solo12_stands_on_its_feet_and_the_contact_outputs_are_the_cores(start_process, test_node):
    """A floating base on the ground: Solo-12 on its four feet (contact_frames
    and contact_points) under the standing torques of contact inverse
    dynamics. The node's odom, joint_states and ~/contact_wrenches after 300
    steps are the core Simulation's; the feet carry the robot's weight."""
    from mbs_dynamics_interfaces.msg import ContactWrenches
    from nav_msgs.msg import Odometry
    from std_msgs.msg import Float64MultiArray

    from helpers import FEET, G, solo12_standing

    model, stance = solo12_standing()
    joints = list(model.joint_names[1:])
    offset = (0.0, 0.0, 0.0)
    points = tuple(mbs.PointContact(foot, offset) for foot in FEET)
    feedforward, _ = mbs.contact_inverse_dynamics(model, stance, np.zeros(model.nv), np.zeros(model.nv),
                                                  list(points), friction=0.8)
    simulator = Simulator(start_process, test_node, "solo12", "sim_solo", "start_paused:=true",
                          "publish_rate:=1000.0", "floating_base:=true", f"contact_frames:={list(FEET)}",
                          f"contact_points:={[x for _ in FEET for x in offset]}", "ground_friction:=0.8",
                          f"initial_base_pose:={[float(x) for x in stance[:7]]}",
                          f"initial_joint_names:={joints}",
                          f"initial_joint_positions:={[float(stance[model.q_index(j)]) for j in joints]}")
    odometry, wrenches = [], []
    test_node.create_subscription(Odometry, "/odom", odometry.append, 10)
    test_node.create_subscription(ContactWrenches, "/sim_solo/contact_wrenches", wrenches.append, 10)
    simulator.command.publish(Float64MultiArray(data=feedforward[6:].tolist()))
    simulator.spin(0.3)
    assert simulator.call("step", steps=300).success
    core = mbs.Simulation(model, mbs.World(mbs.Ground(friction=0.8), points), 1e-3, q=stance)
    for _ in range(300):
        core.step(feedforward)
    state = simulator.latest_state(after=0.299)
    simulator.spin(0.2)
    assert stamp(odometry[-1]) == stamp(state) == stamp(wrenches[-1]) and abs(stamp(state) - 0.3) < 1e-9
    close(positions(model, state)[7:], core.q[7:], 1e-12)
    pose, twist = odometry[-1].pose.pose, odometry[-1].twist.twist
    o = pose.orientation
    close([pose.position.x, pose.position.y, pose.position.z, o.x, o.y, o.z, o.w], core.q[:7], 1e-12)
    close([twist.angular.x, twist.angular.y, twist.angular.z, twist.linear.x, twist.linear.y, twist.linear.z],
          core.v[:6], 1e-12)
    assert odometry[-1].header.frame_id == "world" and odometry[-1].child_frame_id == model.description.root
    forces = np.array([[w.wrench.force.x, w.wrench.force.y, w.wrench.force.z] for w in wrenches[-1].wrenches])
    assert [w.frame for w in wrenches[-1].wrenches] == list(FEET)
    close(forces, core.contact_forces, 1e-9)
    close(forces.sum(axis=0), [0, 0, model.total_mass * G], 1e-6)  # standing: the feet carry it
    assert np.abs(core.q - stance).max() < 1e-6 and np.all(forces[:, 2] > 0)
    assert simulator.process.interrupt() == 0, simulator.process.output


def test_closed_loop_with_the_inverse_dynamics_node_holds_the_panda(start_process, test_node):
    """The product together over real topics: the simulator's joint_states
    into the inverse dynamics node (zero accelerations: gravity compensation),
    its ~/joint_efforts back into the simulator, 1 kHz both ways, at twice real
    time: the arm stays where it started for 10 simulated seconds. Without the
    inverse dynamics node it falls."""
    from diagnostic_msgs.msg import DiagnosticArray

    model = mbs.Model.from_urdf_file(robot_path("panda"))
    held = {"panda_joint2": 0.6, "panda_joint4": -1.5, "panda_joint6": 1.8}
    q0 = mbs.simulation.initial_configuration(model, held)
    compensation = start_process([executable("inverse_dynamics_node"), "--ros-args", "-r", "__node:=id_loop",
                                  "-p", f"robot_description_file:={robot_path('panda')}"])
    compensation.wait_for(r"\[id_loop\]: inverse dynamics of")
    simulator = Simulator(start_process, test_node, "panda", "sim_loop", "start_on_command:=true",
                          "publish_rate:=1000.0", "real_time_factor:=2",  # an integer, as a person types it
                          f"initial_joint_names:={list(held)}", f"initial_joint_positions:={list(held.values())}",
                          remaps=["/sim_loop/joint_efforts:=/id_loop/joint_efforts"], watch_states=False)
    # waiting, it publishes the initial state; the efforts for it arrive; it runs from there
    simulator.process.wait_for(r"first effort command: running from t = 0 s")
    simulated = []  # the simulated time its diagnostics report (every 0.2 s)
    test_node.create_subscription(DiagnosticArray, "/diagnostics", lambda message: simulated.extend(
        float(kv.value) for status in message.status if status.name.startswith("/sim_loop:")
        for kv in status.values if kv.key == "time"), 10)
    deadline = time.monotonic() + 60
    while not (simulated and simulated[-1] >= 10.0) and time.monotonic() < deadline:
        simulator.spin(0.1)
    paused = simulator.call("pause", data=True)
    assert paused.success
    simulator.watch_states()
    state = simulator.latest_state(after=10.0)
    q = positions(model, state)
    drift = np.abs(q - q0).max()
    print(f"closed loop: t = {stamp(state):.3f} s, joint drift {drift:.3g} rad ({paused.message})")
    stale = [line for line in simulator.process.output.splitlines() if "applying zero effort" in line]
    assert not stale, f"the commands did not keep up (joint drift {drift:.3g} rad): {stale[0]}"
    assert drift < 1e-3
    close(list(state.effort), mbs.gravity_torques(model, q), 1e-9)  # what the simulator applied: g(q)
    # the control: without the inverse dynamics node, the last command gives way to zero effort and the arm falls
    assert compensation.interrupt() == 0
    assert simulator.call("step", steps=1000).success
    simulator.process.wait_for("applying zero effort")
    state = simulator.latest_state(after=stamp(state) + 0.99)
    assert np.abs(positions(model, state) - q0).max() > 1e-2


def test_lockstep_waits_for_a_command_after_each_joint_states(start_process, test_node):
    """lockstep: after each joint_states the simulator waits for a command.
    The test answers the first 20 states once it runs: they come one after
    the other, 10 ms of simulated time apart (publish_rate 100); then it stops
    answering: the simulator waits LOCKSTEP_WAIT (1 s) at each state, steps
    on with the last command, counted and said, where at a real-time factor
    of 10 it would have published 1000 states a second."""
    import re

    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    simulator = Simulator(start_process, test_node, "panda", "sim_lockstep", "lockstep:=true", "publish_rate:=100.0",
                          "real_time_factor:=10.0", "start_paused:=true", watch_states=False)
    states, answered = [], []
    zero = Float64MultiArray(data=[0.0] * mbs.Model.from_urdf_file(robot_path("panda")).nv)

    def answer(message):
        if stamp(message) > 0.0:  # (not those published while paused)
            states.append(stamp(message))
            if len(answered) < 20:
                answered.append(stamp(message))
                simulator.command.publish(zero)

    test_node.create_subscription(JointState, "/joint_states", answer, 100)
    spin_until(test_node, lambda: simulator.command.get_subscription_count() > 0, 60, "the command matched")
    assert simulator.call("pause", data=False).success
    spin_until(test_node, lambda: len(answered) == 20, 60, "20 states answered")
    simulator.spin(2.5)
    said = simulator.process.wait_for(r"lockstep: no command 1\.\d+ s after the joint_states of t = [\d.]+ s: "
                                      r"stepping on with the last \(1 so far\)")[0]
    unanswered = [t for t in states if t > answered[-1]]
    print(f"lockstep: answered {answered[0]:.3f}..{answered[-1]:.3f} s, then {len(unanswered)} states in 2.5 s; "
          f"{said}")
    assert np.allclose(np.diff(answered), 0.01, atol=1e-9), answered  # each state in turn, none skipped
    waited_at = float(re.search(r"joint_states of t = ([\d.]+) s", said).group(1))
    assert waited_at == pytest.approx(answered[-1] + 0.01, abs=1e-9)  # at the first state left unanswered
    assert 1 <= len(unanswered) <= 4, unanswered  # a state a second, not 1000


# --- hostile input: bounded, refused with a reason, and the node keeps serving ----------------------


def test_step_is_bounded_and_pause_is_answered_while_it_runs(start_process, test_node):
    """~/step of 4e9 steps once never returned, held every service and ignored
    SIGINT; even 5000 steps held a ~/pause for 4.5 s."""
    from ros_processes import set_parameters

    simulator = Simulator(start_process, test_node, "ur5", "sim_step", "start_paused:=true")
    started = time.monotonic()
    response = simulator.call("step", steps=4_000_000_000)
    assert not response.success and "at most 1000000 per request" in response.message
    assert time.monotonic() - started < 30.0
    # a long ~/step: ~/pause is answered while it runs, and pause false ends it early, saying so
    future = simulator.clients["step"].call_async(simulator.kinds["step"].Request(steps=1_000_000))
    simulator.spin(0.5)
    assert not future.done()
    busy = simulator.call("step", steps=10)
    assert not busy.success and busy.message.startswith("busy: a ~/step is under way")
    started = time.monotonic()
    assert simulator.call("pause", data=True).success  # still paused: the steps go on
    assert time.monotonic() - started < 3.0, "~/pause waited for ~/step"  # 4.5 s once
    assert not future.done()
    started = time.monotonic()
    assert simulator.call("pause", data=False).success
    while not future.done() and time.monotonic() - started < 30.0:
        simulator.spin(0.05)
    assert future.done() and time.monotonic() - started < 10.0  # a million steps take minutes
    ended = future.result()
    assert not ended.success and "ended after" in ended.message and "of 1000000 steps: ~/pause false" in ended.message
    # rates that once overflowed or stalled the stepping thread are refused; the thread keeps publishing
    results = set_parameters(test_node, "/sim_step", publish_rate=1e-10, real_time_factor=1e-300)
    assert not results["publish_rate"][0] and "out of range" in results["publish_rate"][1]
    assert not results["real_time_factor"][0] and "at least 0.001" in results["real_time_factor"][1]
    assert set_parameters(test_node, "/sim_step", publish_rate=50.0)["publish_rate"][0]
    assert simulator.call("pause", data=True).success
    before, started = len(simulator.states), time.monotonic()
    while len(simulator.states) <= before + 20 and time.monotonic() - started < 30.0:
        simulator.spin(0.05)
    assert len(simulator.states) > before + 20  # paused, at 50 Hz
    # a long ~/step is ended by Ctrl-C: the process stops promptly
    simulator.clients["step"].call_async(simulator.kinds["step"].Request(steps=1_000_000))
    simulator.spin(0.5)
    started = time.monotonic()
    assert simulator.process.interrupt() == 0, simulator.process.output
    assert time.monotonic() - started < 10
    assert "Traceback" not in simulator.process.output


def world_subscription(test_node, topic: str) -> list:
    """The world's markers received on `topic` (transient-local, as the view takes them)."""
    from mbs_dynamics.ros.markers import WORLD_QOS
    from visualization_msgs.msg import MarkerArray

    worlds = []
    test_node.create_subscription(MarkerArray, topic, worlds.append, WORLD_QOS)
    return worlds


def test_the_world_as_markers_and_back():
    """The simulator's world topic holds what the view draws: the ground's
    height and every box as given; a bad marker is refused by name."""
    from mbs_dynamics.ros.conversions import InvalidInput
    from mbs_dynamics.ros.markers import world_markers, world_of_markers
    from mbs_dynamics.simulation.scene import world_boxes

    boxes = world_boxes([0.4, 0.3, 0.1, 1.0, -0.5, 0.05, 0.7, 2.0, 2.0, 0.2, -3.0, 0.0, 0.1, 0.0])
    markers = world_markers(mbs.World(mbs.Ground(height=-0.25), boxes=boxes), "odom")
    height, drawn = world_of_markers(markers)
    assert height == -0.25 and len(drawn) == 2
    for box, back in zip(boxes, drawn):
        close(box.size, back.size, 1e-15)
        close(box.position, back.position, 1e-15)
        close(box.orientation, back.orientation, 1e-15)
    assert world_of_markers(world_markers(mbs.World(ground=None), "world")) == (None, ())
    markers.markers[2].scale.y = float("nan")
    with pytest.raises(InvalidInput, match="world_boxes/0 has scale.y not finite"):
        world_of_markers(markers)
    markers.markers[2].scale.y = -1.0
    with pytest.raises(InvalidInput, match="box size must be 3 positive numbers"):
        world_of_markers(markers)


def test_world_parameters_are_checked_and_take_effect(start_process, test_node):
    """ground_friction -3, ground_height NaN, initial_joint_positions [NaN] and
    contact_frames ['nowhere'] were accepted at run time, and a new
    ground_height did not change where the robot rests after a reset. The
    world is published on `world` for a subscriber that comes later, and again
    when it changes."""
    from mbs_dynamics.ros.markers import world_of_markers
    from sensor_msgs.msg import JointState

    from ros_processes import set_parameters

    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    feet = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
    simulator = Simulator(start_process, test_node, "solo12", "sim_world", "floating_base:=true",
                          f"contact_frames:={feet}", "initial_base_pose:=[0.0, 0.0, 0.45, 0.0, 0.0, 0.0, 1.0]",
                          "start_paused:=true", watch_states=False)
    odometry = []
    from nav_msgs.msg import Odometry

    test_node.create_subscription(Odometry, "/odom", odometry.append, 10)
    refused = {"ground_friction": -3.0, "ground_height": float("nan"), "initial_joint_positions": [float("nan")],
               "contact_frames": ["nowhere"], "contact_points": [0.0, 0.0], "ground_restitution": 2.0,
               "initial_base_pose": [0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 5.0]}
    for name, value in refused.items():
        successful, reason = set_parameters(test_node, "/sim_world", **{name: value})[name]
        assert not successful and reason, (name, reason)

    def height_after_a_second():
        """The base height 1 s of simulated time after ~/reset (paused: stepped)."""
        assert simulator.call("reset").success
        assert simulator.call("step", steps=1000).success
        odometry.clear()
        simulator.spin(0.3)
        last = odometry[-1]
        assert stamp(last) == 1.0
        return last.pose.pose.position.z

    worlds = world_subscription(test_node, "/world")  # after the simulator started: the world kept for it
    spin_until(test_node, lambda: worlds, 10, "the world on /world")
    assert world_of_markers(worlds[-1]) == (0.0, ())
    assert worlds[-1].markers[1].header.frame_id == "world"
    low = height_after_a_second()
    assert set_parameters(test_node, "/sim_world", ground_height=0.3)["ground_height"][0]
    simulator.process.wait_for("the world changed: ground at 0.3 m")
    spin_until(test_node, lambda: world_of_markers(worlds[-1])[0] == 0.3, 10, "the world again")
    assert set_parameters(test_node, "/sim_world",
                          initial_base_pose=[0.0, 0.0, 0.75, 0.0, 0.0, 0.0, 1.0])["initial_base_pose"][0]
    simulator.process.wait_for("the initial state changed: it applies at the next ~/reset")
    high = height_after_a_second()
    assert low < 0.4 and abs((high - low) - 0.3) < 1e-6, (low, high)  # it fell onto the ground, 0.3 m higher
    # a state too fast to compute with is refused; the simulation goes on
    names = [n for n in model.joint_names if n != "root_joint"]
    response = simulator.call("set_state", joint_state=JointState(
        name=names, position=[0.0] * len(names), velocity=[1e200] * len(names)))
    assert not response.success and "too large" in response.message
    assert simulator.call("reset").success
    assert "Traceback" not in simulator.process.output


def test_efforts_beyond_the_limits_are_clamped_and_many_names_cost_little(start_process, test_node):
    """An effort of 1e12 was reported as a singular mass matrix; 40,000 names on
    ~/joint_efforts stalled joint_states for 20 s."""
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    simulator = Simulator(start_process, test_node, "ur5", "sim_limits", "publish_rate:=200.0",
                          "command_timeout:=1000.0")
    limits = model.effort_limit
    simulator.command.publish(Float64MultiArray(data=[1e12] * model.nv))
    simulator.process.wait_for(r"efforts beyond the URDF effort limits clamped to them: \['shoulder_pan_joint'")
    state = simulator.latest_state(after=stamp(simulator.latest_state()) + 0.05)  # one published after it
    assert np.allclose(np.abs(state.effort), limits), (list(state.effort), limits)  # applied: the limits
    names = [f"joint_{k}" for k in range(39_999)] + ["joint_0"]
    started = time.monotonic()
    for _ in range(3):
        simulator.named_command.publish(JointState(name=names, effort=[0.0] * len(names)))
    first = stamp(simulator.latest_state())
    while stamp(simulator.latest_state()) <= first + 0.5 and time.monotonic() - started < 30.0:
        simulator.spin(0.05)
    assert stamp(simulator.latest_state()) > first + 0.5, "joint_states stalled"
    assert time.monotonic() - started < 15.0
    simulator.process.wait_for("dropped: 40000 joint names: at most 4096 are accepted")
    assert "singular" not in simulator.process.output and "stopped" not in simulator.process.output
