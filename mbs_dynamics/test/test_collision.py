"""The narrow phase (mbs.collision.distance) on random pairs of every kind,
against a certificate that needs no oracle and against coal, the FCL
extension Pinocchio uses (a test-only oracle).

The certificate: with the returned normal n and the shapes' support
functions h (written here again, apart from the kernels), -(h_A(n) +
h_B(-n)) is the signed distance, and the witnesses lie on the shapes, |d|
apart along n. Where a cylinder takes part, GJK and EPA run on a curved
core and stop at a tolerance: the distance still agrees to 1e-9, the
witnesses (which move with the square root of the distance's error) to
1e-4. coal 3.0.3 is often wrong with a cylinder (-inf deep, witnesses off
the cylinders, a sphere 0.1 m deeper in one than it is): there the oracle is
the brute-force minimum of h_A(n) + h_B(-n) over directions."""
from __future__ import annotations

import itertools

import coal
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.spatial import Delaunay
from scipy.spatial.transform import Rotation

from mbs_dynamics import collision

KINDS = ("sphere", "capsule", "cylinder", "box", "convex")
CURVED_GJK = {"cylinder"}  # a curved core: GJK and EPA stop at a tolerance (a witness moves with its square root)
PAIRS = list(itertools.combinations_with_replacement(KINDS, 2)) + [("halfspace", kind) for kind in KINDS]
TRIALS = 80


def random_shape(kind, rng):
    """(ours, coal's) of one random shape."""
    if kind == "sphere":
        r = rng.uniform(0.1, 0.5)
        return collision.sphere(r), coal.Sphere(r)
    if kind in ("capsule", "cylinder"):
        r, length = rng.uniform(0.1, 0.4), rng.uniform(0.2, 1.0)
        return getattr(collision, kind)(r, length), getattr(coal, kind.capitalize())(r, length)
    if kind == "box":
        size = rng.uniform(0.2, 1.0, 3)
        return collision.box(size), coal.Box(*size)
    if kind == "convex":
        ours = collision.convex(rng.normal(size=(30, 3)) * rng.uniform(0.2, 0.5, 3))
        points = coal.StdVec_Vec3s()
        for vertex in ours.vertices:
            points.append(np.array(vertex))
        return ours, coal.Convex.convexHull(points, False, None)
    return collision.halfspace(), coal.Halfspace(np.array([0.0, 0.0, 1.0]), 0.0)


def support(shape, R, p, n):
    """The shape's point farthest along the world direction n (unit), and
    h(n), the support function."""
    d = R.T @ n
    kind, size = shape.kind, shape.size
    if kind == "sphere":
        local = size[0] * d
    elif kind == "capsule":
        local = np.array([0.0, 0.0, np.copysign(size[1], d[2])]) + size[0] * d
    elif kind == "box":
        local = np.where(d >= 0, size, -size)
    elif kind == "cylinder":
        radial = np.hypot(d[0], d[1])
        local = np.array([size[0] * d[0] / radial, size[0] * d[1] / radial, np.copysign(size[1], d[2])])
    elif kind == "convex":
        local = shape.vertices[np.argmax(shape.vertices @ d)]
    else:
        raise AssertionError("a halfspace's support is unbounded")
    x = p + R @ local
    return x, float(n @ x)


def excess(shape, R, p, x):
    """How far x is outside the shape (<= 0: in it or on it), the shape in its pose."""
    local = R.T @ (x - p)
    kind, size = shape.kind, shape.size
    if kind == "sphere":
        return np.linalg.norm(local) - size[0]
    if kind == "capsule":
        return np.linalg.norm(local - [0, 0, np.clip(local[2], -size[1], size[1])]) - size[0]
    if kind == "box":
        return np.max(np.abs(local) - size)
    if kind == "cylinder":
        return max(np.hypot(local[0], local[1]) - size[0], abs(local[2]) - size[1])
    if kind == "convex":
        return 0.0 if Delaunay(shape.vertices).find_simplex(local, tol=1e-9) >= 0 else 1.0
    return local[2]


def separation(a, pose_a, b, pose_b, n):
    """h_A(n) + h_B(-n): how far B must move along n to clear A (negative: apart by that)."""
    if a.kind == "halfspace":
        R, p = pose_a
        return support(b, *pose_b, -n)[1] + (p @ n if np.allclose(n, R[:, 2]) else np.inf)
    if b.kind == "halfspace":
        R, p = pose_b
        return support(a, *pose_a, n)[1] - (p @ n if np.allclose(n, -R[:, 2]) else -np.inf)
    return support(a, *pose_a, n)[1] + support(b, *pose_b, -n)[1]


def random_pose(rng, spread):
    return Rotation.random(random_state=rng).as_matrix(), rng.uniform(-spread, spread, 3)


def random_pairs(kind_a, kind_b, seed):
    rng = np.random.default_rng(seed)
    for _ in range(TRIALS):
        (a, coal_a), (b, coal_b) = random_shape(kind_a, rng), random_shape(kind_b, rng)
        pose_a = random_pose(rng, 0.1)
        pose_b = random_pose(rng, 0.8)
        if kind_a == "halfspace":
            pose_b[1][2] = rng.uniform(-0.3, 0.8)  # near the plane: half of them touch it
        yield a, coal_a, pose_a, b, coal_b, pose_b


def coal_distance(coal_a, pose_a, coal_b, pose_b):
    request = coal.DistanceRequest()
    request.enable_signed_distance = True
    request.gjk_tolerance, request.epa_tolerance = 1e-14, 1e-14
    request.gjk_max_iterations, request.epa_max_iterations = 1000, 1000
    result = coal.DistanceResult()
    coal.distance(coal_a, coal.Transform3s(*pose_a), coal_b, coal.Transform3s(*pose_b), request, result)
    return result.min_distance, result.getNearestPoint1(), result.getNearestPoint2()


def supports(shape, R, p, directions):
    """h(n) of the shape for each row of directions (m, 3), unit: vectorised support()."""
    d = directions @ R
    kind, size = shape.kind, shape.size
    if kind == "sphere":
        local = size[0] * d
    elif kind == "capsule":
        local = size[0] * d
        local[:, 2] += np.copysign(size[1], d[:, 2])
    elif kind == "box":
        local = np.where(d >= 0, size, -size)
    elif kind == "cylinder":
        radial = np.maximum(np.hypot(d[:, 0], d[:, 1]), 1e-300)
        local = np.stack([size[0] * d[:, 0] / radial, size[0] * d[:, 1] / radial,
                          np.copysign(size[1], d[:, 2])], axis=1)
    else:
        local = shape.vertices[np.argmax(d @ shape.vertices.T, axis=1)]
    return np.einsum("ij,ij->i", directions, p + local @ R.T)


def global_signed_distance(a, pose_a, b, pose_b, rng):
    """-min over unit n of h_A(n) + h_B(-n), by brute force: the best of 20000
    random directions, refined (Nelder-Mead): an oracle that shares no code
    with the kernels (not for halfspaces)."""
    directions = rng.normal(size=(20000, 3))
    directions /= np.linalg.norm(directions, axis=1)[:, None]
    gaps = supports(a, *pose_a, directions) + supports(b, *pose_b, -directions)

    def gap(n):
        n = n / np.linalg.norm(n)
        return separation(a, pose_a, b, pose_b, n)

    best = min((minimize(gap, start, method="Nelder-Mead", options=dict(xatol=1e-13, fatol=1e-15, maxiter=20000))
                for start in directions[np.argsort(gaps)[:4]]), key=lambda result: result.fun)
    return -best.fun


@pytest.mark.parametrize("kind_a,kind_b", PAIRS)
def test_distance_and_witnesses_certified_and_equal_to_coal(kind_a, kind_b):
    rng = np.random.default_rng(7)
    curved = bool(CURVED_GJK & {kind_a, kind_b})
    separated = penetrating = 0
    for a, coal_a, pose_a, b, coal_b, pose_b in random_pairs(kind_a, kind_b, PAIRS.index((kind_a, kind_b))):
        found = collision.distance(a, pose_a, b, pose_b)
        d, n = found.distance, found.normal
        what = f"{kind_a} {a.size} at {pose_a}, {kind_b} {b.size} at {pose_b}: {found}"
        # the certificate: witnesses on the shapes, |a - b| = |d|, and -g(n) = d (a bracket of the truth)
        assert abs(np.linalg.norm(n) - 1.0) < 1e-12, what
        assert abs(np.linalg.norm(found.point_b - found.point_a) - abs(d)) < 1e-9, what
        on_shape = 1e-4 if curved else 1e-9
        if kind_a != "convex":
            assert excess(a, *pose_a, found.point_a) < on_shape, what
        if kind_b != "convex":
            assert excess(b, *pose_b, found.point_b) < on_shape, what
        assert abs(-separation(a, pose_a, b, pose_b, n) - d) < (1e-4 if curved else 1e-9), what
        if d > 0:
            separated += 1
            assert np.allclose(found.point_b - found.point_a, d * n, atol=1e-9), what
        else:
            penetrating += 1
            assert np.allclose(found.point_a - found.point_b, -d * n, atol=1e-9), what
        # the oracles
        if curved and kind_a != "halfspace":
            assert abs(d - global_signed_distance(a, pose_a, b, pose_b, rng)) < 1e-9, what
            continue
        coal_d, coal_a_point, coal_b_point = coal_distance(coal_a, pose_a, coal_b, pose_b)
        assert abs(d - coal_d) < 1e-9, f"coal: {coal_d}; ours: {what}"
        tolerance = 1e-5 if curved else 1e-9
        assert np.allclose(found.point_a, coal_a_point, atol=tolerance), f"coal: {coal_a_point}; ours: {what}"
        assert np.allclose(found.point_b, coal_b_point, atol=tolerance), f"coal: {coal_b_point}; ours: {what}"
    assert separated >= 3 and penetrating >= 3, (separated, penetrating)


def test_touching_and_coincident_shapes():
    box = collision.box([1.0, 1.0, 1.0])
    touching = collision.distance(box, None, box, (np.eye(3), np.array([1.0, 0.3, 0.2])))
    assert abs(touching.distance) < 1e-12 and abs(abs(touching.normal[0]) - 1.0) < 1e-9
    same = collision.distance(box, None, box, None)
    assert abs(same.distance + 1.0) < 1e-9  # a unit box in itself: moved by 1 along an axis it clears
    sphere = collision.sphere(0.5)
    concentric = collision.distance(sphere, None, sphere, None)
    assert concentric.distance == -1.0 and abs(np.linalg.norm(concentric.normal) - 1.0) < 1e-12


@pytest.mark.parametrize("make,message", [
    (lambda: collision.sphere(-1.0), "positive"),
    (lambda: collision.box([1.0, 0.0, 1.0]), "positive"),
    (lambda: collision.box([1.0, 1.0]), "3 numbers"),
    (lambda: collision.cylinder(0.1, np.nan), "positive finite"),
    (lambda: collision.convex(np.eye(3)), "at least 4"),
    (lambda: collision.convex([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]), "plane"),
    (lambda: collision.distance(collision.halfspace(), None, collision.halfspace(), None), "halfspaces"),
    (lambda: collision.distance(collision.sphere(1.0), (np.eye(3) * 2, np.zeros(3)), collision.sphere(1.0), None),
     "rotation"),
    (lambda: collision.distance(collision.sphere(1.0), (np.eye(3), [np.nan, 0, 0]), collision.sphere(1.0), None),
     "finite"),
])
def test_bad_shapes_and_poses_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def _yaw(angle):
    return Rotation.from_euler("z", angle).as_matrix()


@pytest.mark.parametrize("name,shape_a,shape_b,pose_b,count", [
    ("a box on a box", collision.box([1, 1, 1]), collision.box([1, 1, 1]), (np.eye(3), [0.2, 0.1, 0.999]), 4),
    ("a small box turned on a box", collision.box([1, 1, 1]), collision.box([0.5, 0.5, 0.5]),
     (_yaw(0.3), [0.1, 0.1, 0.749]), 4),
    ("a box on the ground", collision.halfspace(), collision.box([1, 1, 1]), (_yaw(0.7), [0, 0, 0.499]), 4),
    ("a cylinder standing on a box", collision.box([1, 1, 1]), collision.cylinder(0.2, 0.5),
     (np.eye(3), [0, 0, 0.749]), 4),
    ("a capsule lying on a box", collision.box([1, 1, 1]), collision.capsule(0.2, 0.5),
     (Rotation.from_euler("x", np.pi / 2).as_matrix(), [0, 0, 0.699]), 2),
    ("a box on its edge on a box", collision.box([1, 1, 1]), collision.box([1, 1, 1]),
     (Rotation.from_euler("x", np.pi / 4).as_matrix(), [0.1, 0, 0.5 + np.sqrt(0.5) - 1e-4]), 2),
    ("a sphere on a box", collision.box([1, 1, 1]), collision.sphere(0.2), (np.eye(3), [0, 0, 0.699]), 1),
    ("a convex hull's face on a box", collision.box([1, 1, 1]),
     collision.convex([[x, y, z] for x in (-0.3, 0.3) for y in (-0.2, 0.2) for z in (-0.1, 0.1)]),
     (np.eye(3), [0, 0, 0.599]), 4),
])
def test_flat_contacts_carry_patches(name, shape_a, shape_b, pose_b, count):
    """Where flat features touch, the patch's corners (at most 4, spanning
    it), each with its gap along the face normal; curved or pointed contacts
    one point."""
    contacts = collision.contact_points(shape_a, None, shape_b, pose_b, margin=1e-3)
    assert len(contacts.points) == count, (name, contacts)
    np.testing.assert_allclose(contacts.normal, [0, 0, 1], atol=1e-12)
    depth = collision.distance(shape_a, None, shape_b, pose_b).distance
    np.testing.assert_allclose(contacts.gaps, depth, atol=1e-12)
    if count == 4:  # the patch's corners: the contact polygon's extremes, not points inside it
        centre = contacts.points.mean(axis=0)
        assert np.all(np.linalg.norm(contacts.points - centre, axis=1) > 0.1), name
    far = collision.contact_points(shape_a, None, shape_b, (pose_b[0], np.add(pose_b[1], [0, 0, 0.01])), margin=1e-3)
    assert len(far.points) == 0
