"""URDF -> RobotDescription: what loads, what is refused and why, and the tree
against Pinocchio's reading of the same real robots (a test-only oracle)."""
from __future__ import annotations

import math
import sys

import mbs_dynamics as mbs
import numpy as np
import pytest

from oracles import REAL_ROBOTS, ROBOTS_DIR, robot_path


def urdf(body: str, name: str = "r") -> str:
    return f'<?xml version="1.0"?><robot name="{name}">{body}</robot>'


def link(name: str, mass: float | None = 1.0, inertia=(0.1, 0.1, 0.1, 0, 0, 0), xyz="0 0 0", rpy="0 0 0"):
    if mass is None:
        return f'<link name="{name}"/>'
    ixx, iyy, izz, ixy, ixz, iyz = inertia
    return (f'<link name="{name}"><inertial><origin xyz="{xyz}" rpy="{rpy}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" ixy="{ixy}" ixz="{ixz}" iyz="{iyz}"/>'
            f'</inertial></link>')


def joint(name, parent, child, kind="revolute", axis="0 0 1", xyz="0 0 0", rpy="0 0 0", extra=""):
    axis_xml = f'<axis xyz="{axis}"/>' if axis is not None else ""
    limit = '<limit lower="-1" upper="1" effort="10" velocity="2"/>' if kind in ("revolute", "prismatic") else ""
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/>{axis_xml}{limit}{extra}</joint>')


# --- what loads ---------------------------------------------------------


def test_bundled_robots_are_physically_sensible():
    expected = {"arm7": (7, 2, 20.7), "quadruped": (12, 4, 12.4)}
    for name, (moving, fixed, mass) in expected.items():
        robot = mbs.parse_urdf_file(mbs.bundled_robot(name))
        assert robot.warnings == ()
        joints = list(robot.joints.values())
        assert sum(j.type != "fixed" for j in joints) == moving
        assert sum(j.type == "fixed" for j in joints) == fixed
        total = sum(body.inertial.mass for body in robot.links.values() if body.inertial)
        assert total == pytest.approx(mass, rel=1e-12)
        for body in robot.links.values():
            if body.inertial is None:
                continue
            eigenvalues = np.linalg.eigvalsh(body.inertial.inertia)
            assert eigenvalues[0] > 0, body.name
            assert eigenvalues[2] <= eigenvalues[0] + eigenvalues[1], body.name
        for j in joints:
            if j.type == "revolute":
                assert j.lower < 0 < j.upper and 0 < j.effort < math.inf and 0 < j.velocity < math.inf


def test_unknown_bundled_robot_is_refused():
    with pytest.raises(ValueError, match="no bundled robot 'hexapod'"):
        mbs.bundled_robot("hexapod")


def test_joint_fields_and_conventions():
    xml = urdf(
        link("base") + link("a", 2.0, (0.2, 0.3, 0.4, 0.01, 0.02, 0.03), xyz="0.1 0 0", rpy="0 0 1.5707963267948966")
        + link("b") + link("c", None)
        + joint("j1", "base", "a", axis="0 0 2", xyz="1 2 3", rpy="0 0 1.5707963267948966",
                extra='<dynamics damping="0.5" friction="0.25"/>')
        + joint("j2", "a", "b", kind="continuous", axis=None)
        + joint("j3", "b", "c", kind="prismatic", extra='<mimic joint="j1" multiplier="2" offset="0.5"/>')
    )
    robot = mbs.parse_urdf_string(xml)
    j1, j2, j3 = robot.joints["j1"], robot.joints["j2"], robot.joints["j3"]
    np.testing.assert_allclose(j1.axis, [0, 0, 1])  # normalised
    np.testing.assert_allclose(j2.axis, [1, 0, 0])  # URDF default axis
    np.testing.assert_allclose(j1.origin[:3, 3], [1, 2, 3])
    np.testing.assert_allclose(j1.origin[:3, :3], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-15)
    assert (j1.lower, j1.upper, j1.effort, j1.velocity) == (-1, 1, 10, 2)
    assert (j1.damping, j1.friction) == (0.5, 0.25)
    assert (j2.lower, j2.upper, j2.effort) == (-math.inf, math.inf, math.inf)
    assert j3.mimic == mbs.multibody.parsers.urdf.Mimic("j1", 2.0, 0.5)
    assert robot.links["c"].inertial is None  # massless
    a = robot.links["a"].inertial
    np.testing.assert_allclose(a.com, [0.1, 0, 0])
    # <inertial><origin rpy> rotates the inertia into link axes: R I R^T, yaw of 90 degrees.
    rotation = np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]])
    local = np.array([[0.2, 0.01, 0.02], [0.01, 0.3, 0.03], [0.02, 0.03, 0.4]])
    np.testing.assert_allclose(a.inertia, rotation @ local @ rotation.T, atol=1e-15)


def test_rpy_is_fixed_axis_roll_pitch_yaw():
    roll, pitch, yaw = 0.3, -0.7, 1.1
    robot = mbs.parse_urdf_string(urdf(link("a") + link("b") + joint("j", "a", "b", rpy=f"{roll} {pitch} {yaw}")))

    def rot(axis, angle):
        c, s = math.cos(angle), math.sin(angle)
        i, j = [(1, 2), (2, 0), (0, 1)][axis]
        r = np.eye(3)
        r[i, i] = r[j, j] = c
        r[i, j], r[j, i] = -s, s
        return r

    expected = rot(2, yaw) @ rot(1, pitch) @ rot(0, roll)
    np.testing.assert_allclose(robot.joints["j"].origin[:3, :3], expected, atol=1e-15)


def test_depth_first_order_follows_the_document():
    # Root r with children added in document order b-branch then a-branch.
    xml = urdf(
        "".join(link(n) for n in ("r", "a", "a2", "b", "b2"))
        + joint("jb", "r", "b") + joint("ja", "r", "a") + joint("ja2", "a", "a2") + joint("jb2", "b", "b2")
    )
    robot = mbs.parse_urdf_string(xml)
    assert robot.root == "r"
    assert list(robot.joints) == ["jb", "jb2", "ja", "ja2"]
    assert list(robot.links) == ["r", "b", "b2", "a", "a2"]


def test_visuals_meshes_transmissions_and_gazebo_do_not_matter():
    xml = urdf(
        '<link name="a"><visual><geometry><mesh filename="package://nowhere/x.dae"/></geometry></visual>'
        '<collision><geometry><mesh/></geometry></collision></link>' + link("b")
        + joint("j", "a", "b") + '<transmission name="t"><type>x</type></transmission>'
        + '<gazebo reference="a"><material>Gazebo/Grey</material></gazebo><material name="m"/>'
    )
    robot = mbs.parse_urdf_string(xml)
    assert list(robot.joints) == ["j"]


# --- what is refused, and the message names the culprit -------------------

REFUSED = {
    "not xml": ("<robot name='r'><link", "not XML"),
    "empty": ("   ", "empty"),
    "not a robot": ("<sdf version='1.6'/>", "root element is <sdf>"),
    "no links": (urdf(""), "has no <link>"),
    "two parents": (urdf(link("a") + link("b") + link("c") + joint("j1", "a", "c") + joint("j2", "b", "c")),
                    "link 'c' has two parents: joints 'j1' and 'j2'"),
    "several roots": (urdf(link("a") + link("b")), "2 root links \\(a, b\\)"),
    "cycle": (urdf(link("a") + link("b") + link("c") + joint("j1", "a", "b") + joint("j2", "b", "c")
                   + joint("j3", "c", "b")), "two parents"),
    "closed cycle": (urdf(link("a") + link("b") + joint("j1", "a", "b") + joint("j2", "b", "a")),
                     "joints form a cycle"),
    "unknown joint type": (urdf(link("a") + link("b") + joint("j", "a", "b", kind="ball")),
                           "joint 'j'.*type.*ball"),
    "zero axis": (urdf(link("a") + link("b") + joint("hinge", "a", "b", axis="0 0 0")),
                  "joint 'hinge' has a zero axis"),
    "missing link": (urdf(link("a") + joint("j", "a", "ghost")), "joint 'j' names child link 'ghost'"),
    "negative mass": (urdf(link("heavy", -1.0)), "link 'heavy'.*negative mass"),
    "nan mass": (urdf(link("heavy", float("nan"))), "link 'heavy'.*mass is not finite"),
    "nan origin": (urdf(link("a") + link("b") + joint("j", "a", "b", xyz="0 nan 0")),
                   "joint 'j' <origin> xyz is not finite"),
    "indefinite inertia": (urdf(link("arm", 1.0, (1.0, 1.0, -0.5, 0, 0, 0))),
                           "link 'arm' has an inertia that is not positive semi-definite"),
    "huge mass": (urdf(link("heavy", 1e308)), "link 'heavy' <inertial> mass is larger than 1e\\+12"),
    "huge inertia": (urdf(link("arm", 1.0, (1e308, 1e308, 1e308, 0, 0, 0))),
                     "link 'arm' <inertial> inertia is larger than 1e\\+12"),
    "huge centre of mass": (urdf(link("arm", 1.0, xyz="1e308 0 0")),
                            "link 'arm' <inertial> <origin> xyz is larger than 1e\\+12"),
    "lower above upper": (urdf(link("a") + link("b") + '<joint name="j" type="revolute"><parent link="a"/>'
                               '<child link="b"/><limit lower="1" upper="-1" effort="1" velocity="1"/></joint>'),
                          "joint 'j' has lower limit 1.0 above upper limit -1.0"),
    "duplicate link": (urdf(link("a") + link("a")), "link 'a' is defined twice"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unusable_urdf_is_refused_with_a_message_naming_it(case):
    xml, message = REFUSED[case]
    with pytest.raises(mbs.URDFError, match=message):
        mbs.parse_urdf_string(xml)


def test_urdf_error_is_a_value_error_and_missing_file_is_reported():
    assert issubclass(mbs.URDFError, ValueError)
    with pytest.raises(mbs.URDFError, match="cannot read URDF file /no/such.urdf"):
        mbs.parse_urdf_file("/no/such.urdf")


def test_files_that_never_end_or_are_too_large_are_refused_before_reading(tmp_path):
    """/dev/zero was read until memory ran out; a FIFO blocks open() for ever."""
    import os

    from mbs_dynamics.multibody.parsers.urdf import MAX_URDF_BYTES

    with pytest.raises(mbs.URDFError, match="cannot read URDF file /dev/zero: not a regular file"):
        mbs.parse_urdf_file("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(mbs.URDFError, match="not a regular file"):
        mbs.parse_urdf_file(fifo)
    with pytest.raises(mbs.URDFError, match="not a regular file"):
        mbs.parse_urdf_file(tmp_path)
    big = tmp_path / "big.urdf"
    with open(big, "wb") as f:
        f.truncate(MAX_URDF_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(mbs.URDFError, match=f"has {MAX_URDF_BYTES + 1} bytes, more than the {MAX_URDF_BYTES}"):
        mbs.parse_urdf_file(big)
    with pytest.raises(mbs.URDFError, match="more than the"):
        mbs.parse_urdf_string("x" * (MAX_URDF_BYTES + 1))
    binary = tmp_path / "binary.urdf"
    binary.write_bytes(b"<robot name='r'>\xff\xfe</robot>")
    with pytest.raises(mbs.URDFError, match="is not UTF-8 text"):
        mbs.parse_urdf_file(binary)


def test_an_axis_too_large_to_normalise_naively_keeps_its_direction():
    """1e200 squared overflows: the axis was stored as zero and a later error blamed a massless link."""
    robot = mbs.parse_urdf_string(urdf(link("a") + link("b") + joint("j", "a", "b", axis="1e200 1e200 0")))
    np.testing.assert_allclose(robot.joints["j"].axis, [2**-0.5, 2**-0.5, 0.0], atol=1e-15)
    robot = mbs.parse_urdf_string(urdf(link("a") + link("b") + joint("j", "a", "b", axis="0 -3e-300 0")))
    np.testing.assert_allclose(robot.joints["j"].axis, [0.0, -1.0, 0.0], atol=1e-15)


def test_negative_damping_or_friction_is_warned_and_taken_as_zero():
    dynamics = '<dynamics damping="-0.5" friction="-2"/>'
    robot = mbs.parse_urdf_string(urdf(link("a") + link("b") + joint("j", "a", "b", extra=dynamics)))
    assert robot.joints["j"].damping == 0.0 and robot.joints["j"].friction == 0.0
    assert robot.warnings == ("joint 'j' has a negative damping (-0.5): not physical, taken as 0",
                              "joint 'j' has a negative friction (-2): not physical, taken as 0")
    with pytest.raises(mbs.URDFError, match="negative damping"):
        mbs.parse_urdf_string(urdf(link("a") + link("b") + joint("j", "a", "b", extra=dynamics)), strict=True)


def test_fixed_joints_with_a_mimic_are_one_warning():
    """TALOS's grippers: twelve fixed joints with <mimic>, once twelve lines from every node."""
    robot = mbs.parse_urdf_file(robot_path("talos"))
    assert len(robot.warnings) == 1
    assert robot.warnings[0].startswith("12 fixed joints carry a <mimic>, ignored: gripper_left_inner_double_joint")


MIMIC_PROBLEMS = {
    "missing": (urdf(link("a") + link("b") + joint("j", "a", "b", extra='<mimic joint="nope"/>')),
                "joint 'j' mimics joint 'nope', which does not exist"),
    "cycle": (urdf(link("a") + link("b") + link("c")
                   + joint("j1", "a", "b", extra='<mimic joint="j2"/>')
                   + joint("j2", "b", "c", extra='<mimic joint="j1"/>')), "mimic joints form a cycle"),
}


@pytest.mark.parametrize("case", sorted(MIMIC_PROBLEMS))
def test_a_mimic_that_cannot_be_coupled_is_refused_only_when_coupled(case):
    """alex_psyonic_hands.urdf mimics missing joints: mimic='independent' never uses them."""
    xml, message = MIMIC_PROBLEMS[case]
    with pytest.raises(mbs.URDFError, match=message + ".*mimic='independent' loads mimic joints as free joints"):
        mbs.Model.from_urdf_string(xml)
    model = mbs.Model.from_urdf_string(xml, mimic="independent")
    assert any(message in warning and "unused" in warning for warning in model.warnings)


def test_alex_with_psyonic_hands_loads_with_independent_mimics():
    path = ROBOTS_DIR / "alex_description/urdf/alex_psyonic_hands.urdf"
    with pytest.raises(mbs.URDFError, match="mimics joint 'index_q1', which does not exist"):
        mbs.Model.from_urdf_file(path)
    model = mbs.Model.from_urdf_file(path, mimic="independent")
    q = model.neutral_configuration()
    assert np.all(np.isfinite(mbs.inverse_dynamics(model, q, np.zeros(model.nv), np.zeros(model.nv))))


def test_joints_that_move_no_mass_are_warned_at_load_and_named_by_forward_dynamics():
    """romeo.urdf's hands: massless links that make M singular, once loaded without a word."""
    path = ROBOTS_DIR / "romeo_description/urdf/romeo.urdf"
    coupled = mbs.Model.from_urdf_file(path)
    assert coupled.has_coupled_joints  # the path that lost the joint's name
    assert any(w.startswith("2 joints move no mass or inertia") and "LHand, RHand" in w for w in coupled.warnings)
    q, zero = coupled.neutral_configuration(), np.zeros(coupled.nv)
    with pytest.raises(mbs.SingularMassMatrix, match="joint 'LHand' moves no mass or inertia"):
        mbs.forward_dynamics(coupled, q, zero, zero)
    independent = mbs.Model.from_urdf_file(path, mimic="independent")
    inert = next(w for w in independent.warnings if "move no mass" in w)
    assert "RThumb3" in inert
    q, zero = independent.neutral_configuration(), np.zeros(independent.nv)
    with pytest.raises(mbs.SingularMassMatrix, match="joint '(\\w+)' moves no mass") as error:
        mbs.forward_dynamics(independent, q, zero, zero)
    assert error.value.args[0].split("joint '")[1].split("'")[0] in inert
    assert np.all(np.isfinite(mbs.inverse_dynamics(independent, q, zero, zero)))  # inverse dynamics works


def test_a_urdf_joint_named_root_joint_and_a_floating_base():
    """The floating base is named root_joint: a URDF joint of that name once gave a model with two."""
    xml = urdf(link("a") + link("b") + joint("root_joint", "a", "b"))
    fixed = mbs.Model.from_urdf_string(xml)
    assert fixed.joint_names == ("root_joint",) and fixed.q_index("root_joint") == 0
    with pytest.raises(mbs.URDFError, match="has a joint named 'root_joint', the name of the floating base joint"):
        mbs.Model.from_urdf_string(xml, floating_base=True)


def test_imperfect_inertias_load_with_one_warning_per_link_or_fail_when_strict():
    xml = urdf(
        link("base") + link("rod", 1.0, (0.0, 0.0, 3e-6, 0, 0, 0))  # breaks the triangle inequality
        + link("antenna", 0.1, (1e-4, 1e-4, -3.5e-8, 0, 0, 0))  # TIAGo-like, slightly indefinite
        + joint("j1", "base", "rod") + joint("j2", "base", "antenna")
    )
    robot = mbs.parse_urdf_string(xml)
    assert len(robot.warnings) == 2
    assert "link 'rod'" in robot.warnings[0] and "triangle inequality" in robot.warnings[0]
    assert "link 'antenna'" in robot.warnings[1] and "indefinite" in robot.warnings[1]
    with pytest.raises(mbs.URDFError, match="link 'rod'"):
        mbs.parse_urdf_string(xml, strict=True)


# --- real robots, read independently by Pinocchio --------------------------


@pytest.mark.parametrize("name", sorted(REAL_ROBOTS))
def test_real_robot_tree_matches_pinocchio(name):
    pin = pytest.importorskip("pinocchio")
    robot = mbs.parse_urdf_file(robot_path(name))
    model = pin.buildModelFromUrdf(robot_path(name))

    moving = {j.name: j for j in robot.joints.values() if j.type != "fixed"}
    assert set(moving) == set(model.names[1:])
    # Same tree: every joint's nearest moving ancestor joint is Pinocchio's parent joint.
    parent_joint = {j.child: j for j in robot.joints.values()}
    for joint_name, joint_description in moving.items():
        link_name, ancestor = joint_description.parent, "universe"
        while link_name in parent_joint:
            candidate = parent_joint[link_name]
            if candidate.type != "fixed":
                ancestor = candidate.name
                break
            link_name = candidate.parent
        assert model.names[model.parents[model.getJointId(joint_name)]] == ancestor, joint_name
    # Depth-first pre-order: a joint comes after the joint above it.
    order = list(robot.joints)
    for j in robot.joints.values():
        if j.parent in parent_joint:
            assert order.index(parent_joint[j.parent].name) < order.index(j.name)
    # Same mass, and the same position limits where the URDF gives them.
    mass = sum(body.inertial.mass for body in robot.links.values() if body.inertial)
    assert mass == pytest.approx(sum(i.mass for i in model.inertias), rel=1e-12)
    for joint_name, j in moving.items():
        if j.type in ("revolute", "prismatic"):
            index = model.joints[model.getJointId(joint_name)].idx_q
            assert model.lowerPositionLimit[index] == pytest.approx(j.lower, abs=1e-12)
            assert model.upperPositionLimit[index] == pytest.approx(j.upper, abs=1e-12)


def test_all_example_robot_data_urdfs_load_except_the_broken_ones():
    """Every URDF of example-robot-data loads, but for two that are broken, and
    becomes a model with independent mimics; with coupled ones, all but the
    one whose mimics name missing joints."""
    broken = {
        "ur3.urdf": "has no <link>",  # an empty <robot>
        "romeo_laas_small.urdf": "link 'body' has an inertia that is not positive semi-definite",
    }
    uncoupled = {"alex_psyonic_hands.urdf": "mimics joint 'index_q1', which does not exist"}
    paths = sorted(ROBOTS_DIR.glob("**/*.urdf"))
    assert len(paths) > 50
    loaded = 0
    for path in paths:
        if path.name in broken:
            with pytest.raises(mbs.URDFError, match=broken[path.name]):
                mbs.parse_urdf_file(path)
            continue
        robot = mbs.parse_urdf_file(path)
        assert robot.joints or len(robot.links) == 1
        mbs.Model(robot, mimic="independent")
        if path.name in uncoupled:
            with pytest.raises(mbs.URDFError, match=uncoupled[path.name]):
                mbs.Model(robot)
        else:
            mbs.Model(robot)
        loaded += 1
    assert loaded == len(paths) - len(broken)


def test_core_does_not_import_ros():
    code = "import mbs_dynamics, sys; bad = [m for m in sys.modules if m.startswith(('rclpy', 'rosidl'))]; print(bad)"
    import subprocess

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_installed_package_is_under_test():
    import sysconfig

    assert mbs.__file__.startswith(sysconfig.get_paths()["purelib"]), mbs.__file__


def test_concurrent_parsing_keeps_each_robot_and_its_own_warnings():
    """The nodes of the bringup parse on several threads at once."""
    from concurrent.futures import ThreadPoolExecutor

    imperfect = urdf(link("rod", 1.0, (0.0, 0.0, 3e-6, 0, 0, 0)), name="imperfect")
    with open(mbs.bundled_robot("arm7")) as f:
        clean = f.read()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(mbs.parse_urdf_string, [imperfect, clean] * 50))
    for robot in results:
        if robot.name == "imperfect":
            assert len(robot.warnings) == 1 and "link 'rod'" in robot.warnings[0]
        else:
            assert robot.name == "mbs_arm7" and robot.warnings == () and len(robot.joints) == 9
