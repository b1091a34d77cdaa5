"""The simulation core (mbs.Simulation): a falling body against ½ g t², a
passive pendulum's energy under each integrator, Solo-12 dropped onto the
ground settling and standing, TALOS standing on its sole corners (from its
stance, and from a perturbed one under PD actuators), the initial state
inside the joint limits."""
from __future__ import annotations

import mbs_dynamics as mbs
import numpy as np
import pytest

from helpers import BOX, FEET, G, close, rod, solo12_standing
from oracles import robot_path

DT = 1e-3


@pytest.mark.parametrize("integrator", mbs.INTEGRATORS)
def test_a_falling_body_follows_half_g_t_squared(integrator):
    model = mbs.Model.from_urdf_string(BOX, floating_base=True)
    q0 = model.neutral_configuration()
    q0[2] = 10.0
    simulation = mbs.Simulation(model, mbs.World(ground=None), DT, integrator, q=q0)
    heights = []
    for _ in range(1000):
        simulation.step(np.zeros(model.nv))
        heights.append(simulation.q[2])
    t = DT * np.arange(1, 1001)
    if integrator == "semi_implicit_euler":  # v_n = -g n dt, z_n = z0 - g dt² n(n+1)/2: ½ g t² within g dt t / 2
        close(heights, 10.0 - G * DT**2 * np.arange(1, 1001) * np.arange(2, 1002) / 2, 1e-12)
        assert np.max(np.abs(np.array(heights) - (10.0 - 0.5 * G * t**2))) <= 0.5 * G * DT * 1.0 + 1e-12
    else:  # exact for constant acceleration
        close(heights, 10.0 - 0.5 * G * t**2, 1e-12)
    assert simulation.time == pytest.approx(1.0)
    close(simulation.v, [0, 0, 0, 0, 0, -G], 1e-9)


@pytest.mark.parametrize("integrator, drift", [("semi_implicit_euler", 3e-3), ("rk4", 1e-10), ("rkmk4", 1e-10)])
def test_passive_pendulum_energy_stays_within_the_integrators_drift(integrator, drift):
    """A pendulum (1 kg at 0.5 m) released horizontal, 5 s (3 swings): the energy
    error, relative to m g L, of symplectic Euler stays bounded (no trend from
    the first second to the last); RK4's is at its fourth order."""
    model = rod(axis="0 1 0")
    simulation = mbs.Simulation(model, mbs.World(ground=None, joint_limits=False), DT, integrator, q=np.zeros(1))

    def energy():
        return mbs.kinetic_energy(model, simulation.q, simulation.v) + mbs.potential_energy(model, simulation.q)

    start = energy()
    errors, angles = [], []
    for _ in range(5000):
        simulation.step(np.zeros(1))
        errors.append(energy() - start)
        angles.append(simulation.q[0])
    errors = np.abs(errors) / (G * 0.5)
    assert errors.max() < drift, errors.max()
    if integrator == "semi_implicit_euler":  # bounded: the last second no worse than the first, give or take
        assert errors[4000:].max() < 1.5 * errors[:1000].max()
    assert np.max(np.abs(angles)) > 3.0  # it swung through the bottom to the other side


def test_solo12_dropped_on_the_ground_settles_and_stands():
    model, stance = solo12_standing()
    points = tuple(mbs.PointContact(foot) for foot in FEET)
    q0 = stance.copy()
    q0[2] += 0.1  # 10 cm above its standing height
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(friction=0.8), points), DT, q=q0)
    feedforward, _ = mbs.contact_inverse_dynamics(model, stance, np.zeros(model.nv), np.zeros(model.nv),
                                                  list(points))
    joints = slice(6, model.nv)
    lowest = np.inf
    for _ in range(3000):  # the standing torques and a joint PD
        tau = feedforward.copy()
        tau[joints] -= 20.0 * (simulation.q[7:] - stance[7:]) + 0.5 * simulation.v[joints]
        result = simulation.step(tau)
        assert result.converged and result.gaps.min() > -1e-3
        lowest = min(lowest, simulation.q[2])
    assert lowest < stance[2] + 0.01  # it fell and landed
    assert np.abs(simulation.v).max() < 1e-6  # settled
    close(simulation.q[2], stance[2], 2e-2)
    forces = simulation.contact_forces
    close(forces.sum(axis=0), [0, 0, model.total_mass * G], 1e-4)  # the feet carry it
    assert np.all(result.active)


def test_talos_standing_on_its_sole_corners_converges_every_step():
    """TALOS on the four corners of each sole, joints resting on their limits
    (knees and arms at 0) with joint friction, under the standing torques and
    a joint PD: each step meets the solver's 1e-10 m/s, in a few sweeps (a
    joint's limit and friction were once two parallel rows, on which
    Gauss-Seidel cycled: 200 sweeps a step from about 0.3 s on)."""
    model = mbs.Model.from_urdf_file(robot_path("talos"), floating_base=True)
    corners = [(x, y, 0.0) for x in (-0.1, 0.1) for y in (-0.065, 0.065)]
    points = tuple(mbs.PointContact(sole, c) for sole in ("left_sole_link", "right_sole_link") for c in corners)
    q0 = model.neutral_configuration()
    q0[2] -= min((mbs.frame_pose(model, q0, p.frame) @ np.r_[p.point, 1.0])[2] for p in points)
    zero = np.zeros(model.nv)
    feedforward = mbs.contact_inverse_dynamics(model, q0, zero, zero, list(points), friction=1.0)[0]
    inertia = np.diag(mbs.mass_matrix(model, q0))[6:]
    omega = 2 * np.pi * 5.0
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(friction=1.0), points), DT, q=q0)
    assert not mbs.simulation.outside_limits(model, q0)
    at_limits = (q0 == model.lower_position_limit) | (q0 == model.upper_position_limit)
    assert np.sum(at_limits) >= 6 and np.sum(model.friction > 0) >= 20  # what made the rows parallel
    sweeps = []
    for _ in range(2000):
        tau = feedforward.copy()
        tau[6:] -= omega**2 * inertia * (simulation.q[7:] - q0[7:]) + 2 * omega * inertia * simulation.v[6:]
        result = simulation.step(tau)
        assert result.converged, f"t = {simulation.time:.3f}: residual {result.residual:.2g}"
        sweeps.append(result.iterations)
    assert np.mean(sweeps) < 10 and max(sweeps) <= 3 * 8
    assert np.abs(mbs.difference(model, q0, simulation.q)).max() < 1e-5 and result.limits_active >= 6


def test_talos_standing_from_a_perturbed_stance_keeps_every_contact_rigid():
    """TALOS on the four corners of each sole under the standing torques and
    implicit PD actuators (legs stiff enough to hold it up), from its stance
    with every joint moved by up to 0.02 rad: its soles settle tilted, their
    corners at different depths, pushed out at different rates. No step is
    softened (each was, before the tangential rows took the rigid correction's
    biases: 244 of the first 1000, the rigid solve stalling 5e-9 m/s above a
    solution that did not exist), the soles stay where they settled, and the
    records obey the law: Signorini, the cone, and the sticking corners
    moving with the correction (velocity[1:] + tangent_bias = 0)."""
    model = mbs.Model.from_urdf_file(robot_path("talos"), floating_base=True)
    soles = ("left_sole_link", "right_sole_link")
    corners = [(x, y, 0.0) for x in (-0.1, 0.1) for y in (-0.065, 0.065)]
    points = tuple(mbs.PointContact(sole, c) for sole in soles for c in corners)
    stance = model.neutral_configuration()
    stance[2] -= min((mbs.frame_pose(model, stance, p.frame) @ np.r_[p.point, 1.0])[2] for p in points)
    zero = np.zeros(model.nv)
    feedforward = mbs.contact_inverse_dynamics(model, stance, zero, zero, list(points), friction=1.0)[0]
    joints = list(model.joint_names[1:])
    legs = np.array(["leg" in joint for joint in joints])
    inertia = np.diag(mbs.mass_matrix(model, stance))[6:]
    omega = 2 * np.pi * 5.0
    stiffness, damping = np.where(legs, 2000.0, omega**2 * inertia), np.where(legs, 50.0, 2 * omega * inertia)
    q0 = stance.copy()
    q0[7:] += np.random.default_rng(5).uniform(-0.02, 0.02, model.nq - 7)
    world = mbs.World(mbs.Ground(friction=1.0), points, joint_limits=False, joint_damping=False, joint_friction=False)
    simulation = mbs.Simulation(model, world, DT, q=q0, actuators=mbs.Actuators(joints, stiffness, damping))
    targets = np.zeros(model.nv)
    targets[6:] = stance[7:]
    simulation.set_targets(positions=targets)
    softened = unconverged = 0
    settled = None
    for second in range(3):
        result = simulation.step(feedforward, steps=1000)
        softened, unconverged = softened + result.softened_steps, unconverged + result.unconverged_steps
        sole_positions = np.array([mbs.frame_pose(model, simulation.q, sole)[:3, 3] for sole in soles])
        if second == 0:
            settled = sole_positions
    assert unconverged == 0 and softened == 0, (unconverged, softened)
    assert np.abs(sole_positions - settled).max() < 1e-5
    assert simulation.q[2] > stance[2] - 1e-3  # upright
    contacts = result.contacts[:, 0]
    assert np.all(contacts["in_solver"])
    normal, tangential = contacts["impulse"][:, 0], np.linalg.norm(contacts["impulse"][:, 1:], axis=1)
    assert normal.min() >= 0.0 and np.abs(normal * (contacts["velocity"][:, 0] + contacts["bias"])).max() < 1e-12
    assert np.all(tangential <= normal * (1 + 1e-12))
    sticking = (normal > 0.0) & (tangential < normal * (1 - 1e-9))
    assert sticking.sum() >= 4  # (the others carry nothing: the rows of a sole's corners are redundant)
    slip = contacts["velocity"][:, 1:] + contacts["tangent_bias"]
    assert np.abs(slip[sticking]).max() < 1e-10


def test_initial_state_lies_within_the_joint_limits():
    model = mbs.Model.from_urdf_file(robot_path("panda"))
    q = mbs.simulation.initial_configuration(model)
    assert np.all(q >= model.lower_position_limit) and np.all(q <= model.upper_position_limit)
    joint4 = model.q_index("panda_joint4")  # limits [-3.07, -0.07]: 0 is outside, the middle is taken
    close(q[joint4], 0.5 * (model.lower_position_limit[joint4] + model.upper_position_limit[joint4]), 1e-12)
    q = mbs.simulation.initial_configuration(model, {"panda_joint1": 0.5})
    assert q[model.q_index("panda_joint1")] == 0.5
    with pytest.raises(ValueError, match=r"outside the joint limits: \['panda_joint4'\]"):
        mbs.simulation.initial_configuration(model, {"panda_joint4": 0.5})
    with pytest.raises(ValueError, match="no joint 'elbow'"):
        mbs.simulation.initial_configuration(model, {"elbow": 0.5})
    with pytest.raises(ValueError, match="need a ground"):
        mbs.World(ground=None, contact_points=(mbs.PointContact("panda_hand"),))


def test_a_limit_and_damping_act_in_the_simulation():
    """The pendulum of test_friction, with damping and a limit, under RK4: it
    swings freely (RK4 steps) until it meets the limit, then rests on it."""
    model = rod(axis="0 1 0", damping=0.05, lower=-0.3, upper=0.3)
    simulation = mbs.Simulation(model, mbs.World(ground=None), DT, "rk4", q=np.zeros(1))
    for _ in range(3000):
        simulation.step(np.zeros(1))
        assert abs(simulation.q[0]) <= 0.3 + 1e-9
    assert abs(abs(simulation.q[0]) - 0.3) < 1e-9 and abs(simulation.v[0]) < 1e-9


def test_a_new_world_takes_effect_and_its_contact_forces_are_its_own():
    """The simulator changes ground and contact points at run time: the forces
    reported until the next step are those of the new points (none yet), not
    the last step's of the old ones."""
    model, stance = solo12_standing()
    feet = tuple(mbs.PointContact(foot) for foot in FEET)
    simulation = mbs.Simulation(model, mbs.World(mbs.Ground(), feet), q=stance)
    simulation.step(np.zeros(model.nv))
    assert simulation.contact_forces.shape == (4, 3) and simulation.contact_forces[:, 2].sum() > 0
    simulation.set_world(mbs.World(mbs.Ground(height=-0.5), feet[:2]))
    assert simulation.contact_forces.shape == (2, 3) and not simulation.contact_forces.any()
    q_before = simulation.q.copy()
    simulation.step(np.zeros(model.nv))
    assert simulation.contact_forces.shape == (2, 3) and not simulation.contact_forces.any()  # the ground fell away
    assert simulation.q[2] < q_before[2]  # and the robot falls
