"""The signed distance between two placed convex shapes, with the direction
from the first to the second and a witness point on each: closed forms
where a pair has one (a halfspace against anything, spheres and capsules
with each other, a sphere and a box), GJK on the cores (gjk.py) otherwise,
and EPA (epa.py) where the cores overlap. Negative distances are
penetrations: the witnesses are then each shape's deepest point inside the
other, and moving the second shape by -distance along the normal separates
them."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.collision.epa import epa, new_polytope
from mbs_dynamics.collision.gjk import OVERLAPPING, Simplex, gjk, new_simplex, witnesses
from mbs_dynamics.collision.shapes import BOX, CAPSULE, CONVEX, CYLINDER, HALFSPACE, SPHERE
from mbs_dynamics.collision.support import world_support

# Of a face normal that separates two shapes as far as the narrow phase's normal does, within this (m)
FACE_AXIS_TOLERANCE = 1e-9
# The narrow phase looks for a face normal (face_axis) where the shapes are nearer than this (m)
FACE_AXIS_REACH = 1e-3

# The scratch of one query: GJK's simplex, EPA's polytope
QueryWork = namedtuple("QueryWork", "simplex polytope")


def new_query_work() -> QueryWork:
    return QueryWork(new_simplex(), new_polytope(Simplex))


@njit(cache=True, inline="always")
def _axis(R, p, column):
    return (R[0, column], R[1, column], R[2, column]), (p[0], p[1], p[2])


@njit(cache=True, inline="always")
def core_segment(placed):
    """A core as a segment (ends P, Q) in world coordinates: a sphere's a point."""
    h = placed.shape.size[1] if placed.shape.kind == CAPSULE else 0.0
    R, p = placed.R, placed.p
    return ((p[0] - h * R[0, 2], p[1] - h * R[1, 2], p[2] - h * R[2, 2]),
            (p[0] + h * R[0, 2], p[1] + h * R[1, 2], p[2] + h * R[2, 2]))


@njit(cache=True)
def segments_nearest(p1, q1, p2, q2):
    """The nearest points of segments p1q1 and p2q2 (Ericson §5.1.9)."""
    d1 = (q1[0] - p1[0], q1[1] - p1[1], q1[2] - p1[2])
    d2 = (q2[0] - p2[0], q2[1] - p2[1], q2[2] - p2[2])
    r = (p1[0] - p2[0], p1[1] - p2[1], p1[2] - p2[2])
    a = d1[0] * d1[0] + d1[1] * d1[1] + d1[2] * d1[2]
    e = d2[0] * d2[0] + d2[1] * d2[1] + d2[2] * d2[2]
    f = d2[0] * r[0] + d2[1] * r[1] + d2[2] * r[2]
    if a == 0.0 and e == 0.0:
        s = t = 0.0
    elif a == 0.0:
        s, t = 0.0, min(max(f / e, 0.0), 1.0)
    else:
        c = d1[0] * r[0] + d1[1] * r[1] + d1[2] * r[2]
        if e == 0.0:
            s, t = min(max(-c / a, 0.0), 1.0), 0.0
        else:
            b = d1[0] * d2[0] + d1[1] * d2[1] + d1[2] * d2[2]
            denominator = a * e - b * b
            s = min(max((b * f - c * e) / denominator, 0.0), 1.0) if denominator > 0.0 else 0.0
            t = (b * s + f) / e
            if t < 0.0:
                s, t = min(max(-c / a, 0.0), 1.0), 0.0
            elif t > 1.0:
                s, t = min(max((b - c) / a, 0.0), 1.0), 1.0
    return ((p1[0] + s * d1[0], p1[1] + s * d1[1], p1[2] + s * d1[2]),
            (p2[0] + t * d2[0], p2[1] + t * d2[1], p2[2] + t * d2[2]))


@njit(cache=True, inline="always")
def from_cores(a_core, b_core, radius_a, radius_b, fallback):
    """(distance, normal, a point, b point) of shapes whose cores' nearest
    points are a_core, b_core (apart), swept by their radii; fallback: the
    normal where the cores meet."""
    v0, v1, v2 = b_core[0] - a_core[0], b_core[1] - a_core[1], b_core[2] - a_core[2]
    length = math.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    n = (v0 / length, v1 / length, v2 / length) if length > 0.0 else fallback
    return (length - radius_a - radius_b, n,
            (a_core[0] + radius_a * n[0], a_core[1] + radius_a * n[1], a_core[2] + radius_a * n[2]),
            (b_core[0] - radius_b * n[0], b_core[1] - radius_b * n[1], b_core[2] - radius_b * n[2]))


@njit(cache=True)
def halfspace_distance(halfspace, other, vertices, halfspace_first):
    """A halfspace (z <= 0 of its frame) and any shape: the shape's deepest
    point toward it, exactly, by its support along -n."""
    n, origin = _axis(halfspace.R, halfspace.p, 2)
    s = world_support(other.shape, vertices, other.R, other.p, -n[0], -n[1], -n[2])
    r = other.shape.radius
    deepest = (s[0] - r * n[0], s[1] - r * n[1], s[2] - r * n[2])
    distance = n[0] * (deepest[0] - origin[0]) + n[1] * (deepest[1] - origin[1]) + n[2] * (deepest[2] - origin[2])
    on_plane = (deepest[0] - distance * n[0], deepest[1] - distance * n[1], deepest[2] - distance * n[2])
    if halfspace_first:
        return distance, n, on_plane, deepest
    return distance, (-n[0], -n[1], -n[2]), deepest, on_plane


@njit(cache=True)
def sphere_box_distance(sphere, box, sphere_first):
    """A sphere and a box: the box's nearest point to the centre, or where the
    centre is inside, the nearest face's."""
    R, p, half = box.R, box.p, box.shape.size
    c = sphere.p
    d = (c[0] - p[0], c[1] - p[1], c[2] - p[2])
    local = (R[0, 0] * d[0] + R[1, 0] * d[1] + R[2, 0] * d[2], R[0, 1] * d[0] + R[1, 1] * d[1] + R[2, 1] * d[2],
             R[0, 2] * d[0] + R[1, 2] * d[1] + R[2, 2] * d[2])
    inside = abs(local[0]) <= half[0] and abs(local[1]) <= half[1] and abs(local[2]) <= half[2]
    if inside:
        axis, depth = 0, half[0] - abs(local[0])
        for r in range(1, 3):
            if half[r] - abs(local[r]) < depth:
                axis, depth = r, half[r] - abs(local[r])
        sign = 1.0 if local[axis] >= 0.0 else -1.0
        outward = (sign * R[0, axis], sign * R[1, axis], sign * R[2, axis])  # from the box to the centre
        on_box = (c[0] + depth * outward[0], c[1] + depth * outward[1], c[2] + depth * outward[2])
        radius = sphere.shape.size[0]
        distance = -depth - radius
        deepest = (c[0] - radius * outward[0], c[1] - radius * outward[1], c[2] - radius * outward[2])
        if sphere_first:
            return distance, (-outward[0], -outward[1], -outward[2]), deepest, on_box
        return distance, outward, on_box, deepest
    clamped = (min(max(local[0], -half[0]), half[0]), min(max(local[1], -half[1]), half[1]),
               min(max(local[2], -half[2]), half[2]))
    on_box = (p[0] + R[0, 0] * clamped[0] + R[0, 1] * clamped[1] + R[0, 2] * clamped[2],
              p[1] + R[1, 0] * clamped[0] + R[1, 1] * clamped[1] + R[1, 2] * clamped[2],
              p[2] + R[2, 0] * clamped[0] + R[2, 1] * clamped[1] + R[2, 2] * clamped[2])
    if sphere_first:
        return from_cores((c[0], c[1], c[2]), on_box, sphere.shape.size[0], 0.0, (0.0, 0.0, 1.0))
    return from_cores(on_box, (c[0], c[1], c[2]), 0.0, sphere.shape.size[0], (0.0, 0.0, 1.0))


@njit(cache=True, inline="always")
def _separation(a, b, vertices, n0, n1, n2):
    """(-(h_A(n) + h_B(-n)): how far apart the shapes are along n (negative:
    how deep), A's point farthest along n, B's farthest along -n)."""
    s_a = world_support(a.shape, vertices, a.R, a.p, n0, n1, n2)
    s_b = world_support(b.shape, vertices, b.R, b.p, -n0, -n1, -n2)
    ra, rb = a.shape.radius, b.shape.radius
    return (n0 * (s_b[0] - s_a[0]) + n1 * (s_b[1] - s_a[1]) + n2 * (s_b[2] - s_a[2]) - ra - rb,
            (s_a[0] + ra * n0, s_a[1] + ra * n1, s_a[2] + ra * n2),
            (s_b[0] - rb * n0, s_b[1] - rb * n1, s_b[2] - rb * n2))


@njit(cache=True, inline="always")
def has_faces(kind):
    return kind == BOX or kind == CONVEX or kind == CYLINDER


@njit(cache=True)
def face_axis(a, b, faces, vertices, distance, normal, point_a, point_b):
    """The narrow phase (distance, normal, witnesses), its normal replaced by
    a face normal of either shape (a box's, a convex hull's, a cylinder's
    axis) along which the shapes are as far apart within
    FACE_AXIS_TOLERANCE: where the cores touch or overlap, GJK's and EPA's
    normal is one of many equally deep ones (a box resting on a box: any of
    the edge's), and a face's is the one a resting contact keeps. The
    witness is the other shape's point farthest toward the face (the face's
    own is any of its points)."""
    best, best_n, best_side = -np.inf, (0.0, 0.0, 0.0), 0
    for side in range(2):
        placed = a if side == 0 else b
        shape, R = placed.shape, placed.R
        sign = 1.0 if side == 0 else -1.0  # A's outward normals point from A to B, B's the other way
        count = 3 if shape.kind == BOX else (1 if shape.kind == CYLINDER else
                                             (shape.face_count if shape.kind == CONVEX else 0))
        for f in range(count):
            for flip in (1.0, -1.0):
                if shape.kind == CONVEX:
                    if flip < 0.0:
                        continue
                    m = faces[shape.first_face + f].normal
                    axis = (R[0, 0] * m[0] + R[0, 1] * m[1] + R[0, 2] * m[2],
                            R[1, 0] * m[0] + R[1, 1] * m[1] + R[1, 2] * m[2],
                            R[2, 0] * m[0] + R[2, 1] * m[1] + R[2, 2] * m[2])
                else:
                    column = f if shape.kind == BOX else 2
                    axis = (flip * R[0, column], flip * R[1, column], flip * R[2, column])
                n = (sign * axis[0], sign * axis[1], sign * axis[2])
                separation, _, _ = _separation(a, b, vertices, n[0], n[1], n[2])
                if separation > best:
                    best, best_n, best_side = separation, n, side
    if best < distance - FACE_AXIS_TOLERANCE:
        return distance, normal, point_a, point_b
    n = best_n
    separation, farthest_a, farthest_b = _separation(a, b, vertices, n[0], n[1], n[2])
    if best_side == 0:  # A's face: B's point toward it, A's below it along n
        return separation, n, (farthest_b[0] - separation * n[0], farthest_b[1] - separation * n[1],
                               farthest_b[2] - separation * n[2]), farthest_b
    return separation, n, farthest_a, (farthest_a[0] + separation * n[0], farthest_a[1] + separation * n[1],
                                       farthest_a[2] + separation * n[2])


@njit(cache=True)
def shape_distance(a, b, shapes, work):
    """(distance, normal, a point, b point) of the Placed shapes a and b
    (module docstring; shapes: their ShapeSet); the normal from a to b.
    Where shapes with faces nearly touch, a face normal as good as the
    narrow phase's replaces it (face_axis)."""
    distance, normal, point_a, point_b = core_distance(a, b, shapes.vertices, work)
    if distance < FACE_AXIS_REACH and has_faces(a.shape.kind) and has_faces(b.shape.kind):
        return face_axis(a, b, shapes.faces, shapes.vertices, distance, normal, point_a, point_b)
    return distance, normal, point_a, point_b


@njit(cache=True)
def core_distance(a, b, vertices, work):
    """shape_distance without face_axis: closed forms, GJK on the cores, EPA."""
    kind_a, kind_b = a.shape.kind, b.shape.kind
    if kind_a == HALFSPACE:
        return halfspace_distance(a, b, vertices, True)
    if kind_b == HALFSPACE:
        return halfspace_distance(b, a, vertices, False)
    centres = (b.p[0] - a.p[0], b.p[1] - a.p[1], b.p[2] - a.p[2])
    norm = math.sqrt(centres[0] ** 2 + centres[1] ** 2 + centres[2] ** 2)
    fallback = (centres[0] / norm, centres[1] / norm, centres[2] / norm) if norm > 0.0 else (0.0, 0.0, 1.0)
    if (kind_a == SPHERE or kind_a == CAPSULE) and (kind_b == SPHERE or kind_b == CAPSULE):
        p1, q1 = core_segment(a)
        p2, q2 = core_segment(b)
        a_core, b_core = segments_nearest(p1, q1, p2, q2)
        return from_cores(a_core, b_core, a.shape.radius, b.shape.radius, fallback)
    if kind_a == SPHERE and kind_b == BOX:
        return sphere_box_distance(a, b, True)
    if kind_a == BOX and kind_b == SPHERE:
        return sphere_box_distance(b, a, False)
    status, count, v = gjk(a, b, vertices, work.simplex)
    if status != OVERLAPPING:
        a_core, b_core = witnesses(work.simplex, count)
        return from_cores(a_core, b_core, a.shape.radius, b.shape.radius, fallback)
    scale = 0.0
    for n in range(count):
        scale = max(scale, abs(work.simplex.W[n, 0]) + abs(work.simplex.W[n, 1]) + abs(work.simplex.W[n, 2]))
    ok, depth, n, a_core, b_core = epa(a, b, vertices, work.simplex, count, work.polytope, max(scale, 1e-300))
    if not ok:  # the cores touch along a flat Minkowski difference
        a_core, b_core = witnesses(work.simplex, count)
        n = fallback
    ra, rb = a.shape.radius, b.shape.radius
    return (-depth - ra - rb, n, (a_core[0] + ra * n[0], a_core[1] + ra * n[1], a_core[2] + ra * n[2]),
            (b_core[0] - rb * n[0], b_core[1] - rb * n[1], b_core[2] - rb * n[2]))
