"""A slow pipe: at most `rate` packets a second through the rules, a queue of `queue` packets before them.

BMv2's simple_switch runs its ingress pipeline in one thread, a few
thousand packets a second, behind an input buffer of 1024 packets that
drops what arrives when it is full; the emulator's compiled rules take
millions.  A fault that only a slow switch shows (resends that pile up
behind the frames they repeat, answers that come later than the senders'
timers) never shows on the emulator unless it is made as slow: with
`ImpairmentConfig(pipe_rate=R, pipe_queue=Q)` (`--pipe-rate`,
`--pipe-queue`) each pipe takes one packet every 1/R seconds and holds at
most Q waiting; a packet that finds Q waiting is dropped (drop-tail) and
counted in `stats["dropped"]`.

`SlowPipe` is the queue's arithmetic only, without I/O and without the
frames: the caller keeps them in arrival order (a deque on the per-packet
path, `FrameRing` on the batched one), asks `arrive(now, n)` how many of n
frames that came now it may keep, and `take(now)` how many from the head
may go through the rules now; `next_timer()` is when the next one may.
Packet j of a busy period starts 1/R after packet j - 1 whatever the
caller's loop does, so a loop that wakes late catches up at once and the
rate is the rate; no one waits by spinning.
"""

from __future__ import annotations

import math

import numpy as np


class SlowPipe:
    """The pipe's schedule: `waiting` packets queued (the first of which starts at `head_at`)."""

    def __init__(self, rate: float, queue: int):
        if not rate > 0 or math.isinf(rate):
            raise ValueError(f"a slow pipe's rate must be a finite number of packets per second > 0, got {rate}")
        if isinstance(queue, bool) or not isinstance(queue, int) or queue < 1:
            raise ValueError(f"a slow pipe's queue must be a positive number of packets, got {queue!r}")
        self.rate, self.queue = float(rate), queue
        self.gap = 1.0 / self.rate
        self.waiting = 0
        self.head_at = -math.inf  # the first waiting packet's start; when none waits, the next one's earliest
        # packets kept, those of them that waited for their turn, and those dropped on a full queue
        self.stats = {"queued": 0, "waited": 0, "dropped": 0}

    def _started(self, now: float, positions: int) -> int:
        """Of the packets at queue positions 0..positions-1 (from `head_at`, one gap apart), how many start by now."""
        if positions <= 0 or now < self.head_at:
            return 0
        return min(positions, math.floor((now - self.head_at) * self.rate + 1e-9) + 1)

    def arrive(self, now: float, n: int) -> int:
        """n packets arrived now, in order: how many of them to keep (the first ones; the rest are dropped, the
        queue being full)."""
        if self.waiting == 0:
            self.head_at = max(now, self.head_at)
        # a packet at position p is kept while fewer than `queue` packets ahead of it have not started
        started = self._started(now, self.waiting + n)
        kept = max(0, min(n, self.queue + started - self.waiting))
        at_once = min(kept, max(0, started - self.waiting))  # of those kept, the ones that start now
        self.waiting += kept
        self.stats["queued"] += kept
        self.stats["waited"] += kept - at_once
        self.stats["dropped"] += n - kept
        return kept

    def take(self, now: float) -> int:
        """How many packets from the head of the queue go through the rules now (their starts have come)."""
        k = self._started(now, self.waiting)
        if k:
            self.waiting -= k
            self.head_at += k * self.gap
        return k

    def next_timer(self) -> float | None:
        """When the next waiting packet starts (None: none waits)."""
        return self.head_at if self.waiting else None


class FrameRing:
    """The frames a slow pipe keeps on the batched path, in the layout `recvmmsg` leaves them in (so that the
    compiled batch runs on them as they are): entry i's bytes at `rx[i * stride:]`, its length `lengths[i]`
    (strided, as the mmsghdr lengths are), its sender's address the row `names[i]`; a ring of `capacity`
    entries, copied in a batch at a time with whole-array copies.  `stride` grows to the longest frame kept."""

    def __init__(self, capacity: int, name_bytes: int, stride: int = 2048):
        self.capacity, self.stride = capacity, stride
        self.rx = np.zeros(capacity * stride, np.uint8)
        self.lengths = np.zeros(2 * capacity, np.uint32)[::2]  # the layout the batch kernels are compiled for
        self.names = np.zeros((capacity, name_bytes), np.uint8)
        self.head = self.count = 0

    def push(self, rx: np.ndarray, entry_bytes: int, lengths: np.ndarray, names: np.ndarray, n: int) -> None:
        """Append entries 0..n-1 of a received batch (n: at most the room left, which the caller's `SlowPipe`
        keeps)."""
        if n <= 0:
            return
        if self.count + n > self.capacity:
            raise ValueError(f"a ring of {self.capacity} holding {self.count} cannot take {n} more")
        longest = int(lengths[:n].max())
        if longest > self.stride:
            self._grow(1 << (longest - 1).bit_length())
        at = (self.head + self.count + np.arange(n)) % self.capacity
        self.rx.reshape(self.capacity, self.stride)[at, :longest] = rx[: n * entry_bytes].reshape(n, entry_bytes)[
            :, :longest]
        self.lengths[at] = lengths[:n]
        self.names[at] = names[:n]
        self.count += n

    def pop(self, k: int) -> list[tuple[int, int]]:
        """Take the k oldest entries: the runs [start, end) of entries they lie in, oldest first (two where
        they wrap around)."""
        k = min(k, self.count)
        first = (self.head, min(self.head + k, self.capacity))
        runs = [first] + ([(0, k - (first[1] - first[0]))] if first[1] - first[0] < k else [])
        self.head = (self.head + k) % self.capacity
        self.count -= k
        return [run for run in runs if run[1] > run[0]]

    def _grow(self, stride: int) -> None:
        wider = np.zeros(self.capacity * stride, np.uint8)
        wider.reshape(self.capacity, stride)[:, : self.stride] = self.rx.reshape(self.capacity, self.stride)
        self.rx, self.stride = wider, stride
