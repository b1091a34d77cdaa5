"""Time stepping with unilateral contact and Coulomb friction, for simulation:
points of the robot (with a radius: the centres of spheres) against obstacles
(a ground plane, static boxes), the joints' limits, damping and friction, and
actuators; many steps per compiled call.

A step of `dt` from (q, v) is taken by velocity-level time stepping
(Moreau-Jean; the impulse form of the constrained dynamics of F&O §3.4 and
RBDL §2.3) when anything acts by impulses or implicitly:

    v_free = v + dt (M + dt D)⁻¹ (tau - h - D v)
    v⁺     = v_free + (M + dt D)⁻¹ G^T λ          (λ: the constraint impulses)
    q⁺     = q ⊕ dt v⁺

D is diagonal: the joints' viscous damping and the actuators' gains. A PD
actuator (stiffness K, damping B toward the targets q*, v*) applies
K (q* - q - dt v⁺) + B (v* - v⁺): implicit in v⁺, so that stiff gains stay
stable at dt = 1 ms, as MuJoCo's implicit actuators do. It adds B + dt K to D
and K (q* - q) + B v* to tau. An actuator whose force would pass its effort
limit is clamped there and the step taken again with that constant force.

For each point and obstacle within reach, the rows G = [n; t1; t2] J_c of the
velocity of the contact point c (the point, less its radius along the
obstacle's outward normal n: a sphere's exact lowest point) along n and two
tangents give u = G v⁺ = W λ + c, W = G (M + dt D)⁻¹ G^T (the Delassus
operator) plus `compliance` times its diagonal, and c = G v_free + (bias on
the normal row), and the Coulomb law in its exact cone (not a pyramid):

    no pulling, no penetration   λ_n >= 0,  u_n + b >= 0,  λ_n (u_n + b) = 0
    friction cone                |λ_t| <= μ λ_n
    sticking or sliding          u_t = 0, or λ_t = -μ λ_n u_t / |u_t|

b lets a point that is φ from the obstacle close the gap in one step (b =
φ/dt), pushes a point inside it out at `stabilization` φ/dt per step, and makes
a point that would reach it within the step, approaching faster than
BOUNCE_SPEED, leave at `restitution` times its approach speed (Newton's law of
restitution, applied at the start of the step). A body's pairs with one
obstacle, when more than PATCH_POINTS, are reduced to the extreme points of
their patch (reduce_patches). With compliance > 0 every row is soft (MuJoCo's
soft constraints in spirit: W's diagonal times 1 + compliance): rows that
contradict each other (a robot lying on many points of its limbs, against
its joint limits) settle at a small penetration instead of leaving the
solver unconverged, and a sticking point creeps at compliance W_tt λ_t.
Where the solver does not converge at the step's compliance, it solves the
same rows again at SOFTENING times it (at least SOFTENED_COMPLIANCE), up to
SOFTENINGS times, and counts the step as softened. Measured on TALOS tipped
over onto its collision meshes, 3000 steps, forward and backward: every
step converged, rigid and at compliance 1e-2; at 1e-2 the robot rests to
1e-2 m/s within 3 s (tested), rigid an ankle keeps rattling against its
limit (up to 2 rad/s) after a backward fall. Without the softening: rigid,
16 % of the steps unconverged; at 1e-2, 2 steps forward.

The joints add rows of their own, one per coordinate with Coulomb friction or
at (or reaching within the step) a position limit, G = the coordinate's unit
row, whose law is coulomb.joint_impulse. The impulses come from
coulomb.solve_coulomb on (W, c); the step reports its accuracy (the largest
violation of the law, m/s) and its sweeps.

With integrator RK4 or RKMK4 (integrators.py), a step in which nothing acts by
impulses or implicitly (no point within reach of an obstacle at the start of
the step, no joint at or reaching a limit, no joint friction, no actuator
gain) is taken by that integrator instead, the damping as a force: smooth
motion keeps its energy (order 4), contacts and limits get their impulses
(first order).

M + dt D is factored once per pass as L^T L with the tree's sparsity
(crba.ltl_factor), and W = Y Y^T with Y = L^-T G^T, each row of G zero off one
path to the root.
"""
from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.aba import aba_kernel, singular_mass_matrix
from mbs_dynamics.configuration import integrate_kernel
from mbs_dynamics.contact import PointContact
from mbs_dynamics.coulomb import CoulombProblem, solve_coulomb
from mbs_dynamics.crba import crba_kernel, ltl_factor, ltl_solve, ltl_solve_lower, ltl_solve_transposed_chain
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, SINGULAR_MASS_MATRIX, all_finite, invalid
from mbs_dynamics.joints import body_velocity
from mbs_dynamics.kinematics import add_point_jacobian, body_poses_kernel, frame_placements
from mbs_dynamics.lie import quaternion_to_matrix
from mbs_dynamics.model import FLOATING, Model, body_count, plane_basis, unpack_model
from mbs_dynamics.rnea import rnea_kernel
from mbs_dynamics.workspace import kinematic_views, scratch, take, untracked

# Slower impacts (m/s) do not bounce: a resting contact stays at rest.
BOUNCE_SPEED = 1e-2
# The integrators of the smooth steps (StepSettings.integrator).
EULER, RK4, RKMK4 = 0, 1, 2
INTEGRATOR_CODES = {"semi_implicit_euler": EULER, "rk4": RK4, "rkmk4": RKMK4}
# Obstacle kinds (the first column of an obstacle row).
PLANE, BOX = 0, 1
# An obstacle row: kind, friction, restitution, centre (3), axes (3 rows: its local x, y, z in world axes),
# half extents (3; a plane: unused). A plane's local z is its normal.
OBSTACLE_FLOATS = 18
# Passes of a step at most: the first, then again with the actuators that passed their limits clamped.
MAX_ACTUATOR_PASSES = 3
# A body's points touching one obstacle beyond this many are reduced to those extreme along PATCH_DIRECTIONS
# directions of the obstacle's tangent plane, and the deepest: a patch of coplanar points (a sole's mesh
# vertices) makes as many redundant rows, on which the solver stalls.
PATCH_POINTS = 8
PATCH_DIRECTIONS = 8
# Rows the solver cannot satisfy at the step's compliance are solved again at SOFTENING times it (at least
# SOFTENED_COMPLIANCE), up to SOFTENINGS times (module docstring).
SOFTENINGS, SOFTENING, SOFTENED_COMPLIANCE = 2, 10.0, 0.01


def _obstacle_row(kind: int, friction: float, restitution: float, centre, axes, half_extents) -> np.ndarray:
    row = np.concatenate([(kind, friction, restitution), centre, np.asarray(axes).ravel(), half_extents])
    row.setflags(write=False)
    return row


def _check_surface(friction, restitution) -> None:
    if not (np.isfinite(friction) and friction >= 0.0):
        raise ValueError(f"friction must be finite and >= 0, got {friction!r}")
    if not 0.0 <= restitution <= 1.0:
        raise ValueError(f"restitution must be in [0, 1], got {restitution!r}")


@dataclass(frozen=True)
class Ground:
    """The plane {x : normal . x = height} (world), with the Coulomb friction
    coefficient and the restitution of the robot's contacts with it."""

    height: float = 0.0
    normal: tuple = (0.0, 0.0, 1.0)
    friction: float = 1.0
    restitution: float = 0.0

    def __post_init__(self):
        normal = np.asarray(self.normal, dtype=float)
        if normal.shape != (3,) or not np.all(np.isfinite(normal)) or np.linalg.norm(normal) < 1e-12:
            raise ValueError(f"ground normal must be a nonzero 3-vector, got {self.normal!r}")
        if not np.isfinite(self.height):
            raise ValueError(f"ground height must be finite, got {self.height!r}")
        _check_surface(self.friction, self.restitution)
        normal = normal / np.linalg.norm(normal)
        tangents = plane_basis(normal)
        object.__setattr__(self, "row", _obstacle_row(PLANE, self.friction, self.restitution, self.height * normal,
                                                      [tangents[0], tangents[1], normal], np.zeros(3)))

    @property
    def contact_axes(self) -> np.ndarray:
        """Rows (n, t1, t2): the unit normal and two tangents, t1 x t2 = n."""
        return self.row[[12, 13, 14, 6, 7, 8, 9, 10, 11]].reshape(3, 3)


@dataclass(frozen=True)
class Box:
    """A static box (a step, a table): `size` (full extents along its axes, m),
    its centre at `position` and its axes turned by the unit quaternion
    `orientation` (x, y, z, w), world; friction and restitution of the robot's
    contacts with it."""

    size: tuple
    position: tuple = (0.0, 0.0, 0.0)
    orientation: tuple = (0.0, 0.0, 0.0, 1.0)
    friction: float = 1.0
    restitution: float = 0.0

    def __post_init__(self):
        size, position = np.asarray(self.size, dtype=float), np.asarray(self.position, dtype=float)
        orientation = np.asarray(self.orientation, dtype=float)
        if size.shape != (3,) or not np.all(np.isfinite(size)) or np.any(size <= 0):
            raise ValueError(f"box size must be 3 positive numbers, got {self.size!r}")
        if position.shape != (3,) or not np.all(np.isfinite(position)):
            raise ValueError(f"box position must be 3 finite numbers, got {self.position!r}")
        if orientation.shape != (4,) or not np.all(np.isfinite(orientation)) \
                or abs(np.linalg.norm(orientation) - 1.0) > 1e-6:
            raise ValueError(f"box orientation must be a unit quaternion (x, y, z, w), got {self.orientation!r}")
        _check_surface(self.friction, self.restitution)
        axes = quaternion_to_matrix(*orientation).T  # rows: the box's axes in world
        object.__setattr__(self, "row", _obstacle_row(BOX, self.friction, self.restitution, position, axes,
                                                      size / 2))


# The ground of contact_step when none is given (and of a Simulation without one): built once.
DEFAULT_GROUND = Ground()


class ContactStep(tuple):
    """(q, v) after the step, unpackable as a pair, with what the contacts did:
    forces (k, 3) the mean force on each point over the step, world axes;
    impulses (k, 3) the same as impulses along (n, t1, t2) (pass them back as
    warm_start); active (k,) the points the solver considered; gaps (k,) each
    point's height above the ground at the start of the step; joint_impulses
    (nv,) the generalised impulse of the joint limits and joint friction;
    limits_active the number of joint limits in the solver; iterations and
    residual (the largest violation of the Coulomb law, m/s) of the solver, and
    converged = residual <= tolerance."""

    def __new__(cls, q, v, forces, impulses, active, gaps, iterations, residual, converged,
                joint_impulses=None, limits_active=0):
        result = super().__new__(cls, (q, v))
        result.forces, result.impulses, result.active, result.gaps = forces, impulses, active, gaps
        result.iterations, result.residual, result.converged = iterations, residual, converged
        result.joint_impulses, result.limits_active = joint_impulses, limits_active
        return result


# --- the compiled steps ---------------------------------------------------------
# simulate_kernel takes its inputs packed in plain arrays and tuples of arrays
# (a namedtuple passed from Python costs a microsecond a call to unbox) and
# names them here.

# settings: np.array((dt, stabilization, margin, tolerance, max_iterations, integrator, compliance, steps))
StepSettings = namedtuple("StepSettings", "dt stabilization margin tolerance max_iterations integrator compliance "
                                          "steps")
# The contact points: (bodies (k,), centres in their bodies (k, 3), radii (k,))
ContactPoints = namedtuple("ContactPoints", "bodies points radii")
# joint_terms(): damping and friction (nv,), the position limits of coordinates limit_q
# (velocity index limit_v) between lower and upper
JointTerms = namedtuple("JointTerms", "damping friction limit_q limit_v lower upper")
# The actuators, per coordinate (nv,): the commanded effort, PD gains toward the
# targets (the position target of coordinate r is the coordinate target_q[r] of q,
# -1 where none), and the effort limits
Actuation = namedtuple("Actuation", "effort stiffness damping limit target_q position_target velocity_target")
# The state a call advances, in place: q, v and the warm starts, the contact
# impulses (k, obstacles, 3) along each pair's (n, t1, t2) and the joint impulses (nv,)
StepState = namedtuple("StepState", "q v impulses joint_impulses")
# What the last step of a call did: forces (k, 3) on each point (world, summed
# over the obstacles), gaps (k,) from the nearest obstacle at its start, touching
# (k,) whether the point was in the solver, joint_impulses (nv,) of the limits and
# joint friction, applied (nv,) the actuators' efforts, acceleration (nv,) (v⁺ - v) / dt,
# body_wrenches (nbodies, 6) the contact forces on each body, [torque; force] in its frame about its origin
StepResults = namedtuple("StepResults", "forces gaps touching joint_impulses applied acceleration body_wrenches")
# The joints' velocity walls (nv,): -inf and inf where none; walls: how many are finite
VelocityWalls = namedtuple("VelocityWalls", "lowest highest walls")
# The constraint rows: G (m, nv), each row zero off the path from coordinate `deepest`
# to the root (-1: all zero), c = G v_free + bias, and the impulses (in: the warm start)
Rows = namedtuple("Rows", "G deepest c impulses")
# The point-obstacle pairs in the solver: point, obstacle, normal-row bias, contact
# axes (rows n, t1, t2), the contact point (world) and the obstacle's friction
Pairs = namedtuple("Pairs", "point obstacle bias axes location friction")
# What a call reports: its status (0, INVALID_INPUT, NONFINITE_RESULT or
# SINGULAR_MASS_MATRIX, then with `pivot` the velocity index of the vanishing
# pivot, else -1), the last step's solver sweeps, the largest residual of its
# steps, the joint limits in the last step's solver, the steps taken, those
# unconverged, those taken by the smooth integrator and those softened.
StepReport = namedtuple("StepReport", "status sweeps residual limits pivot steps unconverged smooth softened")


@njit(cache=True, inline="always")
def step_settings(settings):
    """The StepSettings packed in `settings`."""
    return StepSettings(settings[0], settings[1], settings[2], settings[3], int(settings[4]), int(settings[5]),
                        settings[6], int(settings[7]))


@njit(cache=True, inline="always")
def unpack_joint_terms(joints, nv):
    """The JointTerms packed by joint_terms()."""
    floats, ints = joints
    count = ints[0]
    limit_q, o = take(ints, 1, (count,))
    limit_v, o = take(ints, o, (count,))
    damping, o = take(floats, 0, (nv,))
    friction, o = take(floats, o, (nv,))
    lower, o = take(floats, o, (count,))
    upper, o = take(floats, o, (count,))
    return JointTerms(damping, friction, limit_q, limit_v, lower, upper)


@njit(cache=True, inline="always")
def failure(status, steps, unconverged, smooth, softened, pivot=-1):
    """The StepReport of a call that stopped at a step it could not take."""
    return StepReport(status, 0, 0.0, 0, pivot, steps, unconverged, smooth, softened)


@njit(cache=True, inline="always")
def free_velocity(M, h, v, tau, damping, dt, dof_parent):
    """v_free = v + dt (M + dt D)⁻¹ (tau - h - D v) (module docstring), M
    overwritten by the factor L of M + dt D. Returns (v_free, the coordinate
    whose pivot vanishes or -1)."""
    v_free = tau - h
    for r in range(v.shape[0]):
        M[r, r] += dt * damping[r]
        v_free[r] -= damping[r] * v[r]
    pivot = ltl_factor(M, dof_parent)
    if pivot >= 0:
        return v_free, pivot
    ltl_solve(M, dof_parent, v_free)
    for r in range(v.shape[0]):
        v_free[r] = v[r] + dt * v_free[r]
    return v_free, pivot


@njit(cache=True, inline="always")
def closing_speed(gap, dt, stabilization):
    """The bias of a constraint `gap` away from its bound (module docstring): the
    whole gap closed within the step, or a penetration (gap < 0) pushed out at
    `stabilization` of it per step."""
    return gap / dt if gap > 0.0 else stabilization * gap / dt


@njit(cache=True, inline="always")
def obstacle_distance(obstacle, x0, x1, x2):
    """(gap, n0, n1, n2): the signed distance of the world point x from the
    obstacle (negative inside) and the obstacle's outward unit normal there: a
    plane's normal; outside a box, the direction from its nearest point; inside
    it, the normal of the face nearest."""
    d0, d1, d2 = x0 - obstacle[3], x1 - obstacle[4], x2 - obstacle[5]
    l0 = obstacle[6] * d0 + obstacle[7] * d1 + obstacle[8] * d2
    l1 = obstacle[9] * d0 + obstacle[10] * d1 + obstacle[11] * d2
    l2 = obstacle[12] * d0 + obstacle[13] * d1 + obstacle[14] * d2
    if obstacle[0] == PLANE:
        return l2, obstacle[12], obstacle[13], obstacle[14]
    h0, h1, h2 = obstacle[15], obstacle[16], obstacle[17]
    e0, e1, e2 = l0 - min(max(l0, -h0), h0), l1 - min(max(l1, -h1), h1), l2 - min(max(l2, -h2), h2)
    outside = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    if outside > 0.0:
        m0, m1, m2 = e0 / outside, e1 / outside, e2 / outside
        return (outside, m0 * obstacle[6] + m1 * obstacle[9] + m2 * obstacle[12],
                m0 * obstacle[7] + m1 * obstacle[10] + m2 * obstacle[13],
                m0 * obstacle[8] + m1 * obstacle[11] + m2 * obstacle[14])
    s0, s1, s2 = h0 - abs(l0), h1 - abs(l1), h2 - abs(l2)
    axis, depth, side = 0, s0, l0
    if s1 < depth:
        axis, depth, side = 1, s1, l1
    if s2 < depth:
        axis, depth, side = 2, s2, l2
    sign = 1.0 if side >= 0.0 else -1.0
    return -depth, sign * obstacle[6 + 3 * axis], sign * obstacle[7 + 3 * axis], sign * obstacle[8 + 3 * axis]


@njit(cache=True, inline="always")
def tangent_axes(axes):
    """Rows 1 and 2 of axes: unit tangents t1, t2 with t1 x t2 = n (row 0), the
    x and y axes for n = z (model.plane_basis)."""
    n0, n1, n2 = axes[0, 0], axes[0, 1], axes[0, 2]
    h0, h1 = (1.0, 0.0) if abs(n0) < 0.9 else (0.0, 1.0)
    along = h0 * n0 + h1 * n1
    f0, f1, f2 = h0 - along * n0, h1 - along * n1, -along * n2
    norm = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
    f0, f1, f2 = f0 / norm, f1 / norm, f2 / norm
    axes[1, 0], axes[1, 1], axes[1, 2] = f0, f1, f2
    axes[2, 0], axes[2, 1], axes[2, 2] = n1 * f2 - n2 * f1, n2 * f0 - n0 * f2, n0 * f1 - n1 * f0


@njit(cache=True, inline="always")
def point_velocity(body_R, body_p, vel, b, x0, x1, x2):
    """The world velocity of the world point x moving with body b, whose body
    twist is vel[b]: R_b u + (R_b w) x (x - p_b)."""
    w, u, Rb = vel[b, :3], vel[b, 3:], body_R[b]
    r0, r1, r2 = x0 - body_p[b, 0], x1 - body_p[b, 1], x2 - body_p[b, 2]
    w0 = Rb[0, 0] * w[0] + Rb[0, 1] * w[1] + Rb[0, 2] * w[2]
    w1 = Rb[1, 0] * w[0] + Rb[1, 1] * w[1] + Rb[1, 2] * w[2]
    w2 = Rb[2, 0] * w[0] + Rb[2, 1] * w[1] + Rb[2, 2] * w[2]
    return (Rb[0, 0] * u[0] + Rb[0, 1] * u[1] + Rb[0, 2] * u[2] + w1 * r2 - w2 * r1,
            Rb[1, 0] * u[0] + Rb[1, 1] * u[1] + Rb[1, 2] * u[2] + w2 * r0 - w0 * r2,
            Rb[2, 0] * u[0] + Rb[2, 1] * u[1] + Rb[2, 2] * u[2] + w0 * r1 - w1 * r0)


@njit(cache=True, inline="always")
def point_positions(packed, q, contacts, buffer, positions, placed):
    """positions (k, 3) = the world positions of the contact points' centres at
    q, from the bodies' placements in buffer's kinematic views, computed there
    first unless `placed` (crba_kernel leaves them at its q)."""
    kinematics, o = kinematic_views(buffer, body_count(packed))
    if not placed:
        body_poses_kernel(packed, q, kinematics.R, kinematics.p, kinematics.S, kinematics.world_R,
                          kinematics.world_p)
    body_R, body_p = kinematics.world_R, kinematics.world_p
    for k in range(contacts.bodies.shape[0]):
        b, x = contacts.bodies[k], contacts.points[k]
        if b < 0:
            positions[k, 0], positions[k, 1], positions[k, 2] = x[0], x[1], x[2]
            continue
        for r in range(3):
            positions[k, r] = body_p[b, r] + body_R[b, r, 0] * x[0] + body_R[b, r, 1] * x[1] + body_R[b, r, 2] * x[2]
    return kinematics, o


@njit(cache=True, inline="always")
def body_twists(model, kinematics, v, vel):
    """vel[i] = the body twist of every body at velocity v (joints.body_velocity)."""
    for i in range(model.parent.shape[0]):
        body_velocity(model, i, kinematics.R, kinematics.p, kinematics.S, v, vel)


@njit(cache=True, inline="always")
def within_reach(contacts, obstacles, positions, kinematics, vel, dt, margin, gaps):
    """Whether some point is within `margin` of an obstacle or reaches it within
    the step at its present velocity (body twists vel): the smooth integrator
    then must not take the step. gaps (k,): each point's distance from the
    nearest obstacle."""
    reach = False
    for k in range(contacts.bodies.shape[0]):
        gaps[k] = np.inf
        b = contacts.bodies[k]
        if b < 0:
            continue
        x0, x1, x2 = positions[k, 0], positions[k, 1], positions[k, 2]
        for o in range(obstacles.shape[0]):
            gap, n0, n1, n2 = obstacle_distance(obstacles[o], x0, x1, x2)
            gap -= contacts.radii[k]
            gaps[k] = min(gaps[k], gap)
            if gap > margin + dt * 100.0 or reach:  # beyond any speed a robot reaches
                continue
            u0, u1, u2 = point_velocity(kinematics.world_R, kinematics.world_p, vel, b, x0, x1, x2)
            if gap + dt * min(0.0, n0 * u0 + n1 * u1 + n2 * u2) <= margin:
                reach = True
    return reach


@njit(cache=True, inline="always")
def contact_pairs(contacts, obstacles, positions, kinematics, vel, free_vel, step, gaps, work):
    """The point-obstacle pairs within `margin` or reaching each other within
    the step at the free velocity (body twists free_vel), with the bias b of
    their normal rows (module docstring: a gap closed, a penetration pushed
    out, or an impact's bounce), their contact axes and contact points. gaps
    (k,) each point's distance from the nearest obstacle at the step's start;
    the pairs are laid out in work's pair arrays."""
    npoints, nobstacles, dt = contacts.bodies.shape[0], obstacles.shape[0], step.dt
    point, obstacle, bias, friction = work.pair_point, work.pair_obstacle, work.pair_bias, work.pair_friction
    axes, location = work.axes, work.location
    count = 0
    for k in range(npoints):
        gaps[k] = np.inf
        b = contacts.bodies[k]
        if b < 0:
            continue
        radius = contacts.radii[k]
        for o in range(nobstacles):
            gap, n0, n1, n2 = obstacle_distance(obstacles[o], positions[k, 0], positions[k, 1], positions[k, 2])
            gap -= radius
            gaps[k] = min(gaps[k], gap)
            c0, c1, c2 = positions[k, 0] - radius * n0, positions[k, 1] - radius * n1, positions[k, 2] - radius * n2
            u0, u1, u2 = point_velocity(kinematics.world_R, kinematics.world_p, free_vel, b, c0, c1, c2)
            if gap + dt * min(0.0, n0 * u0 + n1 * u1 + n2 * u2) > step.margin:
                continue
            bias_k = closing_speed(gap, dt, step.stabilization)
            restitution = obstacles[o, 2]
            if restitution > 0.0:
                s0, s1, s2 = point_velocity(kinematics.world_R, kinematics.world_p, vel, b, c0, c1, c2)
                approach = n0 * s0 + n1 * s1 + n2 * s2
                if approach < -BOUNCE_SPEED and gap + dt * (n0 * u0 + n1 * u1 + n2 * u2) <= 0.0:
                    bias_k = min(bias_k, restitution * approach)  # it hits within the step: it bounces
            axes[count, 0, 0], axes[count, 0, 1], axes[count, 0, 2] = n0, n1, n2
            tangent_axes(axes[count])
            location[count, 0], location[count, 1], location[count, 2] = c0, c1, c2
            point[count], obstacle[count], bias[count], friction[count] = k, o, bias_k, obstacles[o, 1]
            count += 1
    if count > PATCH_POINTS:
        count = reduce_patches(point, obstacle, bias, axes, location, friction, count, contacts.bodies, gaps)
    return Pairs(point[:count], obstacle[:count], bias[:count], axes[:count], location[:count], friction[:count])


@njit(cache=True)
def reduce_patches(point, obstacle, bias, axes, location, friction, count, bodies, gaps):
    """Keep, of each body's pairs with one obstacle when they are more than
    PATCH_POINTS, the deepest and those extreme along PATCH_DIRECTIONS
    directions of the tangent plane (t1, t2 of the first); compact the pair
    arrays. Returns the new count. Its flags are allocated here, only in the
    steps that have more than PATCH_POINTS pairs."""
    keep = np.ones(count, dtype=np.bool_)
    for first in range(count):
        body, wall = bodies[point[first]], obstacle[first]
        size = 0
        for i in range(first, count):
            if bodies[point[i]] == body and obstacle[i] == wall:
                size += 1
        if size <= PATCH_POINTS:
            continue
        already = False
        for i in range(first):
            if bodies[point[i]] == body and obstacle[i] == wall:
                already = True
                break
        if already:
            continue
        for i in range(first, count):
            if bodies[point[i]] == body and obstacle[i] == wall:
                keep[i] = False
        deepest = first
        for i in range(first, count):
            if bodies[point[i]] == body and obstacle[i] == wall and gaps[point[i]] < gaps[point[deepest]]:
                deepest = i
        keep[deepest] = True
        for d in range(PATCH_DIRECTIONS):
            angle = 2.0 * np.pi * d / PATCH_DIRECTIONS
            c, s = math.cos(angle), math.sin(angle)
            best, extreme = -np.inf, first
            for i in range(first, count):
                if bodies[point[i]] == body and obstacle[i] == wall:
                    along = 0.0
                    for r in range(3):
                        along += (c * axes[first, 1, r] + s * axes[first, 2, r]) * location[i, r]
                    if along > best:
                        best, extreme = along, i
            keep[extreme] = True
    kept = 0
    for i in range(count):
        if keep[i]:
            point[kept], obstacle[kept], bias[kept], friction[kept] = point[i], obstacle[i], bias[i], friction[i]
            axes[kept] = axes[i]
            location[kept] = location[i]
            kept += 1
    return kept


@njit(cache=True, inline="always")
def velocity_walls(q, v_free, terms, step, lowest, highest):
    """Each coordinate's velocity walls (into lowest, highest (nv,)) from the
    position limits it is at or passes within the step, their gaps closed as
    the points' normal rows'."""
    lowest[:] = -np.inf
    highest[:] = np.inf
    walls = 0
    for j in range(terms.limit_q.shape[0]):
        iv, at = terms.limit_v[j], q[terms.limit_q[j]]
        gap = at - terms.lower[j]
        if gap + step.dt * min(0.0, v_free[iv]) <= step.margin:
            lowest[iv] = -closing_speed(gap, step.dt, step.stabilization)
            walls += 1
        gap = terms.upper[j] - at
        if gap - step.dt * max(0.0, v_free[iv]) <= step.margin:
            highest[iv] = closing_speed(gap, step.dt, step.stabilization)
            walls += 1
    return VelocityWalls(lowest, highest, walls)


@njit(cache=True, inline="always")
def joint_row_coordinates(friction, walls, coordinates):
    """The coordinates that get a joint row: with friction or a wall (laid out
    in coordinates (nv,))."""
    nv = friction.shape[0]
    count = 0
    for iv in range(nv):
        if friction[iv] > 0.0 or walls.lowest[iv] > -np.inf or walls.highest[iv] < np.inf:
            coordinates[count] = iv
            count += 1
    return coordinates[:count]


@njit(cache=True, inline="always")
def pair_rows(model, rows, pairs, bodies, kinematics, v_free, warm_start, jacobian):
    """Each pair's rows G = axes J_c (J_c: the Jacobian of its contact point),
    c = G v_free + (b on the normal row), the warm start its previous impulses
    (the normal one >= 0). jacobian (6, nv): scratch."""
    nv = v_free.shape[0]
    G, deepest, c, impulses = rows
    for i in range(pairs.point.shape[0]):
        jacobian[:] = 0.0
        add_point_jacobian(model, kinematics.S, kinematics.world_R, kinematics.world_p, bodies[pairs.point[i]],
                           pairs.location[i], jacobian)
        axes = pairs.axes[i]
        for a in range(3):
            row = 3 * i + a
            deepest[row] = -1
            for col in range(nv):
                G[row, col] = axes[a, 0] * jacobian[3, col] + axes[a, 1] * jacobian[4, col] \
                    + axes[a, 2] * jacobian[5, col]
                if G[row, col] != 0.0:
                    deepest[row] = col
            total = pairs.bias[i] if a == 0 else 0.0
            for col in range(nv):
                total += G[row, col] * v_free[col]
            c[row] = total
            impulses[row] = warm_start[pairs.point[i], pairs.obstacle[i], a]
        impulses[3 * i] = max(impulses[3 * i], 0.0)


@njit(cache=True, inline="always")
def joint_rows(rows, first, coordinates, v_free, walls, joint_friction, dt, joint_warm_start):
    """The joint rows from row `first` on, one per coordinate: G its unit row,
    c its free velocity; and their laws (coulomb.joint_impulse): the friction
    impulse's bound f dt and the walls. The warm start its previous impulse,
    within the friction bound on a side with no wall. Returns (bound, lowest,
    highest)."""
    G, deepest, c, impulses = rows
    count = coordinates.shape[0]
    bound, lowest, highest = np.empty(count), np.empty(count), np.empty(count)
    for j in range(count):
        row, iv = first + j, coordinates[j]
        G[row, iv], deepest[row], c[row] = 1.0, iv, v_free[iv]
        bound[j], lowest[j], highest[j] = joint_friction[iv] * dt, walls.lowest[iv], walls.highest[iv]
        impulses[row] = min(max(joint_warm_start[iv], -bound[j] if highest[j] == np.inf else -np.inf),
                            bound[j] if lowest[j] == -np.inf else np.inf)
    return bound, lowest, highest


@njit(cache=True, inline="always")
def delassus(L, dof_parent, rows, compliance):
    """W = G M⁻¹ G^T = Y Y^T with Y = L^-T G^T (M = L^T L), its diagonal times
    1 + compliance: G's rows are overwritten by Y's, each zero off the same
    path to the root."""
    G, deepest = rows.G, rows.deepest
    m = G.shape[0]
    for row in range(m):
        ltl_solve_transposed_chain(L, dof_parent, G[row], deepest[row])
    W = np.empty((m, m))
    for r in range(m):
        for s in range(r + 1):
            total = 0.0
            col = deepest[r]
            while col >= 0:
                total += G[r, col] * G[s, col]
                col = dof_parent[col]
            W[r, s] = total
            W[s, r] = total
        W[r, r] *= 1.0 + compliance
    return W


@njit(cache=True, inline="always")
def velocity_change(L, dof_parent, rows):
    """M⁻¹ G^T λ = L⁻¹ Y^T λ, from the rows Y that delassus() left."""
    Y, deepest, impulses = rows.G, rows.deepest, rows.impulses
    change = np.zeros(Y.shape[1])
    for row in range(Y.shape[0]):
        col = deepest[row]
        while col >= 0:
            change[col] += Y[row, col] * impulses[row]
            col = dof_parent[col]
    ltl_solve_lower(L, dof_parent, change)
    return change


# Scratch arrays of simulate_kernel, laid out once per call (step_work): M and
# its copy, h, the actuators' effective effort and damping and their clamps, v
# after a pass, the points' positions, the body twists at v and at v_free, room
# for the pairs' axes and contact points, a Jacobian, the smooth integrator's
# stages, the rows, and q after the step.
StepWork = namedtuple("StepWork", "M M_nominal h effort damping clamp v_next positions vel free_vel axes location "
                                  "jacobian stage_x stage_v q_stage v_stage G deepest c impulses pair_point "
                                  "pair_obstacle pair_bias pair_friction lowest highest coordinates zero no_force q_next")


@njit(cache=True, inline="always")
def step_work(nq, nv, nbodies, npoints, nobstacles):
    """(StepWork, floats, ints): the work arrays as untracked views
    (workspace.take) of one float and one int buffer, which the caller keeps
    alive while it uses them: a tracked array costs two atomic reference
    counts at every call it is passed to."""
    pairs = npoints * nobstacles
    rows = 3 * pairs + nv
    floats = np.empty(2 * nv * nv + 23 * nv + 3 * npoints + 12 * nbodies + 14 * pairs + 2 * nq + rows * nv
                      + 2 * rows)
    ints = np.empty(rows + 2 * pairs + nv, dtype=np.int64)
    M, o = take(floats, 0, (nv, nv))
    M_nominal, o = take(floats, o, (nv, nv))
    h, o = take(floats, o, (nv,))
    effort, o = take(floats, o, (nv,))
    damping, o = take(floats, o, (nv,))
    clamp, o = take(floats, o, (nv,))
    v_next, o = take(floats, o, (nv,))
    positions, o = take(floats, o, (npoints, 3))
    vel, o = take(floats, o, (nbodies, 6))
    free_vel, o = take(floats, o, (nbodies, 6))
    axes, o = take(floats, o, (pairs, 3, 3))
    location, o = take(floats, o, (pairs, 3))
    jacobian, o = take(floats, o, (6, nv))
    stage_x, o = take(floats, o, (4, nv))
    stage_v, o = take(floats, o, (4, nv))
    q_stage, o = take(floats, o, (nq,))
    v_stage, o = take(floats, o, (nv,))
    G, o = take(floats, o, (rows, nv))
    c, o = take(floats, o, (rows,))
    impulses, o = take(floats, o, (rows,))
    pair_bias, o = take(floats, o, (pairs,))
    pair_friction, o = take(floats, o, (pairs,))
    lowest, o = take(floats, o, (nv,))
    highest, o = take(floats, o, (nv,))
    zero, o = take(floats, o, (nv,))
    no_force, o = take(floats, o, (0, 6))
    q_next, o = take(floats, o, (nq,))
    deepest, o = take(ints, 0, (rows,))
    pair_point, o = take(ints, o, (pairs,))
    pair_obstacle, o = take(ints, o, (pairs,))
    coordinates, o = take(ints, o, (nv,))
    clamp[:] = 0.0
    zero[:] = 0.0
    return StepWork(M, M_nominal, h, effort, damping, clamp, v_next, positions, vel, free_vel, axes, location, jacobian,
                    stage_x, stage_v, q_stage, v_stage, G, deepest, c, impulses, pair_point, pair_obstacle, pair_bias,
                    pair_friction, lowest, highest, coordinates, zero, no_force, q_next), floats, ints


@njit(cache=True, inline="always")
def has_gains(actuation):
    for r in range(actuation.stiffness.shape[0]):
        if actuation.stiffness[r] > 0.0 or actuation.damping[r] > 0.0:
            return True
    return False


@njit(cache=True, inline="always")
def actuated_terms(actuation, terms, q, work, dt):
    """work.effort and work.damping: the commanded effort with the PD terms
    K (q* - q) + B v*, and the joint damping with B + dt K (module docstring);
    an actuator clamped (work.clamp = ±1) applies its limit instead."""
    for r in range(work.effort.shape[0]):
        stiffness, damping = actuation.stiffness[r], actuation.damping[r]
        if work.clamp[r] != 0.0:
            work.effort[r] = work.clamp[r] * actuation.limit[r]
            work.damping[r] = terms.damping[r]
            continue
        effort = actuation.effort[r] + damping * actuation.velocity_target[r]
        if actuation.target_q[r] >= 0:
            effort += stiffness * (actuation.position_target[r] - q[actuation.target_q[r]])
        work.effort[r] = effort
        work.damping[r] = terms.damping[r] + damping + dt * stiffness


@njit(cache=True, inline="always")
def newly_clamped(actuation, q, v_next, work, dt, applied):
    """applied (nv,) = each actuator's effort at v⁺ = v_next; the unclamped ones
    that pass their limit are clamped (work.clamp). Returns whether any was."""
    more = False
    for r in range(applied.shape[0]):
        stiffness, damping = actuation.stiffness[r], actuation.damping[r]
        if work.clamp[r] != 0.0:
            applied[r] = work.clamp[r] * actuation.limit[r]
            continue
        if stiffness == 0.0 and damping == 0.0:
            applied[r] = actuation.effort[r]
            continue
        effort = actuation.effort[r] + damping * (actuation.velocity_target[r] - v_next[r])
        if actuation.target_q[r] >= 0:
            effort += stiffness * (actuation.position_target[r] - q[actuation.target_q[r]] - dt * v_next[r])
        applied[r] = effort
        if abs(effort) > actuation.limit[r]:
            work.clamp[r] = 1.0 if effort > 0.0 else -1.0
            applied[r] = work.clamp[r] * actuation.limit[r]
            more = True
    return more


@njit(cache=True, inline="always")
def add_body_wrench(body_R, body_p, b, x, f0, f1, f2, wrenches):
    """wrenches[b] += the world force f at the world point x, as [torque;
    force] in body b's frame about its origin."""
    r0, r1, r2 = x[0] - body_p[b, 0], x[1] - body_p[b, 1], x[2] - body_p[b, 2]
    t0, t1, t2 = r1 * f2 - r2 * f1, r2 * f0 - r0 * f2, r0 * f1 - r1 * f0
    R = body_R[b]
    for c in range(3):
        wrenches[b, c] += R[0, c] * t0 + R[1, c] * t1 + R[2, c] * t2
        wrenches[b, 3 + c] += R[0, c] * f0 + R[1, c] * f1 + R[2, c] * f2


@njit(cache=True, inline="always")
def implicit_step(packed, dof_parent, world, actuation, step, state, results, work, buffer):
    """One velocity-level step (module docstring) from state.q, state.v:
    work.v_next = v⁺; the warm starts and results written. Returns (status,
    sweeps, residual, limits, pivot, softened): softened, whether the rows
    were solved softer than step.compliance (SOFTENINGS)."""
    model = unpack_model(packed)
    contacts, obstacles, terms = world
    q, v = state.q, state.v
    nv = v.shape[0]
    if rnea_kernel(packed, q, v, work.zero, work.no_force, work.h, buffer) \
            or crba_kernel(packed, q, work.M_nominal, buffer):
        return NONFINITE_RESULT, 0, 0.0, 0, -1, False  # the inputs were checked: what else fails is overflow
    kinematics, _ = point_positions(packed, q, contacts, buffer, work.positions, True)
    touchable = contacts.bodies.shape[0] > 0 and obstacles.shape[0] > 0
    if touchable:
        body_twists(model, kinematics, v, work.vel)
    work.clamp[:] = 0.0
    sweeps, residual, limits, softened = 0, 0.0, 0, False
    for _ in range(MAX_ACTUATOR_PASSES):
        actuated_terms(actuation, terms, q, work, step.dt)
        M = work.M
        M[:] = work.M_nominal
        v_free, pivot = free_velocity(M, work.h, v, work.effort, work.damping, step.dt, dof_parent)
        if pivot >= 0:
            return SINGULAR_MASS_MATRIX, 0, 0.0, 0, pivot, False
        if touchable:
            body_twists(model, kinematics, v_free, work.free_vel)
        pairs = contact_pairs(contacts, obstacles, work.positions, kinematics, work.vel, work.free_vel, step,
                              results.gaps, work)
        walls = velocity_walls(q, v_free, terms, step, work.lowest, work.highest)
        coordinates = joint_row_coordinates(terms.friction, walls, work.coordinates)
        count, joint_count = pairs.point.shape[0], coordinates.shape[0]
        m = 3 * count + joint_count
        limits = walls.walls
        if m == 0:
            work.v_next[:] = v_free
            impulses = np.empty(0)
            sweeps, residual = 0, 0.0
        else:
            rows = Rows(work.G[:m], work.deepest[:m], work.c[:m], work.impulses[:m])
            rows.G[:] = 0.0
            pair_rows(model, rows, pairs, contacts.bodies, kinematics, v_free, state.impulses, work.jacobian)
            bound, lowest, highest = joint_rows(rows, 3 * count, coordinates, v_free, walls, terms.friction, step.dt,
                                                state.joint_impulses)
            problem = CoulombProblem(delassus(M, dof_parent, rows, step.compliance), rows.c, pairs.friction, bound,
                                     lowest, highest)
            u = np.empty(m)
            solver = solve_coulomb(problem, rows.impulses, u, step.tolerance, step.max_iterations)
            sweeps, residual = solver.sweeps, solver.residual
            compliance = step.compliance
            for _ in range(SOFTENINGS):
                if residual <= step.tolerance:
                    break
                softer = max(SOFTENING * compliance, SOFTENED_COMPLIANCE)
                for r in range(m):
                    problem.W[r, r] *= (1.0 + softer) / (1.0 + compliance)
                compliance, softened = softer, True
                solver = solve_coulomb(problem, rows.impulses, u, step.tolerance, step.max_iterations)
                sweeps, residual = sweeps + solver.sweeps, solver.residual
            change = velocity_change(M, dof_parent, rows)
            for col in range(nv):
                work.v_next[col] = v_free[col] + change[col]
            impulses = rows.impulses
        if not newly_clamped(actuation, q, work.v_next, work, step.dt, results.applied):
            break
    # the warm starts and what the contacts did, of the last pass
    state.impulses[:] = 0.0
    state.joint_impulses[:] = 0.0
    results.forces[:] = 0.0
    results.touching[:] = False
    results.body_wrenches[:] = 0.0
    for i in range(count):
        k = pairs.point[i]
        results.touching[k] = True
        f0, f1, f2 = 0.0, 0.0, 0.0
        for a in range(3):
            impulse = impulses[3 * i + a]
            state.impulses[k, pairs.obstacle[i], a] = impulse
            f0 += impulse * pairs.axes[i, a, 0] / step.dt
            f1 += impulse * pairs.axes[i, a, 1] / step.dt
            f2 += impulse * pairs.axes[i, a, 2] / step.dt
        results.forces[k, 0] += f0
        results.forces[k, 1] += f1
        results.forces[k, 2] += f2
        add_body_wrench(kinematics.world_R, kinematics.world_p, contacts.bodies[k], pairs.location[i], f0, f1, f2,
                        results.body_wrenches)
    for j in range(joint_count):
        state.joint_impulses[coordinates[j]] = impulses[3 * count + j]
    results.joint_impulses[:] = state.joint_impulses
    return (0 if all_finite(work.v_next) else NONFINITE_RESULT), sweeps, residual, limits, -1, softened


@njit(cache=True, inline="always")
def add_bracket(x, y, scale, out):
    """out += scale [x, y] = scale ad(x) y for twists x = [w; u], y (lie.ad)."""
    w0, w1, w2, u0, u1, u2 = x[0], x[1], x[2], x[3], x[4], x[5]
    out[0] += scale * (w1 * y[2] - w2 * y[1])
    out[1] += scale * (w2 * y[0] - w0 * y[2])
    out[2] += scale * (w0 * y[1] - w1 * y[0])
    out[3] += scale * (u1 * y[2] - u2 * y[1] + w1 * y[5] - w2 * y[4])
    out[4] += scale * (u2 * y[0] - u0 * y[2] + w2 * y[3] - w0 * y[5])
    out[5] += scale * (u0 * y[1] - u1 * y[0] + w0 * y[4] - w1 * y[3])


@njit(cache=True, inline="always")
def increment_rate(model, increment, velocity, rate, lie_group):
    """rate = X' for the stage q0 ⊕ X moving at `velocity`: the velocity itself,
    or, with lie_group, for each floating joint dexp⁻¹_{-X}(V) = V + ½ [X, V] +
    1/12 [X, [X, V]] - 1/720 ad_X⁴ V (integrators.dexp_inverse)."""
    rate[:] = velocity
    if not lie_group:
        return
    for body in range(model.joint_type.shape[0]):
        if model.joint_type[body] != FLOATING:
            continue
        s = model.v_start[body]
        X, V = increment[s:s + 6], velocity[s:s + 6]
        a1, a2, a3, a4 = np.zeros(6), np.zeros(6), np.zeros(6), np.zeros(6)
        add_bracket(X, V, 1.0, a1)
        add_bracket(X, a1, 1.0, a2)
        add_bracket(X, a2, 1.0, a3)
        add_bracket(X, a3, 1.0, a4)
        for r in range(6):
            rate[s + r] = V[r] + 0.5 * a1[r] + a2[r] / 12.0 - a4[r] / 720.0


@njit(cache=True)
def smooth_step(packed, q, v, effort, damping, dt, lie_group, work, q_out, v_out, buffer):
    """(q_out, v_out) one RK4 step (RKMK4 with lie_group) of q' = q v,
    v' = FD(q, v, effort - damping v) (integrators.step, compiled). Returns
    aba_kernel's status."""
    model = unpack_model(packed)
    nv = v.shape[0]
    no_force = np.empty((0, 6))
    increment, tau = np.zeros(nv), np.empty(nv)
    weights = (0.0, 0.5, 0.5, 1.0)
    for s in range(4):
        for r in range(nv):
            increment[r] = 0.0 if s == 0 else weights[s] * dt * work.stage_x[s - 1, r]
            work.v_stage[r] = v[r] + (0.0 if s == 0 else weights[s] * dt * work.stage_v[s - 1, r])
            tau[r] = effort[r] - damping[r] * work.v_stage[r]
        integrate_kernel(packed, q, increment, 1.0, work.q_stage)
        increment_rate(model, increment, work.v_stage, work.stage_x[s], lie_group)
        status = aba_kernel(packed, work.q_stage, work.v_stage, tau, no_force, work.stage_v[s], buffer)
        if status != 0:
            return status
    for r in range(nv):
        increment[r] = dt / 6.0 * (work.stage_x[0, r] + 2.0 * work.stage_x[1, r] + 2.0 * work.stage_x[2, r]
                                   + work.stage_x[3, r])
        v_out[r] = v[r] + dt / 6.0 * (work.stage_v[0, r] + 2.0 * work.stage_v[1, r] + 2.0 * work.stage_v[2, r]
                                      + work.stage_v[3, r])
    integrate_kernel(packed, q, increment, 1.0, q_out)
    return 0


@njit(cache=True, nogil=True)  # the simulator node's other threads run meanwhile
def simulate_kernel(packed, dof_parent, world, actuation, settings, state, results, buffer):
    """settings.steps steps (module docstring) from state (q, v, warm starts),
    written in place, under the actuation (constant over the call). world =
    (contacts (bodies, points, radii), obstacles (m, OBSTACLE_FLOATS),
    joint_terms()); actuation: the Actuation arrays; settings:
    np.array((dt, stabilization, margin, tolerance, max_iterations, integrator,
    compliance, steps)); state: the StepState arrays; results: the StepResults
    arrays, of the last step. Stops at a step it cannot take (the state is
    the one before it). Returns a StepReport."""
    # every array as an untracked view (workspace.untracked): the arguments live until the kernel returns
    packed, buffer, dof_parent = (untracked(packed[0]), untracked(packed[1])), untracked(buffer), untracked(dof_parent)
    model = unpack_model(packed)
    step = step_settings(settings)
    nq, nv = state[0].shape[0], state[1].shape[0]
    contacts = ContactPoints(untracked(world[0][0]), untracked(world[0][1]), untracked(world[0][2]))
    obstacles, terms = untracked(world[1]), unpack_joint_terms(world[2], nv)  # (terms: untracked already)
    actuation = Actuation(untracked(actuation[0]), untracked(actuation[1]), untracked(actuation[2]),
                          untracked(actuation[3]), untracked(actuation[4]), untracked(actuation[5]),
                          untracked(actuation[6]))
    state = StepState(untracked(state[0]), untracked(state[1]), untracked(state[2]), untracked(state[3]))
    results = StepResults(untracked(results[0]), untracked(results[1]), untracked(results[2]), untracked(results[3]),
                          untracked(results[4]), untracked(results[5]), untracked(results[6]))
    q, v = state.q, state.v
    npoints, nobstacles = contacts.bodies.shape[0], obstacles.shape[0]
    work, work_floats, work_ints = step_work(nq, nv, model.parent.shape[0], npoints, nobstacles)
    q_next = work.q_next
    gains = has_gains(actuation)
    friction = False
    for r in range(nv):
        friction = friction or terms.friction[r] > 0.0
    smooth_possible = step.integrator != EULER and not gains and not friction
    unconverged, smooth, sweeps, residual, limits, softened = 0, 0, 0, 0.0, 0, 0
    for taken in range(step.steps):
        if invalid(model, q, v, actuation.effort):
            return failure(INVALID_INPUT, taken, unconverged, smooth, softened)
        take_smooth = False
        if smooth_possible:
            kinematics, _ = point_positions(packed, q, contacts, buffer, work.positions, False)
            body_twists(model, kinematics, v, work.vel)
            walls = velocity_walls(q, v, terms, step, work.lowest, work.highest)
            take_smooth = walls.walls == 0 and not within_reach(contacts, obstacles, work.positions, kinematics,
                                                                 work.vel, step.dt, step.margin, results.gaps)
        if take_smooth:
            status = smooth_step(packed, q, v, actuation.effort, terms.damping, step.dt, step.integrator == RKMK4,
                                 work, q_next, work.v_next, buffer)
            if status < 0:  # a singular articulated inertia: the mass matrix is singular
                body = -1 - status
                return failure(SINGULAR_MASS_MATRIX, taken, unconverged, smooth, softened, model.v_start[body])
            if status != 0:
                return failure(NONFINITE_RESULT, taken, unconverged, smooth, softened)
            state.impulses[:] = 0.0
            state.joint_impulses[:] = 0.0
            results.forces[:] = 0.0
            results.touching[:] = False
            results.joint_impulses[:] = 0.0
            results.body_wrenches[:] = 0.0
            results.applied[:] = actuation.effort
            sweeps, step_residual, limits = 0, 0.0, 0
            smooth += 1
        else:
            status, sweeps, step_residual, limits, pivot, step_softened = implicit_step(packed, dof_parent, (contacts, obstacles, terms),
                                                                         actuation, step, state, results, work,
                                                                         buffer)
            if status != 0:
                return failure(status, taken, unconverged, smooth, softened, pivot)
            if step_residual > step.tolerance:
                unconverged += 1
            if step_softened:
                softened += 1
            integrate_kernel(packed, q, work.v_next, step.dt, q_next)
        if not (all_finite(q_next) and all_finite(work.v_next)):
            return failure(NONFINITE_RESULT, taken, unconverged, smooth, softened)
        residual = max(residual, step_residual)
        for r in range(nv):
            results.acceleration[r] = (work.v_next[r] - v[r]) / step.dt
        q[:] = q_next
        v[:] = work.v_next
    # the work buffers used last here: numba frees an array after its last use, and `work` views them
    steps = step.steps + 0 * (work_floats.shape[0] + work_ints.shape[0])
    return StepReport(0, sweeps, residual, limits, -1, steps, unconverged, smooth, softened)


# --- the Python step ----------------------------------------------------------------


@lru_cache(maxsize=32)
def _resolve(model: Model, points: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bodies, points in body coordinates, radii 0) of PointContacts."""
    for point in points:
        if not isinstance(point, PointContact):
            raise ValueError(f"contact points must be PointContact(frame, point), got {point!r}")
    if not points:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 3)), np.zeros(0)
    offsets = np.array([np.asarray(point.point, dtype=float) for point in points])
    if offsets.shape != (len(points), 3) or not np.all(np.isfinite(offsets)):
        raise ValueError(f"contact points must be 3 finite numbers each, got {[p.point for p in points]}")
    bodies, rotations, translations = frame_placements(model, tuple(point.frame for point in points))
    return bodies, np.einsum("kij,kj->ki", rotations, offsets) + translations, np.zeros(len(points))


@lru_cache(maxsize=32)
def position_limits(model: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(q indices, v indices, lower, upper) of the one-coordinate joints with a
    finite position limit (URDF revolute and prismatic joints)."""
    rows = []
    for body, name in enumerate(model.body_joint_names):
        if name not in model.joint_names or model.nv_joint[body] != 1:
            continue  # a fixed joint, a mimic joint following its master, a floating or planar joint
        qi, vi = int(model.q_start[body]), int(model.v_start[body])
        lower, upper = model.lower_position_limit[qi], model.upper_position_limit[qi]
        if np.isfinite(lower) or np.isfinite(upper):
            rows.append((qi, vi, lower, upper))
    limit_q = np.array([r[0] for r in rows], dtype=np.int64)
    limit_v = np.array([r[1] for r in rows], dtype=np.int64)
    return limit_q, limit_v, np.array([r[2] for r in rows], dtype=float), np.array([r[3] for r in rows], dtype=float)


@lru_cache(maxsize=32)
def joint_terms(model: Model, limits: bool, damping: bool, friction: bool) -> tuple[np.ndarray, np.ndarray]:
    """The JointTerms of simulate_kernel packed as (floats, ints): damping
    and friction (nv,), zero where off, the position limits' lower and upper
    bounds; the number of limits, their q and v indices (none where off).
    Read-only: they are cached, and shared by every step of the model."""
    limit_q, limit_v, lower, upper = position_limits(model) if limits else _NO_LIMITS
    zeros = np.zeros(model.nv)
    floats = np.concatenate([model.damping if damping else zeros, model.friction if friction else zeros, lower, upper])
    ints = np.concatenate([[limit_q.shape[0]], limit_q, limit_v]).astype(np.int64)
    for array in (floats, ints):
        array.setflags(write=False)
    return floats, ints


_NO_LIMITS = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0))


def effort_actuation(model: Model, tau: np.ndarray) -> tuple:
    """The Actuation of efforts tau alone (no gains; the limits, unused, the model's)."""
    zeros = np.zeros(model.nv)
    return (tau, zeros, zeros, model.effort_limit, np.full(model.nv, -1, dtype=np.int64), zeros, zeros)


def contact_step(model: Model, q, v, tau, dt: float, points=(), ground: Ground = DEFAULT_GROUND, *, warm_start=None,
                 joint_warm_start=None, tolerance: float = 1e-10, max_iterations: int = 200, stabilization: float = 0.2,
                 margin: float = 1e-4, joint_limits: bool = False, joint_damping: bool = False,
                 joint_friction: bool = False) -> ContactStep:
    """One time step of `dt` with the `points` (PointContact: a point fixed in a
    frame) in unilateral frictional contact with `ground` (module docstring):
    semi-implicit Euler with contact impulses, first order. warm_start and
    joint_warm_start: the previous step's `impulses` and `joint_impulses`. Points within `margin` (m) of the ground, or
    predicted to reach it within the step, enter the solver; it stops at
    `tolerance` (m/s) or after `max_iterations` sweeps (then converged is False
    and the step is the last sweep's).

    The joints, from the URDF: joint_limits holds the position limits as
    unilateral constraints (entering the solver as the points do);
    joint_damping applies the viscous damping, implicitly; joint_friction the
    Coulomb friction, as impulses bounded by friction x dt that stop a joint
    they can hold."""
    dt = float(dt)
    if not np.isfinite(dt) or dt <= 0:
        raise ValueError(f"dt must be a positive finite number, got {dt}")
    if not 0.0 <= stabilization <= 1.0:
        raise ValueError(f"stabilization must be in [0, 1], got {stabilization}")
    q = np.array(inputs.shaped(model, q, model.nq, "q", batch=False), dtype=float)
    v = np.array(inputs.shaped(model, v, model.nv, "v", batch=False), dtype=float)
    tau = inputs.shaped(model, tau, model.nv, "tau", batch=False)
    contacts = _resolve(model, tuple(points))
    npoints = contacts[0].shape[0]
    if warm_start is None:
        warm_start = np.zeros((npoints, 1, 3))
    else:
        warm_start = np.asarray(warm_start, dtype=float)
        if warm_start.shape != (npoints, 3):
            raise ValueError(f"warm_start must have shape ({npoints}, 3), got {warm_start.shape}")
        warm_start = warm_start.reshape(npoints, 1, 3).copy()
    joint_warm_start = (np.zeros(model.nv) if joint_warm_start is None
                        else np.array(inputs.shaped(model, joint_warm_start, model.nv, "joint_warm_start",
                                                    batch=False), dtype=float))
    settings = np.array((dt, float(stabilization), float(margin), float(tolerance), int(max_iterations), EULER, 0.0, 1))
    q_in, v_in = q.copy(), v.copy()
    results = (np.empty((npoints, 3)), np.empty(npoints), np.empty(npoints, dtype=np.bool_), np.empty(model.nv),
               np.empty(model.nv), np.empty(model.nv), np.empty((model.nbodies, 6)))
    report = simulate_kernel(model.packed, model.dof_parent,
                             (contacts, np.array(ground.row).reshape(1, -1),
                              joint_terms(model, joint_limits, joint_damping, joint_friction)),
                             effort_actuation(model, tau), settings, (q, v, warm_start, joint_warm_start), results,
                             scratch(model))
    if report.status == SINGULAR_MASS_MATRIX:
        raise singular_mass_matrix(model, model.velocity_joint(report.pivot))
    inputs.refuse(model, report.status, "the contact step", q_in, (v_in, "v"), (tau, "tau"))
    forces, gaps, touching, joint_impulses = results[:4]
    return ContactStep(q, v, forces, warm_start[:, 0, :], touching, gaps, report.sweeps, report.residual,
                       report.residual <= tolerance, joint_impulses, report.limits)
