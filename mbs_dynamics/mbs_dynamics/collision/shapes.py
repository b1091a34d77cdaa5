"""Convex shapes for collision, each placed in a body: the SHAPE record the
compiled collision reads (one per shape), and Shape, what Python builds
them from. URDF's conventions:

    sphere     radius
    box        size (x, y, z), full lengths
    cylinder   radius, length (full, along its z axis)
    capsule    radius, length (of its cylinder, along z; a hemisphere at each end)
    convex     the convex hull of vertices (a mesh's), in its frame
    halfspace  z <= 0 of its frame: the ground (world shapes only)

A sphere and a capsule are a core (a point, a segment along z) swept by a
sphere of their radius: the distance between two shapes is that between
their cores less the radii, so that GJK runs on the cores, which are
polytopes or flat, and the result is exact for them.
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import ConvexHull, QhullError

SPHERE, CAPSULE, BOX, CYLINDER, CONVEX, HALFSPACE = range(6)
KINDS = ("sphere", "capsule", "box", "cylinder", "convex", "halfspace")

SHAPE = np.dtype([
    ("kind", np.int64),                # SPHERE, CAPSULE, ...
    ("body", np.int64),                # the body it moves with, -1: fixed in the world
    ("rotation", np.float64, (3, 3)),  # body <- shape
    ("translation", np.float64, (3,)),  # its origin in the body's frame
    ("size", np.float64, (3,)),        # sphere (r, 0, 0); capsule, cylinder (r, half length, 0); box half extents
    ("radius", np.float64),            # of the sphere that sweeps its core: a sphere's and a capsule's r, else 0
    ("first_vertex", np.int64),        # convex: its hull's vertices, rows of the ShapeSet's vertices
    ("vertex_count", np.int64),
    ("first_face", np.int64),          # convex: its hull's faces, rows of the ShapeSet's faces
    ("face_count", np.int64),
    ("bound_centre", np.float64, (3,)),  # convex: the centre and half sizes of its vertices' bounding box,
    ("bound_half", np.float64, (3,)),    # its frame (a broad phase's bound: six support scans cost more)
    ("friction", np.float64),          # Coulomb's coefficient: a pair's is the geometric mean of its shapes'
    ("restitution", np.float64),       # Newton's coefficient: a pair's is the larger of its shapes'
], align=True)

FACE = np.dtype([
    ("normal", np.float64, (3,)),  # outward, the shape's frame
    ("first_corner", np.int64),    # its corners, counter-clockwise about the normal: rows of the ShapeSet's
    ("corner_count", np.int64),    # corners, each the row of its vertex in the ShapeSet's vertices
], align=True)

# Shapes as the compiled collision reads them: SHAPE records (k,), the convex shapes' hull vertices (n, 3),
# their faces (FACE records) and the faces' corners (vertex rows)
ShapeSet = namedtuple("ShapeSet", "shapes vertices faces corners")


@dataclass(frozen=True, eq=False)
class Shape:
    """A convex shape in its own frame (module docstring): `kind` one of
    KINDS, `size` the record's (half lengths), `vertices` a convex shape's
    hull vertices (n, 3) and `faces` its faces, each a tuple of vertex rows
    counter-clockwise about its outward normal."""

    kind: str
    size: np.ndarray
    vertices: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    faces: tuple = ()

    @property
    def radius(self) -> float:
        return float(self.size[0]) if self.kind in ("sphere", "capsule") else 0.0

    @property
    def reach(self) -> float:
        """The farthest any of its points lies from its frame's origin (m;
        infinite for a halfspace)."""
        r, half, _ = (float(x) for x in self.size)
        return {"sphere": r, "capsule": r + half, "cylinder": float(np.hypot(r, half)),
                "box": float(np.linalg.norm(self.size)), "halfspace": np.inf}.get(
            self.kind, float(np.linalg.norm(self.vertices, axis=1).max(initial=0.0)))


def _positive(value, what: str) -> float:
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a positive finite number, got {value}")
    return value


def sphere(radius: float) -> Shape:
    return Shape("sphere", np.array([_positive(radius, "a sphere's radius"), 0.0, 0.0]))


def capsule(radius: float, length: float) -> Shape:
    return Shape("capsule", np.array([_positive(radius, "a capsule's radius"),
                                      _positive(length, "a capsule's length") / 2, 0.0]))


def cylinder(radius: float, length: float) -> Shape:
    return Shape("cylinder", np.array([_positive(radius, "a cylinder's radius"),
                                       _positive(length, "a cylinder's length") / 2, 0.0]))


def box(size) -> Shape:
    size = np.asarray(size, dtype=float)
    if size.shape != (3,):
        raise ValueError(f"a box's size must be 3 numbers, got {size.tolist()}")
    return Shape("box", np.array([_positive(s, "a box's size") / 2 for s in size]))


def convex(vertices) -> Shape:
    """The convex hull of the points (n, 3), at least 4 not in a plane."""
    points = np.asarray(vertices, dtype=float)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) < 4 or not np.all(np.isfinite(points)):
        raise ValueError(f"a convex shape needs at least 4 finite points (n, 3), got shape {points.shape}")
    try:
        hull = ConvexHull(points)
    except QhullError:
        raise ValueError("a convex shape's points lie in a plane or a line: it has no volume") from None
    rows = {vertex: row for row, vertex in enumerate(hull.vertices)}
    hull_vertices = np.ascontiguousarray(points[hull.vertices])
    return Shape("convex", np.zeros(3), hull_vertices, hull_faces(hull, rows, hull_vertices))


def hull_faces(hull: ConvexHull, rows: dict, vertices: np.ndarray) -> tuple:
    """The hull's faces as polygons: its coplanar triangles merged, each
    face's vertex rows ordered counter-clockwise about its outward normal."""
    scale = max(float(np.abs(vertices).max()), 1e-300)
    faces, seen = [], []
    for equation in hull.equations:
        if any(np.abs(equation - other).max() <= 1e-9 * max(1.0, scale) for other in seen):
            continue
        seen.append(equation)
        normal, offset = equation[:3], equation[3]
        on_face = [row for row in range(len(vertices)) if abs(vertices[row] @ normal + offset) <= 1e-9 * scale]
        centre = vertices[on_face].mean(axis=0)
        u = vertices[on_face[0]] - centre
        u /= np.linalg.norm(u)
        w = np.cross(normal, u)
        angles = [np.arctan2((vertices[row] - centre) @ w, (vertices[row] - centre) @ u) for row in on_face]
        faces.append(tuple(on_face[i] for i in np.argsort(angles)))
    return tuple(faces)


def halfspace() -> Shape:
    return Shape("halfspace", np.zeros(3))


def shape_set(shapes, bodies, rotations, translations, friction=1.0, restitution=0.0) -> ShapeSet:
    """The ShapeSet of the shapes placed in bodies (k,) at (rotations (k, 3,
    3), translations (k, 3): body <- shape), with their friction and
    restitution coefficients (one each, or one per shape)."""
    records = np.zeros(len(shapes), dtype=SHAPE)
    records["friction"], records["restitution"] = friction, restitution
    vertices, faces, corners = [np.zeros((0, 3))], [], []
    first_vertex = 0
    for k, shape in enumerate(shapes):
        record = records[k]
        record["kind"], record["body"] = KINDS.index(shape.kind), bodies[k]
        record["rotation"], record["translation"] = rotations[k], translations[k]
        record["size"], record["radius"] = shape.size, shape.radius
        record["first_vertex"], record["vertex_count"] = first_vertex, len(shape.vertices)
        record["first_face"], record["face_count"] = len(faces), len(shape.faces)
        if len(shape.vertices):
            lowest, highest = shape.vertices.min(axis=0), shape.vertices.max(axis=0)
            record["bound_centre"], record["bound_half"] = (lowest + highest) / 2, (highest - lowest) / 2
        for face in shape.faces:
            a, b, c = (shape.vertices[face[i]] for i in range(3))
            normal = np.cross(b - a, c - a)
            faces.append((normal / np.linalg.norm(normal), len(corners), len(face)))
            corners.extend(first_vertex + row for row in face)
        vertices.append(shape.vertices)
        first_vertex += len(shape.vertices)
    return ShapeSet(records, np.ascontiguousarray(np.concatenate(vertices)), np.array(faces, dtype=FACE),
                    np.array(corners, dtype=np.int64))


def _read_only(shapes: ShapeSet) -> ShapeSet:
    for array in shapes:
        array.setflags(write=False)
    return shapes


NO_SHAPES = _read_only(shape_set((), (), (), ()))
