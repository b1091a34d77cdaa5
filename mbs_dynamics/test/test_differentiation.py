"""The filtered derivative that turns measured velocities into accelerations."""
from __future__ import annotations

import numpy as np
import pytest
from mbs_dynamics.algorithms.differentiation import FilteredDerivative, smoothing_factor


def test_first_sample_gives_zero_and_a_ramp_its_slope():
    derivative = FilteredDerivative(cutoff=1e6)  # no filtering to speak of
    assert np.array_equal(derivative.update(0.0, np.array([1.0, -2.0])), [0.0, 0.0])
    for k in range(1, 5):
        rate = derivative.update(0.001 * k, np.array([1.0 + 3.0 * 0.001 * k, -2.0 - 0.001 * k]))
    assert rate == pytest.approx([3.0, -1.0], rel=1e-4)


def test_a_step_in_slope_is_followed_at_the_filter_time_constant():
    cutoff, dt = 5.0, 0.001
    derivative = FilteredDerivative(cutoff)
    tau = 1.0 / (2 * np.pi * cutoff)
    times = np.arange(0.0, 5 * tau, dt)
    rates = [derivative.update(t, np.array([2.0 * t]))[0] for t in times]
    # the first difference arrives at t = dt: a discrete first-order lag of the slope 2 from there
    expected = 2.0 * (1 - (1 - smoothing_factor(dt, cutoff)) ** np.arange(len(times)))
    assert rates == pytest.approx(expected, abs=1e-9)
    assert rates[round(tau / dt)] == pytest.approx(2.0 * (1 - np.exp(-1)), rel=0.02)
    assert rates[-1] == pytest.approx(2.0, rel=0.01)


def test_a_sample_not_later_than_the_last_changes_nothing_and_reset_forgets():
    derivative = FilteredDerivative(cutoff=50.0)
    derivative.update(0.0, np.array([0.0]))
    before = derivative.update(0.01, np.array([1.0]))
    assert before[0] > 0
    assert derivative.update(0.01, np.array([100.0])) == pytest.approx(before)
    assert derivative.update(0.005, np.array([-100.0])) == pytest.approx(before)
    derivative.reset()
    assert np.array_equal(derivative.update(0.0, np.array([5.0])), [0.0])


def test_the_returned_array_is_the_callers():
    derivative = FilteredDerivative(cutoff=50.0)
    derivative.update(0.0, np.array([0.0]))
    first = derivative.update(0.01, np.array([1.0]))
    first[0] = 1e9
    assert derivative.update(0.01, np.array([1.0]))[0] < 1e3
