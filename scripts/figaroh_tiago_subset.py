#!/usr/bin/env python3
"""Writes mbs_dynamics/test/data/figaroh_tiago/{training,validation}.csv from
FIGAROH's TIAGo log (SOURCE.md beside them says where it comes from and its
licence):

    git clone https://github.com/thanhndv212/figaroh-plus
    git -C figaroh-plus checkout c3b5172849b744984b7181fd9d517c83fb4242e1
    .venv/bin/python scripts/figaroh_tiago_subset.py figaroh-plus

The log is three CSV files of one run (time, then the torso and the seven arm
joints): positions (m, rad), velocities (m/s, rad/s) and efforts, which for
the arm are motor currents (A). Each arm joint's current becomes its torque
(N m) times the reduction ratio and the motor's torque constant that
FIGAROH's TIAGo example applies (GAINS); the torso's value is written as
recorded (FIGAROH adds the weight on the lift to it: it is not the force on
the joint). The robot rests before 7 s and after 68.5 s: the moving part is cut
at SPLIT into a training and a validation recording, each keeping the log's
own time stamps (about 100 Hz, intervals of 8 to 12 ms). Values are rounded
to 1e-10 rad (rad/s) and 1e-6 N m, far below the sensors' resolution, to keep
the files small.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import sys
from pathlib import Path

import numpy as np

from mbs_dynamics.identification.csv_data import write_csv
from mbs_dynamics.identification.recording import Recording

COMMIT = "c3b5172849b744984b7181fd9d517c83fb4242e1"
LOG = "examples/tiago/data/identification/dynamic"
# file: (quantity, sha256 of the file at COMMIT)
FILES = {
    "tiago_position.csv": ("position", "4297a60d434ee89f1f424ad0da8ec65bc00072ac57eb06b94966c0819fc2786d"),
    "tiago_velocity.csv": ("velocity", "269f681ca7a9511ac1698bf027ddf601e3fdb49d7d397af4810ec839f136cd69"),
    "tiago_effort.csv": ("effort", "12c635987705efade603426a600f5b315add7f580c720a4b84609dadb9d0a2e9"),
}
JOINTS = ("torso_lift_joint",) + tuple(f"arm_{k}_joint" for k in range(1, 8))
# N m per A: reduction ratio times motor torque constant (FIGAROH examples/tiago/identification.py); the torso 1
GAINS = np.array([1.0, 100 * 0.136, 100 * 0.136, 100 * -0.087, 100 * -0.087,
                  336 * -0.0613, 336 * -0.0613, 336 * -0.0613])
START, SPLIT, END = 8.0, 40.0, 69.0  # s of the log: training [START, SPLIT), validation [SPLIT, END]
OUT = Path(__file__).resolve().parent.parent / "mbs_dynamics" / "test" / "data" / "figaroh_tiago"


def read_log(checkout: Path) -> tuple[np.ndarray, dict]:
    """The log's time and {quantity: (N, 8) values in JOINTS' order}, each file checked against its sha256."""
    time, values = None, {}
    for name, (quantity, digest) in FILES.items():
        path = checkout / LOG / name
        content = path.read_bytes()
        if hashlib.sha256(content).hexdigest() != digest:
            sys.exit(f"{path} is not the file of figaroh-plus {COMMIT} (sha256 differs)")
        rows = list(csv.reader(content.decode().splitlines()))
        header = [cell.strip().removeprefix("- ").removesuffix(f"_{quantity}") for cell in rows[0]]
        table = np.array(rows[1:], dtype=float)
        if header[0] != "t" or sorted(header[1:]) != sorted(JOINTS):
            sys.exit(f"{path}: unexpected columns {rows[0]}")
        if time is None:
            time = table[:, 0]
        elif not np.array_equal(time, table[:, 0]):
            sys.exit(f"{path}: its time stamps are not those of the position file")
        values[quantity] = table[:, [header.index(joint) for joint in JOINTS]]
    return time, values


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("checkout", type=Path, help=f"a checkout of figaroh-plus at {COMMIT}")
    checkout = arguments.parse_args().checkout
    time, values = read_log(checkout)
    torque = values["effort"] * GAINS
    OUT.mkdir(parents=True, exist_ok=True)
    for name, window in (("training", (time >= START) & (time < SPLIT)), ("validation", (time >= SPLIT) & (time <= END))):
        recording = Recording(
            JOINTS, np.round(time[window], 6),
            position=np.round(values["position"][window], 10), velocity=np.round(values["velocity"][window], 10),
            effort=np.round(torque[window], 6) + 0.0,  # + 0.0: no -0.0
            source=f"FIGAROH's TIAGo log (figaroh-plus {COMMIT[:7]}, {LOG}), {name} part; see SOURCE.md")
        path = write_csv(OUT / f"{name}.csv", recording)
        print(f"wrote {path}: {len(recording)} samples, {recording.time[0]:g}-{recording.time[-1]:g} s, "
              f"{path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
