"""What the robot's contact points meet: obstacles, each an OBSTACLE record
(records.py) of a kind with one distance function. A new kind of obstacle
is a class that fills the record, a distance function and its branch in
obstacle_distance."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from mbs_dynamics.multibody.model import plane_basis
from mbs_dynamics.simulation.stepping.records import OBSTACLE, new_record
from mbs_dynamics.spatial.lie import quaternion_to_matrix

# Obstacle kinds (OBSTACLE.kind).
PLANE, BOX = 0, 1


def _check_surface(friction, restitution) -> None:
    if not (np.isfinite(friction) and friction >= 0.0):
        raise ValueError(f"friction must be finite and >= 0, got {friction!r}")
    if not 0.0 <= restitution <= 1.0:
        raise ValueError(f"restitution must be in [0, 1], got {restitution!r}")


def _frozen_records(**values) -> np.ndarray:
    records = new_record(OBSTACLE, (1,), **values)
    records.setflags(write=False)
    return records


@dataclass(frozen=True)
class Ground:
    """The plane {x : normal . x = height} (world), with the Coulomb friction
    coefficient and the restitution of the robot's contacts with it."""

    height: float = 0.0
    normal: tuple = (0.0, 0.0, 1.0)
    friction: float = 1.0
    restitution: float = 0.0

    def __post_init__(self):
        normal = np.asarray(self.normal, dtype=float)
        if normal.shape != (3,) or not np.all(np.isfinite(normal)) or np.linalg.norm(normal) < 1e-12:
            raise ValueError(f"ground normal must be a nonzero 3-vector, got {self.normal!r}")
        if not np.isfinite(self.height):
            raise ValueError(f"ground height must be finite, got {self.height!r}")
        _check_surface(self.friction, self.restitution)
        normal = normal / np.linalg.norm(normal)
        tangents = plane_basis(normal)
        object.__setattr__(self, "records", _frozen_records(
            kind=PLANE, friction=self.friction, restitution=self.restitution, centre=self.height * normal,
            axes=[tangents[0], tangents[1], normal]))

    @property
    def record(self) -> np.void:
        """Its OBSTACLE record."""
        return self.records[0]

    @property
    def contact_axes(self) -> np.ndarray:
        """Rows (n, t1, t2): the unit normal and two tangents, t1 x t2 = n."""
        return self.record["axes"][[2, 0, 1]]


@dataclass(frozen=True)
class Box:
    """A static box (a step, a table): `size` (full extents along its axes, m),
    its centre at `position` and its axes turned by the unit quaternion
    `orientation` (x, y, z, w), world; friction and restitution of the robot's
    contacts with it."""

    size: tuple
    position: tuple = (0.0, 0.0, 0.0)
    orientation: tuple = (0.0, 0.0, 0.0, 1.0)
    friction: float = 1.0
    restitution: float = 0.0

    def __post_init__(self):
        size, position = np.asarray(self.size, dtype=float), np.asarray(self.position, dtype=float)
        orientation = np.asarray(self.orientation, dtype=float)
        if size.shape != (3,) or not np.all(np.isfinite(size)) or np.any(size <= 0):
            raise ValueError(f"box size must be 3 positive numbers, got {self.size!r}")
        if position.shape != (3,) or not np.all(np.isfinite(position)):
            raise ValueError(f"box position must be 3 finite numbers, got {self.position!r}")
        if orientation.shape != (4,) or not np.all(np.isfinite(orientation)) \
                or abs(np.linalg.norm(orientation) - 1.0) > 1e-6:
            raise ValueError(f"box orientation must be a unit quaternion (x, y, z, w), got {self.orientation!r}")
        _check_surface(self.friction, self.restitution)
        object.__setattr__(self, "records", _frozen_records(
            kind=BOX, friction=self.friction, restitution=self.restitution, centre=position,
            axes=quaternion_to_matrix(*orientation).T, half_extents=size / 2))

    @property
    def record(self) -> np.void:
        """Its OBSTACLE record."""
        return self.records[0]


# The ground of contact_step when none is given (and of a Simulation without one): built once.
DEFAULT_GROUND = Ground()


def obstacle_records(obstacles) -> np.ndarray:
    """The OBSTACLE records (m,) of Ground and Box objects, in their order;
    read-only (one obstacle's: built with it)."""
    if len(obstacles) == 1:
        return obstacles[0].records
    records = np.array([obstacle.record for obstacle in obstacles], dtype=OBSTACLE).reshape(len(obstacles))
    records.setflags(write=False)
    return records


@njit(cache=True, inline="always")
def local_coordinates(obstacle, x0, x1, x2):
    """The world point x in the obstacle's axes, about its centre."""
    axes, centre = obstacle.axes, obstacle.centre
    d0, d1, d2 = x0 - centre[0], x1 - centre[1], x2 - centre[2]
    return (axes[0, 0] * d0 + axes[0, 1] * d1 + axes[0, 2] * d2,
            axes[1, 0] * d0 + axes[1, 1] * d1 + axes[1, 2] * d2,
            axes[2, 0] * d0 + axes[2, 1] * d1 + axes[2, 2] * d2)


@njit(cache=True, inline="always")
def plane_distance(obstacle, x0, x1, x2):
    """(gap, n0, n1, n2): the height of x above the plane, and its normal."""
    axes = obstacle.axes
    _, _, height = local_coordinates(obstacle, x0, x1, x2)
    return height, axes[2, 0], axes[2, 1], axes[2, 2]


@njit(cache=True, inline="always")
def box_distance(obstacle, x0, x1, x2):
    """(gap, n0, n1, n2): outside the box, the distance of x from its nearest
    point and the direction from there; inside it, minus the depth below the
    nearest face and that face's normal."""
    axes, half = obstacle.axes, obstacle.half_extents
    l0, l1, l2 = local_coordinates(obstacle, x0, x1, x2)
    h0, h1, h2 = half[0], half[1], half[2]
    e0, e1, e2 = l0 - min(max(l0, -h0), h0), l1 - min(max(l1, -h1), h1), l2 - min(max(l2, -h2), h2)
    outside = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    if outside > 0.0:
        m0, m1, m2 = e0 / outside, e1 / outside, e2 / outside
        return (outside, m0 * axes[0, 0] + m1 * axes[1, 0] + m2 * axes[2, 0],
                m0 * axes[0, 1] + m1 * axes[1, 1] + m2 * axes[2, 1],
                m0 * axes[0, 2] + m1 * axes[1, 2] + m2 * axes[2, 2])
    s0, s1, s2 = h0 - abs(l0), h1 - abs(l1), h2 - abs(l2)
    axis, depth, side = 0, s0, l0
    if s1 < depth:
        axis, depth, side = 1, s1, l1
    if s2 < depth:
        axis, depth, side = 2, s2, l2
    sign = 1.0 if side >= 0.0 else -1.0
    return -depth, sign * axes[axis, 0], sign * axes[axis, 1], sign * axes[axis, 2]


@njit(cache=True, inline="always")
def obstacle_distance(obstacle, x0, x1, x2):
    """(gap, n0, n1, n2): the signed distance of the world point x from the
    obstacle (negative inside) and the obstacle's outward unit normal there,
    by the distance function of its kind."""
    if obstacle.kind == PLANE:
        return plane_distance(obstacle, x0, x1, x2)
    return box_distance(obstacle, x0, x1, x2)


@njit(cache=True)
def sphere_gaps(centres, radii, obstacles, gaps):
    """gaps (k, m) = the signed distance of each sphere (centres (k, 3), radii
    (k,)) from each obstacle, as the step measures it."""
    for k in range(centres.shape[0]):
        for o in range(obstacles.shape[0]):
            gap, _, _, _ = obstacle_distance(obstacles[o], centres[k, 0], centres[k, 1], centres[k, 2])
            gaps[k, o] = gap - radii[k]
