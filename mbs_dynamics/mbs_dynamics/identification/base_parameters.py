"""Base parameters: which combinations of the parameters the torques can tell.

Many columns of Y_p are zero or combinations of others on every motion (the
first link's mass never shows in its joint's torque; a body's parameters
about a joint axis add to its parent's), so only the base parameters

    beta = p[independent] + K p[dependent]

are identifiable from any data (Gautier & Khalil's base parameters). They are
a property of the model and of the torques measured (the actuated joints':
a floating base's wrench is not), found here numerically as Gautier does:
the rows of those torques in the regressor of random states stacked (STATES_PER_PARAMETER of them per column),
columns scaled to unit norm, and QR with column pivoting; the columns whose
pivots fall below RANK_TOLERANCE of the largest are the dependent ones.
Whether a recording excites the base parameters is another matter: its
condition_number says (the base regressor's, columns scaled to unit norm).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from mbs_dynamics.identification.parameters import ParameterLayout
from mbs_dynamics.multibody.model import FLOATING, PLANAR

# URDFs write rounded angles (rpy 3.14159: pi - 2.7e-6), which leave columns
# that are exact combinations on the drawing board apart by as much.
RANK_TOLERANCE = 1e-5
STATES_PER_PARAMETER = 2
# Beyond this condition number (condition_number) the data excite some base parameter too little to fit:
# identification stops there, and an excitation trajectory must stay below it.
MAX_CONDITION_NUMBER = 1e6


@dataclass(frozen=True)
class BaseParameters:
    """beta = p[independent] + combination @ p[dependent] (module docstring)."""

    layout: ParameterLayout
    independent: np.ndarray  # columns of p, in pivot order
    dependent: np.ndarray
    combination: np.ndarray  # K (len(independent), len(dependent))

    def values(self, p) -> np.ndarray:
        p = np.asarray(p, dtype=float)
        return p[self.independent] + self.combination @ p[self.dependent]

    def expressions(self, digits: int = 3) -> list[str]:
        """Each base parameter written out: 'link.m + 0.5 link2.m', terms below
        10^-digits of the largest dropped."""
        names = self.layout.names
        written = []
        for k, column in enumerate(self.independent):
            terms = [names[column]]
            row = self.combination[k]
            for j in np.argsort(-np.abs(row)):
                if abs(row[j]) > 10.0**-digits * max(1.0, np.abs(row).max()):
                    terms.append(f"{'-' if row[j] < 0 else '+'} {abs(row[j]):.{digits}g} {names[self.dependent[j]]}")
            written.append(" ".join(terms))
        return written

    def identifiable(self) -> np.ndarray:
        """(size,) bool: the parameters that are base parameters on their own
        (independent, with no dependent parameter added to them)."""
        alone = np.zeros(self.layout.size, dtype=bool)
        alone[self.independent[~np.any(np.abs(self.combination) > 1e-9, axis=1)]] = True
        return alone


def random_states(model, count: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """count states (q, v, a): joints uniform within their limits (within
    [-pi, pi]), floating joints at random poses, v and a normal."""
    q = np.tile(model.neutral_configuration(), (count, 1))
    for body, name in enumerate(model.body_joint_names):
        if name not in model.joint_names:
            continue  # a coupled mimic joint
        i = model.q_index(name)
        if model.joint_type[body] == FLOATING:
            quaternion = rng.normal(size=(count, 4))
            q[:, i:i + 3] = rng.uniform(-1.0, 1.0, (count, 3))
            q[:, i + 3:i + 7] = quaternion / np.linalg.norm(quaternion, axis=1, keepdims=True)
        elif model.joint_type[body] != PLANAR:  # one coordinate with limits
            lower, upper = model.lower_position_limit[i], model.upper_position_limit[i]
            q[:, i] = rng.uniform(max(lower, -np.pi), min(upper, np.pi), count)
    return q, rng.normal(size=(count, model.nv)), rng.normal(size=(count, model.nv))


def base_parameters(layout: ParameterLayout, seed: int = 0, states=None,
                    tolerance: float = RANK_TOLERANCE) -> BaseParameters:
    """The base parameters of layout's model (module docstring), on the
    states(model, count, rng) -> (q, v, a) drawn (default random_states: a
    motion that keeps some coordinates still has fewer), the layout's held
    joints held in them; the columns whose
    pivots fall below tolerance of the largest are the dependent ones."""
    count = max(10, STATES_PER_PARAMETER * layout.size // max(1, len(layout.actuated_joints)) + 1)
    states = random_states if states is None else states
    q, v, a = states(layout.model, count, np.random.default_rng(seed))
    layout.hold(q, v, a)
    Y = layout.regressor(q, v, a)
    Y = Y[:, layout.joint_coordinates()].reshape(-1, layout.size)
    norms = np.linalg.norm(Y, axis=0)
    moving = np.flatnonzero(norms > RANK_TOLERANCE * norms.max())
    _, R, pivots = scipy.linalg.qr(Y[:, moving] / norms[moving], mode="economic", pivoting=True)
    diagonal = np.abs(np.diag(R))
    rank = int(np.sum(diagonal > tolerance * diagonal[0]))
    independent, dependent = moving[pivots[:rank]], moving[pivots[rank:]]
    # scaled: x_1 + K_s x_2 with K_s = R11^-1 R12; in p: K = D1 K_s D2^-1, D = 1 / norms
    K_scaled = scipy.linalg.solve_triangular(R[:rank, :rank], R[:rank, rank:])
    combination = K_scaled * norms[dependent][None, :] / norms[independent][:, None]
    never = np.setdiff1d(np.arange(layout.size), moving)  # columns zero on every state: nothing shows them
    return BaseParameters(layout, independent, np.concatenate([dependent, never]),
                          np.hstack([combination, np.zeros((rank, never.size))]))


def condition_number(normal_matrix, base: BaseParameters) -> float:
    """The condition number of the base regressor Y_p[:, independent] of the data
    whose normal matrix Y_p^T W Y_p is given, columns scaled to unit norm: 1 is
    ideal, beyond some 10^3 the data excite some base parameter too little."""
    A = np.asarray(normal_matrix)[np.ix_(base.independent, base.independent)]
    scale = np.sqrt(np.maximum(np.diag(A), 1e-300))
    eigenvalues = np.linalg.eigvalsh(A / np.outer(scale, scale))
    return float(np.sqrt(eigenvalues[-1] / max(eigenvalues[0], eigenvalues[-1] * 1e-32)))
