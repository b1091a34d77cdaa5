"""The step's result records through the public API (Simulation.last): every
point-obstacle pair's impulses, its contact point's velocity after the step
and its normal bias, from which ContactBench's metrics of the Coulomb law
follow (Signorini's complementarity, the cone violation, the gap to maximum
dissipation) on a box resting on the ground, on a table, and sliding; the
contact velocities against the box's own motion (frame kinematics)."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest

from helpers import HALF, box

TOLERANCE = 1e-10  # the solver's, m/s
CORNERS = tuple(mbs.PointContact("box", (sx * HALF, sy * HALF, sz * HALF))
                for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1))
TABLE = mbs.Box(size=(1.0, 1.0, 0.5), position=(5.0, 0.0, 0.25), friction=0.8)


def coulomb_metrics(result, world: mbs.World) -> dict:
    """ContactBench's metrics over the pairs in the solver: the Signorini
    residual |λ_n (u_n + b)| and the most negative u_n + b and λ_n, the cone
    violation |λ_t| - μ λ_n, and the gap to maximum dissipation
    λ_t . u_t + μ λ_n |u_t| (zero where the friction opposes the sliding at
    its bound, or nothing slides)."""
    contacts = result.contacts
    friction = np.broadcast_to(world.obstacles["friction"], contacts.shape)
    held = contacts["in_solver"]
    impulse, velocity, bias, mu = contacts["impulse"][held], contacts["velocity"][held], contacts["bias"][held], \
        friction[held]
    normal = velocity[:, 0] + bias
    sliding = np.linalg.norm(velocity[:, 1:], axis=1)
    return {"pairs": int(held.sum()),
            "signorini": float(np.max(np.abs(impulse[:, 0] * normal), initial=0.0)),
            "lowest_normal_velocity": float(np.min(normal, initial=0.0)),
            "lowest_normal_impulse": float(np.min(impulse[:, 0], initial=0.0)),
            "cone": float(np.max(np.linalg.norm(impulse[:, 1:], axis=1) - mu * impulse[:, 0], initial=0.0)),
            "dissipation": float(np.max(np.abs(np.einsum("ij,ij->i", impulse[:, 1:], velocity[:, 1:])
                                               + mu * impulse[:, 0] * sliding), initial=0.0)),
            "sliding": float(np.max(sliding, initial=0.0))}


def corner_velocities(model, q, v) -> np.ndarray:
    """(8, 3) the world velocities of the box's corners at (q, v), from its frame's hybrid twist."""
    twist = mbs.frame_velocity(model, q, v, "box", "hybrid")
    pose = mbs.frame_pose(model, q, "box")
    offsets = np.array([pose[:3, :3] @ corner.point for corner in CORNERS])
    return twist[3:] + np.cross(twist[:3], offsets)


def run(world: mbs.World, position, velocity, steps: int, check) -> None:
    model = box()
    q = model.neutral_configuration()
    q[:3] = position
    v = np.zeros(6)
    v[3:] = velocity  # the base's body twist: [w; u], the box unturned
    simulation = mbs.Simulation(model, world, 1e-3, q=q, v=v, tolerance=TOLERANCE)
    for _ in range(steps):
        q_before = simulation.q.copy()
        result = simulation.step()
        assert result.converged and result.steps == 1
        check(result, coulomb_metrics(result, world))
        # each pair's velocity is its corner's (radius 0) after the step along the pair's axes: the rows are
        # taken at the step's start
        corners = corner_velocities(model, q_before, result.v)
        for k, o in zip(*np.nonzero(result.contacts["in_solver"])):
            along = result.contacts["velocity"][k, o]
            assert abs(along[0] - corners[k, 2]) < 1e-12  # both obstacles' normal is world z
            assert abs(np.hypot(along[1], along[2]) - np.hypot(*corners[k, :2])) < 1e-12


def at_rest(expected_obstacle: int):
    def check(result, metrics):
        assert metrics["pairs"] == 4 and result.contacts["in_solver"][:, expected_obstacle].sum() == 4
        assert metrics["signorini"] < 1e-12 and metrics["lowest_normal_velocity"] > -TOLERANCE
        assert metrics["lowest_normal_impulse"] >= 0.0 and metrics["cone"] <= 1e-15
        assert metrics["dissipation"] < 1e-12 and metrics["sliding"] < TOLERANCE
        # the obstacle carries the weight (2 kg); every obstacle's impulses are reported
        weight = result.contacts["impulse"][:, expected_obstacle, 0].sum() / 1e-3
        assert weight == pytest.approx(2.0 * 9.81, rel=1e-6)
        assert np.all(result.contacts["impulse"][:, 1 - expected_obstacle] == 0.0)
        assert np.allclose(result.forces.sum(axis=0), (0.0, 0.0, 2.0 * 9.81), rtol=1e-6, atol=1e-6)
    return check


def test_a_box_resting_on_the_ground_obeys_the_coulomb_law_exactly():
    world = mbs.World(ground=mbs.Ground(friction=0.5), contact_points=CORNERS, boxes=(TABLE,))
    run(world, (0.0, 0.0, HALF), (0.0, 0.0, 0.0), 200, at_rest(0))


def test_a_box_resting_on_a_table_reports_the_tables_impulses():
    """The table is the second obstacle: its impulses were not reported before."""
    world = mbs.World(ground=mbs.Ground(friction=0.5), contact_points=CORNERS, boxes=(TABLE,))
    run(world, (5.0, 0.0, 0.5 + HALF), (0.0, 0.0, 0.0), 200, at_rest(1))


def test_a_sliding_box_dissipates_at_the_bound_of_its_cone():
    """Sliding at 1 m/s with μ = 0.5: the friction at the cone's bound and
    opposed to the sliding (maximum dissipation), until it stops (after
    v0 / (μ g) = 0.2 s)."""
    world = mbs.World(ground=mbs.Ground(friction=0.5), contact_points=CORNERS)
    slid = []

    def check(result, metrics):
        assert metrics["pairs"] == 4
        assert metrics["signorini"] < 1e-12 and metrics["lowest_normal_velocity"] > -TOLERANCE
        assert metrics["cone"] < 1e-12 and metrics["dissipation"] < 1e-12
        slid.append(metrics["sliding"])

    run(world, (0.0, 0.0, HALF), (1.0, 0.0, 0.0), 300, check)
    assert slid[0] == pytest.approx(1.0 - 0.5 * 9.81 * 1e-3, rel=1e-9)  # the first step's deceleration, mu g dt
    assert min(slid[:190]) > 0.01 and max(slid[220:]) < TOLERANCE  # slides, then sticks
