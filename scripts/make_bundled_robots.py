#!/usr/bin/env python3
"""Writes the bundled robots, mbs_dynamics/mbs_dynamics/robots/*.urdf.

Every inertia is that of a solid body of uniform density: a link of the arm
is a cylinder from its joint to the next joint, the quadruped's trunk a box,
its leg segments cylinders. Run it again after changing a number here; the
URDFs are committed so that nothing is generated at install time.

arm7: a 7-DoF torque-controlled arm of the KUKA LBR iiwa 7 class (joint
layout roll/pitch alternating, ~24 kg, reach ~1.1 m, the iiwa's limits), with
a 0.6 kg tool on a fixed joint and a massless tool centre point frame; each
link collides as the cylinder it is drawn as.
quadruped: a 12-DoF quadruped of the Solo/ANYmal-mini class (~12 kg, legs
HAA-HFE-KFE, feet frames at the leg tips), for floating_base=True.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "mbs_dynamics" / "mbs_dynamics" / "robots"


def cylinder_inertia(mass, radius, segment):
    """Inertia about the CoM of a solid cylinder along `segment`."""
    length = float(np.linalg.norm(segment))
    u = np.asarray(segment, float) / length if length > 0 else np.array([0.0, 0.0, 1.0])
    transverse = mass * (3 * radius**2 + length**2) / 12
    axial = mass * radius**2 / 2
    return transverse * (np.eye(3) - np.outer(u, u)) + axial * np.outer(u, u)


def box_inertia(mass, size):
    x, y, z = size
    return np.diag([mass * (y * y + z * z), mass * (x * x + z * z), mass * (x * x + y * y)]) / 12


def fmt(values):
    return " ".join(f"{v:.6g}" if abs(v) > 1e-15 else "0" for v in values)


def inertial_xml(mass, com, inertia):
    i = inertia
    return (
        f'    <inertial>\n'
        f'      <origin xyz="{fmt(com)}" rpy="0 0 0"/>\n'
        f'      <mass value="{mass:.6g}"/>\n'
        f'      <inertia ixx="{i[0, 0]:.6g}" ixy="{i[0, 1]:.6g}" ixz="{i[0, 2]:.6g}" '
        f'iyy="{i[1, 1]:.6g}" iyz="{i[1, 2]:.6g}" izz="{i[2, 2]:.6g}"/>\n'
        f'    </inertial>\n'
    )


def link_xml(name, mass=None, com=None, inertia=None, visual=None, collision=None):
    body = inertial_xml(mass, com, inertia) if mass is not None else ""
    if visual:
        body += f"    <visual>\n      {visual}\n    </visual>\n"
    if collision:
        body += f"    <collision>\n      {collision}\n    </collision>\n"
    return f'  <link name="{name}">\n{body}  </link>\n'


def segment_visual(segment, radius):
    """A cylinder from the link origin to `segment` (its axis, z, along it)."""
    segment = np.asarray(segment, dtype=float)
    z = segment / np.linalg.norm(segment)
    x = np.cross([0.0, 0.0, 1.0], z)  # horizontal: no gimbal lock in the rpy below
    x = x / np.linalg.norm(x) if np.linalg.norm(x) > 1e-9 else np.array([1.0, 0.0, 0.0])
    R = np.column_stack([x, np.cross(z, x), z])
    rpy = (np.arctan2(R[2, 1], R[2, 2]), -np.arcsin(np.clip(R[2, 0], -1, 1)), np.arctan2(R[1, 0], R[0, 0]))
    return (f'<origin xyz="{fmt(segment / 2)}" rpy="{fmt(rpy)}"/>\n'
            f'      <geometry><cylinder radius="{radius}" length="{np.linalg.norm(segment):.4g}"/></geometry>')


def joint_xml(name, kind, parent, child, xyz, rpy=(0, 0, 0), axis=None, limit=None, damping=None, friction=None):
    s = f'  <joint name="{name}" type="{kind}">\n'
    s += f'    <parent link="{parent}"/>\n    <child link="{child}"/>\n'
    s += f'    <origin xyz="{fmt(xyz)}" rpy="{fmt(rpy)}"/>\n'
    if axis is not None:
        s += f'    <axis xyz="{fmt(axis)}"/>\n'
    if limit is not None:
        lower, upper, effort, velocity = limit
        s += f'    <limit lower="{lower}" upper="{upper}" effort="{effort}" velocity="{velocity}"/>\n'
    if damping is not None:
        s += f'    <dynamics damping="{damping}" friction="{friction}"/>\n'
    return s + "  </joint>\n"


def arm7():
    pi = math.pi
    # (joint origin xyz, rpy) in the parent link frame, as in the iiwa 7 layout;
    # the last entry is the flange of link 7.
    joints = [
        ((0, 0, 0.15), (0, 0, 0)),
        ((0, 0, 0.19), (pi / 2, 0, pi)),
        ((0, 0.21, 0), (pi / 2, 0, pi)),
        ((0, 0, 0.19), (pi / 2, 0, 0)),
        ((0, 0.21, 0), (-pi / 2, pi, 0)),
        ((0, 0.06, 0.19), (pi / 2, 0, 0)),
        ((0, 0.081, 0.06), (-pi / 2, pi, 0)),
        ((0, 0, 0.071), (0, 0, 0)),  # flange
    ]
    masses = [3.0, 3.4, 3.4, 3.2, 2.8, 2.2, 1.6, 0.5]  # base_link, link1..link7
    radii = [0.09, 0.07, 0.07, 0.065, 0.065, 0.055, 0.05, 0.045]
    limits = [  # lower, upper (rad), effort (N m), velocity (rad/s): iiwa 7
        (-2.967, 2.967, 176, 1.71), (-2.094, 2.094, 176, 1.71), (-2.967, 2.967, 110, 1.75),
        (-2.094, 2.094, 110, 2.27), (-2.967, 2.967, 110, 2.44), (-2.094, 2.094, 40, 3.14),
        (-3.054, 3.054, 40, 3.14),
    ]
    damping = [0.5, 0.5, 0.4, 0.4, 0.2, 0.1, 0.1]
    friction = [0.2, 0.2, 0.15, 0.15, 0.1, 0.05, 0.05]
    names = ["base_link"] + [f"link{i}" for i in range(1, 8)]

    out = ['<?xml version="1.0"?>\n',
           "<!-- Generated by scripts/make_bundled_robots.py: solid-body inertias. -->\n",
           '<robot name="mbs_arm7">\n']
    for i, name in enumerate(names):
        segment = np.array(joints[i][0], float)  # to the next joint (or the flange)
        out.append(link_xml(
            name, masses[i], segment / 2, cylinder_inertia(masses[i], radii[i], segment),
            visual=segment_visual(segment, radii[i]), collision=segment_visual(segment, radii[i]),
        ))
    for i in range(7):
        xyz, rpy = joints[i]
        out.append(joint_xml(f"joint{i + 1}", "revolute", names[i], names[i + 1], xyz, rpy,
                             axis=(0, 0, 1), limit=limits[i], damping=damping[i], friction=friction[i]))
    # A 0.6 kg tool (a short cylinder) on the flange, and the tool centre point.
    tool_length, tool_mass = 0.1, 0.6
    out.append(joint_xml("flange_joint", "fixed", "link7", "tool", joints[7][0]))
    out.append(link_xml("tool", tool_mass, (0, 0, tool_length / 2),
                        cylinder_inertia(tool_mass, 0.04, (0, 0, tool_length)),
                        visual=segment_visual((0, 0, tool_length), 0.04),
                        collision=segment_visual((0, 0, tool_length), 0.04)))
    out.append(joint_xml("tcp_joint", "fixed", "tool", "tcp", (0, 0, tool_length)))
    out.append(link_xml("tcp"))
    out.append("</robot>\n")
    return "".join(out)


def quadruped():
    trunk_size, trunk_mass = (0.42, 0.22, 0.10), 6.0
    hip_offset = (0.21, 0.12, 0.0)  # HAA joint positions: (±x, ±y, z) in the trunk frame
    hip_mass, hip_length, hip_radius = 0.45, 0.07, 0.035
    thigh_mass, thigh_length, thigh_radius = 0.8, 0.2, 0.025
    shank_mass, shank_length, shank_radius = 0.3, 0.2, 0.015
    foot_mass, foot_radius = 0.05, 0.02
    limits = {"HAA": (-0.9, 0.9, 25, 15), "HFE": (-2.5, 2.5, 25, 15), "KFE": (-2.7, 2.7, 25, 15)}

    out = ['<?xml version="1.0"?>\n',
           "<!-- Generated by scripts/make_bundled_robots.py: solid-body inertias. -->\n",
           '<robot name="mbs_quadruped">\n']
    trunk = f'<geometry><box size="{fmt(trunk_size)}"/></geometry>'
    out.append(link_xml("base_link", trunk_mass, (0, 0, 0), box_inertia(trunk_mass, trunk_size),
                        visual=trunk, collision=trunk))
    for leg, sx, sy in (("LF", 1, 1), ("RF", 1, -1), ("LH", -1, 1), ("RH", -1, -1)):
        hip, thigh, shank, foot = f"{leg}_HIP", f"{leg}_THIGH", f"{leg}_SHANK", f"{leg}_FOOT"
        out.append(joint_xml(f"{leg}_HAA", "revolute", "base_link", hip,
                             (sx * hip_offset[0], sy * hip_offset[1], hip_offset[2]), axis=(1, 0, 0),
                             limit=limits["HAA"], damping=0.05, friction=0.02))
        hip_segment = np.array([0.0, sy * hip_length, 0.0])
        # The legs' links are drawn (visual) but touch nothing: only the feet collide.
        out.append(link_xml(hip, hip_mass, hip_segment / 2, cylinder_inertia(hip_mass, hip_radius, hip_segment),
                            visual=segment_visual(hip_segment, hip_radius)))
        out.append(joint_xml(f"{leg}_HFE", "revolute", hip, thigh, hip_segment, axis=(0, 1, 0),
                             limit=limits["HFE"], damping=0.05, friction=0.02))
        thigh_segment = np.array([0.0, 0.0, -thigh_length])
        out.append(link_xml(thigh, thigh_mass, thigh_segment / 2,
                            cylinder_inertia(thigh_mass, thigh_radius, thigh_segment),
                            visual=segment_visual(thigh_segment, thigh_radius)))
        out.append(joint_xml(f"{leg}_KFE", "revolute", thigh, shank, thigh_segment, axis=(0, 1, 0),
                             limit=limits["KFE"], damping=0.05, friction=0.02))
        shank_segment = np.array([0.0, 0.0, -shank_length])
        out.append(link_xml(shank, shank_mass, shank_segment / 2,
                            cylinder_inertia(shank_mass, shank_radius, shank_segment),
                            visual=segment_visual(shank_segment, shank_radius)))
        # The foot: a small solid sphere at the shank tip, its frame at the sphere's centre.
        out.append(joint_xml(f"{leg}_ANKLE", "fixed", shank, foot, shank_segment))
        sphere = f'<geometry><sphere radius="{foot_radius}"/></geometry>'
        out.append(link_xml(foot, foot_mass, (0, 0, 0), np.eye(3) * 0.4 * foot_mass * foot_radius**2,
                            visual=sphere, collision=sphere))
    out.append("</robot>\n")
    return "".join(out)


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "arm7.urdf").write_text(arm7())
    (OUT / "quadruped.urdf").write_text(quadruped())
    print(f"wrote {OUT / 'arm7.urdf'} and {OUT / 'quadruped.urdf'}")
