"""Time stepping with unilateral contact and Coulomb friction, for simulation:
points of the bodies (with a radius: the centres of spheres) against obstacles
(a ground plane, static boxes), the bodies' convex shapes against each other
(free objects, a robot and itself), the joints' limits, damping and friction,
and actuators; many steps per compiled call.

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
restitution, applied at the start of the step). Where two bodies (a body
and the world) meet at several pairs, the tangential rows take biases too,
those of the rigid motion of one relative to the other whose normal
velocities are the normal rows' targets -b (pairs.rigid_corrections): a
tilted sole's corners at different depths are pushed out at different
rates, which a rigid sole does only by also moving its corners along the
ground (by the tilt times the difference, ~1e-8 m/s standing), so that
with tangential targets of zero its sticking corners had no solution and
the solver stalled (a TALOS standing from a perturbed stance softened
nearly every step). A sticking point moves with that correction:
velocity[1:] + tangent_bias = 0 in its CONTACT record. And where some of
those pairs penetrate, the others' gaps close at the same `stabilization`
rate, not within the step: the normal targets linear in the gaps across
the face, which a rigid motion can meet (where none does, points of a
curved hull, the biases stay as they were). A body's pairs with one
obstacle, when more than PATCH_POINTS, are reduced to the extreme points of
their patch (reduce_patches). With compliance > 0 every row is soft (MuJoCo's
soft constraints in spirit: W's diagonal times 1 + compliance): rows that
contradict each other (a robot lying on many points of its limbs, against
its joint limits) settle at a small penetration instead of leaving the
solver unconverged, and a sticking point creeps at compliance W_tt λ_t.
Where the solver does not converge at the step's compliance, it solves the
same rows again at SOFTENING times it (at least SOFTENED_COMPLIANCE), up to
SOFTENINGS times, and counts the step as softened (stages.py): a robot
fallen onto its collision meshes makes rows that no rigid solution obeys.

The joints add rows of their own, one per coordinate with Coulomb friction or
at (or reaching within the step) a position limit, G = the coordinate's unit
row, whose law is coulomb.joint_impulse: the joint sticks while the impulse
that holds it is within f dt, and otherwise slides with the impulse f dt
against its motion. f is the friction's level at the coordinate's velocity v
at the step's start (joint_friction.sliding_friction): the static friction
F_s from rest, F_c + (F_s - F_c) exp(-(v/v_s)^2) while sliding. Stick or
slip and the direction are implicit, the Stribeck level is taken at the
start of the step: a step's law is then Coulomb's exact set-valued law with
a bound fixed for the step (unique, a box, what the solvers solve), where a
level implicit in v⁺ would decrease with the speed and let a step have
several solutions (sticking and sliding both). With F_s = F_c it is the
Coulomb law. The friction offset (algorithms.joint_friction) is a constant
torque against the effort. The impulses come from
coulomb.solve_coulomb on (W, c); the step reports its accuracy (the largest
violation of the law, m/s) and its sweeps.

With integrator RK4 or RKMK4 (integrator.py), a step in which nothing acts by
impulses or implicitly (no point within reach of an obstacle at the start of
the step, no joint at or reaching a limit, no joint friction, no actuator
gain) is taken by that integrator instead, the damping as a force: smooth
motion keeps its energy (order 4), contacts and limits get their impulses
(first order).

Bodies meet bodies where their shapes' contact manifolds (collision/) come
within reach, found by a broad phase on bounding boxes (collisions.py): each
point is a pair of two bodies a and b with the normal from a to b, its rows
G = [n; t1; t2] (J_b - J_a) of the velocity of b relative to a, and the same
law and bias as a point's; its warm start, the last step's impulse of the
same two shapes near the same place.

M + dt D is factored once per pass as L^T L with the tree's sparsity
(crba.ltl_factor), and W = Y Y^T with Y = L^-T G^T, each row of G zero off one
path to the root, or two for a contact between bodies. The rows fall into
islands (islands.py: rows that move the same trees of a forest), each solved
as a problem of its own.

The package, one job a file: records.py (every record the compiled step
reads or writes, one structured dtype each), obstacles.py (the obstacle
kinds and their distances), pairs.py (which points meet which obstacles),
collisions.py (which bodies meet which bodies), rows.py (the constraint
rows and the Delassus operator), islands.py (the rows' islands, solved one
by one), actuation.py (the
actuators and the joints' own terms), integrator.py (the compiled RK4 and
RKMK4), work.py (the scratch layout), stages.py (the step's stages and the
many-step kernel), api.py (contact_step and the results from Python).
"""
from mbs_dynamics.simulation.stepping.actuation import effort_actuation, joint_terms, position_limits
from mbs_dynamics.simulation.stepping.api import (
    NO_COLLIDE,
    ContactStep,
    check_report,
    contact_step,
    new_results,
    resolve_points,
    step_settings,
)
from mbs_dynamics.simulation.stepping.integrator import INTEGRATOR_CODES, runge_kutta_step
from mbs_dynamics.simulation.stepping.obstacles import (
    BOX,
    DEFAULT_GROUND,
    PLANE,
    Box,
    Ground,
    obstacle_records,
    sphere_gaps,
)
from mbs_dynamics.simulation.stepping.records import ACTUATOR, OBSTACLE, SETTINGS, SPHERE, copy_records, new_record
from mbs_dynamics.simulation.stepping.stages import StepResults, simulate_kernel
from mbs_dynamics.simulation.stepping.work import work_buffers

__all__ = ["ACTUATOR", "BOX", "DEFAULT_GROUND", "INTEGRATOR_CODES", "NO_COLLIDE", "OBSTACLE", "PLANE", "SETTINGS",
           "SPHERE", "Box", "ContactStep", "Ground", "StepResults", "check_report", "contact_step", "copy_records",
           "effort_actuation", "joint_terms", "new_record", "new_results", "obstacle_records", "position_limits",
           "resolve_points", "runge_kutta_step", "simulate_kernel", "sphere_gaps", "step_settings", "work_buffers"]
