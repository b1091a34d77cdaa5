"""The 3-D view: what a URDF draws (visuals.py), the scene viser serves
(viewer.py), checked against Pinocchio's placement of each visual; the page
rendered by headless Chromium (the distribution's package) shows the robot
and follows its joints; the view node (view_node.py) in a namespace, on bad
input, and beside a simulator that keeps real time.

Screenshots are kept in $MBS_TEST_ARTIFACTS (default: test-artifacts/ at the
repository root)."""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest
from browser import CHANGED, changed, needs_chromium, open_page, screenshot, screenshot_changed, screenshot_until
from oracles import ROBOTS_DIR, Pair, robot_path
from ros_processes import executable, node_status, wait_for_node

import mbs_dynamics as mbs
from mbs_dynamics.spatial.lie import quaternion_to_matrix
from mbs_dynamics.view.viewer import Viewer
from mbs_dynamics.view.visuals import COLLISION_RGBA, link_visuals



def pose_matrix(handle) -> np.ndarray:
    w, x, y, z = handle.wxyz
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = quaternion_to_matrix(x, y, z, w), handle.position
    return T


@pytest.mark.parametrize("robot, floating_base", [("panda", False), ("solo12", True), ("talos", True)])
def test_each_visual_is_drawn_where_pinocchio_places_it(robot, floating_base):
    """Every <visual> of a real robot is drawn (its mesh found through
    package://), and at a random configuration its pose in the scene (the
    body's scene frame times the visual's placement in it) is Pinocchio's
    oMg of the same visual."""
    pair = Pair(robot_path(robot), floating_base)
    pin = pair.pin
    xml = Path(robot_path(robot)).read_text()
    viewer = Viewer(pair.model, xml, port=0)
    try:
        assert viewer.warnings == []
        geometry = pin.buildGeomFromUrdf(pair.pin_model, robot_path(robot), pin.GeometryType.VISUAL,
                                         package_dirs=[str(ROBOTS_DIR.parent.parent)])
        drawn = [(visual, handle) for visual, handle in viewer.drawn if "/collision " not in visual.name]
        assert len(drawn) == len(geometry.geometryObjects) == xml.count("<visual")  # (the rest: links without one)
        q, _, _ = pair.random_state(np.random.default_rng(7))
        viewer.show(q)
        data = geometry.createData()
        pin.forwardKinematics(pair.pin_model, pair.data, pair.q(q))
        pin.updateGeometryPlacements(pair.pin_model, pair.data, geometry, data)
        by_link: dict[str, list] = {}
        for k, obj in enumerate(geometry.geometryObjects):
            by_link.setdefault(pair.pin_model.frames[obj.parentFrame].name, []).append(data.oMg[k].homogeneous)
        for visual, handle in drawn:
            body = pose_matrix(viewer.body_frames[visual.body]) if visual.body >= 0 else np.eye(4)  # world-fixed
            drawn = body @ pose_matrix(handle)
            expected = by_link[visual.name.split("/")[0]].pop(0)
            assert np.allclose(drawn, expected, atol=1e-9), visual.name
            assert visual.shape.kind != "mesh" or visual.path.is_file()
    finally:
        viewer.close()


def test_contact_forces_start_at_their_points_and_the_momentum_at_the_com():
    """The ground at its height, a step where the simulator has it; Solo-12
    at a random pose: each contact force's arrow runs from its point (given
    in its link frame; Pinocchio's placement of the frame) along the force
    times the scale; the momentum arrows from the CoM sphere; a CoM
    reference's sphere where it is given."""
    pair = Pair(robot_path("solo12"), floating_base=True)
    step = mbs.Box(size=(0.4, 1.0, 0.1), position=(0.5, 0.0, 0.05), orientation=(0.0, 0.0, np.sin(0.2), np.cos(0.2)))
    viewer = Viewer(pair.model, Path(robot_path("solo12")).read_text(), port=0, ground_height=-0.02, boxes=[step])
    try:
        assert np.allclose(viewer.ground.position, (0, 0, -0.02)) and len(viewer.boxes) == 1
        assert np.allclose(pose_matrix(viewer.boxes[0])[:3, :3], quaternion_to_matrix(*step.orientation))
        assert np.allclose(viewer.boxes[0].position, step.position)
        q, _, _ = pair.random_state(np.random.default_rng(3))
        viewer.show(q)
        feet = ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"]
        points = np.array([[0.0, 0.0, -0.01], [0.01, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.02, 0.0]])
        forces = np.array([[0.0, 0.0, 30.0], [5.0, 0.0, 25.0], [0.0, 0.0, 0.0], [-3.0, 1.0, 20.0]])
        viewer.show_contacts(feet, points, forces, scale=0.01)
        segments = viewer.contact_lines.points  # the shafts, then the barbs of the heads
        assert segments.shape == (3 * len(feet), 2, 3)
        assert np.allclose(segments[len(feet) + 2], segments[2])  # no force: no arrow
        for k, foot in enumerate(feet):
            T = pair.frame_pose(q, foot)
            start = T[:3, :3] @ points[k] + T[:3, 3]
            assert np.allclose(segments[k, 0], start, atol=1e-9)
            assert np.allclose(segments[k, 1] - segments[k, 0], 0.01 * forces[k], atol=1e-6)
        viewer.show_momentum((0.1, 0.2, 0.3), (1.0, 0.0, 0.0), (0.0, 0.0, 2.0), scale=0.1)
        assert np.allclose(viewer.com.position, (0.1, 0.2, 0.3)) and viewer.com.visible
        assert np.allclose(viewer.momentum.points[:2], [[[0, 0, 0], [0.1, 0, 0]], [[0, 0, 0], [0, 0, 0.2]]])
        heads = viewer.momentum.points[2:]  # two barbs at each tip, a quarter of the arrow back, either side
        assert np.allclose(heads[:, 0], [[0.1, 0, 0], [0, 0, 0.2]] * 2)
        assert np.allclose(heads[[0, 2], 1, 0], 0.075) and np.allclose(heads[[1, 3], 1, 2], 0.15)
        assert np.allclose(heads[0, 1] + heads[2, 1], [0.15, 0, 0])  # symmetric about the shaft
        assert not viewer.com_reference.visible  # a CoM reference: drawn once given
        viewer.show_com_reference((0.05, -0.02, 0.25))
        assert np.allclose(viewer.com_reference.position, (0.05, -0.02, 0.25)) and viewer.com_reference.visible
    finally:
        viewer.close()


def test_a_visual_that_cannot_be_drawn_gives_way_to_the_collision_geometry():
    """A mesh that is nowhere to be found: said, naming the file, and the
    link's <collision> drawn instead; a link without any visual draws its
    collision geometry; named and inline materials colour the rest."""
    xml = Path(robot_path("panda")).read_text()
    missing = "package://nowhere_description/meshes/link3.dae"
    xml = xml.replace("package://example-robot-data/robots/panda_description/meshes/visual/link3.dae", missing, 1)
    model = mbs.Model.from_urdf_string(xml)
    visuals, warnings = link_visuals(model, xml)
    assert len(warnings) == 1 and missing in warnings[0] and "collision geometry is drawn instead" in warnings[0]
    link3 = [v for v in visuals if v.name.startswith("panda_link3/")]
    assert link3 and all(v.name.startswith("panda_link3/collision") and v.rgba == COLLISION_RGBA for v in link3)
    assert link3[0].path.suffix == ".stl"

    arm = Path(mbs.bundled_robot("arm7")).read_text()
    arm = arm.replace('<robot name="mbs_arm7">', '<robot name="mbs_arm7">\n  <material name="blue"><color rgba="0 0 1 1"/>'
                      '</material>')
    arm = arm.replace("</geometry>\n    </visual>", '</geometry>\n      <material name="blue"/>\n    </visual>', 1)
    arm = re.sub(r'(<link name="link1">.*?</geometry>)', r'\1<material name="x"><color rgba="1 0 0 0.5"/></material>',
                 arm, count=1, flags=re.S)
    arm = arm.replace('<link name="tcp">', '<link name="tcp">\n    <collision><geometry><box size="0.1 0.1 0.1"/>'
                      '</geometry></collision>')
    model = mbs.Model.from_urdf_string(arm)
    visuals, warnings = link_visuals(model, arm)
    colours = {v.name: v.rgba for v in visuals}
    assert warnings == () and colours["base_link/0"] == (0.0, 0.0, 1.0, 1.0)
    assert colours["link1/0"] == (1.0, 0.0, 0.0, 0.5) and colours["link2/0"] is None
    assert colours["tcp/collision 0"] == COLLISION_RGBA
    viewer = Viewer(model, arm, port=0)
    try:
        assert len(viewer.drawn) == len(visuals) and viewer.warnings == []
    finally:
        viewer.close()


def test_a_recording_is_saved_as_a_page_and_as_a_viser_file(tmp_path):
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    viewer = Viewer(model, Path(mbs.bundled_robot("arm7")).read_text(), port=0)
    try:
        viewer.start_recording()
        q = model.neutral_configuration()
        for k in range(30):
            viewer.mark_time(k / 30)
            q[0] = k / 30
            viewer.show(q)
        page = viewer.save(tmp_path / "run.html")
        text = page.read_text()
        assert "__VISER_EMBED_DATA__" in text and "https://" not in text  # offline: nothing fetched from the web
        snapshot = viewer.save(tmp_path / "now.viser")  # the recording is over: the scene as it is now
        assert snapshot.stat().st_size > 1000 and viewer.recording is None
        with pytest.raises(ValueError, match="a .html or .viser file"):
            viewer.save(tmp_path / "run.mp4")
    finally:
        viewer.close()


# --- in a real browser ---------------------------------------------------------------------------


@needs_chromium
def test_a_saved_page_replays_the_robot_offline(tmp_path):
    """A recorded run saved as a page, opened from file:// in Chromium, shows
    the robot: its pixels differ from the page of the scene before the robot
    was shown."""
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("arm7"))
    viewer = Viewer(model, Path(mbs.bundled_robot("arm7")).read_text(), port=0)
    try:
        empty = viewer.save(tmp_path / "empty.html")
        viewer.start_recording()
        q = model.neutral_configuration()
        for k in range(10):
            viewer.mark_time(k / 10)
            q[1] = 0.1 * k
            viewer.show(q)
        page = viewer.save(tmp_path / "run.html")
    finally:
        viewer.close()
    share = changed(screenshot(empty.as_uri(), "page_empty"), screenshot(page.as_uri(), "page_replay"))
    print(f"pixels changed: empty page -> replayed run {share:.3f}")
    assert share > CHANGED


@needs_chromium
def test_the_view_node_shows_the_robot_in_a_browser_and_follows_its_joints(start_process, test_node):
    """The view node of the Panda in /robot1, its meshes through package://:
    before any joint_states the page shows the empty scene; with them, the
    robot (its pixels differ from the empty scene), and a joint moved moves
    it; a CoM reference on com_reference_topic appears as a green sphere. A
    NaN message between (joint_states, the reference) is dropped and
    counted; the node goes on."""
    import rclpy
    from geometry_msgs.msg import PointStamped
    from sensor_msgs.msg import JointState

    node = start_process([executable("mbs_dynamics_view"), "--ros-args", "-r", "__ns:=/robot1",
                          "-p", f"robot_description_file:={robot_path('panda')}", "-p", "port:=0",
                          "-p", "com_reference_topic:=com_reference"])
    url = re.search(r"open (http://127\.0\.0\.1:\d+/) in a browser", node.wait_for(r"open http://", 60)[0]).group(1)
    empty = screenshot(url, "view_empty")
    publisher = test_node.create_publisher(JointState, "/robot1/joint_states", 10)
    names = [f"panda_joint{k}" for k in range(1, 8)] + ["panda_finger_joint1", "panda_finger_joint2"]

    def publish(positions, seconds: float = 1.0):
        message = JointState(name=names, position=[float(x) for x in positions])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            message.header.stamp = test_node.get_clock().now().to_msg()
            publisher.publish(message)
            rclpy.spin_once(test_node, timeout_sec=0.05)

    pose = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8, 0.02, 0.02]
    publish(pose)
    robot = screenshot_changed(url, "view_panda", empty, lambda: publish(pose))  # before the meshes: once in a CI
    publish([np.nan] * 9, 0.3)
    node.wait_for("dropped: joint_states position has a non-finite value")
    moved = list(pose)
    moved[0], moved[1] = 1.2, 0.5
    publish(moved)
    robot_moved = screenshot_changed(url, "view_panda_moved", robot, lambda: publish(moved))
    print(f"pixels changed: empty -> robot {changed(empty, robot):.3f}, "
          f"robot -> joints moved {changed(robot, robot_moved):.3f}")
    assert changed(empty, robot) > CHANGED
    assert changed(robot, robot_moved) > CHANGED
    # a CoM reference (a whole-body controller's) on com_reference_topic: a green sphere where it says
    reference = test_node.create_publisher(PointStamped, "/robot1/com_reference", 10)
    point = PointStamped()
    point.header.frame_id = "world"
    point.point.x, point.point.y, point.point.z = 0.0, -0.3, 0.4
    def publish_reference():
        for _ in range(10):
            reference.publish(point)
            rclpy.spin_once(test_node, timeout_sec=0.05)

    def new_green(picture) -> int:
        return int(np.sum(green(picture) & ~green(robot_moved)))

    publish_reference()
    # (twice in one run of the suite at load 9-10, the first screenshot showed no sphere yet)
    with_reference = screenshot_until(url, "view_com_reference", lambda picture: new_green(picture) > 50,
                                      publish_reference)
    appeared = new_green(with_reference)
    print(f"green pixels: {int(np.sum(green(robot_moved)))} -> {int(np.sum(green(with_reference)))}, "
          f"{appeared} new with the CoM reference")
    # measured: 259 and 103 new green pixels (a ~20-pixel sphere, shaded: not all of it counts as green); 0 between
    # the screenshots before it (empty -> robot -> joints moved, in the CI run that saw 103)
    assert appeared > 50
    point.point.z = float("nan")
    reference.publish(point)
    node.wait_for("dropped: com_reference: the point")
    assert node.process.poll() is None
    assert node.interrupt() == 0


def green(image: np.ndarray) -> np.ndarray:
    """Where pixels are far greener than red and blue (the CoM reference's
    sphere; the world axes' y too)."""
    r, g, b = (image[..., k].astype(int) for k in range(3))
    return (g > r + 60) & (g > b + 60)


# Seconds after its connection by which headless Chromium has compiled its shaders and draws at an even pace.
CHROMIUM_SETTLES = 3.0


@needs_chromium
@pytest.mark.parametrize("robot", mbs.BUNDLED_ROBOTS)
def test_the_view_keeps_the_simulator_in_real_time_and_outlives_its_browser(robot, start_process, test_node,
                                                                            tmp_path):
    """./dev run's closed loop with the view at 30 Hz, recording, and a
    headless Chromium drawing the page for some seconds, then gone: the
    simulator keeps real time beside the view drawing and recording (the run
    monitor's simulated time over wall time from a second after the browser
    left to the end, at least 0.9: 1.00 on a quiet machine; beside two CPU
    hogs and the suite's other process a stall longer than the simulator
    makes up (MAX_LAG) took it to 0.94), and does not
    stall while the browser draws (the median of its per-second factors at
    least 0.75: Chromium's software WebGL takes more than a core, so beside
    two busy processes on a 2-core machine the quadruped ran at 0.8-0.9
    until it left, then at 1.00; a websocket client of the view's alone
    left it at 1.00 throughout); the view draws about 30 frames a second
    whether a browser is there or not; the simulator's 100 Hz joint_states
    replace each other rather than queue; the recording is written at the
    end, when the run is stopped with Ctrl-C (the run is long, and stopped
    once it has run 4 s alone: Chromium took 1 to 7 s to connect). Chromium's
    first seconds (its start, page and shader compilation) are left out."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray

    statuses = []  # (wall time, the view's values), the wall clock of the nodes' log lines
    test_node.create_subscription(DiagnosticArray, "/diagnostics",
                                  lambda m: statuses.append((time.time(), node_status(m, "/view"))), 50)
    record = tmp_path / "run.html"
    duration = 120.0  # simulated seconds; the test stops the run long before
    bringup = start_process([executable("mbs_dynamics_bringup"), "--robot", robot, "--closed-loop", "--record",
                             str(record), "--duration", str(duration), "--summary-period", "1", "--ros-args",
                             "-p", "view:port:=0", "-p", "diagnostics_period:=0.5"])
    url = re.search(r"open (http://127\.0\.0\.1:\d+/) in a browser", bringup.wait_for(r"open http://")[0]).group(1)

    def connected() -> float | None:
        return next((at for at, values in statuses if values and int(values["browsers"]) >= 1), None)

    with open_page(url):
        deadline = time.monotonic() + 60.0
        while connected() is None and time.monotonic() < deadline and bringup.process.poll() is None:
            rclpy.spin_once(test_node, timeout_sec=0.05)
        assert connected() is not None, "the browser never connected:\n" + bringup.output
        deadline = time.monotonic() + CHROMIUM_SETTLES + 4.0
        while time.monotonic() < deadline:
            rclpy.spin_once(test_node, timeout_sec=0.05)
    left = time.time()

    def summaries() -> list[tuple[float, float, float]]:
        return [(float(at), float(simulated), float(factor)) for at, simulated, factor in re.findall(
            r"\[INFO\] \[([\d.]+)\] \[run_monitor\]: t = ([\d.]+) s, real-time factor ([\d.]+)",
            bringup.output)]

    deadline = time.monotonic() + 60
    while (len([at for at, *_ in summaries() if at > left + 1.0]) < 4 and bringup.process.poll() is None
           and time.monotonic() < deadline):
        rclpy.spin_once(test_node, timeout_sec=0.05)
    ended = time.time()
    assert bringup.interrupt() == 0, bringup.output
    output, summaries = bringup.output, summaries()
    print(f"{robot}: real-time factors {[factor for *_, factor in summaries]}, the browser connected at "
          f"{connected() - summaries[0][0] + 1:.1f} s and left at {left - summaries[0][0] + 1:.1f} s (wall)")
    # each factor is over the second before its line
    drawing = [factor for at, _, factor in summaries if connected() + CHROMIUM_SETTLES + 1.0 < at <= left]
    # alone: until the interrupt (a summary the monitor prints as the launch shuts down covers a second in which
    # the simulator may already have stopped)
    alone = [(at, simulated) for at, simulated, _ in summaries if left + 1.0 < at <= ended]
    assert len(drawing) >= 3 and len(alone) >= 3, output
    (first_at, first_simulated), (last_at, last_simulated) = alone[0], alone[-1]
    alone_factor = (last_simulated - first_simulated) / (last_at - first_at)
    assert np.median(drawing) >= 0.75 and alone_factor >= 0.9, f"after the browser left {alone_factor:.2f}\n{output}"
    seen = [values for _, values in statuses if values]
    after = [values for at, values in statuses if values and left + 1.0 < at < left + 4.0]
    assert after and int(after[-1]["browsers"]) == 0  # the browser left
    frames = int(seen[-1]["frames"])
    assert frames >= 0.8 * 30 * (ended - summaries[0][0]) and int(seen[-1]["replaced"]) > 0, seen[-1]
    assert int(after[-1]["frames"]) > int(after[0]["frames"])  # drawing on without a browser
    written = re.search(r"view: wrote (\S+) \(([\d.]+) MB, (\d+) frames\)", output)
    assert written and Path(written.group(1)) == record and record.is_file() and int(written.group(3)) >= frames


def test_the_view_node_waits_for_its_robot_and_says_what_it_cannot_draw_or_use(start_process, test_node):
    """No robot description: the view says where it waits, and keeps
    running; the robot then arrives on the namespace's robot_description
    topic with a mesh that is nowhere: said, and its link's collision
    geometry drawn instead; joint_states of wrong lengths or unknown joints
    only: dropped or ignored, counted, and the node serves on."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from mbs_dynamics.ros.robot_node import ROBOT_DESCRIPTION_QOS
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    node = start_process([executable("mbs_dynamics_view"), "--ros-args", "-r", "__ns:=/robot2", "-p", "port:=0",
                          "-p", "diagnostics_period:=0.2"])
    node.wait_for(r"waiting for the robot description on /robot2/robot_description")
    wait_for_node(test_node, "view")  # up and in the graph while it waits
    assert node.process.poll() is None
    missing = "package://nowhere_description/meshes/hand.dae"
    xml = Path(robot_path("panda")).read_text().replace(
        "package://example-robot-data/robots/panda_description/meshes/visual/hand.dae", missing)
    description = test_node.create_publisher(String, "/robot2/robot_description", ROBOT_DESCRIPTION_QOS)
    description.publish(String(data=xml))
    node.wait_for("open http://", 60)
    warning = node.wait_for(r"view: .*nowhere_description")[0]
    assert "its collision geometry is drawn instead" in warning
    statuses = []
    test_node.create_subscription(DiagnosticArray, "/diagnostics",
                                  lambda m: statuses.append(node_status(m, "/robot2/view")), 50)
    publisher = test_node.create_publisher(JointState, "/robot2/joint_states", 10)
    for message in (JointState(name=["panda_joint1", "panda_joint2"], position=[0.1]),
                    JointState(name=["a_joint_elsewhere"], position=[0.3]),
                    JointState(name=["panda_joint1"], position=[0.4])):
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            publisher.publish(message)
            rclpy.spin_once(test_node, timeout_sec=0.05)
    node.wait_for("dropped: joint_states position has 1 values for 2 joint names")
    deadline = time.monotonic() + 10
    while not any(s and int(s["frames"]) >= 2 for s in statuses) and time.monotonic() < deadline:
        rclpy.spin_once(test_node, timeout_sec=0.05)
    last = [s for s in statuses if s][-1]
    assert int(last["dropped"]) >= 1 and int(last["frames"]) >= 2, last  # a partial message draws the joint it names
    assert node.process.poll() is None and node.interrupt() == 0


def test_the_view_draws_on_an_executor_thread_of_its_own(ros_context):
    """In the bringup's one process, spin_nodes gives each executor kind a
    thread: the view's drawing never waits in the inverse dynamics node's."""
    from mbs_dynamics.ros.inverse_dynamics_node import InverseDynamicsNode
    from mbs_dynamics.ros.view_node import ViewNode
    assert ViewNode.EXECUTOR is not InverseDynamicsNode.EXECUTOR
    executors = ViewNode.EXECUTOR(), InverseDynamicsNode.EXECUTOR()  # the same kind, not the same thread
    assert type(executors[0]) is type(executors[1]) and "EventsExecutor" in type(executors[0]).__name__
    for executor in executors:
        executor.shutdown()
