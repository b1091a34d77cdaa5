"""Free objects as a simulator's parameters and requests give them, without
ROS: object URDF files at poses (scene_objects), where a new object may go
(placement.placed_object: lifted out of the ground, refused inside a body),
a fixed base's ground that comes with the objects, an SRDF's disabled
pairs, the objects' markers there and back, and the view's drawing of
them."""
from __future__ import annotations

import numpy as np
import pytest

import mbs_dynamics as mbs
from mbs_dynamics.contact.geometry import collision_contacts, collision_shapes
from mbs_dynamics.multibody.parsers.srdf import disabled_collisions
from mbs_dynamics.simulation.placement import placed_object
from mbs_dynamics.simulation.scene import Scene, SceneSettings, scene_objects
from oracles import ROBOTS_DIR, robot_path
from test_world_objects import box_urdf

PANDA_SRDF = ROBOTS_DIR / "panda_description/srdf/panda.srdf"
AT_REST = (0.0, 0.0, 0.0, 1.0)


def visual_box_urdf(size=0.1):
    """A 1 kg cube with a visual and a collision box."""
    return box_urdf(size).replace("<collision>", f'<visual><geometry><box size="{size} {size} {size}"/></geometry>'
                                                 '<material name="red"><color rgba="1 0 0 1"/></material></visual>'
                                                 '<collision>')


@pytest.fixture(scope="module")
def panda_scene():
    """The Panda's scene (its joints held by PD) and its collision geometry."""
    path = robot_path("panda")
    model = mbs.Model.from_urdf_file(path)
    xml = open(path).read()
    settings = SceneSettings(position_joints=tuple(f"panda_joint{k}" for k in range(1, 8)))
    return Scene.build(model, settings, collision_contacts(model, xml), collision_shapes(model, xml),
                       disabled_collisions(PANDA_SRDF.read_text()))


def test_object_files_at_poses_and_what_is_wrong_with_them(tmp_path):
    """Each name's file at its pose (package:// and paths; meshes beside the
    file); every wrong value refused naming the object."""
    box = tmp_path / "box.urdf"
    box.write_text(box_urdf(0.1))
    things = scene_objects(["a", "b"], [str(box), str(box)], [0.5, 0, 0.2, *AT_REST, 0.5, 0.3, 0.0, 0, 0, 1, 0])
    assert [t.name for t in things] == ["a", "b"]
    np.testing.assert_array_equal(things[1].q[:7], [0.5, 0.3, 0.0, 0, 0, 1, 0])
    assert str(tmp_path) in things[0].search_paths
    assert np.array_equal(scene_objects(["a"], [str(box)], [])[0].q[:7], [0, 0, 0, *AT_REST])
    arm = scene_objects(["arm"], ["package://example-robot-data/robots/panda_description/urdf/panda.urdf"], [])
    assert arm[0].model.nbodies == 10 and arm[0].model.floating_base  # the free Panda, from the ament index
    for names, files, poses, said in (
            (["a"], [str(box), str(box)], [], "world_object_files has 2 files"),
            (["a", "b"], [str(box)] * 2, [0.0] * 7, "world_object_poses must hold"),
            (["a"], [str(box)], [0, 0, np.nan, *AT_REST], "object 'a' has"),
            (["a"], [str(box)], [0, 0, 0, 0, 0, 0, 2], "a unit quaternion"),
            (["a"], [str(tmp_path / "none.urdf")], [], "object 'a'"),
            (["a"] * 4, [str(box)] * 4, [], "at most max_objects (3)"),
            (["a", "a"], [str(box)] * 2, [], "distinct names"),
            (["1a"], [str(box)], [], "a letter then letters")):
        with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)")):
            if said == "distinct names":
                mbs.World(objects=scene_objects(names, files, poses))
            else:
                scene_objects(names, files, poses, max_objects=3)
    empty = tmp_path / "empty.urdf"
    empty.write_text('<robot name="e"><link name="body"/></robot>')
    with pytest.raises(ValueError, match="object 'a' has no mass"):
        scene_objects(["a"], [str(empty)], [])


def test_a_fixed_base_gets_a_ground_with_its_objects_and_they_come_to_rest_on_it(panda_scene):
    """The Panda's world has no ground, but with objects it has one: a box
    given inside the ground is lifted out of it (said), a box above it falls
    onto it and rests on the first, as the stack's height says."""
    assert panda_scene.world.ground is None
    things = (mbs.WorldObject("low", box_urdf(0.1), position=(0.5, 0.0, 0.0)),
              mbs.WorldObject("high", box_urdf(0.1), position=(0.5, 0.0, 0.3)))
    simulation, said = panda_scene.simulation(things)
    assert simulation.world.ground is not None and simulation.objects == ("low", "high")
    assert "object 'low': link 'body' lies 0.05 m inside the ground: lifted 0.05 m" in said
    simulation.set_targets(positions=simulation.q)
    for _ in range(10):
        simulation.step(steps=100)
    low, high = (simulation.object_state(name)[0] for name in ("low", "high"))
    np.testing.assert_allclose(low[:3], [0.5, 0.0, 0.05], atol=1e-6)
    np.testing.assert_allclose(high[:3], [0.5, 0.0, 0.15], atol=1e-6)
    assert simulation.last.unconverged_steps == 0


def test_an_object_inside_another_body_is_refused_naming_it(panda_scene):
    """Inside the robot's link or another object: refused with the depth;
    just clear of them: taken as it is."""
    simulation, _ = panda_scene.simulation((mbs.WorldObject("a", box_urdf(0.1), position=(0.5, 0.0, 0.05)),))
    whole = panda_scene.world_with
    for position, said in (((0.0, 0.0, 0.3), r"object 'c' would lie 0.0\d+ m inside the robot \(link 'panda_link"),
                           ((0.5, 0.0, 0.12), "object 'c' would lie 0.03 m inside object 'a'")):
        thing = mbs.WorldObject("c", box_urdf(0.1), position=position)
        with pytest.raises(ValueError, match=said):
            placed_object(simulation, thing, whole(simulation.world.objects + (thing,)))
    thing = mbs.WorldObject("c", box_urdf(0.1), position=(0.5, 0.0, 0.1502))
    assert placed_object(simulation, thing, whole(simulation.world.objects + (thing,))) == (thing, "")


def test_the_srdfs_disabled_pairs_and_what_is_not_an_srdf():
    pairs = disabled_collisions(PANDA_SRDF.read_text())
    assert ("panda_link0", "panda_link1") in pairs and len(pairs) == len(set(pairs)) > 10
    for text, said in (("<robot", "not XML"), ("<srdf/>", "root element must be <robot>"),
                       ('<robot><disable_collisions link1="a"/></robot>', "needs link1 and link2"),
                       ("<robot>" + " " * (17 * 2**20) + "</robot>", "characters: at most")):
        with pytest.raises(ValueError, match=said):
            disabled_collisions(text)
    assert disabled_collisions("<robot/>") == ()


def test_object_markers_there_and_back_and_the_view_draws_them():
    """The objects' markers (CUBE, SPHERE, CYLINDER, MESH_RESOURCE) read back
    as the shapes, poses and colours of the visuals; the viewer adds a scene
    frame per marker where it says, moves it, and removes those not shown
    again; a marker it cannot draw is refused, counted by the node."""
    pytest.importorskip("visualization_msgs")
    from mbs_dynamics.ros.conversions import InvalidInput
    from mbs_dynamics.ros.markers import object_markers, shapes_of_markers
    from mbs_dynamics.view.viewer import Viewer
    from mbs_dynamics.view.visuals import link_visuals, visual_poses

    panda_path = robot_path("panda")
    arm = mbs.WorldObject("arm", open(panda_path).read(), position=(1.0, 0.0, 0.0))
    cube = mbs.WorldObject("cube", visual_box_urdf(), position=(0.3, 0.2, 0.05))
    drawn = []
    for thing in (arm, cube):
        visuals, warnings = link_visuals(thing.model, thing.urdf, thing.search_paths)
        assert not warnings
        drawn.append((thing.name, visuals, *visual_poses(thing.model, visuals, thing.q)))
    message = object_markers(drawn, "world", mbs_stamp())
    shapes = shapes_of_markers(message)
    assert len(shapes) == sum(len(v) for _, v, _, _ in drawn)
    key, shape, rgba, quaternion, position = shapes[-1]
    assert key == "cube/0" and shape.kind == "box" and rgba == (1.0, 0.0, 0.0, 1.0)
    np.testing.assert_allclose(shape.size, [0.1] * 3)
    np.testing.assert_allclose(position, [0.3, 0.2, 0.05])
    assert {s.kind for _, s, *_ in shapes} == {"mesh", "box"} and shapes[0][1].filename.startswith("file:///")
    viewer = Viewer(mbs.Model.from_urdf_file(panda_path), open(panda_path).read(), port=0)
    try:
        viewer.show_objects(shapes)
        assert set(viewer.objects) == {key for key, *_ in shapes} and not viewer.warnings
        frame = viewer.objects["cube/0"][1]
        np.testing.assert_allclose(frame.position, [0.3, 0.2, 0.05])
        moved = [(k, s, c, q, p + [0.0, 0.0, 1.0]) for k, s, c, q, p in shapes if k.startswith("cube")]
        viewer.show_objects(moved)
        assert set(viewer.objects) == {"cube/0"} and viewer.objects["cube/0"][1] is frame  # moved, not made anew
        np.testing.assert_allclose(frame.position, [0.3, 0.2, 1.05])
    finally:
        viewer.close()
    message.markers[-1].pose.orientation.w = 3.0
    with pytest.raises(InvalidInput, match="cube/0 has no unit quaternion"):
        shapes_of_markers(message)
    message.markers[-1].pose.position.x = float("nan")
    with pytest.raises(InvalidInput, match="not finite"):
        shapes_of_markers(message)


def mbs_stamp():
    from builtin_interfaces.msg import Time

    return Time(sec=1)
