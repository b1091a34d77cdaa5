"""What a URDF draws, for the 3-D view (viewer.py): each link's <visual>
elements as shapes fixed in the model's bodies, with their colours, and
their meshes resolved to files (resources.resolve: package:// through the
ament index, the Python environment and the search paths).

A link without a <visual>, or whose visual cannot be drawn (a mesh not
found, beyond a cap of meshes.py, a malformed element), is drawn from its
<collision> elements instead, in COLLISION_RGBA; what cannot be drawn at all
is left out with a warning. A mesh file is measured here (meshes.measure),
never parsed: that is the viewer's.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mbs_dynamics.algorithms.kinematics import body_poses
from mbs_dynamics.multibody.meshes import measure
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.multibody.parsers.geometry import Shape, geometry_elements, numbers, parse_robot, shape
from mbs_dynamics.multibody.resources import ResourceNotFound, resolve
from mbs_dynamics.spatial.lie import matrix_to_quaternion

DEFAULT_RGBA = (0.75, 0.75, 0.78, 1.0)
COLLISION_RGBA = (0.95, 0.6, 0.2, 0.8)


@dataclass(frozen=True)
class Visual:
    """A shape drawn fixed in a body: body (model body index, -1: fixed to
    the world), (rotation, translation) body <- shape, the shape (its mesh
    resolved to `path`), rgba (None: the mesh's own colours where it has
    some, else DEFAULT_RGBA), name "link/visual name" (or "link/collision
    name" where the collision geometry stands in)."""

    name: str
    body: int
    rotation: np.ndarray
    translation: np.ndarray
    shape: Shape
    path: Path | None
    rgba: tuple | None


def _named_colors(robot: ET.Element) -> dict[str, tuple]:
    colors = {}
    for material in robot.findall("material"):
        color = material.find("color")
        if material.get("name") and color is not None:
            try:
                colors[material.get("name")] = tuple(numbers(color.get("rgba"), 4, "material rgba"))
            except ValueError:
                pass
    return colors


def _color(element: ET.Element, named: dict[str, tuple]) -> tuple | None:
    material = element.find("material")
    if material is None:
        return None
    color = material.find("color")
    if color is not None:
        return tuple(np.clip(numbers(color.get("rgba"), 4, "material rgba"), 0.0, 1.0))
    return named.get(material.get("name", ""))


def link_visuals(model: Model, urdf_xml: str, search_paths=(), source: str = "visual"
                 ) -> tuple[tuple[Visual, ...], tuple[str, ...]]:
    """(the Visuals of `model`'s links (module docstring), warnings). source:
    "visual", or "collision" to draw the collision geometry only."""
    if source not in ("visual", "collision"):
        raise ValueError(f"source must be 'visual' or 'collision', got {source!r}")
    robot = parse_robot(urdf_xml)
    named = _named_colors(robot)
    visuals, warnings = [], []
    measured: dict = {}  # mesh path -> meshes.MeshSize, or why it cannot be drawn
    for link in robot.findall("link"):
        name = link.get("name", "")
        if name not in model.frames:
            continue
        frame = model.frame(name)
        drawn, failed = [], []
        for tag in (source, "collision") if source == "visual" else ("collision",):
            if tag == "collision" and source == "visual" and drawn and not failed:
                break
            for element in geometry_elements(link, tag):
                try:
                    if isinstance(element, ValueError):
                        raise element
                    found = shape(element)
                    path = resolve(found.filename, search_paths) if found.kind == "mesh" else None
                    if path is not None:
                        if path not in measured:
                            try:
                                measured[path] = measure(path)
                            except ValueError as error:  # files.FileProblem: beyond a cap
                                measured[path] = error
                        if isinstance(measured[path], ValueError):
                            raise measured[path]
                    rgba = _color(element.element, named) if tag == "visual" else COLLISION_RGBA
                except (ValueError, ResourceNotFound) as error:
                    failed.append(str(error))
                    continue
                drawn.append(Visual(f"{name}/{element.name}" if tag == "visual" else f"{name}/collision {element.name}",
                                    frame.body, frame.rotation @ element.rotation,
                                    frame.rotation @ element.translation + frame.translation, found, path, rgba))
        has_collision = any(v.name.startswith(f"{name}/collision ") for v in drawn)
        for reason in failed:
            warnings.append(f"{reason}; " + ("its collision geometry is drawn instead" if has_collision
                                             and source == "visual" else "not drawn"))
        visuals += drawn
    return tuple(visuals), tuple(warnings)


def visual_poses(model: Model, visuals, q) -> tuple[np.ndarray, np.ndarray]:
    """World <- visual orientations (k, 4; quaternions x, y, z, w) and
    translations (k, 3) of the Visuals of `model` at configuration q."""
    world_R, world_p = body_poses(model, q)
    quaternions, translations = np.empty((len(visuals), 4)), np.empty((len(visuals), 3))
    for k, visual in enumerate(visuals):
        R, p = ((visual.rotation, visual.translation) if visual.body < 0 else
                (world_R[visual.body] @ visual.rotation, world_R[visual.body] @ visual.translation
                 + world_p[visual.body]))
        quaternions[k], translations[k] = matrix_to_quaternion(R), p
    return quaternions, translations
