"""The distance between the cores of two placed convex shapes by GJK
(Gilbert, Johnson and Keerthi 1988; the closest point on each simplex by
Voronoi regions, Ericson's Real-Time Collision Detection §5.1): the point v
of the Minkowski difference C = A - B nearest the origin, built from support
points w = s_A(-v) - s_B(v) until |v|² - v·w <= GJK_TOLERANCE |v|² (v·w/|v|
is a lower bound of the distance, |v| an upper one). When the origin is in
C the cores overlap and the simplex is left for EPA (epa.py)."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.collision.support import world_support
from mbs_dynamics.compiled_calls import plain_argument_types

# A shape record (shapes.SHAPE) placed at (R, p): world <- shape
Placed = namedtuple("Placed", "shape R p")
# Up to 4 points w = a - b of C (W), the support points a (A) and b (B) they come from, and the weights of
# the nearest point of their hull to the origin (weights): (4, 3), (4, 3), (4, 3), (4,)
Simplex = namedtuple("Simplex", "W A B weights")

GJK_MAX_ITERATIONS = 128
GJK_TOLERANCE = 1e-14
# and |v|² - v·w below this share of the squared size of C: rounding
ROUNDING = 1e-15
# |v|² below this share of the squared size of C: the origin is on the simplex (the cores touch or overlap)
TOUCHING = 1e-26

SEPARATED, OVERLAPPING = 0, 1


def new_simplex() -> Simplex:
    return Simplex(np.zeros((4, 3)), np.zeros((4, 3)), np.zeros((4, 3)), np.zeros(4))


@njit(cache=True, inline="always")
def minkowski_support(a, b, vertices, d0, d1, d2, simplex, slot):
    """simplex's point `slot` = s_A(d) - s_B(-d), and its squared size."""
    a0, a1, a2 = world_support(a.shape, vertices, a.R, a.p, d0, d1, d2)
    b0, b1, b2 = world_support(b.shape, vertices, b.R, b.p, -d0, -d1, -d2)
    A, B, W = simplex.A, simplex.B, simplex.W
    A[slot, 0], A[slot, 1], A[slot, 2] = a0, a1, a2
    B[slot, 0], B[slot, 1], B[slot, 2] = b0, b1, b2
    W[slot, 0], W[slot, 1], W[slot, 2] = a0 - b0, a1 - b1, a2 - b2
    return W[slot, 0] ** 2 + W[slot, 1] ** 2 + W[slot, 2] ** 2


@njit(cache=True, inline="always")
def _dot(W, i, x0, x1, x2):
    return W[i, 0] * x0 + W[i, 1] * x1 + W[i, 2] * x2


@plain_argument_types  # called with (0, 1, 2) and with variables: one version
@njit(cache=True)
def triangle_nearest(W, i, j, k):
    """The point of triangle (W[i], W[j], W[k]) nearest the origin, by its
    Voronoi regions (Ericson §5.1.5): (count, (three vertex indices),
    (their weights)), the first `count` used."""
    ab0, ab1, ab2 = W[j, 0] - W[i, 0], W[j, 1] - W[i, 1], W[j, 2] - W[i, 2]
    ac0, ac1, ac2 = W[k, 0] - W[i, 0], W[k, 1] - W[i, 1], W[k, 2] - W[i, 2]
    d1, d2 = -_dot(W, i, ab0, ab1, ab2), -_dot(W, i, ac0, ac1, ac2)
    if d1 <= 0.0 and d2 <= 0.0:
        return 1, (i, j, k), (1.0, 0.0, 0.0)
    d3, d4 = -_dot(W, j, ab0, ab1, ab2), -_dot(W, j, ac0, ac1, ac2)
    if d3 >= 0.0 and d4 <= d3:
        return 1, (j, i, k), (1.0, 0.0, 0.0)
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        t = d1 / (d1 - d3)
        return 2, (i, j, k), (1.0 - t, t, 0.0)
    d5, d6 = -_dot(W, k, ab0, ab1, ab2), -_dot(W, k, ac0, ac1, ac2)
    if d6 >= 0.0 and d5 <= d6:
        return 1, (k, i, j), (1.0, 0.0, 0.0)
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        t = d2 / (d2 - d6)
        return 2, (i, k, j), (1.0 - t, t, 0.0)
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and d4 - d3 >= 0.0 and d5 - d6 >= 0.0:
        t = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return 2, (j, k, i), (1.0 - t, t, 0.0)
    total = va + vb + vc
    if total <= 0.0:  # a degenerate (flat) triangle: its nearest edge
        best, best_count, best_indices, best_weights = np.inf, 0, (i, j, k), (1.0, 0.0, 0.0)
        for e in range(3):
            p, q = (i, j) if e == 0 else ((j, k) if e == 1 else (k, i))
            count, indices, weights = segment_nearest(W, p, q)
            x0, x1, x2 = combine(W, count, indices, weights)
            if x0 * x0 + x1 * x1 + x2 * x2 < best:
                best = x0 * x0 + x1 * x1 + x2 * x2
                best_count, best_indices, best_weights = count, (indices[0], indices[1], indices[1]), \
                    (weights[0], weights[1], 0.0)
        return best_count, best_indices, best_weights
    v, w = vb / total, vc / total
    return 3, (i, j, k), (1.0 - v - w, v, w)


@njit(cache=True, inline="always")
def segment_nearest(W, i, j):
    """The point of segment (W[i], W[j]) nearest the origin: (count, indices, weights)."""
    e0, e1, e2 = W[j, 0] - W[i, 0], W[j, 1] - W[i, 1], W[j, 2] - W[i, 2]
    length2 = e0 * e0 + e1 * e1 + e2 * e2
    t = -_dot(W, i, e0, e1, e2) / length2 if length2 > 0.0 else 0.0
    if t <= 0.0:
        return 1, (i, j), (1.0, 0.0)
    if t >= 1.0:
        return 1, (j, i), (1.0, 0.0)
    return 2, (i, j), (1.0 - t, t)


@njit(cache=True, inline="always")
def combine(W, count, indices, weights):
    """sum of weights[n] W[indices[n]] over the first count."""
    x0 = x1 = x2 = 0.0
    for n in range(count):
        x0 += weights[n] * W[indices[n], 0]
        x1 += weights[n] * W[indices[n], 1]
        x2 += weights[n] * W[indices[n], 2]
    return x0, x1, x2


@njit(cache=True, inline="always")
def _point(simplex, i):
    W, A, B = simplex.W, simplex.A, simplex.B
    return (W[i, 0], W[i, 1], W[i, 2]), (A[i, 0], A[i, 1], A[i, 2]), (B[i, 0], B[i, 1], B[i, 2])


@njit(cache=True, inline="always")
def _set_point(simplex, n, point, weight):
    (w0, w1, w2), (a0, a1, a2), (b0, b1, b2) = point
    W, A, B = simplex.W, simplex.A, simplex.B
    W[n, 0], W[n, 1], W[n, 2] = w0, w1, w2
    A[n, 0], A[n, 1], A[n, 2] = a0, a1, a2
    B[n, 0], B[n, 1], B[n, 2] = b0, b1, b2
    simplex.weights[n] = weight


@njit(cache=True, inline="always")
def keep(simplex, count, indices, weights):
    """Reduce the simplex to its points `indices` (the first count) with their weights."""
    # read before writing: the indices may name the target slots
    first, second, third = _point(simplex, indices[0]), _point(simplex, indices[1]), _point(simplex, indices[2])
    _set_point(simplex, 0, first, weights[0])
    if count > 1:
        _set_point(simplex, 1, second, weights[1])
    if count > 2:
        _set_point(simplex, 2, third, weights[2])


@njit(cache=True)
def reduce_simplex(simplex, count):
    """The nearest point v of the simplex's hull to the origin, the simplex
    reduced to the smallest face holding it: (count, inside, v), inside when
    the origin is in the tetrahedron."""
    W = simplex.W
    if count == 1:
        simplex.weights[0] = 1.0
        return 1, False, (W[0, 0], W[0, 1], W[0, 2])
    if count == 2:
        n, indices, weights = segment_nearest(W, 0, 1)
        keep(simplex, n, (indices[0], indices[1], 0), (weights[0], weights[1], 0.0))
        return n, False, combine(W, n, (0, 1, 2), simplex.weights[:3])
    if count == 3:
        n, indices, weights = triangle_nearest(W, 0, 1, 2)
        keep(simplex, n, indices, weights)
        return n, False, combine(W, n, (0, 1, 2), simplex.weights[:3])
    # a tetrahedron: the nearest point of the faces the origin is outside of (Ericson §5.1.6)
    best, best_n, best_indices, best_weights, outside_any = np.inf, 0, (0, 1, 2), (1.0, 0.0, 0.0), False
    for f in range(4):
        i, j, k, opposite = (0, 1, 2, 3) if f == 0 else ((0, 3, 1, 2) if f == 1 else ((0, 2, 3, 1) if f == 2
                                                                                        else (1, 3, 2, 0)))
        ab0, ab1, ab2 = W[j, 0] - W[i, 0], W[j, 1] - W[i, 1], W[j, 2] - W[i, 2]
        ac0, ac1, ac2 = W[k, 0] - W[i, 0], W[k, 1] - W[i, 1], W[k, 2] - W[i, 2]
        n0, n1, n2 = ab1 * ac2 - ab2 * ac1, ab2 * ac0 - ab0 * ac2, ab0 * ac1 - ab1 * ac0
        origin_side = -_dot(W, i, n0, n1, n2)
        opposite_side = (W[opposite, 0] - W[i, 0]) * n0 + (W[opposite, 1] - W[i, 1]) * n1 \
            + (W[opposite, 2] - W[i, 2]) * n2
        if origin_side * opposite_side < 0.0 or opposite_side == 0.0:
            outside_any = True
            n, indices, weights = triangle_nearest(W, i, j, k)
            x0, x1, x2 = combine(W, n, indices, weights)
            if x0 * x0 + x1 * x1 + x2 * x2 < best:
                best, best_n, best_indices, best_weights = x0 * x0 + x1 * x1 + x2 * x2, n, indices, weights
    if not outside_any:
        return 4, True, (0.0, 0.0, 0.0)
    keep(simplex, best_n, best_indices, best_weights)
    return best_n, False, combine(W, best_n, (0, 1, 2), simplex.weights[:3])


@njit(cache=True)
def gjk(a, b, vertices, simplex):
    """(status, count, v): SEPARATED with v = a* - b* for the nearest points
    a*, b* of the cores of the Placed shapes a and b (simplex's first `count`
    points and weights give them: witnesses), or OVERLAPPING with the
    simplex holding the origin (count points) for EPA."""
    d0, d1, d2 = a.p[0] - b.p[0], a.p[1] - b.p[1], a.p[2] - b.p[2]
    if d0 == 0.0 and d1 == 0.0 and d2 == 0.0:
        d0 = 1.0
    size2 = minkowski_support(a, b, vertices, d0, d1, d2, simplex, 0)
    count, (v0, v1, v2) = 1, (simplex.W[0, 0], simplex.W[0, 1], simplex.W[0, 2])
    simplex.weights[0] = 1.0
    for _ in range(GJK_MAX_ITERATIONS):
        vv = v0 * v0 + v1 * v1 + v2 * v2
        if vv <= TOUCHING * size2:
            return OVERLAPPING, count, (v0, v1, v2)
        size2 = max(size2, minkowski_support(a, b, vertices, -v0, -v1, -v2, simplex, count))
        W = simplex.W
        if vv - (v0 * W[count, 0] + v1 * W[count, 1] + v2 * W[count, 2]) <= max(GJK_TOLERANCE * vv,
                                                                                 ROUNDING * size2):
            break
        repeated = False
        for n in range(count):
            if W[n, 0] == W[count, 0] and W[n, 1] == W[count, 1] and W[n, 2] == W[count, 2]:
                repeated = True
        if repeated:
            break
        before, saved = count, (_point(simplex, 0), _point(simplex, 1), _point(simplex, 2))
        weights = (simplex.weights[0], simplex.weights[1], simplex.weights[2])
        count, inside, (u0, u1, u2) = reduce_simplex(simplex, count + 1)
        if inside:
            return OVERLAPPING, count, (0.0, 0.0, 0.0)
        if u0 * u0 + u1 * u1 + u2 * u2 >= vv:  # no progress (a flat simplex, rounding): the last one stands
            count = before
            for n in range(before):
                _set_point(simplex, n, saved[n], weights[n])
            break
        v0, v1, v2 = u0, u1, u2
    return SEPARATED, count, (v0, v1, v2)


@njit(cache=True, inline="always")
def witnesses(simplex, count):
    """The points of A and B the simplex's weights combine (its first count)."""
    a0 = a1 = a2 = b0 = b1 = b2 = 0.0
    for n in range(count):
        w = simplex.weights[n]
        a0 += w * simplex.A[n, 0]
        a1 += w * simplex.A[n, 1]
        a2 += w * simplex.A[n, 2]
        b0 += w * simplex.B[n, 0]
        b1 += w * simplex.B[n, 1]
        b2 += w * simplex.B[n, 2]
    return (a0, a1, a2), (b0, b1, b2)
