"""The whole-body controller (mbs_dynamics.control) against TSID (a test-only
oracle, like Pinocchio) on the same model, state, tasks and contacts, and
against invariants of its own: the floating-base dynamics with the returned
a, f, tau; the contacts' accelerations; forces inside the pyramids; a lifted
foot carries nothing; bad input refused with its message."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import mbs_dynamics as mbs
from helpers import FEET, SOLES, close, solo12_standing, talos_standing
from oracles import Pair, robot_path

from mbs_dynamics.control import (CenterOfMassTask, FrameTask, OrientationTask, PostureTask, RigidPointContact,
                                  RigidSurfaceContact, WholeBodyController)
from mbs_dynamics.spatial.lie import so3_exp

# TALOS's sole rectangle in the sole frame (TSID's TALOS demos: lxp, lxn, lyp, lyn)
SOLE_CORNERS = np.array([[-0.05, -0.05, 0.0], [-0.05, 0.05, 0.0], [0.10, -0.05, 0.0], [0.10, 0.05, 0.0]])
TOLERANCE = 1e-6
REPOSITORY = Path(__file__).resolve().parents[2]


def perturbed(model, q, rng, scale=0.02):
    """q with the joints moved a little and v small (a state the tasks do not hold)."""
    q = q.copy()
    q[7:] += rng.uniform(-scale, scale, model.nq - 7)
    return q, rng.uniform(-0.1, 0.1, model.nv)


class Scenario:
    """Our controller and TSID's formulation built from the same description."""

    def __init__(self, robot: str, model, contacts, com_offset, base_rotation, frame_tasks=(), torque_limits=True):
        self.robot, self.model = robot, model
        self.controller = WholeBodyController(model, torque_limits=torque_limits)
        self.contacts, self.com_offset, self.base_rotation = contacts, com_offset, base_rotation
        self.frame_tasks = frame_tasks

    def ours(self, q, v):
        c = self.controller
        for kind, frame, kp, reference in self.contacts:
            contact = RigidPointContact(frame, friction=0.6, min_normal_force=1.0, max_normal_force=500.0,
                                        kp=kp, kd=2 * np.sqrt(kp)) if kind == "point" else \
                RigidSurfaceContact(frame, SOLE_CORNERS, friction=0.6, min_normal_force=1.0,
                                    max_normal_force=2000.0, kp=kp, kd=2 * np.sqrt(kp))
            contact.set_reference(reference)
            c.add_contact(contact)
        com = c.add_task(CenterOfMassTask(kp=30.0, kd=8.0, weight=1.0))
        com.set_reference(mbs.center_of_mass(self.model, q) + self.com_offset, velocity=(0.01, 0.0, 0.0),
                          acceleration=(0.0, 0.02, 0.0))
        base = c.add_task(OrientationTask(c.base_frame, kp=20.0, kd=5.0, weight=0.5))
        base.set_reference(self.base_rotation)
        for frame, reference, mask in self.frame_tasks:
            task = c.add_task(FrameTask(frame, kp=15.0, kd=6.0, weight=0.3, mask=mask))
            task.set_reference(reference, twist=(0.0, 0.1, 0.0, 0.02, 0.0, 0.0))
        posture = c.add_task(PostureTask(kp=5.0, kd=3.0, weight=1e-3))
        posture.set_reference(q[7:] + 0.05)
        return c.compute(q, v)

    def tsid(self, q, v):
        """TSID's (a, tau, {contact: force}) in our conventions, from tsid_oracle.py
        in its own environment."""
        pair = Pair(robot_path(self.robot), floating_base=True)
        joints = pair.P[6:, 6:]  # ours = joints @ Pinocchio's, actuated coordinates
        lower, upper = self.controller.acceleration_bounds(self.controller.state(q, v))
        problem = {
            "urdf": robot_path(self.robot), "q": pair.q(q).tolist(), "v": pair.v(v).tolist(),
            "contacts": [{"kind": kind, "frame": frame, "mu": 0.6, "fmin": 1.0,
                          "fmax": 500.0 if kind == "point" else 2000.0, "kp": kp, "kd": 2 * np.sqrt(kp),
                          "corners": SOLE_CORNERS.tolist(), "reference": reference.tolist(),
                          "regularization": 1e-5} for kind, frame, kp, reference in self.contacts],
            "com": {"kp": 30.0, "kd": 8.0, "weight": 1.0,
                    "position": (mbs.center_of_mass(self.model, q) + self.com_offset).tolist(),
                    "velocity": [0.01, 0.0, 0.0], "acceleration": [0.0, 0.02, 0.0]},
            "frames": [{"frame": self.controller.base_frame, "kp": [0, 0, 0, 20.0, 20.0, 20.0],
                        "kd": [0, 0, 0, 5.0, 5.0, 5.0], "mask": [0, 0, 0, 1, 1, 1], "weight": 0.5,
                        "reference": np.block([[self.base_rotation, np.zeros((3, 1))], [0, 0, 0, 1]]).tolist(),
                        "twist": [0.0] * 6}]
            + [{"frame": frame, "kp": [15.0] * 6, "kd": [6.0] * 6, "weight": 0.3,
                "mask": [1, 1, 1, 1, 1, 1] if mask == "pose" else [1, 1, 1, 0, 0, 0],
                "reference": reference.tolist(),
                "twist": [0.02, 0, 0, 0, 0.1, 0]}  # ours [ω; ṗ] = (0, 0.1, 0, 0.02, 0, 0)
               for frame, reference, mask in self.frame_tasks],
            "posture": {"kp": 5.0, "kd": 3.0, "weight": 1e-3,
                        "position": pair.q(np.r_[q[:7], q[7:] + 0.05])[7:].tolist()},
            "torque_limits": bool(self.controller.limits.torque_rows.size),
            "acceleration_lower": (joints.T @ lower).tolist(), "acceleration_upper": (joints.T @ upper).tolist(),
        }
        answer = run_tsid(problem)
        assert answer["status"] == 0, f"TSID's QP: status {answer['status']}"
        forces = {}
        for kind, frame, _, _ in self.contacts:
            f = np.array(answer["forces"][frame])
            if kind == "point":
                forces[frame] = f
            else:  # the corners' local forces to the wrench [n; f] about the frame origin, world axes
                local = np.zeros(6)
                for corner, x in zip(SOLE_CORNERS, f.reshape(4, 3)):
                    local[:3] += np.cross(corner, x)
                    local[3:] += x
                R = mbs.frame_pose(self.model, q, frame)[:3, :3]
                forces[frame] = np.r_[R @ local[:3], R @ local[3:]]
        return pair.P @ np.array(answer["a"]), joints @ np.array(answer["tau"]), forces


def tsid_python():
    """The interpreter of the TSID environment (scripts/setup_venv.sh --test
    makes .venv-tsid), or MBS_TSID_PYTHON."""
    path = os.environ.get("MBS_TSID_PYTHON") or str(REPOSITORY / ".venv-tsid" / "bin" / "python")
    if not os.path.exists(path):
        message = f"no TSID environment at {path} (scripts/setup_venv.sh --test makes it)"
        if os.environ.get("MBS_REQUIRE_ORACLES"):  # CI: a missing oracle fails instead of skipping
            pytest.fail(message)
        pytest.skip(message)
    return path


def run_tsid(problem):
    done = subprocess.run([tsid_python(), str(Path(__file__).with_name("tsid_oracle.py"))],
                          input=json.dumps(problem), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def offset_pose(model, q, frame, dp, dw):
    T = mbs.frame_pose(model, q, frame).copy()
    T[:3, 3] += dp
    T[:3, :3] = so3_exp(dw) @ T[:3, :3]
    return T


def solo_scenario(q, kp=20.0):
    model = solo_scenario.model
    contacts = [("point", foot, kp, offset_pose(model, q, foot, (0.002, -0.001, 0.001), (0, 0, 0)))
                for foot in FEET]
    return Scenario("solo12", model, contacts, np.array([0.01, -0.005, 0.01]), so3_exp([0.02, -0.03, 0.05]))


def talos_scenario(q, kp=20.0):
    model = talos_scenario.model
    contacts = [("surface", sole, kp, offset_pose(model, q, sole, (0.001, 0.002, -0.001), (0.01, -0.01, 0.005)))
                for sole in SOLES]
    hands = [("arm_left_7_link", offset_pose(model, q, "arm_left_7_link", (0.03, 0.02, -0.01), (0.1, 0, 0)),
              "pose"),
             ("arm_right_7_link", offset_pose(model, q, "arm_right_7_link", (0.02, -0.02, 0.03), (0, 0, 0)),
              "position")]
    return Scenario("talos", model, contacts, np.array([0.01, 0.01, -0.02]), so3_exp([0.0, 0.05, 0.0]), hands)


@pytest.fixture(scope="module")
def solo():
    model, q = solo12_standing()
    solo_scenario.model = model
    return model, q


@pytest.fixture(scope="module")
def talos():
    model, q = talos_standing()
    talos_scenario.model = model
    return model, q


def compare(scenario, q, v):
    result = scenario.ours(q, v)
    assert result.feasible, result.message
    a, tau, forces = scenario.tsid(q, v)
    close(result.a, a, TOLERANCE)
    close(result.tau, tau, TOLERANCE)
    for name, force in forces.items():
        close(result.forces[name], force, TOLERANCE)
    return result


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_solo12_four_point_feet_equal_tsid(solo, seed):
    model, q0 = solo
    q, v = perturbed(model, q0, np.random.default_rng(seed))
    compare(solo_scenario(q), q, v)


@pytest.mark.parametrize("seed", [0, 1])
def test_talos_two_soles_equal_tsid(talos, seed):
    model, q0 = talos
    q, v = perturbed(model, q0, np.random.default_rng(seed))
    compare(talos_scenario(q), q, v)


def test_solo12_three_feet_equal_tsid(solo):
    """A foot lifted (its contact removed in both) and TSID still agrees."""
    model, q0 = solo
    q, v = perturbed(model, q0, np.random.default_rng(7))
    scenario = solo_scenario(q)
    scenario.contacts = scenario.contacts[1:]
    compare(scenario, q, v)


def dynamics_residual(controller, q, v, result):
    """M a + h - S^T tau - Σ J^T f for the result (each contact's wrench on
    its frame, world axes about its origin: hybrid Jacobians)."""
    model = controller.model
    generalized = mbs.mass_matrix(model, q) @ result.a + mbs.nonlinear_effects(model, q, v)
    generalized[6:] -= result.tau
    for name, force in result.forces.items():
        J = mbs.frame_jacobian(model, q, name, "hybrid")
        generalized -= (J[3:].T @ force) if force.shape == (3,) else (J.T @ force)
    return generalized


@pytest.mark.parametrize("robot", ["solo", "talos"])
def test_invariants(robot, solo, talos):
    """Without an oracle: the equations of motion hold with the returned a, f,
    tau to 1e-9; contacts accelerate as asked (zero gains: not at all);
    forces within the pyramids and the normal force bounds; torques within
    the URDF limits."""
    model, q0 = solo if robot == "solo" else talos
    q, v = perturbed(model, q0, np.random.default_rng(3))
    scenario = (solo_scenario if robot == "solo" else talos_scenario)(q, kp=0.0)
    result = scenario.ours(q, v)
    assert result.feasible, result.message
    close(dynamics_residual(scenario.controller, q, v, result), np.zeros(model.nv), 1e-9)
    for name, contact in scenario.controller.contacts.items():
        acceleration = mbs.frame_acceleration(model, q, v, result.a, name, "hybrid")
        if contact.kind == "point":
            close(acceleration[3:], np.zeros(3), 1e-7)
            f = result.forces[name]
            assert f[2] >= 1.0 - 1e-7 and max(abs(f[0]), abs(f[1])) <= 0.6 * f[2] + 1e-7  # the pyramid's facets
        else:
            R = mbs.frame_pose(model, q, name)[:3, :3]
            # the sole's local classical acceleration is zero
            close(np.r_[R.T @ acceleration[:3], R.T @ acceleration[3:]], np.zeros(6), 1e-7)
            corners = result.corner_forces[name]
            assert np.all(np.abs(corners[:, :2]) <= 0.6 * corners[:, 2:3] + 1e-7)
            assert corners[:, 2].sum() >= 1.0 - 1e-7
    effort = model.effort_limit[6:]
    assert np.all(np.abs(result.tau) <= effort + 1e-7)


def test_changes_after_a_cycle_reach_the_compiled_tables(talos):
    """The assembly's tables are packed again only for the objects whose
    attributes were assigned since (tasks.Versioned): a CoM reference, a
    sole's gain, a hand task's weight and the posture's reference changed
    after a cycle give the cycle of a controller built with them."""
    model, q0 = talos
    q, v = perturbed(model, q0, np.random.default_rng(4))
    changed, built = talos_scenario(q), talos_scenario(q)
    changed.ours(q, v)

    def change(controller):
        com = next(t for t in controller.tasks if isinstance(t, CenterOfMassTask))
        com.set_reference(com.position + [0.01, -0.02, 0.005])
        controller.contacts[SOLES[0]].kp = 35.0
        next(t for t in controller.tasks if isinstance(t, FrameTask) and t.frame == "arm_left_7_link").set_weight(2.0)
        posture = next(t for t in controller.tasks if isinstance(t, PostureTask))
        posture.set_reference(posture.position - 0.02)

    change(changed.controller)
    built.ours(q, v)  # its first cycle packs what it has, then the same changes
    change(built.controller)
    built.controller._workspaces.clear()
    built.controller._packed_tasks = ()
    q, v = perturbed(model, q0, np.random.default_rng(9), scale=0.005)
    result, expected = changed.controller.compute(q, v), built.controller.compute(q, v)
    assert result.feasible and expected.feasible
    close(result.tau, expected.tau, 1e-9 * max(1.0, np.max(np.abs(expected.tau))))
    unchanged = talos_scenario(q0)
    unchanged.ours(*perturbed(model, q0, np.random.default_rng(4)))
    assert np.max(np.abs(unchanged.controller.compute(q, v).tau - result.tau)) > 1e-3  # the changes mattered


def test_redundant_contacts_are_refused_with_their_reason(talos):
    """A point contact on the body a sole already holds: the contacts' rows
    are rank-deficient; the cycle says so and holds the last torques, and
    the controller solves again once the contact is removed."""
    model, q0 = talos
    q, v = perturbed(model, q0, np.random.default_rng(0))
    scenario = talos_scenario(q)
    good = scenario.ours(q, v)
    scenario.controller.add_contact(RigidPointContact("leg_left_6_link", friction=0.6))
    result = scenario.controller.compute(q, v)
    assert not result.feasible
    assert result.message == ("the QP has no solution (rank-deficient equalities: contacts that hold the same motion "
                              "twice, as two on one body): contacts left_sole_link, right_sole_link, leg_left_6_link; "
                              "holding the last solved torques"), result.message
    close(result.tau, good.tau, 0.0)
    scenario.controller.remove_contact("leg_left_6_link")
    assert scenario.controller.compute(q, v).feasible


def test_talos_solves_every_state_of_a_sequence_warm_as_cold(talos):
    """Fifty perturbed TALOS states one after another (the benchmark's): every
    QP solves (the ill-conditioned sole corners, weighed only by the 1e-8
    regularisation beyond their wrench, made ProxQP report false
    infeasibility on 4 of them), the dynamics hold, and the warm-started
    solution is a fresh controller's (cold) to 1e-9."""
    model, q0 = talos
    q, v = perturbed(model, q0, np.random.default_rng(0))
    warm, cold = talos_scenario(q), talos_scenario(q)
    warm.ours(q, v)
    cold.ours(q, v)  # the same tasks and references
    for k in range(50):
        q, v = perturbed(model, q0, np.random.default_rng(k), scale=0.005)
        result = warm.controller.compute(q, v)
        assert result.feasible, (k, result.message)
        close(dynamics_residual(warm.controller, q, v, result), np.zeros(model.nv), 1e-9)
        if k % 10 == 0:
            cold.controller._workspaces.clear()  # a solver set up anew
            first = cold.controller.compute(q, v)
            close(result.a, first.a, 1e-9 * max(1.0, np.max(np.abs(first.a))))
            close(result.tau, first.tau, 1e-9 * max(1.0, np.max(np.abs(first.tau))))


@pytest.mark.parametrize("robot", ["solo", "talos"])
def test_cycle_state_equals_the_algorithms(robot, solo, talos):
    """The controller's one compiled call for a cycle's kinematics and
    dynamics (assembly.cycle_state_kernel) gives what the algorithms give
    one by one: M and h to the last bit, the frames' Jacobians, motion and
    poses (frames_motion) to the last bit, the CoM, its velocity and
    Jacobian from the centroidal functions, its drift c̈ at a = 0 from
    central differences of ċ along the motion at a = 0; a state() is its
    own (the next cycle leaves it), and so is a result's CoM."""
    from mbs_dynamics.algorithms.kinematics import frames_motion
    model, q0 = solo if robot == "solo" else talos
    q, v = perturbed(model, q0, np.random.default_rng(11))
    scenario = (solo_scenario if robot == "solo" else talos_scenario)(q)
    result = scenario.ours(q, v)
    controller = scenario.controller
    state = controller.state(q, v)
    assert np.array_equal(controller._cycle.cycle.M, mbs.mass_matrix(model, q))
    assert np.array_equal(controller._cycle.cycle.h, mbs.nonlinear_effects(model, q, v))
    frames = tuple(state.frame_index)
    J, motion, R, p = frames_motion(model, q, v, frames)
    for name, expected in (("frame_jacobian", J), ("frame_motion", motion), ("frame_rotation", R),
                           ("frame_position", p)):
        assert np.array_equal(getattr(state, name), expected), name
    momentum, com = mbs.centroidal_state(model, q, v)
    mass = model.total_mass
    np.testing.assert_allclose(state.com, com, rtol=0, atol=1e-14)
    np.testing.assert_allclose(state.com_velocity, momentum[3:] / mass, rtol=0, atol=1e-13)
    np.testing.assert_allclose(state.com_jacobian, mbs.centroidal_momentum_matrix(model, q)[3:] / mass, rtol=0,
                               atol=1e-14)
    dt = 1e-6
    rates = [mbs.centroidal_state(model, mbs.integrate(model, q, v, s * dt), v)[0][3:] / mass
             for s in (-1, 1)]  # v fixed (a = 0): ċ = J_c v changes at J̇_c v
    np.testing.assert_allclose(state.com_drift, (rates[1] - rates[0]) / (2 * dt), rtol=0, atol=1e-6)
    kept = {name: getattr(state, name).copy() for name in ("com", "frame_jacobian", "q")}
    com = result.com.copy()
    q2, v2 = perturbed(model, q0, np.random.default_rng(12))
    controller.compute(q2, v2)
    assert not np.array_equal(controller._cycle.cycle.M, mbs.mass_matrix(model, q))  # it was written again
    for name, value in kept.items():
        assert np.array_equal(getattr(state, name), value), name
    assert np.array_equal(result.com, com)


@pytest.mark.parametrize("robot", ["solo", "talos"])
def test_compiled_assembly_equals_the_tasks_rows(robot, solo, talos):
    """The QP the compiled assembly builds (built-in tasks and contacts) is
    the one the tasks' and contacts' rows() give (the path of any other Task
    or RigidContact subclass), entry by entry to 1e-12 of its scale; and a
    task subclass with rows of its own takes that path and gives the same
    cycle."""
    model, q0 = solo if robot == "solo" else talos
    q, v = perturbed(model, q0, np.random.default_rng(5))
    scenario = (solo_scenario if robot == "solo" else talos_scenario)(q)
    expected = scenario.ours(q, v)
    controller = scenario.controller
    q, v = perturbed(model, q0, np.random.default_rng(6), scale=0.01)
    state = controller.state(q, v)
    cycle = controller._cycle.cycle  # what state() computed: M, h, the CoM quantities
    M, h = cycle.M, cycle.h
    contacts = list(controller.contacts.values())
    work = next(iter(controller._workspaces.values()))
    built = []
    for assemble, dynamics in ((controller._assemble_compiled, (cycle,)), (controller._assemble, (M, h))):
        Jf = assemble(state, contacts, work, *dynamics, False)
        built.append([x.copy() for x in (work.H, work.g, work.A, work.b, work.C, work.lower, work.upper, Jf)])
    if robot == "solo":  # and with the feet as rolling spheres (RigidPointContact's radius)
        for contact in contacts:
            contact.radius = 0.016
        for assemble, dynamics in ((controller._assemble_compiled, (cycle,)), (controller._assemble, (M, h))):
            Jf = assemble(state, contacts, work, *dynamics, False)
            built.append([x.copy() for x in (work.H, work.g, work.A, work.b, work.C, work.lower, work.upper, Jf)])
        assert np.max(np.abs(built[2][3] - built[0][3])) > 1e-6  # the radius changes the contacts' rows
        for contact in contacts:
            contact.radius = 0.0
    for compiled, general in zip(built[::2], built[1::2]):
        for x, y in zip(compiled, general):
            scale = max(np.max(np.abs(y)), 1.0)
            assert np.max(np.abs(x - y)) <= 1e-12 * scale

    class OwnPosture(PostureTask):
        def rows(self, state):
            return super().rows(state)

    q, v = perturbed(model, q0, np.random.default_rng(5))
    other = (solo_scenario if robot == "solo" else talos_scenario)(q)
    other.ours(q, v)  # the same first cycle, then the posture replaced by a subclass
    posture = next(t for t in other.controller.tasks if isinstance(t, PostureTask))
    own = OwnPosture(kp=5.0, kd=3.0, weight=1e-3)
    other.controller.remove_task(posture)
    other.controller.add_task(own)
    own.set_reference(posture.position)
    q, v = perturbed(model, q0, np.random.default_rng(8), scale=0.01)
    fast, general = controller.compute(q, v), other.controller.compute(q, v)
    assert fast.feasible and general.feasible
    close(general.tau, fast.tau, 1e-9 * max(1.0, np.max(np.abs(fast.tau))))
    close(general.a, fast.a, 1e-9 * max(1.0, np.max(np.abs(fast.a))))
    assert expected.feasible


def test_lifted_foot_carries_nothing_and_moves(solo):
    """Remove a contact at run time: the foot gets no force and its frame task
    lifts it; add it back: four forces again, summing to the weight at rest."""
    model, q = solo
    v = np.zeros(model.nv)
    controller = WholeBodyController(model)
    for foot in FEET:
        controller.add_contact(RigidPointContact(foot, friction=0.7))
    controller.add_task(CenterOfMassTask(kp=50.0, weight=1.0))
    controller.add_task(OrientationTask(controller.base_frame, kp=50.0, weight=1.0))
    controller.add_task(PostureTask(kp=10.0, weight=1e-3))
    swing = controller.add_task(FrameTask(FEET[0], kp=100.0, weight=1.0, mask="position"))
    swing.set_reference(position=mbs.frame_pose(model, q, FEET[0])[:3, 3] + [0, 0, 0.05])
    controller.remove_contact(FEET[0])
    result = controller.compute(q, v)
    assert result.feasible, result.message
    assert FEET[0] not in result.forces and len(result.forces) == 3
    close(dynamics_residual(controller, q, v, result), np.zeros(model.nv), 1e-9)
    lift = mbs.frame_acceleration(model, q, v, result.a, FEET[0], "hybrid")[5]
    assert lift > 1.0, f"the lifted foot accelerates up at {lift} m/s²"
    controller.remove_task(swing)
    controller.add_contact(RigidPointContact(FEET[0], friction=0.7))
    result = controller.compute(q, v)
    assert len(result.forces) == 4
    total = sum(result.forces.values())
    close(total, np.r_[0, 0, model.total_mass * 9.81], 1e-3)


def test_bad_input_is_refused_with_its_message(solo):
    model, q = solo
    v = np.zeros(model.nv)
    controller = WholeBodyController(model)
    com = controller.add_task(CenterOfMassTask())
    with pytest.raises(ValueError, match="model 'solo' has no frame 'no_such_foot'"):
        controller.add_contact(RigidPointContact("no_such_foot"))
    with pytest.raises(ValueError, match="has no frame 'hand'"):
        controller.add_task(FrameTask("hand"))
    with pytest.raises(ValueError, match=r"the CoM reference position has a non-finite value: \[0.0, nan, 0.3\]"):
        com.set_reference([0.0, np.nan, 0.3])
    with pytest.raises(ValueError, match="the CoM reference position must have 3 values"):
        com.set_reference([0.0, 0.1])
    base = controller.add_task(OrientationTask(controller.base_frame))
    with pytest.raises(ValueError, match="must be a unit quaternion"):
        base.set_reference([0.0, 0.0, 0.0, 2.0])
    with pytest.raises(ValueError, match=r"v has a non-finite value \(nan\)"):
        controller.compute(q, np.full(model.nv, np.nan))
    with pytest.raises(ValueError, match="no contact 'FL_FOOT' to remove"):
        controller.remove_contact("FL_FOOT")
    with pytest.raises(ValueError, match="friction coefficient of contact 'FL_FOOT' must be positive"):
        RigidPointContact("FL_FOOT", friction=0.0)
    # the references kept are the good ones: the controller still solves
    for foot in FEET:
        controller.add_contact(RigidPointContact(foot, friction=0.7))
    assert controller.compute(q, v).feasible


def test_infeasible_qp_holds_the_last_torques(solo):
    """Constraints that cannot all hold (no joint may accelerate, yet the
    feet must move towards references 1 cm away): the result says so and
    holds the last solved torques; a feasible cycle after it solves again."""
    model, q = solo
    v = np.zeros(model.nv)
    controller = WholeBodyController(model, acceleration_limit=0.0)
    controller.add_task(CenterOfMassTask(kp=50.0))
    controller.add_task(PostureTask(kp=10.0))
    for foot in FEET:
        controller.add_contact(RigidPointContact(foot, friction=0.7))
    good = controller.compute(q, v)
    assert good.feasible, good.message
    for k, foot in enumerate(FEET):
        moving = controller.add_contact(RigidPointContact(foot, friction=0.7, kp=100.0))
        moving.set_reference(position=mbs.frame_pose(model, q, foot)[:3, 3] + [0.01 * k, -0.01, 0.0])
    result = controller.compute(q, v)
    assert not result.feasible
    assert result.message.startswith("the QP has no solution (") and result.message.endswith(
        "contacts FL_FOOT, FR_FOOT, HL_FOOT, HR_FOOT; holding the last solved torques"), result.message
    close(result.tau, good.tau, 0.0)
    for foot in FEET:
        controller.add_contact(RigidPointContact(foot, friction=0.7))
    again = controller.compute(q, v)
    assert again.feasible
    close(again.tau, good.tau, 1e-6)


def test_support_polygon_and_the_nearest_point_of_it(solo, talos):
    """Solo-12 on four feet: the polygon is the feet's quadrilateral; a CoM
    reference inside is kept, one outside is moved in the ground plane to
    the nearest point of the boundary (the nearest of 4000 points along the
    edges, to their spacing), its height kept. TALOS on two soles: the hull
    of the eight corners. Two point feet span no area: no polygon."""
    model, q = solo
    controller = WholeBodyController(model)
    for foot in FEET:
        controller.add_contact(RigidPointContact(foot, friction=0.7))
    assert controller.support_polygon() is None  # no reference held before the first cycle
    controller.add_task(CenterOfMassTask(kp=10.0))
    controller.compute(q, np.zeros(model.nv))
    polygon = controller.support_polygon()
    feet = np.array([mbs.frame_pose(model, q, foot)[:2, 3] for foot in FEET])
    assert len(polygon.vertices) == 4
    assert sorted(map(tuple, np.round(polygon.vertices @ polygon.axes[:, :2], 9))) == sorted(
        map(tuple, np.round(feet, 9)))
    com = mbs.center_of_mass(model, q)
    assert polygon.nearest(com) == (pytest.approx(com), 0.0)
    edges = np.concatenate([np.linspace(a, b, 1000, endpoint=False) for a, b in
                            zip(polygon.vertices, np.roll(polygon.vertices, -1, axis=0))])
    for target in (com + [0.5, 0.1, 0.02], com + [-0.02, -0.4, 0.0], com + [0.6, 0.6, -0.1]):
        nearest, distance = polygon.nearest(target)
        planar = polygon.axes @ target
        assert distance == pytest.approx(np.min(np.linalg.norm(edges - planar, axis=1)), abs=1e-3)
        assert distance > 0.05 and nearest[2] == pytest.approx(target[2])
        assert polygon.nearest(nearest)[1] < 1e-12  # on the boundary
        assert np.linalg.norm(nearest - target) == pytest.approx(distance)
    assert controller.support_polygon() is polygon  # kept while the contacts are unchanged
    controller.remove_contact(FEET[0])
    controller.remove_contact(FEET[1])
    assert controller.support_polygon() is None

    model, q = talos
    scenario = talos_scenario(q)
    scenario.ours(q, np.zeros(model.nv))
    polygon = scenario.controller.support_polygon()
    corners = np.concatenate([mbs.frame_pose(model, q, sole)[:3, :3] @ SOLE_CORNERS.T
                              + mbs.frame_pose(model, q, sole)[:3, 3:4] for sole in SOLES], axis=1).T
    front = np.max(corners[:, 0])
    nearest, distance = polygon.nearest(corners.mean(axis=0) + [0.3, 0.0, 0.0])
    assert nearest[0] == pytest.approx(front, abs=2e-3) and distance == pytest.approx(
        corners.mean(axis=0)[0] + 0.3 - nearest[0])
