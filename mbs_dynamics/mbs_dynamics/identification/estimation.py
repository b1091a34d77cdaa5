"""Physically consistent least squares for the parameters of a ParameterLayout.

The data enter through their normal equations (NormalEquations): for the
rows of the actuated joints, weighted by joint,

    A = sum_t Y_p(t)^T W Y_p(t) / N,   b = sum_t Y_p(t)^T W tau(t) / N,   c = sum_t tau^T W tau / N,

so that the mean weighted squared torque error of p is p^T A p - 2 b^T p + c;
chunks of any recording reduce to these sums and add up (Dask, identify.py).
The default weight of joint j is 1 / (its measured torque's RMS)^2: every
joint counts in its own scale, and the cost is a sum of relative errors.

Each identified body's parameters are written through the log-Cholesky
factor of its pseudo-inertia (Rucker & Wensing 2022),

    J = [[Sigma, h], [h^T, m]] = U U^T,  Sigma = tr(I_O)/2 1 - I_O,
    U = e^alpha [[e^d1, s12, s13, t1], [0, e^d2, s23, t2], [0, 0, e^d3, t3], [0, 0, 0, 1]],

so that every value of theta = (alpha, d1, d2, d3, s12, s23, s13, t1, t2, t3)
is a physically consistent body (J positive definite: positive mass, and
principal moments that satisfy the triangle inequality) and every such body
has one theta. Coulomb friction, its Stribeck excess (so that F_s >= F_c),
damping and armature are bounded below by 0; the offset is free.

The prior is the nominal model (the URDF), through a distance between
pseudo-inertias: the entropic (log-det, Bregman) divergence of Lee, Wensing &
Park ("Geometric robot dynamic identification: a convex programming
approach", IEEE T-RO 36(2), 2020), for each body

    d(J || J0) = -log det(J0^-1 J) + tr(J0^-1 J) - 4,

zero at J = J0, positive elsewhere, infinite at the boundary of consistency,
free of units and unchanged by a change of the body's frame (J -> A J A^T for
both); near J0 it is half the squared relative change, |J0^-1/2 dJ J0^-1/2|^2 / 2
(a body's mass and inertia scaled by 1 + e: d ~ 2 e^2). The cost is

    mean weighted squared torque error + prior_weight (sum over bodies of d(J || J0)
                                                        + sum over joint parameters of (s (x - x0))^2),

each joint parameter pulled toward its nominal value in the joint's torque
scale s (friction, Stribeck excess and offset over the torque RMS, damping times the velocity
RMS and armature times the acceleration RMS over it: s (x - x0) is the change
of the joint's torque relative to its RMS). With the default joint weights
the torque error is a sum over joints of relative squared errors, so
prior_weight is what a unit of divergence costs in it: at the default 1e-5, a
body 10 % heavier and larger (d = 0.02) costs as much as an RMS torque error
of 0.045 % of one joint's torque.

At the optimum, J^-1 - J0^-1 is a combination of the parameter directions the
data see (the stationarity of d), so what the torques cannot see stays at the
URDF's physical values: a link's mass that no torque shows moves only as far
as J0 ties it to something the data do see (the first link of an arm: its
mass and centre of mass follow its inertia about the axis in proportion to
the centre of mass's distance from the axis, not at all when it is on the
axis).

The divergence is a sum of squares in the factors: with M = U0^-1 U (upper
triangular, J = U U^T, J0 = U0 U0^T), tr(J0^-1 J) = |M|_F^2 and
log det(J0^-1 J) = 2 sum log M_ii, so

    d = sum_i g(u_i)^2 + sum_(i<j) M_ij^2,   u_i = log M_ii,   g(u) = sign(u) sqrt(e^2u - 1 - 2u),

with u_i linear in theta (alpha + d_i - alpha0 - d0_i, and alpha - alpha0).

The minimisation is scipy's trust-region reflective least squares on the
residual [R p(x) - r; prior], R^T R = A and R^T r = b (an eigen-square root: A
may be singular), the prior's rows the divergence's g(u_i) and M_ij of each
body and the joint parameters' scaled differences, with the analytic Jacobian
(_Problem), from the prior.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.optimize

from mbs_dynamics.identification.parameters import ParameterLayout

# Per unit of divergence (module docstring). A body scaled by 1 + e costs 2e-5 e^2 (d ~ 2 e^2), about what a
# pull of 1e-4 |theta - theta0|^2 in log-Cholesky coordinates would (alpha = e / 2: 2.5e-5 e^2). A simulated UR5
# whose inertias were off by 20-40 % predicts a held-out run to 0.088 % RMS (no prior 0.087 %, 1e-4: 0.098 %).
DEFAULT_PRIOR_WEIGHT = 1e-5
# A nominal body whose pseudo-inertia is not positive definite (an inconsistent
# URDF) starts from its eigenvalues raised to this fraction of the largest.
PRIOR_EIGENVALUE_FLOOR = 1e-6
# Below this many smoothing velocities of the Coulomb law, a joint's torque is left out of the fit.
STICKING_VELOCITIES = 3.0
# Huber's threshold in units of a joint's residual RMS (95 % efficiency on normal errors).
HUBER_THRESHOLD = 1.345


@dataclass
class NormalEquations:
    """Weighted sums over samples (module docstring), and per-joint statistics
    the prior's scales use: counts and sums of squares of the velocity and the
    acceleration of each actuated joint."""

    normal_matrix: np.ndarray  # A, (size, size)
    moment: np.ndarray  # b, (size,)
    torque_squares: float  # c
    samples: int
    velocity_squares: np.ndarray  # (joints,)
    acceleration_squares: np.ndarray

    def __add__(self, other: NormalEquations) -> NormalEquations:
        return NormalEquations(self.normal_matrix + other.normal_matrix, self.moment + other.moment,
                               self.torque_squares + other.torque_squares, self.samples + other.samples,
                               self.velocity_squares + other.velocity_squares,
                               self.acceleration_squares + other.acceleration_squares)

    def cost(self, p) -> float:
        """p^T A p - 2 b^T p + c: the (mean, if these are) weighted squared torque error of p."""
        return float(p @ self.normal_matrix @ p - 2.0 * self.moment @ p + self.torque_squares)

    def mean(self) -> NormalEquations:
        """The sums divided by the number of samples."""
        n = max(self.samples, 1)
        return NormalEquations(self.normal_matrix / n, self.moment / n, self.torque_squares / n, self.samples,
                               self.velocity_squares / n, self.acceleration_squares / n)


def normal_equations(layout: ParameterLayout, q, v, a, effort, joint_weights, robust_scale=None,
                     parameters=None) -> NormalEquations:
    """The sums of the module docstring over the states (q, v, a) (batch, n?)
    and the measured efforts (batch, nv), on the rows of the actuated joints,
    weighted by joint_weights (joints,). With robust_scale (joints,) and
    parameters p: Huber's weights on top, min(1, HUBER_THRESHOLD s_j / |r|) for
    the residual r = Y_p p - tau of each sample and joint (one step of
    iteratively reweighted least squares).

    With Coulomb friction (or its Stribeck excess) in the layout, a joint's
    row of a sample where it moves slower than STICKING_VELOCITIES smoothing
    velocities is left out: there friction is set-valued (the joint may
    stick, friction taking any value up to its limit) and no function of the
    velocity predicts it."""
    rows = layout.joint_coordinates()
    Y = layout.regressor(q, v, a)[:, rows, :]  # (batch, joints, size)
    tau = np.asarray(effort, dtype=float)[:, rows]
    weights = np.broadcast_to(np.asarray(joint_weights, dtype=float), tau.shape)
    weights = weights * fitted_rows(layout, np.asarray(v)[:, rows])
    if robust_scale is not None:
        residual = np.abs(Y @ parameters - tau)
        limit = HUBER_THRESHOLD * np.asarray(robust_scale)
        weights = weights * np.minimum(1.0, limit / np.maximum(residual, 1e-300))
    size = layout.size
    Y = Y.reshape(-1, size)  # a row per sample and joint: one matrix product (BLAS), not an einsum
    weighted = Y * weights.reshape(-1, 1)
    return NormalEquations(weighted.T @ Y, weighted.T @ tau.reshape(-1), float(np.sum(weights * tau**2)), len(tau),
                           np.sum(np.asarray(v)[:, rows] ** 2, axis=0), np.sum(np.asarray(a)[:, rows] ** 2, axis=0))


def fitted_rows(layout: ParameterLayout, joint_velocities) -> np.ndarray:
    """(batch, joints) bool: the joints' rows that a fit with Coulomb friction
    (or its Stribeck excess) uses, where the joint moves at STICKING_VELOCITIES
    smoothing velocities or faster (normal_equations); every row without it."""
    joint_velocities = np.asarray(joint_velocities)
    if not layout.fits_coulomb:
        return np.ones(joint_velocities.shape, dtype=bool)
    return np.abs(joint_velocities) >= STICKING_VELOCITIES * layout.smoothing


# --- bodies: pseudo-inertia and its log-Cholesky parameters -------------------

def pseudo_inertia(parameters) -> np.ndarray:
    """J (..., 4, 4) of inertial parameters (..., 10) [m, h, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]."""
    parameters = np.asarray(parameters, dtype=float)
    m, h = parameters[..., 0], parameters[..., 1:4]
    ixx, ixy, iyy, ixz, iyz, izz = np.moveaxis(parameters[..., 4:], -1, 0)
    inertia = np.stack([np.stack([ixx, ixy, ixz], -1), np.stack([ixy, iyy, iyz], -1),
                        np.stack([ixz, iyz, izz], -1)], -2)
    J = np.zeros(parameters.shape[:-1] + (4, 4))
    J[..., :3, :3] = 0.5 * np.trace(inertia, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - inertia
    J[..., :3, 3] = J[..., 3, :3] = h
    J[..., 3, 3] = m
    return J


def inertial_parameters_of(J) -> np.ndarray:
    """The inverse of pseudo_inertia: (..., 10) from J (..., 4, 4); linear."""
    J = np.asarray(J)
    sigma = J[..., :3, :3]
    inertia = np.trace(sigma, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - sigma
    return np.concatenate([J[..., 3:4, 3], J[..., :3, 3], inertia[..., 0, 0, None], inertia[..., 0, 1, None],
                           inertia[..., 1, 1, None], inertia[..., 0, 2, None], inertia[..., 1, 2, None],
                           inertia[..., 2, 2, None]], axis=-1)


# (row, column) of U that each theta after alpha sets: d1, d2, d3 on the
# diagonal (exponentiated), then s12, s23, s13, t1, t2, t3.
_ENTRIES = ((0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (0, 2), (0, 3), (1, 3), (2, 3))


def cholesky_factor(theta) -> np.ndarray:
    """U (..., 4, 4) of log-Cholesky parameters theta (..., 10) (module docstring)."""
    theta = np.asarray(theta, dtype=float)
    U = np.zeros(theta.shape[:-1] + (4, 4))
    for k, (r, c) in enumerate(_ENTRIES):
        U[..., r, c] = np.exp(theta[..., 1 + k]) if r == c else theta[..., 1 + k]
    U[..., 3, 3] = 1.0
    return np.exp(theta[..., 0])[..., None, None] * U


def log_cholesky(J) -> np.ndarray:
    """theta (..., 10) of a positive-definite pseudo-inertia J (..., 4, 4): J = U U^T
    with U upper triangular, from the Cholesky factor of J with rows and columns reversed."""
    reverse = np.arange(3, -1, -1)
    L = np.linalg.cholesky(np.asarray(J)[..., reverse[:, None], reverse])
    U = L[..., reverse[:, None], reverse]
    alpha = np.log(U[..., 3, 3])
    U = U / U[..., 3:4, 3:4]
    entries = [np.log(U[..., r, c]) if r == c else U[..., r, c] for r, c in _ENTRIES]
    return np.stack([alpha] + entries, axis=-1)


def cholesky_factor_and_jacobian(theta) -> tuple[np.ndarray, np.ndarray]:
    """U (..., 4, 4) of theta (..., 10) and its derivatives (..., 10, 4, 4) [d U / d theta_k]."""
    U = cholesky_factor(theta)
    dU = np.zeros(U.shape[:-2] + (10, 4, 4))
    dU[..., 0, :, :] = U
    scale = np.exp(np.asarray(theta)[..., 0])
    for k, (r, c) in enumerate(_ENTRIES):
        dU[..., 1 + k, r, c] = U[..., r, c] if r == c else scale
    return U, dU


def parameters_and_jacobian(theta) -> tuple[np.ndarray, np.ndarray]:
    """The inertial parameters (..., 10) of theta (..., 10) and their Jacobian
    (..., 10, 10) [d parameters / d theta]: dJ = dU U^T + U dU^T."""
    U, dU = cholesky_factor_and_jacobian(theta)
    dJ = dU @ np.swapaxes(U, -1, -2)[..., None, :, :]
    dJ = dJ + np.swapaxes(dJ, -1, -2)
    return inertial_parameters_of(U @ np.swapaxes(U, -1, -2)), np.swapaxes(inertial_parameters_of(dJ), -1, -2)


# --- the prior: the entropic divergence of pseudo-inertias -----------------------

def entropic_divergence(J, J0) -> np.ndarray:
    """d(J || J0) = -log det(J0^-1 J) + tr(J0^-1 J) - 4 of positive-definite
    pseudo-inertias (..., 4, 4) (module docstring; Lee, Wensing & Park 2020)."""
    ratio = np.linalg.solve(J0, J)
    return -np.linalg.slogdet(ratio)[1] + np.trace(ratio, axis1=-2, axis2=-1) - 4.0


# Above this |u|, g and g' of the closed forms; below, of their series (the closed forms cancel).
_SERIES_BELOW = 0.1
_SERIES_TERMS = 16


def _signed_root(u) -> tuple[np.ndarray, np.ndarray]:
    """g(u) = sign(u) sqrt(e^2u - 1 - 2u) and g'(u) = (e^2u - 1) / g(u), smooth
    through u = 0 (g'(0) = sqrt 2): g = sqrt2 u sqrt(h), g' = sqrt2 e1(2u) / sqrt(h)
    with h(u) = (e^2u - 1 - 2u) / 2u^2 and e1(x) = (e^x - 1) / x."""
    u = np.asarray(u, dtype=float)
    small = np.abs(u) < _SERIES_BELOW
    safe = np.where(small, 1.0, u)
    h = (np.expm1(2.0 * safe) - 2.0 * safe) / (2.0 * safe**2)
    e1 = np.expm1(2.0 * safe) / (2.0 * safe)
    if np.any(small):
        n = np.arange(_SERIES_TERMS)
        powers = np.where(small, u, 0.0)[..., None] ** n
        factorials = np.cumprod(np.r_[1.0, np.arange(1.0, _SERIES_TERMS + 2)])  # k! for k = 0 .. terms + 1
        h = np.where(small, powers @ (2.0 ** (n + 1) / factorials[n + 2]), h)  # sum 2^(k+1) u^k / (k+2)!
        e1 = np.where(small, powers @ (2.0**n / factorials[n + 1]), e1)  # sum (2u)^k / (k+1)!
    root = np.sqrt(h)
    return np.sqrt(2.0) * u * root, np.sqrt(2.0) * e1 / root


def divergence_residuals(theta, theta0) -> tuple[np.ndarray, np.ndarray]:
    """Residuals (..., 10) whose squares add up to d(J(theta) || J(theta0))
    (module docstring: g(u_1..4), then M_ij at the off-diagonal entries of
    _ENTRIES), and their Jacobian (..., 10, 10) [d residual / d theta]."""
    theta, theta0 = np.asarray(theta, dtype=float), np.asarray(theta0, dtype=float)
    U, dU = cholesky_factor_and_jacobian(theta)
    U0_inverse = np.linalg.inv(cholesky_factor(theta0))
    M, dM = U0_inverse @ U, U0_inverse[..., None, :, :] @ dU
    log_diagonal = theta[..., :1] + np.concatenate([theta[..., 1:4], np.zeros(theta.shape[:-1] + (1,))], axis=-1)
    log_diagonal0 = theta0[..., :1] + np.concatenate([theta0[..., 1:4], np.zeros(theta0.shape[:-1] + (1,))], axis=-1)
    g, slope = _signed_root(log_diagonal - log_diagonal0)
    off = _ENTRIES[3:]
    residuals = np.concatenate([g] + [M[..., r, c, None] for r, c in off], axis=-1)
    jacobian = np.zeros(theta.shape[:-1] + (10, 10))
    jacobian[..., :4, 0] = slope  # d u_i / d alpha = 1
    for i in range(3):
        jacobian[..., i, 1 + i] = slope[..., i]  # d u_i / d d_i = 1
    for k, (r, c) in enumerate(off):
        jacobian[..., 4 + k, :] = dM[..., :, r, c]
    return residuals, jacobian


def consistent_prior(J0) -> tuple[np.ndarray, bool]:
    """J0 made positive definite (eigenvalues raised to PRIOR_EIGENVALUE_FLOOR of
    the largest), and whether it had to be."""
    eigenvalues, vectors = np.linalg.eigh(J0)
    floor = PRIOR_EIGENVALUE_FLOOR * eigenvalues[-1]
    if eigenvalues[0] > floor:
        return J0, False
    return (vectors * np.maximum(eigenvalues, floor)) @ vectors.T, True


# --- the fit -------------------------------------------------------------------

@dataclass
class Fit:
    """The identified parameters and how the fit went."""

    parameters: np.ndarray  # p
    identified_bodies: np.ndarray  # body indices whose inertia was fitted
    inconsistent_priors: list[str]  # bodies whose nominal inertia was not physically consistent
    cost: float  # mean weighted squared torque error of p (the data term alone)
    nominal_cost: float
    iterations: int
    message: str
    warnings: list[str] = field(default_factory=list)


def fit(layout: ParameterLayout, equations: NormalEquations, prior=None, prior_weight: float = DEFAULT_PRIOR_WEIGHT,
        torque_scale=None) -> Fit:
    """The physically consistent p closest to the data of `equations` (mean
    sums, NormalEquations.mean) with the prior (the layout's nominal p by
    default) of the module docstring; torque_scale (joints,): each joint's
    torque RMS, the scale of its friction priors (1 by default)."""
    problem = _Problem(layout, equations, prior, prior_weight, torque_scale)
    result = scipy.optimize.least_squares(problem.residual, problem.x0, jac=problem.jacobian,
                                          bounds=(problem.lower, np.inf), method="trf", x_scale="jac",
                                          max_nfev=100 * problem.x0.size)
    p = problem.parameters(result.x)
    return Fit(p, problem.bodies, problem.inconsistent_priors, equations.cost(p), equations.cost(problem.p0),
               int(result.nfev), str(result.message))


class _Problem:
    """fit's residual over x = [theta of each identified body | joint parameters]:

        [R p(x) - r;  w divergence_residuals(theta, theta0) per body;  w s_j (x_j - x0_j)]

    with R^T R = A, R^T r = b (an eigen-square root: A may be singular), w =
    sqrt(prior_weight), s_j the joint parameters' scales of the module
    docstring. Bodies of zero nominal mass stay at p0."""

    def __init__(self, layout, equations, prior, prior_weight, torque_scale):
        self.layout = layout
        p0 = layout.nominal() if prior is None else np.array(prior, dtype=float)
        joints = len(layout.actuated_joints)
        torque_scale = np.ones(joints) if torque_scale is None else np.asarray(torque_scale, dtype=float)
        bodies_p0 = layout.body_parameters(p0)  # a view: the projections below land in p0
        self.bodies = np.flatnonzero(bodies_p0[:, 0] > 0.0)
        self.inconsistent_priors = []
        for body in self.bodies:
            J0, raised = consistent_prior(pseudo_inertia(bodies_p0[body]))
            if raised:
                bodies_p0[body] = inertial_parameters_of(J0)
                self.inconsistent_priors.append(layout.body_names[body])
        self.p0 = p0
        self.joint = np.arange(layout.inertial_count, layout.size)
        self.free = np.concatenate([(10 * self.bodies[:, None] + np.arange(10)).ravel(), self.joint])
        fixed = np.setdiff1d(np.arange(layout.size), self.free)
        self.n_theta = 10 * self.bodies.size

        eigenvalues, vectors = np.linalg.eigh(equations.normal_matrix)
        keep = eigenvalues > eigenvalues[-1] * 1e-15
        R = np.sqrt(eigenvalues[keep])[:, None] * vectors[:, keep].T
        self.R = R[:, self.free]
        self.r = (vectors[:, keep].T @ equations.moment) / np.sqrt(eigenvalues[keep]) - R[:, fixed] @ p0[fixed]

        self.theta0 = log_cholesky(pseudo_inertia(bodies_p0[self.bodies]))
        rms_v, rms_a = np.sqrt(equations.velocity_squares), np.sqrt(equations.acceleration_squares)
        scales = {"friction": 1.0 / torque_scale, "stribeck": 1.0 / torque_scale, "damping": rms_v / torque_scale,
                  "offset": 1.0 / torque_scale, "armature": rms_a / torque_scale}
        joint_scales = np.column_stack([scales[name] for name in layout.joint_parameters]).ravel() \
            if layout.joint_parameters else np.zeros(0)  # joint-major, as p
        self.prior_root = np.sqrt(prior_weight)
        self.joint_prior_rows = self.prior_root * joint_scales
        bounded = np.isin(np.tile(layout.joint_parameters, joints), ("friction", "stribeck", "damping", "armature"))
        self.lower = np.full(self.free.size, -np.inf)
        self.lower[self.n_theta:][bounded] = 0.0
        self.x0 = np.concatenate([self.theta0.ravel(), np.maximum(p0[self.joint], self.lower[self.n_theta:])])

    def free_values(self, x):
        """p[free] at x, and its Jacobian d p[free] / dx."""
        n_theta = self.n_theta
        pi, dpi = parameters_and_jacobian(x[:n_theta].reshape(-1, 10))
        jacobian = np.zeros((self.free.size, x.size))
        for k in range(self.bodies.size):
            jacobian[10 * k:10 * k + 10, 10 * k:10 * k + 10] = dpi[k]
        jacobian[n_theta:, n_theta:] = np.eye(x.size - n_theta)
        return np.concatenate([pi.ravel(), x[n_theta:]]), jacobian

    def parameters(self, x) -> np.ndarray:
        p = self.p0.copy()
        p[self.free] = self.free_values(x)[0]
        return p

    def prior(self, x):
        """The prior's rows (the last two blocks of the class docstring) and their Jacobian."""
        n_theta = self.n_theta
        divergence, divergence_jacobian = divergence_residuals(x[:n_theta].reshape(-1, 10), self.theta0)
        jacobian = np.zeros((x.size, x.size))
        for k in range(self.bodies.size):
            jacobian[10 * k:10 * k + 10, 10 * k:10 * k + 10] = self.prior_root * divergence_jacobian[k]
        jacobian[n_theta:, n_theta:] = np.diag(self.joint_prior_rows)
        return np.concatenate([self.prior_root * divergence.ravel(),
                               self.joint_prior_rows * (x[n_theta:] - self.x0[n_theta:])]), jacobian

    def residual(self, x):
        return np.concatenate([self.R @ self.free_values(x)[0] - self.r, self.prior(x)[0]])

    def jacobian(self, x):
        return np.vstack([self.R @ self.free_values(x)[1], self.prior(x)[1]])


def physically_consistent(parameters) -> np.ndarray:
    """Per body (rows of (..., 10)): is its pseudo-inertia positive definite?"""
    J = pseudo_inertia(parameters)
    return np.linalg.eigvalsh(J)[..., 0] > 0.0
