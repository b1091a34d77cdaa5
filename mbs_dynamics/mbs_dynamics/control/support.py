"""Where the centre of mass can rest: the support polygon of the contacts'
held points (point feet and sole corners, their convex hull in the ground
plane, the plane normal to gravity), and the point of it nearest a CoM
reference outside. A standing robot cannot hold its CoM outside: the
weight's moment about the polygon's edge tips it over whatever the
contact forces (they push, within their cones, only at the points). The
whole_body_controller node holds such a reference at that nearest point."""
from __future__ import annotations

import numpy as np
from scipy.spatial import ConvexHull, QhullError


class SupportPolygon:
    """The convex hull of `points` (k, 3), world, projected along gravity.
    vertices (m, 2) counterclockwise in `axes` (2, 3), two unit vectors
    normal to gravity. ValueError when the points span no area (fewer than
    three, or all on one line)."""

    def __init__(self, points, gravity):
        gravity = np.asarray(gravity, dtype=float)
        if not np.linalg.norm(gravity) > 0.0:
            raise ValueError("without gravity there is no support polygon")
        down = gravity / np.linalg.norm(gravity)
        helper = np.eye(3)[np.argmin(np.abs(down))]
        first = np.cross(down, helper)
        first /= np.linalg.norm(first)
        self.axes = np.array([first, np.cross(down, first)])
        planar = np.asarray(points, dtype=float) @ self.axes.T
        try:
            hull = ConvexHull(planar)
        except (QhullError, ValueError):
            raise ValueError(f"the {len(planar)} contact point(s) span no area: no support polygon") from None
        self.vertices = planar[hull.vertices]
        self._equations = hull.equations  # n·x + d <= 0 inside, n of unit length

    def nearest(self, point) -> tuple[np.ndarray, float]:
        """(the point of the polygon's prism along gravity nearest `point`,
        its distance from the polygon, 0 inside): moved in the ground plane
        only, its height along gravity kept."""
        point = np.asarray(point, dtype=float)
        planar = self.axes @ point
        if np.max(self._equations[:, :2] @ planar + self._equations[:, 2]) <= 0.0:
            return point, 0.0
        best, distance = planar, np.inf
        for start, end in zip(self.vertices, np.roll(self.vertices, -1, axis=0)):
            edge = end - start
            s = min(max(np.dot(planar - start, edge) / np.dot(edge, edge), 0.0), 1.0)
            candidate = start + s * edge
            gap = np.linalg.norm(planar - candidate)
            if gap < distance:
                best, distance = candidate, gap
        return point + self.axes.T @ (best - planar), float(distance)


def held_points(contacts) -> np.ndarray | None:
    """The world points the contacts hold (a point contact's point, a sole's
    four corners), from their references; None while one has none yet (its
    reference is taken at its first cycle)."""
    points = []
    for contact in contacts:
        if contact.position is None or contact.rotation is None:
            return None
        if contact.kind == "surface":
            points.extend(contact.rotation @ corner + contact.position for corner in contact.corners)
        else:
            points.append(contact.position)
    return np.array(points).reshape(-1, 3)
