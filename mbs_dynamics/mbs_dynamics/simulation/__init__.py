"""Simulation: the state stepped with contact and actuators (simulation.py:
Simulation, World, Actuators), free objects (objects.py), a state
consistent with the world (placement.py), a simulation described by plain
values (scene.py), sensors (sensors.py), parallel rollouts (rollout.py) and
the compiled step (stepping/).
The names here are those of ``mbs.simulation``."""
from mbs_dynamics.simulation.objects import WorldObject
from mbs_dynamics.simulation.placement import Penetration, body_links, lifted_clear, penetration
from mbs_dynamics.simulation.simulation import (
    DEFAULT_INTEGRATOR,
    MARGIN,
    PAIRS_PER_PASS,
    Actuators,
    Simulation,
    World,
    contact_spheres,
    initial_configuration,
    outside_limits,
)

__all__ = ["DEFAULT_INTEGRATOR", "MARGIN", "PAIRS_PER_PASS", "Actuators", "Penetration", "Simulation", "World",
           "WorldObject", "body_links", "contact_spheres", "initial_configuration", "lifted_clear", "outside_limits",
           "penetration"]
