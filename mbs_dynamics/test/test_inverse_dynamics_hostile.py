"""The inverse dynamics node against hostile input and loss (issue 28): what
never reaches the node is counted (the publishers' sequence numbers, exact;
the stamps, an estimate that bad stamps cannot fool), the joint-name cap
follows the model, joints listed twice in command_joints or gain_joints are
refused. Real nodes over DDS, and the counting classes on their own."""
from __future__ import annotations

import signal

import numpy as np
import pytest
from helpers import close
from oracles import random_state, robot_path
from ros_processes import Exchange, executable, set_parameters, wait_for_node
from ros_processes import efforts_by_name, joint_values, stamp_asker
from ros_processes import start_inverse_dynamics as start

import mbs_dynamics as mbs
from mbs_dynamics.ros.conversions import MAX_JOINT_NAMES, JointMap, strict_match
from mbs_dynamics.ros.input_loss import (
    MAX_PUBLISHERS,
    MIN_INTERVALS,
    PublisherSequences,
    StampGaps,
    with_message_info,
)

PERIOD = 0.001  # the streams' 1 kHz


def resident_megabytes(pid: int) -> float:
    """The resident memory of a process (MB), from /proc."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def gaps_of(stamps, period=None) -> StampGaps:
    """StampGaps after `stamps` in arrival order, judged as the node judges
    them: a stamp before the last one is late, unless it is more than 1 s
    before it or the third late one in a row (then the stamps restart there)."""
    gaps, last, late = StampGaps(period), -np.inf, 0
    for stamp in stamps:
        if stamp < last:
            late += 1
            if last - stamp <= 1.0 and late < 3:
                gaps.late()
                continue
            gaps.restart()
        late, last = 0, stamp
        gaps.in_order(stamp)
    return gaps


def regular(start_stamp: float, count: int) -> list[float]:
    return [start_stamp + PERIOD * k for k in range(count)]


# --- the counting on its own -----------------------------------------------------


def test_stamp_gaps_count_the_messages_left_out():
    lead = regular(100.0, 50)
    skipping = [s for k, s in enumerate(regular(100.05, 200)) if k % 10 != 9]  # 20 left out
    gaps = gaps_of(lead + skipping + regular(100.25, 10))
    assert (gaps.gaps, gaps.missed, gaps.pauses) == (20, 20, 0)
    assert gaps.regular and gaps.period == pytest.approx(PERIOD)
    # half the stream lost for good: the learned period doubles and the gaps
    # stop counting; a given rate counts them all (one per interval of 2 ms
    # but the last, which awaits the next message)
    halved = lead + [100.05 + 2 * PERIOD * k for k in range(200)]
    assert 0 < gaps_of(halved).missed < 198
    assert gaps_of(halved, PERIOD).missed == 198
    # nothing counted before MIN_INTERVALS intervals came
    assert gaps_of([100.0, 100.001, 100.003, 100.004]).missed == 0 and MIN_INTERVALS > 3


def test_stamp_gaps_are_not_fooled_by_bad_stamps():
    stamps = regular(100.0, 50)
    stamps += [stamps[-1]] * 3  # duplicates
    stamps += [100.051, 100.050, 100.052, 100.054, 100.053, 100.055]  # swapped pairs
    stamps += [1e9] + regular(100.056, 10)  # one stamp 30 years ahead
    stamps += [100.566] + regular(100.066, 10)  # one stamp 0.5 s ahead: three late ones restart
    stamps += regular(0.5, 30)  # a reset: 100 s back
    stamps += [0.53 + 0.0001 * k for k in range(5)] + regular(0.531, 20)  # a burst after a stall
    gaps = gaps_of(stamps)
    assert (gaps.gaps, gaps.missed) == (0, 0), (gaps.gaps, gaps.missed)
    assert gaps.pauses == 1  # the jump to 1e9
    assert gaps.regular and gaps.period == pytest.approx(PERIOD)
    # a stall the publisher catches up on gives its gap back: stamps at send time
    stall = regular(10.0, 60) + [10.065 + 1e-5 * k for k in range(6)] + regular(10.066, 10)
    assert gaps_of(stall).missed == 0
    # stamps that jitter by 40 % of the period are not regular: nothing counted
    rng = np.random.default_rng(1)
    jitter = gaps_of(list(np.arange(300) * PERIOD + rng.uniform(-0.4, 0.4, 300) * PERIOD))
    assert not jitter.regular and jitter.missed == 0
    # stamps 1 ns apart then 0.9 s on: a pause, not 900 million messages missing
    tiny = gaps_of([5.0 + 1e-9 * k for k in range(100)] + [5.9 + 1e-9 * k for k in range(10)])
    assert tiny.missed == 0 and tiny.pauses == 1


def test_publisher_sequences_count_each_publishers_gaps():
    def info(publisher: int, sequence):
        return {"publication_sequence_number": sequence,
                "publisher_gid": {"implementation_identifier": "rmw_fastrtps_cpp", "data": bytes([publisher] * 16)}}

    sequences = PublisherSequences()
    arrivals = [(1, 5), (2, 1), (1, 6), (1, 9), (2, 2), (2, 5), (1, 8), (1, 10)]  # publisher 1 from 5 on
    lost = [sequences.observe(info(p, s)) for p, s in arrivals]
    assert lost == [0, 0, 0, 2, 0, 2, 0, 0] and sequences.lost == 4 and sequences.supported
    # a middleware without sequence numbers: nothing counted, and said
    assert sequences.observe(info(3, None)) == 0 and not sequences.supported
    # many publishers: the longest silent is forgotten, memory bounded
    for publisher in range(3 * MAX_PUBLISHERS):
        sequences.observe(info(publisher % 256, 1))
    assert len(sequences._last) == MAX_PUBLISHERS


def test_message_info_reaches_the_callback_from_every_executor():
    got = []
    callback = with_message_info(lambda message, info: got.append((message, info)))
    callback("m", {"i": 1})  # the Python executors: two arguments
    callback(("n", {"i": 2}))  # rclpy 9's EventsExecutor: one tuple
    assert got == [("m", {"i": 1}), ("n", {"i": 2})]


# --- the node over DDS --------------------------------------------------------------


def test_gaps_in_the_stamps_are_counted_and_bad_stamps_do_not_fool_the_count(start_process, test_node):
    """1 kHz stamps with every 10th left out: the gaps counted, exactly; then
    duplicates, swapped pairs, a stamp 30 years ahead, one 0.5 s ahead, a reset
    100 s back and messages with NaN, wrong lengths and a huge name on time:
    no gap more, and the node goes on answering."""
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    node, exchange = start(start_process, test_node, "panda", "id_gaps")
    q, v, _ = random_state(model, np.random.default_rng(21))
    names, positions, velocities = joint_values(model, q, v)
    ask = stamp_asker(exchange, names, positions, velocities, timeout=20.0)

    skipping = [s for k, s in enumerate(regular(100.05, 200)) if k % 10 != 9]
    for stamp in regular(100.0, 50) + skipping + regular(100.25, 10):
        assert ask(stamp) is not None, node.output
    counts = exchange.counts()
    assert (counts["input_gaps"], counts["missed_estimate"], counts["lost"]) == ("20", "20", "0"), counts
    assert counts["input_regular"] == "True" and counts["input_period_us"] == "1000.0", counts
    node.wait_for(r"joint_states: 1 message\(s\) missing from the stream by its stamps \(period 1 ms; 1 so far\)")

    replies = [ask(100.259), ask(100.259), ask(100.261), ask(100.260, timeout=1.0), ask(100.262)]  # twice; swapped
    assert [reply is None for reply in replies] == [False, False, False, True, False]
    assert ask(1e9) is not None and ask(100.263) is not None  # 30 years ahead, then followed back
    assert ask(100.764) is not None  # 0.5 s ahead
    assert ask(100.265, timeout=1.0) is None and ask(100.266, timeout=1.0) is None
    for stamp in regular(100.267, 20):  # the third late one: followed
        assert ask(stamp) is not None
    for stamp in regular(0.5, 20):  # a reset, 100 s back
        assert ask(stamp) is not None
    bad = [exchange.joint_state(names, [np.nan] + positions[1:], velocities, 0.520),
           exchange.joint_state(names, positions[:-1], velocities, 0.521)]
    for message in bad:  # on time, so no gap: dropped for what they hold
        assert exchange.ask(message, timeout=1.0) is None
    huge = exchange.joint_state(names + ["x" * 100_000], positions + [0.0], velocities + [0.0], 0.522)
    assert exchange.ask(huge) is not None  # a name the model does not have: ignored, said once
    for stamp in regular(0.523, 20):
        assert ask(stamp) is not None
    counts = exchange.counts()
    assert (counts["input_gaps"], counts["missed_estimate"], counts["lost"]) == ("20", "20", "0"), counts
    assert counts["input_pauses"] == "1" and counts["stamp_jumps_back"] == "3", counts
    assert counts["dropped_stamp_backwards"] == "3" and counts["dropped_invalid"] == "2", counts
    assert "x" * 200 not in node.output  # the huge name is cut short in the warning
    assert node.interrupt() == 0


def test_a_given_rate_counts_a_stream_that_lost_half(start_process, test_node):
    """expected_rate: a stream that keeps losing every other message is
    counted in full (learned, its period would double); set at run time."""
    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    node, exchange = start(start_process, test_node, "ur5", "id_rate", "expected_rate:=1000.0")
    ask = stamp_asker(exchange, *joint_values(model, *random_state(model, np.random.default_rng(22))[:2]),
                      timeout=20.0)

    halved = [10.03 + 2 * PERIOD * k for k in range(100)]
    for stamp in regular(10.0, 30) + halved:
        assert ask(stamp) is not None
    counts = exchange.counts()  # one per interval of 2 ms but the last, which awaits the next message
    assert counts["missed_estimate"] == "98" and counts["input_period_us"] == "1000.0", counts
    results = set_parameters(test_node, "/id_rate", expected_rate=500.0)  # the stream's own rate: no gap more
    assert results["expected_rate"][0], results
    for stamp in [halved[-1] + 2 * PERIOD * k for k in range(1, 20)]:
        assert ask(stamp) is not None
    counts = exchange.counts()
    assert counts["missed_estimate"] == "99" and counts["input_period_us"] == "2000.0", counts
    assert node.interrupt() == 0


def test_messages_lost_while_the_node_cannot_run_are_counted_exactly(start_process, test_node):
    """The node's process stopped (SIGSTOP: what a loaded machine does for
    hundreds of ms) while 5000 joint_states come: its queue (input_queue_depth
    10 here) overflows. Every message is either received or counted lost, by
    the publisher's sequence numbers; the node then answers again."""
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    node, exchange = start(start_process, test_node, "panda", "id_lost", "input_queue_depth:=10")
    names, positions, velocities = joint_values(model, *random_state(model, np.random.default_rng(23))[:2])
    assert exchange.ask(exchange.joint_state(names, positions, velocities, 1.0), timeout=20.0) is not None
    received_before = int(exchange.counts()["received"])
    published = 0
    node.process.send_signal(signal.SIGSTOP)
    try:
        for k in range(5000):
            exchange.joint_states.publish(exchange.joint_state(names, positions, velocities, 2.0 + PERIOD * k))
            published += 1
    finally:
        node.process.send_signal(signal.SIGCONT)
    reply = None
    for attempt in range(10):  # the last message shows the gaps before it; it may be lost too
        published += 1
        reply = exchange.ask(exchange.joint_state(names, positions, velocities, 10.0 + attempt), timeout=20.0)
        if reply is not None:
            break
    assert reply is not None, node.output
    counts = exchange.counts()
    received, lost = int(counts["received"]) - received_before, int(counts["lost_joint_states"])
    assert received + lost == published and lost > 0, counts
    assert counts["lost"] == str(lost) and counts["dropped"] == "0", counts
    node.wait_for(r"message\(s\) never reached the node \(\d+ so far\)")
    assert node.interrupt() == 0


def test_a_joint_states_too_large_for_best_effort_is_not_lost_unsaid(start_process, test_node):
    """A joint_states of 100,000 names (3.2 MB serialised) published best
    effort: Fast DDS cuts it into UDP fragments (it does not fit the 0.5 MB
    shared-memory segment), and a burst of them overflows the receiving
    socket's buffer, so it almost never arrives; the next message counts it
    lost. If it does arrive, it is refused for its names. Either way it is
    counted, costs little memory, and the node goes on."""
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    node, exchange = start(start_process, test_node, "panda", "id_large")
    names, positions, velocities = joint_values(model, *random_state(model, np.random.default_rng(24))[:2])
    assert exchange.ask(exchange.joint_state(names, positions, velocities, 1.0), timeout=20.0) is not None
    memory = resident_megabytes(node.process.pid)
    many = [f"joint_{k}" for k in range(100_000)]
    exchange.joint_states.publish(exchange.joint_state(many, [0.0] * len(many), [0.0] * len(many), 2.0))
    assert exchange.ask(exchange.joint_state(names, positions, velocities, 3.0), timeout=20.0) is not None
    counts = exchange.counts()
    assert int(counts.get("lost_joint_states", 0)) + int(counts.get("dropped_too_many_names", 0)) == 1, counts
    assert resident_megabytes(node.process.pid) - memory < 200
    assert node.interrupt() == 0


def many_joint_urdf(joints: int, chain: int = 50) -> str:
    """A robot of `joints` revolute joints: chains of `chain` links from the base."""
    inertia = '<inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/>'
    parts = ['<robot name="many">', f'<link name="base"><inertial><mass value="1"/>{inertia}</inertial></link>']
    for k in range(joints):
        parent = "base" if k % chain == 0 else f"l{k - 1}"
        parts.append(f'<link name="l{k}"><inertial><origin xyz="0 0 0.05"/><mass value="0.1"/>{inertia}</inertial>'
                     '</link>')
        parts.append(f'<joint name="j{k}" type="revolute"><parent link="{parent}"/><child link="l{k}"/>'
                     f'<origin xyz="0 0 0.1"/><axis xyz="{k % 2} {(k + 1) % 2} 0"/>'
                     '<limit lower="-3" upper="3" effort="100" velocity="10"/></joint>')
    return "\n".join([*parts, "</robot>"])


def test_a_robot_of_5000_joints_gets_its_efforts(start_process, test_node, tmp_path):
    """The name cap was 4096 whatever the model: a 5000-joint robot loaded,
    then every joint_states was dropped. Now the cap is 4 names per joint of
    the model (at least 4096), for the node and the dynamics server alike."""
    path = tmp_path / "many.urdf"
    path.write_text(many_joint_urdf(5000))
    model = mbs.Model.from_urdf_file(str(path))
    joints = JointMap(model)
    assert joints.max_names == 20_000 and JointMap(mbs.Model.from_urdf_file(robot_path("panda"))).max_names == \
        MAX_JOINT_NAMES
    names = list(joints.names)
    assert strict_match(joints, names[::-1], "joint_state").size == 5000  # a request of the dynamics server
    node = start_process([executable("inverse_dynamics_node"), "--ros-args", "-r", "__node:=id_many",
                          "-p", f"robot_description_file:={path}", "-p", "diagnostics_period:=0.2"])
    node.wait_for("\\[id_many\\]: inverse dynamics of 5000 coordinates", timeout=120)
    wait_for_node(test_node, "id_many")
    exchange = Exchange(test_node, "id_many")
    exchange.wait_connected()
    rng = np.random.default_rng(25)
    q, v = rng.uniform(-1, 1, 5000), rng.uniform(-1, 1, 5000)
    reply = exchange.ask(exchange.joint_state(names, q, v, 1.0), timeout=30.0)
    assert reply is not None, node.output
    got = efforts_by_name(reply)
    close([got[n] for n in names], mbs.inverse_dynamics(model, q, v, np.zeros(5000)), 1e-9)
    assert exchange.counts()["dropped"] == "0"
    assert node.interrupt() == 0
    # the dynamics server of it starts serving in bounded time (its start-up contact forward dynamics: 368 s)
    server = start_process([executable("dynamics_server_node"), "--ros-args", "-r", "__node:=server_many",
                            "-p", f"robot_description_file:={path}"])
    server.wait_for("\\[server_many\\]: serving the dynamics of 5000 coordinates", timeout=120)
    assert server.interrupt() == 0


def test_joints_listed_twice_are_refused(start_process, test_node):
    """command_joints with a joint listed twice was accepted: the efforts
    command put the same effort in two slots. Refused at start (the node
    stops, saying why) and at run time (the change refused with the reason,
    the node goes on with its order); gain_joints likewise."""
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    names = [name for name in model.joint_names]
    twice = names + [names[2]]
    stopped = start_process([executable("inverse_dynamics_node"), "--ros-args", "-p",
                             f"robot_description_file:={robot_path('panda')}",
                             "-p", f"command_joints:=[{','.join(twice)}]"])
    stopped.wait_for(f"command_joints: joints listed twice: \\['{names[2]}'\\].*; stopping")
    assert stopped.wait_exit() == 1
    order = names[::-1]
    node, exchange = start(start_process, test_node, "panda", "id_twice", f"command_joints:=[{','.join(order)}]")
    results = set_parameters(test_node, "/id_twice", command_joints=twice, gain_joints=twice)
    assert not results["command_joints"][0] and "joints listed twice" in results["command_joints"][1], results
    assert not results["gain_joints"][0] and "joints listed twice" in results["gain_joints"][1], results
    q, v, _ = random_state(model, np.random.default_rng(26))
    _, positions, velocities = joint_values(model, q, v)
    assert exchange.ask(exchange.joint_state(names, positions, velocities, 1.0), timeout=20.0) is not None
    exchange.spin(0.2)
    expected = mbs.inverse_dynamics(model, q, v, np.zeros(model.nv))
    close(exchange.received["command"][-1].data, expected[::-1], 1e-9)  # still the order it started with
    assert node.interrupt() == 0
