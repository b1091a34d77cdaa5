"""The scratch arrays of one call of the step (StepWork), laid out once per
call in one float and one int buffer by lay_out_work: the one definition of
the layout, which both measures the buffers (on unbounded views) and views
them."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.multibody.workspace import take, unbounded
from mbs_dynamics.simulation.stepping.integrator import RungeKuttaStages

# M and its copy, h, the actuators' effective effort and damping and their clamps, v after a pass, the
# points' positions, the body twists at v and at v_free, the pairs' contact axes and contact points, a
# Jacobian, the smooth integrator's stages, the rows (G, deepest, c, impulses, u = W impulses + c), the
# pairs' point, obstacle, bias and friction, the velocity walls, the coordinates of the joint rows, zeros, no
# external forces, q after the step.
StepWork = namedtuple("StepWork", "M M_nominal h effort damping clamp v_next positions vel free_vel axes location "
                                  "jacobian stages G deepest c impulses u pair_point pair_obstacle pair_bias "
                                  "pair_friction lowest highest coordinates zero no_force q_next")


@njit(cache=True, inline="always")
def lay_out_work(floats, ints, nq, nv, nbodies, npoints, nobstacles):
    """(StepWork, float end, int end): the work arrays for nq, nv, nbodies,
    npoints and nobstacles as untracked views (workspace.take) of floats and
    ints."""
    pairs = npoints * nobstacles
    rows = 3 * pairs + nv
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
    rate_x, o = take(floats, o, (4, nv))
    rate_v, o = take(floats, o, (4, nv))
    q_stage, o = take(floats, o, (nq,))
    v_stage, o = take(floats, o, (nv,))
    G, o = take(floats, o, (rows, nv))
    c, o = take(floats, o, (rows,))
    impulses, o = take(floats, o, (rows,))
    u, o = take(floats, o, (rows,))
    pair_bias, o = take(floats, o, (pairs,))
    pair_friction, o = take(floats, o, (pairs,))
    lowest, o = take(floats, o, (nv,))
    highest, o = take(floats, o, (nv,))
    zero, o = take(floats, o, (nv,))
    no_force, o = take(floats, o, (0, 6))
    q_next, float_end = take(floats, o, (nq,))
    deepest, o = take(ints, 0, (rows,))
    pair_point, o = take(ints, o, (pairs,))
    pair_obstacle, o = take(ints, o, (pairs,))
    coordinates, int_end = take(ints, o, (nv,))
    stages = RungeKuttaStages(rate_x, rate_v, q_stage, v_stage)
    return StepWork(M, M_nominal, h, effort, damping, clamp, v_next, positions, vel, free_vel, axes, location, jacobian,
                    stages, G, deepest, c, impulses, u, pair_point, pair_obstacle, pair_bias, pair_friction, lowest,
                    highest, coordinates, zero, no_force, q_next), float_end, int_end


@njit(cache=True, inline="always")
def step_work(nq, nv, nbodies, npoints, nobstacles, any_floats):
    """(StepWork, floats, ints): the work arrays in new buffers, which the
    caller keeps alive while it uses them (a tracked array costs two atomic
    reference counts at every call it is passed to). any_floats: a float
    array to measure the layout on (never touched)."""
    _, float_size, int_size = lay_out_work(unbounded(any_floats), unbounded(np.empty(1, dtype=np.int64)), nq, nv,
                                           nbodies, npoints, nobstacles)
    floats, ints = np.empty(float_size), np.empty(int_size, dtype=np.int64)
    work, _, _ = lay_out_work(floats, ints, nq, nv, nbodies, npoints, nobstacles)
    work.clamp[:] = 0.0
    work.zero[:] = 0.0
    return work, floats, ints
