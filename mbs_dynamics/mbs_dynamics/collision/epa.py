"""The penetration of two overlapping cores by the expanding polytope
algorithm (van den Bergen 2001): from GJK's simplex around the origin, the
polytope inside the Minkowski difference C = A - B grows toward the face
nearest the origin by C's support point along its normal until that face
is on C's boundary (within EPA_TOLERANCE); its distance d is the depth, its
normal n the direction in which B must move by d to separate (from A to B),
and the weights of the origin's projection d n on it give the witnesses.
Exact on polytopes; on curved cores (a cylinder) it stops at
EPA_MAX_VERTICES, a few 1e-7 of the size short at worst."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.collision.gjk import minkowski_support
from mbs_dynamics.compiled_calls import plain_argument_types

EPA_MAX_VERTICES = 128
EPA_MAX_FACES = 2 * EPA_MAX_VERTICES
# of C's size: a point nearer a face's plane than this does not see it, and a face this near C's boundary is on it
# (seeing faces by their exact sign breaks the polytope where a curved core's support points crowd)
EPA_TOLERANCE = 1e-11

# The polytope: its points of C and their support points on A and B (V, 3); its faces' vertices (F, 3),
# unit outward normals (F, 3), distances from the origin (F,) and whether each is still a face (F,; 1 or 0);
# the horizon's edges (3F, 2). V = EPA_MAX_VERTICES, F = EPA_MAX_FACES.
Polytope = namedtuple("Polytope", "simplex faces normal distance alive edges")


def new_polytope(simplex_type) -> Polytope:
    return Polytope(simplex_type(np.zeros((EPA_MAX_VERTICES, 3)), np.zeros((EPA_MAX_VERTICES, 3)),
                                 np.zeros((EPA_MAX_VERTICES, 3)), np.zeros(EPA_MAX_VERTICES)),
                    np.zeros((EPA_MAX_FACES, 3), dtype=np.int64), np.zeros((EPA_MAX_FACES, 3)),
                    np.zeros(EPA_MAX_FACES), np.zeros(EPA_MAX_FACES, dtype=np.int64),
                    np.zeros((3 * EPA_MAX_FACES, 2), dtype=np.int64))


@njit(cache=True, inline="always")
def _sub(W, i, j):
    return W[i, 0] - W[j, 0], W[i, 1] - W[j, 1], W[i, 2] - W[j, 2]


@njit(cache=True, inline="always")
def _cross(a, b):
    return a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]


@njit(cache=True, inline="always")
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@plain_argument_types  # called with constants and with variables: one version
@njit(cache=True)
def set_face(polytope, f, i, j, k):
    """Face f = (i, j, k), counter-clockwise seen from outside."""
    W = polytope.simplex.W
    n = _cross(_sub(W, j, i), _sub(W, k, i))
    norm = math.sqrt(_dot(n, n))
    polytope.faces[f, 0], polytope.faces[f, 1], polytope.faces[f, 2] = i, j, k
    polytope.alive[f] = 1
    if norm == 0.0:  # a sliver: never the nearest, never seen
        polytope.normal[f, :] = 0.0
        polytope.distance[f] = np.inf
        return
    polytope.normal[f, 0], polytope.normal[f, 1], polytope.normal[f, 2] = n[0] / norm, n[1] / norm, n[2] / norm
    polytope.distance[f] = (n[0] * W[i, 0] + n[1] * W[i, 1] + n[2] * W[i, 2]) / norm


@njit(cache=True)
def _line_distance(W, i, j, k):
    """The distance of W[k] from the line through W[i] and W[j]."""
    e, r = _sub(W, j, i), _sub(W, k, i)
    c = _cross(e, r)
    return math.sqrt(_dot(c, c) / max(_dot(e, e), 1e-300))


@njit(cache=True)
def to_tetrahedron(a, b, vertices, simplex, count, scale):
    """Grow GJK's simplex (count points holding the origin) into a
    tetrahedron of C's points; returns 4, or fewer when C is flat there."""
    eps = 1e-10 * scale
    W = simplex.W
    if count == 1:
        for d in range(6):
            axis = d // 2
            sign = 1.0 if d % 2 == 0 else -1.0
            minkowski_support(a, b, vertices, sign if axis == 0 else 0.0, sign if axis == 1 else 0.0,
                              sign if axis == 2 else 0.0, simplex, 1)
            r = _sub(W, 1, 0)
            if _dot(r, r) > eps * eps:
                count = 2
                break
        if count == 1:
            return 1
    if count == 2:
        e = _sub(W, 1, 0)
        axis = (1.0, 0.0, 0.0) if abs(e[0]) <= min(abs(e[1]), abs(e[2])) else \
            ((0.0, 1.0, 0.0) if abs(e[1]) <= abs(e[2]) else (0.0, 0.0, 1.0))
        u = _cross(e, axis)
        w = _cross(e, u)
        nu, nw = math.sqrt(_dot(u, u)), math.sqrt(_dot(w, w))
        for step in range(6):
            angle = step * math.pi / 3.0
            c, s = math.cos(angle) / nu, math.sin(angle) / nw
            minkowski_support(a, b, vertices, c * u[0] + s * w[0], c * u[1] + s * w[1], c * u[2] + s * w[2],
                              simplex, 2)
            if _line_distance(W, 0, 1, 2) > eps:
                count = 3
                break
        if count == 2:
            return 2
    if count == 3:
        n = _cross(_sub(W, 1, 0), _sub(W, 2, 0))
        norm = math.sqrt(_dot(n, n))
        for sign in (1.0, -1.0):
            minkowski_support(a, b, vertices, sign * n[0], sign * n[1], sign * n[2], simplex, 3)
            if abs(_dot(n, _sub(W, 3, 0))) > eps * norm:
                return 4
        return 3
    return 4


@njit(cache=True)
def epa(a, b, vertices, simplex, count, polytope, scale):
    """(ok, depth, normal, a*, b*) of the overlapping cores of the Placed
    shapes a and b: ok False when C is flat (the cores touch along a face:
    depth 0). simplex: GJK's (count points), scale: C's size."""
    P = polytope.simplex
    for n in range(count):
        for r in range(3):
            P.W[n, r], P.A[n, r], P.B[n, r] = simplex.W[n, r], simplex.A[n, r], simplex.B[n, r]
    count = to_tetrahedron(a, b, vertices, P, count, scale)
    if count < 4:
        return False, 0.0, (0.0, 0.0, 1.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    W = P.W
    for f in range(4):
        i, j, k, opposite = (0, 1, 2, 3) if f == 0 else ((0, 3, 1, 2) if f == 1 else ((0, 2, 3, 1) if f == 2
                                                                                        else (1, 3, 2, 0)))
        if _dot(_cross(_sub(W, j, i), _sub(W, k, i)), _sub(W, opposite, i)) > 0.0:
            j, k = k, j  # its normal pointed inward
        set_face(polytope, f, i, j, k)
    faces, vertex_count = 4, 4
    nearest, last, last_depth = 0, 0, -np.inf
    for _ in range(EPA_MAX_VERTICES):
        nearest, depth = -1, np.inf
        for f in range(faces):
            if polytope.alive[f] and polytope.distance[f] < depth:
                nearest, depth = f, polytope.distance[f]
        if nearest < 0 or depth < last_depth - EPA_TOLERANCE * scale:  # the nearest face can only recede
            nearest = last  # unless rounding broke the polytope: the last good face stands
            break
        last, last_depth = nearest, depth
        n = (polytope.normal[nearest, 0], polytope.normal[nearest, 1], polytope.normal[nearest, 2])
        if vertex_count == EPA_MAX_VERTICES:
            break
        new = vertex_count
        minkowski_support(a, b, vertices, n[0], n[1], n[2], P, new)
        reach = n[0] * W[new, 0] + n[1] * W[new, 1] + n[2] * W[new, 2]
        if reach - depth <= EPA_TOLERANCE * scale:
            break
        vertex_count += 1
        # the faces the new point sees go; the edges of their hull (the horizon) make the new faces
        edges = 0
        for f in range(faces):
            if not polytope.alive[f]:
                continue
            i = polytope.faces[f, 0]
            if polytope.normal[f, 0] * (W[new, 0] - W[i, 0]) + polytope.normal[f, 1] * (W[new, 1] - W[i, 1]) \
                    + polytope.normal[f, 2] * (W[new, 2] - W[i, 2]) > EPA_TOLERANCE * scale:
                polytope.alive[f] = 0
                for e in range(3):
                    p, q = polytope.faces[f, e], polytope.faces[f, (e + 1) % 3]
                    twin = -1
                    for h in range(edges):
                        if polytope.edges[h, 0] == q and polytope.edges[h, 1] == p:
                            twin = h
                    if twin >= 0:  # shared by two faces that go: not on the horizon
                        edges -= 1
                        polytope.edges[twin, 0], polytope.edges[twin, 1] = polytope.edges[edges, 0], \
                            polytope.edges[edges, 1]
                    else:
                        polytope.edges[edges, 0], polytope.edges[edges, 1] = p, q
                        edges += 1
        if faces + edges > EPA_MAX_FACES:
            break
        for h in range(edges):
            set_face(polytope, faces, polytope.edges[h, 0], polytope.edges[h, 1], new)
            faces += 1
    # the origin's projection on the nearest face, in its weights
    i, j, k = polytope.faces[nearest, 0], polytope.faces[nearest, 1], polytope.faces[nearest, 2]
    depth = polytope.distance[nearest]
    n = (polytope.normal[nearest, 0], polytope.normal[nearest, 1], polytope.normal[nearest, 2])
    e0, e1 = _sub(W, j, i), _sub(W, k, i)
    x = (depth * n[0] - W[i, 0], depth * n[1] - W[i, 1], depth * n[2] - W[i, 2])
    d00, d01, d11, d20, d21 = _dot(e0, e0), _dot(e0, e1), _dot(e1, e1), _dot(x, e0), _dot(x, e1)
    denominator = d00 * d11 - d01 * d01
    v = (d11 * d20 - d01 * d21) / denominator
    w = (d00 * d21 - d01 * d20) / denominator
    u = 1.0 - v - w
    A = P.A
    a_point = (u * A[i, 0] + v * A[j, 0] + w * A[k, 0], u * A[i, 1] + v * A[j, 1] + w * A[k, 1],
               u * A[i, 2] + v * A[j, 2] + w * A[k, 2])
    depth = max(depth, 0.0)
    # b* = a* - depth n, as the weights give it up to their rounding (large on the slivers of a curved core)
    b_point = (a_point[0] - depth * n[0], a_point[1] - depth * n[1], a_point[2] - depth * n[2])
    return True, depth, n, a_point, b_point
