"""One phase's words through the switch, as a sans-I/O object: frames out, frames in, timers.

The phase's int32 words are cut into chunks of at most K words, each
segment of the round on its own (a chunk never straddles two segments, so
each packet carries one op); chunk c goes to slot c mod W of the job's W
slots, so every worker puts the same chunk in the same slot.  Each slot alternates between its two copies: the copy is
flipped after every RESULT, for the whole life of the job (`SlotPool`), so
consecutive uses of a slot never meet in one copy.  A slot carries chunk
c + W as soon as chunk c's RESULT is in.  A chunk whose RESULT does not come
is sent again after a timeout (`RttEstimator`, RFC 6298 style, doubling per
retransmission of the same chunk); if nothing progresses for `deadline`
seconds the transfer raises `AggregationTimeout`, naming job, phase and
offset.  A RESULT counts only if job, phase tag, slot, copy, offset and
count all match the chunk that slot is waiting for; anything else is
ignored and counted, so stale or duplicated RESULTs can never land in the
wrong place.
"""

from __future__ import annotations

import collections
import dataclasses
import math

import numpy as np

from switch_emulator.headers import HEADER_BYTES, VERSION_BIT, Flags, MsgType, pack_header, unpack_header


class AggregationTimeout(RuntimeError):
    """No progress within the deadline: the switch or another worker is gone."""


class StaleSwitchState(RuntimeError):
    """The switch holds this job's slots from an earlier run: it refused our chunk (flag STALE_RUN),
    or answered our hello with another run's."""


def stale_message(job_id: int, worker_id: int, what: str) -> str:
    return (f"job {job_id}, worker {worker_id}: the switch {what}; clear the earlier run's state before "
            f"running the job again: join it through the emulator's control port (`hina worker --control`, "
            f"ControlClient(...).join: each joining worker empties what an earlier run left), or "
            f"ControlClient(...).reset_job({job_id}), or restart the emulator; BMv2: the controller's "
            f"reset_job({job_id})")


class RttEstimator:
    """Smoothed RTT and retransmission timeout (RFC 6298), shared by a worker's transfers."""

    def __init__(self, initial: float = 0.1, minimum: float = 0.02, maximum: float = 2.0):
        self.rto = initial
        self.minimum, self.maximum = minimum, maximum
        self.srtt: float | None = None
        self.rttvar = 0.0

    def sample(self, rtt: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.rto = min(self.maximum, max(self.minimum, self.srtt + 4 * self.rttvar))


class SlotPool:
    """Which copy each of the job's slots uses next; lives as long as the worker's job."""

    def __init__(self, slot_base: int, slots: int):
        self.slot_base = slot_base
        self.version = [0] * slots

    @property
    def slots(self) -> int:
        return len(self.version)


@dataclasses.dataclass
class _Chunk:
    index: int
    version: int
    sent_at: float
    rto: float
    retries: int = 0
    suppressed: bool = False  # due during a stall, not resent: restarts its timer on progress


class PhaseTransfer:
    """Aggregate one phase's words (int32) with `op` through the switch's slots."""

    def __init__(self, *, job_id: int, worker_id: int, words: int, pool: SlotPool, rtt: RttEstimator,
                 tag: int, op: int | None = None, payload: np.ndarray, name: str, now: float, deadline: float,
                 ops: tuple[tuple[int, int, int], ...] | None = None, salt: int = 0):
        """`ops`: (op, start, stop) of each segment of `payload`; or one `op` for all of it.

        salt: added (mod 2^32) to every offset on the wire: the run's identity (`Worker` agrees
        on it in its hello), so that a copy an earlier run left on the switch never matches.
        """
        self.job_id, self.worker_id, self.words = job_id, worker_id, words
        self.pool, self.rtt = pool, rtt
        self.tag, self.name = tag & 0xFFFF, name
        self.deadline = deadline
        self.length = int(payload.size)
        if ops is None:
            ops = ((int(op), 0, self.length),)
        # chunk i: words [offset, offset + count) combined with op
        self._offset, self._count, self._op = [], [], []
        for seg_op, start, stop in ops:
            for offset in range(start, max(stop, start + 1), words):
                self._offset.append(offset)
                self._count.append(min(words, stop - offset))
                self._op.append(int(seg_op))
        self.chunks = len(self._offset)
        self._wire_offset = [(offset + salt) & 0xFFFFFFFF for offset in self._offset]
        wire = np.zeros(self.length + words, dtype=">i4")  # a last chunk reads K words
        wire[: self.length] = payload
        self._wire = memoryview(wire.view(np.uint8))
        self.result = np.empty(self.length, dtype=np.int32)
        self._waiting: dict[int, _Chunk] = {}  # slot index (0..W-1) -> chunk in flight
        self._received = 0
        self._last_progress = now
        self._earliest = math.inf
        self._heard = False  # a RESULT arrived since the last retransmissions
        self.stats: collections.Counter[str] = collections.Counter()

    @property
    def done(self) -> bool:
        return self._received == self.chunks

    def start(self, now: float) -> list[bytes]:
        """The first window: chunks 0..W-1."""
        return [self._send(c, now) for c in range(min(self.pool.slots, self.chunks))]

    def receive(self, frame: bytes, now: float) -> list[bytes]:
        """Take in one frame from the switch; return the frames it lets us send."""
        if len(frame) < HEADER_BYTES:
            self.stats["ignored"] += 1
            return []
        msg_type, _op, job_id, _wid, flags, pool_index, offset, count, phase = unpack_header(frame)
        slot = (pool_index & (VERSION_BIT - 1)) - self.pool.slot_base
        chunk = self._waiting.get(slot)
        if (msg_type != MsgType.RESULT or job_id != self.job_id or phase != self.tag or chunk is None
                or chunk.version != pool_index >> 15 or offset != self._wire_offset[chunk.index]
                or count != self._count[chunk.index] or len(frame) < HEADER_BYTES + 4 * count):
            self.stats["ignored"] += 1
            return []
        if flags & Flags.STALE_RUN:
            raise StaleSwitchState(stale_message(
                self.job_id, self.worker_id, f"holds slot {self.pool.slot_base + slot} (copy {chunk.version}) "
                f"from an earlier run of this job, so it refused phase {self.name!r} at offset "
                f"{self._offset[chunk.index]}"))
        offset = self._offset[chunk.index]
        self.result[offset : offset + count] = np.frombuffer(frame, dtype=">i4", count=count, offset=HEADER_BYTES)
        if chunk.retries == 0:
            self.rtt.sample(now - chunk.sent_at)
        self._received += 1
        self._last_progress = now
        if not self._heard:
            self._heard = True
            for waiting in self._waiting.values():
                if waiting.suppressed:  # progress again: a full timeout before anyone resends them
                    waiting.suppressed = False
                    waiting.sent_at, waiting.rto = now, self.rtt.rto
                    self._earliest = min(self._earliest, now + waiting.rto)
        self.pool.version[slot] ^= 1
        del self._waiting[slot]
        following = chunk.index + self.pool.slots
        return [self._send(following, now)] if following < self.chunks else []

    def poll(self, now: float) -> list[bytes]:
        """Retransmissions that are due; raises AggregationTimeout past the deadline."""
        if self.done:
            return []
        if now - self._last_progress >= self.deadline:
            oldest = min(self._waiting.values(), key=lambda c: c.index)
            raise AggregationTimeout(
                f"job {self.job_id}, worker {self.worker_id}: phase {self.name!r} (tag {self.tag}) got no "
                f"RESULT for offset {self._offset[oldest.index]} (slot {self.pool.slot_base + oldest.index % self.pool.slots}, "
                f"copy {oldest.version}) within {self.deadline:g} s; {self._received}/{self.chunks} chunks done"
                + ("" if self._received else " (is the job on the switch, and are all its workers running?)"))
        if now < self._earliest:
            return []
        due = sorted((c for c in self._waiting.values() if now >= c.sent_at + c.rto), key=lambda c: c.index)
        if not self._heard:
            # Nothing came back since the last retransmissions: the network or a slow peer is
            # stalled, and resending the whole window would only add load.  Probe with the oldest
            # chunk; the rest wait, backing off alike, until a RESULT shows progress again.
            for chunk in due[1:]:
                chunk.rto = min(2 * chunk.rto, self.rtt.maximum)
                chunk.sent_at = now
                chunk.suppressed = True
            due = due[:1]
        out = []
        for chunk in due:
            chunk.retries += 1
            chunk.rto = min(2 * chunk.rto, self.rtt.maximum)
            chunk.sent_at = now
            self.stats["retransmissions"] += 1
            out.append(self._frame(chunk))
        if out:
            self._heard = False
        self._earliest = min((c.sent_at + c.rto for c in self._waiting.values()), default=math.inf)
        return out

    def next_timer(self) -> float:
        """When `poll` has something to do next (a retransmission or the deadline)."""
        return min(self._earliest, self._last_progress + self.deadline)

    # -- frames ---------------------------------------------------------------
    def _send(self, index: int, now: float) -> bytes:
        slot = index % self.pool.slots
        chunk = _Chunk(index, self.pool.version[slot], now, self.rtt.rto)
        self._waiting[slot] = chunk
        self._earliest = min(self._earliest, now + chunk.rto)
        return self._frame(chunk)

    def _frame(self, chunk: _Chunk) -> bytes:
        slot = chunk.index % self.pool.slots
        pool_index = (chunk.version << 15) | (self.pool.slot_base + slot)
        offset = self._offset[chunk.index]
        header = pack_header(MsgType.UPDATE, self._op[chunk.index], self.job_id, self.worker_id, 0, pool_index,
                             self._wire_offset[chunk.index], self._count[chunk.index], self.tag)
        start = offset * 4
        frame = header + self._wire[start : start + self.words * 4]
        self.stats["frames"] += 1
        self.stats["bytes"] += len(frame)
        return frame
