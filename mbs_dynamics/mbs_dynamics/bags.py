"""ROS 2 bags without ROS: rosbag2's format version 9, MCAP or sqlite3
storage (STORAGES), read and written with rosbags, message types from its
ROS 2 kilted typestore. What identification (identification/bag_data.py)
and the recorder (ros/bag_recorder.py) share: opening a bag for reading,
bounded; finding a topic; the writer that keeps what it wrote through a
full disk (BagWriter).

Reading is bounded: a bag is a regular .mcap or .db3 file or a directory
whose metadata.yaml (at most MAX_BAG_METADATA_BYTES) and other entries are
regular files (a FIFO would block the reader, /dev/zero never end); at most
MAX_BAG_MESSAGES messages and MAX_BAG_MESSAGE_BYTES bytes of them are read
from the topics asked for. What cannot be read raises BagError (a
ValueError) saying what and where.
"""
from __future__ import annotations

import os
import queue
import shutil
import threading
import time
from collections import defaultdict
from concurrent.futures import Future
from contextlib import contextmanager
from functools import lru_cache
from io import BytesIO
from pathlib import Path

from rosbags.rosbag2 import StoragePlugin, Writer, WriterError
from rosbags.rosbag2.storage_mcap import PendingChunk
from rosbags.typesys import Stores, get_typestore

from mbs_dynamics.files import FileProblem, checked_file

STORAGES = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
# A bag's metadata.yaml: a few kB per storage file and topic.
MAX_BAG_METADATA_BYTES = 16 * 2**20
# Messages read from a bag's topics: over a quarter of an hour at 1 kHz, half an hour at 500 Hz; reading
# them into a recording peaks at some 1.3 GB (1340 bytes a 6-joint JointState, measured) and takes about 45 s.
MAX_BAG_MESSAGES = 1_000_000
# Their serialized bytes: 500 bytes each (a 6-joint JointState takes 363 in an MCAP bag).
MAX_BAG_MESSAGE_BYTES = 500 * MAX_BAG_MESSAGES
# Seconds, and bytes of messages written, between checkpoints of a bag
# written: what was written before the last one survives a failed write
# (BagWriter). The bytes are rosbags' MCAP chunk size.
CHECKPOINT_PERIOD = 1.0
CHECKPOINT_BYTES = 2**20
# Room kept free beside the bag to close it after a failed write (its index,
# metadata and metadata.yaml: a few kB per topic, a quarter of it), and, past
# 3000 chunks of an MCAP, more for each (its index entry takes under 100
# bytes with ten topics).
RESERVE_BYTES = 2**20
RESERVE_PER_CHUNK = 256
RESERVE_NAME = ".mbs_dynamics_record.reserve"
# Serialized bytes that may wait to be written: beyond, put() refuses
# messages (the disk is slower than the topics).
MAX_QUEUED_BYTES = 256 * 2**20


class BagError(ValueError):
    """A bag that cannot be read; the message says what and where."""


def new_typestore():
    """rosbags' typestore of ROS 2 kilted's message types, a new one (to register more types in)."""
    return get_typestore(Stores.ROS2_KILTED)


@lru_cache(maxsize=1)
def typestore():
    """The typestore of ROS 2 kilted's message types, shared (never to register types in)."""
    return new_typestore()


# --- reading ------------------------------------------------------------

@contextmanager
def opened(path: Path):
    """rosbags' AnyReader on the bag at `path` (a bag directory, or its .mcap
    or .db3 file), opened: BagError for what it cannot open."""
    from rosbags.highlevel import AnyReader

    if not path.exists():
        raise BagError(f"{path}: no such file or directory")
    if path.suffix == ".bag":
        raise BagError(f"{path} is a ROS 1 bag: convert it to ROS 2 first (rosbags-convert --src {path})")
    _check_files(path)
    try:
        reader = AnyReader([path], default_typestore=typestore())
        reader.open()
    except Exception as error:  # noqa: BLE001  rosbags and its storage libraries raise many kinds
        hint = (" An MCAP file cut short (a recording that did not end cleanly) can be repaired with "
                "`mcap recover`." if path.suffix == ".mcap" or path.is_dir() and any(path.glob("*.mcap")) else "")
        raise BagError(f"{path} is not a readable ROS 2 bag ({_reason(error)}). A bag is a directory with a "
                       f"metadata.yaml, or one .mcap or .db3 file.{hint}") from None
    try:
        yield reader
    finally:
        reader.close()


def _check_files(path: Path) -> None:
    """BagError unless `path` is a regular file (a bag's storage file) or a
    directory with a metadata.yaml of at most MAX_BAG_METADATA_BYTES whose
    entries are all regular files or directories: rosbags would block on a
    FIFO and read /dev/zero without end."""
    what = "bag file"
    try:
        if not path.is_dir():
            checked_file(path, what, float("inf"))
            return
        checked_file(path / "metadata.yaml", "bag metadata", MAX_BAG_METADATA_BYTES)
        for entry in path.iterdir():
            if not (entry.is_dir() or entry.is_file()):
                checked_file(entry, what, float("inf"))  # says why
    except FileProblem as error:
        raise BagError(f"{path} is not a readable ROS 2 bag ({error}). A bag is a directory with a metadata.yaml, "
                       "or one .mcap or .db3 file.") from None


def _reason(error: Exception) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def find_topic(path: Path, topics: dict, wanted: str, message_type: str, notes: list) -> str:
    """The topic of an opened bag's `topics` (AnyReader.topics) that `wanted`
    names (exactly, with or without the leading '/', else by a unique
    suffix: said in `notes`), checked to hold messages of `message_type`."""
    absolute = "/" + wanted.strip("/")
    if wanted in topics or absolute in topics:
        found = wanted if wanted in topics else absolute
    else:
        candidates = sorted(name for name in topics if name.endswith(absolute))
        listing = "; ".join(f"{name} ({info.msgtype}, {info.msgcount} messages)"
                            for name, info in sorted(topics.items())) or "none"
        if len(candidates) != 1:
            several = f" matches several topics {candidates}; name one" if candidates else ": no such topic"
            raise BagError(f"{path}: '{wanted}'{several}. The bag's topics: {listing}")
        found = candidates[0]
        notes.append(f"topic '{wanted}' taken as '{found}'")
    info = topics[found]
    if info.msgtype != message_type:
        raise BagError(f"{path}: topic {found} has messages of type {info.msgtype}, not {message_type}")
    if not info.msgcount:
        raise BagError(f"{path}: topic {found} has no messages")
    return found


def message_count(reader, path: Path, topics: list) -> int:
    """The messages an opened bag's metadata counts on `topics`; BagError
    beyond MAX_BAG_MESSAGES."""
    count = sum(reader.topics[topic].msgcount for topic in topics)
    if count > MAX_BAG_MESSAGES:
        raise _too_long(path, topics, f"{count} messages")
    return count


def messages(reader, path: Path, topics: list):
    """(connection, receive time ns, serialized message) of each message on
    `topics` of an opened bag, in the bag's order; BagError beyond
    MAX_BAG_MESSAGES or MAX_BAG_MESSAGE_BYTES (the metadata's counts may lie)
    and where the bag is damaged."""
    message_count(reader, path, topics)
    connections = [connection for connection in reader.connections if connection.topic in topics]
    read_bytes = 0
    try:
        for index, (connection, receive_time, data) in enumerate(reader.messages(connections=connections)):
            read_bytes += len(data)
            if index >= MAX_BAG_MESSAGES or read_bytes > MAX_BAG_MESSAGE_BYTES:
                raise _too_long(path, topics, f"more than {index} messages, {read_bytes} bytes")
            yield connection, receive_time, data
    except BagError:
        raise
    except Exception as error:  # noqa: BLE001  the storage's own errors: damaged chunks or pages
        raise BagError(f"{path}: the bag is damaged; reading stopped ({_reason(error)})") from None


def _too_long(path: Path, topics: list, size: str) -> BagError:
    return BagError(f"{path}: {', '.join(topics)} hold {size}, more than the {MAX_BAG_MESSAGES} messages of "
                    f"{MAX_BAG_MESSAGE_BYTES / 2**20:.0f} MiB that are read from a bag; split it (ros2 bag convert, "
                    "rosbags-convert) and give the parts")


# --- writing ------------------------------------------------------------

class BagWriter:
    """A rosbag2 bag (version 9) that a thread of its own creates, writes and
    closes (sqlite3 objects work only in the thread that made them): topics
    are added (add_topic) and messages queued (put) from any thread, and
    written in the order queued; close() writes what is queued, then the
    thread closes the bag (a second Ctrl-C during close() does not lose it).

    Nothing written is lost to a write that fails (a full disk, an I/O error):
    every CHECKPOINT_PERIOD and CHECKPOINT_BYTES the bag is made whole on disk
    up to there (sqlite3: a commit; MCAP: the open chunk written and
    flushed), and a file of RESERVE_BYTES (and more as the MCAP's index
    grows) beside it keeps room to close it. When a write fails, the bag goes
    back to its last checkpoint (MCAP: the file cut there; sqlite3: the open
    transaction rolled back), the reserve is removed, and the bag is closed
    there, readable, its metadata counting what it holds; `error` says what
    failed and nothing more is written. At most MAX_QUEUED_BYTES wait to be
    written: put() refuses a message beyond (a disk slower than the topics),
    or waits for room."""

    def __init__(self, path, storage: str, types=None):
        """Create the bag at `path` (a directory that must not exist), storage
        one of STORAGES, its message types from the typestore `types` (default:
        a new_typestore(), which the caller may register types in);
        FileProblem naming it and why if it cannot (nothing is left on disk
        then)."""
        self.path = Path(path)
        self.storage = storage
        self.typestore = new_typestore() if types is None else types
        self.error: str | None = None  # why writing stopped, once it did
        self.closing = False
        self._queue: queue.SimpleQueue = queue.SimpleQueue()  # (connection, timestamp, data) or (future, call)
        self._queued_bytes = 0
        self._room = threading.Condition()  # guards _queued_bytes; notified as messages are taken
        self._reserve = self.path / RESERVE_NAME
        self._reserved = 0
        self._saved: dict = {}  # the state of the last checkpoint
        started = Future()
        self._thread = threading.Thread(target=self._write, args=(started,), name="bag writer")
        self._thread.start()
        started.result()

    def add_topic(self, topic: str, msgtype: str, offered_qos=()):
        """The bag's connection for `topic` of messages of `msgtype`
        (pkg/msg/Type, known to the typestore), offered by publishers with the
        rosbags Qos profiles `offered_qos` (WriterError once writing has
        failed)."""
        added = Future()
        self._queue.put((added, lambda: self._writer.add_connection(
            topic, msgtype, typestore=self.typestore, offered_qos_profiles=list(offered_qos))))
        return added.result()

    def put(self, connection, timestamp: int, data: bytes, wait: bool = False) -> bool:
        """Queue a serialized message received at `timestamp` (ns); False
        (not queued) once writing has failed or when MAX_QUEUED_BYTES wait
        to be written, unless `wait`: then it waits until they are fewer."""
        if self.error is not None:
            return False
        with self._room:
            while self._queued_bytes + len(data) > MAX_QUEUED_BYTES:
                if not wait or self.error is not None:
                    return False
                if not self._queued_bytes:
                    break  # alone beyond the bound: taken once nothing else waits
                self._room.wait(CHECKPOINT_PERIOD)
            self._queued_bytes += len(data)
        self._queue.put((connection, timestamp, data))
        return True

    def count(self, connection) -> int:
        """The messages of `connection` in the bag (after close(): those it holds)."""
        return self._writer.counts[connection.id]

    def close(self) -> None:
        """Write what is queued and close the bag."""
        self.closing = True
        self._queue.put(None)
        self._thread.join()
        self.closing = False

    # --- the writer's thread ---------------------------------------------------------

    def _write(self, started: Future) -> None:
        try:
            self._writer = Writer(self.path, version=9, storage_plugin=STORAGES[self.storage])
            self._writer.open()
            self._checkpoint()
        except Exception as error:  # noqa: BLE001  said by the caller, in one line
            if not (isinstance(error, WriterError) and "exists already" in str(error)):  # not ours to remove
                self._remove_bag()
            started.set_exception(FileProblem(f"cannot create the bag {self.path}: {reason(error)}"))
            return
        started.set_result(None)
        next_checkpoint, unsaved = time.monotonic() + CHECKPOINT_PERIOD, 0  # unsaved: bytes written since
        while True:
            try:
                item = self._queue.get(timeout=max(next_checkpoint - time.monotonic(), 0.0))
            except queue.Empty:
                item = ()
            if item is None:
                break
            if len(item) == 3:
                connection, timestamp, data = item
                with self._room:
                    self._queued_bytes -= len(data)
                    self._room.notify()
                if self.error is None:
                    self._guarded(lambda: self._writer.write(connection, timestamp, data))  # noqa: B023
                    unsaved += len(data)
            elif len(item) == 2:
                future, call = item
                if self.error is not None:
                    future.set_exception(WriterError(self.error))
                    continue
                try:
                    future.set_result(call())
                except Exception as error:  # noqa: BLE001  handed to the caller
                    future.set_exception(error)
                self._guarded(self._checkpoint)  # a topic is in the bag before its messages
            if time.monotonic() >= next_checkpoint or unsaved >= CHECKPOINT_BYTES:
                if self.error is None:
                    self._guarded(self._checkpoint)
                next_checkpoint, unsaved = time.monotonic() + CHECKPOINT_PERIOD, 0
        if self.error is None:
            self._guarded(self._checkpoint)
        self._reserve.unlink(missing_ok=True)
        try:
            self._writer.close()
        except Exception as error:  # noqa: BLE001  said by the caller
            self.error = (f"{self.error}; then " if self.error else "") + \
                f"closing {self.path} failed: {reason(error)}: the bag may not be readable"

    def _guarded(self, call) -> None:
        """call(), and on its failure the bag back to its last checkpoint."""
        try:
            call()
        except Exception as error:  # noqa: BLE001  a full disk, an I/O error: said by the caller
            self.error = f"writing {self.path} failed: {reason(error)}"
            try:
                self._back_to_checkpoint()
            except Exception as again:  # noqa: BLE001
                self.error += f"; going back to its last checkpoint failed too: {reason(again)}"

    def _checkpoint(self) -> None:
        """Make the bag whole on disk up to here, keep room to close it, and
        remember its state."""
        writer = self._writer
        storage = writer.storage
        if self.storage == "sqlite3":
            storage.conn.commit()
        else:
            if storage.chunk.msgs:
                storage.close_chunk()
            storage.bio.flush()
        room = max(RESERVE_BYTES, RESERVE_BYTES // 4 + RESERVE_PER_CHUNK * len(getattr(storage, "chunks", ())))
        if room > self._reserved:
            room = -(-room // RESERVE_BYTES) * RESERVE_BYTES  # in steps of RESERVE_BYTES
            descriptor = os.open(self._reserve, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.posix_fallocate(descriptor, 0, room)
            finally:
                os.close(descriptor)
            self._reserved = room
        self._saved = {"counts": dict(writer.counts), "times": (writer.min_timestamp, writer.max_timestamp)}
        if self.storage == "mcap":
            self._saved.update(offset=storage.bio.tell(), chunks=len(storage.chunks),
                               channel_stats=dict(storage.channel_stats),
                               message_times=(storage.message_start_time, storage.message_end_time))

    def _back_to_checkpoint(self) -> None:
        """After a failed write: the bag as at the last checkpoint, room made
        to close it (the reserve removed)."""
        self._reserve.unlink(missing_ok=True)
        writer, saved = self._writer, self._saved
        storage = writer.storage
        writer.counts = {key: saved["counts"].get(key, 0) for key in writer.counts}
        writer.min_timestamp, writer.max_timestamp = saved["times"]
        if self.storage == "sqlite3":
            storage.conn.rollback()
            return
        try:
            storage.bio.close()  # its buffer, past the checkpoint, is cut off below
        except OSError:
            pass
        os.truncate(storage.path, saved["offset"])
        storage.bio = open(storage.path, "r+b")  # noqa: SIM115  rosbags' MCAP writer closes it
        storage.bio.seek(saved["offset"])
        del storage.chunks[saved["chunks"]:]
        storage.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))
        storage.channel_stats = {key: saved["channel_stats"].get(key, 0) for key in storage.channel_stats}
        storage.message_start_time, storage.message_end_time = saved["message_times"]

    def _remove_bag(self) -> None:
        """Remove what opening made of the bag (the directory, which did not exist)."""
        writer = getattr(self, "_writer", None)
        if writer is not None and writer.storage is not None:
            try:
                writer.storage.abort()
            except Exception:  # noqa: BLE001, S110  removed below
                pass
        shutil.rmtree(self.path, ignore_errors=True)


def reason(error: BaseException) -> str:
    """What went wrong, for one line: an OSError's strerror (No space left on
    device), else the message (sqlite3: database or disk is full)."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__
