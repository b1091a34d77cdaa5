"""Queries from Python: the signed distance of two shapes with its witnesses
(distance) and their contact points (contact_points), each shape placed at
a pose (rotation, translation): world <- shape."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from mbs_dynamics.collision.gjk import Placed
from mbs_dynamics.collision.manifold import MANIFOLD_CANDIDATES, contact_manifold, new_manifold_work
from mbs_dynamics.collision.narrowphase import new_query_work, shape_distance
from mbs_dynamics.collision.shapes import Shape, shape_set


@dataclass(frozen=True)
class Proximity:
    """Of two shapes: their signed distance (negative: penetration), the unit
    normal from the first to the second, and a witness point on each
    (world): the nearest points, or where they penetrate, each one's deepest
    point inside the other."""

    distance: float
    normal: np.ndarray
    point_a: np.ndarray
    point_b: np.ndarray


@dataclass(frozen=True)
class Contacts:
    """Where two shapes touch: the points (k, 3) midway between them (world),
    each one's gap along the normal (k,; negative: penetration) and the unit
    normal (3,) from the first shape to the second."""

    points: np.ndarray
    gaps: np.ndarray
    normal: np.ndarray


def _pose(pose, what: str) -> tuple[np.ndarray, np.ndarray]:
    if pose is None:
        return np.eye(3), np.zeros(3)
    rotation, translation = (np.asarray(x, dtype=float) for x in pose)
    if rotation.shape != (3, 3) or translation.shape != (3,) or not (
            np.all(np.isfinite(rotation)) and np.all(np.isfinite(translation))):
        raise ValueError(f"{what} must be (rotation (3, 3), translation (3,)), finite")
    if np.abs(rotation @ rotation.T - np.eye(3)).max() > 1e-9 or np.linalg.det(rotation) < 0:
        raise ValueError(f"{what}'s rotation is not a rotation matrix")
    return np.ascontiguousarray(rotation), np.ascontiguousarray(translation)


def _placed_pair(shape_a: Shape, pose_a, shape_b: Shape, pose_b):
    if shape_a.kind == "halfspace" and shape_b.kind == "halfspace":
        raise ValueError("two halfspaces have no distance")
    (R_a, p_a), (R_b, p_b) = _pose(pose_a, "pose_a"), _pose(pose_b, "pose_b")
    return shape_set((shape_a, shape_b), (-1, -1), (np.eye(3), np.eye(3)), (np.zeros(3), np.zeros(3))), \
        R_a, p_a, R_b, p_b


@njit(cache=True)
def _distance_kernel(shapes, R_a, p_a, R_b, p_b, work):
    return shape_distance(Placed(shapes.shapes[0], R_a, p_a), Placed(shapes.shapes[1], R_b, p_b), shapes, work)


@njit(cache=True)
def _contacts_kernel(shapes, R_a, p_a, R_b, p_b, margin, work, manifold_work, locations, gaps):
    a, b = Placed(shapes.shapes[0], R_a, p_a), Placed(shapes.shapes[1], R_b, p_b)
    distance, normal, point_a, point_b = shape_distance(a, b, shapes, work)
    if distance > margin:
        return 0, normal
    return contact_manifold(a, b, shapes, distance, normal, point_a, point_b, margin, manifold_work, locations, gaps)


def distance(shape_a: Shape, pose_a, shape_b: Shape, pose_b) -> Proximity:
    """The Proximity of two shapes placed at poses (rotation, translation;
    None: the identity)."""
    shapes, R_a, p_a, R_b, p_b = _placed_pair(shape_a, pose_a, shape_b, pose_b)
    d, n, a, b = _distance_kernel(shapes, R_a, p_a, R_b, p_b, new_query_work())
    return Proximity(float(d), np.array(n), np.array(a), np.array(b))


def contact_points(shape_a: Shape, pose_a, shape_b: Shape, pose_b, margin: float = 0.0) -> Contacts:
    """The Contacts of two shapes nearer each other than margin (m): none
    (zero points) when farther."""
    shapes, R_a, p_a, R_b, p_b = _placed_pair(shape_a, pose_a, shape_b, pose_b)
    locations, gaps = np.zeros((MANIFOLD_CANDIDATES, 3)), np.zeros(MANIFOLD_CANDIDATES)
    count, n = _contacts_kernel(shapes, R_a, p_a, R_b, p_b, float(margin), new_query_work(), new_manifold_work(),
                                locations, gaps)
    return Contacts(locations[:count].copy(), gaps[:count].copy(), np.array(n))
