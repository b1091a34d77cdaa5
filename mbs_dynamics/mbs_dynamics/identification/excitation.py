"""Excitation trajectories for identification: a finite Fourier series per
joint (Swevers, Ganseman, Tükel, De Schutter & Van Brussel 1997),

    q_j(t) = q0_j + sum_{l=1..L} a_jl / (w l) sin(w l t) - b_jl / (w l) cos(w l t),
    v_j = sum_l a_jl cos(w l t) + b_jl sin(w l t),
    a_j = sum_l w l (-a_jl sin(w l t) + b_jl cos(w l t)),          w = 2 pi / period,

periodic (it loops, and repeated periods average the noise), with
coefficients optimised for the condition number of the stacked base
regressor (base_parameters: the base columns of Y_p, scaled to unit norm, at
SAMPLES_PER_HARMONIC_PERIOD points per period of the highest harmonic), inside the position limits (less a
margin), the velocity limits and acceleration limits (URDFs have none: by
default ACCELERATION_PER_VELOCITY times the velocity limit, per second).
The optimiser is scipy's SLSQP from the best of a few random starts, with
the limits as constraints on the sampled trajectory.

A period starts where the robot is at rest only if the series says so: the
robot is brought to q(0), v(0) first (e.g. by a joint trajectory controller,
or the player's start delay).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import scipy.optimize
from threadpoolctl import threadpool_limits

from mbs_dynamics.identification import data
from mbs_dynamics.identification.base_parameters import base_parameters
from mbs_dynamics.identification.parameters import ParameterLayout

DEFAULT_PERIOD = 10.0  # s: the fundamental 0.1 Hz, harmonics up to 0.5 Hz with 5
DEFAULT_HARMONICS = 5
# Samples of a period for the condition number and the limits: this many per period of the highest harmonic.
SAMPLES_PER_HARMONIC_PERIOD = 20
POSITION_MARGIN = 0.05  # of each joint's range, kept free at both ends
ACCELERATION_PER_VELOCITY = 2.0  # default acceleration limit: this times the velocity limit per second
VELOCITY_FRACTION = 0.8  # of the URDF's velocity limit used
# Joints with no (or infinite) limits: this range around 0 (rad or m) and velocity limit.
UNLIMITED_RANGE = np.pi
UNLIMITED_VELOCITY = 2.0


@dataclass(frozen=True)
class ExcitationTrajectory:
    """The Fourier series of the module docstring for `joints` (in order)."""

    joints: tuple[str, ...]
    period: float
    offset: np.ndarray  # q0 (joints,)
    sine: np.ndarray  # a (joints, harmonics)
    cosine: np.ndarray  # b (joints, harmonics)
    condition_number: float = float("nan")  # of the stacked base regressor, as optimised

    def sample(self, times) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions, velocities and accelerations (len(times), joints)."""
        times = np.asarray(times, dtype=float)
        w = 2.0 * np.pi / self.period
        harmonic = np.arange(1, self.sine.shape[1] + 1)
        angle = w * harmonic * times[:, None, None]  # (N, 1, L)
        sin, cos = np.sin(angle), np.cos(angle)
        a, b = self.sine[None], self.cosine[None]
        q = self.offset + np.sum((a * sin - b * cos) / (w * harmonic), axis=-1)
        v = np.sum(a * cos + b * sin, axis=-1)
        acceleration = np.sum(w * harmonic * (b * cos - a * sin), axis=-1)
        return q, v, acceleration

    def recording(self, rate: float = 500.0, periods: int = 1) -> data.Recording:
        """The trajectory sampled at `rate` (Hz) over `periods` periods, both ends included."""
        times = np.arange(round(periods * self.period * rate) + 1) / rate
        q, v, a = self.sample(times)
        return data.Recording(self.joints, times, position=q, velocity=v, acceleration=a)

    def to_json(self) -> str:
        return json.dumps({"joints": list(self.joints), "period": self.period, "offset": self.offset.tolist(),
                           "sine": self.sine.tolist(), "cosine": self.cosine.tolist(),
                           "condition_number": self.condition_number}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> ExcitationTrajectory:
        values = json.loads(text)
        return cls(tuple(values["joints"]), float(values["period"]), np.array(values["offset"], dtype=float),
                   np.array(values["sine"], dtype=float), np.array(values["cosine"], dtype=float),
                   float(values.get("condition_number", "nan")))


@dataclass(frozen=True)
class Limits:
    """Per joint: position range (after the margin), velocity and acceleration limits."""

    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    acceleration: np.ndarray


def joint_limits(layout: ParameterLayout, acceleration_limits=None) -> Limits:
    """The actuated joints' limits from the URDF, used as the module docstring says."""
    model = layout.model
    q_index = [model.q_index(name) for name in layout.actuated_joints]
    v_index = layout.joint_coordinates()
    lower, upper = model.lower_position_limit[q_index], model.upper_position_limit[q_index]
    unlimited = ~(np.isfinite(lower) & np.isfinite(upper))
    lower, upper = np.where(unlimited, -UNLIMITED_RANGE, lower), np.where(unlimited, UNLIMITED_RANGE, upper)
    margin = POSITION_MARGIN * (upper - lower)
    velocity = model.velocity_limit[v_index]
    velocity = VELOCITY_FRACTION * np.where(np.isfinite(velocity) & (velocity > 0), velocity, UNLIMITED_VELOCITY)
    acceleration = (ACCELERATION_PER_VELOCITY * velocity if acceleration_limits is None
                    else np.broadcast_to(np.asarray(acceleration_limits, dtype=float), velocity.shape))
    return Limits(lower + margin, upper - margin, velocity, acceleration)


class _Design:
    """The optimisation problem: x = [q0 | a | b] (joints x (1 + 2 L))."""

    def __init__(self, layout: ParameterLayout, limits: Limits, period: float, harmonics: int):
        self.layout, self.limits, self.period, self.harmonics = layout, limits, period, harmonics
        self.joints = len(layout.actuated_joints)
        samples = SAMPLES_PER_HARMONIC_PERIOD * harmonics
        self.times = np.arange(samples) * period / samples
        self.base = base_parameters(layout)
        self.rows = layout.joint_coordinates()
        self.state = layout.model.neutral_configuration()
        self.q_index = [layout.model.q_index(name) for name in layout.actuated_joints]

    def trajectory(self, x, condition=float("nan")) -> ExcitationTrajectory:
        x = x.reshape(self.joints, 1 + 2 * self.harmonics)
        return ExcitationTrajectory(tuple(self.layout.actuated_joints), self.period, x[:, 0].copy(),
                                    x[:, 1:1 + self.harmonics].copy(), x[:, 1 + self.harmonics:].copy(), condition)

    def log_condition(self, x) -> float:
        q, v, a = self.trajectory(x).sample(self.times)
        model = self.layout.model
        Q = np.tile(self.state, (len(self.times), 1))
        Q[:, self.q_index] = q
        V, A = np.zeros((len(self.times), model.nv)), np.zeros((len(self.times), model.nv))
        V[:, self.rows], A[:, self.rows] = v, a
        Y = self.layout.regressor(Q, V, A)[:, self.rows][..., self.base.independent].reshape(-1,
                                                                                          self.base.independent.size)
        Y = Y / np.maximum(np.linalg.norm(Y, axis=0), 1e-300)
        singular = np.linalg.svd(Y, compute_uv=False)
        return float(np.log(singular[0] / max(singular[-1], 1e-300 * singular[0])))

    def margins(self, x) -> np.ndarray:
        """Non-negative where every sample respects the limits (SLSQP's inequality constraints)."""
        q, v, a = self.trajectory(x).sample(self.times)
        limits = self.limits
        span = limits.upper - limits.lower
        return np.concatenate([((q - limits.lower) / span).ravel(), ((limits.upper - q) / span).ravel(),
                               (1.0 - np.abs(v) / limits.velocity).ravel(), (1.0 - np.abs(a) / limits.acceleration).ravel()])

    def random_start(self, rng) -> np.ndarray:
        """Coefficients within the limits: amplitudes falling with the harmonic, scaled down until they fit."""
        limits, L = self.limits, self.harmonics
        w = 2 * np.pi / self.period
        x = np.zeros((self.joints, 1 + 2 * L))
        x[:, 0] = 0.5 * (limits.lower + limits.upper)
        coefficients = rng.normal(size=(self.joints, 2 * L)) / np.tile(np.arange(1, L + 1), 2)
        x[:, 1:] = coefficients * (0.25 * (limits.upper - limits.lower) * w)[:, None]
        for _ in range(60):
            if np.all(self.margins(x.ravel()) >= 0):
                break
            x[:, 1:] *= 0.8
        return x.ravel()


def excitation_trajectory(layout: ParameterLayout, period: float = DEFAULT_PERIOD,
                          harmonics: int = DEFAULT_HARMONICS, acceleration_limits=None, seed: int = 0,
                          starts: int = 4, iterations: int = 100) -> tuple[ExcitationTrajectory, float]:
    """The optimised trajectory of the module docstring for the layout's
    actuated joints, and the condition number of the best random start
    (before optimisation), for comparison."""
    if not (period > 0 and harmonics >= 1):
        raise ValueError(f"need a positive period and at least one harmonic, got {period!r}, {harmonics!r}")
    design = _Design(layout, joint_limits(layout, acceleration_limits), float(period), int(harmonics))
    rng = np.random.default_rng(seed)
    candidates = [design.random_start(rng) for _ in range(starts)]
    start = min(candidates, key=design.log_condition)
    initial = float(np.exp(design.log_condition(start)))
    with threadpool_limits(1, "blas"):  # small SVDs: BLAS threads only contend with numba's (identify.py)
        result = scipy.optimize.minimize(design.log_condition, start, method="SLSQP",
                                         constraints=[{"type": "ineq", "fun": design.margins}],
                                         options={"maxiter": iterations, "ftol": 1e-6})
    x = result.x if np.all(design.margins(result.x) >= -1e-9) and design.log_condition(result.x) < \
        design.log_condition(start) else start
    return design.trajectory(x, float(np.exp(design.log_condition(x)))), initial


def main(argv=None) -> int:
    """mbs_dynamics_excitation: an optimised excitation trajectory for a URDF's
    joints, written as a trajectory CSV (data.write_csv: time, position/,
    velocity/, acceleration/ columns), its coefficients beside it (.json)."""
    import argparse
    import sys
    from pathlib import Path

    from mbs_dynamics.model import Model
    from mbs_dynamics.parsers.urdf import URDFError

    arguments = argparse.ArgumentParser(prog="mbs_dynamics_excitation", description=main.__doc__.split("\n\n")[0],
                                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    arguments.add_argument("--urdf", required=True)
    arguments.add_argument("--output", required=True, help="the trajectory CSV; the coefficients go to .json beside it")
    arguments.add_argument("--exclude-joints", default="", metavar="JOINT,...", help="joints held at their middle")
    arguments.add_argument("--period", type=float, default=DEFAULT_PERIOD, help="s")
    arguments.add_argument("--harmonics", type=int, default=DEFAULT_HARMONICS)
    arguments.add_argument("--periods", type=int, default=6, help="periods written (the run's length)")
    arguments.add_argument("--rate", type=float, default=500.0, help="samples per second written")
    arguments.add_argument("--acceleration-limit", type=float,
                           help=f"rad/s^2 or m/s^2 for every joint (default: {ACCELERATION_PER_VELOCITY:g} times "
                                "each joint's velocity limit per second)")
    arguments.add_argument("--iterations", type=int, default=100, help="of the optimiser")
    arguments.add_argument("--seed", type=int, default=0)
    options = arguments.parse_args(argv)
    try:
        layout = ParameterLayout(Model.from_urdf_file(options.urdf), excluded_joints=tuple(
            name for name in options.exclude_joints.split(",") if name))
        trajectory, initial = excitation_trajectory(layout, options.period, options.harmonics,
                                                    options.acceleration_limit, options.seed,
                                                    iterations=options.iterations)
        output = Path(options.output)
        data.write_csv(output, trajectory.recording(options.rate, options.periods))
        output.with_suffix(".json").write_text(trajectory.to_json(), encoding="utf-8")
    except (URDFError, ValueError, OSError) as error:
        print(f"mbs_dynamics_excitation: error: {error}", file=sys.stderr)
        return 2
    limits = joint_limits(layout, options.acceleration_limit)
    print(f"joints: {', '.join(trajectory.joints)}; period {trajectory.period:g} s, {options.harmonics} harmonics")
    print(f"condition number of the base regressor: {initial:.4g} (best random start) -> "
          f"{trajectory.condition_number:.4g} (optimised)")
    for k, joint in enumerate(trajectory.joints):
        print(f"  {joint}: positions [{limits.lower[k]:.4g}, {limits.upper[k]:.4g}], |v| <= {limits.velocity[k]:.4g}, "
              f"|a| <= {limits.acceleration[k]:.4g}")
    print(f"wrote {output} ({options.periods} periods at {options.rate:g} Hz) and {output.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
