"""Reference motions for the whole-body controller's tasks: each a function of
time giving (position, velocity, acceleration), world axes.

    circle(start, radius, frequency, t)   a horizontal circle through `start`
    minimum_jerk(start, end, duration, t) a rest-to-rest move (quintic)
"""
from __future__ import annotations

import numpy as np

from mbs_dynamics.control.tasks import finite_vector


def circle(start, radius: float, frequency: float, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A horizontal circle of `radius` (m) at `frequency` (Hz), counter-clockwise
    seen from above, at `start` at t = 0 (its centre `radius` behind it
    along x) and before."""
    start = finite_vector(start, 3, "the circle's start")
    if t <= 0.0:
        return start, np.zeros(3), np.zeros(3)
    w = 2.0 * np.pi * frequency
    c, s = np.cos(w * t), np.sin(w * t)
    centre = start - np.array([radius, 0.0, 0.0])
    return (centre + radius * np.array([c, s, 0.0]), radius * w * np.array([-s, c, 0.0]),
            -radius * w * w * np.array([c, s, 0.0]))


def minimum_jerk(start, end, duration: float, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From `start` (t <= 0) to `end` (t >= duration) at rest at both ends,
    along the quintic s = 10 τ³ - 15 τ⁴ + 6 τ⁵ (τ = t / duration)."""
    start, end = finite_vector(start, 3, "the move's start"), finite_vector(end, 3, "the move's end")
    if duration <= 0.0:
        raise ValueError(f"the move's duration must be positive, got {duration}")
    tau = min(max(t / duration, 0.0), 1.0)
    s = tau**3 * (10.0 - 15.0 * tau + 6.0 * tau**2)
    ds = 30.0 * tau**2 * (1.0 - tau) ** 2 / duration
    dds = 60.0 * tau * (1.0 - tau) * (1.0 - 2.0 * tau) / duration**2
    delta = end - start
    return start + s * delta, ds * delta, dds * delta
