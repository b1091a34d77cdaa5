"""Identification from recordings, end to end: read, filter, reduce to normal
equations chunk by chunk on Dask, fit, evaluate.

    result = identify(["run1_bag", "run2.csv"], nominal_urdf_xml)

Each recording (a ROS 2 bag, MCAP or sqlite3, or a CSV file: bag_data.py, csv_data.py) is read
and low-pass filtered as a whole (zero phase needs the whole signal; the
first and last EDGE_PERIODS periods of the cut-off are dropped, where the
filter starts up), then cut in chunks (chunk_samples); every chunk reduces to
its NormalEquations and the sums add up. These are Dask tasks: on local
threads by default, or on an existing cluster (`scheduler` = its address,
tcp://...), where the workers read the files themselves (they must see the
same paths) and rebuild the model from the URDF text. A second pass over the
chunks evaluates the torque error of the nominal and the identified
parameters, joint by joint, and their largest errors; with `robust`, when
some are outliers, Huber-weighted passes (estimation.normal_equations)
refit after it (_robust).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import dask
import numpy as np
from threadpoolctl import threadpool_limits

from mbs_dynamics.identification.bag_data import read_bag
from mbs_dynamics.identification.base_parameters import (
    MAX_CONDITION_NUMBER,
    BaseParameters,
    base_parameters,
    condition_number,
)
from mbs_dynamics.identification.csv_data import read_csv
from mbs_dynamics.identification.estimation import (
    DEFAULT_PRIOR_WEIGHT,
    STICKING_VELOCITIES,
    Fit,
    NormalEquations,
    fit,
    fitted_rows,
    normal_equations,
)
from mbs_dynamics.identification.filtering import DEFAULT_CUTOFF, filtered
from mbs_dynamics.identification.model_state import model_state
from mbs_dynamics.identification.parameters import DEFAULT_JOINT_PARAMETERS, ParameterLayout
from mbs_dynamics.identification.recording import QUANTITIES, DataError, Recording
from mbs_dynamics.identification.runner import Runner, total
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.multibody.parsers.urdf import MAX_MAGNITUDE

# A chunk's regressor (samples x nv x parameters) holds at most about CHUNK_BYTES, and at most CHUNK_SAMPLES
# samples: 5000 of a 6-DoF arm, some 800 of TALOS on a floating base (600 MB a chunk otherwise).
CHUNK_SAMPLES, CHUNK_BYTES = 5000, 100e6
# Samples of the first recording computed for the report's plots at most (an SVG draws 2000 per series).
SERIES_SAMPLES = 4000
# Dropped at each end of a filtered recording: this many periods of the cut-off.
EDGE_PERIODS = 2.0
# A joint whose fitted rows (where it moves: estimation.fitted_rows) are fewer than this
# fraction of the samples did not move enough to identify anything of it.
MIN_MOVING_FRACTION = 0.05
# Above this, a warning: the fit leans on the prior for some combinations.
POOR_CONDITION_NUMBER = 1e3
# Huber-reweighted refits of robust identification: at most this many, only when some residual of the
# least-squares fit is beyond OUTLIER_RATIO times its joint's RMS error (normal errors pass 5 RMS once in
# 1.7 million) and OUTLIER_SIZE times its torques' RMS (a fit's tiny errors, of filtering say, are no
# outliers whatever their shape), until the parameters move less than ROBUST_TOLERANCE (relative).
ROBUST_PASSES = 3
OUTLIER_RATIO, OUTLIER_SIZE = 5.0, 0.01
# A nominal model's torque error beyond this many times the measured torques' RMS (an effort of the opposite
# sign: 2) says the efforts are not the joint torques (identify's warning).
IMPLAUSIBLE_ERROR = 1.5
ROBUST_TOLERANCE = 1e-3


class IdentificationError(ValueError):
    """Identification cannot go on: the message says why and what to do."""


@dataclass(frozen=True)
class Options:
    """What identify reads and fits (its keyword arguments)."""

    floating_base: bool = False
    topic: str = "joint_states"
    odometry_topic: str | None = None
    cutoff: float = DEFAULT_CUTOFF
    joint_parameters: tuple[str, ...] = DEFAULT_JOINT_PARAMETERS
    stribeck_velocity: float | None = None  # v_s of every joint; None: the nominal URDF's (ParameterLayout)
    prior_weight: float = DEFAULT_PRIOR_WEIGHT
    robust: bool = False
    excluded_joints: tuple[str, ...] = ()
    held_joints: tuple[tuple[str, float], ...] = ()  # (joint, position): ParameterLayout.held_joints
    effort_scale: tuple[tuple[str, float], ...] = ()  # (joint, gain): its recorded efforts times gain

    def __post_init__(self):
        """held_joints also as {joint: position} or joint names (held at 0)."""
        held = self.held_joints.items() if isinstance(self.held_joints, dict) else self.held_joints
        object.__setattr__(self, "held_joints", tuple((item, 0.0) if isinstance(item, str) else tuple(item)
                                                      for item in held))
        object.__setattr__(self, "excluded_joints", tuple(self.excluded_joints))
        scale = self.effort_scale.items() if isinstance(self.effort_scale, dict) else self.effort_scale
        object.__setattr__(self, "effort_scale", tuple((name, float(gain)) for name, gain in scale))
        bad = [f"{name}={gain:g}" for name, gain in self.effort_scale if not (np.isfinite(gain) and gain != 0.0)]
        if bad:
            raise IdentificationError(f"effort gains must be finite and not zero, got {', '.join(bad)}")


@dataclass(frozen=True)
class JointReport:
    """A joint's torque on the data: its RMS, the RMS error of the nominal and the
    identified model, and which of its parameters are identifiable on their own."""

    joint: str
    torque_rms: float
    nominal_rms_error: float
    identified_rms_error: float
    identifiable: tuple[str, ...]


@dataclass(frozen=True)
class TorqueErrors:
    """The torque errors of named parameter sets on recordings, joint by joint,
    on the rows the fit uses (where the joint moves, when Coulomb friction
    is fitted: estimation.fitted_rows): sums of squares and their rows."""

    joints: tuple[str, ...]
    squared_errors: dict  # {name: (joints,)}
    squared_torques: np.ndarray  # (joints,)
    rows: np.ndarray  # (joints,)
    largest: dict  # {name: (joints,)}: the largest error

    @property
    def torque_rms(self) -> np.ndarray:
        return np.sqrt(self.squared_torques / np.maximum(self.rows, 1))

    def rms(self, name: str) -> np.ndarray:
        """Each joint's RMS torque error (N m or N)."""
        return np.sqrt(self.squared_errors[name] / np.maximum(self.rows, 1))

    def relative(self, name: str) -> np.ndarray:
        """Each joint's RMS torque error relative to its torques' RMS."""
        return np.sqrt(self.squared_errors[name] / np.maximum(self.squared_torques, 1e-300))

    def overall(self, name: str) -> float:
        """The RMS torque error over all joints relative to the torques' RMS over
        all joints: |tau_model - tau| / |tau| over every joint and row."""
        return float(np.sqrt(np.sum(self.squared_errors[name]) / max(np.sum(self.squared_torques), 1e-300)))


def torque_errors(joints, errors, names) -> TorqueErrors:
    """TorqueErrors from _chunk_errors' ErrorSums, the sets named `names`."""
    sums = errors.sums
    return TorqueErrors(tuple(joints), dict(zip(names, sums[:-2], strict=True)), sums[-2], sums[-1],
                        dict(zip(names, errors.largest, strict=True)))


@dataclass
class Validation:
    """The result of validate: the parameter sets' torque errors on recordings
    the fit did not use."""

    errors: TorqueErrors
    samples: int
    sources: list[str]
    warnings: list[str]
    # the first recording, for plots: time, measured torques and each parameter set's, of the actuated joints
    series: dict = field(default_factory=dict)


@dataclass
class Identification:
    """The result of identify."""

    layout: ParameterLayout
    nominal: np.ndarray  # p of the URDF
    identified: np.ndarray  # p fitted
    fit: Fit
    base: BaseParameters
    condition_number: float
    joints: list[JointReport]
    errors: TorqueErrors  # of the nominal and the identified parameters on the data
    samples: int
    sources: list[str]
    warnings: list[str] = field(default_factory=list)
    # the first recording, for plots: time, measured, nominal and identified torques of the actuated joints
    series: dict = field(default_factory=dict)


@lru_cache(maxsize=4)
def model_of(urdf_xml: str, floating_base: bool) -> Model:
    """The model of a URDF, built once per process (Dask workers rebuild it from the text)."""
    return Model.from_urdf_string(urdf_xml, floating_base=floating_base)


def layout_of(urdf_xml: str, options: Options) -> ParameterLayout:
    return ParameterLayout(model_of(urdf_xml, options.floating_base), options.joint_parameters,
                           excluded_joints=options.excluded_joints, held_joints=options.held_joints,
                           stribeck_velocity=options.stribeck_velocity)


@dataclass
class Samples:
    """A recording in the model's coordinates, filtered, ends dropped."""

    source: str
    time: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    effort: np.ndarray
    warnings: list[str]

    def __len__(self):
        return len(self.time)


def read_samples(source: str, urdf_xml: str, options: Options) -> Samples:
    """A recording (bag or CSV), filtered, in the model's coordinates; IdentificationError if unusable."""
    model = model_of(urdf_xml, options.floating_base)
    try:
        if Path(source).suffix.lower() == ".csv":
            recording = read_csv(source)
        else:
            recording = read_bag(source, options.topic, options.odometry_topic, progress=False)
        if recording.effort is None:
            raise IdentificationError(f"{recording.source}: the joint states carry no efforts; identification "
                                      "needs the measured joint torques")
        recording = _scaled_efforts(recording, options.effort_scale)
        _check_magnitudes(recording)
        recording = filtered(recording, options.cutoff, filter_effort=False)
        edge = EDGE_PERIODS / options.cutoff
        recording = recording.window(recording.time[0] + edge, recording.time[-1] - edge)
        state = model_state(model, recording, dict(options.held_joints))
    except DataError as error:
        raise IdentificationError(str(error)) from None
    return Samples(recording.source, recording.time, state.q, state.v, state.a, state.effort,
                   list(recording.warnings) + list(state.warnings))


def _scaled_efforts(recording: Recording, effort_scale) -> Recording:
    """The recording with each named joint's efforts times its gain (motor
    currents to joint torques: gear ratio times torque constant; a negative
    gain flips a sign); DataError for a joint it does not record."""
    if not effort_scale:
        return recording
    missing = [name for name, _ in effort_scale if name not in recording.joint_names]
    if missing:
        raise DataError(f"{recording._what()} has no joints {missing} to scale the efforts of; it has "
                        f"{list(recording.joint_names)}")
    gains = np.ones(len(recording.joint_names))
    for name, gain in effort_scale:
        gains[recording.joint_names.index(name)] = gain
    return recording.replace(effort=recording.effort * gains)


def _check_magnitudes(recording: Recording) -> None:
    """IdentificationError for a recorded value beyond MAX_MAGNITUDE: a units
    mistake, and squares and products of it would overflow."""
    for quantity in QUANTITIES:
        values = getattr(recording, quantity)
        if values is not None and values.size and np.max(np.abs(values)) > MAX_MAGNITUDE:
            row, column = np.unravel_index(np.argmax(np.abs(values)), values.shape)
            raise IdentificationError(
                f"{recording.source}: {quantity} of {recording.joint_names[column]} reaches "
                f"{values[row, column]:.3g} (t = {recording.time[row]:.6g} s), beyond {MAX_MAGNITUDE:.0e}: a "
                "units mistake? Positions are in rad or m, velocities in rad/s or m/s, efforts in N m or N")


def chunk_samples(layout: ParameterLayout) -> int:
    """How many samples a chunk has: CHUNK_SAMPLES, fewer where their regressor would pass CHUNK_BYTES."""
    return int(np.clip(CHUNK_BYTES / (8 * layout.model.nv * layout.size), 100, CHUNK_SAMPLES))


def _chunk_equations(samples: Samples, rows: slice, urdf_xml: str, options: Options, weights, robust_scale=None,
                     parameters=None) -> NormalEquations:
    layout = layout_of(urdf_xml, options)
    with threadpool_limits(1, "blas"):
        return normal_equations(layout, samples.q[rows], samples.v[rows], samples.a[rows], samples.effort[rows],
                                weights, robust_scale, parameters)


def _chunk_errors(samples: Samples, rows: slice, urdf_xml: str, options: Options, parameter_sets) -> ErrorSums:
    """Per parameter set and actuated joint, the sum of squared torque errors on
    the chunk's rows that the fit uses (estimation.fitted_rows) and the
    largest error, the sum of squared torques on them and their number."""
    layout = layout_of(urdf_xml, options)
    joints = layout.joint_coordinates()
    Y = layout.regressor(samples.q[rows], samples.v[rows], samples.a[rows])[:, joints]
    tau = samples.effort[rows][:, joints]
    used = fitted_rows(layout, samples.v[rows][:, joints])
    errors = [used * np.abs(Y @ p - tau) for p in parameter_sets]
    return ErrorSums(np.array([np.sum(e**2, axis=0) for e in errors] + [np.sum(used * tau**2, axis=0),
                                                                         np.sum(used, axis=0)]),
                     np.array([np.max(e, axis=0, initial=0.0) for e in errors]))


@dataclass(frozen=True)
class ErrorSums:
    """_chunk_errors' sums (one row per parameter set, then the squared torques
    and the rows) and largest errors (one row per set), added over chunks."""

    sums: np.ndarray
    largest: np.ndarray

    def __add__(self, other: ErrorSums) -> ErrorSums:
        return ErrorSums(self.sums + other.sums, np.maximum(self.largest, other.largest))


def _chunk_tasks(function, recordings, sizes, urdf_xml: str, options: Options, *arguments) -> list:
    """function(samples, rows, urdf_xml, options, *arguments) as a Dask task per chunk (rows: a slice) of each
    recording."""
    length = chunk_samples(layout_of(urdf_xml, options))
    return [dask.delayed(function)(r, slice(start, start + length), urdf_xml, options, *arguments)
            for r, size in zip(recordings, sizes, strict=True) for start in range(0, size, length)]


def _series(layout: ParameterLayout, samples: Samples, parameters: dict) -> dict:
    """For plots: time, the measured torques of the actuated joints and those of each named parameter set, at
    SERIES_SAMPLES samples at most, evenly spaced."""
    joints = layout.joint_coordinates()
    shown = slice(None, None, max(1, -(-len(samples) // SERIES_SAMPLES)))
    Y = layout.regressor(samples.q[shown], samples.v[shown], samples.a[shown])[:, joints]
    return {"time": samples.time[shown], "measured": samples.effort[shown][:, joints]} | {
        name: Y @ p for name, p in parameters.items()}


def _checked_layout(urdf_xml: str, options: Options) -> ParameterLayout:
    try:
        return layout_of(urdf_xml, options)
    except ValueError as error:
        raise IdentificationError(f"the nominal URDF: {error}") from None


def validate(sources, urdf_xml: str, parameters: dict | None = None, scheduler: str | None = None,
             progress: bool = True, **options) -> Validation:
    """The torque errors, joint by joint, of parameter sets ({name: p} in the
    ParameterLayout of urdf_xml and options; default {"URDF": its own}) on
    recordings not used in the fit, read and filtered as identify reads its
    own (same options), on the rows a fit would use."""
    options = Options(**options)
    layout = _checked_layout(urdf_xml, options)
    parameters = {"URDF": layout.nominal()} if parameters is None else {
        name: np.asarray(p, dtype=float) for name, p in parameters.items()}
    for name, p in parameters.items():
        if p.shape != (layout.size,):
            raise IdentificationError(f"parameters '{name}' have shape {p.shape}, the layout {layout.size}")
    if not sources:
        raise IdentificationError("no recordings to validate on")
    runner = Runner(scheduler, progress)
    try:
        recordings = runner.persist([dask.delayed(read_samples)(str(source), urdf_xml, options)
                                     for source in sources])
        sizes = runner.compute([dask.delayed(len)(r) for r in recordings], None)
        notes = runner.compute([dask.delayed(getattr)(r, "warnings") for r in recordings], None)
        sums = total(runner.compute(_chunk_tasks(_chunk_errors, recordings, sizes, urdf_xml, options,
                                                 list(parameters.values())), "validation"))
        first = runner.compute([recordings[0]], None)[0]
    finally:
        runner.close()
    return Validation(torque_errors(layout.actuated_joints, sums, parameters), sum(sizes),
                      [str(s) for s in sources], [f"{source}: {w}" for source, ws in zip(sources, notes, strict=True)
                                                  for w in ws], _series(layout, first, parameters))


def identify(sources, urdf_xml: str, scheduler: str | None = None, progress: bool = True,
             **options) -> Identification:
    """Identify the parameters of the URDF's robot (ParameterLayout: inertias, and
    per joint options['joint_parameters']) from recordings (module docstring).
    options: the fields of Options."""
    options = Options(**options)
    layout = _checked_layout(urdf_xml, options)
    massless = _check_layout(layout)
    runner = Runner(scheduler, progress)
    try:
        read = [dask.delayed(read_samples)(str(source), urdf_xml, options) for source in sources]
        recordings = runner.persist(read)
        sizes = runner.compute([dask.delayed(len)(r) for r in recordings], "sizing")
        statistics = runner.compute([dask.delayed(_statistics)(r, urdf_xml, options) for r in recordings], "statistics")
        samples = sum(sizes)
        torque_rms = np.sqrt(sum(s[0] for s in statistics) / max(samples, 1))
        moving = sum(s[1] for s in statistics)
        excluded_moving = sum(s[3] for s in statistics)
        warnings = massless + [w for s in statistics for w in s[2]]
        _check_efforts(layout, torque_rms)
        _check_excitation(layout, samples, moving)
        weights = 1.0 / np.maximum(torque_rms, 1e-3 * max(torque_rms.max(), 1e-12)) ** 2

        def chunks(function, *arguments):
            return _chunk_tasks(function, recordings, sizes, urdf_xml, options, *arguments)

        equations = total(runner.compute(chunks(_chunk_equations, weights), "normal equations")).mean()
        base = base_parameters(layout)
        condition = condition_number(equations.normal_matrix, base)
        if not np.isfinite(condition):
            raise IdentificationError(f"the base regressor of the recordings is not finite (condition number "
                                      f"{condition}): look at the recorded positions and velocities")
        if not condition < MAX_CONDITION_NUMBER:
            still = [name for name, count in zip(layout.excluded_joints, excluded_moving, strict=True)
                     if count < MIN_MOVING_FRACTION * samples]
            hint = (f"; joints left out that barely moved: {', '.join(still)}: hold them instead (--fixed-joints "
                    f"{','.join(still)}, at their recorded position)") if still else ""
            raise IdentificationError(f"too little excitation: the base regressor's condition number is "
                                      f"{condition:.3g} (above {MAX_CONDITION_NUMBER:.0e}); record an excitation "
                                      f"trajectory (mbs_dynamics_excitation) that moves every joint{hint}")
        if condition > POOR_CONDITION_NUMBER:
            warnings.append(f"the base regressor's condition number is {condition:.3g}: some combinations of "
                            "parameters are barely excited and stay near their URDF values")
        result = _fit(layout, equations, options, torque_rms)
        nominal = layout.nominal()
        errors = total(runner.compute(chunks(_chunk_errors, [nominal, result.parameters]), "evaluation"))
        if options.robust:
            result, errors, note = _robust(layout, result, errors, runner, chunks, weights, options, torque_rms)
            warnings.append(note)
        first = runner.compute([recordings[0]], None)[0]
    finally:
        runner.close()
    scores = torque_errors(layout.actuated_joints, errors, ("nominal", "identified"))
    warnings += _implausible_efforts(scores)
    identifiable = layout_identifiable(layout, base)
    reports = [JointReport(name, float(scores.torque_rms[k]), float(scores.rms("nominal")[k]),
                           float(scores.rms("identified")[k]), identifiable.get(name, ()))
               for k, name in enumerate(layout.actuated_joints)]
    series = _series(layout, first, {"nominal": nominal, "identified": result.parameters})
    return Identification(layout, nominal, result.parameters, result, base, condition, reports, scores, samples,
                          [str(s) for s in sources], warnings + result.warnings, series)


def _robust(layout, result: Fit, errors: ErrorSums, runner, chunks, weights, options, torque_rms):
    """Huber-reweighted refits (iteratively reweighted least squares, each
    joint's scale its residual RMS) from the least-squares fit `result`, its
    ErrorSums `errors` (of the nominal and it): none when no residual is an
    outlier (beyond OUTLIER_RATIO times its joint's RMS error and OUTLIER_SIZE
    of its torques' RMS: clean data leave the fit as it is), else up to
    ROBUST_PASSES, until the parameters
    move less than ROBUST_TOLERANCE. Returns the fit, the ErrorSums of the
    nominal and it, and a note of what was done."""
    names = ("nominal", "identified")
    scores = torque_errors(layout.actuated_joints, errors, names)
    largest = scores.largest["identified"]
    ratio = largest / np.maximum(scores.rms("identified"), 1e-300)
    outlying = (ratio > OUTLIER_RATIO) & (largest > OUTLIER_SIZE * scores.torque_rms)
    if not np.any(outlying):
        return result, errors, (f"robust: no residual beyond {OUTLIER_RATIO:g} times its joint's RMS error and "
                                f"{OUTLIER_SIZE:.0%} of its torques' RMS: no outliers, the least-squares fit stands")
    passes = 0
    for passes in range(1, ROBUST_PASSES + 1):
        scale = scores.rms("identified")
        equations = total(runner.compute(chunks(_chunk_equations, weights, scale, result.parameters),
                                         "robust normal equations")).mean()
        previous, result = result.parameters, _fit(layout, equations, options, torque_rms)
        errors = total(runner.compute(chunks(_chunk_errors, [layout.nominal(), result.parameters]), "residuals"))
        scores = torque_errors(layout.actuated_joints, errors, names)
        if np.linalg.norm(result.parameters - previous) <= ROBUST_TOLERANCE * np.linalg.norm(previous):
            break
    outliers = ", ".join(joint for joint, out in zip(layout.actuated_joints, outlying, strict=True) if out)
    return result, errors, (f"robust: residuals beyond {OUTLIER_RATIO:g} times their joint's RMS ({outliers}): "
                            f"{passes} Huber-reweighted refit(s)")


def _implausible_efforts(scores: TorqueErrors) -> list[str]:
    """A warning naming the joints whose nominal torque error passes
    IMPLAUSIBLE_ERROR times their measured torques' RMS: no URDF is that far
    off, the efforts are not the joint torques its model predicts."""
    relative = scores.relative("nominal")
    far = [f"{joint} ({error:.3g} times)" for joint, error in zip(scores.joints, relative, strict=True)
           if error > IMPLAUSIBLE_ERROR]
    if not far:
        return []
    return [f"the nominal URDF's torque error passes {IMPLAUSIBLE_ERROR:g} times the measured torques' RMS on "
            f"{', '.join(far)}: are those efforts joint torques in N m or N (not motor currents, not with a weight "
            "or gravity taken out, not of the opposite sign)? They pull every other parameter with them: convert "
            "them, or leave those joints out (--exclude-joints)"]


def _fit(layout: ParameterLayout, equations: NormalEquations, options: Options, torque_rms) -> Fit:
    """estimation.fit, its failure an IdentificationError."""
    try:
        with threadpool_limits(1, "blas"):
            return fit(layout, equations, prior_weight=options.prior_weight, torque_scale=torque_rms)
    except (ValueError, np.linalg.LinAlgError) as error:  # least_squares: residuals not finite, ...
        raise IdentificationError(f"the fit failed ({error}): the recorded torques may not be in N m or N, or "
                                  "not match the URDF's robot") from None


def _check_layout(layout: ParameterLayout) -> list[str]:
    """IdentificationError when nothing can be identified: every joint left out,
    or every body of the nominal URDF massless (the URDF's masses and inertias
    set each body's scale; a body of zero mass stays massless, estimation.fit).
    A warning naming the bodies of zero mass that an actuated joint moves."""
    if not layout.actuated_joints and (layout.excluded_joints or layout.held_joints):
        options = [f"--exclude-joints {','.join(layout.excluded_joints)}"] if layout.excluded_joints else []
        options += [f"--fixed-joints {','.join(layout.held)}"] if layout.held_joints else []
        raise IdentificationError(f"every joint of '{layout.model.name}' is left out ({', '.join(options)}): no "
                                  "torque is left to identify from; keep at least one joint whose torques were "
                                  "measured")
    if not layout.actuated_joints:
        raise IdentificationError(f"'{layout.model.name}' has no revolute or prismatic joint: no torque to "
                                  "identify from")
    masses = layout.body_parameters(layout.nominal())[:, 0]
    if not np.any(masses > 0.0):
        raise IdentificationError(
            f"every link of the nominal URDF '{layout.model.name}' has zero mass: identification starts from the "
            "URDF's masses and inertias, which give each body its scale, and keeps a massless link massless, so no "
            "inertia could be identified (gravity would be fitted as friction and damping); give the links "
            "approximate masses and inertias (CAD or a datasheet, within a factor of 2 will do)")
    moved = set(layout.actuated_joints)
    massless = [name for name, joint, mass in zip(layout.body_names, layout.model.body_joint_names, masses,
                                                  strict=True) if joint in moved and mass <= 0.0]
    return [f"links of zero mass in the nominal URDF stay massless (not identified): {', '.join(massless)}"] \
        if massless else []


def _check_efforts(layout: ParameterLayout, torque_rms) -> None:
    """IdentificationError for joints whose measured efforts are zero throughout."""
    zero = [name for name, rms in zip(layout.actuated_joints, torque_rms, strict=True) if not rms > 0.0]
    if zero:
        joints = "every joint" if len(zero) == len(layout.actuated_joints) else ", ".join(zero)
        raise IdentificationError(
            f"the measured efforts of {joints} are zero throughout the recordings: no torque was recorded (no "
            "torque sensor, or efforts not published); record the measured torques, or leave such joints out "
            "(--exclude-joints)")


def _statistics(samples: Samples, urdf_xml: str, options: Options):
    """Sums of squares of the actuated joints' efforts, their numbers of fitted
    rows, the recording's warnings, and the numbers of samples where each
    excluded joint moves (as fitted_rows counts)."""
    layout = layout_of(urdf_xml, options)
    joints = layout.joint_coordinates()
    excluded = [layout.model.v_index(name) for name in layout.excluded_joints]
    speed = STICKING_VELOCITIES * layout.smoothing
    return (np.sum(samples.effort[:, joints] ** 2, axis=0), np.sum(fitted_rows(layout, samples.v[:, joints]), axis=0),
            [f"{samples.source}: {w}" for w in samples.warnings],
            np.sum(np.abs(samples.v[:, excluded]) >= speed, axis=0))


def _check_excitation(layout: ParameterLayout, samples: int, moving) -> None:
    if samples < layout.size:
        raise IdentificationError(f"too little data: {samples} samples for {layout.size} parameters")
    still = [f"{name} ({count} samples)" for name, count in zip(layout.actuated_joints, moving, strict=True)
             if count < MIN_MOVING_FRACTION * samples]
    if still:
        speed = f"{STICKING_VELOCITIES * layout.smoothing:g} rad/s or m/s" if layout.fits_coulomb else "all"
        raise IdentificationError(
            f"too little excitation: joints that barely moved (faster than {speed} in fewer than "
            f"{MIN_MOVING_FRACTION:.0%} of the {samples} samples): {', '.join(still)}; record an excitation "
            "trajectory (mbs_dynamics_excitation) that moves every joint, or leave the joint out (--exclude-joints)")


def layout_identifiable(layout: ParameterLayout, base: BaseParameters) -> dict[str, tuple[str, ...]]:
    """Per actuated joint, the parameters identifiable on their own: its joint
    parameters, and those of the body it moves."""
    alone = base.identifiable()
    names = layout.names
    bodies = dict(zip(layout.model.body_joint_names, layout.body_names, strict=True))
    found: dict[str, tuple[str, ...]] = {}
    for joint in layout.actuated_joints:
        prefixes = (f"{joint}.", f"{bodies[joint]}.")
        found[joint] = tuple(name.split(".", 1)[1] if name.startswith(prefixes[0]) else name
                             for k, name in enumerate(names) if alone[k] and name.startswith(prefixes))
    return found
