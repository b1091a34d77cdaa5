"""The whole-body controller closing the loop around this package's simulator
(mbs.Simulation, the step the simulator node takes, at its 1 ms): efforts
only, no position actuators. The bundled quadruped, touching the ground at
its URDF's collision geometry as the node builds it, stands on its four
sphere feet, sways its CoM on a 3 cm circle at 0.5 Hz, lifts a foot and
sets it down, and takes a 0.3 m/s lateral push; Solo-12 (feet as 16 mm
spheres) sways on the same circle; TALOS (its collision meshes touching at
their bounding boxes' corners, the simulator node's contact_geometry
'collision_boxes') crouches 10 cm. On the hull vertices of Solo-12's foot
meshes and TALOS's sole meshes the rigid step softens (the Solo and TALOS
tests say by how much). Each test
asserts the CoM error, the feet's sliding, the base height or depth, the
forces inside the friction cones and a simulator that neither softened nor
left a step unconverged."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import mbs_dynamics as mbs
from helpers import FEET as SOLO_FEET
from helpers import SOLES, close, solo12_standing, talos_standing
from oracles import robot_path

from mbs_dynamics.contact.geometry import ContactGeometry, collision_contacts
from mbs_dynamics.control import (CenterOfMassTask, CircleReference, FrameTask, OrientationTask, PostureTask,
                                  RestToRest, RigidPointContact, RigidSurfaceContact, SwingTrajectory,
                                  Waypoints, WholeBodyController)
from mbs_dynamics.spatial.lie import so3_log

DT = 1e-3  # the simulator's step (the node's default)
GROUND_FRICTION = 0.8  # the node's default ground_friction
CONTROL_FRICTION = 0.6  # what the controller's cones assume: below the ground's
FEET = ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")
FOOT_RADIUS = 0.02  # the quadruped's sphere feet
SOLO_FOOT_RADIUS = 0.016
# The controller's corners of TALOS's soles: inside the corners of their meshes' bounding boxes (x -0.108..0.097,
# y -0.062..0.062 in the sole frame), where the simulator's ground touches them
SOLE_CORNERS = np.array([[-0.085, -0.05, 0.0], [-0.085, 0.05, 0.0], [0.08, -0.05, 0.0], [0.08, 0.05, 0.0]])

# The gains that hold (the ROS node's defaults may take them): CoM and base orientation Kp 100 (Kd 2√Kp),
# weight 1; posture Kp 10, weight 1e-3; swing foot Kp 1000, weight 100; contacts Kp 0 (TSID's).
COM_KP, BASE_KP, POSTURE_KP, POSTURE_WEIGHT, SWING_KP, SWING_WEIGHT = 100.0, 100.0, 10.0, 1e-3, 1000.0, 100.0


class Loop:
    """A robot in the simulator under the controller at DT * ratio."""

    def __init__(self, urdf: str, q, ratio: int = 1, contact_points=(), geometry=None, **joints):
        """The world touched at contact_points (PointContact) and geometry
        (ContactGeometry), neither given: the URDF's collision geometry;
        joints: World's joint_friction, joint_damping (default True)."""
        xml = Path(urdf).read_text()
        self.model = model = mbs.Model.from_urdf_string(xml, floating_base=True)
        if not contact_points and geometry is None:
            geometry = collision_contacts(model, xml)
        world = mbs.World(mbs.Ground(friction=GROUND_FRICTION), contact_points, contact_geometry=geometry, **joints)
        self.simulation = mbs.Simulation(model, world, DT, q=q)
        self.controller = WholeBodyController(model)
        self.com = self.controller.add_task(CenterOfMassTask(kp=COM_KP, weight=1.0))
        self.base = self.controller.add_task(OrientationTask(self.controller.base_frame, kp=BASE_KP, weight=1.0))
        self.posture = self.controller.add_task(PostureTask(kp=POSTURE_KP, weight=POSTURE_WEIGHT))
        self.base.set_reference(np.eye(3))
        self.posture.set_reference(q[7:])
        self.ratio, self.cycles = ratio, 0
        self.worst_cone = -np.inf  # the largest |f_t| - μ f_n of the controller's forces (N)
        # the largest |f_t| / f_n of the ground's force on a foot bearing 1 N or more: on each contact point, or
        # summed over each group of them (a sole's corners, whose internal forces may reach the cone's edge)
        self.ground_friction, self.foot_points = 0.0, None
        self.softened = self.unconverged = self.infeasible = 0

    def cycle(self):
        """One control cycle: compute, then `ratio` simulator steps under its torques."""
        result = self.controller.compute(self.simulation.q, self.simulation.v)
        self.infeasible += not result.feasible
        for name, force in result.forces.items():
            contact = self.controller.contacts[name]
            if contact.kind == "point":
                self.worst_cone = max(self.worst_cone, np.hypot(*force[:2]) - contact.friction * force[2])
            else:
                for corner in result.corner_forces[name]:
                    self.worst_cone = max(self.worst_cone, np.hypot(*corner[:2]) - contact.friction * corner[2])
        step = self.simulation.step(np.r_[np.zeros(6), result.tau], self.ratio)
        forces = step.forces[:self.simulation.contact_count]
        if self.foot_points is not None:
            forces = np.array([forces[points].sum(axis=0) for points in self.foot_points])
        bearing = forces[:, 2] >= 1.0
        if np.any(bearing):
            self.ground_friction = max(self.ground_friction, np.max(np.hypot(forces[bearing, 0], forces[bearing, 1])
                                                                    / forces[bearing, 2]))
        self.softened += step.softened_steps
        self.unconverged += step.unconverged_steps
        self.cycles += 1
        return result

    @property
    def time(self) -> float:
        return self.cycles * self.ratio * DT

    @property
    def com_position(self):
        return mbs.center_of_mass(self.model, self.simulation.q)

    def frame_position(self, frame):
        return mbs.frame_pose(self.model, self.simulation.q, frame)[:3, 3]

    def check_simulator(self):
        """No softened or unconverged step, no infeasible QP, the controller's
        forces in its cones and the ground's within the controller's μ (|f_t|
        / f_n measured 0.07 on the circles, 0.31 lifting a foot, 0.13 after
        the push's slide)."""
        assert (self.softened, self.unconverged, self.infeasible) == (0, 0, 0)
        assert self.worst_cone <= 1e-6
        assert self.ground_friction <= CONTROL_FRICTION


def quadruped_standing():
    """The bundled quadruped with bent knees (hips 0.5 rad, knees -1 rad:
    straight legs, config/quadruped.yaml's, are singular: a CoM move needs the
    knees), its feet on the ground."""
    model = mbs.Model.from_urdf_file(mbs.bundled_robot("quadruped"), floating_base=True)
    q = model.neutral_configuration()
    for leg, sign in (("LF", 1), ("RF", 1), ("LH", -1), ("RH", -1)):
        q[model.q_index(f"{leg}_HFE")], q[model.q_index(f"{leg}_KFE")] = 0.5 * sign, -1.0 * sign
    q[2] -= min(mbs.frame_pose(model, q, foot)[2, 3] for foot in FEET) - FOOT_RADIUS
    return q


def quadruped_loop(contact_radius=FOOT_RADIUS, **joints):
    loop = Loop(mbs.bundled_robot("quadruped"), quadruped_standing(), **joints)
    add_feet(loop, FEET, FOOT_RADIUS, contact_radius)
    return loop


def add_feet(loop, feet, radius, contact_radius=None):
    """Point contacts at the sphere feet of `radius` (the controller's
    radius: contact_radius if given)."""
    loop.feet, loop.foot_radius = feet, radius
    for foot in feet:
        loop.controller.add_contact(RigidPointContact(
            foot, friction=CONTROL_FRICTION, min_normal_force=1.0,
            radius=radius if contact_radius is None else contact_radius))


def contact_points(loop):
    """The feet's ground points (sphere centre less the radius), (4, 3)."""
    return np.array([loop.frame_position(foot) - [0, 0, loop.foot_radius] for foot in loop.feet])


def foot_rotations(loop):
    return [mbs.frame_pose(loop.model, loop.simulation.q, foot)[:3, :3] for foot in loop.feet]


def slip(loop, points, rotations):
    """(4,) how far each foot slid since (points, rotations): its ground
    point's move less the rolling's, r (θ × ẑ) for the turn θ (world axes)."""
    rolled = [loop.foot_radius * np.cross(so3_log(after @ before.T), [0.0, 0.0, 1.0])
              for before, after in zip(rotations, foot_rotations(loop), strict=True)]
    return np.linalg.norm(contact_points(loop) - points - np.array(rolled), axis=1)


def circle(loop, duration, settled):
    """The CoM on a 3 cm circle at 0.5 Hz about where it stands (radius grown
    over 1 s) for `duration` s: (the largest CoM error from `settled` s on,
    each foot's slip, how far each foot's ground point moved)."""
    start, feet, turns = loop.com_position, contact_points(loop), foot_rotations(loop)
    reference = CircleReference(start, radius=0.03, frequency=0.5, ramp=1.0)
    errors = []
    while loop.time < duration - 1e-9:
        loop.com.set_reference(*reference.at(loop.time))
        loop.cycle()
        if loop.time >= settled:
            errors.append(np.linalg.norm(loop.com_position - reference.at(loop.time)[0]))
    return max(errors), slip(loop, feet, turns), np.linalg.norm(contact_points(loop) - feet, axis=1)


@pytest.mark.parametrize("reference", [
    RestToRest((0.1, 0.2, 0.3), (0.2, 0.0, 0.25), 0.8, start_time=0.1),
    CircleReference((0.0, 0.1, 0.3), 0.03, 0.5, ramp=1.0, start_time=0.2),
    SwingTrajectory((0.2, 0.1, 0.0), (0.25, 0.1, 0.01), 0.05, 0.6, start_time=0.1),
    Waypoints([0.0, 0.3, 0.45, 1.1], [(0.1, 0.2, 0.3), (0.15, 0.1, 0.3), (0.2, 0.0, 0.25), (0.2, 0.05, 0.2)],
              [(0, 0, 0), (0.2, -0.3, 0.1), (0.1, 0.0, -0.2), (0, 0, 0)],
              [(0, 0, 0), (1.0, 0.5, -2.0), (0.0, 0.3, 0.4), (0, 0, 0)], start_time=0.1)], ids=type)
def test_references_velocity_and_acceleration_are_the_derivatives(reference):
    """Each reference's velocity and acceleration equal the central
    differences of its position and velocity (off the ends, where the jerk
    jumps), at rest at the start (and at the end, but for the circle)."""
    h = 1e-6
    for t in np.linspace(0.0, 2.0, 41) + 0.0013:
        _, v, a = reference.at(t)
        close((reference.at(t + h)[0] - reference.at(t - h)[0]) / (2 * h), v, 1e-6)
        close((reference.at(t + h)[1] - reference.at(t - h)[1]) / (2 * h), a, 1e-5)
    for t in (0.0,) if isinstance(reference, CircleReference) else (0.0, 5.0):
        assert not np.any(reference.at(t)[1]) and not np.any(reference.at(t)[2])
    if isinstance(reference, SwingTrajectory):  # mid-swing: the line's middle plus the height
        assert abs(reference.at(0.4)[0][2] - (0.005 + 0.05)) < 1e-12


def test_waypoints_are_the_quintic_hermite_through_their_points():
    """Waypoints between two points: scipy's Bernstein polynomial of the same
    ends' values and derivatives (BPoly.from_derivatives); a quintic sampled
    (RestToRest) reproduced to rounding from two points; a rotation about a
    fixed axis with its angular velocity and acceleration reproduced, and
    about changing axes the angular velocity the rotation's rate."""
    from scipy.interpolate import BPoly

    from mbs_dynamics.spatial.lie import matrix_to_quaternion, so3_exp

    rng = np.random.default_rng(3)
    times = np.cumsum(rng.uniform(0.05, 0.4, 7))
    p, v, a = (rng.normal(size=(7, 3)) for _ in range(3))
    waypoints = Waypoints(times, p, v, a, start_time=2.0)
    spline = BPoly.from_derivatives(times, [np.stack(ends) for ends in zip(p, v, a)])
    for t in np.linspace(times[0], times[-1], 301)[1:-1]:
        for k, value in enumerate(waypoints.at(2.0 + t)):
            close(value, spline(t, k), 1e-8 * max(1.0, np.abs(spline(t, k)).max()))
    assert np.array_equal(waypoints.at(0.0)[0], p[0]) and np.array_equal(waypoints.at(9.0)[1], v[-1])

    move = RestToRest((0.1, 0.2, 0.3), (0.1, 0.23, 0.2), 0.5)
    two = Waypoints([0.0, 0.5], *zip(move.at(0.0), move.at(0.5)))
    for t in np.linspace(-0.1, 0.6, 71):
        for ours, theirs in zip(two.at(t), move.at(t), strict=True):
            close(ours, theirs, 1e-12)

    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    angle = lambda t: 0.3 + 0.5 * t**2  # noqa: E731
    about_axis = Waypoints(times, p, rotations=[matrix_to_quaternion(so3_exp(angle(t) * axis)) for t in times],
                           angular_velocities=[t * axis for t in times], angular_accelerations=[axis] * 7)
    for t in np.linspace(times[0], times[-1], 101):
        R, omega, alpha = about_axis.rotation_at(t)
        close(R, so3_exp(angle(t) * axis), 1e-12)
        close(omega, t * axis, 1e-12)
        close(alpha, axis, 1e-12)
    rotations = [so3_exp(w) for w in 0.3 * rng.normal(size=(7, 3))]
    omegas, alphas = rng.normal(size=(7, 3)), rng.normal(size=(7, 3))
    turning = Waypoints(times, p, rotations=rotations, angular_velocities=omegas, angular_accelerations=alphas)
    for k, R in enumerate(rotations):  # at each point (from the segment before it too) its rotation, ω and ω̇
        for t in (times[k], times[k] - 1e-12):
            for ours, theirs in zip(turning.rotation_at(t), (R, omegas[k], alphas[k]), strict=True):
                close(ours, theirs, 1e-6)
    h = 1e-6
    for t in np.linspace(times[0], times[-1], 41)[1:-1] + 1e-4:
        rate = so3_log(turning.rotation_at(t + h)[0] @ turning.rotation_at(t - h)[0].T) / (2 * h)
        close(rate, turning.rotation_at(t)[1], 1e-5)


@pytest.mark.parametrize("make, message", [
    (lambda: RestToRest((0, 0, 0), (0, 0, 1), 0.0), "the duration must be positive, got 0.0"),
    (lambda: RestToRest((0, 0, np.nan), (0, 0, 1), 1.0), "the start point has a non-finite value"),
    (lambda: CircleReference((0, 0, 0), 0.03, 0.5, ramp=-1.0), "the circle's ramp must not be negative, got -1.0"),
    (lambda: CircleReference((0, 0, 0), 0.03, 0.5, plane=(0, 0)), "the circle's plane must be two different axes"),
    (lambda: SwingTrajectory((0, 0, 0), (0, 0, 0), np.inf, 1.0), "the swing height has a non-finite value"),
    (lambda: Waypoints([0.0, 0.5, 0.5], np.zeros((3, 3))), "the waypoints' times must be finite and strictly"),
    (lambda: Waypoints([0.0, 0.5], [(0, 0, 0), (0, np.nan, 0)]), "the waypoints' positions has a non-finite value"),
    (lambda: Waypoints([0.0, 0.5], np.zeros((2, 3)), rotations=[(0, 0, 0, 1), (0, 0, 0.5, 0.5)]),
     "the waypoints' rotation 1 must be a unit quaternion (x, y, z, w), its norm is 0.707107"),
    (lambda: RigidPointContact("LF_FOOT", radius=-0.02), "the radius of contact 'LF_FOOT' must not be negative"),
    (lambda: RigidPointContact("LF_FOOT", radius=np.nan), "the radius of contact 'LF_FOOT' has a non-finite value")])
def test_bad_references_and_radii_are_refused(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_rolling_contact_is_the_simulators():
    """Sphere feet: the point contact at the sphere's lowest point (radius r)
    predicts the accelerations the simulator's step takes, the sphere's
    centre (radius 0) does not: a rolling sphere's centre moves by r times
    its turn. Joint friction and damping off (the controller does not
    model them: with them the step's accelerations differ by 1.5 rad/s²)."""
    differences = {}
    for radius in (FOOT_RADIUS, 0.0):
        loop = quadruped_loop(contact_radius=radius, joint_friction=False, joint_damping=False)
        start = loop.com_position
        crouch = RestToRest(start, start + [0.02, 0.0, -0.06], 0.6)
        worst = 0.0
        while loop.time < 0.6 - 1e-9:
            loop.com.set_reference(*crouch.at(loop.time))
            result = loop.cycle()
            worst = max(worst, np.max(np.abs(loop.simulation.last.acceleration - result.a)))
        loop.check_simulator()
        differences[radius] = worst
    assert differences[FOOT_RADIUS] < 0.03  # measured 0.008 (m/s², rad/s²)
    assert differences[0.0] > 0.2  # measured 0.60


def test_quadruped_com_circle():
    """The CoM on a 3 cm circle at 0.5 Hz (radius grown over 1 s): under 5 mm
    error from t = 2 s (1 s after the full radius) over 1.25 periods."""
    loop = quadruped_loop()
    error, slips, moved = circle(loop, 4.5, 2.0)
    loop.check_simulator()
    assert error < 2e-3  # measured 0.9 mm
    # the feet roll (their ground points move by r times the turn: 2 mm measured), they do not slide
    assert np.max(slips) < 1e-4 and np.max(moved) > 1e-3
    assert abs(loop.simulation.q[2] - quadruped_standing()[2]) < 2e-3  # measured 0.03 mm


def test_solo12_com_circle():
    """Solo-12 (example-robot-data) on the same circle, measured from 2 s
    over 0.75 period. Its feet touch the simulator's ground as spheres of
    16 mm about the foot frames (the round end of its foot mesh: ±15.8 mm
    in x, -15.9 mm in z): on the mesh's 48 hull vertices the rigid step
    softened 10 of 4000 steps (with the controller's contacts the same)."""
    model, q = solo12_standing()
    bodies = np.array([model.frame(foot).body for foot in SOLO_FEET])
    points = np.array([model.frame(foot).translation for foot in SOLO_FEET])  # the frames' origins in the bodies
    q[2] += SOLO_FOOT_RADIUS
    loop = Loop(robot_path("solo12"), q, geometry=ContactGeometry(bodies, points, np.full(4, SOLO_FOOT_RADIUS),
                                                                  SOLO_FEET, ()))
    add_feet(loop, SOLO_FEET, SOLO_FOOT_RADIUS)
    error, slips, moved = circle(loop, 3.5, 2.0)
    loop.check_simulator()
    assert error < 3e-3  # measured 0.6 mm
    assert np.max(slips) < 1e-4
    assert abs(loop.simulation.q[2] - q[2]) < 0.01


def test_quadruped_lifts_a_foot_and_sets_it_down():
    """CoM shifted away from LF over 0.8 s, LF lifted 5 cm and set down again
    in 0.8 s (its contact removed, then added back), CoM back: the other
    feet stay put, the lifted foot lands where it left."""
    loop = quadruped_loop()
    start, feet, turns = loop.com_position, contact_points(loop), foot_rotations(loop)
    shift = RestToRest(start, start + [-0.04, -0.035, 0.0], 0.8)
    back = RestToRest(start + [-0.04, -0.035, 0.0], start, 0.8, start_time=2.2)
    lift_off = 1.0
    swing = FrameTask("LF_FOOT", kp=SWING_KP, weight=SWING_WEIGHT, mask="position")
    trajectory = SwingTrajectory(loop.frame_position("LF_FOOT"), loop.frame_position("LF_FOOT"), height=0.05,
                                 duration=0.8, start_time=lift_off)
    highest, lifted_force, com_error, lowest = 0.0, 0.0, 0.0, np.inf
    while loop.time < 3.2 - 1e-9:
        t = loop.time
        reference = (shift if t < 2.2 else back).at(t)
        loop.com.set_reference(*reference)
        if loop.cycles == round(lift_off / DT):
            loop.controller.remove_contact("LF_FOOT")
            loop.controller.add_task(swing)
        if swing in loop.controller.tasks:
            position, velocity, acceleration = trajectory.at(t)
            swing.set_reference(position=position, twist=np.r_[0, 0, 0, velocity],
                                acceleration=np.r_[0, 0, 0, acceleration])
        if loop.cycles == round((lift_off + 0.8) / DT):
            loop.controller.remove_task(swing)
            loop.controller.add_contact(RigidPointContact("LF_FOOT", friction=CONTROL_FRICTION,
                                                          min_normal_force=1.0, radius=FOOT_RADIUS))
        loop.cycle()
        com_error = max(com_error, np.linalg.norm(loop.com_position - reference[0]))
        lowest = min(lowest, loop.simulation.q[2])
        highest = max(highest, contact_points(loop)[0, 2])
        if lift_off + 0.1 < loop.time < lift_off + 0.7:
            lifted_force = max(lifted_force, np.linalg.norm(loop.simulation.contact_forces[-4]))
    loop.check_simulator()
    assert 0.045 < highest < 0.055  # measured 47.7 mm
    assert lifted_force == 0.0
    assert np.max(slip(loop, feet, turns)[1:]) < 1e-4
    assert np.linalg.norm(contact_points(loop)[0] - feet[0]) < 3e-3  # measured 2.1 mm
    assert np.linalg.norm(loop.com_position - start) < 3e-3
    assert com_error < 5e-3 and lowest > quadruped_standing()[2] - 0.01  # measured 3.5 mm, 2.2 mm lower


def test_quadruped_survives_a_lateral_push():
    """0.3 m/s along y set on the base (as the simulator node's ~/set_state,
    the joints' velocities zero: the feet too are set moving and slide until
    the ground's friction stops them, a few mm): it stays up, the feet stick
    from 0.1 s after the push, the CoM is back within 5 mm in 2 s.

    Without the URDF's Coulomb joint friction: with it, once the legs come
    to rest (0.6 to 1.3 s after the push) the simulator's rigid solve stalls
    and softens 17 of the 2200 steps (still at 2000 sweeps: the four stance
    legs' sticking joints and feet make redundant rows)."""
    loop = quadruped_loop(joint_friction=False)
    start, feet = loop.com_position, contact_points(loop)
    loop.com.set_reference(start)
    for _ in range(200):
        loop.cycle()
    v = loop.simulation.v.copy()
    v[4] += 0.3  # the base twist [ω; v] in base axes: the base is level
    loop.simulation.set_state(loop.simulation.q.copy(), v)
    lowest, farthest = np.inf, 0.0
    while loop.time < 2.2 - 1e-9:
        loop.cycle()
        if loop.cycles == 300:  # the impact's slide (at the ground's friction, 0.8) is over
            loop.ground_friction = 0.0
            slid = np.linalg.norm(contact_points(loop) - feet, axis=1)
            stopped, turns = contact_points(loop), foot_rotations(loop)
        lowest = min(lowest, loop.simulation.q[2])
        farthest = max(farthest, np.linalg.norm(loop.com_position - start))
    loop.check_simulator()
    assert 0.005 < farthest < 0.05  # measured 10.4 mm
    assert lowest > quadruped_standing()[2] - 0.02
    assert np.max(slid) < 0.015  # measured 8.9 mm (right feet), 0.5 mm (left)
    assert np.max(slip(loop, stopped, turns)) < 1e-4
    assert np.linalg.norm(loop.com_position - start) < 5e-3


def talos_on_its_collision_geometry(mesh_points: str):
    """TALOS in the simulator touching the ground at its collision geometry as
    the simulator node builds it (contact_geometry 'collision_boxes': "box",
    'collision': "hull"), standing with its soles' lowest points on the
    ground, each sole a RigidSurfaceContact of the controller; the sole's
    points' indices in foot_points."""
    xml = Path(robot_path("talos")).read_text()
    model, q = talos_standing()
    geometry = collision_contacts(model, xml, mesh_points=mesh_points)
    soles = [model.frame(sole).body for sole in SOLES]
    rotations, translations = mbs.algorithms.kinematics.body_poses(model, q)
    q[2] -= min((rotations[b] @ p + translations[b])[2]
                for b, p in zip(geometry.bodies, geometry.points, strict=True) if b in soles)
    loop = Loop(robot_path("talos"), q, ratio=2, geometry=geometry)
    loop.foot_points = [np.flatnonzero(geometry.bodies == body) for body in soles]
    for sole in SOLES:
        loop.controller.add_contact(RigidSurfaceContact(sole, SOLE_CORNERS, friction=CONTROL_FRICTION,
                                                        min_normal_force=1.0))
    return loop


def test_talos_soles_stand_rigid_on_their_boxes_and_soften_on_their_hulls():
    """Why contact_geometry 'collision_boxes': TALOS's sole mesh bulges 0.4 mm
    below its rim (its hull's lowest vertices at -0.4 to +1.5 mm in the sole
    frame). On the hull's vertices a sole rests on three of them, four more
    within reach 13 to 131 µm higher: their normal targets are no rigid
    motion of the sole, its tangential corrections are left out, and its
    three sticking points pushed out at different rates have no solution:
    the rigid step stalls and is solved softer nearly every step (0.2 s standing under the controller: 198 of 200 steps;
    3598 of the 3600 of the crouch below). On its
    bounding box's corners the sole is flat: no step softened."""
    for mesh_points in ("box", "hull"):
        loop = talos_on_its_collision_geometry(mesh_points)
        loop.com.set_reference(loop.com_position)
        while loop.time < 0.2 - 1e-9:
            loop.cycle()
        assert loop.unconverged == 0 and loop.infeasible == 0
        if mesh_points == "box":
            assert loop.softened == 0
        else:
            assert loop.softened > 180, loop.softened  # measured 198 of 200


def test_talos_crouches_10_cm_and_stands_up():
    """CoM height lowered by 0.10 m over 1.5 s, held 0.3 s, raised over 1.5 s
    (the controller at 500 Hz): CoM error, the depth reached, soles still.
    The ground touches TALOS at its collision geometry as the simulator node
    builds it with contact_geometry 'collision_boxes' (config/talos_wbc.yaml):
    each sole at its mesh's bounding box's corners; the ground's force summed
    over a sole's points stays in the controller's cone."""
    loop = talos_on_its_collision_geometry("box")
    start, soles = loop.com_position, [loop.frame_position(sole) for sole in SOLES]
    down = RestToRest(start, start - [0.0, 0.0, 0.10], 1.5, start_time=0.1)
    up = RestToRest(start - [0.0, 0.0, 0.10], start, 1.5, start_time=1.9)
    errors, lowest = [], np.inf
    while loop.time < 3.6 - 1e-9:
        reference = (down if loop.time < 1.9 else up).at(loop.time)
        loop.com.set_reference(*reference)
        loop.cycle()
        errors.append(np.linalg.norm(loop.com_position - (down if loop.time < 1.9 else up).at(loop.time)[0]))
        lowest = min(lowest, loop.com_position[2])
    assert max(errors) < 3e-3  # measured 1.3 mm
    assert abs(lowest - (start[2] - 0.10)) < 3e-3  # measured 0.9 mm
    assert np.linalg.norm(loop.com_position - start) < 3e-3  # measured 0.08 mm
    assert max(np.linalg.norm(loop.frame_position(sole) - p) for sole, p in zip(SOLES, soles)) < 1e-3  # 3 µm
    loop.check_simulator()
