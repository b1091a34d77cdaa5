#!/usr/bin/env python3
"""Free objects and collisions between bodies: microseconds per step, ours
(mbs.Simulation.step(tau, steps=N): one compiled call) beside MuJoCo's
mj_step(model, data, nstep=N) (one C call) on the same scene, dt = 1 ms,
friction 1, elliptic cones; each the best of five runs from the same start,
and how far the boxes moved in each. 0.1 m cubes of 1 kg:

1. the Panda holding its pose (PD at 20 Hz, gravity feedforward) beside N
   boxes resting on the ground, N = 1, 10, 100, in a grid 0.3 m apart; no
   collision geometry on the arm in either (the boxes meet the ground only);
2. the same Panda with its collision meshes (the convex hulls of
   contact.geometry.collision_shapes, at most 64 vertices each, given to
   MuJoCo as mesh geoms of the same vertices; the finger boxes as boxes)
   beside 10 boxes on a static table (ours a World box, MuJoCo's a box
   geom), 5 cm apart, the fingertips 1.3 cm above one of them. The arm
   meets the boxes, not itself nor the table, in both;
3. TALOS standing on its 8 sole corners (simulation.py's row) with
   self-collision on (its 52 collision shapes; disabled: a body and its
   parent, the SRDF's <disable_collisions>, and the body pairs that
   overlap at the standing pose: the arms hang into the thighs), against
   the same without: ours only, the ratio of the two.

    .venv/bin/python benchmarks/objects.py [--steps 2000]
"""
import argparse
import os
import xml.etree.ElementTree as ET

import mujoco
import numpy as np

import mbs_dynamics as mbs
from contact import DT, FRICTION, SOLE_CORNERS, SOLES, TALOS
from mbs_dynamics.contact.geometry import collision_shapes
from mbs_dynamics.simulation.objects import collide_matrix, disabled_body_pairs
from simulation import PANDA, PANDA_POSE, mujoco_pd, mujoco_time, our_time, pd_gains, standing_setup

from oracles import mujoco_spec  # noqa: E402  (simulation.py put the tests on the path)

SIZE, MASS, SPACING = 0.1, 1.0, 0.3
MUJOCO_FRICTION = [FRICTION, 0.005, 0.0001]  # sliding as ours; MuJoCo's default torsional and rolling (condim 3)
TABLE_TOP, TABLE_GAP = 0.07, 0.05  # m: the table's height, the gap between boxes on it
# MuJoCo's collision filter: the arm's geoms meet the boxes only, the boxes everything
ROBOT_FILTER, TABLE_FILTER, BOX_FILTER = (2, 0), (1, 1), (1, 3)  # (contype, conaffinity)


def box_urdf():
    inertia = MASS * SIZE ** 2 / 6
    return (f'<robot name="box"><link name="body"><inertial><mass value="{MASS}"/><inertia ixx="{inertia}" '
            f'iyy="{inertia}" izz="{inertia}" ixy="0" ixz="0" iyz="0"/></inertial><collision><geometry>'
            f'<box size="{SIZE} {SIZE} {SIZE}"/></geometry></collision></link></robot>')


def grid(count):
    """The boxes' centres: rows of ten from x = 0.6 m, resting on the ground."""
    return [np.array([0.6 + SPACING * (k % 10), SPACING * (k // 10 - (count - 1) // 20), SIZE / 2])
            for k in range(count)]


def table_boxes():
    """Ten boxes' centres on the table: two rows of five, the first under the Panda's fingers."""
    pitch = SIZE + TABLE_GAP
    return [np.array([0.65 + pitch * row, pitch * (column - 2), TABLE_TOP + SIZE / 2])
            for row in range(2) for column in range(5)]


TABLE = mbs.Box((0.5, 1.0, TABLE_TOP), (0.75, 0.0, TABLE_TOP / 2), friction=FRICTION)


def panda_setup():
    """(model, q0, stiffness, damping, gravity torques at q0) of the Panda holding PANDA_POSE."""
    model = mbs.Model.from_urdf_file(PANDA)
    q0 = mbs.simulation.initial_configuration(model, PANDA_POSE)
    stiffness, damping = pd_gains(model, q0, 20.0, 0)
    return model, q0, stiffness, damping, mbs.gravity_torques(model, q0)


def ours(centres, world):
    """Our Simulation of the Panda holding its pose in `world` (a dict of
    World's arguments) with boxes at `centres`: (simulation, torques)."""
    model, q0, stiffness, damping, hold = panda_setup()
    objects = tuple(mbs.WorldObject(f"box{k}", box_urdf(), position=p) for k, p in enumerate(centres))
    simulation = mbs.Simulation(model, mbs.World(objects=objects, **world), DT, q=q0,
                                actuators=mbs.Actuators(model.joint_names, stiffness, damping))
    simulation.set_targets(positions=q0[:model.nv])
    return simulation, hold


def our_row(centres, world, steps):
    """(us per step, the farthest a box moved, unconverged steps)."""
    simulation, hold = ours(centres, world)
    seconds = our_time(simulation, hold, steps)
    moved = max(np.abs(simulation.object_state(f"box{k}")[0][:3] - p).max() for k, p in enumerate(centres))
    return seconds, moved, simulation.last.unconverged_steps


def add_robot_shapes(spec, model, shapes):
    """The robot's BodyShapes as MuJoCo geoms in its links' bodies: a hull
    as a mesh of the same vertices, a box as a box."""
    for k, (shape, rotation, translation, name) in enumerate(zip(shapes.shapes, shapes.rotations,
                                                                  shapes.translations, shapes.names, strict=True)):
        link = name.split("/")[0]
        frame = model.frame(link)  # body <- link; the shape's placement is body <- shape
        in_link, at = frame.rotation.T @ rotation, frame.rotation.T @ (translation - frame.translation)
        quaternion = np.zeros(4)
        mujoco.mju_mat2Quat(quaternion, in_link.flatten())
        geom = {"pos": at, "quat": quaternion, "friction": MUJOCO_FRICTION, "contype": ROBOT_FILTER[0],
                "conaffinity": ROBOT_FILTER[1]}
        if shape.kind == "convex":
            spec.add_mesh(name=f"hull{k}", uservert=shape.vertices.flatten())
            geom.update(type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"hull{k}")
        elif shape.kind == "box":
            geom.update(type=mujoco.mjtGeom.mjGEOM_BOX, size=shape.size)
        else:
            raise ValueError(f"{name}: a {shape.kind} is not given to MuJoCo here")
        spec.body(link).add_geom(**geom)


def their_row(centres, steps, ground=True, shapes=None):
    """MuJoCo's (us per step, the farthest a box moved) of the same scene:
    a ground plane or the table, the arm's shapes or none."""
    model, q0, stiffness, damping, hold = panda_setup()
    spec = mujoco_spec(PANDA)
    spec.option.timestep = DT
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    if ground:
        spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1], friction=MUJOCO_FRICTION)
    else:
        spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=np.array(TABLE.size) / 2, pos=TABLE.position,
                                friction=MUJOCO_FRICTION, contype=TABLE_FILTER[0], conaffinity=TABLE_FILTER[1])
    if shapes is not None:
        add_robot_shapes(spec, model, shapes)
    for k, p in enumerate(centres):
        body = spec.worldbody.add_body(name=f"box{k}", pos=p, ipos=[0, 0, 0], mass=MASS,
                                       inertia=[MASS * SIZE ** 2 / 6] * 3)
        body.add_freejoint()
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[SIZE / 2] * 3, friction=MUJOCO_FRICTION,
                      contype=BOX_FILTER[0], conaffinity=BOX_FILTER[1])
    mj = spec.compile()
    qpos0, applied = mujoco_pd(mj, model, q0, list(model.joint_names), hold, stiffness, damping, 0)
    addresses = [mj.joint(mj.body(f"box{k}").jntadr[0]).qposadr[0] for k in range(len(centres))]
    for address, p in zip(addresses, centres, strict=True):
        qpos0[address:address + 7] = (*p, 1.0, 0.0, 0.0, 0.0)
    seconds, moved = mujoco_time(mj, qpos0, applied, steps)
    return seconds, max(moved[address:address + 3].max() for address in addresses)


def talos_self_collision(steps):
    """Our us per step of TALOS standing without and with self-collision,
    how far it moved with it, the shape pairs its broad phase may pass and
    the body pairs disabled for overlapping at the standing pose."""
    points = tuple(mbs.PointContact(s, c) for s in SOLES for c in SOLE_CORNERS)
    model, q0, feedforward, joints, stiffness, damping = standing_setup(TALOS, points)
    with open(TALOS) as file:
        shapes = collision_shapes(model, file.read())
    srdf = TALOS.replace("robots/talos_reduced.urdf", "srdf/talos.srdf")
    disabled = [(e.get("link1"), e.get("link2")) for e in ET.parse(srdf).getroot().iter("disable_collisions")]
    collide = collide_matrix(model, model.nbodies, (), True, disabled_body_pairs(model, disabled))
    links = mbs.simulation.body_links(model)
    overlapping = overlapping_bodies(model, q0, shapes, collide)
    disabled += [(links[a], links[b]) for a, b in overlapping]
    collide = collide_matrix(model, model.nbodies, (), True, disabled_body_pairs(model, disabled))
    pairs = sum(bool(collide[a + 1, b + 1]) for i, a in enumerate(shapes.bodies) for b in shapes.bodies[i + 1:])
    targets = np.zeros(model.nv)
    targets[6:] = q0[7:]
    times, moved = [], 0.0
    for self_collision in (False, True):
        world = mbs.World(mbs.Ground(friction=FRICTION), points, joint_limits=False, joint_damping=False,
                          joint_friction=False, collision_shapes=shapes, self_collision=self_collision,
                          disabled_collisions=tuple(disabled))
        simulation = mbs.Simulation(model, world, DT, q=q0, actuators=mbs.Actuators(joints, stiffness, damping))
        simulation.set_targets(positions=targets)
        times.append(our_time(simulation, feedforward, steps))
        moved = np.abs(mbs.difference(model, q0, simulation.q)).max()
    return times, moved, pairs, len(overlapping)


def overlapping_bodies(model, q, shapes, collide):
    """The body pairs (a, b) that may collide and whose shapes overlap at q."""
    world_R, world_p = mbs.body_poses(model, q)
    poses = [(world_R[b] @ R, world_p[b] + world_R[b] @ p) if b >= 0 else (R, p)
             for b, R, p in zip(shapes.bodies, shapes.rotations, shapes.translations, strict=True)]
    found = set()
    for i, a in enumerate(shapes.bodies):
        for j in range(i + 1, len(shapes.shapes)):
            b = shapes.bodies[j]
            if collide[a + 1, b + 1] and (min(a, b), max(a, b)) not in found and mbs.collision.distance(
                    shapes.shapes[i], poses[i], shapes.shapes[j], poses[j]).distance <= 0.0:
                found.add((min(a, b), max(a, b)))
    return sorted(found)


def objects_table(steps):
    print(f"\nfree objects, us per step, dt = {DT * 1e3:g} ms, best of 5 runs of {steps} steps; ours one compiled "
          f"call, MuJoCo mj_step(nstep={steps})")
    print(f"{'set-up':40} {'ours':>8} {'mj_step':>8} {'ratio':>6}   {'moved':>7} {'mj':>7}   unconverged")
    for count in (1, 10, 100):
        centres = grid(count)
        our_us, our_moved, unconverged = our_row(centres, {"max_collisions": 0}, steps)
        their_us, their_moved = their_row(centres, steps)
        label = f"panda + {count} {'boxes' if count > 1 else 'box'} on the ground"
        print(f"{label:40} {our_us:8.1f} {their_us:8.1f} {our_us / their_us:6.2f}"
              f"   {our_moved:.1e} {their_moved:.1e}   {unconverged}")
    model = mbs.Model.from_urdf_file(PANDA)
    with open(PANDA) as file:
        shapes = collision_shapes(model, file.read())
    centres = table_boxes()
    our_us, our_moved, unconverged = our_row(centres, {"ground": None, "boxes": (TABLE,), "collision_shapes": shapes},
                                             steps)
    their_us, their_moved = their_row(centres, steps, ground=False, shapes=shapes)
    print(f"{'panda meshes + 10 boxes on a table':40} {our_us:8.1f} {their_us:8.1f} {our_us / their_us:6.2f}"
          f"   {our_moved:.1e} {their_moved:.1e}   {unconverged}")
    (without, with_), moved, pairs, overlapping = talos_self_collision(steps)
    print(f"talos standing, self-collision off / on: {without:.1f} / {with_:.1f} us, {with_ / without:.2f}x "
          f"(target <= 1.5x); {pairs} shape pairs may meet ({overlapping} body pairs overlapping at the start "
          f"disabled beside the SRDF's); moved {moved:.1e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    arguments = parser.parse_args()
    print(f"mujoco {mujoco.__version__}, mbs_dynamics {mbs.__version__}, load average {os.getloadavg()[0]:.2f}")
    objects_table(arguments.steps)


if __name__ == "__main__":
    main()
