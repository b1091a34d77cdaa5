"""Unilateral contact with Coulomb friction, for simulation: points of the robot
against a ground plane, by velocity-level time stepping (Moreau-Jean; the
impulse form of the constrained dynamics of F&O §3.4 and RBDL §2.3).

One step of `dt` from (q, v) under the joint forces tau:

    v_free = v + dt M⁻¹ (tau - h)
    v⁺     = v_free + M⁻¹ G^T λ          (λ: the contact impulses)
    q⁺     = q ⊕ dt v⁺

with, for each touching point, the rows G = [n; t1; t2] J_p of its velocity
along the ground normal n and two tangents, u = G v⁺ = W λ + c, W = G M⁻¹ G^T
(the Delassus operator) and c = G v_free + (bias on the normal row), and the
Coulomb law in its exact cone (not a pyramid):

    no pulling, no penetration   λ_n >= 0,  u_n + b >= 0,  λ_n (u_n + b) = 0
    friction cone                |λ_t| <= μ λ_n
    sticking or sliding          u_t = 0, or λ_t = -μ λ_n u_t / |u_t|

b lets a point that is above the ground by φ close the gap in one step (b =
φ/dt), pushes a point below it out at `stabilization` φ/dt per step, and makes a
point that would reach the ground within the step, approaching faster than
BOUNCE_SPEED, leave at `restitution` times its approach speed (Newton's law of
restitution, applied at the start of the step: the bounce is placed to within
one step's travel).

The joints add rows of their own, one per coordinate with Coulomb friction or
at (or reaching within the step) a position limit, G = the coordinate's unit
row, whose law is coulomb.joint_impulse; their viscous damping D is implicit:
(M + dt D) takes M's place and v_free = v + dt (M + dt D)⁻¹ (tau - h - D v).
The impulses come from coulomb.solve_coulomb on (W, c); the step reports its
accuracy (the largest violation of the law, m/s) and its sweeps.

M is factored once per step as L^T L with the tree's sparsity (crba.ltl_factor),
and W = Y Y^T with Y = L^-T G^T, each row of G zero off one path to the root.
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import njit

from mbs_dynamics import inputs
from mbs_dynamics.aba import singular_mass_matrix
from mbs_dynamics.configuration import integrate_kernel
from mbs_dynamics.contact import PointContact
from mbs_dynamics.coulomb import CoulombProblem, solve_coulomb
from mbs_dynamics.crba import crba_kernel, ltl_factor, ltl_solve, ltl_solve_lower, ltl_solve_transposed_chain
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, SINGULAR_MASS_MATRIX, all_finite, invalid
from mbs_dynamics.kinematics import frame_placements, frames_motion_kernel
from mbs_dynamics.model import Model, plane_basis, unpack_model
from mbs_dynamics.rnea import rnea_kernel
from mbs_dynamics.workspace import scratch, take

# Slower impacts (m/s) do not bounce: a resting contact stays at rest.
BOUNCE_SPEED = 1e-2


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
        if not (np.isfinite(self.friction) and self.friction >= 0.0):
            raise ValueError(f"friction must be finite and >= 0, got {self.friction!r}")
        if not 0.0 <= self.restitution <= 1.0:
            raise ValueError(f"restitution must be in [0, 1], got {self.restitution!r}")
        normal = normal / np.linalg.norm(normal)
        packed = np.concatenate([(self.height, self.friction, self.restitution), normal, plane_basis(normal).ravel()])
        packed.setflags(write=False)
        object.__setattr__(self, "_packed", packed)

    @property
    def contact_axes(self) -> np.ndarray:
        """Rows (n, t1, t2): the unit normal and two tangents, t1 x t2 = n."""
        return self._packed[3:].reshape(3, 3)


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


# --- the compiled step ------------------------------------------------------------
# contact_step_kernel takes its settings packed in plain arrays (a namedtuple
# passed from Python costs a microsecond a call to unbox) and names them here.

# settings: np.array((dt, stabilization, margin, tolerance, max_iterations))
StepSettings = namedtuple("StepSettings", "dt stabilization margin tolerance max_iterations")
# Ground._packed: (height, friction, restitution, the contact axes' 9 entries)
Plane = namedtuple("Plane", "height friction restitution axes")
# joint_terms(): damping and friction (nv,), the position limits of coordinates limit_q
# (velocity index limit_v) between lower and upper
JointTerms = namedtuple("JointTerms", "damping friction limit_q limit_v lower upper")
# The touching points (indices into the contact points) with the biases b of their normal rows
TouchingPoints = namedtuple("TouchingPoints", "index bias")
# The joints' velocity walls (nv,): -inf and inf where none; walls: how many are finite
VelocityWalls = namedtuple("VelocityWalls", "lowest highest walls")
# The constraint rows: G (m, nv), each row zero off the path from coordinate `deepest`
# to the root (-1: all zero), c = G v_free + bias, and the impulses (in: the warm start)
Rows = namedtuple("Rows", "G deepest c impulses")
# What contact_step_kernel reports: its status (0, INVALID_INPUT, NONFINITE_RESULT or
# SINGULAR_MASS_MATRIX, then with `pivot` the velocity index of the vanishing pivot,
# else -1), the solver's sweeps and residual, and the joint limits in the solver.
StepReport = namedtuple("StepReport", "status sweeps residual limits pivot")


@njit(cache=True, inline="always")
def step_settings(settings):
    """The StepSettings packed in `settings`."""
    return StepSettings(settings[0], settings[1], settings[2], settings[3], int(settings[4]))


@njit(cache=True, inline="always")
def ground_plane(ground):
    """The Plane packed in Ground._packed."""
    axes, _ = take(ground, 3, (3, 3))
    return Plane(ground[0], ground[1], ground[2], axes)


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
def failure(status, pivot=-1):
    """The StepReport of a step not taken."""
    return StepReport(status, 0, 0.0, 0, pivot)


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
def touching_points(positions, motion, point_jacobians, v_free, plane, step, gaps, touching):
    """The points within `margin` of the ground or reaching it within the step,
    and the bias b of each one's normal row (module docstring): a gap closed,
    a penetration pushed out, or an impact's bounce. gaps, touching (k,): each
    point's height above the ground, and whether it touches."""
    npoints, nv = positions.shape[0], v_free.shape[0]
    axes, dt = plane.axes, step.dt
    index = np.empty(npoints, dtype=np.int64)
    bias = np.empty(npoints)
    count = 0
    for k in range(npoints):
        gap = -plane.height
        approach, free_approach = 0.0, 0.0
        for r in range(3):
            gap += axes[0, r] * positions[k, r]
            approach += axes[0, r] * motion[k, 0, 3 + r]
            for c in range(nv):
                free_approach += axes[0, r] * point_jacobians[k, r, c] * v_free[c]
        gaps[k] = gap
        touching[k] = False
        if gap + dt * min(0.0, free_approach) > step.margin:
            continue
        touching[k] = True
        b = closing_speed(gap, dt, step.stabilization)
        if plane.restitution > 0.0 and approach < -BOUNCE_SPEED and gap + dt * free_approach <= 0.0:
            b = min(b, plane.restitution * approach)  # it hits the ground within the step: it bounces
        index[count] = k
        bias[count] = b
        count += 1
    return TouchingPoints(index[:count], bias[:count])


@njit(cache=True, inline="always")
def velocity_walls(q, v_free, terms, step):
    """Each coordinate's velocity walls from the position limits it is at or
    passes within the step, their gaps closed as the points' normal rows'."""
    nv = v_free.shape[0]
    lowest, highest = np.full(nv, -np.inf), np.full(nv, np.inf)
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
def joint_row_coordinates(friction, walls):
    """The coordinates that get a joint row: with friction or a wall."""
    nv = friction.shape[0]
    coordinates = np.empty(nv, dtype=np.int64)
    count = 0
    for iv in range(nv):
        if friction[iv] > 0.0 or walls.lowest[iv] > -np.inf or walls.highest[iv] < np.inf:
            coordinates[count] = iv
            count += 1
    return coordinates[:count]


@njit(cache=True, inline="always")
def point_rows(rows, point_jacobians, axes, touching, v_free, warm_start):
    """Each touching point's rows G = axes J_p, c = G v_free + (b on the
    normal row), the warm start its previous impulses (the normal one >= 0)."""
    nv = v_free.shape[0]
    G, deepest, c, impulses = rows
    for i in range(touching.index.shape[0]):
        k = touching.index[i]
        for a in range(3):
            row = 3 * i + a
            deepest[row] = -1
            for col in range(nv):
                G[row, col] = axes[a, 0] * point_jacobians[k, 0, col] + axes[a, 1] * point_jacobians[k, 1, col] \
                    + axes[a, 2] * point_jacobians[k, 2, col]
                if G[row, col] != 0.0:
                    deepest[row] = col
            total = touching.bias[i] if a == 0 else 0.0
            for col in range(nv):
                total += G[row, col] * v_free[col]
            c[row] = total
            impulses[row] = warm_start[k, a]
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
def delassus(L, dof_parent, rows):
    """W = G M⁻¹ G^T = Y Y^T with Y = L^-T G^T (M = L^T L): G's rows are
    overwritten by Y's, each zero off the same path to the root."""
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


@njit(cache=True)
def contact_step_kernel(packed, dof_parent, q, v, tau, contacts, joints, ground, settings, previous, results,
                        buffer):
    """One time step (module docstring). contacts = (bodies, local points) of
    the contact points (k,); joints: joint_terms(); ground: Ground._packed;
    settings: np.array((dt, stabilization, margin, tolerance, max_iterations));
    previous = (impulses (k, 3), joint_impulses (nv,)) the warm start; results
    = (v⁺ (nv,), impulses (k, 3) along the contact axes, gaps (k,), touching
    (k,) bool: the points in the solver, joint_impulses (nv,) what the joint
    limits and joint friction applied), written. Returns a StepReport; a
    status NONFINITE_RESULT when the dynamics or v⁺ overflow."""
    model = unpack_model(packed)
    if invalid(model, q, v, tau):
        return failure(INVALID_INPUT)
    step, plane = step_settings(settings), ground_plane(ground)
    bodies, local_points = contacts
    warm_start, joint_warm_start = previous
    v_out, impulses_out, gaps, touching, joint_impulses = results
    nv, npoints = v.shape[0], bodies.shape[0]
    terms = unpack_joint_terms(joints, nv)
    M = np.empty((nv, nv))
    h = np.empty(nv)
    zero = np.zeros(nv)
    if crba_kernel(packed, q, M, buffer) or rnea_kernel(packed, q, v, zero, np.empty((0, 6)), h, buffer):
        return failure(NONFINITE_RESULT)  # the inputs were checked: what else fails is overflow
    positions, rotations = np.empty((npoints, 3)), np.empty((npoints, 3, 3))
    jacobians, motion = np.empty((npoints, 6, nv)), np.empty((npoints, 2, 6))
    if npoints:
        no_rotation = np.zeros((npoints, 3, 3))  # only the points' positions and velocities matter
        frames_motion_kernel(packed, q, v, bodies, no_rotation, local_points, jacobians, motion, rotations,
                             positions, buffer)
    point_jacobians = jacobians[:, 3:, :]  # and motion[:, 0, 3:] = the points' velocities
    v_free, pivot = free_velocity(M, h, v, tau, terms.damping, step.dt, dof_parent)
    if pivot >= 0:
        return failure(SINGULAR_MASS_MATRIX, pivot)
    L = M  # free_velocity factored M + dt D in place
    touching_now = touching_points(positions, motion, point_jacobians, v_free, plane, step, gaps, touching)
    walls = velocity_walls(q, v_free, terms, step)
    coordinates = joint_row_coordinates(terms.friction, walls)
    impulses_out[:] = 0.0
    joint_impulses[:] = 0.0
    count, joint_count = touching_now.index.shape[0], coordinates.shape[0]
    m = 3 * count + joint_count
    if m == 0:
        v_out[:] = v_free
        return StepReport(0 if all_finite(v_out) else NONFINITE_RESULT, 0, 0.0, walls.walls, -1)
    rows = Rows(np.zeros((m, nv)), np.empty(m, dtype=np.int64), np.empty(m), np.empty(m))
    point_rows(rows, point_jacobians, plane.axes, touching_now, v_free, warm_start)
    bound, lowest, highest = joint_rows(rows, 3 * count, coordinates, v_free, walls, terms.friction, step.dt,
                                        joint_warm_start)
    problem = CoulombProblem(delassus(L, dof_parent, rows), rows.c, np.full(count, plane.friction), bound, lowest,
                             highest)
    solver = solve_coulomb(problem, rows.impulses, np.empty(m), step.tolerance, step.max_iterations)
    change = velocity_change(L, dof_parent, rows)
    for col in range(nv):
        v_out[col] = v_free[col] + change[col]
    for i in range(count):
        for a in range(3):
            impulses_out[touching_now.index[i], a] = rows.impulses[3 * i + a]
    for j in range(joint_count):
        joint_impulses[coordinates[j]] = rows.impulses[3 * count + j]
    status = 0 if all_finite(v_out) else NONFINITE_RESULT
    return StepReport(status, solver.sweeps, solver.residual, walls.walls, -1)


# --- the Python step ----------------------------------------------------------------


@lru_cache(maxsize=32)
def _resolve(model: Model, points: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(bodies, points in body coordinates) of PointContacts."""
    for point in points:
        if not isinstance(point, PointContact):
            raise ValueError(f"contact points must be PointContact(frame, point), got {point!r}")
    if not points:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 3))
    offsets = np.array([np.asarray(point.point, dtype=float) for point in points])
    if offsets.shape != (len(points), 3) or not np.all(np.isfinite(offsets)):
        raise ValueError(f"contact points must be 3 finite numbers each, got {[p.point for p in points]}")
    bodies, rotations, translations = frame_placements(model, tuple(point.frame for point in points))
    return bodies, np.einsum("kij,kj->ki", rotations, offsets) + translations


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
    """The JointTerms of contact_step_kernel packed as (floats, ints): damping
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
    q = inputs.shaped(model, q, model.nq, "q", batch=False)
    v = inputs.shaped(model, v, model.nv, "v", batch=False)
    tau = inputs.shaped(model, tau, model.nv, "tau", batch=False)
    contacts = _resolve(model, tuple(points))
    npoints = contacts[0].shape[0]
    if warm_start is None:
        warm_start = np.zeros((npoints, 3))
    else:
        warm_start = np.asarray(warm_start, dtype=float)
        if warm_start.shape != (npoints, 3):
            raise ValueError(f"warm_start must have shape ({npoints}, 3), got {warm_start.shape}")
    joint_warm_start = (np.zeros(model.nv) if joint_warm_start is None
                        else inputs.shaped(model, joint_warm_start, model.nv, "joint_warm_start", batch=False))
    settings = np.array((dt, float(stabilization), float(margin), float(tolerance), int(max_iterations)))
    v_out, impulses, gaps = np.empty(model.nv), np.empty((npoints, 3)), np.empty(npoints)
    touching, joint_impulses = np.empty(npoints, dtype=np.bool_), np.empty(model.nv)
    report = contact_step_kernel(model.packed, model.dof_parent, q, v, tau, contacts,
                                 joint_terms(model, joint_limits, joint_damping, joint_friction), ground._packed,
                                 settings, (warm_start, joint_warm_start), (v_out, impulses, gaps, touching,
                                                                            joint_impulses), scratch(model))
    if report.status == SINGULAR_MASS_MATRIX:
        raise singular_mass_matrix(model, model.velocity_joint(report.pivot))
    inputs.refuse(model, report.status, "the contact step", q, (v, "v"), (tau, "tau"))
    q_out = np.empty(model.nq)
    integrate_kernel(model.packed, q, v_out, dt, q_out)
    inputs.finite(model, q_out, "the contact step's configuration", (q, "q"), (v_out, "v after the step"))
    forces = impulses @ ground.contact_axes / dt
    return ContactStep(q_out, v_out, forces, impulses, touching, gaps, report.sweeps, report.residual,
                       report.residual <= tolerance, joint_impulses, report.limits)
