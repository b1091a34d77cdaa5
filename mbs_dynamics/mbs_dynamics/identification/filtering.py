"""Recordings low-pass filtered without phase lag (`filtered`), with
accelerations differentiated from the filtered velocities; resampling onto
a uniform time grid, which the filter needs; quaternions interpolated by
slerp, here and where bag_data.py brings odometry to the joint states'
times."""
from __future__ import annotations

import numpy as np

from mbs_dynamics.identification.recording import BASE_COLUMNS, QUANTITIES, DataError, Recording

# filtered()'s low-pass filter (its docstring says why these)
DEFAULT_CUTOFF = 10.0  # Hz
DEFAULT_ORDER = 4
# Sample intervals further than this (relative) from their median make
# filtered() resample onto a uniform grid first.
UNIFORM_TOLERANCE = 0.05
# ... but not onto more than this many times its samples: a recording with long gaps.
MAX_RESAMPLING = 2


def filtered(recording: Recording, cutoff: float = DEFAULT_CUTOFF, order: int = DEFAULT_ORDER,
             filter_effort: bool = True) -> Recording:
    """The recording low-pass filtered without phase lag, and accelerations
    differentiated from the filtered velocities.

    Positions, velocities, efforts and the base's pose and twist go through
    a Butterworth filter of `order` and `cutoff` (Hz) forward and backward
    (scipy.signal.sosfiltfilt: zero phase, gain 1 / (1 + (f / cutoff)^(2
    order)), half at the cut-off). The default 10 Hz suits arm
    identification: excitation trajectories (finite Fourier series) keep
    their energy below a few Hz, which pass unchanged (5 Hz at 0.996, 2 Hz
    at 1 - 3e-6), while measurement noise, which each differentiation
    amplifies by 2 pi f, is stopped above it; efforts and motion pass the
    same filter, so that their phases and gains stay consistent. Noisier
    data wants a lower cut-off: with 1 % white noise on 500 Hz velocities,
    10 Hz leaves accelerations of motion below 2 Hz within about 1 % RMS
    (4 % at worst) of their peak, 5 Hz within half that.

    Velocities not recorded are differentiated from the filtered positions;
    accelerations always come from the filtered velocities (central
    differences; recorded ones are replaced, said in the warnings), the
    base's as the time derivatives of its twist in its own axes. The
    filter needs a uniform sample rate: stamps further than 5 % from their
    median interval are first resampled onto a uniform grid at that interval
    (linear interpolation, the quaternion by slerp; said in the warnings).
    Each end is padded with one cut-off period (odd extension); the first
    and last few tenths of a second still carry the filter's transients, for
    `Recording.window` to drop. With filter_effort False the efforts pass
    unfiltered (resampled if need be): what identification does, so that a
    Coulomb friction's jump at a velocity reversal stays as sharp as the
    model's (joint_friction), while least squares averages the noise out.
    DataError for a recording no longer than
    that padding or a cut-off at or above the Nyquist frequency."""
    from scipy.signal import butter, sosfiltfilt

    if not (np.isfinite(cutoff) and cutoff > 0):
        raise ValueError(f"cutoff must be a positive frequency (Hz), got {cutoff!r}")
    if int(order) != order or order < 1:
        raise ValueError(f"order must be a positive integer, got {order!r}")
    if len(recording) < 3:
        raise DataError(f"{recording._what()}: {len(recording)} samples; filtering needs many more")
    recording, notes = _uniform(recording)
    rate = 1.0 / float(np.median(np.diff(recording.time)))
    if cutoff >= rate / 2:
        raise DataError(f"{recording._what()}: cut-off {cutoff:g} Hz at or above the Nyquist frequency "
                        f"{rate / 2:.6g} Hz of its {rate:.6g} Hz samples")

    def too_few(needed: float) -> DataError:
        return DataError(f"{recording._what()}: {len(recording)} samples ({recording.duration:.3g} s) are too few "
                         f"to filter at {cutoff:g} Hz: more than {needed:.0f} ({needed / rate:.3g} s at {rate:.6g} Hz) "
                         "are needed")

    period = rate / cutoff  # samples in a period of the cut-off; inf for a tiny cut-off
    if not len(recording) > period:
        raise too_few(np.ceil(period))
    sections = butter(int(order), cutoff, fs=rate, output="sos")
    padding = max(3 * (2 * len(sections) + 1), int(np.ceil(period)))
    if len(recording) <= padding:
        raise too_few(padding)

    def smooth(values):
        return None if values is None else sosfiltfilt(sections, values, axis=0, padlen=padding)

    def derivative(values):
        return None if values is None else np.gradient(values, recording.time, axis=0)

    position = smooth(recording.position)
    velocity = smooth(recording.velocity) if recording.velocity is not None else derivative(position)
    if recording.acceleration is not None:
        notes.append("the recorded accelerations were replaced by the derivative of the filtered velocities")
    changes = {"position": position, "velocity": velocity, "acceleration": derivative(velocity),
               "effort": smooth(recording.effort) if filter_effort else recording.effort}
    if recording.has_base:
        orientation = smooth(_continuous(recording.base_orientation))
        linear, angular = smooth(recording.base_linear_velocity), smooth(recording.base_angular_velocity)
        changes.update(base_position=smooth(recording.base_position),
                       base_orientation=orientation / np.linalg.norm(orientation, axis=1, keepdims=True),
                       base_linear_velocity=linear, base_angular_velocity=angular,
                       base_linear_acceleration=derivative(linear), base_angular_acceleration=derivative(angular))
    notes.append(f"low-pass filtered at {cutoff:g} Hz (Butterworth of order {order}, zero phase"
                 f"{'' if filter_effort else ', the efforts not'}); accelerations from the filtered velocities")
    return recording.replace(**changes, warnings=recording.warnings + tuple(notes))


def _uniform(recording: Recording) -> tuple[Recording, list]:
    """The recording on a uniform time grid at its median sample interval,
    resampled when an interval is more than UNIFORM_TOLERANCE from it."""
    steps = np.diff(recording.time)
    step = float(np.median(steps))
    if np.max(np.abs(steps - step)) <= UNIFORM_TOLERANCE * step:
        return recording, []
    samples = recording.duration / step + 1
    if samples > MAX_RESAMPLING * len(recording):
        raise DataError(f"{recording._what()}: its sample intervals range from {steps.min() * 1e3:.3g} to "
                        f"{steps.max() * 1e3:.3g} ms; a uniform grid at the median {step * 1e3:.3g} ms would take "
                        f"{samples:.3g} samples, more than {MAX_RESAMPLING} times its {len(recording)}: the recording "
                        "has long gaps; cut it at them (Recording.window) and give the parts")
    time = recording.time[0] + step * np.arange(int(np.floor(recording.duration / step + 1e-9)) + 1)
    changes = {field: np.column_stack([np.interp(time, recording.time, column) for column in values.T])
               for field in (*QUANTITIES, *BASE_COLUMNS)
               if (values := getattr(recording, field)) is not None}
    if recording.has_base:
        changes["base_orientation"] = slerp(recording.time, recording.base_orientation, time)
    note = (f"resampled onto a uniform {1 / step:.6g} Hz grid ({len(recording)} -> {time.size} samples): the "
            f"sample intervals ranged from {steps.min() * 1e3:.3g} to {steps.max() * 1e3:.3g} ms")
    return recording.replace(time=time, **changes), [note]


def _continuous(quaternions: np.ndarray) -> np.ndarray:
    """The quaternions with signs flipped so that neighbours lie in the same
    hemisphere (q and -q are one rotation): a signal that can be filtered."""
    flips = np.concatenate([[1.0], np.where(np.sum(quaternions[1:] * quaternions[:-1], axis=1) < 0, -1.0, 1.0)])
    return quaternions * np.cumprod(flips)[:, None]


def slerp(time: np.ndarray, quaternions: np.ndarray, new_time: np.ndarray) -> np.ndarray:
    """Unit quaternions (x, y, z, w) at `new_time`, spherically interpolated
    between the samples around each (on the shorter arc)."""
    index = np.clip(np.searchsorted(time, new_time, side="right") - 1, 0, time.size - 2)
    fraction = ((new_time - time[index]) / (time[index + 1] - time[index]))[:, None]
    start, end = quaternions[index], quaternions[index + 1]
    cosine = np.sum(start * end, axis=1, keepdims=True)
    end, cosine = np.where(cosine < 0, -end, end), np.abs(cosine)
    angle = np.arccos(np.clip(cosine, -1.0, 1.0))
    sine = np.sin(angle)
    tiny = sine < 1e-9  # (nearly) the same rotation: linear weights
    safe = np.where(tiny, 1.0, sine)
    start_weight = np.where(tiny, 1 - fraction, np.sin((1 - fraction) * angle) / safe)
    end_weight = np.where(tiny, fraction, np.sin(fraction * angle) / safe)
    result = start_weight * start + end_weight * end
    result /= np.linalg.norm(result, axis=1, keepdims=True)
    for sample in (index, index + 1):  # at a sample's own time, its own quaternion to the bit
        hit = new_time == time[sample]
        result[hit] = quaternions[sample[hit]]
    return result
