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
"""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from mbs_dynamics.crba import ltl_factor, ltl_solve

# Gauss-Seidel sweeps between attempts to polish the sticking set
POLISH_EVERY = 8
# A polish that leaves the residual above STALL_RATIO times the one before is a
# stall: Gauss-Seidel converges slowly or cycles (points on one body sliding
# with friction swap their loads sweep after sweep), and Newton's method
# (newton_polish) takes over from where it stands. The solver gives up after
# STALL_CHECKS stalls in a row: contradictory rows (a penetrated joint limit
# pushing a foot into the ground) have no solution, and sweeping on would cost
# time for nothing.
STALL_RATIO, STALL_CHECKS = 0.5, 3
# Newton steps of one newton_polish at most, and its line search's halvings.
NEWTON_STEPS, LINE_SEARCH_HALVINGS = 20, 20

# The problem: u = W λ + c with three rows per point (friction: one μ per point),
# then one row per joint (joint_bound: its friction impulse bound, lowest and
# highest: its velocity walls, -inf and inf where it has none).
CoulombProblem = namedtuple("CoulombProblem", "W c friction joint_bound lowest highest")
# What solve_coulomb did: its sweeps and the residual it reached.
SolverReport = namedtuple("SolverReport", "sweeps residual")


@njit(cache=True, inline="always")
def disk_minimizer(a, b, c, g1, g2, radius):
    """argmin of ½ x^T A x + g^T x over |x| <= radius, A = [[a, b], [b, c]]
    positive semidefinite: the unconstrained minimiser when it lies inside
    (the minimum-norm one if A is singular), else x(κ) = -(A + κ 1)⁻¹ g on the
    circle, κ > 0 by Newton's method on 1/|x(κ)| - 1/radius, concave in κ, so
    that from below it converges monotonically (Moré-Sorensen)."""
    if radius <= 0.0 or (g1 == 0.0 and g2 == 0.0):
        return 0.0, 0.0
    half_difference = 0.5 * (a - c)
    spread = np.sqrt(half_difference * half_difference + b * b)
    w1, w2 = 0.5 * (a + c) + spread, 0.5 * (a + c) - spread  # eigenvalues, w1 >= w2
    angle = 0.5 * np.arctan2(2.0 * b, a - c)
    e1x, e1y = np.cos(angle), np.sin(angle)  # eigenvector of w1; (-e1y, e1x) of w2
    gamma1, gamma2 = e1x * g1 + e1y * g2, -e1y * g1 + e1x * g2
    tiny = 1e-14 * max(w1, 1e-300)
    inside, y1, y2 = False, 0.0, 0.0
    if w2 > tiny:
        y1, y2 = gamma1 / w1, gamma2 / w2
        inside = y1 * y1 + y2 * y2 <= radius * radius
    elif w1 > tiny and abs(gamma2) <= 1e-14 * abs(gamma1):
        y1, y2 = gamma1 / w1, 0.0
        inside = y1 * y1 <= radius * radius
    if not inside:
        kappa = max(0.0, np.sqrt(gamma1 * gamma1 + gamma2 * gamma2) / radius - w1)
        for _ in range(60):
            d1, d2 = max(w1 + kappa, tiny), max(w2 + kappa, tiny)
            y1, y2 = gamma1 / d1, gamma2 / d2
            norm = np.sqrt(y1 * y1 + y2 * y2)
            if abs(norm - radius) <= 1e-15 * radius:
                break
            slope = (y1 * y1 / d1 + y2 * y2 / d2) / (norm * norm * norm)
            kappa += (1.0 / radius - 1.0 / norm) / slope
        scale = radius / np.sqrt(y1 * y1 + y2 * y2)  # onto the circle to rounding
        y1, y2 = y1 * scale, y2 * scale
    return -(e1x * y1 - e1y * y2), -(e1y * y1 + e1x * y2)


# Directions tried for a sliding point when Newton's method from its last direction fails.
SLIDING_DIRECTIONS = 24


@njit(cache=True, inline="always")
def _sliding(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, angle):
    """For a point sliding with friction along e = (cos angle, sin angle)
    (λ_t = μ λ_n e, u_n = 0): (F, F', d, e·w) with d = a_nn + μ a_nt·e (λ_n =
    -g_n / d), w = d u_t, F = e x w (zero when u_t is parallel to e) and F' its
    derivative in the angle."""
    e1, e2 = math.cos(angle), math.sin(angle)
    d = a_nn + mu * (a_n1 * e1 + a_n2 * e2)
    d_prime = mu * (-a_n1 * e2 + a_n2 * e1)
    w1 = -g_n * (a_n1 + mu * (a_11 * e1 + a_12 * e2)) + g_1 * d
    w2 = -g_n * (a_n2 + mu * (a_12 * e1 + a_22 * e2)) + g_2 * d
    w1_prime = -g_n * mu * (-a_11 * e2 + a_12 * e1) + g_1 * d_prime
    w2_prime = -g_n * mu * (-a_12 * e2 + a_22 * e1) + g_2 * d_prime
    F = e1 * w2 - e2 * w1
    F_prime = -e2 * w2 - e1 * w1 + e1 * w2_prime - e2 * w1_prime
    return F, F_prime, d, e1 * w1 + e2 * w2


@njit(cache=True, inline="always")
def _sliding_root(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, low, high):
    """The angle in [low, high] where F of _sliding changes sign, by bisection."""
    F_low = _sliding(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, low)[0]
    for _ in range(60):
        middle = 0.5 * (low + high)
        F = _sliding(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, middle)[0]
        if (F < 0.0) == (F_low < 0.0):
            low, F_low = middle, F
        else:
            high = middle
    return 0.5 * (low + high)


@njit(cache=True, inline="always")
def point_impulse(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, guess_1, guess_2):
    """The impulse (λ_n, λ_1, λ_2) of one point whose velocity is u = A λ + g
    (A = [[a_nn, a_n1, a_n2], [a_n1, a_11, a_12], [a_n2, a_12, a_22]]) obeying
    the Coulomb law (module docstring) exactly: none when g_n >= 0
    (separating); else the sticking impulse -A⁻¹ g if it lies in the cone;
    else sliding, λ = λ_n (1, μ e) with u_n = 0 and u_t = -κ e, κ >= 0, the
    direction e found by Newton's method from the warm start's (guess), else
    as the root nearest the guess of a scan of SLIDING_DIRECTIONS angles. With
    A singular (a point that moves along fewer than three directions) or no
    sliding root: the normal row, then the tangential impulse minimising the
    dissipation on the disk |λ_t| <= μ λ_n (disk_minimizer)."""
    if g_n >= 0.0:
        return 0.0, 0.0, 0.0
    # A⁻¹ by cofactors
    c_nn, c_n1, c_n2 = a_11 * a_22 - a_12 * a_12, a_n2 * a_12 - a_n1 * a_22, a_n1 * a_12 - a_n2 * a_11
    c_11, c_12, c_22 = a_nn * a_22 - a_n2 * a_n2, a_n1 * a_n2 - a_nn * a_12, a_nn * a_11 - a_n1 * a_n1
    determinant = a_nn * c_nn + a_n1 * c_n1 + a_n2 * c_n2
    regular = determinant > 1e-10 * a_nn * max(a_11, a_22) * max(a_11, a_22)
    if regular:
        s_n = -(c_nn * g_n + c_n1 * g_1 + c_n2 * g_2) / determinant
        s_1 = -(c_n1 * g_n + c_11 * g_1 + c_12 * g_2) / determinant
        s_2 = -(c_n2 * g_n + c_12 * g_1 + c_22 * g_2) / determinant
        if s_n > 0.0 and math.sqrt(s_1 * s_1 + s_2 * s_2) <= mu * s_n:
            return s_n, s_1, s_2
        if mu > 0.0:
            angle = math.atan2(guess_2, guess_1) if guess_1 != 0.0 or guess_2 != 0.0 else math.atan2(s_2, s_1)
            found = False
            for _ in range(12):
                F, F_prime, d, along = _sliding(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, angle)
                if d <= 0.0 or F_prime == 0.0:
                    break
                change = max(-0.5, min(0.5, F / F_prime))
                angle -= change
                if abs(change) < 1e-13:
                    found = along <= 0.0
                    break
            if not found:
                best = np.inf
                step = 2.0 * math.pi / SLIDING_DIRECTIONS
                start = math.atan2(guess_2, guess_1)
                previous = _sliding(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, start)
                for i in range(1, SLIDING_DIRECTIONS + 1):
                    current = _sliding(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, start + i * step)
                    if previous[2] > 0.0 and current[2] > 0.0 and (previous[0] < 0.0) != (current[0] < 0.0):
                        root = _sliding_root(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu,
                                             start + (i - 1) * step, start + i * step)
                        check = _sliding(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, root)
                        distance = min(i - 0.5, SLIDING_DIRECTIONS - i + 0.5)
                        if check[2] > 0.0 and check[3] <= 0.0 and distance < best:
                            best, angle, found = distance, root, True
                    previous = current
            if found:
                normal = -g_n / _sliding(a_nn, a_n1, a_n2, a_11, a_12, a_22, g_n, g_1, g_2, mu, angle)[2]
                return normal, mu * normal * math.cos(angle), mu * normal * math.sin(angle)
    normal = max(0.0, -(g_n + a_n1 * guess_1 + a_n2 * guess_2) / a_nn) if a_nn > 0.0 else 0.0
    x1, x2 = disk_minimizer(a_11, a_12, a_22, g_1 + a_n1 * normal, g_2 + a_n2 * normal, mu * normal)
    return normal, x1, x2


@njit(cache=True, inline="always")
def joint_impulse(x0, w, bound, lowest, highest):
    """The impulse Λ on a joint's coordinate, whose velocity is x0 + w Λ, from
    its joint friction (|Λ| <= bound, and Λ = -bound sign(x) when it moves)
    and its position limits (velocity walls: x >= lowest, pushed by Λ > 0,
    x <= highest, by Λ < 0): friction's answer, unless it leaves the
    velocity past a wall; then the wall's. The two laws in one row, so that a
    joint resting on its limit with friction has one row (two parallel rows
    make Gauss-Seidel cycle)."""
    impulse = min(max(-x0 / w, -bound), bound)
    x = x0 + w * impulse
    if x < lowest:
        impulse = (lowest - x0) / w
    elif x > highest:
        impulse = (highest - x0) / w
    return impulse


@njit(cache=True, inline="always")
def _joint_row_impulse(problem, j, r, u, impulses):
    """The joint_impulse of joint j (row r) for the other rows' impulses."""
    w = problem.W[r, r]
    return joint_impulse(u[r] - w * impulses[r], w, problem.joint_bound[j], problem.lowest[j], problem.highest[j])


@njit(cache=True)
def coulomb_residual(problem, u, impulses):
    """The largest violation of the Coulomb law (module docstring) over the
    points, velocity units: min(λ_n W_nn, u_n) for the normal row (the natural
    map), and |λ_t - P(λ_t - u_t/w)| w for the tangential (P: onto the disk
    of radius μ λ_n, w: the largest eigenvalue of W_tt); and for each joint
    row after the points, |Λ - Λ*| W_rr with Λ* the joint_impulse for the
    other rows' impulses."""
    W, friction = problem.W, problem.friction
    worst = 0.0
    points = friction.shape[0]
    for k in range(points):
        n = 3 * k
        worst = max(worst, abs(min(impulses[n] * W[n, n], u[n])))
        a, b, c = W[n + 1, n + 1], W[n + 1, n + 2], W[n + 2, n + 2]
        w = 0.5 * (a + c) + np.sqrt(0.25 * (a - c) * (a - c) + b * b)
        if w <= 0.0:
            continue
        x1, x2 = impulses[n + 1] - u[n + 1] / w, impulses[n + 2] - u[n + 2] / w
        radius = friction[k] * max(impulses[n], 0.0)
        norm = np.sqrt(x1 * x1 + x2 * x2)
        if norm > radius:
            x1, x2 = x1 * radius / norm, x2 * radius / norm
        worst = max(worst, np.sqrt((impulses[n + 1] - x1) ** 2 + (impulses[n + 2] - x2) ** 2) * w)
    for j in range(problem.joint_bound.shape[0]):
        r = 3 * points + j
        if W[r, r] > 0.0:
            worst = max(worst, abs(impulses[r] - _joint_row_impulse(problem, j, r, u, impulses)) * W[r, r])
    return worst


@njit(cache=True)
def _add_column(W, u, column, change):
    """u += W[:, column] change: the velocities after one row's impulse changed."""
    if change != 0.0:
        for r in range(u.shape[0]):
            u[r] += W[r, column] * change


@njit(cache=True)
def _sweep(problem, impulses, u):
    """One nonsmooth block Gauss-Seidel sweep over the points, then the joint rows."""
    W, friction = problem.W, problem.friction
    points = friction.shape[0]
    for k in range(points):
        n, t1, t2 = 3 * k, 3 * k + 1, 3 * k + 2
        if not W[n, n] > 0.0:  # a point no coordinate moves
            continue
        free_n, free_1, free_2 = u[n], u[t1], u[t2]  # the point's velocity without its own impulses
        for a in range(3):
            free_n -= W[n, n + a] * impulses[n + a]
            free_1 -= W[t1, n + a] * impulses[n + a]
            free_2 -= W[t2, n + a] * impulses[n + a]
        normal, x1, x2 = point_impulse(W[n, n], W[n, t1], W[n, t2], W[t1, t1], W[t1, t2], W[t2, t2],
                                       free_n, free_1, free_2, friction[k], impulses[t1], impulses[t2])
        _add_column(W, u, n, normal - impulses[n])
        _add_column(W, u, t1, x1 - impulses[t1])
        _add_column(W, u, t2, x2 - impulses[t2])
        impulses[n], impulses[t1], impulses[t2] = normal, x1, x2
    for j in range(problem.joint_bound.shape[0]):
        r = 3 * points + j
        if W[r, r] > 0.0:
            value = _joint_row_impulse(problem, j, r, u, impulses)
            _add_column(W, u, r, value - impulses[r])
            impulses[r] = value


@njit(cache=True)
def _row_velocities(W, c, impulses, u):
    """u = W λ + c."""
    for r in range(c.shape[0]):
        total = c[r]
        for s in range(c.shape[0]):
            total += W[r, s] * impulses[s]
        u[r] = total


@njit(cache=True, inline="always")
def _keep_better(problem, candidate, velocity, impulses, u, residual):
    """impulses, u = the candidate and its velocities (computed into velocity)
    if its residual is below `residual`; returns the residual kept."""
    _row_velocities(problem.W, problem.c, candidate, velocity)
    polished = coulomb_residual(problem, velocity, candidate)
    if polished < residual:
        impulses[:] = candidate
        u[:] = velocity
        return polished
    return residual


@njit(cache=True, inline="always")
def _holding_rows(problem, impulses, rows, target):
    """The rows that hold, into rows[:m] with their velocities target[:m]: the
    points that stick (pressed, strictly inside their cones, u = 0), the joints
    held by friction (strictly inside its bound, u = 0) or pressed on a limit
    (u = its wall). Returns m."""
    friction, joint_bound = problem.friction, problem.joint_bound
    points = friction.shape[0]
    m = 0
    for k in range(points):
        n = 3 * k
        if impulses[n] > 0.0 and np.hypot(impulses[n + 1], impulses[n + 2]) < friction[k] * impulses[n] * (1 - 1e-9):
            for a in range(3):
                rows[m] = n + a
                m += 1
    for j in range(joint_bound.shape[0]):
        r = 3 * points + j
        impulse = impulses[r]
        if abs(impulse) < joint_bound[j]:
            rows[m] = r
            m += 1
        elif impulse > joint_bound[j] and problem.lowest[j] > -np.inf:
            rows[m], target[m] = r, problem.lowest[j]
            m += 1
        elif impulse < -joint_bound[j] and problem.highest[j] < np.inf:
            rows[m], target[m] = r, problem.highest[j]
            m += 1
    return m


@njit(cache=True)
def _polish(problem, impulses, u, residual):
    """Solve for the rows that hold (_holding_rows) as bilateral, the others'
    impulses held: the exact answer in one step when that set is right, which
    Gauss-Seidel approaches slowly when the contacts are redundant (the corners
    of a sole). W_SS is singular then: a dense factor of W_SS + ε 1 with
    iterative refinement (proximal point iterations) converges to a solution.
    Kept if its residual is smaller; returns the residual."""
    W, c = problem.W, problem.c
    rows = np.empty(W.shape[0], dtype=np.int64)
    target = np.zeros(W.shape[0])
    m = _holding_rows(problem, impulses, rows, target)
    if m == 0:
        return residual
    A = np.empty((m, m))
    largest = 0.0
    for i in range(m):
        largest = max(largest, W[rows[i], rows[i]])
    epsilon = 1e-10 * largest
    for i in range(m):
        for j in range(m):
            A[i, j] = W[rows[i], rows[j]]
        A[i, i] += epsilon
    chain = np.empty(m, dtype=np.int64)  # a dense factor A = L^T L: each coordinate's parent the one before
    for i in range(m):
        chain[i] = i - 1
    if ltl_factor(A, chain) >= 0:
        return residual
    candidate = impulses.copy()
    velocity = np.empty_like(u)
    step = np.empty(m)
    for _ in range(4):  # refine: candidate_S -= (W_SS + ε)⁻¹ (u_S - target)
        _row_velocities(W, c, candidate, velocity)
        for i in range(m):
            step[i] = velocity[rows[i]] - target[i]
        ltl_solve(A, chain, step)
        for i in range(m):
            candidate[rows[i]] -= step[i]
    return _keep_better(problem, candidate, velocity, impulses, u, residual)


@njit(cache=True, inline="always")
def cone_projection(z_n, z_1, z_2, mu, jacobian):
    """The projection of z onto the friction cone |x_t| <= μ x_n, and its
    Jacobian (3, 3) into `jacobian`."""
    jacobian[:] = 0.0
    s = math.sqrt(z_1 * z_1 + z_2 * z_2)
    if s <= mu * z_n:
        for a in range(3):
            jacobian[a, a] = 1.0
        return z_n, z_1, z_2
    if mu * s <= -z_n:
        return 0.0, 0.0, 0.0
    d_1, d_2 = z_1 / s, z_2 / s
    scale = 1.0 / (1.0 + mu * mu)
    along = (z_n + mu * s) * scale  # the normal component of the projection
    jacobian[0, 0] = scale
    jacobian[0, 1], jacobian[0, 2] = mu * d_1 * scale, mu * d_2 * scale
    jacobian[1, 0], jacobian[2, 0] = mu * d_1 * scale, mu * d_2 * scale
    jacobian[1, 1] = mu * (mu * d_1 * d_1 * scale + along * (1.0 - d_1 * d_1) / s)
    jacobian[2, 2] = mu * (mu * d_2 * d_2 * scale + along * (1.0 - d_2 * d_2) / s)
    jacobian[1, 2] = mu * (mu * d_1 * d_2 * scale - along * d_1 * d_2 / s)
    jacobian[2, 1] = jacobian[1, 2]
    return along, mu * along * d_1, mu * along * d_2


@njit(cache=True)
def natural_map(problem, impulses, u, F, J):
    """F(λ) (m,), zero exactly where λ obeys the law, and its generalised
    Jacobian J (m, m), at u = W λ + c (given). Each point's rows: F = λ -
    P_K(λ - ρ û) with û = u + μ |u_t| e_n (De Saxcé's modified velocity: λ in
    the friction cone K, û in its dual, λ ⊥ û is the Coulomb law), ρ =
    1/W_nn; each joint row: F = Λ - Λ* (joint_impulse for the other rows).
    Returns ½ |F|²."""
    W, friction, joint_bound = problem.W, problem.friction, problem.joint_bound
    m, points = u.shape[0], problem.friction.shape[0]
    J[:] = 0.0
    projection = np.empty((3, 3))
    slope = np.empty((3, m))  # d(λ_k - ρ û_k)/dλ
    for k in range(points):
        n = 3 * k
        if not W[n, n] > 0.0:  # a point no coordinate moves: no impulse
            for a in range(3):
                F[n + a], J[n + a, n + a] = impulses[n + a], 1.0
            continue
        mu, rho = friction[k], 1.0 / W[n, n]
        slip = math.sqrt(u[n + 1] * u[n + 1] + u[n + 2] * u[n + 2])
        for a in range(3):
            for col in range(m):
                slope[a, col] = -rho * W[n + a, col]
            slope[a, n + a] += 1.0
        if slip > 0.0:
            for col in range(m):
                slope[0, col] -= rho * mu * (u[n + 1] * W[n + 1, col] + u[n + 2] * W[n + 2, col]) / slip
        z_n = impulses[n] - rho * (u[n] + mu * slip)
        p_n, p_1, p_2 = cone_projection(z_n, impulses[n + 1] - rho * u[n + 1], impulses[n + 2] - rho * u[n + 2],
                                        mu, projection)
        F[n], F[n + 1], F[n + 2] = impulses[n] - p_n, impulses[n + 1] - p_1, impulses[n + 2] - p_2
        for a in range(3):
            J[n + a, n + a] += 1.0
            for col in range(m):
                J[n + a, col] -= (projection[a, 0] * slope[0, col] + projection[a, 1] * slope[1, col]
                                  + projection[a, 2] * slope[2, col])
    for j in range(joint_bound.shape[0]):
        r = 3 * points + j
        w = W[r, r]
        if not w > 0.0:
            F[r], J[r, r] = impulses[r], 1.0
            continue
        x0 = u[r] - w * impulses[r]
        held = joint_impulse(x0, w, joint_bound[j], problem.lowest[j], problem.highest[j])
        F[r] = impulses[r] - held
        if abs(held) != joint_bound[j]:  # friction holds it or a wall does: Λ* = (x* - x0) / w
            for col in range(m):  # F = W_r λ / w + constant
                J[r, col] = W[r, col] / w
        else:
            J[r, r] = 1.0
    half_square = 0.0
    for r in range(m):
        half_square += 0.5 * F[r] * F[r]
    return half_square


@njit(cache=True)
def _solve_dense(A, b):
    """b = A⁻¹ b by Gaussian elimination with partial pivoting, A overwritten;
    a pivot below 1e-12 of A's largest entry is raised to it (a singular
    Jacobian of redundant rows: one of its solutions)."""
    m = b.shape[0]
    tiny = 0.0
    for r in range(m):
        for col in range(m):
            tiny = max(tiny, abs(A[r, col]))
    tiny = max(tiny, 1.0) * 1e-12
    for col in range(m):
        pivot = col
        for r in range(col + 1, m):
            if abs(A[r, col]) > abs(A[pivot, col]):
                pivot = r
        if pivot != col:
            for c in range(m):
                A[col, c], A[pivot, c] = A[pivot, c], A[col, c]
            b[col], b[pivot] = b[pivot], b[col]
        if abs(A[col, col]) < tiny:
            A[col, col] = tiny if A[col, col] >= 0.0 else -tiny
        for r in range(col + 1, m):
            factor = A[r, col] / A[col, col]
            if factor != 0.0:
                for c in range(col, m):
                    A[r, c] -= factor * A[col, c]
                b[r] -= factor * b[col]
    for col in range(m - 1, -1, -1):
        total = b[col]
        for c in range(col + 1, m):
            total -= A[col, c] * b[c]
        b[col] = total / A[col, col]


@njit(cache=True)
def newton_polish(problem, impulses, u, residual, tolerance, cold):
    """Semismooth Newton's method on the natural map (natural_map) from λ (or,
    `cold`, from zero: a warm start can lead it to a local minimum of |F|),
    with a backtracking (Armijo) line search on ½ |F|², NEWTON_STEPS steps at
    most: where Gauss-Seidel cycles (points of one body sliding with
    friction), it converges in a few steps (1 to 7 on a falling TALOS). Kept
    if its residual is smaller; returns the residual."""
    W, c = problem.W, problem.c
    m = c.shape[0]
    F, J = np.empty(m), np.empty((m, m))
    trial_F, trial_J = np.empty(m), np.empty((m, m))
    candidate, trial, velocity, direction = impulses.copy(), np.empty(m), u.copy(), np.empty(m)
    if cold:
        candidate[:] = 0.0
        _row_velocities(W, c, candidate, velocity)
    merit = natural_map(problem, candidate, velocity, F, J)
    for _ in range(NEWTON_STEPS):
        for r in range(m):
            direction[r] = -F[r]
        _solve_dense(J, direction)
        t = 1.0
        accepted = False
        for _ in range(LINE_SEARCH_HALVINGS):
            for r in range(m):
                trial[r] = candidate[r] + t * direction[r]
            _row_velocities(W, c, trial, velocity)
            trial_merit = natural_map(problem, trial, velocity, trial_F, trial_J)
            if trial_merit <= (1.0 - 1e-4 * t) * merit:
                accepted = True
                break
            t *= 0.5
        if not accepted:
            break
        candidate[:] = trial
        F[:], J[:] = trial_F, trial_J
        merit = trial_merit
        if coulomb_residual(problem, velocity, candidate) <= tolerance:
            break
    return _keep_better(problem, candidate, velocity, impulses, u, residual)


@njit(cache=True)
def solve_coulomb(problem, impulses, u, tolerance, max_iterations):
    """Impulses λ (in: the warm start) of the CoulombProblem (W, c, ...) with
    u = W λ + c obeying, for each point, the Coulomb law, and for each joint
    row the law of joint_impulse (module docstring). Nonsmooth block
    Gauss-Seidel, polished every POLISH_EVERY sweeps by a direct solve of the
    rows that hold, and by Newton's method where it stalls or runs out of
    sweeps; stops at `tolerance`, after max_iterations sweeps, or when it
    stalls STALL_CHECKS times in a row. Returns a SolverReport (sweeps,
    residual in m/s or rad/s)."""
    _row_velocities(problem.W, problem.c, impulses, u)
    residual = coulomb_residual(problem, u, impulses)
    if residual <= tolerance:
        return SolverReport(0, residual)
    checkpoint, stalled = residual, 0
    for sweep in range(1, max_iterations + 1):
        _sweep(problem, impulses, u)
        residual = coulomb_residual(problem, u, impulses)
        if residual > tolerance and sweep % POLISH_EVERY == 0:
            residual = _polish(problem, impulses, u, residual)
            if residual > STALL_RATIO * checkpoint:
                residual = newton_polish(problem, impulses, u, residual, tolerance, False)
                stalled += 1
            else:
                stalled = 0
            checkpoint = residual
            if stalled == STALL_CHECKS and residual > tolerance:
                return SolverReport(sweep, newton_polish(problem, impulses, u, residual, tolerance, True))
        if residual <= tolerance:
            return SolverReport(sweep, residual)
    residual = newton_polish(problem, impulses, u, residual, tolerance, False)
    if residual > tolerance:
        residual = newton_polish(problem, impulses, u, residual, tolerance, True)
    return SolverReport(max_iterations, residual)
