"""Simulation: the state stepped with contact and actuators (simulation.py:
Simulation, World, Actuators), a simulation described by plain values
(scene.py), sensors (sensors.py) and the compiled step (stepping/). The
names of simulation.py are those of ``mbs.simulation``."""
from mbs_dynamics.simulation.simulation import (
    DEFAULT_INTEGRATOR,
    MARGIN,
    PAIRS_PER_PASS,
    Actuators,
    Penetration,
    Simulation,
    World,
    body_links,
    contact_spheres,
    initial_configuration,
    lifted_clear,
    outside_limits,
    penetration,
)

__all__ = ["DEFAULT_INTEGRATOR", "MARGIN", "PAIRS_PER_PASS", "Actuators", "Penetration", "Simulation", "World",
           "body_links", "contact_spheres", "initial_configuration", "lifted_clear", "outside_limits", "penetration"]
