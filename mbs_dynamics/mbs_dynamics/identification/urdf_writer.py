"""The identified URDF: the nominal file with what identification found put in.

* Each identified body's <inertial> goes on the link its joint moves (in that
  link's frame: mass, centre of mass, inertia about it); links fixed to that
  link lose theirs, since their mass is part of the body's now (a body is its
  link and every link fixed to it: model.py).
* Each actuated joint's <dynamics damping="..." friction="..."> is set,
  other attributes of the element kept.
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

DRAKE = "http://drake.mit.edu"


def number(value: float) -> str:
    """The shortest text that reads back as the same float64."""
    return repr(float(value))


def identified_urdf(nominal_xml: str, layout: ParameterLayout, parameters, bodies, comment: str = "") -> str:
    """The nominal URDF text with the parameters p (layout's order) written in
    for `bodies` (indices) and every actuated joint (module docstring); comment:
    an XML comment put first in <robot> (what was identified from what)."""
    root = _with_drake_namespace(etree.fromstring(nominal_xml.encode()))
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
    values = {name: layout.joint_values(parameters, name) for name in layout.joint_parameters}
    for joint in layout.actuated_joints:
        if "friction" in values or "damping" in values:
            dynamics = joints[joint].find("dynamics")
            if dynamics is None:
                dynamics = etree.SubElement(joints[joint], "dynamics")
            for name in ("damping", "friction"):
                if name in values:
                    dynamics.set(name, number(values[name][joint]))
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


def _with_drake_namespace(root):
    """root, declaring xmlns:drake (a new element when it did not)."""
    if root.nsmap.get("drake") == DRAKE:
        return root
    declared = etree.Element(root.tag, attrib=dict(root.attrib), nsmap={**root.nsmap, "drake": DRAKE})
    declared.text = root.text
    declared.extend(list(root))
    return declared


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
