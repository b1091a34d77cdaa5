"""Excitation trajectories as finite Fourier series: their limits, sampling,
the approach to their start, and their files (the optimisation that picks
their coefficients: excitation.py).

Each excited joint j follows a finite Fourier series of L harmonics of the
base pulsation w_f = 2 pi / T (J. Swevers, C. Ganseman, D. B. Tukel, J. De
Schutter, H. Van Brussel, "Optimal robot excitation and identification", IEEE
Transactions on Robotics and Automation 13(5), 1997):

    q_j(t) = q0_j + sum_{l=1..L} a_jl / (w_f l) sin(w_f l t) - b_jl / (w_f l) cos(w_f l t)
    v_j(t) = sum_l a_jl cos(w_f l t) + b_jl sin(w_f l t)
    a_j(t) = sum_l w_f l (b_jl cos(w_f l t) - a_jl sin(w_f l t))

(rad, rad/s, rad/s^2 or m, m/s, m/s^2; t in s). It has period T, so it loops.
The first harmonic is tied to the others,

    a_j1 = -sum_{l>=2} a_jl,    b_j1 = -sum_{l>=2} l b_jl,

so that v(0) = a(0) = 0: the motion starts, and passes once every period, at
rest at q(0) = q0 - sum_l b_jl / (w_f l). The robot gets there from wherever it
stands by a rest-to-rest quintic (`approach`).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mbs_dynamics.algorithms.joint_friction import joint_friction_torques
from mbs_dynamics.algorithms.rnea import inverse_dynamics
from mbs_dynamics.files import read_file, write_file
from mbs_dynamics.identification.csv_data import MAX_CSV_BYTES, write_csv
from mbs_dynamics.identification.recording import Recording
from mbs_dynamics.multibody.model import Model

# Characters a value takes in a trajectory file at most (the shortest exact form of a float64, and a comma).
CSV_VALUE_CHARACTERS = 25
POSITION_MARGIN = 0.05  # fraction of each joint's range kept free at either end
VELOCITY_SCALE = 0.8  # fraction of the URDF velocity limit used
ACCELERATION_PER_VELOCITY = 2.0  # 1/s: the default acceleration limit is this times the URDF velocity limit
EFFORT_SCALE = 0.8  # fraction of the URDF effort limit the model's torques may use
DEFAULT_VELOCITY_LIMIT = 1.0  # rad/s or m/s, for a joint whose URDF gives none (0 or absent)
CHECK_SAMPLES_PER_HARMONIC = 200  # times a period, per harmonic, at which the result's margins are measured
QUINTIC_PEAK_VELOCITY = 15.0 / 8.0  # peak of d/ds of 10 s^3 - 15 s^4 + 6 s^5 on [0, 1]
QUINTIC_PEAK_ACCELERATION = 10.0 / math.sqrt(3.0)  # peak of its second derivative


@dataclass(frozen=True)
class ExcitationLimits:
    """The bounds an excitation keeps, per excited joint (arrays in joint_names'
    order): positions within [lower, upper] (the URDF's range less the margin;
    -inf, inf for a joint without limits), |v| <= velocity, |a| <= acceleration,
    and the model's |tau| <= effort (inf: unchecked)."""

    joint_names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray
    effort: np.ndarray

    @classmethod
    def from_model(cls, model: Model, joint_names, position_margin: float = POSITION_MARGIN,
                   velocity_scale: float = VELOCITY_SCALE, acceleration=None,
                   effort_scale: float | None = EFFORT_SCALE) -> ExcitationLimits:
        """The limits of model's URDF: the range less position_margin of it at
        either end, velocity_scale of the velocity limit (DEFAULT_VELOCITY_LIMIT
        where the URDF has none), acceleration (one number, {joint: value}, or
        None for ACCELERATION_PER_VELOCITY times the velocity limit), and
        effort_scale of the effort limit (None: torques unchecked)."""
        joint_names = tuple(joint_names)
        rows = np.array([model.q_index(name) for name in joint_names], dtype=np.int64)
        columns = np.array([model.v_index(name) for name in joint_names], dtype=np.int64)
        lower, upper = model.lower_position_limit[rows], model.upper_position_limit[rows]
        if not 0.0 <= position_margin < 0.5:
            raise ValueError(f"position_margin must be in [0, 0.5), got {position_margin}")
        for name, scale in (("velocity_scale", velocity_scale), ("effort_scale", effort_scale)):
            if scale is not None and not (np.isfinite(scale) and scale > 0.0):
                raise ValueError(f"{name} must be positive, got {scale}")
        margin = np.where(np.isfinite(upper - lower), position_margin * (upper - lower), 0.0)
        velocity = model.velocity_limit[columns].copy()
        velocity[~np.isfinite(velocity) | (velocity <= 0.0)] = DEFAULT_VELOCITY_LIMIT
        if acceleration is None:
            acceleration = ACCELERATION_PER_VELOCITY * velocity
        elif isinstance(acceleration, dict):
            unknown = set(acceleration) - set(joint_names)
            if unknown:
                raise ValueError(f"acceleration limits name joints that are not excited: {sorted(unknown)}")
            acceleration = np.array([acceleration.get(name, ACCELERATION_PER_VELOCITY * v)
                                     for name, v in zip(joint_names, velocity, strict=True)], dtype=float)
        acceleration = np.broadcast_to(np.asarray(acceleration, dtype=float), velocity.shape).copy()
        effort = model.effort_limit[columns].copy()
        effort[effort <= 0.0] = np.inf
        effort = np.full(len(joint_names), np.inf) if effort_scale is None else effort_scale * effort
        limits = cls(joint_names, lower + margin, upper - margin, velocity_scale * velocity, acceleration, effort)
        for name, value in (("velocity", limits.velocity), ("acceleration", limits.acceleration)):
            if not np.all(np.isfinite(value) & (value > 0.0)):
                raise ValueError(f"{name} limits must be positive and finite, got {value}")
        return limits

    def describe(self) -> list[str]:
        """One line per joint: its bounds, in SI units."""
        return [f"{name}: position [{lo:.4g}, {up:.4g}], |velocity| <= {v:.4g}, |acceleration| <= {a:.4g}, "
                f"|effort| <= {e:.4g}" for name, lo, up, v, a, e in
                zip(self.joint_names, self.lower, self.upper, self.velocity, self.acceleration, self.effort,
                    strict=True)]


@dataclass(frozen=True)
class ExcitationTrajectory:
    """The Fourier series of the module docstring for each of joint_names:
    offsets q0 (n,), sine a (n, L) and cosine b (n, L) coefficients, period T
    (s). What the optimisation found: condition_number (of the base regressor
    sampled CHECK_SAMPLES_PER_HARMONIC L times a period), initial_condition_number
    (of the random start, likewise), the seed it was drawn with, the
    optimiser's message, the limits kept and margins: per quantity
    ("position", "velocity", "acceleration", "effort"), per joint, the fraction
    of the limit left unused at the worst time (of the half-range about its
    middle for positions; negative: exceeded)."""

    joint_names: tuple[str, ...]
    period: float
    offsets: np.ndarray
    sine: np.ndarray
    cosine: np.ndarray
    condition_number: float = math.nan
    initial_condition_number: float = math.nan
    limits: ExcitationLimits | None = None
    margins: dict[str, np.ndarray] = field(default_factory=dict)
    seed: int | None = None
    message: str = ""  # the optimiser's closing words

    @property
    def harmonics(self) -> int:
        return self.sine.shape[1]

    def sample(self, times) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, v, a (len(times), n) at times (s), columns in joint_names' order."""
        coefficients = np.hstack([self.offsets[:, None], self.sine, self.cosine])
        return tuple(basis @ coefficients.T for basis in fourier_basis(times, self.period, self.harmonics))

    def start(self) -> np.ndarray:
        """q(0) (n,), where the motion is at rest."""
        return self.sample([0.0])[0][0]

    def to_recording(self, rate: float, periods: int = 1) -> Recording:
        """q, v, a over `periods` periods sampled at about `rate` Hz: the times
        spaced evenly from 0 to periods T, both ends included (at rest);
        ValueError when the trajectory file would pass MAX_CSV_BYTES
        (check_trajectory_size)."""
        times = np.linspace(0.0, periods * self.period, check_trajectory_size(len(self.joint_names), self.period,
                                                                              periods, rate))
        q, v, a = self.sample(times)
        return Recording(self.joint_names, times, position=q, velocity=v, acceleration=a,
                         source=f"excitation trajectory, period {self.period:g} s, {self.harmonics} harmonics")

    def to_dict(self) -> dict:
        """What regenerates the trajectory exactly (floats in JSON keep every bit),
        and what the optimisation reported."""
        return {"joint_names": list(self.joint_names), "period": self.period, "harmonics": self.harmonics,
                "offsets": self.offsets.tolist(), "sine": self.sine.tolist(), "cosine": self.cosine.tolist(),
                "condition_number": self.condition_number, "initial_condition_number": self.initial_condition_number,
                "seed": self.seed, "message": self.message,
                "margins": {name: [value if math.isfinite(value) else None for value in values.tolist()]
                            for name, values in self.margins.items()}}  # None: no such limit

    @classmethod
    def from_dict(cls, values: dict) -> ExcitationTrajectory:
        return cls(tuple(values["joint_names"]), float(values["period"]), np.array(values["offsets"], dtype=float),
                   np.array(values["sine"], dtype=float), np.array(values["cosine"], dtype=float),
                   float(values.get("condition_number", math.nan)),
                   float(values.get("initial_condition_number", math.nan)),
                   margins={name: np.array([np.inf if value is None else value for value in margins], dtype=float)
                            for name, margins in values.get("margins", {}).items()},
                   seed=values.get("seed"), message=values.get("message", ""))

    def save_coefficients(self, path) -> None:
        """to_dict as JSON; FileProblem (a ValueError) when it cannot be written."""
        write_file(path, json.dumps(self.to_dict(), indent=1) + "\n", "coefficients file")

    @classmethod
    def load_coefficients(cls, path) -> ExcitationTrajectory:
        """What save_coefficients wrote (a regular file of at most MAX_CSV_BYTES)."""
        return cls.from_dict(json.loads(read_file(path, "coefficients file", MAX_CSV_BYTES)))


def check_trajectory_size(joints: int, period: float, periods: int, rate: float) -> int:
    """The rows of a trajectory file of `joints` joints over `periods` periods
    of `period` s at `rate` Hz (ExcitationTrajectory.to_recording), once its
    size is within MAX_CSV_BYTES, what the player and identification read;
    ValueError otherwise, or for a rate or number of periods that is not
    positive."""
    if not (np.isfinite(rate) and rate > 0.0) or int(periods) != periods or periods < 1:
        raise ValueError(f"rate must be positive and periods a positive integer, got {rate}, {periods}")
    rows = max(2.0, np.round(periods * period * rate) + 1)
    size = rows * (1 + 3 * joints) * CSV_VALUE_CHARACTERS
    if not size <= MAX_CSV_BYTES:
        raise ValueError(f"{periods} periods of {period:g} s at {rate:g} Hz make {rows:.3g} rows of {joints} joints, "
                         f"some {size / 2**20:.3g} MiB, more than the {MAX_CSV_BYTES / 2**20:.0f} MiB of a trajectory "
                         "file; lower the rate or the number of periods")
    return int(rows)


def fourier_basis(times, period: float, harmonics: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The matrices (len(times), 2 L + 1) that map a joint's coefficients
    [q0, a_1..a_L, b_1..b_L] to its q, v and a at times (module docstring)."""
    t = np.asarray(times, dtype=float).reshape(-1, 1)
    w = 2.0 * np.pi / period * np.arange(1, harmonics + 1)
    sine, cosine = np.sin(w * t), np.cos(w * t)
    ones, zeros = np.ones_like(t), np.zeros_like(t)
    return (np.hstack([ones, sine / w, -cosine / w]), np.hstack([zeros, cosine, sine]),
            np.hstack([zeros, -w * sine, w * cosine]))


def tied_coefficients(harmonics: int) -> np.ndarray:
    """E (2 L + 1, 2 L - 1): [q0, a_1..a_L, b_1..b_L] = E [q0, a_2..a_L, b_2..b_L],
    the first harmonic tied so that v(0) = a(0) = 0 (module docstring)."""
    if harmonics < 2:
        raise ValueError(f"an excitation that starts at rest needs at least 2 harmonics, got {harmonics}")
    L = harmonics
    E = np.zeros((2 * L + 1, 2 * L - 1))
    E[0, 0] = 1.0
    E[2:L + 1, 1:L] = E[L + 2:, L:] = np.eye(L - 1)
    E[1, 1:L] = -1.0
    E[L + 1, L:] = -np.arange(2, L + 1)
    return E


def bernstein_factor(harmonics: int, samples: int) -> float:
    """eps: a trigonometric polynomial of degree `harmonics` sampled `samples`
    times a period exceeds its largest sample by at most eps / (1 - eps) of its
    largest deviation from any constant (module docstring)."""
    eps = 0.5 * (np.pi * harmonics / samples) ** 2
    if eps >= 0.5:
        raise ValueError(f"{samples} samples a period are too few for {harmonics} harmonics")
    return eps


def limit_margins(trajectory: ExcitationTrajectory, limits: ExcitationLimits, model: Model, hold, times):
    """Per quantity, per joint, the fraction of the limit left unused at the
    worst of times (ExcitationTrajectory); the torques by the model's inverse
    dynamics and joint friction (mbs.inverse_dynamics, joint_friction_torques)."""
    q_j, v_j, a_j = trajectory.sample(times)
    rows = [model.q_index(name) for name in trajectory.joint_names]
    columns = [model.v_index(name) for name in trajectory.joint_names]
    q = np.tile(np.asarray(hold, dtype=float), (len(times), 1))
    v, a = np.zeros((len(times), model.nv)), np.zeros((len(times), model.nv))
    q[:, rows], v[:, columns], a[:, columns] = q_j, v_j, a_j
    torque = (inverse_dynamics(model, q, v, a) + joint_friction_torques(model, v))[:, columns]
    middle, half_range = 0.5 * (limits.upper + limits.lower), 0.5 * (limits.upper - limits.lower)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"position": np.where(np.isfinite(half_range), 1.0 - np.max(np.abs(q_j - middle), axis=0) / half_range,
                                     np.inf),
                "velocity": 1.0 - np.max(np.abs(v_j), axis=0) / limits.velocity,
                "acceleration": 1.0 - np.max(np.abs(a_j), axis=0) / limits.acceleration,
                "effort": np.where(np.isfinite(limits.effort), 1.0 - np.max(np.abs(torque), axis=0) / limits.effort,
                                   np.inf)}


def approach_duration(start, goal, limits: ExcitationLimits) -> float:
    """The shortest duration (s) of the quintic from start to goal (arrays in
    limits' joint order) within the velocity and acceleration limits."""
    distance = np.abs(np.asarray(goal, dtype=float) - np.asarray(start, dtype=float))
    return float(max(np.max(QUINTIC_PEAK_VELOCITY * distance / limits.velocity),
                     np.max(np.sqrt(QUINTIC_PEAK_ACCELERATION * distance / limits.acceleration)), 0.0))


def approach(start, goal, times, duration: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, v, a (len(times), n) of the rest-to-rest quintic from start to goal
    in duration (s): q = start + (goal - start) (10 s^3 - 15 s^4 + 6 s^5),
    s = t / duration clipped to [0, 1]."""
    start, goal = np.asarray(start, dtype=float), np.asarray(goal, dtype=float)
    t = np.asarray(times, dtype=float).reshape(-1, 1)
    if duration <= 0.0:
        return np.tile(goal, (t.shape[0], 1)), np.zeros((t.shape[0], goal.size)), np.zeros((t.shape[0], goal.size))
    s = np.clip(t / duration, 0.0, 1.0)
    inside = (t > 0.0) & (t < duration)
    shape = s**3 * (10.0 - 15.0 * s + 6.0 * s**2)
    rate = np.where(inside, 30.0 * s**2 * (1.0 - s) ** 2 / duration, 0.0)
    curvature = np.where(inside, 60.0 * s * (1.0 - s) * (1.0 - 2.0 * s) / duration**2, 0.0)
    return start + (goal - start) * shape, (goal - start) * rate, (goal - start) * curvature


def trajectory_paths(path) -> tuple[Path, Path]:
    """The trajectory file `path` and its coefficients' file beside it (suffix .json)."""
    path = Path(path)
    coefficients = path.with_suffix(".json")
    if coefficients == path:
        raise ValueError(f"the trajectory file {path} must not end in .json: its coefficients go there")
    return path, coefficients


def write_trajectory(path, trajectory: ExcitationTrajectory, rate: float, periods: int = 1):
    """The trajectory as a CSV file (csv_data.write_csv: time, position/<joint>,
    velocity/<joint>, acceleration/<joint>), to_recording(rate, periods), and
    its coefficients as JSON beside it (the same name, suffix .json), which
    regenerate it exactly (ExcitationTrajectory.load_coefficients). Returns
    both paths."""
    path, coefficients = trajectory_paths(path)
    recording = trajectory.to_recording(rate, periods)
    write_csv(path, recording.replace(source=f"{recording.source}, coefficients in {coefficients.name}"))
    trajectory.save_coefficients(coefficients)
    return path, coefficients
