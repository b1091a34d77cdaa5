"""What identification tells its user: a table per joint, a summary, and an
SVG of measured against predicted torques."""
from __future__ import annotations

from mbs_dynamics.files import write_file
from mbs_dynamics.identification.estimation import physically_consistent
from mbs_dynamics.identification.identify import Identification, Validation
from mbs_dynamics.multibody.model import PRISMATIC
from mbs_dynamics.view import svg_plot
from mbs_dynamics.view.svg_plot import Panel


def percent(error: float, size: float) -> str:
    return f"{100.0 * error / size:.2f} %" if size > 0 else "-"


def joint_table(result: Identification) -> str:
    """Per actuated joint: torque RMS, RMS error of the nominal and the identified
    model on the data (also in % of the RMS), and the parameters identifiable
    on their own; on the samples the fit uses (where the joint moves, when
    Coulomb friction is fitted: estimation.fitted_rows)."""
    header = ("joint", "torque RMS", "nominal error", "identified error", "identifiable on their own")
    rows = [(j.joint, f"{j.torque_rms:.4g}", f"{j.nominal_rms_error:.4g} ({percent(j.nominal_rms_error, j.torque_rms)})",
             f"{j.identified_rms_error:.4g} ({percent(j.identified_rms_error, j.torque_rms)})",
             ", ".join(j.identifiable) or "-") for j in result.joints]
    return "\n".join(table(header, rows))


def table(header, rows) -> list[str]:
    """The lines of a table: the header, a rule, the rows; every column but the last padded to its widest."""
    widths = [max(len(row[k]) for row in [header, *rows]) for k in range(len(header) - 1)]
    lines = ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])
             for row in [header, *rows]]
    return [lines[0], "-" * len(lines[0]), *lines[1:]]


def summary(result: Identification) -> str:
    layout, fit = result.layout, result.fit
    consistent = physically_consistent(layout.body_parameters(result.identified)[fit.identified_bodies])
    lines = [(f"{result.samples} samples from {len(result.sources)} recording(s); {layout.size} parameters, "
             f"{len(result.base.independent)} base parameters; condition number of the base regressor "
             f"{result.condition_number:.4g}"),
             (f"fit: {fit.iterations} evaluations ({fit.message}); torque error over all joints, RMS relative to "
              f"the torques': {percent(result.errors.overall('nominal'), 1.0)} (nominal) -> "
              f"{percent(result.errors.overall('identified'), 1.0)} (identified)"),
             f"physically consistent bodies: {int(consistent.sum())} of {consistent.size}"]
    if "offset" in layout.joint_parameters:
        offsets = layout.joint_values(result.identified, "offset")
        lines.append("friction offsets (<mbs:friction offset>): "
                     + ", ".join(f"{joint} {value:.3g}" for joint, value in offsets.items()))
    if "stribeck" in layout.joint_parameters:
        excess = layout.joint_values(result.identified, "stribeck")
        lines.append("static friction above the Coulomb friction, F_s - F_c (<mbs:friction static>): " + ", ".join(
            f"{joint} {value:.3g} (v_s {v_s:g})" for (joint, value), v_s in zip(
                excess.items(), layout.stribeck_velocities, strict=True)))
    if fit.inconsistent_priors:
        lines.append("nominal bodies not physically consistent (prior moved to the nearest consistent one): "
                     + ", ".join(fit.inconsistent_priors))
    lines += [f"note: {note}" for note in result.warnings]
    return "\n".join(lines)


def validation_table(validation: Validation) -> str:
    """Per actuated joint and over all: the RMS torque error of each parameter
    set on the held-out recordings, relative to the torques' RMS."""
    errors = validation.errors
    names = list(errors.squared_errors)
    header = ("joint", "torque RMS", *(f"{name} error" for name in names))
    rows = [(joint, f"{errors.torque_rms[k]:.4g}", *(percent(errors.relative(name)[k], 1.0) for name in names))
            for k, joint in enumerate(errors.joints)]
    rows.append(("all joints", "", *(percent(errors.overall(name), 1.0) for name in names)))
    title = (f"held-out validation: {validation.samples} samples from {', '.join(validation.sources)} (RMS error "
             "relative to the torques' RMS)")
    return "\n".join([title, *table(header, rows)] + [f"note: {note}" for note in validation.warnings])


def _panels(series: dict, layout, names: dict, prefix: str = "", own_time: bool = False) -> list[Panel]:
    """A panel per actuated joint: the measured torques and those of each
    parameter set (names: {series key: label})."""
    model = layout.model
    kinds = dict(zip(model.body_joint_names, model.joint_type, strict=True))
    return [Panel(prefix + joint, "N" if kinds[joint] == PRISMATIC else "N m",
                  {"measured": series["measured"][:, k]} | {label: series[key][:, k] for key, label in names.items()},
                  series["time"] if own_time else None)
            for k, joint in enumerate(layout.actuated_joints)]


def write_svg(path, result: Identification, validation: Validation | None = None) -> None:
    """Measured, nominal and identified torques of each actuated joint on the
    first recording, and on the first held-out one (validation); FileProblem
    (a ValueError) when it cannot be written."""
    labels = {"nominal": "nominal URDF", "identified": "identified"}
    panels = _panels(result.series, result.layout, labels)
    title = f"identification: {result.layout.model.name}, {result.sources[0]}"
    if validation is not None:
        panels += _panels(validation.series, result.layout, labels, "held out: ", own_time=True)
        title += f"; held out: {validation.sources[0]}"
    write_file(path, svg_plot.document(title, result.series["time"], panels), "report")
