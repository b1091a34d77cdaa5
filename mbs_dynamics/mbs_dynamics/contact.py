"""Contact, loop-closure and impact dynamics (F&O §3.4, RBDL §2.2-2.3).

A constraint set stacks, for the state (q, v), rows G (m x nv) of constraint
velocities G v and their bias gamma = -dG/dt v, so that the constraint holds
at the acceleration level when G a = gamma (DESIGN.md §2):

    PointContact(frame, point)   3 rows: the point's classical acceleration
                                 d²p/dt² = 0, world axes; its force f (3,)
    FrameContact(frame)          6 rows: the frame's body twist does not
                                 change; its wrench [n; f] (6,) about the
                                 frame origin, world-aligned axes
    LoopClosure(frame_a, frame_b)
                                 3 rows: the two frame origins move together
                                 (6 with weld=True: nor do they turn); the
                                 force [and moment] ON frame_a, world axes
                                 (frame_b feels the opposite)

The forces λ enter as M a + h = tau + G^T λ. A constraint set whose G loses
rank (a straight chain, a planar loop closed by a point) has many force
solutions: every method returns the same accelerations and the minimum-norm
forces, and the solution says `rank_deficient`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.optimize import minimize

from mbs_dynamics import inputs
from mbs_dynamics.aba import InverseMassMatrix, forward_dynamics
from mbs_dynamics.crba import mass_matrix
from mbs_dynamics.kinematics import frame_bias_acceleration, frame_jacobian, frame_pose, frame_velocity
from mbs_dynamics.lie import skew, so3_log
from mbs_dynamics.model import Model
from mbs_dynamics.rnea import inverse_dynamics, nonlinear_effects

# Singular values of G below this, relative to the largest, count as zero.
RANK_TOLERANCE = 1e-9
# Least squares on the saddle-point and operational-space systems of a rank-
# deficient G: singular values below this, relative, are its null directions.
LSTSQ_RCOND = 1e-12
METHODS = ("kkt", "schur", "nullspace")


@dataclass(frozen=True)
class PointContact:
    """A point fixed in `frame` (frame coordinates) held still: 3 rows, world axes.
    `target` (world) adds a position error for Baumgarte stabilisation."""

    frame: str
    point: tuple = (0.0, 0.0, 0.0)
    target: tuple | None = None
    rows: ClassVar[int] = 3


@dataclass(frozen=True)
class FrameContact:
    """A frame welded to the world: its body twist does not change, 6 rows."""

    frame: str
    rows: ClassVar[int] = 6


@dataclass(frozen=True)
class LoopClosure:
    """The origins of frame_a and frame_b held together (a cut joint of a closed
    chain); weld=True also holds their relative orientation."""

    frame_a: str
    frame_b: str
    weld: bool = False

    @property
    def rows(self) -> int:
        return 6 if self.weld else 3


class ConstraintSolution(tuple):
    """(x, forces), unpackable as a pair, with diagnostics: x is the acceleration
    (or the post-impact velocity), forces one array per constraint; rank is the
    rank of G, rows its number of rows, residual = |G x - target| (zero when the
    constraints are consistent)."""

    def __new__(cls, x, forces, rank: int, rows: int, residual: float):
        solution = super().__new__(cls, (x, forces))
        solution.rank, solution.rows, solution.residual = rank, rows, residual
        return solution

    @property
    def rank_deficient(self) -> bool:
        return self.rank < self.rows


@dataclass
class ConstraintRows:
    """G (m, nv), gamma = -dG/dt v (m,), the position error phi (m,), and per
    constraint its row slice and the orthogonal map from its multipliers to its
    force (so G^T λ = (to_force G)^T force)."""

    G: np.ndarray
    gamma: np.ndarray
    phi: np.ndarray
    blocks: list


def _point_rows(model, q, v, frame, point):
    """(G, -dG/dt v, world position) of a point fixed in `frame`: p' = v_o + w x r."""
    pose = frame_pose(model, q, frame)
    r = pose[:3, :3] @ np.asarray(point, dtype=float)
    J = frame_jacobian(model, q, frame, "hybrid")
    w = frame_velocity(model, q, v, frame, "hybrid")[:3]
    bias = frame_bias_acceleration(model, q, v, frame, "hybrid")  # [dw/dt; d²o/dt²] at a = 0
    G = J[3:] - skew(r) @ J[:3]
    classical = bias[3:] + np.cross(bias[:3], r) + np.cross(w, np.cross(w, r))
    return G, -classical, pose[:3, 3] + r, J[:3], -bias[:3], pose[:3, :3]


def constraint_rows(model: Model, q, v, constraints) -> ConstraintRows:
    """Stack the rows of `constraints` at (q, v)."""
    Gs, gammas, phis, blocks = [], [], [], []
    start = 0
    for constraint in constraints:
        if isinstance(constraint, PointContact):
            G, gamma, position, *_ = _point_rows(model, q, v, constraint.frame, constraint.point)
            phi = position - np.asarray(constraint.target, dtype=float) if constraint.target is not None \
                else np.zeros(3)
            to_force = np.eye(3)
        elif isinstance(constraint, FrameContact):
            G = frame_jacobian(model, q, constraint.frame, "body")
            gamma = -frame_bias_acceleration(model, q, v, constraint.frame, "body")
            phi = np.zeros(6)
            R = frame_pose(model, q, constraint.frame)[:3, :3]
            to_force = np.kron(np.eye(2), R)  # body wrench -> world-aligned, same point
        elif isinstance(constraint, LoopClosure):
            Ga, gamma_a, pa, Wa, alpha_a, Ra = _point_rows(model, q, v, constraint.frame_a, (0, 0, 0))
            Gb, gamma_b, pb, Wb, alpha_b, Rb = _point_rows(model, q, v, constraint.frame_b, (0, 0, 0))
            G, gamma, phi = Ga - Gb, gamma_a - gamma_b, pa - pb
            if constraint.weld:
                G = np.vstack([Wa - Wb, G])
                gamma = np.concatenate([alpha_a - alpha_b, gamma])
                phi = np.concatenate([so3_log(Ra @ Rb.T), phi])
            to_force = np.eye(constraint.rows)
        else:
            raise ValueError(f"unknown constraint {constraint!r}: use PointContact, FrameContact or LoopClosure")
        Gs.append(G)
        gammas.append(gamma)
        phis.append(phi)
        blocks.append((slice(start, start + G.shape[0]), to_force))
        start += G.shape[0]
    if not Gs:
        raise ValueError("no constraints given")
    return ConstraintRows(np.vstack(Gs), np.concatenate(gammas), np.concatenate(phis), blocks)


def _rank(G: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    U, s, Vt = np.linalg.svd(G)
    rank = int(np.sum(s > RANK_TOLERANCE * max(s[0], 1e-300))) if s.size else 0
    return rank, U, s, Vt


def _forces(rows: ConstraintRows, multipliers: np.ndarray) -> list[np.ndarray]:
    return [to_force @ multipliers[block] for block, to_force in rows.blocks]


def _solve_kkt(M, G, rhs_top, rhs_bottom, full_rank):
    """[[M, G^T], [G, 0]] [x; -λ] = [rhs_top; rhs_bottom] -> (x, λ); least
    squares (minimum norm) when G loses rank."""
    n, m = M.shape[0], G.shape[0]
    K = np.zeros((n + m, n + m))
    K[:n, :n], K[:n, n:], K[n:, :n] = M, G.T, G
    rhs = np.concatenate([rhs_top, rhs_bottom])
    if full_rank:
        solution = np.linalg.solve(K, rhs)
    else:
        solution = np.linalg.lstsq(K, rhs, rcond=LSTSQ_RCOND)[0]
    return solution[:n], -solution[n:]


def contact_forward_dynamics(model: Model, q, v, tau, contacts, method: str = "kkt",
                             baumgarte=(0.0, 0.0)) -> ConstraintSolution:
    """(a, forces): the accelerations with the constraints held, G a = gamma -
    2 alpha G v - beta² phi (Baumgarte; phi is the position error where a
    constraint defines one), and one force per constraint (module docstring).

    method: "kkt" (the full saddle-point system), "schur" (range space:
    (G M⁻¹ G^T) λ = gamma - G a_free with the O(n) M⁻¹ of the ABA), or
    "nullspace" (a = a_p + N y with G N = 0, N^T M N y = N^T (tau - h - M a_p)).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    alpha, beta = (float(x) for x in baumgarte)
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    tau = inputs.vector(model, tau, model.nv, "tau", batch=False)
    rows = constraint_rows(model, q, v, contacts)
    G = rows.G
    target = rows.gamma - 2.0 * alpha * (G @ v) - beta**2 * rows.phi
    rank, U, s, Vt = _rank(G)
    full_rank = rank == G.shape[0]
    if method == "kkt":
        a, multipliers = _solve_kkt(mass_matrix(model, q), G, tau - nonlinear_effects(model, q, v), target,
                                    full_rank)
    elif method == "schur":
        Minv = InverseMassMatrix(model, q)
        free = forward_dynamics(model, q, v, tau)
        Minv_Gt = Minv @ G.T
        operational = G @ Minv_Gt  # G M⁻¹ G^T
        rhs = target - G @ free
        if full_rank:
            multipliers = np.linalg.solve(operational, rhs)
        else:
            multipliers = np.linalg.lstsq(operational, rhs, rcond=LSTSQ_RCOND)[0]
        a = free + Minv_Gt @ multipliers
    else:
        M, h = mass_matrix(model, q), nonlinear_effects(model, q, v)
        range_rows, null = Vt[:rank], Vt[rank:].T  # G N = 0
        particular = range_rows.T @ ((U[:, :rank].T @ target) / s[:rank])  # G⁺ target
        y = np.linalg.solve(null.T @ M @ null, null.T @ (tau - h - M @ particular)) if null.shape[1] \
            else np.zeros(0)
        a = particular + null @ y
        # G^T λ = M a + h - tau, minimum norm: λ = U_r S_r⁻¹ V_r (M a + h - tau)
        multipliers = U[:, :rank] @ ((range_rows @ (M @ a + h - tau)) / s[:rank])
    residual = float(np.linalg.norm(G @ a - target))
    return ConstraintSolution(a, _forces(rows, multipliers), rank, G.shape[0], residual)


def impact(model: Model, q, v_minus, contacts, restitution: float = 0.0) -> ConstraintSolution:
    """(v_plus, impulses) of an impact on the constraints (RBDL §2.3):
    [[M, G^T], [G, 0]] [v⁺; -Λ] = [M v⁻; -e G v⁻]: the constraint velocity
    reverses with the restitution e (0: plastic, 1: no energy lost), and
    M (v⁺ - v⁻) = G^T Λ. One impulse per constraint, as the forces of
    contact_forward_dynamics."""
    restitution = float(restitution)
    if not 0.0 <= restitution <= 1.0:
        raise ValueError(f"restitution must be in [0, 1], got {restitution}")
    q = inputs.configuration(model, q, batch=False)
    v_minus = inputs.vector(model, v_minus, model.nv, "v_minus", batch=False)
    rows = constraint_rows(model, q, v_minus, contacts)
    G = rows.G
    rank, *_ = _rank(G)
    M = mass_matrix(model, q)
    target = -restitution * (G @ v_minus)
    v_plus, impulses = _solve_kkt(M, G, M @ v_minus, target, rank == G.shape[0])
    return ConstraintSolution(v_plus, _forces(rows, impulses), rank, G.shape[0],
                              float(np.linalg.norm(G @ v_plus - target)))


class ContactInverseDynamics(tuple):
    """(tau, forces), unpackable as a pair: joint torques (nv,), zero on the
    floating base, and one force per contact; feasible says whether the base
    wrench is balanced (to `base_residual`) with the forces inside their
    friction cones when friction was asked for; message says why not."""

    def __new__(cls, tau, forces, feasible: bool, base_residual: float, message: str):
        solution = super().__new__(cls, (tau, forces))
        solution.feasible, solution.base_residual, solution.message = feasible, base_residual, message
        return solution


def contact_inverse_dynamics(model: Model, q, v, a, contacts, friction=None,
                             normal=(0.0, 0.0, 1.0)) -> ContactInverseDynamics:
    """(tau, forces) of a floating-base robot: the contact forces balance the
    base wrench of M a + h exactly (G_base^T λ = (M a + h)_base), and the
    joints supply the rest, tau = (M a + h) - G^T λ, zero on the base.

    Without friction the forces are the minimum-norm λ. With `friction` (one
    coefficient, or one per contact) the linear force f of each contact stays in
    its exact cone |f - (f.n) n| <= mu f.n about `normal` (world), solved as the
    minimum-norm λ under those constraints (SLSQP); when no λ balances the base
    inside the cones, the answer says so (feasible False) and carries the
    minimum-norm forces instead. Moments of frame contacts are not limited.
    """
    if not model.floating_base:
        raise ValueError(f"model '{model.name}' has no floating base: use inverse_dynamics")
    q = inputs.configuration(model, q, batch=False)
    v = inputs.vector(model, v, model.nv, "v", batch=False)
    a = inputs.vector(model, a, model.nv, "a", batch=False)
    rows = constraint_rows(model, q, v, contacts)
    # forces, not the multipliers of the body-axes frame rows: G^T λ = Gw^T f
    Gw = np.vstack([to_force @ rows.G[block] for block, to_force in rows.blocks])
    base = slice(model.v_index("root_joint"), model.v_index("root_joint") + 6)
    full = inverse_dynamics(model, q, v, a)
    A, b = Gw[:, base].T, full[base]
    forces = np.linalg.lstsq(A, b, rcond=LSTSQ_RCOND)[0]  # minimum norm
    residual = float(np.linalg.norm(A @ forces - b))
    feasible, message = residual <= 1e-9 * max(1.0, float(np.abs(b).max())), ""
    if not feasible:
        message = f"the contacts cannot balance the base wrench (residual {residual:.3g})"
    if friction is not None and feasible:
        mu = np.broadcast_to(np.asarray(friction, dtype=float), (len(contacts),))
        if np.any(mu < 0) or not np.all(np.isfinite(mu)):
            raise ValueError(f"friction coefficients must be finite and >= 0, got {mu.tolist()}")
        n = np.asarray(normal, dtype=float) / np.linalg.norm(normal)
        linear = [(block.start + (3 if block.stop - block.start == 6 else 0), coefficient)
                  for (block, _), coefficient in zip(rows.blocks, mu, strict=True)]

        def cones(x):  # mu² (f.n)² - |f_t|² >= 0 and f.n >= 0, per contact
            out = []
            for start, coefficient in linear:
                f = x[start:start + 3]
                fn = f @ n
                tangential = f - fn * n
                out += [coefficient**2 * fn**2 - tangential @ tangential, fn]
            return np.array(out)

        scale = max(1.0, float(np.abs(b).max()))
        result = minimize(lambda x: 0.5 * x @ x / scale**2, forces, jac=lambda x: x / scale**2, method="SLSQP",
                          constraints=[{"type": "eq", "fun": lambda x: (A @ x - b) / scale},
                                       {"type": "ineq", "fun": lambda x: cones(x) / scale**2}],
                          options={"ftol": 1e-14, "maxiter": 500})
        inside = bool(np.all(cones(result.x) >= -1e-9 * scale**2))
        balanced = float(np.linalg.norm(A @ result.x - b)) <= 1e-9 * scale
        if result.success and inside and balanced:
            forces = result.x
            residual = float(np.linalg.norm(A @ forces - b))
        else:
            feasible = False
            message = ("no contact forces inside the friction cones balance the base wrench "
                       f"(SLSQP: {result.message}); the minimum-norm forces are returned")
    tau = full - Gw.T @ forces
    tau[base] = 0.0
    return ContactInverseDynamics(tau, [forces[block] for block, _ in rows.blocks], feasible, residual, message)
