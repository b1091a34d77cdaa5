"""Recordings as CSV files (recorded data and trajectory files alike):
read_csv, write_csv.

    # comment lines start with '#'; blank lines are skipped
    # time_origin_ns: 1700000000000000000
    time,position/joint1,position/joint2,velocity/joint1,velocity/joint2
    0.000,0.10,-0.20,0.0,0.0
    0.002,0.11,-0.21,5.0,-5.0

* The header row (the first line that is neither blank nor a comment) starts
  with `time` (s, strictly increasing down the file); then columns
  `<quantity>/<joint>`, quantity one of position, velocity, acceleration,
  effort, in any order. Any subset of the quantities may be given; each one
  given covers the same joints. A joint's name is everything after the first
  '/'; a name with a comma is quoted ("..."), as CSV does.
* A floating base adds the 13 columns base/x, base/y, base/z (position),
  base/qx, base/qy, base/qz, base/qw (orientation), base/vx, base/vy, base/vz
  (linear velocity), base/wx, base/wy, base/wz (angular velocity), all or
  none, and optionally the 6 accelerations base/dvx, base/dvy, base/dvz,
  base/dwx, base/dwy, base/dwz (their time derivatives).
* The optional comment `# time_origin_ns: <integer>` gives the ROS time
  (ns since the epoch) of time 0, which a bag written from the file stamps
  its messages from; 0 when absent.
* Every value is a finite decimal number; write_csv writes the shortest
  form that reads back to the same float64.
* A CSV file is a regular file of at most MAX_CSV_BYTES (256 MiB: some 20
  minutes of 7 joints' positions, velocities and efforts at 500 Hz); longer
  recordings go in bags.

Units and frames are the Recording's (recording.py).
"""
from __future__ import annotations

import csv
import io
import re
from collections import Counter
from pathlib import Path

import numpy as np

from mbs_dynamics.files import FileProblem, read_file, write_file
from mbs_dynamics.identification.recording import BASE_COLUMNS, QUANTITIES, DataError, Recording

TIME_ORIGIN = re.compile(r"#\s*time_origin_ns\s*:\s*(\S+)\s*$")
# The largest CSV file read (module docstring); reading one takes about five times its size in memory.
MAX_CSV_BYTES = 256 * 2**20


def read_csv(path) -> Recording:
    """A recording from a CSV file in the module's format; DataError naming
    the line and column of what is malformed."""
    path = Path(path)
    try:
        text = read_file(path, "CSV file", MAX_CSV_BYTES)  # a spreadsheet's byte order mark is dropped
    except FileProblem as error:
        raise DataError(str(error)) from None
    origin, lines = 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        directive = TIME_ORIGIN.match(stripped)
        if directive:
            origin = _time_origin(path, number, directive.group(1))
        elif stripped and not stripped.startswith("#"):
            lines.append((number, next(csv.reader([line]))))
    if not lines:
        raise DataError(f"{path}: no header row (time, then <quantity>/<joint> columns)")
    (header_line, header), rows = lines[0], lines[1:]
    columns = _csv_columns(path, header_line, [cell.strip() for cell in header])
    if not rows:
        raise DataError(f"{path}: a header but no data rows")
    values = _csv_values(path, rows, len(header))
    time = values[:, 0]
    steps = np.diff(time)
    if np.any(steps <= 0):
        k = int(np.argmax(steps <= 0))
        raise DataError(f"{path}, line {rows[k + 1][0]}: time {float(time[k + 1])!r} s does not come after line "
                        f"{rows[k][0]}'s {float(time[k])!r} s: time must increase strictly")
    names, fields = columns
    arrays = {field: values[:, indices] for field, indices in fields.items()}
    return Recording(names, time, **arrays, time_origin_ns=origin, source=str(path))


def _time_origin(path: Path, number: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise DataError(f"{path}, line {number}: time_origin_ns must be an integer (ns), got '{text}'") from None


def _csv_columns(path: Path, line: int, header: list) -> tuple[tuple, dict]:
    """(joint names, {Recording field: column indices}) of the header row."""
    where = f"{path}, line {line} (the header)"
    if not header or header[0] != "time":
        raise DataError(f"{where}: the first column must be 'time', got '{header[0] if header else ''}'")
    repeated = sorted(name for name, count in Counter(header).items() if count > 1)
    if repeated:
        raise DataError(f"{where}: columns repeat: {repeated}")
    by_quantity: dict[str, dict[str, int]] = {}
    base: dict[str, int] = {}
    base_names = {column: field for field, columns in BASE_COLUMNS.items() for column in columns}
    for index, column in enumerate(header[1:], start=1):
        quantity, _, joint = column.partition("/")
        if quantity == "base" and joint in base_names:
            base[joint] = index
        elif quantity in QUANTITIES and joint:
            by_quantity.setdefault(quantity, {})[joint] = index
        else:
            raise DataError(f"{where}: unknown column '{column}' (column {index + 1}); columns are "
                            f"<quantity>/<joint> with quantity one of {list(QUANTITIES)}, or base/<field> with "
                            f"field one of {list(base_names)}")
    names = tuple(dict.fromkeys(joint for joints in by_quantity.values() for joint in joints))
    fields = {}
    for quantity, joints in by_quantity.items():
        missing = [name for name in names if name not in joints]
        if missing:
            raise DataError(f"{where}: {quantity} lacks the joints {missing} that other quantities have")
        fields[quantity] = [joints[name] for name in names]
    for field, columns in BASE_COLUMNS.items():
        present = [column for column in columns if column in base]
        if present and len(present) < len(columns):
            raise DataError(f"{where}: base columns {['base/' + c for c in columns if c not in base]} missing "
                            f"(a {field.removeprefix('base_').replace('_', ' ')} needs all of {list(columns)})")
        if present:
            fields[field] = [base[column] for column in columns]
    return names, fields


def _csv_values(path: Path, rows: list, width: int) -> np.ndarray:
    """The data rows as a (rows, width) float array: DataError naming the first bad cell."""
    for number, cells in rows:
        if len(cells) != width:
            raise DataError(f"{path}, line {number}: {len(cells)} values for the header's {width} columns")
    try:
        values = np.array([cells for _, cells in rows], dtype=float)
        if np.all(np.isfinite(values)):
            return values
    except ValueError:
        pass
    for number, cells in rows:
        for column, cell in enumerate(cells):
            try:
                finite = np.isfinite(float(cell))
            except ValueError:
                finite = False
            if not finite:
                raise DataError(f"{path}, line {number}, column {column + 1}: '{cell}' is not a finite number")
    return np.array([[float(cell) for cell in cells] for _, cells in rows])  # what only Python's float() reads


def write_csv(path, recording: Recording) -> Path:
    """The recording as a CSV file in the module's format (accelerations
    included when recorded), every value exact; FileProblem (a ValueError)
    when it cannot be written."""
    header, columns = ["time"], [recording.time[:, None]]
    for quantity in QUANTITIES:
        if getattr(recording, quantity) is not None:
            header += [f"{quantity}/{name}" for name in recording.joint_names]
            columns.append(getattr(recording, quantity))
    for field, names in BASE_COLUMNS.items():
        if getattr(recording, field) is not None:
            header += [f"base/{name}" for name in names]
            columns.append(getattr(recording, field))
    text = io.StringIO()
    text.write(f"# {recording.source or 'recording'}: time in s; positions in rad or m, velocities in rad/s "
               "or m/s, accelerations in rad/s^2 or m/s^2, efforts in N m or N\n")
    text.write(f"# time_origin_ns: {recording.time_origin_ns}\n")
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(np.hstack(columns).tolist())  # str(float) is the shortest exact form
    return write_file(path, text.getvalue(), "CSV file")
