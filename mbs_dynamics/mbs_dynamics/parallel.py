"""Batches on every core: a batch of states split into one slice per thread,
each slice run by a compiled kernel that releases the GIL (nogil).

The threads are Python's, waiting on a queue when idle, not an OpenMP team:
OpenMP's threads spin after a parallel region, and a process that also loads
Pinocchio (which brings GNU OpenMP with the default, spinning, wait policy)
or a machine with busy cores stalled numba's parallel loops at their closing
barrier: a batch of 1000 UR5 inverse dynamics took 5-16 ms instead of 0.3-0.6.
A thread waiting here sleeps and lets the others run.

A batch kernel takes its constant arguments first, then the arrays whose
leading dimension is the batch (inputs and outputs, the statuses last), and
runs the states of the slices it is given: kernel(*constants, *slices).
Other work split into parts of its own (the rollouts) runs on the same pool
(run_together): one pool in the process.
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

# Below this many states times bodies a batch runs in the calling thread:
# waking a sleeping thread costs some 10-50 us, as much as 1000 bodies' RNEA.
MIN_PARALLEL_WORK = 1024


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_threads = available_cores()
_pool: ThreadPoolExecutor | None = None
_pool_owner = (None, 0)  # (process id, size) the pool was made for: a forked child makes its own
_lock = threading.Lock()
_in_worker = threading.local()


def get_num_threads() -> int:
    """The threads a batch runs on (at first: the cores available)."""
    return _threads


def set_num_threads(threads: int) -> None:
    """Run batches on `threads` threads (1: in the calling thread only)."""
    global _threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    _threads = threads


def _workers(count: int) -> ThreadPoolExecutor:
    """The pool of at least `count` worker threads (besides the caller's), made
    on first use and made anew, larger, when more are asked for (the old one
    finishes what it was given)."""
    global _pool, _pool_owner
    with _lock:
        if _pool_owner[0] != os.getpid() or _pool_owner[1] < count:
            if _pool is not None and _pool_owner[0] == os.getpid():
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(count, thread_name_prefix="mbs_batch", initializer=_mark_worker)
            _pool_owner = (os.getpid(), count)
        return _pool


def _mark_worker() -> None:
    _in_worker.active = True


def run_batch(kernel, constants: tuple, batched: tuple, work_per_state: int = 1) -> None:
    """kernel(*constants, *batched) over the batch, in slices on get_num_threads()
    threads (the module docstring). work_per_state: a measure of one state's
    work (the model's bodies) against MIN_PARALLEL_WORK."""
    count = batched[0].shape[0]
    threads = min(_threads, count, max(1, count * work_per_state // MIN_PARALLEL_WORK))
    if threads <= 1 or getattr(_in_worker, "active", False):  # a worker's own batch: no waiting on the pool
        kernel(*constants, *batched)
        return
    bounds = [count * k // threads for k in range(threads + 1)]
    run_together([partial(kernel, *constants, *(x[start:stop] for x in batched))
                  for start, stop in zip(bounds[:-1], bounds[1:], strict=True)])


def run_together(calls: list) -> None:
    """Runs the calls (functions of no argument) at once: the first in the
    calling thread, the others on the pool's threads; a pool worker runs them
    all itself, one after another (it would wait on its own pool). Returns
    when all are done; a call's exception is raised here."""
    if len(calls) <= 1 or getattr(_in_worker, "active", False):
        for call in calls:
            call()
        return
    pool = _workers(len(calls) - 1)
    futures = [pool.submit(call) for call in calls[1:]]
    try:
        calls[0]()
    finally:
        for future in futures:
            future.result()
