"""The simulator node's free objects over real DDS, in a namespace: objects
from world_objects, ~/spawn and ~/delete as gazebo's spawn_entity is used,
each object's odom and the objects' markers, drawn by the view in Chromium;
every bad request refused with its reason while the simulation goes on;
spawns beyond max_objects; the SRDF from MoveIt's latched topic."""
from __future__ import annotations

import re
import time

import numpy as np
from browser import CHANGED, changed, needs_chromium, screenshot, screenshot_changed
from oracles import ROBOTS_DIR, robot_path
from ros_processes import executable, wait_for_node
from test_scene_objects import visual_box_urdf
from test_world_objects import box_urdf

ARM = [f"panda_joint{k}" for k in range(1, 8)]


class ObjectSimulator:
    """The Panda's simulator in `namespace` with its joints held (PD), and the
    test's ends of its object services and topics."""

    def __init__(self, start_process, test_node, namespace, *parameters):
        from mbs_dynamics_interfaces.srv import DeleteObject, SpawnObject
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState
        from visualization_msgs.msg import MarkerArray

        self.node, self.namespace, self.Odometry = test_node, namespace, Odometry
        self.process = start_process([
            executable("simulator_node"), "--ros-args", "-r", f"__ns:={namespace}",
            "-p", f"robot_description_file:={robot_path('panda')}", "-p", f"position_joints:={ARM}",
            *[a for p in parameters for a in ("-p", p)]])
        self.process.wait_for("simulating", 120)
        wait_for_node(test_node, "simulator")
        self.odometry, self.markers, self.states = {}, [], []
        test_node.create_subscription(MarkerArray, f"{namespace}/objects", self.markers.append, 10)
        test_node.create_subscription(JointState, f"{namespace}/joint_states", self.states.append, 10)
        from mbs_dynamics.ros.simulator.node import SERVICE_QOS  # deep: a wave of requests keeps its answers

        self.spawner = test_node.create_client(SpawnObject, f"{namespace}/simulator/spawn", qos_profile=SERVICE_QOS)
        self.deleter = test_node.create_client(DeleteObject, f"{namespace}/simulator/delete")
        self.SpawnObject, self.DeleteObject = SpawnObject, DeleteObject
        assert self.spawner.wait_for_service(timeout_sec=60) and self.deleter.wait_for_service(timeout_sec=60)

    def watch(self, name):
        self.odometry[name] = []
        self.node.create_subscription(self.Odometry, f"{self.namespace}/objects/{name}/odom",
                                      self.odometry[name].append, 10)

    def spin_until(self, condition, what, timeout=60.0):
        import rclpy

        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"{what} not seen:\n{self.process.output[-3000:]}"
            rclpy.spin_once(self.node, timeout_sec=0.02)

    def position(self, name):
        p = self.odometry[name][-1].pose.pose.position
        return np.array([p.x, p.y, p.z])

    def spawn_request(self, name, xml, position, orientation=(0.0, 0.0, 0.0, 1.0)):
        request = self.SpawnObject.Request(name=name, xml=xml)
        p, o = request.initial_pose.position, request.initial_pose.orientation
        p.x, p.y, p.z = (float(x) for x in position)
        o.x, o.y, o.z, o.w = (float(x) for x in orientation)
        return request

    def call(self, client, request, timeout=60.0):
        future = client.call_async(request)
        self.spin_until(future.done, "an answer", timeout)
        return future.result()

    def spawn(self, *arguments, **keywords):
        return self.call(self.spawner, self.spawn_request(*arguments, **keywords))

    def delete(self, name):
        return self.call(self.deleter, self.DeleteObject.Request(name=name))

    def marked(self):
        """The objects of the newest markers."""
        return {marker.ns for marker in self.markers[-1].markers if marker.ns} if self.markers else set()


@needs_chromium
def test_objects_from_parameters_spawned_deleted_odom_and_drawn(start_process, test_node, tmp_path):
    """/lab's Panda with a cube from world_objects given inside the ground
    (lifted out, said): it rests on the ground; a cube spawned above it falls
    onto it and rests there (odom, child frame <name>/<link>); the objects'
    markers hold both and the view in /lab draws the spawned one (Chromium's
    pixels change); every bad spawn is refused with its reason while the
    simulation goes on; a delete removes it from the markers and the
    picture."""
    cube = tmp_path / "cube.urdf"
    cube.write_text(visual_box_urdf())
    sim = ObjectSimulator(start_process, test_node, "/lab", "world_objects:=[base]",
                          f"world_object_files:=[{cube}]", "world_object_poses:=[0.8, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]")
    sim.process.wait_for("object 'base': link 'body' lies 0.05 m inside the ground: lifted 0.05 m")
    view = start_process([executable("mbs_dynamics_view"), "--ros-args", "-r", "__ns:=/lab",
                          "-p", f"robot_description_file:={robot_path('panda')}", "-p", "port:=0"])
    url = re.search(r"open (http://127\.0\.0\.1:\d+/) in a browser", view.wait_for(r"open http://", 60)[0]).group(1)
    sim.watch("base")
    sim.spin_until(lambda: sim.odometry["base"] and sim.marked() == {"base"}, "the cube's odom and markers")
    odom = sim.odometry["base"][-1]
    assert odom.header.frame_id == "world" and odom.child_frame_id == "base/body"
    np.testing.assert_allclose(sim.position("base"), [0.8, 0.0, 0.05], atol=1e-4)
    before = screenshot(url, "objects_before")
    answer = sim.spawn("top", visual_box_urdf(0.3), (0.8, 0.0, 0.6))
    assert answer.success and "object 'top' spawned" in answer.status_message
    sim.watch("top")
    sim.spin_until(lambda: sim.odometry["top"] and abs(sim.position("top")[2] - 0.25) < 1e-3
                   and np.linalg.norm([sim.odometry["top"][-1].twist.twist.linear.z]) < 1e-3,
                   "the spawned cube resting on the first")
    np.testing.assert_allclose(sim.position("base"), [0.8, 0.0, 0.05], atol=1e-3)
    assert sim.marked() == {"base", "top"}
    after = screenshot_changed(url, "objects_spawned", before)
    # bad spawns: refused, saying why
    massless = '<robot name="m"><link name="body"><collision><geometry><sphere radius="0.1"/></geometry>' \
               '</collision></link></robot>'
    untouchable = box_urdf(0.1).split("<collision>")[0] + "</link></robot>"
    for request, said in (
            (sim.spawn_request("inside", box_urdf(0.1), (0.84, 0.0, 0.05)), "would lie 0.06 m inside object 'base'"),
            (sim.spawn_request("arm", box_urdf(0.1), (0.0, 0.0, 0.3)), "inside the robot (link 'panda_link"),
            (sim.spawn_request("base", box_urdf(0.1), (2.0, 0.0, 0.3)), "the world has an object 'base' already"),
            (sim.spawn_request("nan", box_urdf(0.1), (np.nan, 0.0, 0.3)), "initial_pose has non-finite values"),
            (sim.spawn_request("turned", box_urdf(0.1), (2.0, 0.0, 0.3), (0.0, 0.0, 0.0, 2.0)), "quaternion"),
            (sim.spawn_request("bad", "<robot", (2.0, 0.0, 0.3)), "object 'bad': the URDF is not XML"),
            (sim.spawn_request("light", massless, (2.0, 0.0, 0.3)), "object 'light' has no mass"),
            (sim.spawn_request("ghost", untouchable, (2.0, 0.0, 0.3)), "no usable <collision> geometry"),
            (sim.spawn_request("2x", box_urdf(0.1), (2.0, 0.0, 0.3)), "a letter then letters"),
            (sim.spawn_request("far", box_urdf(0.1), (1e5, 0.0, 0.3)), "at most 10000 m from the origin")):
        answer = sim.call(sim.spawner, request)
        assert not answer.success and said in answer.status_message, (said, answer.status_message)
    answer = sim.delete("nothing")
    assert not answer.success and "no object 'nothing' (objects: base, top)" in answer.status_message
    steps = len(sim.states)
    sim.spin_until(lambda: len(sim.states) > steps + 10, "joint_states after the refusals")
    assert sim.delete("top").success
    sim.spin_until(lambda: sim.marked() == {"base"}, "the markers without the deleted cube")
    deleted = screenshot_changed(url, "objects_deleted", after)
    print(f"pixels changed: spawned {changed(before, after):.3f}, deleted {changed(after, deleted):.3f}")
    assert changed(before, after) > CHANGED and changed(after, deleted) > CHANGED
    assert view.process.poll() is None and view.interrupt() == 0
    assert sim.process.process.poll() is None and sim.process.interrupt() == 0


def test_spawns_beyond_max_objects_are_refused_and_the_srdf_comes_by_topic(start_process, test_node):
    """10,000 spawn requests against max_objects 3: three spawned, every other
    answered with the bound, within a bounded time, and the node still
    steps. Self-collision on, the SRDF published latched (as MoveIt does)
    after the node started: its pairs are taken; a malformed one is dropped
    and counted."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    sim = ObjectSimulator(start_process, test_node, "/crowd", "max_objects:=3", "self_collision:=true")
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    srdf = test_node.create_publisher(String, "/crowd/robot_description_semantic", latched)
    srdf.publish(String(data="<robot"))
    sim.process.wait_for("dropped: robot_description_semantic: the SRDF is not XML")
    srdf.publish(String(data=(ROBOTS_DIR / "panda_description/srdf/panda.srdf").read_text()))
    sim.process.wait_for(r"robot_description_semantic: \d+ link pairs that never collide")
    start, answers = time.monotonic(), []
    for wave in range(20):
        futures = [sim.spawner.call_async(sim.spawn_request(f"box{500 * wave + k}", box_urdf(0.05),
                                                            (1.0 + 0.1 * k, 0.5 + 0.1 * wave, 0.03)))
                   for k in range(500)]
        sim.spin_until(lambda: all(f.done() for f in futures), f"the answers of wave {wave}", 120)
        answers += [f.result() for f in futures]
    seconds = time.monotonic() - start
    spawned = [a for a in answers if a.success]
    assert len(answers) == 10_000 and len(spawned) == 3
    assert all("max_objects" in a.status_message for a in answers if not a.success)
    print(f"10,000 spawn requests answered in {seconds:.1f} s")
    steps = len(sim.states)
    sim.spin_until(lambda: len(sim.states) > steps + 10, "joint_states after the spawns")
    assert sim.process.process.poll() is None and sim.process.interrupt() == 0
