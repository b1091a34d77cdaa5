"""Reference motions for the whole-body controller's tasks: each gives, at a
time t (s), the position, velocity and acceleration (3,) a task's
set_reference takes (the acceleration is the task's feed-forward):

* `RestToRest`: from one point to another in a duration, the rest-to-rest
  quintic (identification.fourier_trajectory.approach: zero velocity and
  acceleration at both ends), e.g. the CoM lowered to crouch;
* `CircleReference`: a circle at a frequency about a centre (e.g. the CoM's
  sway), its radius grown from 0 by that quintic over `ramp` s so that it
  starts at rest on the centre;
* `SwingTrajectory`: a foot lifted and set down again: the quintic from
  start to end in the horizontal and along z, plus a bump of `height`
  (64 s³(1 - s)³, s = the phase in [0, 1]) whose velocity and acceleration
  vanish at lift-off and touch-down;
* `Waypoints`: through timed points, each a position (and a rotation) with
  its velocity and acceleration, the quintic Hermite between two (what a
  setpoint trajectory with several points asks of the controller node).

Before its start time a reference holds its first point, after its end its
last (velocity and acceleration zero)."""
from __future__ import annotations

import numpy as np

from mbs_dynamics.control.tasks import finite_vector, rotation_matrix
from mbs_dynamics.identification.fourier_trajectory import approach
from mbs_dynamics.spatial.lie import so3_exp, so3_left_jacobian, so3_log

# Quintic Hermite: p(s) = Σ_k s^k (HERMITE_QUINTIC @ [p0, T v0, T² a0, p1, T v1, T² a1])[k], s in [0, 1]; the
# coefficients of its six basis polynomials (rows: powers s^0..s^5)
HERMITE_QUINTIC = np.array([[1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                            [0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
                            [0.0, 0.0, 0.5, 0.0, 0.0, 0.0],
                            [-10.0, -6.0, -1.5, 10.0, -4.0, 0.5],
                            [15.0, 8.0, 1.5, -15.0, 7.0, -1.0],
                            [-6.0, -3.0, -0.5, 6.0, -3.0, 0.5]])


def _duration(value, what: str) -> float:
    duration = float(finite_vector(value, 1, what)[0])
    if duration <= 0.0:
        raise ValueError(f"{what} must be positive, got {duration}")
    return duration


class RestToRest:
    """From `start` to `end` (3,) in `duration` s from `start_time` (s)."""

    def __init__(self, start, end, duration: float, start_time: float = 0.0):
        self.start = finite_vector(start, 3, "the start point")
        self.end = finite_vector(end, 3, "the end point")
        self.duration = _duration(duration, "the duration")
        self.start_time = float(finite_vector(start_time, 1, "the start time")[0])

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, velocity, acceleration) at time t."""
        p, v, a = approach(self.start, self.end, [t - self.start_time], self.duration)
        return p[0], v[0], a[0]


class CircleReference:
    """centre + r(t) (cos φ e₁ + sin φ e₂), φ = 2π f (t - start_time) + phase,
    r(t) the quintic from 0 to `radius` over `ramp` s (0: the full radius at
    once); e₁, e₂ the world axes named by `plane` (default x, y)."""

    def __init__(self, centre, radius: float, frequency: float, ramp: float = 1.0, start_time: float = 0.0,
                 phase: float = 0.0, plane=(0, 1)):
        self.centre = finite_vector(centre, 3, "the circle's centre")
        self.radius = float(finite_vector(radius, 1, "the circle's radius")[0])
        self.frequency = float(finite_vector(frequency, 1, "the circle's frequency")[0])
        self.ramp = float(finite_vector(ramp, 1, "the circle's ramp")[0])
        if self.ramp < 0.0:
            raise ValueError(f"the circle's ramp must not be negative, got {self.ramp}")
        self.start_time = float(finite_vector(start_time, 1, "the start time")[0])
        self.phase = float(finite_vector(phase, 1, "the circle's phase")[0])
        if len(plane) != 2 or set(plane) - {0, 1, 2} or plane[0] == plane[1]:
            raise ValueError(f"the circle's plane must be two different axes of 0, 1, 2, got {plane!r}")
        self.axes = np.eye(3)[list(plane)]

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, velocity, acceleration) at time t."""
        elapsed = max(t - self.start_time, 0.0)
        if self.ramp > 0.0:
            r, dr, ddr = (x[0, 0] for x in approach([0.0], [self.radius], [elapsed], self.ramp))
        else:
            r, dr, ddr = self.radius, 0.0, 0.0
        omega = 2.0 * np.pi * self.frequency
        angle = omega * elapsed + self.phase
        radial = np.cos(angle) * self.axes[0] + np.sin(angle) * self.axes[1]
        tangent = -np.sin(angle) * self.axes[0] + np.cos(angle) * self.axes[1]
        if t < self.start_time:
            return self.centre + r * radial, np.zeros(3), np.zeros(3)
        position = self.centre + r * radial
        velocity = dr * radial + r * omega * tangent
        acceleration = ddr * radial + 2.0 * dr * omega * tangent - r * omega**2 * radial
        return position, velocity, acceleration


class SwingTrajectory:
    """A foot from `start` to `end` (3,, world) in `duration` s from
    `start_time`, lifted by `height` (m, along z) at mid-swing."""

    def __init__(self, start, end, height: float, duration: float, start_time: float = 0.0):
        self.line = RestToRest(start, end, duration, start_time)
        self.height = float(finite_vector(height, 1, "the swing height")[0])

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, velocity, acceleration) at time t."""
        p, v, a = self.line.at(t)
        T = self.line.duration
        s = (t - self.line.start_time) / T
        if 0.0 < s < 1.0:  # h 64 s³(1-s)³ and its time derivatives
            u = s * (1.0 - s)
            p[2] += self.height * 64.0 * u**3
            v[2] += self.height * 64.0 * 3.0 * u**2 * (1.0 - 2.0 * s) / T
            a[2] += self.height * 64.0 * (6.0 * u * (1.0 - 2.0 * s) ** 2 - 6.0 * u**2) / T**2
        return p, v, a


class Waypoints:
    """Through k timed points: `times` (k,) s from `start_time`, strictly
    increasing; `positions` (k, 3) with `velocities` and `accelerations`
    (k, 3; None: zero); optionally `rotations` (k: quaternions (x, y, z, w)
    or 3x3) with world `angular_velocities` and `angular_accelerations`.
    Between two points, the quintic Hermite matching both points' position,
    velocity and acceleration (a quintic through its ends' values is
    reproduced exactly, e.g. RestToRest sampled); the rotation R_i exp(φ(t)),
    φ the quintic Hermite from 0 to log(R_iᵀ R_i+1) whose rate gives the
    points' ω at both ends; ω = R_i J(φ) φ' is the rotation's rate, the
    angular acceleration R_i J(φ) φ'' drops J̇ φ' (exact for a rotation about
    a fixed axis, and at the points). Before the
    first time it holds the first point, after the last the last point (the
    velocity and acceleration given there). One point: that point at all
    times."""

    def __init__(self, times, positions, velocities=None, accelerations=None, rotations=None,
                 angular_velocities=None, angular_accelerations=None, start_time: float = 0.0):
        self.times = np.array(times, dtype=float).reshape(-1)
        count = self.times.size
        if count == 0 or not np.all(np.isfinite(self.times)) or np.any(np.diff(self.times) <= 0.0):
            raise ValueError(f"the waypoints' times must be finite and strictly increasing, got {self.times.tolist()}")
        self.start_time = float(finite_vector(start_time, 1, "the start time")[0])

        def points(values, what):
            if values is None:
                return np.zeros((count, 3))
            flat = finite_vector(np.asarray(values, dtype=float).reshape(-1), 3 * count, f"the waypoints' {what}")
            return flat.reshape(count, 3)

        self.positions = points(positions, "positions")
        self.velocities, self.accelerations = points(velocities, "velocities"), points(accelerations, "accelerations")
        self._linear = self._segments(self.positions[:-1], self.positions[1:], self.velocities, self.accelerations)
        self.rotations = None
        if rotations is not None:
            if len(rotations) != count:
                raise ValueError(f"the waypoints have {count} times but {len(rotations)} rotations")
            self.rotations = np.array([rotation_matrix(r, f"the waypoints' rotation {i}")
                                       for i, r in enumerate(rotations)])
            self.angular_velocities = points(angular_velocities, "angular velocities")
            self.angular_accelerations = points(angular_accelerations, "angular accelerations")
            R = self.rotations[:-1]

            def in_start_axes(world):  # (k - 1, 3) world vectors in the axes of each segment's first rotation
                return np.einsum("kji,kj->ki", R, world)

            # each segment's rotation vector φ, R = R_i exp(φ) and ω = R_i J(φ) φ' (J the left Jacobian of SO(3)),
            # from 0 to log(R_iᵀ R_i+1); φ' and φ'' at its end: J(φ)⁻¹ R_iᵀ of ω and ω̇ there
            ends = np.array([so3_log(a.T @ b) for a, b in zip(R, self.rotations[1:])]).reshape(-1, 3)
            to_end = np.array([np.linalg.inv(so3_left_jacobian(end)) for end in ends]).reshape(-1, 3, 3)
            self._angular = self._segments(
                np.zeros_like(ends), ends, None, None,
                rates=(in_start_axes(self.angular_velocities[:-1]),
                       np.einsum("kij,kj->ki", to_end, in_start_axes(self.angular_velocities[1:]))),
                curvatures=(in_start_axes(self.angular_accelerations[:-1]),
                            np.einsum("kij,kj->ki", to_end, in_start_axes(self.angular_accelerations[1:]))))

    def _segments(self, start, end, velocities, accelerations, rates=None, curvatures=None) -> np.ndarray:
        """(k - 1, 6, 3): each segment's polynomial coefficients in s = (t - t_i) / T_i, powers 0..5."""
        T = np.diff(self.times)[:, None]
        v0, v1 = rates if rates is not None else (velocities[:-1], velocities[1:])
        a0, a1 = curvatures if curvatures is not None else (accelerations[:-1], accelerations[1:])
        ends = np.stack([start, T * v0, T**2 * a0, end, T * v1, T**2 * a1], axis=1)  # (k - 1, 6, 3)
        return np.einsum("pe,kec->kpc", HERMITE_QUINTIC, ends)

    @property
    def duration(self) -> float:
        """From the first point's time to the last's (s)."""
        return float(self.times[-1] - self.times[0])

    def _where(self, t: float):
        """(segment, s, its duration T) at time t, or (point index, None, None) outside the points' times."""
        elapsed = t - self.start_time
        if elapsed <= self.times[0]:
            return 0, None, None
        if elapsed >= self.times[-1]:
            return self.times.size - 1, None, None
        k = int(np.searchsorted(self.times, elapsed, side="right")) - 1
        T = self.times[k + 1] - self.times[k]
        return k, (elapsed - self.times[k]) / T, T

    @staticmethod
    def _evaluate(coefficients: np.ndarray, s: float, T: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        powers = s ** np.arange(6)
        value = powers @ coefficients
        rate = (np.arange(1, 6) * powers[:5]) @ coefficients[1:] / T
        curvature = (np.arange(2, 6) * np.arange(1, 5) * powers[:4]) @ coefficients[2:] / T**2
        return value, rate, curvature

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, velocity, acceleration) at time t."""
        k, s, T = self._where(t)
        if s is None:
            return self.positions[k].copy(), self.velocities[k].copy(), self.accelerations[k].copy()
        return self._evaluate(self._linear[k], s, T)

    def rotation_at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rotation 3x3, angular velocity, angular acceleration (world)) at time t (rotations given)."""
        if self.rotations is None:
            raise ValueError("these waypoints have no rotations")
        k, s, T = self._where(t)
        if s is None:
            return self.rotations[k].copy(), self.angular_velocities[k].copy(), self.angular_accelerations[k].copy()
        phi, rate, curvature = self._evaluate(self._angular[k], s, T)
        R, J = self.rotations[k], so3_left_jacobian(phi)
        return R @ so3_exp(phi), R @ (J @ rate), R @ (J @ curvature)
