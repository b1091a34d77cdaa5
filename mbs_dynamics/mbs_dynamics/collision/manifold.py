"""The contact points of two convex shapes that touch or nearly touch: where
their facing features are flat (a face, a cylinder's cap or side, a
capsule's side) and parallel to the contact normal within FACE_ALIGNMENT,
the incident feature clipped by the side planes of the reference face
(Sutherland-Hodgman) gives a patch of points, each with its own gap (a box
on a box stands on its four corners); otherwise the one point midway
between the witnesses of the narrow phase. At most MANIFOLD_POINTS points:
the four that span the patch (reduce_manifold)."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.collision.shapes import BOX, CAPSULE, CONVEX, CYLINDER, HALFSPACE
from mbs_dynamics.compiled_calls import plain_argument_types

# A feature is flat enough to carry a patch when its normal is within this cosine of the contact normal
FACE_ALIGNMENT = 0.999
CAP_POINTS = 12  # a cylinder's cap as a regular polygon
MAX_FEATURE_POINTS = 16
MANIFOLD_POINTS = 4
MANIFOLD_CANDIDATES = 4 * MAX_FEATURE_POINTS  # the size of the arrays contact_manifold writes: before reducing

# Scratch: the two features' points (MAX_FEATURE_POINTS, 3) each, the clipping's two buffers (4 x that)
ManifoldWork = namedtuple("ManifoldWork", "feature_a feature_b clip_in clip_out")


def new_manifold_work() -> ManifoldWork:
    return ManifoldWork(np.zeros((MAX_FEATURE_POINTS, 3)), np.zeros((MAX_FEATURE_POINTS, 3)),
                        np.zeros((4 * MAX_FEATURE_POINTS, 3)), np.zeros((4 * MAX_FEATURE_POINTS, 3)))


@njit(cache=True, inline="always")
def _world(R, p, x0, x1, x2):
    return (p[0] + R[0, 0] * x0 + R[0, 1] * x1 + R[0, 2] * x2, p[1] + R[1, 0] * x0 + R[1, 1] * x1 + R[1, 2] * x2,
            p[2] + R[2, 0] * x0 + R[2, 1] * x1 + R[2, 2] * x2)


@njit(cache=True, inline="always")
def _put(points, i, x):
    points[i, 0], points[i, 1], points[i, 2] = x[0], x[1], x[2]


@njit(cache=True)
def facing_feature(placed, shape_set, d, points):
    """The shape's feature facing the world direction d (unit), as points
    (world) written into points: (count, its unit normal): a face's corners
    counter-clockwise about it (count >= 3), a segment (2) or a point (1)."""
    shape, R, p = placed.shape, placed.R, placed.p
    local = (R[0, 0] * d[0] + R[1, 0] * d[1] + R[2, 0] * d[2], R[0, 1] * d[0] + R[1, 1] * d[1] + R[2, 1] * d[2],
             R[0, 2] * d[0] + R[1, 2] * d[1] + R[2, 2] * d[2])
    kind, size = shape.kind, shape.size
    if kind == BOX:
        axis = 0
        for r in range(1, 3):
            if abs(local[r]) > abs(local[axis]):
                axis = r
        sign = 1.0 if local[axis] >= 0.0 else -1.0
        u, w = (axis + 1) % 3, (axis + 2) % 3
        for c in range(4):  # counter-clockwise about sign * e_axis
            su = size[u] if c == 0 or c == 3 else -size[u]
            sw = sign * (size[w] if c < 2 else -size[w])
            x0 = sign * size[0] if axis == 0 else (su if u == 0 else sw)
            x1 = sign * size[1] if axis == 1 else (su if u == 1 else sw)
            x2 = sign * size[2] if axis == 2 else (su if u == 2 else sw)
            _put(points, c, _world(R, p, x0, x1, x2))
        return 4, (sign * R[0, axis], sign * R[1, axis], sign * R[2, axis])
    if kind == CYLINDER or kind == CAPSULE:
        along = local[2]
        radial = math.sqrt(max(0.0, 1.0 - along * along))
        r, h = size[0], size[1]
        if kind == CYLINDER and abs(along) >= radial:  # its cap
            sign = 1.0 if along >= 0.0 else -1.0
            for c in range(CAP_POINTS):
                angle = sign * 2.0 * math.pi * c / CAP_POINTS
                _put(points, c, _world(R, p, r * math.cos(angle), r * math.sin(angle), sign * h))
            return CAP_POINTS, (sign * R[0, 2], sign * R[1, 2], sign * R[2, 2])
        # its side along the axis: the segment of the line that touches, r from the axis toward d
        if radial > 0.0:
            c0, c1 = r * local[0] / radial, r * local[1] / radial
        else:
            c0, c1 = 0.0, 0.0
        if kind == CAPSULE:
            c0, c1 = r * local[0], r * local[1]  # a capsule: its core swept toward d
            _put(points, 0, _world(R, p, c0, c1, -h + r * along))
            _put(points, 1, _world(R, p, c0, c1, h + r * along))
            return 2, (d[0], d[1], d[2])
        _put(points, 0, _world(R, p, c0, c1, -h))
        _put(points, 1, _world(R, p, c0, c1, h))
        n = (local[0] / radial, local[1] / radial, 0.0) if radial > 0.0 else (1.0, 0.0, 0.0)
        return 2, (R[0, 0] * n[0] + R[0, 1] * n[1], R[1, 0] * n[0] + R[1, 1] * n[1], R[2, 0] * n[0] + R[2, 1] * n[1])
    if kind == CONVEX and shape.face_count > 0:
        faces, corners, vertices = shape_set.faces, shape_set.corners, shape_set.vertices
        best, chosen = -np.inf, shape.first_face
        for f in range(shape.first_face, shape.first_face + shape.face_count):
            m = faces[f].normal
            along = m[0] * local[0] + m[1] * local[1] + m[2] * local[2]
            if along > best:
                best, chosen = along, f
        face = faces[chosen]
        count = min(face.corner_count, MAX_FEATURE_POINTS)
        for c in range(count):
            v = vertices[corners[face.first_corner + c]]
            _put(points, c, _world(R, p, v[0], v[1], v[2]))
        m = face.normal
        return count, (R[0, 0] * m[0] + R[0, 1] * m[1] + R[0, 2] * m[2],
                       R[1, 0] * m[0] + R[1, 1] * m[1] + R[1, 2] * m[2],
                       R[2, 0] * m[0] + R[2, 1] * m[1] + R[2, 2] * m[2])
    # a sphere: its point toward d
    _put(points, 0, (p[0] + size[0] * d[0], p[1] + size[0] * d[1], p[2] + size[0] * d[2]))
    return 1, (d[0], d[1], d[2])


@njit(cache=True, inline="always")
def _side(x, p, inward):
    return (x[0] - p[0]) * inward[0] + (x[1] - p[1]) * inward[1] + (x[2] - p[2]) * inward[2]


@njit(cache=True)
def clip(polygon, count, reference, reference_count, normal, out):
    """The part of `polygon` (count points: a polygon, a segment or a point)
    within the prism of the reference face (reference_count corners
    counter-clockwise about normal), written into out; returns its count
    (Sutherland-Hodgman; polygon is overwritten)."""
    source, target = polygon, out
    n_in, in_out = count, False  # in_out: the result is in `out`
    for e in range(reference_count):
        p, q = reference[e], reference[(e + 1) % reference_count]
        edge = (q[0] - p[0], q[1] - p[1], q[2] - p[2])
        inward = (normal[1] * edge[2] - normal[2] * edge[1], normal[2] * edge[0] - normal[0] * edge[2],
                  normal[0] * edge[1] - normal[1] * edge[0])
        n_out = 0
        if n_in <= 2:  # a point, or a segment: its part inside
            a, b = source[0], source[n_in - 1]
            sa, sb = _side(a, p, inward), _side(b, p, inward)
            if sa >= 0.0:
                target[n_out] = a
                n_out += 1
            if n_in == 2 and (sa >= 0.0) != (sb >= 0.0):
                t = sa / (sa - sb)
                for r in range(3):
                    target[n_out, r] = a[r] + t * (b[r] - a[r])
                n_out += 1
            if n_in == 2 and sb >= 0.0:
                target[n_out] = b
                n_out += 1
        else:
            for i in range(n_in):
                a, b = source[i], source[(i + 1) % n_in]
                sa, sb = _side(a, p, inward), _side(b, p, inward)
                if sa >= 0.0:
                    target[n_out] = a
                    n_out += 1
                if (sa >= 0.0) != (sb >= 0.0):
                    t = sa / (sa - sb)
                    for r in range(3):
                        target[n_out, r] = a[r] + t * (b[r] - a[r])
                    n_out += 1
        source, target = target, source
        in_out = not in_out
        n_in = n_out
        if n_in == 0:
            break
    if not in_out:
        for i in range(n_in):
            out[i] = polygon[i]
    return n_in


@njit(cache=True, inline="always")
def _area(locations, i, j, k, normal):
    """n . ((x_j - x_i) x (x_k - x_i)): twice the signed area of the triangle i, j, k about the normal."""
    e0, e1, e2 = locations[j, 0] - locations[i, 0], locations[j, 1] - locations[i, 1], locations[j, 2] - locations[i, 2]
    f0, f1, f2 = locations[k, 0] - locations[i, 0], locations[k, 1] - locations[i, 1], locations[k, 2] - locations[i, 2]
    return normal[0] * (e1 * f2 - e2 * f1) + normal[1] * (e2 * f0 - e0 * f2) + normal[2] * (e0 * f1 - e1 * f0)


@plain_argument_types  # called with count 0 and with a variable: one version
@njit(cache=True)
def reduce_manifold(locations, gaps, count, normal):
    """At most MANIFOLD_POINTS (4) points of a patch that span it: the
    deepest, the one farthest from it, the one making the largest triangle
    with them, and the one farthest beyond the first two on the other side
    (the largest quadrilateral); compacted to the front, returns the count.
    More points of one flat contact only add rows that say the same, on
    which the solver stalls."""
    if count <= MANIFOLD_POINTS:
        return count
    first = 0
    for i in range(count):
        if gaps[i] < gaps[first]:
            first = i
    second, best = first, -1.0
    for i in range(count):
        d = (locations[i, 0] - locations[first, 0]) ** 2 + (locations[i, 1] - locations[first, 1]) ** 2 \
            + (locations[i, 2] - locations[first, 2]) ** 2
        if d > best:
            second, best = i, d
    third, best = first, 0.0
    for i in range(count):
        area = abs(_area(locations, first, second, i, normal))
        if area > best:
            third, best = i, area
    side = 1.0 if _area(locations, first, second, third, normal) >= 0.0 else -1.0
    fourth, best = -1, 0.0
    for i in range(count):
        beyond = -side * _area(locations, first, second, i, normal)
        if beyond > best:
            fourth, best = i, beyond
    if fourth < 0:
        fourth = third  # all on one side of the first two: three span it
    rows = ((locations[first, 0], locations[first, 1], locations[first, 2], gaps[first]),
            (locations[second, 0], locations[second, 1], locations[second, 2], gaps[second]),
            (locations[third, 0], locations[third, 1], locations[third, 2], gaps[third]),
            (locations[fourth, 0], locations[fourth, 1], locations[fourth, 2], gaps[fourth]))
    chosen = (first, second, third, fourth)
    kept = 0
    for c in range(4):  # read above, written here: the chosen rows may be the target slots
        duplicate = False
        for d in range(c):
            duplicate = duplicate or chosen[d] == chosen[c]
        if duplicate:
            continue
        row = rows[c]
        locations[kept, 0], locations[kept, 1], locations[kept, 2], gaps[kept] = row[0], row[1], row[2], row[3]
        kept += 1
    return kept


@njit(cache=True)
def halfspace_manifold(a, b, shape_set, normal, margin, work, locations, gaps):
    """A halfspace and a shape: the points of the shape's feature facing the
    plane within margin of it (a box's face: its corners below)."""
    plane, other = (a, b) if a.shape.kind == HALFSPACE else (b, a)
    n = (plane.R[0, 2], plane.R[1, 2], plane.R[2, 2])  # out of the halfspace
    count_other, _ = facing_feature(other, shape_set, (-n[0], -n[1], -n[2]), work.feature_a)
    count = 0
    for i in range(count_other):
        x = work.feature_a[i]
        gap = (x[0] - plane.p[0]) * n[0] + (x[1] - plane.p[1]) * n[1] + (x[2] - plane.p[2]) * n[2]
        if gap > margin:
            continue
        for r in range(3):
            locations[count, r] = x[r] - 0.5 * gap * n[r]
        gaps[count] = gap
        count += 1
    count = reduce_manifold(locations, gaps, count, n)
    return count, (normal[0], normal[1], normal[2])


@njit(cache=True)
def contact_manifold(a, b, shape_set, distance, normal, point_a, point_b, margin, work, locations, gaps):
    """The contact points of the Placed shapes a and b (module docstring),
    given their narrow phase (distance, normal from a to b, witnesses):
    writes locations (world) and gaps (MANIFOLD_CANDIDATES rows each: the
    patch before it is reduced), returns (count, the normal from a to b
    they share)."""
    minus = (-normal[0], -normal[1], -normal[2])
    if a.shape.kind == HALFSPACE or b.shape.kind == HALFSPACE:
        return halfspace_manifold(a, b, shape_set, normal, margin, work, locations, gaps)
    count_a, normal_a = facing_feature(a, shape_set, normal, work.feature_a)
    count_b, normal_b = facing_feature(b, shape_set, minus, work.feature_b)
    align_a = normal_a[0] * normal[0] + normal_a[1] * normal[1] + normal_a[2] * normal[2]
    align_b = -(normal_b[0] * normal[0] + normal_b[1] * normal[1] + normal_b[2] * normal[2])
    reference_is_a = count_a >= 3 and (align_a >= align_b or count_b < 3)
    aligned = align_a if reference_is_a else align_b
    count = 0
    if (count_a >= 3 or count_b >= 3) and aligned >= FACE_ALIGNMENT:
        if reference_is_a:
            reference, reference_count, incident, incident_count, nr = work.feature_a, count_a, work.feature_b, \
                count_b, normal_a
        else:
            reference, reference_count, incident, incident_count, nr = work.feature_b, count_b, work.feature_a, \
                count_a, normal_b
        work.clip_in[:incident_count] = incident[:incident_count]
        clipped = clip(work.clip_in, incident_count, reference, reference_count, nr, work.clip_out)
        for i in range(clipped):
            x = work.clip_out[i]
            # its height above the reference face: the incident feature's points are on its shape's surface
            gap = (x[0] - reference[0, 0]) * nr[0] + (x[1] - reference[0, 1]) * nr[1] + (x[2] - reference[0, 2]) * nr[2]
            if gap > margin or count == locations.shape[0]:
                continue
            c0, c1, c2 = x[0] - 0.5 * gap * nr[0], x[1] - 0.5 * gap * nr[1], x[2] - 0.5 * gap * nr[2]
            duplicate = False
            for j in range(count):
                if abs(locations[j, 0] - c0) + abs(locations[j, 1] - c1) + abs(locations[j, 2] - c2) < 1e-12:
                    duplicate = True
            if duplicate:
                continue
            locations[count, 0], locations[count, 1], locations[count, 2] = c0, c1, c2
            gaps[count] = gap
            count += 1
        if count > 0:
            count = reduce_manifold(locations, gaps, count, nr)
            if reference_is_a:
                return count, (nr[0], nr[1], nr[2])
            return count, (-nr[0], -nr[1], -nr[2])
    for r in range(3):
        locations[0, r] = 0.5 * (point_a[r] + point_b[r])
    gaps[0] = distance
    return 1, (normal[0], normal[1], normal[2])
