"""The shapes of a URDF's <visual> and <collision> elements, read from its
XML: what the dynamics never needs, but the contact geometry
(contact_geometry.py) and the 3-D view (visuals.py) do.

    sphere     size (radius,)
    box        size (x, y, z)
    cylinder   size (radius, length), its axis along z
    capsule    size (radius, length) (Drake's and SDF's extension)
    mesh       filename (the URI as written), scale (3,)

A malformed element raises ValueError naming it (``what``): a number
that is not finite or beyond MAX_MAGNITUDE (1e12, the URDF parser's bound
for lengths, for every number here: sizes, origins, scales); the caller
skips it and keeps the rest of the robot.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from mbs_dynamics.multibody.parsers.urdf import MAX_MAGNITUDE
from mbs_dynamics.spatial.lie import rpy_to_matrix

SHAPES = ("sphere", "box", "cylinder", "capsule", "mesh")


@dataclass(frozen=True)
class GeometryElement:
    """One <visual> or <collision> of a link: `what` names it in messages,
    (rotation, translation) its origin, link <- element; `geometry` its
    <geometry> XML element (None: missing); `element` the element itself."""

    link: str
    name: str
    what: str
    rotation: np.ndarray
    translation: np.ndarray
    geometry: ET.Element | None
    element: ET.Element


@dataclass(frozen=True)
class Shape:
    """A <geometry>'s shape (module docstring)."""

    kind: str
    size: np.ndarray
    filename: str = ""
    scale: np.ndarray = field(default_factory=lambda: np.ones(3))


def numbers(text: str | None, count: int, what: str, default=None) -> np.ndarray:
    """`count` finite numbers of magnitude at most MAX_MAGNITUDE from an
    attribute's text (`default` when absent; ValueError when absent without
    one, or malformed)."""
    if text is None:
        if default is None:
            raise ValueError(f"{what} is missing")
        return np.asarray(default, dtype=float)
    try:
        values = np.array([float(x) for x in text.split()])
    except ValueError:
        raise ValueError(f"{what} must be {count} numbers, got {text!r}") from None
    if values.shape != (count,) or not np.all(np.isfinite(values)):
        raise ValueError(f"{what} must be {count} finite numbers, got {text!r}")
    if np.abs(values).max() > MAX_MAGNITUDE:
        raise ValueError(f"{what} must be {count} numbers of magnitude at most {MAX_MAGNITUDE:g}, got {text!r}")
    return values


def positive(element: ET.Element, attribute: str, what: str) -> float:
    """A positive number from an attribute (ValueError otherwise)."""
    value = numbers(element.get(attribute), 1, f"{what} {attribute}")[0]
    if value <= 0:
        raise ValueError(f"{what} {attribute} must be positive, got {value}")
    return float(value)


def parse_robot(urdf_xml: str) -> ET.Element:
    """The <robot> element of a URDF's text (ValueError if not XML)."""
    try:
        return ET.fromstring(urdf_xml)
    except ET.ParseError as error:
        raise ValueError(f"the URDF is not XML: {error}") from None


def geometry_elements(link: ET.Element, tag: str) -> Iterator[GeometryElement | ValueError]:
    """The link's <tag> elements (tag: "visual" or "collision") in order; a
    ValueError in place of one whose origin is malformed."""
    link_name = link.get("name", "")
    for index, element in enumerate(link.findall(tag)):
        name = element.get("name") or str(index)
        what = f"link '{link_name}' {tag} {name}"
        origin = element.find("origin")
        try:
            xyz = numbers(origin.get("xyz") if origin is not None else None, 3, f"{what} origin xyz",
                          default=(0.0, 0.0, 0.0))
            rpy = numbers(origin.get("rpy") if origin is not None else None, 3, f"{what} origin rpy",
                          default=(0.0, 0.0, 0.0))
        except ValueError as error:
            yield error
            continue
        yield GeometryElement(link_name, name, what, rpy_to_matrix(*rpy), xyz, element.find("geometry"), element)


def shape(element: GeometryElement) -> Shape:
    """The shape of an element's <geometry> (ValueError when unusable)."""
    what = element.what
    if element.geometry is None:
        raise ValueError(f"{what} has no <geometry>")
    shapes = [child for child in element.geometry if child.tag in SHAPES]
    if len(shapes) != 1:
        raise ValueError(f"{what} has no known geometry ({', '.join(SHAPES)})")
    found = shapes[0]
    if found.tag == "sphere":
        return Shape("sphere", np.array([positive(found, "radius", f"{what} sphere")]))
    if found.tag == "box":
        size = numbers(found.get("size"), 3, f"{what} box size")
        if np.any(size <= 0):
            raise ValueError(f"{what} box size must be positive, got {size.tolist()}")
        return Shape("box", size)
    if found.tag in ("cylinder", "capsule"):
        return Shape(found.tag, np.array([positive(found, "radius", f"{what} {found.tag}"),
                                          positive(found, "length", f"{what} {found.tag}")]))
    filename = found.get("filename")
    if not filename:
        raise ValueError(f"{what} mesh has no filename")
    scale = numbers(found.get("scale"), 3, f"{what} mesh scale", default=(1.0, 1.0, 1.0))
    return Shape("mesh", np.zeros(0), filename, scale)
