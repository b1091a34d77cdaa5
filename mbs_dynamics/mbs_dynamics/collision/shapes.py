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
    ("first_vertex", np.int64),        # convex: its hull's vertices, rows of the shapes' vertex array
    ("vertex_count", np.int64),
], align=True)


@dataclass(frozen=True, eq=False)
class Shape:
    """A convex shape in its own frame (module docstring): `kind` one of
    KINDS, `size` the record's (half lengths), `vertices` a convex shape's
    hull vertices (n, 3)."""

    kind: str
    size: np.ndarray
    vertices: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))

    @property
    def radius(self) -> float:
        return float(self.size[0]) if self.kind in ("sphere", "capsule") else 0.0


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
    return Shape("convex", np.zeros(3), np.ascontiguousarray(points[hull.vertices]))


def halfspace() -> Shape:
    return Shape("halfspace", np.zeros(3))


def shape_records(shapes, bodies, rotations, translations) -> tuple[np.ndarray, np.ndarray]:
    """(SHAPE records (k,), vertices (n, 3)) of the shapes placed in bodies
    (k,) at (rotations (k, 3, 3), translations (k, 3): body <- shape)."""
    records = np.zeros(len(shapes), dtype=SHAPE)
    vertices = [np.zeros((0, 3))]
    first = 0
    for k, shape in enumerate(shapes):
        record = records[k]
        record["kind"], record["body"] = KINDS.index(shape.kind), bodies[k]
        record["rotation"], record["translation"] = rotations[k], translations[k]
        record["size"], record["radius"] = shape.size, shape.radius
        record["first_vertex"], record["vertex_count"] = first, len(shape.vertices)
        vertices.append(shape.vertices)
        first += len(shape.vertices)
    return records, np.ascontiguousarray(np.concatenate(vertices))
