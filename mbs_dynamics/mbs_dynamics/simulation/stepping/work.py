"""The scratch arrays of one call of the step (StepWork), laid out at each
call in one float and one int buffer (work_buffers', kept by the caller) by
lay_out_work: the one definition of the layout, which both measures the
buffers (on unbounded views) and views them."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.collision.epa import EPA_MAX_FACES, EPA_MAX_VERTICES, Polytope
from mbs_dynamics.collision.gjk import Simplex
from mbs_dynamics.collision.manifold import MANIFOLD_CANDIDATES, MAX_FEATURE_POINTS, ManifoldWork
from mbs_dynamics.collision.narrowphase import QueryWork
from mbs_dynamics.multibody.workspace import take, unbounded
from mbs_dynamics.simulation.stepping.integrator import RungeKuttaStages
from mbs_dynamics.simulation.stepping.islands import IslandScratch

# M and its copy, h, the actuators' effective effort and damping and their clamps, v after a pass, the
# points' positions, the body twists at v and at v_free, the pairs' contact axes and contact points, the
# bodies' joint axes in the world (kinematics.world_screws), the smooth integrator's stages, the rows (G,
# deepest, other, c, impulses, u = W impulses + c, the compliance's share of W's diagonal), the pairs' point,
# obstacle, bodies, shapes, gap, bias, tangential biases (pairs, 2) and friction, the next pair of the same
# body (pairs,: rigid_corrections' lists), the velocity walls, the coordinates of the joint rows, a row's
# columns, a count (or first pair) for each body, a rigid correction's normal equations and twist (6, 9), how many rows
# of G are zero but for their paths (1,), zeros, no external forces, q after the step, v_free, the velocity
# change of the impulses, the joint rows' laws (3, nv: bound, lowest, highest), the collision between
# bodies' (CollisionWork) and the islands' solve's (IslandScratch).
StepWork = namedtuple("StepWork", "M M_nominal h effort damping clamp v_next positions vel free_vel axes location "
                                  "screws stages G deepest other c impulses u diagonal pair_point pair_obstacle "
                                  "pair_body_a pair_body_b pair_shape_a pair_shape_b pair_gap pair_bias "
                                  "pair_tangent_bias pair_friction pair_next lowest highest coordinates columns "
                                  "pairs_of_body correction "
                                  "zeroed zero no_force q_next v_free change laws "
                                  "collision islands")
# Each shape's world placement (k, 3, 3), (k, 3), bounding box (k, 6: lowest then highest corner) and speed
# bound (k,), the shapes in the order of their boxes' lowest x (k,), the narrow phase's and the manifold's
# scratch, and a manifold's points and gaps before they are reduced.
CollisionWork = namedtuple("CollisionWork", "R p box speed order query manifold locations gaps")


@njit(cache=True, inline="always")
def lay_out_work(floats, ints, nq, nv, nbodies, npoints, nobstacles, nshapes, max_collisions):
    """(StepWork, float end, int end): the work arrays for nq, nv, nbodies,
    npoints, nobstacles, nshapes shapes of bodies and up to max_collisions
    contact points between bodies, as untracked views (workspace.take) of
    floats and ints."""
    pairs = npoints * nobstacles + max_collisions
    rows = 3 * pairs + nv
    # solve_islands' scratch: its ints for any rows, its floats (an island's W, its block of Y and vectors) for
    # an island of the joints' rows and each point's with one obstacle (a larger island, of points on several
    # obstacles at once or of contacts between bodies, allocates its floats)
    island_rows = min(rows, 3 * npoints + nv)
    # the narrow phase's scratch only where bodies have shapes to collide
    n_vertices, n_faces, n_features, n_candidates = (EPA_MAX_VERTICES, EPA_MAX_FACES, MAX_FEATURE_POINTS,
                                                     MANIFOLD_CANDIDATES) if nshapes > 1 else (0, 0, 0, 0)
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
    screws, o = take(floats, o, (nbodies, 6, 6))
    rate_x, o = take(floats, o, (4, nv))
    rate_v, o = take(floats, o, (4, nv))
    q_stage, o = take(floats, o, (nq,))
    v_stage, o = take(floats, o, (nv,))
    G, o = take(floats, o, (rows, nv))
    c, o = take(floats, o, (rows,))
    impulses, o = take(floats, o, (rows,))
    u, o = take(floats, o, (rows,))
    pair_gap, o = take(floats, o, (pairs,))
    pair_bias, o = take(floats, o, (pairs,))
    pair_tangent_bias, o = take(floats, o, (pairs, 2))
    correction, o = take(floats, o, (6, 9))
    pair_friction, o = take(floats, o, (pairs,))
    lowest, o = take(floats, o, (nv,))
    highest, o = take(floats, o, (nv,))
    zero, o = take(floats, o, (nv,))
    no_force, o = take(floats, o, (0, 6))
    q_next, o = take(floats, o, (nq,))
    v_free, o = take(floats, o, (nv,))
    change, o = take(floats, o, (nv,))
    laws, o = take(floats, o, (3, nv))
    shape_R, o = take(floats, o, (nshapes, 3, 3))
    shape_p, o = take(floats, o, (nshapes, 3))
    box, o = take(floats, o, (nshapes, 6))
    speed, o = take(floats, o, (nshapes,))
    simplex_W, o = take(floats, o, (4, 3))
    simplex_A, o = take(floats, o, (4, 3))
    simplex_B, o = take(floats, o, (4, 3))
    simplex_weights, o = take(floats, o, (4,))
    polytope_W, o = take(floats, o, (n_vertices, 3))
    polytope_A, o = take(floats, o, (n_vertices, 3))
    polytope_B, o = take(floats, o, (n_vertices, 3))
    polytope_weights, o = take(floats, o, (n_vertices,))
    face_normal, o = take(floats, o, (n_faces, 3))
    face_distance, o = take(floats, o, (n_faces,))
    feature_a, o = take(floats, o, (n_features, 3))
    feature_b, o = take(floats, o, (n_features, 3))
    clip_in, o = take(floats, o, (4 * n_features, 3))
    clip_out, o = take(floats, o, (4 * n_features, 3))
    candidates, o = take(floats, o, (n_candidates, 3))
    candidate_gaps, o = take(floats, o, (n_candidates,))
    diagonal, o = take(floats, o, (rows,))
    island_floats, float_end = take(floats, o, (island_rows * (island_rows + 7 + nv),))
    deepest, o = take(ints, 0, (rows,))
    other, o = take(ints, o, (rows,))
    pair_point, o = take(ints, o, (pairs,))
    pair_obstacle, o = take(ints, o, (pairs,))
    pair_body_a, o = take(ints, o, (pairs,))
    pair_body_b, o = take(ints, o, (pairs,))
    pair_shape_a, o = take(ints, o, (pairs,))
    pair_shape_b, o = take(ints, o, (pairs,))
    pair_next, o = take(ints, o, (pairs,))
    coordinates, o = take(ints, o, (nv,))
    order, o = take(ints, o, (nshapes,))
    faces, o = take(ints, o, (n_faces, 3))
    alive, o = take(ints, o, (n_faces,))
    edges, o = take(ints, o, (3 * n_faces, 2))
    columns, o = take(ints, o, (nv,))
    pairs_of_body, o = take(ints, o, (nbodies,))
    zeroed, o = take(ints, o, (1,))
    island_ints, int_end = take(ints, o, (7 * pairs + 11 * nv + 4,))
    stages = RungeKuttaStages(rate_x, rate_v, q_stage, v_stage)
    query = QueryWork(Simplex(simplex_W, simplex_A, simplex_B, simplex_weights),
                      Polytope(Simplex(polytope_W, polytope_A, polytope_B, polytope_weights), faces, face_normal,
                               face_distance, alive, edges))
    collision = CollisionWork(shape_R, shape_p, box, speed, order, query,
                              ManifoldWork(feature_a, feature_b, clip_in, clip_out), candidates, candidate_gaps)
    return StepWork(M, M_nominal, h, effort, damping, clamp, v_next, positions, vel, free_vel, axes, location, screws,
                    stages, G, deepest, other, c, impulses, u, diagonal, pair_point, pair_obstacle,
                    pair_body_a, pair_body_b, pair_shape_a, pair_shape_b, pair_gap, pair_bias, pair_tangent_bias,
                    pair_friction, pair_next, lowest, highest, coordinates, columns, pairs_of_body, correction, zeroed,
                    zero, no_force, q_next, v_free, change, laws, collision,
                    IslandScratch(island_ints, island_floats)), \
        float_end, int_end


@njit(cache=True)
def work_sizes(nq, nv, nbodies, npoints, nobstacles, nshapes, max_collisions):
    """(floats, ints): the lengths of the buffers lay_out_work lays out for
    these counts (measured on unbounded views)."""
    _, float_size, int_size = lay_out_work(unbounded(np.empty(1)), unbounded(np.empty(1, dtype=np.int64)), nq, nv,
                                           nbodies, npoints, nobstacles, nshapes, max_collisions)
    return float_size, int_size


def work_buffers(model, world: tuple, collisions: np.ndarray) -> tuple:
    """(floats, ints): the work buffers of simulate_kernel's steps of `model`
    (the system's) in `world` (stages.World's plain tuple) with the room
    `collisions` (COLLISION records), made once by the caller that keeps
    them (a set-up, a Simulation, a rollout's thread) and passed at every
    call: laid out there (step_work), not allocated (new buffers at each
    call cost contact_step 0.2-0.5 us more on Solo-12). Their contents never
    outlive a call."""
    spheres, obstacles, _, _, shapes, _ = world
    float_size, int_size = work_sizes(model.nq, model.nv, model.nbodies, spheres.shape[0], obstacles.shape[0],
                                      shapes[0].shape[0], collisions.shape[0])
    return np.empty(float_size), np.empty(int_size, dtype=np.int64)


@njit(cache=True, inline="always")
def step_work(nq, nv, nbodies, npoints, nobstacles, nshapes, max_collisions, floats, ints):
    """The work arrays (StepWork) as untracked views of floats and ints
    (work_buffers', live while the caller uses them), set as a call starts
    (the rest is written before it is read). A layout larger than the
    buffers raises."""
    work, _, _ = lay_out_work(floats, ints, nq, nv, nbodies, npoints, nobstacles, nshapes, max_collisions)
    work.clamp[:] = 0.0
    work.zero[:] = 0.0
    work.zeroed[0] = 0
    for s in range(nshapes):
        work.collision.order[s] = s
    return work
