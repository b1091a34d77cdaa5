"""Files from outside, read and written with bounds: every command and node
reads a file it was given through read_file (a regular file, at most a
stated size: a FIFO would block, /dev/zero never end, a directory is no file)
and checks where it will write before long work with check_writable; a write
that fails (a full disk, /dev/full) says so in one line, as FileProblem.

FileProblem is a ValueError whose message names the file and what is wrong,
for the one line a command or node prints.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path


class FileProblem(ValueError):
    """A file that cannot be read or written as asked; the message names it."""


def checked_file(path, what: str, max_bytes: int) -> Path:
    """`path` as a Path, once it is an existing regular file of at most
    `max_bytes` bytes; FileProblem ("<what> <path>: <why>") otherwise. `what`
    names the file's role: "URDF file", "CSV file", "mesh file"."""
    path = Path(path)
    try:
        status = os.stat(path)
    except OSError as error:
        raise FileProblem(f"cannot read {what} {path}: {error.strerror}") from error
    if not stat.S_ISREG(status.st_mode):  # /dev/zero, a FIFO, a directory: would never end or block
        raise FileProblem(f"cannot read {what} {path}: not a regular file")
    if status.st_size > max_bytes:
        mib = f" ({max_bytes / 2**20:.0f} MiB)" if max_bytes >= 2**20 else ""
        raise FileProblem(f"{what} {path} has {status.st_size} bytes, more than the {max_bytes}{mib} it may have")
    return path


def read_file(path, what: str, max_bytes: int, text: bool = True) -> str | bytes:
    """The content of a checked_file: text (UTF-8, a byte order mark dropped)
    or bytes; at most `max_bytes` are read, whatever the file grows to."""
    path = checked_file(path, what, max_bytes)
    try:
        # O_NONBLOCK: should the path have become a FIFO since the check, opening it does not block
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as stream:
            status = os.fstat(stream.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise FileProblem(f"cannot read {what} {path}: not a regular file")
            # the size it has (a read of max_bytes would set that much memory aside), then what it grew by
            content = stream.read(min(status.st_size, max_bytes) + 1)
            if len(content) > status.st_size:
                content += stream.read(max_bytes + 1 - len(content))
    except OSError as error:
        raise FileProblem(f"cannot read {what} {path}: {error.strerror}") from error
    if len(content) > max_bytes:
        raise FileProblem(f"{what} {path} has more than the {max_bytes} bytes it may have")
    if not text:
        return content
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise FileProblem(f"{what} {path} is not UTF-8 text: {error.reason} at byte {error.start}") from error


def check_writable(path, what: str) -> Path:
    """`path` as a Path, once a file can be written there: its directory
    exists and is writable, and it is not a directory (or, if it exists, it
    is writable). Call it before the long work whose result goes there; the
    write itself may still fail (a full disk): see write_file."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise FileProblem(f"cannot write {what} {path}: it is a directory")
    if not directory.is_dir():
        raise FileProblem(f"cannot write {what} {path}: no directory {directory}")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise FileProblem(f"cannot write {what} {path}: permission denied")
    elif not os.access(directory, os.W_OK | os.X_OK):
        raise FileProblem(f"cannot write {what} {path}: directory {directory} is not writable")
    return path


def write_file(path, content: str | bytes, what: str) -> Path:
    """Write `content` to `path` whole (a temporary file beside it, renamed
    over it), or raise FileProblem naming it and why (a full disk, /dev/full,
    no permission); nothing half-written is left under its name. A path that
    is not a regular file (a device such as /dev/full or /dev/null) is written
    directly."""
    path = check_writable(path, what)
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        if path.exists() and not path.is_file():
            with open(path, "wb") as stream:
                stream.write(data)
                stream.flush()
            return path
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(temporary, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
    except OSError as error:
        raise FileProblem(f"cannot write {what} {path}: {error.strerror}") from error
    return path
