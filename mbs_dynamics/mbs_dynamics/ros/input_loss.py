"""What an input stream lost before it reached a node: the count of each
publisher's messages that never arrived (its sequence numbers), and an
estimate of the messages missing from the stream at its rate (its stamps).
No ROS here beyond the shape of rclpy's MessageInfo.

A publisher's middleware numbers every message it writes; a subscription
that sees number 7 after 5 from the same publisher has lost one, whatever
lost it (the subscription's queue overflowed while the node did not run, the
transport dropped a best-effort message too large for it). That count is
exact. The stamps tell more and less: a driver that skips a cycle leaves a
gap too, and a relay or a bag player numbers the messages afresh; but stamps
can be anything, so the estimate counts only where the stream is regular
(StampGaps).
"""
from __future__ import annotations

import inspect
from collections import OrderedDict, deque
from collections.abc import Callable

# Publishers of one topic whose sequence numbers are followed; beyond, the
# longest silent is forgotten.
MAX_PUBLISHERS = 64
# Intervals between stamps the period is learned from (their median), at
# least MIN_INTERVALS before any gap is counted; learned again every
# RELEARN_EVERY intervals.
INTERVAL_WINDOW = 64
MIN_INTERVALS = 16
RELEARN_EVERY = 8
# Intervals the stream's mean interval is averaged over (exponentially): a
# learned period is at least half of it, so that a burst longer than the
# window (a publisher catching up) is not taken for the stream's rate.
MEAN_INTERVALS = 1000
# The stream is regular when this share of the window's intervals lies within
# PERIOD_TOLERANCE periods of one period (learned), of a whole number of
# periods (given).
REGULAR_SHARE = 0.7
PERIOD_TOLERANCE = 0.25
# A gap longer than this (s) or than this many periods is a pause or a jump
# of the stamps, not messages missing: counted apart.
MAX_GAP = 1.0
MAX_GAP_PERIODS = 1000


def with_message_info(callback: Callable) -> Callable:
    """A subscription callback that receives (message, MessageInfo) from any
    rclpy executor: rclpy passes the info to a callback that takes two
    arguments, the Python executors as two arguments and its EventsExecutor
    (rclpy 9) as one (message, info) tuple."""

    def receive(*arguments) -> None:
        message, info = arguments[0] if len(arguments) == 1 else arguments
        callback(message, info)

    parameter = inspect.Parameter
    receive.__signature__ = inspect.Signature([parameter("message", parameter.POSITIONAL_ONLY),
                                               parameter("info", parameter.POSITIONAL_ONLY)])
    return receive


class PublisherSequences:
    """Messages of a topic that never reached the subscription: the gaps in
    each publisher's sequence numbers, from the first message of it received
    on. `lost` counts them; `supported` says whether the middleware gives
    sequence numbers (None until a message came)."""

    def __init__(self):
        self._last: OrderedDict[bytes, int] = OrderedDict()  # publisher gid -> highest number seen
        self.lost = 0
        self.supported: bool | None = None

    def observe(self, info) -> int:
        """The messages lost just before the one of MessageInfo `info` (0 for
        the first of a publisher, and for one that comes out of order)."""
        sequence, gid = info.get("publication_sequence_number"), info.get("publisher_gid")
        self.supported = sequence is not None and gid is not None
        if not self.supported:
            return 0
        publisher = bytes(gid["data"])
        last = self._last.pop(publisher, None)
        self._last[publisher] = sequence if last is None else max(last, sequence)  # now the most recent
        if len(self._last) > MAX_PUBLISHERS:
            self._last.popitem(last=False)
        if last is None or sequence <= last:
            return 0
        missing = sequence - last - 1
        self.lost += missing
        return missing


class StampGaps:
    """Messages missing from a stream at its rate, estimated from the stamps
    of the messages that come in order.

    The period is given (`period`, s) or learned: the median of the last
    INTERVAL_WINDOW intervals between stamps, taken when the window is
    regular and the median at least half the stream's mean interval (over
    MEAN_INTERVALS), kept while it is not. An interval of k periods (rounded,
    k >= 2) means k - 1 messages missing, counted only while the stream is
    regular and once the next message confirms it. Regular: REGULAR_SHARE of
    the window's intervals within PERIOD_TOLERANCE of one learned period (a
    stream with a fifth of it lost still counts; a burst cannot pass for the
    period), or of a whole number of a given one (intervals shorter than half
    of it aside). Confirmed: a late message fills
    a gap (`late`); stamps that went back (`restart`) take back the jump
    before them (one bad stamp from the future). An interval shorter than
    half a period always gives one back: a publisher that stamps at sending
    and catches up after a stall sends the messages of its gap bunched. A
    gap of more than MAX_GAP s or MAX_GAP_PERIODS periods is a pause, counted
    in `pauses`. `gaps` counts the gaps, `missed` the messages missing in
    them (never below 0): bad stamps make it count too few, never too many.
    """

    def __init__(self, period: float | None = None):
        self.given_period = period
        self._intervals: deque = deque(maxlen=INTERVAL_WINDOW)
        self._learned: float | None = None
        self._mean_interval: float | None = None
        self._is_regular = False
        self._since_learned = 0
        self._last: float | None = None
        self._pending = 0  # messages missing in the last interval, until the next message confirms them
        self.gaps = 0
        self.missed = 0
        self.pauses = 0

    @property
    def period(self) -> float | None:
        """The period (s) gaps are measured in: given, or learned (None until learned)."""
        return self.given_period or self._learned

    @property
    def regular(self) -> bool:
        """Whether the stream is regular enough to count its gaps (learned
        with the period; False until MIN_INTERVALS intervals came)."""
        return self._is_regular

    def in_order(self, stamp: float) -> int:
        """A message stamped `stamp` (s), not before the last one. Returns the
        messages now confirmed missing (those of the interval before the last)."""
        confirmed = self._confirm()
        if self._last is not None and stamp > self._last:
            interval, period = stamp - self._last, self.period
            if interval > MAX_GAP or (period is not None and interval > MAX_GAP_PERIODS * period):
                self.pauses += 1
            else:
                self._intervals.append(interval)
                self._mean_interval = interval if self._mean_interval is None else (
                    self._mean_interval + (interval - self._mean_interval) / MEAN_INTERVALS)
                self._since_learned += 1
                if self._since_learned >= RELEARN_EVERY or self._learned is None:
                    self._learn()
                if self.period is not None:
                    missing = round(interval / self.period) - 1
                    if missing < 0 or self._is_regular:
                        self._pending = missing
        self._last = stamp
        return confirmed

    def late(self) -> None:
        """A message stamped before the last one: it fills a slot of the gap before the last."""
        if self._pending > 0:
            self._pending -= 1

    def restart(self) -> None:
        """The stamps went back and the stream goes on from there: the gap
        before the stamp left behind is no gap (a stamp from the future, a
        simulator's reset); the period is kept."""
        self._pending = 0
        self._last = None

    def _confirm(self) -> int:
        pending, self._pending = self._pending, 0
        before = self.missed
        self.missed = max(0, self.missed + pending)
        if pending > 0:
            self.gaps += 1
        return max(0, self.missed - before)

    def _learn(self) -> None:
        self._since_learned = 0
        if len(self._intervals) < MIN_INTERVALS:
            self._is_regular = False
            return
        if self.given_period:  # vouched for: intervals of whole numbers of it, bunched ones aside
            spaced = [k for k in (interval / self.given_period for interval in self._intervals) if k >= 0.5]
            near = sum(abs(k - round(k)) <= PERIOD_TOLERANCE for k in spaced)
            self._is_regular = len(spaced) >= MIN_INTERVALS and near >= REGULAR_SHARE * len(spaced)
            return
        ordered = sorted(self._intervals)
        middle = len(ordered) // 2
        median = ordered[middle] if len(ordered) % 2 else 0.5 * (ordered[middle - 1] + ordered[middle])
        near = sum(abs(interval / median - 1.0) <= PERIOD_TOLERANCE for interval in ordered)
        self._is_regular = near >= REGULAR_SHARE * len(ordered) and median >= 0.5 * self._mean_interval
        if self._is_regular:
            self._learned = median
