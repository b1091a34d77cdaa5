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
    mesh       the vertices of its convex hull (meshes.load_mesh: STL, OBJ,
               PLY, COLLADA, within its caps; the element's scale applied),
               at most max_vertices_per_mesh, kept by farthest-point
               sampling (the hull's extremes first) where the hull has more;
               each file read once per call; with mesh_points "box", the 8
               corners of the hull's bounding box in the mesh's own axes
               instead: flat faces where a mesh has nearly flat ones. A
               sole's mesh is seldom flat (TALOS's bulges 0.4 mm below its
               rim): on its hull's vertices a standing sole rests on three,
               four more within reach up to 0.13 mm higher; the seven
               points' normal targets are no rigid motion of the sole, so
               its rigid correction (simulation.stepping) is left out, and
               the three sticking points pushed out at different rates have
               no solution: the rigid step stalled and was solved softer
               nearly every step. On its box's four lowest corners, in a
               plane, it stands rigid

Links fixed to the world (a fixed base's root) touch nothing. What cannot be
used (a mesh not found, unreadable or beyond a cap of meshes.py, a bad or
too large number, points farther than MAX_MAGNITUDE from their link) is
skipped with a warning; the rest of the robot keeps its points.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbs_dynamics.collision import shapes as convex_shapes
from mbs_dynamics.multibody.meshes import load_mesh
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.multibody.parsers.geometry import GeometryElement, geometry_elements, parse_robot, shape
from mbs_dynamics.multibody.parsers.urdf import MAX_MAGNITUDE
from mbs_dynamics.multibody.resources import ResourceNotFound, resolve

RIM_POINTS = 12
MAX_MESH_VERTICES = 48
MAX_HULL_VERTICES = 64  # of a mesh's convex hull as a shape of collision.shapes (collision_shapes)
MESH_POINTS = ("hull", "box")  # a mesh's contact points: its hull's vertices, or its bounding box's corners
BOX_CORNERS = np.array([(x, y, z) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)  # unit box's


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


def _hull_vertices(path, what: str, hulls: dict) -> np.ndarray:
    """The vertices of the convex hull of the mesh file at `path`, read once
    per `hulls` (a dict: path -> vertices)."""
    key = str(path)
    if key not in hulls:
        try:
            mesh = load_mesh(path, materials=False)
            hulls[key] = np.asarray(mesh.convex_hull.vertices, dtype=float)
        except ValueError as error:  # files.FileProblem: beyond a cap, or trimesh could not read it
            hulls[key] = error
        except Exception as error:  # noqa: BLE001  qhull and trimesh raise many kinds for a degenerate mesh
            hulls[key] = ValueError(f"mesh file {path} has no convex hull ({type(error).__name__}: {error})")
    if isinstance(hulls[key], ValueError):
        raise ValueError(f"{what}: {hulls[key]}")
    return hulls[key]


def _mesh_vertices(filename: str, scale: np.ndarray, what: str, search_paths, max_vertices: int,
                   hulls: dict) -> np.ndarray:
    path = resolve(filename, search_paths)
    vertices = _hull_vertices(path, what, hulls) * scale
    if vertices.size == 0 or not np.all(np.isfinite(vertices)):
        raise ValueError(f"{what} mesh {path}: no usable vertices")
    return farthest_points(vertices, max_vertices)


def box_corners(lowest: np.ndarray, highest: np.ndarray) -> np.ndarray:
    """(8, 3) the corners of the axis-aligned box from `lowest` to `highest`."""
    return (lowest + highest) / 2 + BOX_CORNERS * ((highest - lowest) / 2)


def element_points(element: GeometryElement, search_paths=(), max_vertices: int = MAX_MESH_VERTICES,
                   hulls: dict | None = None, mesh_points: str = "hull") -> tuple[np.ndarray, np.ndarray]:
    """(points (k, 3) in the element's frame, radii (k,)) of its shape
    (module docstring; a mesh's by mesh_points, one of MESH_POINTS);
    ValueError or ResourceNotFound when unusable. hulls: the meshes' convex
    hulls read so far (path -> vertices), filled in."""
    found = shape(element)
    if found.kind == "sphere":
        return np.zeros((1, 3)), found.size[:1].copy()
    if found.kind == "box":
        return box_corners(-found.size / 2, found.size / 2), np.zeros(8)
    if found.kind in ("cylinder", "capsule"):
        radius, half = found.size[0], found.size[1] / 2
        if found.kind == "capsule":
            return np.array([(0.0, 0.0, -half), (0.0, 0.0, half)]), np.array([radius, radius])
        angles = 2 * np.pi * np.arange(RIM_POINTS) / RIM_POINTS
        rim = np.column_stack([radius * np.cos(angles), radius * np.sin(angles)])
        points = np.vstack([np.column_stack([rim, np.full(RIM_POINTS, z)]) for z in (-half, half)])
        return points, np.zeros(2 * RIM_POINTS)
    vertices = _mesh_vertices(found.filename, found.scale, element.what, search_paths,
                              max_vertices if mesh_points == "hull" else np.iinfo(np.int64).max,
                              {} if hulls is None else hulls)
    if mesh_points == "box":
        vertices = box_corners(vertices.min(axis=0), vertices.max(axis=0))
    return vertices, np.zeros(len(vertices))


def collision_contacts(model: Model, urdf_xml: str, search_paths=(),
                       max_vertices_per_mesh: int = MAX_MESH_VERTICES, mesh_points: str = "hull") -> ContactGeometry:
    """The ContactGeometry of the URDF's <collision> elements for `model`
    (built from the same URDF), meshes found through resources.resolve with
    `search_paths`, each mesh's points by mesh_points (module docstring)."""
    if mesh_points not in MESH_POINTS:
        raise ValueError(f"mesh_points must be one of {MESH_POINTS}, got {mesh_points!r}")
    robot = parse_robot(urdf_xml)
    bodies, points, radii, names, warnings = [], [], [], [], []
    hulls: dict = {}
    for link in robot.findall("link"):
        name = link.get("name", "")
        if name not in model.frames:
            continue
        frame = model.frame(name)
        if frame.body < 0:
            continue  # fixed to the world: it touches nothing that moves it
        for element in geometry_elements(link, "collision"):
            try:
                if isinstance(element, ValueError):
                    raise element
                local, radius = element_points(element, search_paths, max_vertices_per_mesh, hulls, mesh_points)
                in_link = local @ element.rotation.T + element.translation
                farthest = np.abs(in_link).max(initial=0.0) + radius.max(initial=0.0)
                if not farthest <= MAX_MAGNITUDE:  # NaN too
                    raise ValueError(f"{element.what}: its points reach {farthest:.3g} m from the link frame, "
                                     f"beyond {MAX_MAGNITUDE:g} m")
            except (ValueError, ResourceNotFound) as error:
                warnings.append(f"{error}; skipped")
                continue
            bodies.append(np.full(len(local), frame.body, dtype=np.int64))
            points.append(in_link @ frame.rotation.T + frame.translation)
            radii.append(radius)
            names += [f"{name}/{element.name}"] * len(local)
    if not bodies:
        return ContactGeometry(np.zeros(0, dtype=np.int64), np.zeros((0, 3)), np.zeros(0), (), tuple(warnings))
    return ContactGeometry(np.concatenate(bodies), np.concatenate(points), np.concatenate(radii), tuple(names),
                           tuple(warnings))


@dataclass(frozen=True)
class BodyShapes:
    """The convex shapes (collision.Shape) of a model's bodies: bodies (k,)
    (-1: fixed to the world), each shape's placement in its body's frame
    (rotations (k, 3, 3), translations (k, 3): body <- shape), names (k,)
    "link/element"; warnings: what was skipped."""

    bodies: np.ndarray
    shapes: tuple
    rotations: np.ndarray
    translations: np.ndarray
    names: tuple
    warnings: tuple


def element_shape(element: GeometryElement, search_paths=(), hulls: dict | None = None) -> convex_shapes.Shape:
    """The convex shape of an element (a mesh: its hull, at most
    MAX_HULL_VERTICES of its vertices); ValueError or ResourceNotFound when
    unusable."""
    found = shape(element)
    if found.kind == "sphere":
        return convex_shapes.sphere(found.size[0])
    if found.kind == "box":
        return convex_shapes.box(found.size)
    if found.kind in ("cylinder", "capsule"):
        return getattr(convex_shapes, found.kind)(found.size[0], found.size[1])
    vertices = _mesh_vertices(found.filename, found.scale, element.what, search_paths, MAX_HULL_VERTICES,
                              {} if hulls is None else hulls)
    return convex_shapes.convex(vertices)


def collision_shapes(model: Model, urdf_xml: str, search_paths=()) -> BodyShapes:
    """The BodyShapes of the URDF's <collision> elements for `model` (built
    from the same URDF), links fixed to the world included; what cannot be
    used is skipped with a warning, as collision_contacts does."""
    robot = parse_robot(urdf_xml)
    bodies, shapes, rotations, translations, names, warnings = [], [], [], [], [], []
    hulls: dict = {}
    for link in robot.findall("link"):
        name = link.get("name", "")
        if name not in model.frames:
            continue
        frame = model.frame(name)
        for element in geometry_elements(link, "collision"):
            try:
                if isinstance(element, ValueError):
                    raise element
                found = element_shape(element, search_paths, hulls)
            except (ValueError, ResourceNotFound) as error:
                warnings.append(f"{error}; skipped")
                continue
            bodies.append(frame.body)
            shapes.append(found)
            rotations.append(frame.rotation @ element.rotation)
            translations.append(frame.rotation @ element.translation + frame.translation)
            names.append(f"{name}/{element.name}")
    return BodyShapes(np.array(bodies, dtype=np.int64), tuple(shapes), np.array(rotations).reshape(-1, 3, 3),
                      np.array(translations).reshape(-1, 3), tuple(names), tuple(warnings))
