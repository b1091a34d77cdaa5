"""Collision between convex shapes: the shapes (shapes.py), their support
mappings (support.py), GJK and EPA (gjk.py, epa.py) and the signed distance
of a pair with its witness points (narrowphase.py)."""
from mbs_dynamics.collision.narrowphase import Proximity, distance
from mbs_dynamics.collision.shapes import KINDS, Shape, box, capsule, convex, cylinder, halfspace, sphere

__all__ = ["KINDS", "Proximity", "Shape", "box", "capsule", "convex", "cylinder", "distance", "halfspace", "sphere"]
