"""Hostile input to the commands (issue 28): mbs_dynamics_identify,
mbs_dynamics_excitation and mbs_dynamics_play_trajectory. Each case feeds
the input and asserts the one line on stderr, the exit code (2 for the
command line, as argparse; 1 for files and data), that nothing is written
where nothing should be, and, where the input used to hang or eat memory
(a FIFO, /dev/zero, a server that is not Dask), that the command ended
within a generous bound and, run in its own process, stayed small."""
from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from mbs_dynamics.command_line import EXIT_BAD_DATA
from mbs_dynamics.identification import cli, data
from mbs_dynamics.identification import excitation_cli
from mbs_dynamics.identification.parameters import ParameterLayout
from oracles import robot_path
from ros_processes import executable

import mbs_dynamics as mbs

IDENTIFY, EXCITATION, PLAY = "mbs_dynamics_identify", "mbs_dynamics_excitation", "mbs_dynamics_play_trajectory"
# The longest a refused command may take (s), on a busy machine: a hang is what this catches.
BOUND = 60.0
# The most memory (RSS) a refusing command's process may use: importing it takes about 200 MB; reading
# /dev/zero as a URDF took 4.9 GB in seconds.
MAX_RSS_BYTES = 1 << 30
# Runs `command` (the arguments after the file name) and writes its peak RSS (bytes) to that file.
MEASURED = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); "
            "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)); "
            "sys.exit(code)")


# --- helpers and data ----------------------------------------------------------

def one_line(text: str, prog: str) -> str:
    """The single line a refusal printed (after the prog's prefix)."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), text
    assert "Traceback" not in text
    return lines[0]


def refused(capsys, prog: str, main, argv) -> tuple[int, str]:
    """main(argv) in this process: its exit code (argparse's SystemExit too) and its one line."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, one_line(captured.err, prog)


def measured(start_process, tmp_path: Path, command: list[str]) -> tuple[int, str, int]:
    """The console script run as a user runs it, in its own process: exit
    code, its one line of output, and its peak RSS (bytes)."""
    rss_file = tmp_path / f"rss_{time.monotonic_ns()}"
    process = start_process([sys.executable, "-c", MEASURED, str(rss_file), executable(command[0]), *command[1:]])
    code = process.wait_exit(BOUND)
    return code, one_line(process.output, command[0]), int(rss_file.read_text())


def ur5_recording(duration: float = 20.0, rate: float = 200.0) -> data.Recording:
    """The UR5 along sums of sines, its efforts those of its URDF with friction, damping and armature added."""
    model = mbs.Model.from_urdf_file(robot_path("ur5"))
    layout = ParameterLayout(model)
    t = np.arange(0.0, duration, 1.0 / rate)[:, None]
    rng = np.random.default_rng(0)
    frequency, amplitude, phase = (rng.uniform(low, high, (3, model.nv)) for low, high in ((0.1, 0.6), (0.3, 0.8),
                                                                                          (0.0, 6.0)))
    w = 2 * np.pi * frequency
    q = sum(amplitude[k] * np.sin(w[k] * t + phase[k]) for k in range(3))
    v = sum(amplitude[k] * w[k] * np.cos(w[k] * t + phase[k]) for k in range(3))
    a = sum(-amplitude[k] * w[k] ** 2 * np.sin(w[k] * t + phase[k]) for k in range(3))
    p = layout.nominal()
    for name, value in (("friction", 0.5), ("damping", 0.3), ("armature", 0.1)):
        p[layout.joint_columns(name)] = value
    return data.Recording(tuple(model.joint_names), t[:, 0], position=q, velocity=v,
                          effort=layout.regressor(q, v, a) @ p, source="ur5 sines")


@pytest.fixture(scope="module")
def ur5(tmp_path_factory):
    """A directory with the UR5's URDF (ur5.urdf), a usable recording of it
    (good.csv) and the recording itself."""
    directory = tmp_path_factory.mktemp("hostile")
    (directory / "ur5.urdf").write_text(Path(robot_path("ur5")).read_text())
    recording = ur5_recording()
    data.write_csv(directory / "good.csv", recording)
    return directory, recording


def identify_arguments(directory: Path, recording, output, *more) -> list[str]:
    return [str(recording), "--urdf", str(directory / "ur5.urdf"), "--output", str(output), "--quiet", *more]


# --- mbs_dynamics_identify: files that would block or never end ----------------

def special_inputs(tmp_path: Path, ur5_directory: Path) -> dict[str, list[str]]:
    """Hostile files, each as the arguments of a command that reads it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "fifo.csv").symlink_to(fifo)
    (tmp_path / "zero.csv").symlink_to("/dev/zero")
    (tmp_path / "fifo.mcap").symlink_to(fifo)
    for name, target in (("metadata_zero", "/dev/zero"), ("metadata_fifo", fifo)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metadata.yaml").symlink_to(target)
    bag = data.write_bag(tmp_path / "bag_with_fifo", ur5_recording(duration=1.0))
    storage = next(bag.glob("*.mcap"))
    storage.unlink()
    storage.symlink_to(fifo)
    urdf, good = str(ur5_directory / "ur5.urdf"), str(ur5_directory / "good.csv")
    output = ["--output", str(tmp_path / "out.urdf"), "--quiet"]
    return {
        "urdf_fifo": [IDENTIFY, good, "--urdf", str(fifo), *output],
        "urdf_zero": [IDENTIFY, good, "--urdf", "/dev/zero", *output],
        "csv_fifo": [IDENTIFY, str(tmp_path / "fifo.csv"), "--urdf", urdf, *output],
        "csv_zero": [IDENTIFY, str(tmp_path / "zero.csv"), "--urdf", urdf, *output],
        "mcap_fifo": [IDENTIFY, str(tmp_path / "fifo.mcap"), "--urdf", urdf, *output],
        "bag_zero": [IDENTIFY, "/dev/zero", "--urdf", urdf, *output],
        "metadata_zero": [IDENTIFY, str(tmp_path / "metadata_zero"), "--urdf", urdf, *output],
        "metadata_fifo": [IDENTIFY, str(tmp_path / "metadata_fifo"), "--urdf", urdf, *output],
        "storage_fifo": [IDENTIFY, str(bag), "--urdf", urdf, *output],
        "excitation_urdf_fifo": [EXCITATION, "--urdf", str(fifo), "--output", str(tmp_path / "e.csv")],
        "excitation_urdf_zero": [EXCITATION, "--urdf", "/dev/zero", "--output", str(tmp_path / "e.csv")],
        "player_fifo": [PLAY, str(tmp_path / "fifo.csv")],
        "player_zero": [PLAY, str(tmp_path / "zero.csv")],
    }


@pytest.mark.parametrize("case, says", [
    ("urdf_fifo", "cannot read URDF file {tmp}/fifo: not a regular file"),
    ("urdf_zero", "cannot read URDF file /dev/zero: not a regular file"),
    ("csv_fifo", "cannot read CSV file {tmp}/fifo.csv: not a regular file"),
    ("csv_zero", "cannot read CSV file {tmp}/zero.csv: not a regular file"),
    ("mcap_fifo", "{tmp}/fifo.mcap is not a readable ROS 2 bag (cannot read bag file {tmp}/fifo.mcap: not a regular"),
    ("bag_zero", "/dev/zero is not a readable ROS 2 bag (cannot read bag file /dev/zero: not a regular file)"),
    ("metadata_zero", "(cannot read bag metadata {tmp}/metadata_zero/metadata.yaml: not a regular file)"),
    ("metadata_fifo", "(cannot read bag metadata {tmp}/metadata_fifo/metadata.yaml: not a regular file)"),
    ("storage_fifo", "{tmp}/bag_with_fifo is not a readable ROS 2 bag (cannot read bag file {tmp}/bag_with_fifo/"),
    ("excitation_urdf_fifo", "cannot read URDF file {tmp}/fifo: not a regular file"),
    ("excitation_urdf_zero", "cannot read URDF file /dev/zero: not a regular file"),
    ("player_fifo", "cannot read CSV file {tmp}/fifo.csv: not a regular file"),
    ("player_zero", "cannot read CSV file {tmp}/zero.csv: not a regular file"),
])
def test_a_fifo_or_dev_zero_is_refused_at_once(start_process, tmp_path, ur5, case, says):
    """A FIFO blocked the commands for ever; /dev/zero took gigabytes in
    seconds. Now each is refused in one line, exit code 1, small and soon."""
    command = special_inputs(tmp_path, ur5[0])[case]
    code, line, rss = measured(start_process, tmp_path, command)
    assert code == EXIT_BAD_DATA and says.format(tmp=tmp_path) in line, line
    assert rss < MAX_RSS_BYTES, rss
    assert not (tmp_path / "out.urdf").exists() and not (tmp_path / "e.csv").exists()


# --- mbs_dynamics_identify: outputs checked before the fit, writes that fail ----

def test_outputs_are_checked_before_anything_is_read(ur5, tmp_path, capsys):
    """An --output or --report in a missing directory is refused before the
    recordings are read (here one that does not exist is never looked at)."""
    directory, _ = ur5
    missing = tmp_path / "missing.csv"
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(directory, missing, tmp_path / "no" / "x.urdf"))
    assert code == EXIT_BAD_DATA and f"cannot write identified URDF {tmp_path}/no/x.urdf: no directory" in line
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(
        directory, missing, tmp_path / "x.urdf", "--report", str(tmp_path / "no" / "r.svg")))
    assert code == EXIT_BAD_DATA and f"cannot write report {tmp_path}/no/r.svg: no directory" in line
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(directory, missing, tmp_path))
    assert code == EXIT_BAD_DATA and "it is a directory" in line
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(
        directory, missing, tmp_path / "x.urdf", "--report", str(tmp_path / "x.urdf")))
    assert code == EXIT_BAD_DATA and "--output and --report name the same file" in line
    assert not list(tmp_path.iterdir())


def test_a_full_disk_is_said_in_one_line(ur5, tmp_path, capsys):
    """/dev/full as --output, then as --report after the URDF was written
    (from a recording whose name holds '--', which an XML comment may not)."""
    directory, recording = ur5
    dashes = data.write_csv(tmp_path / "run--1.csv", recording)
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(directory, dashes, "/dev/full"))
    assert code == EXIT_BAD_DATA and line.endswith("cannot write identified URDF /dev/full: No space left on device")
    output = tmp_path / "x.urdf"
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(directory, dashes, output, "--report",
                                                                          "/dev/full"))
    assert code == EXIT_BAD_DATA
    assert line.endswith(f"cannot write report /dev/full: No space left on device (the identified URDF {output} was "
                         "written)")
    identified = mbs.Model.from_urdf_file(output)
    assert identified.nv == 6 and "run- -1.csv" in output.read_text()


# --- mbs_dynamics_identify: data that cannot identify anything -----------------

def test_a_urdf_whose_masses_are_all_zero_is_refused(ur5, tmp_path, capsys):
    """It used to exit 0 and write masses of zero, gravity fitted as damping."""
    directory, _ = ur5
    text = (directory / "ur5.urdf").read_text()
    massless = tmp_path / "massless.urdf"
    massless.write_text(re.sub(r'<mass value="[^"]*"', '<mass value="0"', text))
    output = tmp_path / "x.urdf"
    code, line = refused(capsys, IDENTIFY, cli.main, [str(directory / "good.csv"), "--urdf", str(massless),
                                                      "--output", str(output), "--quiet"])
    assert code == EXIT_BAD_DATA
    assert "every link of the nominal URDF 'ur5' has zero mass" in line and "approximate masses" in line
    assert not output.exists()


@pytest.mark.parametrize("change, says", [
    (lambda effort: effort * 1e300 / np.abs(effort).max(), "e+300 (t = "),
    (lambda effort: effort * 0.0, "the measured efforts of every joint are zero throughout the recordings"),
    (lambda effort: effort * [1, 1, 0, 1, 1, 1], "the measured efforts of elbow_joint are zero throughout"),
])
def test_efforts_that_cannot_be_torques_are_named(ur5, tmp_path, capsys, change, says):
    """Efforts of 1e300 gave 'condition number nan', all-zero efforts
    'Residuals are not finite in the initial point'."""
    directory, recording = ur5
    bad = data.write_csv(tmp_path / "bad.csv", recording.replace(effort=change(recording.effort)))
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(directory, bad, tmp_path / "x.urdf"))
    assert code == EXIT_BAD_DATA and says in line, line
    assert not (tmp_path / "x.urdf").exists()


def test_excluding_every_joint_is_refused(ur5, tmp_path, capsys):
    """It said 'zero-size array to reduction operation maximum'."""
    directory, recording = ur5
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(
        directory, directory / "good.csv", tmp_path / "x.urdf", "--exclude-joints", ",".join(recording.joint_names)))
    assert code == EXIT_BAD_DATA and "every joint of 'ur5' is left out (--exclude-joints shoulder_pan_joint," in line


def test_the_inertias_alone_are_identified(ur5, tmp_path, capsys):
    """--joint-parameters with none (it said 'need at least one array to concatenate')."""
    directory, _ = ur5
    output = tmp_path / "x.urdf"
    assert cli.main(identify_arguments(directory, directory / "good.csv", output, "--joint-parameters", ",")) == 0
    assert "physically consistent bodies: 6 of 6" in capsys.readouterr().out
    assert mbs.Model.from_urdf_file(output).nv == 6


@pytest.mark.parametrize("arguments, says", [
    (["--prior-weight", "-1"], "argument --prior-weight: '-1' is not a finite number >= 0"),
    (["--prior-weight", "inf"], "argument --prior-weight: 'inf' is not a finite number >= 0"),
    (["--cutoff", "0"], "argument --cutoff: '0' is not a finite number > 0"),
    (["--cutoff", "nan"], "argument --cutoff: 'nan' is not a finite number > 0"),
    (["--joint-parameters", "friction,mass"], "argument --joint-parameters: mass: joint parameters are among"),
])
def test_bad_options_are_refused_by_the_parser(ur5, tmp_path, capsys, arguments, says):
    """--prior-weight -1 said 'Residuals are not finite in the initial point'."""
    directory, _ = ur5
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(directory, directory / "good.csv",
                                                                        tmp_path / "x.urdf", *arguments))
    assert code == 2 and says in line, line


@pytest.mark.parametrize("text, says", [
    ("", "no header row"),
    ("time,position/a\n", "a header but no data rows"),
    ("time,position/shoulder_pan_joint\n0,1\n0.1,nan\n", "line 3, column 2: 'nan' is not a finite number"),
    ("\xff", "is not UTF-8 text"),
])
def test_malformed_csv_recordings_are_refused(ur5, tmp_path, capsys, text, says):
    directory, _ = ur5
    path = tmp_path / "bad.csv"
    path.write_bytes(text.encode("latin-1"))
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(directory, path, tmp_path / "x.urdf"))
    assert code == EXIT_BAD_DATA and says in line, line


def test_a_recording_with_long_gaps_is_refused_not_resampled_without_end(ur5, tmp_path, capsys):
    """Intervals of 5 ms and one of 10^6 s: a uniform grid at 5 ms would take 2e8 samples."""
    directory, recording = ur5
    time_ = recording.time + np.where(np.arange(len(recording)) >= len(recording) // 2, 1e6, 0.0)
    gap = data.write_csv(tmp_path / "gap.csv", recording.replace(time=time_))
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(directory, gap, tmp_path / "x.urdf"))
    assert code == EXIT_BAD_DATA and "the recording has long gaps" in line, line


def test_a_directory_that_is_not_a_bag_is_refused(ur5, tmp_path, capsys):
    directory, _ = ur5
    (tmp_path / "not_a_bag").mkdir()
    (tmp_path / "not_a_bag" / "notes.txt").write_text("hello\n")
    code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(directory, tmp_path / "not_a_bag",
                                                                        tmp_path / "x.urdf"))
    assert code == EXIT_BAD_DATA
    assert f"is not a readable ROS 2 bag (cannot read bag metadata {tmp_path}/not_a_bag/metadata.yaml: No such" in line


def test_a_bag_of_more_messages_than_are_read_is_refused(tmp_path, monkeypatch):
    """The cap on messages read (bags.MAX_BAG_MESSAGES), here lowered to 10."""
    from mbs_dynamics import bags

    bag = data.write_bag(tmp_path / "bag", ur5_recording(duration=0.5))
    monkeypatch.setattr(bags, "MAX_BAG_MESSAGES", 10)
    with pytest.raises(data.DataError, match=r"/joint_states hold 100 messages, more than the 10 messages"):
        data.read_bag(bag, progress=False)


# --- mbs_dynamics_identify: a scheduler that is not Dask --------------------------

class Listener:
    """A TCP server on the loopback that answers every connection with
    `greeting` (nothing: it keeps silent) and holds it open."""

    def __init__(self, greeting: bytes):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.server.getsockname()[1]}"
        self.connections = []
        self.greeting = greeting
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections.append(connection)
            connection.sendall(self.greeting)

    def close(self):
        self.server.close()
        for connection in self.connections:
            connection.close()


@pytest.mark.parametrize("greeting, says", [
    (b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", "what answers there is not Dask (its first message would have "),
    (b"", "no Dask handshake within 10 s (is it a Dask scheduler's address?)"),
])
def test_a_scheduler_that_is_not_dask_is_refused(ur5, tmp_path, capsys, greeting, says):
    """An SSH server's banner made Dask's client allocate 3.07 EiB; a silent
    server kept it waiting for ever."""
    directory, _ = ur5
    listener = Listener(greeting)
    try:
        started = time.monotonic()
        code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(
            directory, directory / "good.csv", tmp_path / "x.urdf", "--scheduler", listener.address))
        assert time.monotonic() - started < BOUND
    finally:
        listener.close()
    assert code == EXIT_BAD_DATA and f"cannot use {listener.address} as a Dask scheduler: {says}" in line, line


def test_a_scheduler_address_of_another_kind_is_refused(ur5, tmp_path, capsys):
    directory, _ = ur5
    for address, says in (("tls://127.0.0.1:8786", "only tcp:// addresses are taken, not tls://"),
                          ("somewhere", "missing port number")):
        code, line = refused(capsys, IDENTIFY, cli.main, identify_arguments(
            directory, directory / "good.csv", tmp_path / "x.urdf", "--scheduler", address))
        assert code == EXIT_BAD_DATA and says in line, line


# --- mbs_dynamics_excitation --------------------------------------------------------

def excitation_arguments(tmp_path: Path, *more) -> list[str]:
    return ["--urdf", robot_path("ur5"), "--output", str(tmp_path / "e.csv"), "--joints", "shoulder_lift_joint",
            "elbow_joint", "--harmonics", "2", "--iterations", "5", *more]


@pytest.mark.parametrize("arguments, says", [
    (["--iterations", "-1"], "argument --iterations: '-1' is not an integer >= 1"),
    (["--harmonics", "100000"], "argument --harmonics: '100000' is not an integer >= 2 and <= 50"),
    (["--harmonics", "1"], "argument --harmonics: '1' is not an integer >= 2 and <= 50"),
    (["--period", "0"], "argument --period: '0' is not a finite number > 0"),
    (["--period", "1e-9"], "--period 1e-09 s with 2 harmonics puts the highest at 2e+09 Hz, which rows at --rate 500"),
    (["--period", "1e12"], "5 periods of 1e+12 s at 500 Hz make 2.5e+15 rows of 2 joints"),
    (["--rate", "1e12"], "5 periods of 10 s at 1e+12 Hz make 5e+13 rows of 2 joints"),
    (["--periods", "1000000000"], "1000000000 periods of 10 s at 500 Hz make 5e+12 rows"),
    (["--rate", "inf"], "argument --rate: 'inf' is not a finite number > 0"),
    (["--seed", "-1"], "argument --seed: '-1' is not an integer >= 0"),
    (["--position-margin", "0.5"], "argument --position-margin: '0.5' is not a finite number >= 0 and < 0.5"),
    (["--acceleration-limit", "elbow_joint=-2"], "--acceleration-limit: elbow_joint's limit must be a positive"),
])
def test_excitation_options_out_of_bounds_are_refused_by_the_parser(tmp_path, capsys, arguments, says):
    """--iterations -1 was taken; absurd --period, --harmonics or --rate
    raised MemoryError (after the optimisation, for the CSV's rows)."""
    code, line = refused(capsys, EXCITATION, excitation_cli.main, excitation_arguments(tmp_path, *arguments))
    assert code == 2 and says in line, line
    assert not list(tmp_path.iterdir())


def test_a_failed_optimisation_exits_non_zero_with_its_reason(tmp_path, capsys):
    """A period of 0.01 s leaves the joints no room within their limits:
    SLSQP fails (it exited 0 and wrote the failure)."""
    code, line = refused(capsys, EXCITATION, excitation_cli.main, excitation_arguments(
        tmp_path, "--period", "0.01", "--rate", "1000"))
    assert code == EXIT_BAD_DATA
    assert "the optimisation failed (SLSQP: Inequality constraints incompatible" in line, line
    assert not list(tmp_path.iterdir())


def test_an_excitation_that_identification_would_refuse_is_not_written(tmp_path, capsys, monkeypatch):
    """Its condition number at or above what identification accepts (here lowered to 1)."""
    monkeypatch.setattr(excitation_cli, "MAX_CONDITION_NUMBER", 1.0)
    code, line = refused(capsys, EXCITATION, excitation_cli.main, excitation_arguments(tmp_path, "--rate", "20"))
    assert code == EXIT_BAD_DATA and "not below the 1e+00 identification accepts" in line, line
    assert not list(tmp_path.iterdir())


def test_excitation_outputs_are_checked_before_the_optimisation_and_a_full_disk_said(tmp_path, capsys):
    code, line = refused(capsys, EXCITATION, excitation_cli.main, [
        "--urdf", robot_path("ur5"), "--output", str(tmp_path / "no" / "e.csv")])
    assert code == EXIT_BAD_DATA and f"cannot write trajectory file {tmp_path}/no/e.csv: no directory" in line
    code, line = refused(capsys, EXCITATION, excitation_cli.main, excitation_arguments(
        tmp_path, "--rate", "20", "--output", "/dev/full"))
    assert code == EXIT_BAD_DATA and "/dev/full" in line  # (as root: the CSV file; else /dev is not writable)
    assert line.endswith("cannot write CSV file /dev/full: No space left on device") or "is not writable" in line


# --- mbs_dynamics_play_trajectory -------------------------------------------------------

@pytest.mark.parametrize("content, arguments, code, says", [
    ("time,position/a\n0.0,1.0\n0.1,2.0\n", ["--rate-scale", "1e300"], 2,
     "argument --rate-scale: '1e300' is not a finite number >= 0.001 and <= 1000"),
    ("time,position/a\n0.0,1.0\n0.1,2.0\n", ["--rate-scale", "1e-300"], 2, "argument --rate-scale: '1e-300'"),
    ("time,position/a\n0.0,1.0\n0.1,2.0\n", ["--start-delay", "1e300"], 2, "argument --start-delay: '1e300'"),
    ("time,position/a\n0.0,1.0\n0.1,2.0\n", ["--topic", "bad topic"], 2,
     "argument --topic: topic name 'bad topic' is invalid: topic name must not contain characters"),
    ("time,position/a\n0.0,1.0\n0.1,2.0\n", ["--topic", "{nope}/x"], 2,
     "argument --topic: topic name '{nope}/x' is invalid: unknown substitution: {nope}"),
    ("time,position/a\n0.0,1.0\n1e-12,2.0\n", ["--rate-scale", "1000"], EXIT_BAD_DATA,
     "at rate scale 1000, samples 0 and 1 (t = 0 and 1e-12 s) fall on the same nanosecond"),
    ("time,position/a\n0.0,1.0\n1e300,2.0\n", [], EXIT_BAD_DATA, "longer than the 1e+09 s a trajectory may last"),
    ("time,position/a\n", [], EXIT_BAD_DATA, "a header but no data rows"),
    ("time,position/a\n0.0,1.0\n0.1,2.0\n", ["--ros-args", "-r", "reference:=bad/"], 2,
     "--ros-args: failed to initialize rcl: Couldn't parse remap rule: '-r reference:=bad/'"),
])
def test_the_player_refuses_what_it_cannot_play(start_process, tmp_path, content, arguments, code, says):
    """--rate-scale 1e300 and an invalid --topic gave tracebacks."""
    path = tmp_path / "trajectory.csv"
    path.write_text(content)
    process = start_process([executable(PLAY), str(path), "--wait-for-subscribers", "0", *arguments])
    assert process.wait_exit(BOUND) == code
    rcl = "[rcl]: Failed to parse global arguments"  # rcl's own log line when it refuses --ros-args
    line = one_line("\n".join(line for line in process.lines if not line.endswith(rcl)), PLAY)
    assert says in line, line
