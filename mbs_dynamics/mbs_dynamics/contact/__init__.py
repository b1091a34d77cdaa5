"""Contact: constrained dynamics and impacts (constraints.py), the Coulomb solver (coulomb/), and the contact
points of the URDF's collision geometry (geometry.py)."""
