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
  vanish at lift-off and touch-down.

Before its start time a reference holds its first point, after its end its
last (velocity and acceleration zero)."""
from __future__ import annotations

import numpy as np

from mbs_dynamics.control.tasks import finite_vector
from mbs_dynamics.identification.fourier_trajectory import approach


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
