"""Collision between convex shapes: the shapes (shapes.py), their support
mappings (support.py), GJK and EPA (gjk.py, epa.py), the signed distance of
a pair with its witness points (narrowphase.py), their contact points
(manifold.py), and the queries from Python (queries.py)."""
from mbs_dynamics.collision.queries import Contacts, Proximity, contact_points, distance
from mbs_dynamics.collision.shapes import KINDS, Shape, box, capsule, convex, cylinder, halfspace, sphere

__all__ = ["KINDS", "Contacts", "Proximity", "Shape", "box", "capsule", "contact_points", "convex", "cylinder",
           "distance", "halfspace", "sphere"]
