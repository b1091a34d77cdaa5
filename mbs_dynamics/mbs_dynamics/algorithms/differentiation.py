"""The derivative of a sampled signal, low-pass filtered: accelerations from
measured velocities (no ROS here: arrays in, arrays out)."""
from __future__ import annotations

import numpy as np


def smoothing_factor(dt: float, cutoff: float) -> float:
    """The weight of a new sample in a first-order low-pass filter of cut-off
    `cutoff` (Hz) sampled after `dt` (s): dt / (dt + 1 / (2 pi cutoff))."""
    return dt / (dt + 1.0 / (2.0 * np.pi * cutoff))


class FilteredDerivative:
    """d/dt of a vector signal x(t), by finite differences between successive
    samples, through a first-order low-pass filter of cut-off `cutoff` (Hz).

    The first sample gives zero; a sample not later than the last one changes
    nothing (its derivative is the last one's); reset() forgets the past (time
    went back)."""

    def __init__(self, cutoff: float):
        self.cutoff = cutoff
        self.reset()

    def reset(self) -> None:
        self._last: tuple[float, np.ndarray] | None = None  # (t, x) of the last sample taken
        self._derivative: np.ndarray | None = None

    def update(self, t: float, x: np.ndarray) -> np.ndarray:
        """The filtered derivative at sample (t, x)."""
        if self._last is None:
            self._last, self._derivative = (t, np.array(x, dtype=float)), np.zeros(np.shape(x))
            return self._derivative.copy()
        last_t, last_x = self._last
        dt = t - last_t
        if dt > 0:
            difference = (x - last_x) / dt
            self._derivative = self._derivative + smoothing_factor(dt, self.cutoff) * (difference - self._derivative)
            self._last = (t, np.array(x, dtype=float))
        return self._derivative.copy()
