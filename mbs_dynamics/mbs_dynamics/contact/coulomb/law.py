"""The Coulomb law of one point and of one joint row, solved exactly with
the other rows held: point_impulse (separating, sticking, or sliding along a
root of a trigonometric polynomial of degree two; disk_minimizer for the
sticking candidate), joint_impulse (friction up to a bound, velocity walls),
and cone_projection (onto the friction cone, with its Jacobian, for
newton.py)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

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
