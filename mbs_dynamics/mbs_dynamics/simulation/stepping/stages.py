"""The step, stage by stage, compiled: the free velocity, the contact and
joint rows solved for their impulses (implicit_step), or the smooth
integrator (integrator.smooth_step); what the step did written into the
result records; and simulate_kernel, which takes many steps per call."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.algorithms.crba import crba_paths_kernel, ltl_factor, ltl_solve
from mbs_dynamics.collision.shapes import ShapeSet
from mbs_dynamics.algorithms.rnea import pass_body_twists, rnea_kernel
from mbs_dynamics.inputs import INVALID_INPUT, NONFINITE_RESULT, SINGULAR_MASS_MATRIX, all_finite, invalid
from mbs_dynamics.multibody.configuration import integrate_kernel
from mbs_dynamics.multibody.model import unpack_model
from mbs_dynamics.multibody.workspace import readonly, untracked
from mbs_dynamics.simulation.stepping.actuation import actuated_terms, has_gains, newly_clamped
from mbs_dynamics.simulation.stepping.integrator import EULER, RKMK4, smooth_step
from mbs_dynamics.simulation.stepping.islands import solve_islands
from mbs_dynamics.simulation.stepping.collisions import body_pairs, collision_warm_starts
from mbs_dynamics.simulation.stepping.pairs import (
    body_twists,
    contact_pairs,
    pairs_view,
    point_positions,
    rigid_corrections,
    within_reach,
)
from mbs_dynamics.simulation.stepping.rows import (
    Rows,
    clear_rows,
    joint_row_coordinates,
    joint_rows,
    pair_rows,
    transform_rows,
    velocity_change,
    velocity_walls,
    zeroed_rows,
)
from mbs_dynamics.simulation.stepping.work import step_work

# Passes of a step at most: the first, then again with the actuators that passed their limits clamped.
MAX_ACTUATOR_PASSES = 3

# The world a step meets: the bodies' contact points (SPHERE records (k,)), OBSTACLE records (m,), the
# joints' JOINT_TERMS records (nv,) and LIMIT records, the bodies' shapes (collision.ShapeSet) and which
# bodies' shapes may touch (collide (nbodies + 1, nbodies + 1), row and column 0 the world's)
World = namedtuple("World", "spheres obstacles terms limits shapes collide")
# The result records (records.py): POINT (k,), CONTACT (k, m), COORDINATE (nv,), BODY (nbodies,),
# COLLISION (the room for contacts between bodies), REPORT (1,)
StepResults = namedtuple("StepResults", "points contacts coordinates bodies collisions report")
# What one implicit step did: its status, the solver's sweeps and residual, the joint limits in the solver,
# the vanishing pivot (-1: none), whether the rows were solved softer than the compliance, and the contacts
# between bodies that found no room
StepOutcome = namedtuple("StepOutcome", "status sweeps residual limits pivot softened dropped")


@njit(cache=True, inline="always")
def copy_paths(M, dof_parent, target):
    """target's lower triangle on the paths to the root = M's: what ltl_factor reads."""
    for k in range(M.shape[0]):
        j = k
        while j >= 0:
            target[k, j] = M[k, j]
            j = dof_parent[j]


@njit(cache=True, inline="always")
def free_velocity(M, h, v, tau, damping, dt, dof_parent, v_free):
    """v_free (nv,) = v + dt (M + dt D)⁻¹ (tau - h - D v) (stepping's
    docstring), M overwritten by the factor L of M + dt D. Returns (v_free,
    the coordinate whose pivot vanishes or -1)."""
    for r in range(v.shape[0]):
        M[r, r] += dt * damping[r]
        v_free[r] = tau[r] - h[r]
        v_free[r] -= damping[r] * v[r]
    pivot = ltl_factor(M, dof_parent)
    if pivot >= 0:
        return v_free, pivot
    ltl_solve(M, dof_parent, v_free)
    for r in range(v.shape[0]):
        v_free[r] = v[r] + dt * v_free[r]
    return v_free, pivot


@njit(cache=True, inline="always")
def clear_contacts(results):
    """No impulse, force or contact wrench: the results of a step in which
    nothing touched (the warm starts reset with them)."""
    for k in range(results.contacts.shape[0]):
        results.points[k].force[:] = 0.0
        results.points[k].touching = False
        for o in range(results.contacts.shape[1]):
            contact = results.contacts[k, o]
            contact.impulse[:] = 0.0
            contact.velocity[:] = 0.0
            contact.bias = 0.0
            contact.tangent_bias[:] = 0.0
            contact.in_solver = False
    for r in range(results.coordinates.shape[0]):
        results.coordinates[r].joint_impulse = 0.0
    for b in range(results.bodies.shape[0]):
        results.bodies[b].wrench[:] = 0.0
    results.report[0].collisions = 0


@njit(cache=True, inline="always")
def add_body_wrench(body_R, body_p, b, x, f0, f1, f2, wrench):
    """wrench += the world force f at the world point x, as [torque; force] in
    body b's frame about its origin."""
    r0, r1, r2 = x[0] - body_p[b, 0], x[1] - body_p[b, 1], x[2] - body_p[b, 2]
    t0, t1, t2 = r1 * f2 - r2 * f1, r2 * f0 - r0 * f2, r0 * f1 - r1 * f0
    R = body_R[b]
    for c in range(3):
        wrench[c] += R[0, c] * t0 + R[1, c] * t1 + R[2, c] * t2
        wrench[3 + c] += R[0, c] * f0 + R[1, c] * f1 + R[2, c] * f2


@njit(cache=True, inline="always")
def record_rows(pairs, i, impulses, u, diagonal, dt, impulse, velocity):
    """Pair i's impulses and contact velocity after the step (u less the biases
    and the compliance's share of W λ: diagonal), written into impulse and
    velocity (3,); returns its mean force over the step (world)."""
    f0, f1, f2 = 0.0, 0.0, 0.0
    for a in range(3):
        row = 3 * i + a
        impulse[a] = impulses[row]
        bias = pairs.bias[i] if a == 0 else pairs.tangent_bias[i, a - 1]
        velocity[a] = u[row] - bias - diagonal[row] * impulses[row]
        f0 += impulses[row] * pairs.axes[i, a, 0] / dt
        f1 += impulses[row] * pairs.axes[i, a, 1] / dt
        f2 += impulses[row] * pairs.axes[i, a, 2] / dt
    return f0, f1, f2


@njit(cache=True, inline="always")
def record_collision(pairs, i, impulses, u, diagonal, kinematics, dt, results):
    """Pair i, a contact between bodies: its COLLISION record, and its force
    on each body's wrench (b takes it, a its opposite)."""
    record = results.collisions[results.report[0].collisions]
    results.report[0].collisions += 1
    record.shape_a, record.shape_b, record.body_a, record.body_b = pairs.shape_a[i], pairs.shape_b[i], \
        pairs.body_a[i], pairs.body_b[i]
    record.location[:] = pairs.location[i]
    record.axes[:] = pairs.axes[i]
    record.gap, record.bias = pairs.gap[i], pairs.bias[i]
    record.tangent_bias[:] = pairs.tangent_bias[i]
    f0, f1, f2 = record_rows(pairs, i, impulses, u, diagonal, dt, record.impulse, record.velocity)
    body_a, body_b = pairs.body_a[i], pairs.body_b[i]
    add_body_wrench(kinematics.world_R, kinematics.world_p, body_b, pairs.location[i], f0, f1, f2,
                    results.bodies[body_b].wrench)
    if body_a >= 0:
        add_body_wrench(kinematics.world_R, kinematics.world_p, body_a, pairs.location[i], -f0, -f1, -f2,
                        results.bodies[body_a].wrench)


@njit(cache=True, inline="always")
def record_contacts(pairs, spheres, kinematics, impulses, u, diagonal, coordinates, dt, results):
    """The results of the last pass: each pair's impulses (the next warm
    start), its contact point's velocity after the step (u less the bias and
    the compliance's share of W λ: diagonal) and bias, each point's force, each body's
    contact wrench, the joint rows' impulses."""
    clear_contacts(results)
    count = pairs.point.shape[0]
    for i in range(count):
        k = pairs.point[i]
        if k < 0:
            record_collision(pairs, i, impulses, u, diagonal, kinematics, dt, results)
            continue
        contact = results.contacts[k, pairs.obstacle[i]]
        contact.bias, contact.in_solver = pairs.bias[i], True
        contact.tangent_bias[:] = pairs.tangent_bias[i]
        results.points[k].touching = True
        f0, f1, f2 = record_rows(pairs, i, impulses, u, diagonal, dt, contact.impulse, contact.velocity)
        force = results.points[k].force
        force[0] += f0
        force[1] += f1
        force[2] += f2
        body = spheres[k].body
        add_body_wrench(kinematics.world_R, kinematics.world_p, body, pairs.location[i], f0, f1, f2,
                        results.bodies[body].wrench)
    for j in range(coordinates.shape[0]):
        results.coordinates[coordinates[j]].joint_impulse = impulses[3 * count + j]


@njit(cache=True, inline="always")
def implicit_step(packed, dof_parent, world, actuation, step, q, v, results, work, buffer):
    """One velocity-level step (stepping's docstring) from q, v: work.v_next =
    v⁺; the warm starts and results written. Returns a StepOutcome."""
    model = unpack_model(packed)
    spheres, obstacles, terms = world.spheres, world.obstacles, world.terms
    nv = v.shape[0]
    touchable = (spheres.shape[0] > 0 and obstacles.shape[0] > 0) or world.shapes.shapes.shape[0] > 1
    # the inputs were checked: what fails here is overflow
    if rnea_kernel(packed, readonly(q), readonly(v), readonly(work.zero), work.no_force, work.h, buffer):
        return StepOutcome(NONFINITE_RESULT, 0, 0.0, 0, -1, False, 0)
    if touchable:  # the body twists at v (body_twists'), the RNEA's, before the CRBA takes their place in the buffer
        work.vel[:] = pass_body_twists(buffer, model.parent.shape[0])
    if crba_paths_kernel(packed, dof_parent, q, work.M_nominal, buffer, np.bool_(True)):  # placed by the RNEA
        return StepOutcome(NONFINITE_RESULT, 0, 0.0, 0, -1, False, 0)
    kinematics, _ = point_positions(packed, q, spheres, buffer, work.positions, True)
    work.clamp[:] = 0.0
    gaps = results.points["gap"]
    sweeps, residual, limits, softened, dropped = 0, 0.0, 0, False, 0
    for _ in range(MAX_ACTUATOR_PASSES):
        actuated_terms(actuation, terms, q, work, step.dt)
        M = work.M
        copy_paths(work.M_nominal, dof_parent, M)
        v_free, pivot = free_velocity(M, work.h, v, work.effort, work.damping, step.dt, dof_parent, work.v_free)
        if pivot >= 0:
            return StepOutcome(SINGULAR_MASS_MATRIX, 0, 0.0, 0, pivot, False, 0)
        if touchable:
            body_twists(model, kinematics, v_free, work.free_vel)
        point_pairs = contact_pairs(spheres, obstacles, work.positions, kinematics, work.vel, work.free_vel, step,
                                    gaps, work)
        count = point_pairs
        if world.shapes.shapes.shape[0] > 1:  # (a call costs 0.5 us even when it has nothing to do)
            count, dropped = body_pairs(world, kinematics, work.vel, work.free_vel, step, work, point_pairs,
                                         np.bool_(False))
        pairs = pairs_view(work, count)
        rigid_corrections(pairs, work.pairs_of_body, work.pair_next, work.correction, step.dt, step.stabilization)
        walls = velocity_walls(q, v_free, world.limits, step, work.lowest, work.highest)
        coordinates = joint_row_coordinates(terms, walls, work.coordinates)
        m = 3 * count + coordinates.shape[0]
        limits = walls.walls
        rows = Rows(work.G[:m], work.deepest[:m], work.other[:m], work.c[:m], work.impulses[:m])
        u, diagonal = work.u[:m], work.diagonal[:m]
        if m == 0:
            work.v_next[:] = v_free
            sweeps, residual = 0, 0.0
        else:
            zeroed_rows(work.G, m, work.zeroed)
            for i in range(point_pairs):
                warm_start = results.contacts[pairs.point[i], pairs.obstacle[i]].impulse
                for a in range(3):
                    rows.impulses[3 * i + a] = warm_start[a]
            collision_warm_starts(pairs, point_pairs, results.collisions, results.report[0].collisions,
                                  rows.impulses)
            pair_rows(model, dof_parent, rows, pairs, kinematics, v_free, work.screws, work.columns)
            bound, lowest, highest = joint_rows(rows, 3 * count, coordinates, v, v_free, walls, terms,
                                                step.dt, results.coordinates, work.laws)
            transform_rows(M, dof_parent, rows)
            solved = solve_islands(rows, dof_parent, pairs.friction, bound, lowest, highest, step, u, diagonal,
                                   work.islands)
            sweeps, residual, softened = solved.sweeps, solved.residual, solved.softened
            change = velocity_change(M, dof_parent, rows, work.change)
            for col in range(nv):
                work.v_next[col] = v_free[col] + change[col]
            clear_rows(rows, dof_parent)
        if not newly_clamped(actuation, q, work.v_next, work, step.dt, results.coordinates):
            break
    record_contacts(pairs, spheres, kinematics, rows.impulses, u, diagonal, coordinates, step.dt, results)
    status = 0 if all_finite(work.v_next) else NONFINITE_RESULT
    return StepOutcome(status, sweeps, residual, limits, -1, softened, dropped)


@njit(cache=True, inline="always")
def report(results, status, pivot, steps, sweeps, residual, limits, unconverged, smooth, softened):
    """The call's REPORT record."""
    record = results.report[0]
    record.status, record.pivot, record.steps, record.sweeps = status, pivot, steps, sweeps
    record.residual, record.limits, record.unconverged, record.smooth = residual, limits, unconverged, smooth
    record.softened = softened


@njit(cache=True, inline="always")
def untracked_world(world):
    """The World of a plain tuple of its arrays, each an untracked view (workspace.untracked)."""
    spheres, obstacles, terms, limits, shapes, collide = world
    return World(untracked(spheres), untracked(obstacles), untracked(terms), untracked(limits),
                 ShapeSet(untracked(shapes[0]), untracked(shapes[1]), untracked(shapes[2]), untracked(shapes[3])),
                 untracked(collide))


@njit(cache=True, inline="always")
def untracked_results(results):
    """The StepResults of a plain tuple of its records, each an untracked view."""
    return StepResults(untracked(results[0]), untracked(results[1]), untracked(results[2]), untracked(results[3]),
                       untracked(results[4]), untracked(results[5]))


@njit(cache=True, nogil=True)  # the simulator node's other threads run meanwhile
def simulate_kernel(packed, dof_parent, world, actuation, settings, q, v, results, buffer, work_floats, work_ints):
    """settings.steps steps (stepping's docstring) from (q, v), written in
    place, under the actuation (ACTUATOR records, constant over the call), in
    the world (World); settings: a SETTINGS record (1,);
    results: the StepResults records as a plain tuple (a named tuple costs
    the call 1 us more), those of the last step, with the previous step's
    impulses as the warm starts; work_floats, work_ints: the caller's work
    buffers for this model, world and results (work.work_buffers). Stops at
    a step it cannot take (the state is the one before it); the REPORT says
    why."""
    # every array as an untracked view (workspace.untracked): the arguments live until the kernel returns; the
    # model's typed read-only, as the nodes' calls pass it, so that the step's aba_kernel, rnea_kernel and
    # crba_paths_kernel are the versions the nodes use (one compile each in the warm-up, not two)
    packed = (readonly(untracked(packed[0])), readonly(untracked(packed[1])))
    buffer, dof_parent = untracked(buffer), readonly(untracked(dof_parent))
    model = unpack_model(packed)
    step = settings[0]
    q, v, actuation = untracked(q), untracked(v), untracked(actuation)
    world, results = untracked_world(world), untracked_results(results)
    work = step_work(q.shape[0], v.shape[0], model.parent.shape[0], world.spheres.shape[0], world.obstacles.shape[0],
                     world.shapes.shapes.shape[0], results.collisions.shape[0], untracked(work_floats),
                     untracked(work_ints))
    simulate_steps(packed, dof_parent, world, actuation, step, q, v, results, work, buffer)


# Inlined: called as a compiled function, the same steps took 1.8-2 us longer each (Panda 3.8 -> 5.6 us,
# Solo-12 8.7 -> 10.5, TALOS 22.2 -> 24.2, in one process). The rollouts call simulate_kernel itself.
@njit(cache=True, inline="always")
def simulate_steps(packed, dof_parent, world, actuation, step, q, v, results, work, buffer):
    """simulate_kernel's steps, on untracked views, in the work arrays `work`
    (StepWork) laid out for them: step.steps steps (a SETTINGS record) from
    (q, v), written in place; the REPORT says what they did."""
    model = unpack_model(packed)
    nv = v.shape[0]
    q_next, efforts = work.q_next, actuation["effort"]
    friction = False
    for r in range(nv):
        friction = friction or world.terms[r].static > 0.0
    smooth_possible = step.integrator != EULER and not has_gains(actuation) and not friction
    gaps = results.points["gap"]
    gaps[:] = np.inf  # no obstacle seen yet: each step sets them
    colliding = world.shapes.shapes.shape[0] > 1
    # body_pairs' first and only_reach are passed as np.int64 and np.bool_: a literal 0 or True would make
    # numba compile it again for those constants (13 s more of the step's compile)
    results.report[0].dropped = 0
    unconverged, smooth, sweeps, residual, limits, softened = 0, 0, 0, 0.0, 0, 0
    for taken in range(step.steps):
        if invalid(model, q, v, v) or not all_finite(efforts):
            report(results, INVALID_INPUT, -1, taken, 0, 0.0, 0, unconverged, smooth, softened)
            return
        take_smooth = False
        if smooth_possible:
            kinematics, _ = point_positions(packed, q, world.spheres, buffer, work.positions, False)
            body_twists(model, kinematics, v, work.vel)
            walls = velocity_walls(q, v, world.limits, step, work.lowest, work.highest)
            take_smooth = walls.walls == 0 and not within_reach(world.spheres, world.obstacles, work.positions,
                                                                 kinematics, work.vel, step.dt, step.margin, gaps) \
                and not (colliding and body_pairs(world, kinematics, work.vel, work.vel, step, work, np.int64(0),
                                                  np.bool_(True))[0])
        if take_smooth:
            status = smooth_step(packed, q, v, actuation, world.terms, step.dt, step.integrator == RKMK4,
                                 work.stages, q_next, work.v_next, buffer)
            if status < 0:  # a singular articulated inertia: the mass matrix is singular
                body = -1 - status
                report(results, SINGULAR_MASS_MATRIX, model.v_start[body], taken, 0, 0.0, 0, unconverged, smooth,
                       softened)
                return
            if status != 0:
                report(results, NONFINITE_RESULT, -1, taken, 0, 0.0, 0, unconverged, smooth, softened)
                return
            clear_contacts(results)
            for r in range(nv):
                results.coordinates[r].applied = actuation[r].effort
            sweeps, step_residual, limits = 0, 0.0, 0
            smooth += 1
        else:
            outcome = implicit_step(packed, dof_parent, world, actuation, step, q, v, results, work, buffer)
            if outcome.status != 0:
                report(results, outcome.status, outcome.pivot, taken, 0, 0.0, 0, unconverged, smooth, softened)
                return
            sweeps, step_residual, limits = outcome.sweeps, outcome.residual, outcome.limits
            if step_residual > step.tolerance:
                unconverged += 1
            if outcome.softened:
                softened += 1
            results.report[0].dropped += outcome.dropped
            integrate_kernel(packed, q, work.v_next, step.dt, q_next)
        if not (all_finite(q_next) and all_finite(work.v_next)):
            report(results, NONFINITE_RESULT, -1, taken, 0, 0.0, 0, unconverged, smooth, softened)
            return
        residual = max(residual, step_residual)
        for r in range(nv):
            results.coordinates[r].acceleration = (work.v_next[r] - v[r]) / step.dt
        q[:] = q_next
        v[:] = work.v_next
    report(results, 0, -1, step.steps, sweeps, residual, limits, unconverged, smooth, softened)
