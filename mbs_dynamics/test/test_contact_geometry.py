"""Contact points from the URDF's collision elements (contact_geometry) and
the files they name (resources): each primitive's points where it is, links
merged by fixed joints carried by their body, meshes of real robots through
package://, what cannot be used skipped with a warning; the bundled
quadruped standing on its sphere feet with no contact configuration."""
from __future__ import annotations

import math
from pathlib import Path

import mbs_dynamics as mbs
import numpy as np
import pytest
import trimesh
from mbs_dynamics.contact.geometry import RIM_POINTS, collision_contacts, farthest_points
from mbs_dynamics.multibody.resources import ResourceNotFound, resolve

from oracles import ROBOTS_DIR, robot_path

SHAPES = """<robot name="shapes">
  <link name="base"/>
  <link name="arm">
    <inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision name="ball"><origin xyz="0.1 0 0"/><geometry><sphere radius="0.05"/></geometry></collision>
    <collision name="brick"><origin xyz="0 0.2 0" rpy="0 0 1.5707963267948966"/>
      <geometry><box size="0.2 0.1 0.06"/></geometry></collision>
    <collision name="can"><origin xyz="0 0 0.3" rpy="1.5707963267948966 0 0"/>
      <geometry><cylinder radius="0.04" length="0.1"/></geometry></collision>
    <collision name="lost"><geometry><mesh filename="package://no_such_package/meshes/x.stl"/></geometry></collision>
    <collision name="broken"><geometry><box size="0.1 -1 0.1"/></geometry></collision>
  </link>
  <link name="tool">
    <collision><origin xyz="0 0 0.02"/><geometry><sphere radius="0.01"/></geometry></collision>
  </link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
  <joint name="mount" type="fixed"><parent link="arm"/><child link="tool"/><origin xyz="0.5 0 0" rpy="0 0 0.5"/></joint>
</robot>"""


def world_points(model, q, geometry):
    world_R, world_p = mbs.algorithms.kinematics.body_poses(model, q)
    return np.array([world_R[b] @ p + world_p[b] for b, p in zip(geometry.bodies, geometry.points, strict=True)])


def test_each_primitive_gives_its_points_in_its_body():
    model = mbs.Model.from_urdf_string(SHAPES)
    geometry = collision_contacts(model, SHAPES)
    names = np.array([name.split("/")[1] for name in geometry.names])
    assert sorted(set(names)) == ["0", "ball", "brick", "can"]
    assert len(geometry.warnings) == 2
    assert "no_such_package" in geometry.warnings[0] and "box size must be positive" in geometry.warnings[1]
    assert np.allclose(geometry.points[names == "ball"], [[0.1, 0.0, 0.0]])
    assert geometry.radii[names == "ball"].tolist() == [0.05]
    brick = geometry.points[names == "brick"]  # turned 90 degrees about z: x and y extents swap
    assert np.allclose(np.sort(np.unique(np.round(brick[:, 0], 9))), [-0.05, 0.05])
    assert np.allclose(np.sort(np.unique(np.round(brick[:, 1], 9))), [0.1, 0.3])
    can = geometry.points[names == "can"]  # its axis turned onto -y: rims at y = -0.05 and 0.05
    assert len(can) == 2 * RIM_POINTS
    assert np.allclose(np.hypot(can[:, 0], can[:, 2] - 0.3), 0.04)
    assert np.allclose(np.sort(np.unique(np.round(can[:, 1], 9))), [-0.05, 0.05])
    # the tool is merged into the arm's body: its point moves with the arm, where its link frame says
    q = np.array([0.7])
    tool = world_points(model, q, geometry)[names == "0"][0]
    assert np.allclose(tool, mbs.frame_pose(model, q, "tool")[:3, :3] @ [0, 0, 0.02] + mbs.frame_pose(
        model, q, "tool")[:3, 3])
    assert set(geometry.bodies.tolist()) == {model.frame("arm").body}


@pytest.mark.parametrize("robot, floating, count", [("panda", False, 448), ("talos", True, 2338),
                                                     ("solo12", True, 816)])
def test_real_robots_meshes_resolve_through_package_uris(robot, floating, count):
    """Every collision element of these example-robot-data robots is used (its
    meshes found through package://example-robot-data/...), each mesh's
    points are vertices of its convex hull."""
    path = robot_path(robot)
    model = mbs.Model.from_urdf_file(path, floating_base=floating)
    xml = Path(path).read_text()
    geometry = collision_contacts(model, xml)
    assert geometry.warnings == ()
    assert len(geometry.bodies) == count
    assert np.all(geometry.bodies >= 0)
    foot = "package://example-robot-data/robots/solo_description/meshes/stl/with_foot/solo_foot.stl"
    hull = trimesh.load(str(resolve(foot)), force="mesh").convex_hull.vertices
    chosen = farthest_points(np.asarray(hull), 48)
    assert len(chosen) == min(48, len(hull))
    assert all(np.any(np.all(np.isclose(hull, point), axis=1)) for point in chosen)


def test_meshes_as_boxes_touch_at_their_hulls_bounding_boxes_corners():
    """mesh_points "box" (the simulator's contact_geometry 'collision_boxes'):
    each of TALOS's meshes by the 8 corners of its hull's bounding box in the
    mesh's axes, the primitives as before (the same points, bit for bit). A
    sole's four lowest corners lie in a plane 0.4 mm below the sole frame,
    where its hull's lowest vertices spread 1.9 mm high (the bulge the rigid
    step softened on: test_whole_body_closed_loop)."""
    path = robot_path("talos")
    model = mbs.Model.from_urdf_file(path, floating_base=True)
    xml = Path(path).read_text()
    hulls, boxes = collision_contacts(model, xml), collision_contacts(model, xml, mesh_points="box")
    assert boxes.warnings == () and len(boxes.bodies) == 8 * 47 + 8 + 4 * 24  # 47 meshes, a box, 4 cylinders
    sole = model.frame("left_sole_link")
    in_sole = {name: (geometry.points[geometry.bodies == sole.body] - sole.translation) @ sole.rotation
               for name, geometry in (("hull", hulls), ("box", boxes))}
    bottom = np.sort(in_sole["box"][:, 2])
    assert bottom[:4] == pytest.approx(np.full(4, bottom[0]), abs=1e-12) and -5e-4 < bottom[0] < -3e-4
    lowest = np.sort(in_sole["hull"][:, 2])[:13]  # the hull's vertices kept within 1 mm of the lowest
    assert lowest[0] == pytest.approx(bottom[0], abs=1e-12) and lowest[-1] - lowest[0] > 2e-4
    assert np.all(in_sole["box"].min(axis=0) <= in_sole["hull"].min(axis=0) + 1e-12)
    assert np.all(in_sole["box"].max(axis=0) >= in_sole["hull"].max(axis=0) - 1e-12)
    shapes = mbs.Model.from_urdf_string(SHAPES)
    hull_shapes, box_shapes = collision_contacts(shapes, SHAPES), collision_contacts(shapes, SHAPES, mesh_points="box")
    assert np.array_equal(hull_shapes.points, box_shapes.points) and hull_shapes.names == box_shapes.names
    with pytest.raises(ValueError, match=r"mesh_points must be one of \('hull', 'box'\), got 'corners'"):
        collision_contacts(shapes, SHAPES, mesh_points="corners")


def test_resources_say_where_they_looked():
    path = resolve("package://example-robot-data/robots/panda_description/urdf/panda.urdf")
    assert path.samefile(robot_path("panda"))
    assert resolve("panda.urdf", [ROBOTS_DIR / "panda_description/urdf"]).samefile(robot_path("panda"))
    with pytest.raises(ResourceNotFound, match="package://nothing/x.stl: no such file"):
        resolve("package://nothing/x.stl")
    with pytest.raises(ResourceNotFound, match="not package://PACKAGE/PATH"):
        resolve("package://only")


def test_the_quadruped_stands_on_its_sphere_feet_without_contact_configuration():
    """The bundled quadruped's collision geometry (sphere feet, a box body),
    its legs held by PD actuators: it stands at its feet's radius, on the four
    feet alone, for 2 s."""
    path = mbs.bundled_robot("quadruped")
    model = mbs.Model.from_urdf_file(path, floating_base=True)
    geometry = collision_contacts(model, Path(path).read_text())
    assert len(geometry.bodies) == 4 + 8 and sorted(set(geometry.radii.tolist())) == [0.0, 0.02]
    q0 = model.neutral_configuration()
    q0[2] = 0.42  # straight legs: the feet's centres 0.40 below the base
    joints = [name for name in model.joint_names if name != "root_joint"]
    inertia = np.diag(mbs.mass_matrix(model, q0))[6:]
    omega = 2 * math.pi * 20.0
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(friction=0.8), contact_geometry=geometry), 1e-3, q=q0,
                                actuators=mbs.Actuators(joints, omega**2 * inertia, 2 * omega * inertia))
    targets = np.zeros(model.nv)
    targets[6:] = q0[7:]
    simulation.set_targets(positions=targets)
    simulation.step(steps=2000)
    assert simulation.q[2] == pytest.approx(0.42, abs=2e-3)
    assert np.abs(simulation.v).max() < 1e-3
    touching = np.flatnonzero(simulation.last.active)
    assert sorted(geometry.names[k].split("/")[0] for k in touching) == ["LF_FOOT", "LH_FOOT", "RF_FOOT", "RH_FOOT"]
    assert simulation.contact_forces[:, 2].sum() == pytest.approx(model.mass.sum() * 9.81, rel=1e-3)


@pytest.mark.parametrize("compliance", [1e-2, 0.0])
@pytest.mark.parametrize("tilt", [0.35, -0.35])
def test_talos_tipped_over_falls_and_lies_on_its_collision_geometry(tilt, compliance):
    """TALOS, its soles on the ground, tipped 20 degrees forward or backward
    and let go (passive: its URDF joint damping, friction and limits): it falls
    onto the ground, touching it with the points of its collision meshes
    (2338, reduced per body to its patch's extreme points), nothing sunk in,
    and every step converged: the steps whose rows contradict are solved
    softer (stepping.stages.SOFTENINGS), at compliance 1e-2 (the documented
    setting for a robot lying on many points) one step of 3000 forward, none
    backward, and it lies still with its weight carried; rigid, about half of
    the steps, and an ankle may keep rattling against its limit."""
    path = robot_path("talos")
    model = mbs.Model.from_urdf_file(path, floating_base=True)
    geometry = collision_contacts(model, Path(path).read_text())

    def lowest(q):
        return (world_points(model, q, geometry)[:, 2] - geometry.radii).min()

    q0 = mbs.simulation.initial_configuration(model)
    q0[2] -= lowest(q0)
    q0[3:7] = [0.0, math.sin(tilt / 2), 0.0, math.cos(tilt / 2)]
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(friction=0.8), contact_geometry=geometry,
                                                 compliance=compliance), 1e-3, q=q0)
    unconverged, softened, deepest = 0, 0, 0.0
    for _ in range(60):
        result = simulation.step(steps=50)
        unconverged += result.unconverged_steps
        softened += result.softened_steps
        deepest = min(deepest, lowest(simulation.q))
    print(f"tilt {tilt:+.2f}, compliance {compliance:g}: {softened} of 3000 steps softened")
    assert unconverged == 0
    assert softened <= (0.01 if compliance else 0.6) * simulation.steps  # measured: 1 and 0; rigid 1449 and 1091
    assert simulation.q[2] < 0.45  # the base lies low: standing, it is at 1.08 m
    assert deepest > -1e-3
    touching = {geometry.names[k].split("/")[0] for k in np.flatnonzero(simulation.last.active)}
    if compliance == 0.0:
        return
    assert np.abs(simulation.v).max() < 1e-2
    assert simulation.contact_forces[:, 2].sum() == pytest.approx(model.mass.sum() * 9.81, rel=1e-3)
    assert len(touching) >= 5  # lying on legs, arms, head or torso, not on its soles alone
