"""Spatial and Lie algebra: the compiled spatial operators (algebra.py) and SE(3) in matrix form (lie.py)."""
