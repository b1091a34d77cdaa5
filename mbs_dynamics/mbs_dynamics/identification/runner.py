"""Dask tasks of identification on local threads or on an existing cluster,
with progress bars: the scheduler's address checked before Dask's client is
let near it."""
from __future__ import annotations

import socket
import struct
import time

import dask

# How long (s) a Dask scheduler given by address has to answer, and the largest first message (its
# handshake, some 60 bytes) taken from it: anything else listening there is refused, not waited for.
SCHEDULER_TIMEOUT = 10.0
MAX_HANDSHAKE_BYTES = 2**16


class SchedulerError(ValueError):
    """The scheduler's address cannot be used: the message says why."""


def total(parts):
    """The sum of the parts (arrays or NormalEquations)."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


class Runner:
    """Computes Dask tasks on the chosen scheduler, with a progress bar."""

    def __init__(self, scheduler: str | None, progress: bool):
        self.client = None
        self.progress = progress
        if scheduler:
            from distributed import Client

            check_scheduler(scheduler)
            try:
                self.client = Client(scheduler, timeout=f"{SCHEDULER_TIMEOUT}s")
            except (OSError, ValueError) as error:
                raise SchedulerError(f"cannot reach the Dask scheduler at {scheduler}: {error}") from None

    def compute(self, tasks, description: str | None):
        """The tasks' results; a progress bar named description (None: none)."""
        progress = self.progress and description is not None
        if self.client is not None:
            futures = self.client.compute(tasks)
            if progress:
                from distributed import as_completed
                from tqdm import tqdm

                for _ in tqdm(as_completed(futures), total=len(futures), desc=description, unit="task"):
                    pass
            return self.client.gather(futures)
        if progress:
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


def check_scheduler(address: str) -> None:
    """SchedulerError unless a Dask scheduler answers at `address`
    (tcp://host:port, or inproc:// in this process) within SCHEDULER_TIMEOUT:
    its handshake, which it sends first, read with bounded size and time.
    Dask's own client would wait without end for anything else listening
    there, or allocate what its first 8 bytes claim (exabytes)."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.protocol.core import loads
    from distributed.protocol.utils import unpack_frames

    def refused(why: str) -> SchedulerError:
        return SchedulerError(f"cannot use {address} as a Dask scheduler: {why}")

    try:
        scheme, location = parse_address(address)
        if scheme == "inproc":
            return
        if scheme != "tcp":
            raise refused(f"only tcp:// addresses are taken, not {scheme}://")
        host, port = parse_host_port(location)
    except SchedulerError:
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
    except SchedulerError:
        raise
    except TimeoutError:
        raise refused(f"no Dask handshake within {SCHEDULER_TIMEOUT:g} s (is it a Dask scheduler's address?)") from None
    except OSError as error:
        raise refused(error.strerror or str(error)) from None
    except Exception as error:  # noqa: BLE001  whatever the bytes make the decoder raise
        raise refused(f"what answers there is not Dask ({type(error).__name__})") from None
    if not (isinstance(handshake, dict) and "pickle-protocol" in handshake):
        raise refused("what answers there is not Dask (no handshake)")
