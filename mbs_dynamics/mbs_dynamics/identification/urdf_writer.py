"""The identified URDF: the nominal file with what identification found put in.

* Each identified body's <inertial> goes on the link its joint moves (in that
  link's frame: mass, centre of mass, inertia about it); links fixed to that
  link lose theirs, since their mass is part of the body's now (a body is its
  link and every link fixed to it: model.py).
* Each actuated joint's <dynamics damping="..." friction="..."> is set,
  other attributes of the element kept.
* Where the friction model has more than <dynamics> holds (an offset or a
  Stribeck excess fitted, or the nominal joint had one), each actuated joint
  also gets the project's extension element (parsers.urdf's docstring),
  `<mbs:friction coulomb viscous static stribeck_velocity offset>` with
  xmlns:mbs declared on <robot>: all five values, coulomb and viscous equal
  to <dynamics friction damping>, static = coulomb + the Stribeck excess;
  what was not fitted keeps its nominal value. Other URDF parsers ignore it.
* Each armature becomes a rotor inertia in Drake's transmission convention,
  rotor_inertia x gear_ratio^2 = armature: an existing transmission of the
  joint keeps its gear ratio; a joint without one gets a new transmission
  with gear ratio 1.
Everything else, comments included, stays as it was.
"""
from __future__ import annotations

import numpy as np
from lxml import etree

from mbs_dynamics.identification.parameters import ParameterLayout
from mbs_dynamics.multibody.parsers.urdf import MBS_NAMESPACE

DRAKE = "http://drake.mit.edu"
FRICTION = f"{{{MBS_NAMESPACE}}}friction"


def number(value: float) -> str:
    """The shortest text that reads back as the same float64."""
    return repr(float(value))


def identified_urdf(nominal_xml: str, layout: ParameterLayout, parameters, bodies, comment: str = "") -> str:
    """The nominal URDF text with the parameters p (layout's order) written in
    for `bodies` (indices) and every actuated joint (module docstring); comment:
    an XML comment put first in <robot> (what was identified from what)."""
    root = _declaring(etree.fromstring(nominal_xml.encode()), "drake", DRAKE)
    values = {name: layout.joint_values(parameters, name) for name in layout.joint_parameters}
    extended = {joint.get("name") for joint in root.findall("joint") if joint.find(FRICTION) is not None}
    if "offset" in values or "stribeck" in values:
        extended |= set(layout.actuated_joints)
    if extended:
        root = _declaring(root, "mbs", MBS_NAMESPACE)
    links = {link.get("name"): link for link in root.findall("link")}
    model = layout.model
    body_parameters = layout.body_parameters(parameters)
    for body in bodies:
        for name, frame in model.frames.items():
            if frame.body == body and name != layout.body_names[body] and name in links:
                for inertial in links[name].findall("inertial"):
                    links[name].remove(inertial)
        _set_inertial(links[layout.body_names[body]], body_parameters[body])
    joints = {joint.get("name"): joint for joint in root.findall("joint")}
    for k, joint in enumerate(layout.actuated_joints):
        if joint in extended:
            _set_friction(joints[joint], _friction_values(layout, values, k))
        elif "friction" in values or "damping" in values:
            _set_dynamics(joints[joint], {name: values[name][joint] for name in ("damping", "friction")
                                          if name in values})
        if "armature" in values:
            _set_rotor_inertia(root, joint, values["armature"][joint])
    if comment:
        root.insert(0, etree.Comment(f" {_comment_text(comment)} "))
    etree.indent(root, space="  ")
    return etree.tostring(root, xml_declaration=True, encoding="utf-8").decode()


def _comment_text(text: str) -> str:
    """text as an XML comment may hold it: no '--' (file names may have it), no control characters."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    while "--" in text:
        text = text.replace("--", "- -")
    return text


def _declaring(root, prefix: str, uri: str):
    """root, declaring the namespace uri (a new element when it did not: as
    `prefix`, or prefix1, ... where that prefix names another)."""
    if uri in root.nsmap.values():
        return root
    name, n = prefix, 1
    while name in root.nsmap:
        name, n = f"{prefix}{n}", n + 1
    declared = etree.Element(root.tag, attrib=dict(root.attrib), nsmap={**root.nsmap, name: uri})
    declared.text = root.text
    declared.extend(list(root))
    return declared


def _set_dynamics(joint, values: dict[str, float]) -> None:
    """joint's <dynamics> attributes (damping, friction) set to values."""
    dynamics = joint.find("dynamics")
    if dynamics is None:
        dynamics = etree.SubElement(joint, "dynamics")
    for name, value in values.items():
        dynamics.set(name, number(value))


def _friction_values(layout: ParameterLayout, values: dict[str, dict[str, float]], k: int) -> dict[str, float]:
    """The <mbs:friction> attributes of actuated joint k: the fitted values,
    the nominal model's for what was not fitted."""
    model, joint = layout.model, layout.actuated_joints[k]
    iv = layout.joint_coordinates()[k]

    def value(parameter: str, nominal: float) -> float:
        return values[parameter][joint] if parameter in values else float(nominal)
    coulomb = value("friction", model.friction[iv])
    return {"coulomb": coulomb, "viscous": value("damping", model.damping[iv]),
            "static": coulomb + value("stribeck", model.static_friction[iv] - model.friction[iv]),
            "stribeck_velocity": float(layout.stribeck_velocities[k]),
            "offset": value("offset", model.friction_offset[iv])}


def _set_friction(joint, values: dict[str, float]) -> None:
    """joint's <dynamics damping friction> and <mbs:friction> (one, made where
    there is none) set to values (_friction_values)."""
    _set_dynamics(joint, {"damping": values["viscous"], "friction": values["coulomb"]})
    element = joint.find(FRICTION)
    if element is None:
        element = etree.SubElement(joint, FRICTION)
    element.attrib.clear()
    for name, value in values.items():
        element.set(name, number(value))


def _set_inertial(link, parameters) -> None:
    """link's <inertial> from a body's 10 parameters about the link origin."""
    m, h = parameters[0], parameters[1:4]
    ixx, ixy, iyy, ixz, iyz, izz = parameters[4:]
    c = h / m
    inertia_origin = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    inertia = inertia_origin - m * (c @ c * np.eye(3) - np.outer(c, c))  # about the centre of mass
    for old in link.findall("inertial"):
        link.remove(old)
    inertial = etree.Element("inertial")
    link.insert(0, inertial)
    etree.SubElement(inertial, "origin", xyz=" ".join(number(x) for x in c), rpy="0 0 0")
    etree.SubElement(inertial, "mass", value=number(m))
    etree.SubElement(inertial, "inertia", ixx=number(inertia[0, 0]), ixy=number(inertia[0, 1]),
                     ixz=number(inertia[0, 2]), iyy=number(inertia[1, 1]), iyz=number(inertia[1, 2]),
                     izz=number(inertia[2, 2]))


def _set_rotor_inertia(root, joint: str, armature: float) -> None:
    for transmission in root.findall("transmission"):
        if any(element.get("name") == joint for element in transmission.findall("joint")):
            actuator = transmission.find("actuator")
            if actuator is None:
                actuator = etree.SubElement(transmission, "actuator", name=f"{joint}_motor")
            ratio = actuator.find(f"{{{DRAKE}}}gear_ratio")
            gear_ratio = float(ratio.get("value")) if ratio is not None else 1.0
            rotor = actuator.find(f"{{{DRAKE}}}rotor_inertia")
            if rotor is None:
                rotor = etree.SubElement(actuator, f"{{{DRAKE}}}rotor_inertia")
            rotor.set("value", number(armature / gear_ratio**2))
            return
    transmission = etree.SubElement(root, "transmission", name=f"{joint}_transmission")
    etree.SubElement(transmission, "type").text = "transmission_interface/SimpleTransmission"
    element = etree.SubElement(transmission, "joint", name=joint)
    etree.SubElement(element, "hardwareInterface").text = "hardware_interface/EffortJointInterface"
    actuator = etree.SubElement(transmission, "actuator", name=f"{joint}_motor")
    etree.SubElement(actuator, "mechanicalReduction").text = "1"
    etree.SubElement(actuator, f"{{{DRAKE}}}rotor_inertia", value=number(armature))
    etree.SubElement(actuator, f"{{{DRAKE}}}gear_ratio", value="1")
