"""The Coulomb solver on (W, c): impulses λ for the rows u = W λ + c of a time
step's constraints (stepping.rows builds them), each point's three rows
(its velocity along the ground normal n and two tangents) obeying the Coulomb
law in its exact cone (not a pyramid):

    no pulling, no penetration   λ_n >= 0,  u_n >= 0,  λ_n u_n = 0
    friction cone                |λ_t| <= μ λ_n
    sticking or sliding          u_t = 0, or λ_t = -μ λ_n u_t / |u_t|

(u_n includes the bias that closes a gap or pushes a penetration out), and each
joint row after the points (one coordinate's velocity) the law of joint_impulse:
joint friction up to a bound, the position limits as velocity walls.

A nonsmooth block Gauss-Seidel over the points (Moreau and Jean's NSGS): each
point's three impulses solve its own Coulomb law exactly, the other rows'
held (point_impulse: separating, sticking, or sliding along the direction
found as a root of a trigonometric polynomial of degree two). Solving the
normal row and then the tangential ones in turn is not enough: where the
normal and tangential velocities are coupled (W_nt, large for a point on a
limb whose joints turn), the two updates undo each other sweep after sweep
(a TALOS hand sliding on the ground cycled at a residual of 0.03 m/s).
Redundant contacts (the corners of a sole) make W singular and Gauss-Seidel
slow, so every POLISH_EVERY sweeps the rows that hold (the points that stick,
the joints held) are solved for directly, as bilateral constraints, and the
result kept when it is closer to the law. Where that stalls (points of one
body sliding with friction, which Gauss-Seidel can pass from one to the
other forever), a semismooth Newton method on the natural map of the law
with De Saxcé's modified velocity (newton_polish) takes over: on the stalled
steps of a falling TALOS it reached 1e-15 in 1 to 7 steps. Its accuracy is
the largest violation of the law, in velocity units (m/s, rad/s), measured
after every sweep (coulomb_residual). Warm-starting with the previous step's
impulses makes a resting contact converge in one sweep.

The files: law.py (one point's law, one joint row's), problem.py (the
problem and its residual), solver.py (Gauss-Seidel and the polish),
newton.py (Newton's method).
"""
from mbs_dynamics.contact.coulomb.law import disk_minimizer, point_impulse
from mbs_dynamics.contact.coulomb.problem import CoulombProblem, SolverReport, coulomb_residual
from mbs_dynamics.contact.coulomb.solver import solve_coulomb

__all__ = ["CoulombProblem", "SolverReport", "coulomb_residual", "disk_minimizer", "point_impulse", "solve_coulomb"]
