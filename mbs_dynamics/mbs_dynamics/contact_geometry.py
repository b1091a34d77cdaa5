"""Contact points from a URDF's <collision> elements, for the simulator's
contact with the ground and static boxes (simulation.World.contact_geometry).

Each element becomes points fixed in the moving body its link belongs to
(links joined by fixed joints are one body), each with a radius:

    sphere     its centre, radius r: the step takes the exact lowest point
               c - r n against each obstacle's normal n
    box        its 8 corners (against a plane, an edge or a face touches at
               corners)
    cylinder   RIM_POINTS points on each of its two rims (a regular polygon:
               a face resting on the ground stands on them; rolling on its
               side is that of a polygon)
    capsule    two spheres, at the centres of its caps
    mesh       the vertices of its convex hull (trimesh: STL, OBJ, PLY; the
               element's scale applied), at most max_vertices_per_mesh, kept
               by farthest-point sampling (the hull's extremes first) where
               the hull has more

Links fixed to the world (a fixed base's root) touch nothing. What cannot be
used (a mesh not found or unreadable, a bad number, an unknown geometry) is
skipped with a warning; the rest of the robot keeps its points.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from mbs_dynamics.lie import rpy_to_matrix
from mbs_dynamics.model import Model
from mbs_dynamics.resources import ResourceNotFound, resolve

RIM_POINTS = 12
MAX_MESH_VERTICES = 48


@dataclass(frozen=True)
class ContactGeometry:
    """Contact points: bodies (k,) (model body indices), points (k, 3) in the
    bodies' frames, radii (k,); names (k,) "link/element" of each; warnings:
    what was skipped."""

    bodies: np.ndarray
    points: np.ndarray
    radii: np.ndarray
    names: tuple
    warnings: tuple


def _numbers(text: str | None, count: int, what: str, default=None) -> np.ndarray:
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
    return values


def _positive(element, attribute: str, what: str) -> float:
    value = _numbers(element.get(attribute), 1, f"{what} {attribute}")[0]
    if value <= 0:
        raise ValueError(f"{what} {attribute} must be positive, got {value}")
    return float(value)


def farthest_points(vertices: np.ndarray, count: int) -> np.ndarray:
    """`count` of the vertices, each the farthest from those chosen before,
    from the one farthest from their centroid."""
    if len(vertices) <= count:
        return vertices
    chosen = [int(np.argmax(np.linalg.norm(vertices - vertices.mean(axis=0), axis=1)))]
    distance = np.linalg.norm(vertices - vertices[chosen[0]], axis=1)
    for _ in range(count - 1):
        chosen.append(int(np.argmax(distance)))
        distance = np.minimum(distance, np.linalg.norm(vertices - vertices[chosen[-1]], axis=1))
    return vertices[chosen]


def _mesh_vertices(element, what: str, search_paths, max_vertices: int) -> np.ndarray:
    import trimesh

    filename = element.get("filename")
    if not filename:
        raise ValueError(f"{what} mesh has no filename")
    scale = _numbers(element.get("scale"), 3, f"{what} mesh scale", default=(1.0, 1.0, 1.0))
    path = resolve(filename, search_paths)
    try:
        mesh = trimesh.load(str(path), force="mesh")
        vertices = np.asarray(mesh.convex_hull.vertices, dtype=float) * scale
    except Exception as error:  # noqa: BLE001  trimesh raises many kinds for a bad file
        raise ValueError(f"{what} mesh {path}: cannot be read ({type(error).__name__}: {error})") from None
    if vertices.size == 0 or not np.all(np.isfinite(vertices)):
        raise ValueError(f"{what} mesh {path}: no usable vertices")
    return farthest_points(vertices, max_vertices)


def element_points(geometry, what: str, search_paths=(), max_vertices: int = MAX_MESH_VERTICES
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(points (k, 3) in the element's frame, radii (k,)) of a <geometry>'s
    shape (module docstring); ValueError or ResourceNotFound when unusable."""
    shapes = [child for child in geometry if child.tag in ("sphere", "box", "cylinder", "capsule", "mesh")]
    if len(shapes) != 1:
        raise ValueError(f"{what} has no known geometry (sphere, box, cylinder, capsule, mesh)")
    shape = shapes[0]
    if shape.tag == "sphere":
        return np.zeros((1, 3)), np.array([_positive(shape, "radius", f"{what} sphere")])
    if shape.tag == "box":
        size = _numbers(shape.get("size"), 3, f"{what} box size")
        if np.any(size <= 0):
            raise ValueError(f"{what} box size must be positive, got {size.tolist()}")
        half = size / 2
        corners = np.array([(x, y, z) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float) * half
        return corners, np.zeros(8)
    if shape.tag in ("cylinder", "capsule"):
        radius = _positive(shape, "radius", f"{what} {shape.tag}")
        half = _positive(shape, "length", f"{what} {shape.tag}") / 2
        if shape.tag == "capsule":
            return np.array([(0.0, 0.0, -half), (0.0, 0.0, half)]), np.array([radius, radius])
        angles = 2 * np.pi * np.arange(RIM_POINTS) / RIM_POINTS
        rim = np.column_stack([radius * np.cos(angles), radius * np.sin(angles)])
        points = np.vstack([np.column_stack([rim, np.full(RIM_POINTS, z)]) for z in (-half, half)])
        return points, np.zeros(2 * RIM_POINTS)
    vertices = _mesh_vertices(shape, what, search_paths, max_vertices)
    return vertices, np.zeros(len(vertices))


def collision_contacts(model: Model, urdf_xml: str, search_paths=(),
                       max_vertices_per_mesh: int = MAX_MESH_VERTICES) -> ContactGeometry:
    """The ContactGeometry of the URDF's <collision> elements for `model`
    (built from the same URDF), meshes found through resources.resolve with
    `search_paths` (module docstring)."""
    try:
        robot = ET.fromstring(urdf_xml)
    except ET.ParseError as error:
        raise ValueError(f"the URDF is not XML: {error}") from None
    bodies, points, radii, names, warnings = [], [], [], [], []
    for link in robot.findall("link"):
        name = link.get("name", "")
        if name not in model.frames:
            continue
        frame = model.frame(name)
        if frame.body < 0:
            continue  # fixed to the world: it touches nothing that moves it
        for index, collision in enumerate(link.findall("collision")):
            what = f"link '{name}' collision {collision.get('name') or index}"
            try:
                origin = collision.find("origin")
                xyz = _numbers(origin.get("xyz") if origin is not None else None, 3, f"{what} origin xyz",
                               default=(0.0, 0.0, 0.0))
                rpy = _numbers(origin.get("rpy") if origin is not None else None, 3, f"{what} origin rpy",
                               default=(0.0, 0.0, 0.0))
                geometry = collision.find("geometry")
                if geometry is None:
                    raise ValueError(f"{what} has no <geometry>")
                local, radius = element_points(geometry, what, search_paths, max_vertices_per_mesh)
            except (ValueError, ResourceNotFound) as error:
                warnings.append(f"{error}; skipped")
                continue
            in_link = local @ rpy_to_matrix(*rpy).T + xyz
            bodies.append(np.full(len(local), frame.body, dtype=np.int64))
            points.append(in_link @ frame.rotation.T + frame.translation)
            radii.append(radius)
            names += [f"{name}/{collision.get('name') or index}"] * len(local)
    if not bodies:
        return ContactGeometry(np.zeros(0, dtype=np.int64), np.zeros((0, 3)), np.zeros(0), (), tuple(warnings))
    return ContactGeometry(np.concatenate(bodies), np.concatenate(points), np.concatenate(radii), tuple(names),
                           tuple(warnings))
