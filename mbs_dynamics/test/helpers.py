"""What several test modules share: the tolerance check, small test robots
(a chain with every joint type and a mimic, a box, a rod) and real robots in
poses the tests start from. Test modules import these, never each other."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np

from oracles import robot_path

RTOL = 1e-9  # relative, against the largest magnitude of the reference


def close(actual, expected, rtol=RTOL):
    scale = max(1.0, float(np.max(np.abs(expected))))
    error = float(np.max(np.abs(np.asarray(actual) - expected)))
    assert error <= rtol * scale, f"error {error:.3g} > {rtol:g} x {scale:.3g}"

FLOATING = {"solo12", "anymal", "talos", "icub", "romeo"}

CHAIN = """<robot name="chain">
  <link name="base"/>
  {links}
  <joint name="slide" type="prismatic"><parent link="base"/><child link="l1"/>
    <origin xyz="0.1 0 0.2" rpy="0.3 0 0"/><axis xyz="1 1 0"/>
    <limit lower="-1" upper="1" effort="10" velocity="1"/></joint>
  <joint name="plane" type="planar"><parent link="l1"/><child link="l2"/>
    <origin xyz="0 0.2 0" rpy="0 0.4 0.2"/><axis xyz="0 1 1"/></joint>
  <joint name="hinge" type="revolute"><parent link="l2"/><child link="l3"/>
    <origin xyz="0.3 0 0" rpy="0 0 0.5"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
  <joint name="spin" type="continuous"><parent link="l3"/><child link="l4"/>
    <origin xyz="0 0 0.25"/><axis xyz="1 0 0"/></joint>
  <joint name="follower" type="revolute"><parent link="l3"/><child link="l5"/>
    <origin xyz="0 0.1 0.1"/><axis xyz="0 1 0"/><mimic joint="hinge" multiplier="-1.5" offset="0.2"/>
    <limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
  <joint name="tip" type="fixed"><parent link="l4"/><child link="l6"/><origin xyz="0.1 0 0"/></joint>
</robot>"""


def chain(mimic="coupled"):
    rng = np.random.default_rng(5)
    links = []
    for i in range(1, 7):
        a, b, c = rng.uniform(0.02, 0.1, 3)
        x, y, z = rng.uniform(-0.1, 0.1, 3)
        links.append(f'<link name="l{i}"><inertial><origin xyz="{x} {y} {z}" rpy="{a} {b} {c}"/>'
                     f'<mass value="{1 + i * 0.3}"/><inertia ixx="{b + c}" iyy="{a + c}" izz="{a + b}" '
                     f'ixy="0.001" ixz="0" iyz="0.002"/></inertial></link>')
    return mbs.Model.from_urdf_string(CHAIN.format(links="".join(links)), mimic=mimic, gravity=(0.3, -0.2, -9.81))


def mass_matrix_by_rnea(model, q):
    """Columns of RNEA with unit accelerations and no gravity or velocity."""
    zero = np.zeros(model.nv)
    base = mbs.inverse_dynamics(model, q, zero, zero)
    return np.column_stack([mbs.inverse_dynamics(model, q, zero, e) - base for e in np.eye(model.nv)])


def massless_chain_end():
    """Two joints, the second moving a link without mass: M is singular at 'j2'."""
    return mbs.Model.from_urdf_string(
        '<robot name="r"><link name="a"/><link name="b"><inertial><mass value="1"/>'
        '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link><link name="c"/>'
        '<joint name="j1" type="continuous"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/></joint>'
        '<joint name="j2" type="continuous"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/></joint>'
        '</robot>')

G = 9.81

HALF = 0.1  # the box's half side

BOX = f"""<robot name="box"><link name="box"><inertial><origin xyz="0 0 0"/><mass value="2.0"/>
<inertia ixx="{2 * 2 * HALF**2 / 3}" iyy="{2 * 2 * HALF**2 / 3}" izz="{2 * 2 * HALF**2 / 3}" ixy="0" ixz="0" iyz="0"/>
</inertial></link></robot>"""

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


def box():
    return mbs.Model.from_urdf_string(BOX, floating_base=True)


def solo12_standing():
    """Solo-12 in its SRDF 'straight_standing' posture with the feet on the ground."""
    model = mbs.Model.from_urdf_file(robot_path("solo12"), floating_base=True)
    q = model.neutral_configuration()
    for leg, hfe in (("FL", 0.8), ("FR", 0.8), ("HL", -0.8), ("HR", -0.8)):
        q[model.q_index(f"{leg}_HFE")], q[model.q_index(f"{leg}_KFE")] = hfe, -2 * hfe
    q[2] -= min(mbs.frame_pose(model, q, foot)[2, 3] for foot in FEET)
    return model, q


SOLES = ("left_sole_link", "right_sole_link")


def talos_standing():
    """TALOS (reduced) with bent knees, the soles flat on the ground at z = 0."""
    model = mbs.Model.from_urdf_file(robot_path("talos"), floating_base=True)
    q = model.neutral_configuration()
    for side in ("left", "right"):
        q[model.q_index(f"leg_{side}_3_joint")] = -0.4
        q[model.q_index(f"leg_{side}_4_joint")] = 0.8
        q[model.q_index(f"leg_{side}_5_joint")] = -0.4
    q[model.q_index("arm_left_4_joint")] = q[model.q_index("arm_right_4_joint")] = -0.5
    q[2] -= mbs.frame_pose(model, q, SOLES[0])[2, 3]
    return model, q


def rod(axis="0 0 1", damping=0.0, friction=0.0, lower=-10.0, upper=10.0):
    """A 1 kg point-like mass 0.5 m from a revolute joint: I = 0.25 kg m² about
    the axis (z: a turntable, gravity does not act on it; y: a pendulum)."""
    return mbs.Model.from_urdf_string(f"""<robot name="rod"><link name="base"/>
<link name="rod"><inertial><origin xyz="0.5 0 0"/><mass value="1.0"/>
<inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" ixz="0" iyz="0"/></inertial></link>
<joint name="hinge" type="revolute"><parent link="base"/><child link="rod"/><axis xyz="{axis}"/>
<limit lower="{lower}" upper="{upper}" effort="100" velocity="10"/>
<dynamics damping="{damping}" friction="{friction}"/></joint></robot>""")
