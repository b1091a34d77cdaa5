"""Which bodies meet which bodies in a step: every shape of a body placed in
the world, a broad phase on their bounding boxes (sweep and prune along x:
the boxes grown by the margin and by how far the shape can move in the
step), and for each pair whose boxes overlap and whose bodies may touch (the
world's `collide` matrix) the narrow phase and the contact manifold of
collision/; the manifold's points within the margin, or reaching each other
within the step at the free velocity, become pairs after the point-obstacle
pairs, their bias as theirs (a gap closed, a penetration pushed out, a
bounce)."""
from __future__ import annotations

import math

from numba import njit

from mbs_dynamics.collision.gjk import Placed
from mbs_dynamics.collision.manifold import contact_manifold
from mbs_dynamics.collision.narrowphase import shape_distance
from mbs_dynamics.collision.shapes import CONVEX
from mbs_dynamics.collision.support import world_support
from mbs_dynamics.simulation.stepping.pairs import BOUNCE_SPEED, point_velocity, tangent_axes
from mbs_dynamics.simulation.stepping.rows import closing_speed

# A contact between bodies takes the impulses of the last step's contact of the same two shapes within this
# distance (m) as its warm start.
WARM_START_DISTANCE = 1e-2


@njit(cache=True, inline="always")
def place_shapes(shapes, kinematics, R, p):
    """R, p (k, 3, 3), (k, 3) = each shape's world placement (world <- shape)."""
    for s in range(shapes.shape[0]):
        shape = shapes[s]
        b = shape.body
        if b < 0:
            R[s] = shape.rotation
            p[s] = shape.translation
            continue
        Rb, pb = kinematics.world_R[b], kinematics.world_p[b]
        for r in range(3):
            for c in range(3):
                R[s, r, c] = Rb[r, 0] * shape.rotation[0, c] + Rb[r, 1] * shape.rotation[1, c] \
                    + Rb[r, 2] * shape.rotation[2, c]
            p[s, r] = pb[r] + Rb[r, 0] * shape.translation[0] + Rb[r, 1] * shape.translation[1] \
                + Rb[r, 2] * shape.translation[2]


@njit(cache=True, inline="always")
def shape_speed(shape, R, p, kinematics, vel, box):
    """A bound on the speed of any point of the shape (box: its bounding box)
    from its body's twist vel: |v of the body's origin| + |w| x the farthest
    the box reaches from it."""
    b = shape.body
    if b < 0:
        return 0.0
    w, u = vel[b, :3], vel[b, 3:]
    reach = 0.0
    for r in range(3):
        far = max(abs(box[r] - kinematics.world_p[b, r]), abs(box[3 + r] - kinematics.world_p[b, r]))
        reach += far * far
    return math.sqrt(u[0] ** 2 + u[1] ** 2 + u[2] ** 2) + math.sqrt(w[0] ** 2 + w[1] ** 2 + w[2] ** 2) * \
        math.sqrt(reach)


@njit(cache=True, inline="always")
def bound_shapes(shape_set, collision, kinematics, vel, free_vel, dt, margin):
    """collision.box = each shape's bounding box grown by margin / 2 and by
    dt x its speed bound (the larger at vel and at free_vel: collision.speed).
    A hull's box is that of its own bounding box (SHAPE's bound_centre,
    bound_half) placed in the world, not the tightest: six support scans of
    each hull cost most of a step with self-collision (20 of 43 us on TALOS)."""
    shapes, vertices = shape_set.shapes, shape_set.vertices
    box, speeds = collision.box, collision.speed
    for s in range(shapes.shape[0]):
        shape, R, p = shapes[s], collision.R[s], collision.p[s]
        radius = shape.radius
        if shape.kind == CONVEX:
            c, h = shape.bound_centre, shape.bound_half
            for axis in range(3):
                centre = p[axis] + R[axis, 0] * c[0] + R[axis, 1] * c[1] + R[axis, 2] * c[2]
                half = abs(R[axis, 0]) * h[0] + abs(R[axis, 1]) * h[1] + abs(R[axis, 2]) * h[2] + radius
                box[s, axis], box[s, 3 + axis] = centre - half, centre + half
        else:
            for axis in range(3):
                d0, d1, d2 = (1.0 if axis == 0 else 0.0), (1.0 if axis == 1 else 0.0), (1.0 if axis == 2 else 0.0)
                high = world_support(shape, vertices, R, p, d0, d1, d2)
                low = world_support(shape, vertices, R, p, -d0, -d1, -d2)
                box[s, axis], box[s, 3 + axis] = low[axis] - radius, high[axis] + radius
        speeds[s] = max(shape_speed(shape, R, p, kinematics, vel, box[s]),
                        shape_speed(shape, R, p, kinematics, free_vel, box[s]))
        grow = 0.5 * margin + dt * speeds[s]
        for axis in range(3):
            box[s, axis] -= grow
            box[s, 3 + axis] += grow


@njit(cache=True, inline="always")
def sort_boxes(box, order):
    """order: the shapes by their boxes' lowest x (insertion sort: nearly sorted from the last step)."""
    for i in range(1, order.shape[0]):
        s = order[i]
        j = i - 1
        while j >= 0 and box[order[j], 0] > box[s, 0]:
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = s


@njit(cache=True, inline="always")
def _relative_normal_speed(kinematics, vel, body_a, body_b, x, n):
    """n . (velocity of b - velocity of a) at the world point x (twists vel; body -1: at rest)."""
    ub = point_velocity(kinematics.world_R, kinematics.world_p, vel, body_b, x[0], x[1], x[2]) if body_b >= 0 \
        else (0.0, 0.0, 0.0)
    ua = point_velocity(kinematics.world_R, kinematics.world_p, vel, body_a, x[0], x[1], x[2]) if body_a >= 0 \
        else (0.0, 0.0, 0.0)
    return n[0] * (ub[0] - ua[0]) + n[1] * (ub[1] - ua[1]) + n[2] * (ub[2] - ua[2])


@njit(cache=True)
def body_pairs(world, kinematics, vel, free_vel, step, work, first, only_reach):
    """The contact points between bodies (module docstring) appended to
    work's pair arrays from row `first` up to their room: returns (the new
    count of pairs, the points that found no room). With only_reach, whether
    any point is within reach at vel (the smooth integrator must not take
    the step) as (1 or first, 0), nothing written."""
    shape_set, collide = world.shapes, world.collide
    shapes = shape_set.shapes
    collision = work.collision
    nshapes = shapes.shape[0]
    count, dropped, room = first, 0, work.pair_body_b.shape[0]
    if nshapes < 2:
        return count, dropped
    dt, margin = step.dt, step.margin
    place_shapes(shapes, kinematics, collision.R, collision.p)
    bound_shapes(shape_set, collision, kinematics, vel, free_vel, dt, margin)
    speeds = collision.speed
    box, order = collision.box, collision.order
    sort_boxes(box, order)
    velocities = vel if only_reach else free_vel
    for ii in range(nshapes):
        i = order[ii]
        for jj in range(ii + 1, nshapes):
            j = order[jj]
            if box[j, 0] > box[i, 3]:
                break
            if box[j, 1] > box[i, 4] or box[i, 1] > box[j, 4] or box[j, 2] > box[i, 5] or box[i, 2] > box[j, 5]:
                continue
            sa, sb = (i, j) if i < j else (j, i)
            shape_a, shape_b = shapes[sa], shapes[sb]
            body_a, body_b = shape_a.body, shape_b.body
            if not collide[body_a + 1, body_b + 1]:
                continue
            a, b = Placed(shape_a, collision.R[sa], collision.p[sa]), Placed(shape_b, collision.R[sb], collision.p[sb])
            reach = margin + dt * (speeds[sa] + speeds[sb])
            distance, normal, point_a, point_b = shape_distance(a, b, shape_set, collision.query)
            if distance > reach:
                continue
            points, n = contact_manifold(a, b, shape_set, distance, normal, point_a, point_b, reach,
                                         collision.manifold, collision.locations, collision.gaps)
            friction = math.sqrt(shape_a.friction * shape_b.friction)
            restitution = max(shape_a.restitution, shape_b.restitution)
            for k in range(points):
                x, gap = collision.locations[k], collision.gaps[k]
                closing = _relative_normal_speed(kinematics, velocities, body_a, body_b, x, n)
                if gap + dt * min(0.0, closing) > margin:
                    continue
                if only_reach:
                    return 1, 0
                if count == room:
                    dropped += 1
                    continue
                bias = closing_speed(gap, dt, step.stabilization)
                if restitution > 0.0:
                    approach = _relative_normal_speed(kinematics, vel, body_a, body_b, x, n)
                    if approach < -BOUNCE_SPEED and gap + dt * closing <= 0.0:
                        bias = min(bias, restitution * approach)  # it hits within the step: it bounces
                work.pair_point[count], work.pair_obstacle[count] = -1, -1
                work.pair_body_a[count], work.pair_body_b[count] = body_a, body_b
                work.pair_shape_a[count], work.pair_shape_b[count] = sa, sb
                work.pair_gap[count], work.pair_bias[count], work.pair_friction[count] = gap, bias, friction
                axes = work.axes[count]
                axes[0, 0], axes[0, 1], axes[0, 2] = n[0], n[1], n[2]
                tangent_axes(axes)
                work.location[count, 0], work.location[count, 1], work.location[count, 2] = x[0], x[1], x[2]
                count += 1
    if only_reach:
        return first, 0
    return count, dropped


@njit(cache=True, inline="always")
def collision_warm_starts(pairs, first, previous, previous_count, impulses):
    """The warm starts of the contacts between bodies (pairs from `first`):
    the impulse of the last step's COLLISION record of the same two shapes
    nearest it within WARM_START_DISTANCE, else zero."""
    for i in range(first, pairs.body_b.shape[0]):
        best, match = WARM_START_DISTANCE ** 2, -1
        for k in range(previous_count):
            record = previous[k]
            if record.shape_a != pairs.shape_a[i] or record.shape_b != pairs.shape_b[i]:
                continue
            d = (record.location[0] - pairs.location[i, 0]) ** 2 + (record.location[1] - pairs.location[i, 1]) ** 2 \
                + (record.location[2] - pairs.location[i, 2]) ** 2
            if d < best:
                best, match = d, k
        for a in range(3):
            impulses[3 * i + a] = previous[match].impulse[a] if match >= 0 else 0.0
