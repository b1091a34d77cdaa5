"""Support mappings: the point of a shape's core (shapes.py) farthest along a
direction, one function per kind and one table (core_support), and a placed
shape's in world axes (world_support). GJK and EPA see shapes only through
them; a new convex kind is one function here and one entry in the table."""
from __future__ import annotations

import math

from numba import njit

from mbs_dynamics.collision.shapes import BOX, CAPSULE, CONVEX, CYLINDER, SPHERE


@njit(cache=True, inline="always")
def box_support(size, d0, d1, d2):
    return (size[0] if d0 >= 0.0 else -size[0], size[1] if d1 >= 0.0 else -size[1],
            size[2] if d2 >= 0.0 else -size[2])


@njit(cache=True, inline="always")
def segment_support(size, d2):
    """A capsule's core: the segment from -size[1] to size[1] along z."""
    return 0.0, 0.0, size[1] if d2 >= 0.0 else -size[1]


@njit(cache=True, inline="always")
def cylinder_support(size, d0, d1, d2):
    radial = math.sqrt(d0 * d0 + d1 * d1)
    x, y = (size[0] * d0 / radial, size[0] * d1 / radial) if radial > 0.0 else (0.0, 0.0)
    return x, y, size[1] if d2 >= 0.0 else -size[1]


@njit(cache=True, inline="always")
def convex_support(vertices, first, count, d0, d1, d2):
    best, index = -math.inf, first
    for i in range(first, first + count):
        along = vertices[i, 0] * d0 + vertices[i, 1] * d1 + vertices[i, 2] * d2
        if along > best:
            best, index = along, i
    return vertices[index, 0], vertices[index, 1], vertices[index, 2]


@njit(cache=True, inline="always")
def core_support(shape, vertices, d0, d1, d2):
    """The support point of the shape's core along d, in the shape's frame."""
    kind = shape.kind
    if kind == BOX:
        return box_support(shape.size, d0, d1, d2)
    if kind == CYLINDER:
        return cylinder_support(shape.size, d0, d1, d2)
    if kind == CAPSULE:
        return segment_support(shape.size, d2)
    if kind == CONVEX:
        return convex_support(vertices, shape.first_vertex, shape.vertex_count, d0, d1, d2)
    if kind == SPHERE:
        return 0.0, 0.0, 0.0
    return math.nan, math.nan, math.nan


@njit(cache=True, inline="always")
def world_support(shape, vertices, R, p, d0, d1, d2):
    """The support point along the world direction d of the core of a shape
    placed at (R, p) (world <- shape), in world coordinates."""
    s0, s1, s2 = core_support(shape, vertices, R[0, 0] * d0 + R[1, 0] * d1 + R[2, 0] * d2,
                              R[0, 1] * d0 + R[1, 1] * d1 + R[2, 1] * d2, R[0, 2] * d0 + R[1, 2] * d1 + R[2, 2] * d2)
    return (p[0] + R[0, 0] * s0 + R[0, 1] * s1 + R[0, 2] * s2, p[1] + R[1, 0] * s0 + R[1, 1] * s1 + R[1, 2] * s2,
            p[2] + R[2, 0] * s0 + R[2, 1] * s1 + R[2, 2] * s2)
