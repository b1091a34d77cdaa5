"""The algorithms on a model: kinematics, RNEA, CRBA, ABA, centroidal quantities, derivatives, the regressor,
joint friction, tracking and differentiation."""
