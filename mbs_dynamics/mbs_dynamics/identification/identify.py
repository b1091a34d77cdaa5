"""Identification from recordings, end to end: read, filter, reduce to normal
equations chunk by chunk on Dask, fit, evaluate.

    result = identify(["run1_bag", "run2.csv"], nominal_urdf_xml)

Each recording (a ROS 2 bag, MCAP or sqlite3, or a CSV file: bag_data.py, csv_data.py) is read
and low-pass filtered as a whole (zero phase needs the whole signal; the
first and last EDGE_PERIODS periods of the cut-off are dropped, where the
filter starts up), then cut in chunks of CHUNK_SAMPLES; every chunk reduces to
its NormalEquations and the sums add up. These are Dask tasks: on local
threads by default, or on an existing cluster (`scheduler` = its address,
tcp://...), where the workers read the files themselves (they must see the
same paths) and rebuild the model from the URDF text. A second pass over the
chunks evaluates the torque error of the nominal and the identified
parameters, joint by joint; with `robust`, Huber-weighted passes
(estimation.normal_equations) refit before it.
"""
from __future__ import annotations

import socket
import struct
import time
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
from mbs_dynamics.multibody.model import Model
from mbs_dynamics.multibody.parsers.urdf import MAX_MAGNITUDE

CHUNK_SAMPLES = 5000
# Dropped at each end of a filtered recording: this many periods of the cut-off.
EDGE_PERIODS = 2.0
# A joint whose fitted rows (where it moves: estimation.fitted_rows) are fewer than this
# fraction of the samples did not move enough to identify anything of it.
MIN_MOVING_FRACTION = 0.05
# Above this, a warning: the fit leans on the prior for some combinations.
POOR_CONDITION_NUMBER = 1e3
# Huber-reweighted refits of robust identification.
ROBUST_PASSES = 3
# How long (s) a Dask scheduler given by address has to answer, and the largest first message (its
# handshake, some 60 bytes) taken from it: anything else listening there is refused, not waited for.
SCHEDULER_TIMEOUT = 10.0
MAX_HANDSHAKE_BYTES = 2**16


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


@dataclass(frozen=True)
class JointReport:
    """A joint's torque on the data: its RMS, the RMS error of the nominal and the
    identified model, and which of its parameters are identifiable on their own."""

    joint: str
    torque_rms: float
    nominal_rms_error: float
    identified_rms_error: float
    identifiable: tuple[str, ...]


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
                           excluded_joints=options.excluded_joints, stribeck_velocity=options.stribeck_velocity)


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
        _check_magnitudes(recording)
        recording = filtered(recording, options.cutoff, filter_effort=False)
        edge = EDGE_PERIODS / options.cutoff
        recording = recording.window(recording.time[0] + edge, recording.time[-1] - edge)
        state = model_state(model, recording)
    except DataError as error:
        raise IdentificationError(str(error)) from None
    return Samples(recording.source, recording.time, state.q, state.v, state.a, state.effort,
                   list(recording.warnings) + list(state.warnings))


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


def _chunk_equations(samples: Samples, start: int, urdf_xml: str, options: Options, weights, robust_scale=None,
                     parameters=None) -> NormalEquations:
    layout = layout_of(urdf_xml, options)
    rows = slice(start, start + CHUNK_SAMPLES)
    with threadpool_limits(1, "blas"):
        return normal_equations(layout, samples.q[rows], samples.v[rows], samples.a[rows], samples.effort[rows],
                                weights, robust_scale, parameters)


def _chunk_errors(samples: Samples, start: int, urdf_xml: str, options: Options, parameter_sets) -> np.ndarray:
    """Per parameter set and actuated joint, the sum of squared torque errors on
    the chunk's rows that the fit uses (estimation.fitted_rows), then the sum
    of squared torques on them and their number."""
    layout = layout_of(urdf_xml, options)
    rows, joints = slice(start, start + CHUNK_SAMPLES), layout.joint_coordinates()
    Y = layout.regressor(samples.q[rows], samples.v[rows], samples.a[rows])[:, joints]
    tau = samples.effort[rows][:, joints]
    used = fitted_rows(layout, samples.v[rows][:, joints])
    return np.array([np.sum(used * (Y @ p - tau) ** 2, axis=0) for p in parameter_sets]
                    + [np.sum(used * tau**2, axis=0), np.sum(used, axis=0)])


def _total(parts):
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


class _Runner:
    """Computes Dask tasks on the chosen scheduler, with a progress bar."""

    def __init__(self, scheduler: str | None, progress: bool):
        self.client = None
        self.progress = progress
        if scheduler:
            from distributed import Client

            _check_scheduler(scheduler)
            try:
                self.client = Client(scheduler, timeout=f"{SCHEDULER_TIMEOUT}s")
            except (OSError, ValueError) as error:
                raise IdentificationError(f"cannot reach the Dask scheduler at {scheduler}: {error}") from None

    def compute(self, tasks, description: str):
        if self.client is not None:
            futures = self.client.compute(tasks)
            if self.progress:
                from distributed import as_completed
                from tqdm import tqdm

                for _ in tqdm(as_completed(futures), total=len(futures), desc=description, unit="task"):
                    pass
            return self.client.gather(futures)
        if self.progress:
            from tqdm.dask import TqdmCallback

            with TqdmCallback(desc=description, unit="task"):
                return dask.compute(*tasks, scheduler="threads")
        return dask.compute(*tasks, scheduler="threads")

    def persist(self, tasks):
        if self.client is not None:
            return self.client.persist(tasks)
        return [dask.delayed(result) for result in self.compute(tasks, "reading")]

    def close(self):
        if self.client is not None:
            self.client.close()


def _check_scheduler(address: str) -> None:
    """IdentificationError unless a Dask scheduler answers at `address`
    (tcp://host:port, or inproc:// in this process) within SCHEDULER_TIMEOUT:
    its handshake, which it sends first, read with bounded size and time.
    Dask's own client would wait without end for anything else listening
    there, or allocate what its first 8 bytes claim (exabytes)."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.protocol.core import loads
    from distributed.protocol.utils import unpack_frames

    def refused(why: str) -> IdentificationError:
        return IdentificationError(f"cannot use {address} as a Dask scheduler: {why}")

    try:
        scheme, location = parse_address(address)
        if scheme == "inproc":
            return
        if scheme != "tcp":
            raise refused(f"only tcp:// addresses are taken, not {scheme}://")
        host, port = parse_host_port(location)
    except IdentificationError:
        raise
    except ValueError as error:
        raise refused(str(error)) from None
    deadline = time.monotonic() + SCHEDULER_TIMEOUT
    try:
        with socket.create_connection((host, port), timeout=SCHEDULER_TIMEOUT) as connection:
            def receive(count: int) -> bytes:
                received = bytearray()
                while len(received) < count:
                    connection.settimeout(max(deadline - time.monotonic(), 1e-3))
                    chunk = connection.recv(count - len(received))
                    if not chunk:
                        raise ConnectionError("it closed the connection")
                    received += chunk
                return bytes(received)

            (size,) = struct.unpack("<Q", receive(8))
            if size > MAX_HANDSHAKE_BYTES:
                raise refused(f"what answers there is not Dask (its first message would have {size} bytes)")
            handshake = loads(unpack_frames(receive(size)), deserialize=False)
    except IdentificationError:
        raise
    except TimeoutError:
        raise refused(f"no Dask handshake within {SCHEDULER_TIMEOUT:g} s (is it a Dask scheduler's address?)") from None
    except OSError as error:
        raise refused(error.strerror or str(error)) from None
    except Exception as error:  # noqa: BLE001  whatever the bytes make the decoder raise
        raise refused(f"what answers there is not Dask ({type(error).__name__})") from None
    if not (isinstance(handshake, dict) and "pickle-protocol" in handshake):
        raise refused("what answers there is not Dask (no handshake)")


def identify(sources, urdf_xml: str, scheduler: str | None = None, progress: bool = True,
             **options) -> Identification:
    """Identify the parameters of the URDF's robot (ParameterLayout: inertias, and
    per joint options['joint_parameters']) from recordings (module docstring).
    options: the fields of Options."""
    options = Options(**options)
    try:
        layout = layout_of(urdf_xml, options)
    except ValueError as error:
        raise IdentificationError(f"the nominal URDF: {error}") from None
    massless = _check_layout(layout)
    joints = layout.joint_coordinates()
    runner = _Runner(scheduler, progress)
    try:
        read = [dask.delayed(read_samples)(str(source), urdf_xml, options) for source in sources]
        recordings = runner.persist(read)
        sizes = runner.compute([dask.delayed(len)(r) for r in recordings], "sizing")
        statistics = runner.compute([dask.delayed(_statistics)(r, urdf_xml, options) for r in recordings], "statistics")
        samples = sum(sizes)
        torque_rms = np.sqrt(sum(s[0] for s in statistics) / max(samples, 1))
        moving = sum(s[1] for s in statistics)
        warnings = massless + [w for s in statistics for w in s[2]]
        _check_efforts(layout, torque_rms)
        _check_excitation(layout, samples, moving)
        weights = 1.0 / np.maximum(torque_rms, 1e-3 * max(torque_rms.max(), 1e-12)) ** 2

        def chunks(function, *arguments):
            return [dask.delayed(function)(r, start, urdf_xml, options, *arguments)
                    for r, size in zip(recordings, sizes, strict=True) for start in range(0, size, CHUNK_SAMPLES)]

        equations = _total(runner.compute(chunks(_chunk_equations, weights), "normal equations")).mean()
        base = base_parameters(layout)
        condition = condition_number(equations.normal_matrix, base)
        if not np.isfinite(condition):
            raise IdentificationError(f"the base regressor of the recordings is not finite (condition number "
                                      f"{condition}): look at the recorded positions and velocities")
        if not condition < MAX_CONDITION_NUMBER:
            raise IdentificationError(f"too little excitation: the base regressor's condition number is "
                                      f"{condition:.3g} (above {MAX_CONDITION_NUMBER:.0e}); record an excitation "
                                      "trajectory (mbs_dynamics_excitation) that moves every joint")
        if condition > POOR_CONDITION_NUMBER:
            warnings.append(f"the base regressor's condition number is {condition:.3g}: some combinations of "
                            "parameters are barely excited and stay near their URDF values")
        result = _fit(layout, equations, options, torque_rms)
        for _ in range(ROBUST_PASSES if options.robust else 0):
            errors = _total(runner.compute(chunks(_chunk_errors, [result.parameters]), "residuals"))
            scale = np.sqrt(errors[0] / np.maximum(errors[-1], 1))
            equations = _total(runner.compute(chunks(_chunk_equations, weights, scale, result.parameters),
                                              "robust normal equations")).mean()
            result = _fit(layout, equations, options, torque_rms)
        nominal = layout.nominal()
        errors = _total(runner.compute(chunks(_chunk_errors, [nominal, result.parameters]), "evaluation"))
        first = runner.compute([recordings[0]], "plot data")[0]
    finally:
        runner.close()
    rms_errors = np.sqrt(errors[:-1] / np.maximum(errors[-1], 1))
    identifiable = layout_identifiable(layout, base)
    reports = [JointReport(name, float(rms_errors[2, k]), float(rms_errors[0, k]), float(rms_errors[1, k]),
                           identifiable.get(name, ())) for k, name in enumerate(layout.actuated_joints)]
    Y = layout.regressor(first.q, first.v, first.a)[:, joints]
    series = {"time": first.time, "measured": first.effort[:, joints], "nominal": Y @ nominal,
              "identified": Y @ result.parameters}
    return Identification(layout, nominal, result.parameters, result, base, condition, reports, samples,
                          [str(s) for s in sources], warnings + result.warnings, series)


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
    if not layout.actuated_joints and layout.excluded_joints:
        raise IdentificationError(f"every joint of '{layout.model.name}' is left out (--exclude-joints "
                                  f"{','.join(layout.excluded_joints)}): no torque is left to identify from; keep at "
                                  "least one joint whose torques were measured")
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


def _statistics(samples: Samples, urdf_xml: str, options: Options) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Sums of squares of the actuated joints' efforts, their numbers of fitted
    rows, and the recording's warnings."""
    layout = layout_of(urdf_xml, options)
    joints = layout.joint_coordinates()
    return (np.sum(samples.effort[:, joints] ** 2, axis=0), np.sum(fitted_rows(layout, samples.v[:, joints]), axis=0),
            [f"{samples.source}: {w}" for w in samples.warnings])


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
