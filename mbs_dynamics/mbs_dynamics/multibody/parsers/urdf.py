"""URDF -> RobotDescription: the kinematic tree as the URDF states it, checked.

The XML is read by urdf-parser-py after a pre-pass that keeps only what the
dynamics uses (links with their <inertial>, joints). Visuals, collisions,
meshes (package:// URIs), materials, transmissions and <gazebo> tags never
matter, so a broken one never stops a robot from loading.

Checks: refuse what makes the dynamics meaningless (not a robot, no links, a
link with two parents, a cycle, several roots, an unknown joint type, a zero
axis, NaN/inf numbers, a mass, inertia or length beyond MAX_MAGNITUDE, a
negative mass, an inertia eigenvalue below -1e-6 * max(1, trace), a file
larger than MAX_URDF_BYTES or not a regular file); load the imperfections
real URDFs have (slightly indefinite inertias, inertias that break the
triangle inequality, massless links, negative damping or friction, taken as
0), with one warning each that names the element. ``strict=True`` turns
those warnings into errors. Mimic tags are checked by the Model that couples
them (a mimic of a missing joint only matters there): the description keeps
what is wrong with them in ``mimic_problems``.

Of the transmissions, the rotor inertia of each joint's actuator is read, in
the convention Drake's URDF parser established:
``<transmission><joint name="J"/><actuator name="A"><drake:rotor_inertia
value="I"/><drake:gear_ratio value="N"/></actuator></transmission>``; the
joint's reflected rotor inertia (armature) is I N^2 (N = 1 when absent).

A joint's friction beyond <dynamics damping friction> is read from the
project's own extension element, namespaced as Drake's are (other URDF
parsers ignore it): ``<mbs:friction coulomb="F_c" viscous="F_v"
static="F_s" stribeck_velocity="v_s" offset="o"/>`` inside the <joint>, with
``xmlns:mbs="https://mbs-dynamics.org/urdf"`` (MBS_NAMESPACE) on the
<robot>; every attribute optional (FRICTION_ATTRIBUTES). The friction
torque it describes is algorithms.joint_friction's. Unlike the standard
elements, it is the project's own, so what is wrong with it is refused, not
loaded with a warning: an unknown attribute (a misspelt one would silently
change the model), a value that is not a finite number, a negative coulomb
or viscous, static below coulomb, a stribeck_velocity not above 0, two of
them in one joint, coulomb or viscous that disagree with the joint's
<dynamics friction> or damping. On a joint other than revolute, continuous
or prismatic it is ignored with a warning.
"""
from __future__ import annotations

import math
import threading
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace

import numpy as np
from urdf_parser_py import urdf as urdf_parser
from urdf_parser_py.xml_reflection import core as urdf_parser_core

from mbs_dynamics.files import FileProblem, read_file
from mbs_dynamics.spatial.lie import rpy_to_matrix

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
AXIS_JOINT_TYPES = ("revolute", "continuous", "prismatic", "planar")

# An inertia eigenvalue below -INERTIA_TOLERANCE * max(1, trace) is refused;
# smaller defects (TIAGo's -3.5e-8) are loaded with a warning.
INERTIA_TOLERANCE = 1e-6
# The largest magnitude of a mass (kg), inertia (kg m^2) or length (m) in a
# URDF: beyond it the dynamics' products overflow (a units mistake, not a robot).
MAX_MAGNITUDE = 1e12
# The largest URDF read (bytes): real ones are well under 1 MB.
MAX_URDF_BYTES = 64 * 2**20
# The XML namespace of this project's URDF extension elements (<mbs:friction>).
MBS_NAMESPACE = "https://mbs-dynamics.org/urdf"
# <mbs:friction>'s attributes: Coulomb friction F_c (N m or N), viscous friction F_v (N m s/rad or N s/m),
# static friction F_s (N m or N, >= F_c), Stribeck velocity v_s (rad/s or m/s) and the offset (N m or N).
FRICTION_ATTRIBUTES = ("coulomb", "viscous", "static", "stribeck_velocity", "offset")
# A joint's Stribeck velocity v_s where its <mbs:friction> gives none (rad/s or m/s): between the speeds at
# which geared joints are measured sticking (~0.01) and the speeds of excitation trajectories (~1).
DEFAULT_STRIBECK_VELOCITY = 0.1


class URDFError(ValueError):
    """A URDF the dynamics cannot use. The message names the offending element."""


@dataclass(frozen=True)
class Inertial:
    """Mass properties of a link, in the link frame."""

    mass: float
    com: np.ndarray  # (3,) centre of mass in the link frame (m)
    inertia: np.ndarray  # (3, 3) rotational inertia about the CoM, link axes (kg m^2)


@dataclass(frozen=True)
class Mimic:
    """q_joint = multiplier * q_master + offset."""

    joint: str
    multiplier: float
    offset: float


@dataclass(frozen=True)
class LinkDescription:
    name: str
    inertial: Inertial | None  # None: no <inertial>, a massless link


@dataclass(frozen=True)
class JointDescription:
    name: str
    type: str
    parent: str
    child: str
    origin: np.ndarray  # (4, 4) parent link frame <- joint frame at q = 0
    axis: np.ndarray  # (3,) unit axis in the joint frame
    lower: float  # position limits (rad or m); -inf/inf when absent
    upper: float
    effort: float  # effort limit (N m or N); inf when absent
    velocity: float  # velocity limit (rad/s or m/s); inf when absent
    damping: float  # viscous damping (N m s/rad or N s/m)
    friction: float  # Coulomb friction (N m or N)
    mimic: Mimic | None
    # of <mbs:friction> (module docstring): the static friction (N m or N; None: the Coulomb friction, no
    # Stribeck effect), the Stribeck velocity (rad/s or m/s), a constant friction torque (N m or N)
    static_friction: float | None = None
    stribeck_velocity: float = DEFAULT_STRIBECK_VELOCITY
    friction_offset: float = 0.0


@dataclass(frozen=True)
class RobotDescription:
    """The checked kinematic tree of a URDF.

    ``joints`` is in depth-first pre-order from ``root``, children in the order
    their joints appear in the document (DESIGN.md §2); ``links`` in the same
    order, root first.
    """

    name: str
    root: str
    links: dict[str, LinkDescription]
    joints: dict[str, JointDescription]
    warnings: tuple[str, ...] = field(default=())
    mimic_problems: tuple[str, ...] = field(default=())  # why the <mimic> tags cannot be coupled
    armature: dict[str, float] = field(default_factory=dict)  # joint -> reflected rotor inertia (kg m^2 or kg)

    def child_joints(self, link: str) -> list[JointDescription]:
        return [j for j in self.joints.values() if j.parent == link]


def parse_urdf_file(path, strict: bool = False) -> RobotDescription:
    try:
        xml = read_file(path, "URDF file", MAX_URDF_BYTES)
    except FileProblem as error:
        raise URDFError(str(error)) from error
    return parse_urdf_string(xml, strict=strict)


def robot_element(xml, document: str, error=ValueError) -> ET.Element:
    """The <robot> root element of an XML document of the robot (a URDF, an
    SRDF); `error` saying why not."""
    try:
        tree = ET.fromstring(xml)
    except ET.ParseError as problem:
        raise error(f"the {document} is not XML: {problem}") from None
    if tree.tag != "robot":
        raise error(f"the {document}'s root element must be <robot>, but this root element is <{tree.tag[:40]}>")
    return tree


def parse_urdf_string(xml: str, strict: bool = False) -> RobotDescription:
    """Parse and check a URDF document; raise URDFError if it is unusable."""
    if not isinstance(xml, (str, bytes)):
        raise URDFError(f"a URDF must be a string, got {type(xml).__name__}")
    if isinstance(xml, str) and not xml.strip():
        raise URDFError("the URDF is empty")
    if len(xml) > MAX_URDF_BYTES:
        raise URDFError(f"the URDF has {len(xml)} characters, more than the {MAX_URDF_BYTES} a URDF may have")
    tree = robot_element(xml, "URDF", URDFError)

    robot, parser_notes = _read_with_urdf_parser_py(_dynamics_only(tree))
    notes: list[str] = []  # what is physically questionable, one per element
    links = _links(robot, notes)
    joints = _friction_extension(tree, _joints(robot, links, notes), notes)
    root = _tree_root(robot.name, links, joints)
    ordered_links, ordered_joints = _depth_first(root, links, joints)
    mimic_problems = _mimic_problems(joints)
    armature = _armature(tree, joints, notes)

    if strict and notes:
        raise URDFError("; ".join(notes))
    if parser_notes:  # unknown attributes and tags (e.g. Franka's <dynamics D=...>): one line
        notes.append(f"ignored {len(parser_notes)} unknown URDF attributes or tags, e.g. {parser_notes[0]}")
    return RobotDescription(
        name=robot.name,
        root=root,
        links=ordered_links,
        joints=ordered_joints,
        warnings=tuple(notes),
        mimic_problems=tuple(mimic_problems),
        armature=armature,
    )


def _local_name(tag: str) -> str:
    """An XML tag without its namespace: '{http://drake.mit.edu}gear_ratio' -> 'gear_ratio'."""
    return tag.rpartition("}")[2]


def _armature(tree: ET.Element, joints: dict[str, JointDescription], notes: list[str]) -> dict[str, float]:
    """The reflected rotor inertia rotor_inertia * gear_ratio^2 of each joint
    that a <transmission> gives an actuator with a (drake:)rotor_inertia."""
    armature: dict[str, float] = {}
    for transmission in tree.iter("transmission"):
        name = transmission.get("name", "")
        values = {}
        for element in transmission.iter():
            if _local_name(element.tag) in ("rotor_inertia", "gear_ratio"):
                what = f"transmission '{name}': {_local_name(element.tag)}"
                try:
                    values[_local_name(element.tag)] = float(element.get("value"))
                except (TypeError, ValueError):
                    raise URDFError(f"{what} value {element.get('value')!r} is not a number") from None
                _finite([values[_local_name(element.tag)]], what, MAX_MAGNITUDE)
        if "rotor_inertia" not in values:
            continue
        rotor_inertia, gear_ratio = values["rotor_inertia"], values.get("gear_ratio", 1.0)
        if rotor_inertia < 0:
            notes.append(f"transmission '{name}': negative rotor_inertia {rotor_inertia:g}, taken as 0")
            rotor_inertia = 0.0
        for joint in transmission.iter("joint"):
            joint_name = joint.get("name")
            if joint_name not in joints or joints[joint_name].type not in ("revolute", "continuous", "prismatic"):
                notes.append(f"transmission '{name}' drives '{joint_name}', which is not a revolute, continuous or "
                             "prismatic joint of the robot: its rotor inertia is ignored")
            elif joint_name in armature:
                notes.append(f"transmission '{name}': joint '{joint_name}' has a rotor inertia already; this one is "
                             "ignored")
            else:
                armature[joint_name] = float(_finite([rotor_inertia * gear_ratio**2],
                                                      f"transmission '{name}': rotor_inertia x gear_ratio^2",
                                                      MAX_MAGNITUDE)[0])
    return armature


def _ours(element: ET.Element) -> bool:
    """Whether element is one of this project's extension elements (MBS_NAMESPACE)."""
    return isinstance(element.tag, str) and element.tag.startswith(f"{{{MBS_NAMESPACE}}}")


def _friction_extension(tree: ET.Element, joints: dict[str, JointDescription],
                        notes: list[str]) -> dict[str, JointDescription]:
    """joints with what each <joint>'s <mbs:friction> says (module docstring), checked."""
    for element in tree.findall("joint"):
        name = element.get("name")
        found = element.findall(f"{{{MBS_NAMESPACE}}}friction")
        if not found:
            continue
        what = f"joint '{name}' <mbs:friction>"
        if len(found) > 1:
            raise URDFError(f"joint '{name}' has {len(found)} <mbs:friction> elements; give one")
        values = {}
        for attribute, text in found[0].attrib.items():
            if attribute not in FRICTION_ATTRIBUTES:
                raise URDFError(f"{what}: unknown attribute '{attribute}' (known: "
                                f"{', '.join(FRICTION_ATTRIBUTES)})")
            try:
                value = float(text)
            except ValueError:
                raise URDFError(f"{what}: {attribute} {text!r} is not a number") from None
            values[attribute] = float(_finite(value, f"{what} {attribute}", MAX_MAGNITUDE))
        for attribute in ("coulomb", "viscous"):
            if values.get(attribute, 0.0) < 0.0:
                raise URDFError(f"{what}: {attribute} {values[attribute]:g} is negative; friction opposes motion, "
                                "so it is >= 0 (a constant torque either way is the offset)")
        if not values.get("stribeck_velocity", 1.0) > 0.0:
            raise URDFError(f"{what}: stribeck_velocity {values['stribeck_velocity']:g} must be above 0 (rad/s "
                            "or m/s)")
        joint = joints[name]
        if joint.type not in ("revolute", "continuous", "prismatic"):
            notes.append(f"{what}: a {joint.type} joint has no joint friction; ignored")
            continue
        dynamics = element.find("dynamics")
        for attribute, standard in (("coulomb", "friction"), ("viscous", "damping")):
            given = dynamics.get(standard) if dynamics is not None else None
            if attribute in values and given is not None and float(given) != values[attribute]:
                raise URDFError(f"{what}: {attribute} {values[attribute]!r} and <dynamics {standard}={given!r}> "
                                "disagree; give them the same value (mbs_dynamics_identify writes both)")
        coulomb = values.get("coulomb", joint.friction)
        static = values.get("static", coulomb)
        if static < coulomb:
            raise URDFError(f"{what}: static {static:g} is below the Coulomb friction {coulomb:g}; the friction at "
                            "rest is at least the friction when sliding")
        joints[name] = replace(joint, friction=coulomb, damping=values.get("viscous", joint.damping),
                               static_friction=static,
                               stribeck_velocity=values.get("stribeck_velocity", DEFAULT_STRIBECK_VELOCITY),
                               friction_offset=values.get("offset", 0.0))
    return joints


def _dynamics_only(tree: ET.Element) -> str:
    """The <robot> with only links (and their <inertial>) and joints."""
    robot = ET.Element("robot", {k: v for k, v in tree.attrib.items() if k == "name"})
    if "name" not in robot.attrib:
        robot.set("name", "")
    for element in tree:
        if element.tag == "link":
            link = ET.SubElement(robot, "link", element.attrib)
            for child in element:
                if child.tag == "inertial":
                    link.append(child)
        elif element.tag == "joint":
            kind = element.get("type")
            if kind not in JOINT_TYPES:
                raise URDFError(f"joint '{element.get('name')}' has unknown type '{kind}' "
                                f"(known: {', '.join(JOINT_TYPES)})")
            joint = ET.SubElement(robot, "joint", element.attrib)
            joint.extend(child for child in element if not _ours(child))  # read by _friction_extension
    return ET.tostring(robot, encoding="unicode")


_urdf_parser_lock = threading.Lock()


def _read_with_urdf_parser_py(xml: str):
    notes: list[str] = []
    with _urdf_parser_lock:  # on_error is global to urdf-parser-py
        previous = urdf_parser_core.on_error
        urdf_parser_core.on_error = notes.append  # its warnings, instead of stderr
        try:
            robot = urdf_parser.URDF.from_xml_string(xml)
        except Exception as error:  # urdf-parser-py raises ParseError, ValueError, ...
            message = " ".join(str(error).split())
            raise URDFError(f"invalid URDF: {message}") from error
        finally:
            urdf_parser_core.on_error = previous
    return robot, notes


def _finite(values, what: str, bound: float = math.inf) -> np.ndarray:
    """values as floats, refused when not finite or (bound) larger in magnitude than bound."""
    array = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(array)):
        raise URDFError(f"{what} is not finite: {array.tolist()}")
    if np.any(np.abs(array) > bound):
        raise URDFError(f"{what} is larger than {bound:g} in magnitude: {array.tolist()} (a units mistake? the "
                        "dynamics would overflow)")
    return array


def _pose(origin, what: str) -> np.ndarray:
    """4x4 transform of a URDF <origin xyz rpy> (fixed-axis roll, pitch, yaw)."""
    xyz = _finite(origin.xyz if origin is not None and origin.xyz is not None else (0, 0, 0), f"{what} xyz",
                  MAX_MAGNITUDE)
    rpy = _finite(origin.rpy if origin is not None and origin.rpy is not None else (0, 0, 0), f"{what} rpy")
    if xyz.shape != (3,) or rpy.shape != (3,):
        raise URDFError(f"{what} must have 3 numbers in xyz and rpy")
    pose = np.eye(4)
    pose[:3, :3] = rpy_to_matrix(*rpy)
    pose[:3, 3] = xyz
    return pose


def _links(robot, notes: list[str]) -> dict[str, LinkDescription]:
    if not robot.links:
        raise URDFError(f"the <robot name='{robot.name}'> has no <link> element")
    links: dict[str, LinkDescription] = {}
    for link in robot.links:
        if not link.name:
            raise URDFError("a <link> has no name")
        if link.name in links:
            raise URDFError(f"link '{link.name}' is defined twice")
        links[link.name] = LinkDescription(link.name, _inertial(link, notes))
    return links


def _inertial(link, notes: list[str]) -> Inertial | None:
    if link.inertial is None:
        return None
    what = f"link '{link.name}' <inertial>"
    mass = link.inertial.mass
    if mass is None:
        raise URDFError(f"{what} has no <mass>")
    mass = float(_finite(mass, f"{what} mass", MAX_MAGNITUDE))
    if mass < 0:
        raise URDFError(f"{what} has a negative mass ({mass} kg)")
    origin = _pose(link.inertial.origin, f"{what} <origin>")
    i = link.inertial.inertia
    if i is None:
        inertia_local = np.zeros((3, 3))
    else:
        inertia_local = _finite(
            [[i.ixx, i.ixy, i.ixz], [i.ixy, i.iyy, i.iyz], [i.ixz, i.iyz, i.izz]],
            f"{what} inertia", MAX_MAGNITUDE,
        )
    rotation = origin[:3, :3]
    inertia = rotation @ inertia_local @ rotation.T
    _check_inertia(link.name, mass, inertia_local, notes)
    return Inertial(mass=mass, com=origin[:3, 3].copy(), inertia=0.5 * (inertia + inertia.T))


def _check_inertia(link: str, mass: float, inertia: np.ndarray, notes: list[str]) -> None:
    """Refuse a clearly indefinite inertia; note what else is wrong, in one line."""
    eigenvalues = np.linalg.eigvalsh(inertia)
    scale = max(1.0, abs(float(np.trace(inertia))))
    if eigenvalues[0] < -INERTIA_TOLERANCE * scale:
        raise URDFError(
            f"link '{link}' has an inertia that is not positive semi-definite "
            f"(eigenvalues {eigenvalues.tolist()} kg m^2)"
        )
    problems = []
    a, b, c = eigenvalues
    if a < -1e-12 * scale:  # below that: round-off of eigvalsh
        problems.append(f"inertia slightly indefinite (smallest eigenvalue {a:.3g} kg m^2)")
    else:
        violation = max(a - (b + c), b - (a + c), c - (a + b))
        if violation > 1e-12 * scale:
            problems.append(f"principal moments {a:.6g}, {b:.6g}, {c:.6g} kg m^2 break the "
                            f"triangle inequality by {violation:.3g}")
    if mass == 0 and np.any(inertia != 0):
        problems.append("zero mass but non-zero rotational inertia")
    if problems:
        notes.append(f"link '{link}': {'; '.join(problems)}; used as given")


def _joints(robot, links: dict[str, LinkDescription], notes: list[str]) -> dict[str, JointDescription]:
    joints: dict[str, JointDescription] = {}
    fixed_mimics: list[str] = []
    for joint in robot.joints:
        what = f"joint '{joint.name}'"
        if not joint.name:
            raise URDFError("a <joint> has no name")
        if joint.name in joints:
            raise URDFError(f"{what} is defined twice")
        for role, link in (("parent", joint.parent), ("child", joint.child)):
            if not link:
                raise URDFError(f"{what} has no <{role} link=...>")
            if link not in links:
                raise URDFError(f"{what} names {role} link '{link}', which does not exist")
        if joint.parent == joint.child:
            raise URDFError(f"{what} connects link '{joint.parent}' to itself")

        axis = _finite(joint.axis if joint.axis is not None else (1.0, 0.0, 0.0), f"{what} axis")
        if joint.type in AXIS_JOINT_TYPES:
            largest = float(np.abs(axis).max(initial=0.0))
            if axis.shape != (3,) or largest == 0.0:
                raise URDFError(f"{what} has a zero axis {axis.tolist()}")
            axis = axis / largest  # first to the unit box: the norm of 1e200 would overflow
            if np.linalg.norm(axis) < 1e-12:  # only when its largest component was tiny
                raise URDFError(f"{what} has a zero axis {axis.tolist()}")
            axis = axis / np.linalg.norm(axis)

        limit = joint.limit
        lower, upper, effort, velocity = -math.inf, math.inf, math.inf, math.inf
        if limit is not None:
            if joint.type in ("revolute", "prismatic"):
                lower = float(_finite(limit.lower if limit.lower is not None else 0.0, f"{what} lower limit"))
                upper = float(_finite(limit.upper if limit.upper is not None else 0.0, f"{what} upper limit"))
                if lower > upper:
                    raise URDFError(f"{what} has lower limit {lower} above upper limit {upper}")
            if limit.effort is not None:
                effort = float(limit.effort)
            if limit.velocity is not None:
                velocity = float(limit.velocity)
            if not (effort >= 0 and velocity >= 0):  # also catches NaN
                raise URDFError(f"{what} has a negative or NaN effort/velocity limit")

        damping = friction = 0.0
        if joint.dynamics is not None:
            damping = float(_finite(joint.dynamics.damping or 0.0, f"{what} damping", MAX_MAGNITUDE))
            friction = float(_finite(joint.dynamics.friction or 0.0, f"{what} friction", MAX_MAGNITUDE))
            for name, value in (("damping", damping), ("friction", friction)):
                if value < 0:
                    notes.append(f"{what} has a negative {name} ({value:g}): not physical, taken as 0")
            damping, friction = max(damping, 0.0), max(friction, 0.0)

        mimic = None
        if joint.mimic is not None and joint.type == "fixed":
            fixed_mimics.append(joint.name)
        elif joint.mimic is not None:
            multiplier = joint.mimic.multiplier if joint.mimic.multiplier is not None else 1.0
            offset = joint.mimic.offset if joint.mimic.offset is not None else 0.0
            mimic = Mimic(
                joint=joint.mimic.joint,
                multiplier=float(_finite(multiplier, f"{what} mimic multiplier", MAX_MAGNITUDE)),
                offset=float(_finite(offset, f"{what} mimic offset", MAX_MAGNITUDE)),
            )

        joints[joint.name] = JointDescription(
            name=joint.name,
            type=joint.type,
            parent=joint.parent,
            child=joint.child,
            origin=_pose(joint.origin, f"{what} <origin>"),
            axis=axis,
            lower=lower,
            upper=upper,
            effort=effort,
            velocity=velocity,
            damping=damping,
            friction=friction,
            mimic=mimic,
        )
    if fixed_mimics:  # TALOS's grippers: twelve of them
        notes.append(f"{len(fixed_mimics)} fixed joints carry a <mimic>, ignored: {', '.join(fixed_mimics)}")
    return joints


def _mimic_problems(joints: dict[str, JointDescription]) -> list[str]:
    """What keeps the <mimic> tags from being coupled: a missing or fixed
    master, joint types that cannot mimic each other, a cycle; one line each."""
    problems = []
    for joint in joints.values():
        if joint.mimic is None:
            continue
        what = f"joint '{joint.name}'"
        master = joints.get(joint.mimic.joint)
        if master is None:
            problems.append(f"{what} mimics joint '{joint.mimic.joint}', which does not exist")
            continue
        if master.type not in ("revolute", "continuous", "prismatic") or joint.type not in (
            "revolute", "continuous", "prismatic"
        ):
            problems.append(f"{what} ({joint.type}) mimics '{master.name}' ({master.type}): "
                            "only revolute, continuous and prismatic joints can mimic each other")
            continue
        seen = {joint.name}
        while master is not None and master.mimic is not None:
            if master.name in seen:
                problems.append(f"{what}: mimic joints form a cycle through '{master.name}'")
                break
            seen.add(master.name)
            master = joints.get(master.mimic.joint)
    return problems


def _tree_root(robot_name: str, links, joints) -> str:
    parent_joint: dict[str, str] = {}
    for joint in joints.values():
        if joint.child in parent_joint:
            raise URDFError(
                f"link '{joint.child}' has two parents: joints "
                f"'{parent_joint[joint.child]}' and '{joint.name}'"
            )
        parent_joint[joint.child] = joint.name
    roots = [name for name in links if name not in parent_joint]
    if not roots:
        raise URDFError(f"robot '{robot_name}': every link has a parent, the joints form a cycle")
    if len(roots) > 1:
        raise URDFError(
            f"robot '{robot_name}' has {len(roots)} root links ({', '.join(roots)}): "
            "a URDF is one tree, connect them with joints"
        )
    return roots[0]


def _depth_first(root: str, links, joints):
    children: dict[str, list[JointDescription]] = {name: [] for name in links}
    for joint in joints.values():
        children[joint.parent].append(joint)
    ordered_links = {root: links[root]}
    ordered_joints: dict[str, JointDescription] = {}
    stack = list(reversed(children[root]))
    while stack:
        joint = stack.pop()
        ordered_joints[joint.name] = joint
        ordered_links[joint.child] = links[joint.child]
        stack.extend(reversed(children[joint.child]))
    unreached = [name for name in links if name not in ordered_links]
    if unreached:  # one root and every other link with one parent: the rest is a cycle
        raise URDFError(f"links {', '.join(unreached)} form a cycle not connected to root '{root}'")
    return ordered_links, ordered_joints
