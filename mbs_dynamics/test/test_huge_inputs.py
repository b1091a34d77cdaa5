"""Finite but huge inputs (a velocity of 1e200 squares to inf): no algorithm
returns a NaN or an inf; each raises a ValueError that says the inputs are too
large, which the nodes turn into a dropped message or a refused request."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest

from oracles import robot_path

HUGE = 1e200


def algorithms(model, q, v, a):
    """name -> a call of every public algorithm that takes these inputs."""
    frame = model.frame_names[-1]
    feet = [mbs.PointContact(frame)]
    calls = {
        "inverse_dynamics": lambda: mbs.inverse_dynamics(model, q, v, a),
        "inverse_dynamics spatial": lambda: mbs.inverse_dynamics(model, q, v, a, representation="spatial"),
        "inverse_dynamics hybrid": lambda: mbs.inverse_dynamics(model, q, v, a, representation="hybrid"),
        "inverse_dynamics batch": lambda: mbs.inverse_dynamics(model, np.tile(q, (3, 1)), np.tile(v, (3, 1)),
                                                               np.tile(a, (3, 1))),
        "nonlinear_effects": lambda: mbs.nonlinear_effects(model, q, v),
        "forward_dynamics": lambda: mbs.forward_dynamics(model, q, v, a),
        "forward_dynamics batch": lambda: mbs.forward_dynamics(model, np.tile(q, (2, 1)), np.tile(v, (2, 1)),
                                                               np.tile(a, (2, 1))),
        "centroidal_momentum": lambda: mbs.centroidal_momentum(model, q, v),
        "centroidal_state": lambda: mbs.centroidal_state(model, q, v),
        "kinetic_energy": lambda: mbs.kinetic_energy(model, q, v),
        "frame_velocity": lambda: mbs.frame_velocity(model, q, v, frame, "hybrid"),
        "frame_acceleration": lambda: mbs.frame_acceleration(model, q, v, a, frame, "spatial"),
        "inverse_dynamics_derivatives": lambda: mbs.inverse_dynamics_derivatives(model, q, v, a),
        "forward_dynamics_derivatives": lambda: mbs.forward_dynamics_derivatives(model, q, v, a),
        "inverse_dynamics_rate": lambda: mbs.inverse_dynamics_rate(model, q, v, a, a),
        "integrate": lambda: mbs.integrate(model, q, v * 1e108, 1.0),
        "contact_step": lambda: mbs.contact_step(model, q, v, a, 1e-3, feet),
        "contact_forward_dynamics": lambda: mbs.contact_forward_dynamics(model, q, v, a, feet),
        "impact": lambda: mbs.impact(model, q, v * 1e108, feet),
        "step rk4": lambda: mbs.step(model, q, v, a, 1e-3, "rk4"),
        "Simulation.step": lambda: mbs.Simulation(model, mbs.World(ground=None), q=q, v=v).step(a),
    }
    if model.floating_base:
        calls["contact_inverse_dynamics"] = lambda: mbs.contact_inverse_dynamics(model, q, v, a, feet)
    return calls


@pytest.mark.parametrize("robot, floating_base", [("panda", False), ("solo12", True)])
@pytest.mark.parametrize("which", ["velocities", "accelerations"])
def test_huge_inputs_raise_instead_of_returning_nan(robot, floating_base, which):
    """On the Panda (a coupled mimic finger: the dense path) and Solo-12 (a floating base)."""
    model = mbs.Model.from_urdf_file(robot_path(robot), floating_base=floating_base)
    q = mbs.simulation.initial_configuration(model)
    v, a = np.zeros(model.nv), np.zeros(model.nv)
    (v if which == "velocities" else a)[:] = HUGE if which == "velocities" else 1e308
    silent = {}
    for name, call in algorithms(model, q, v, a).items():
        try:
            result = call()
        except ValueError as error:
            assert "cannot be computed: the inputs are too large" in str(error) and "overflows" in str(error), \
                (name, str(error))
            assert f"model '{model.name}'" in str(error), (name, str(error))
            continue
        arrays = [np.asarray(x, dtype=float) for x in (result if isinstance(result, tuple) else (result,))
                  if not isinstance(x, list)]
        if not all(np.all(np.isfinite(x)) for x in arrays):
            silent[name] = result
    assert not silent, f"non-finite results without an error: {sorted(silent)}"


def test_the_error_names_the_largest_inputs():
    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    q, v = np.zeros(model.nv), np.full(model.nv, HUGE)
    with pytest.raises(ValueError, match=r"the inverse dynamics of model '\w+' cannot be computed: the inputs are "
                                         r"too large \(\|q\| up to 0, \|v\| up to 1e\+200, \|a\| up to 0\)"):
        mbs.inverse_dynamics(model, q, v, np.zeros(model.nv))


def test_a_diverging_simulation_says_so_instead_of_blaming_the_mass_matrix():
    """An effort of 1e12 once ended in 'singular mass matrix ... massless subtree'."""
    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    simulation = mbs.Simulation(model, mbs.World(ground=None), integrator="semi_implicit_euler")
    tau = np.full(model.nv, 1e12)
    with pytest.raises(ValueError) as error:
        for _ in range(100_000):
            simulation.step(tau)
    assert "too large" in str(error.value) and "singular" not in str(error.value), str(error.value)


def test_reasonable_inputs_far_from_zero_still_compute():
    """The checks refuse overflow, not size: velocities of 1e3 rad/s are fine."""
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    q = mbs.simulation.initial_configuration(model)
    v = np.full(model.nv, 1e3)
    for name, call in algorithms(model, q, v, v).items():
        if name in ("integrate", "impact"):
            continue  # those scale v up by 1e108 on purpose
        call()
