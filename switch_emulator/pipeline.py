"""The switch data plane without I/O: feed it a hina frame and its source, get back what to send.

This is the ingress control of `p4/hina.p4` in Python, step for step and
with the same names: `job_config` (which job, how many workers, which
slots), `worker_auth` (may this source speak for this worker_id),
`arrival_bitmap` (first arrival, duplicate, completion), `value_processor`
(write, ADD, OR, MAX over K words), and the RESULT it emits.  Anything else
is dropped and counted by reason; the pipeline never raises on a frame.

Slot protocol (DESIGN.md section 2, after SwitchML): each slot has two
copies.  A worker's first UPDATE for a copy sets its bit in that copy's
arrival bitmap and clears it in the other copy, then writes (the copy was
empty) or combines its words into the copy.  When the bitmap reaches the
job's full mask the combined words go out as a RESULT to every member.
Each copy also counts its arrivals since it was last empty: the bitmap of a
complete copy loses bits as workers move on to the other copy, so the
counter is what still says "complete" when a worker whose RESULT was lost
asks again; a duplicate then gets the stored result by unicast.  An UPDATE
that arrives at a complete copy its sender has already left is stale and
dropped.  An UPDATE whose offset or phase tag disagrees with a non-empty
copy meets another run's state (a restarted job on a switch nobody reset):
it is refused back to its sender as a RESULT flagged STALE_RUN, which the
worker turns into an error, never into a sum.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
from typing import Hashable, NamedTuple

import numpy as np

from codec.ops import UFUNCS, Op

from .config import JobConfig
from .headers import HEADER_BYTES, VERSION_BIT, Flags, MsgType, pack_header, pack_header_into, unpack_header

_MAX_OP = max(Op)
_SLOT_MASK = VERSION_BIT - 1
_RESULT = int(MsgType.RESULT)
_UPDATE = int(MsgType.UPDATE)
_COMBINE = [UFUNCS[op] for op in Op]  # indexed by the op field


class UnknownJob(KeyError):
    """A control operation named a job this switch does not have."""

    def __str__(self) -> str:
        return str(self.args[0])


class Drop(enum.IntEnum):
    """Why a frame was dropped; the values index the P4 `drops` counter."""

    TRUNCATED = 1  # shorter than the hina header, or than header + K words
    BAD_LENGTH = 2  # longer than header + K words
    BAD_MSG_TYPE = 3  # not an UPDATE
    BAD_OP = 4  # not ADD, OR or MAX
    UNKNOWN_JOB = 5
    BAD_WORKER = 6  # worker_id >= N
    UNAUTHORIZED = 7  # source not allowed to speak for (job, worker_id)
    BAD_COUNT = 8  # count > K
    BAD_SLOT = 9  # slot outside the job's range
    STALE = 10  # offset disagrees with a non-empty copy, or sender already left a complete copy
    DUPLICATE = 11  # sender already counted in an incomplete copy
    BAD_CHECKSUM = 12  # raw frames: IPv4 header checksum wrong
    NO_ROUTE = 13  # raw frames: non-hina frame to an unknown destination MAC
    STALE_RUN = 14  # the copy holds another run's chunk: refused back to the sender (flag STALE_RUN)


class _JobState:
    """Registers of one job: per slot copy an arrival bitmap, a counter, an offset and K words."""

    def __init__(self, cfg: JobConfig):
        self.cfg = cfg
        self.full = cfg.full_mask
        self.words = cfg.words
        self.frame_bytes = cfg.frame_bytes
        self.workers, self.slot_base, self.slots = cfg.workers, cfg.slot_base, cfg.slots
        # the RESULT is built here when the pipeline reuses its buffers: header, then K big-endian words
        self.result = bytearray(self.frame_bytes)
        self.result_words = np.frombuffer(self.result, dtype=">i4", offset=HEADER_BYTES)
        self.result_view = memoryview(self.result)
        self.set_members(cfg)
        self.updates = self.results = self.resends = 0
        self.dropped: collections.Counter[Drop] = collections.Counter()
        self.reset()

    def set_members(self, cfg: JobConfig) -> None:
        """Who may send for which worker_id, and the multicast group (the slots are kept)."""
        self.cfg = cfg
        self.auth = {m.worker_id: m.source for m in cfg.members}
        self.group = tuple(m.source for m in sorted(cfg.members, key=lambda m: m.worker_id))

    def reset(self) -> None:
        copies = 2 * self.cfg.slots
        self.bitmap = [0] * copies
        self.counter = [0] * copies
        self.offset = [0] * copies
        self.phase = [0] * copies
        self.values = np.zeros((copies, self.words), dtype=np.int32)
        self.rows = list(self.values)  # one view per copy, made once rather than per packet

    def clear_leftovers(self, worker_id: int) -> int:
        """Empty the copies an earlier run left behind, as worker `worker_id` (re)joins before sending.

        A joining worker has sent nothing in its run yet, so no copy of its run can hold its bit
        or be complete (completion needs it): a copy that does, or that holds a bit outside the
        job's workers, is another run's, and is emptied.  Copies holding only the bits of workers
        that joined earlier (its run's first chunks, already on their way) are kept.  Once every
        worker has joined, nothing of an earlier run is left.  Returns the copies emptied.
        """
        bit, n = 1 << worker_id, self.cfg.workers
        emptied = 0
        for copy, seen in enumerate(self.bitmap):
            if seen and (seen & bit or seen & ~self.full or self.counter[copy] >= n):
                self.bitmap[copy] = self.counter[copy] = 0
                emptied += 1
        return emptied


class Emit(NamedTuple):
    """One frame to send to each of `dests` (sources, in the members' terms)."""

    dests: tuple[Hashable, ...]
    frame: bytes


_emit = functools.partial(tuple.__new__, Emit)  # Emit((dests, frame)) without NamedTuple's Python-level __new__


class Pipeline:
    """Switch state plus the per-frame ingress logic; the control operations are methods too.

    With `reuse_buffers` a RESULT's frame is a memoryview of a buffer the job reuses, valid
    until the next `update` (an I/O loop that sends it at once saves a copy and an allocation
    per packet); otherwise it is fresh bytes.
    """

    def __init__(self, *, reuse_buffers: bool = False) -> None:
        self.jobs: dict[int, _JobState] = {}
        self.drops: collections.Counter[Drop] = collections.Counter()
        self.frames = 0
        self.reuse_buffers = reuse_buffers

    # -- control plane ------------------------------------------------------
    def add_job(self, cfg: JobConfig) -> None:
        """Install (or replace) a job; its slots start empty.  Slot ranges may not overlap."""
        for other in self.jobs.values():
            if other.cfg.job_id != cfg.job_id and other.cfg.overlaps(cfg):
                raise ValueError(
                    f"job {cfg.job_id}'s slots [{cfg.slot_base}, {cfg.slot_base + cfg.slots}) overlap job "
                    f"{other.cfg.job_id}'s [{other.cfg.slot_base}, {other.cfg.slot_base + other.cfg.slots})"
                )
        self.jobs[cfg.job_id] = _JobState(cfg)

    def join(self, cfg: JobConfig, member) -> None:
        """Authorize one member of job `cfg` (its members are ignored): install the job if this switch
        lacks it, else check that it has the same shape and add or move the member, keeping the slots."""
        job = self.jobs.get(cfg.job_id)
        if job is None:
            self.add_job(dataclasses.replace(cfg, members=(member,)))
            return
        have = job.cfg
        diffs = [f"{k} {getattr(have, k)} on the switch, {getattr(cfg, k)} asked"
                 for k in ("workers", "words", "slot_base", "slots") if getattr(have, k) != getattr(cfg, k)]
        if diffs:
            raise ValueError(f"job {cfg.job_id} differs from the one on the switch: {'; '.join(diffs)}")
        others = tuple(m for m in have.members if m.worker_id != member.worker_id)
        job.set_members(dataclasses.replace(have, members=others + (member,)))
        job.clear_leftovers(member.worker_id)

    def remove_job(self, job_id: int) -> None:
        self._job(job_id)
        del self.jobs[job_id]

    def reset_job(self, job_id: int) -> None:
        """Empty every slot copy of a job (after a worker failure, before the survivors go on)."""
        self._job(job_id).reset()

    def job_config(self, job_id: int) -> JobConfig:
        return self._job(job_id).cfg

    def _job(self, job_id: int) -> _JobState:
        try:
            return self.jobs[job_id]
        except KeyError:
            raise UnknownJob(f"no job {job_id} on this switch") from None

    def counters(self) -> dict:
        """Frames seen, drops by reason, and per job: updates, results, resends, drops by reason."""
        return {
            "frames": self.frames,
            "drops": {d.name.lower(): n for d, n in sorted(self.drops.items())},
            "jobs": {
                job_id: {"updates": st.updates, "results": st.results, "resends": st.resends,
                         "drops": {d.name.lower(): n for d, n in sorted(st.dropped.items())}}
                for job_id, st in sorted(self.jobs.items())
            },
        }

    def refuse(self, reason: Drop) -> None:
        """A hina frame the parser or checksum unit rejected before `update`: a frame seen, and dropped."""
        self.frames += 1
        self.drop(reason)

    def drop(self, reason: Drop, job: _JobState | None = None) -> None:
        self.drops[reason] += 1
        if job is not None:
            job.dropped[reason] += 1

    # -- data plane ---------------------------------------------------------
    def update(self, data: bytes | bytearray | memoryview, source: Hashable, length: int | None = None,
               words: np.ndarray | None = None) -> Emit | None:
        """Process one hina frame (header + K words) that arrived from `source`.

        `length` is the hina length the frame claims (UDP length - 8 on raw
        frames); by default the bytes present.  Fewer bytes present or
        claimed than a header, or than header + K words, is TRUNCATED;
        more claimed is BAD_LENGTH, as in the P4 program.  `words`, if the
        caller keeps one, is a big-endian int32 view of the same buffer from
        the header's end on (a receive buffer's), spared a view per frame.
        """
        self.frames += 1
        present = len(data)
        claimed = present if length is None else length
        if present < HEADER_BYTES or claimed < HEADER_BYTES:
            return self.drop(Drop.TRUNCATED)
        msg_type, op, job_id, worker_id, flags, pool_index, offset, count, phase = unpack_header(data)
        if msg_type != _UPDATE:
            return self.drop(Drop.BAD_MSG_TYPE)
        if op > _MAX_OP:
            return self.drop(Drop.BAD_OP)
        # job_config
        job = self.jobs.get(job_id)
        if job is None:
            return self.drop(Drop.UNKNOWN_JOB)
        frame_bytes = job.frame_bytes
        if claimed != frame_bytes or present < frame_bytes:
            return self.drop(Drop.BAD_LENGTH if claimed > frame_bytes and present >= frame_bytes else Drop.TRUNCATED,
                             job)
        workers = job.workers
        if worker_id >= workers:
            return self.drop(Drop.BAD_WORKER, job)
        # worker_auth
        if job.auth.get(worker_id) != source:
            return self.drop(Drop.UNAUTHORIZED, job)
        if count > job.words:
            return self.drop(Drop.BAD_COUNT, job)
        slot = (pool_index & _SLOT_MASK) - job.slot_base
        if not 0 <= slot < job.slots:
            return self.drop(Drop.BAD_SLOT, job)

        # arrival_bitmap
        copy = 2 * slot + (pool_index >> 15)
        bit = 1 << worker_id
        seen = job.bitmap[copy]
        if seen and (job.offset[copy] != offset or job.phase[copy] != phase):
            # Within one run a copy in use holds one chunk, and a worker whose bit is still set sends
            # there only that chunk again: this copy holds another run's state.  Refused at once,
            # back to the sender, so that it never takes an old RESULT or adds into old words.
            self.drop(Drop.STALE_RUN, job)
            header = pack_header(MsgType.RESULT, op, job_id, worker_id, Flags.STALE_RUN, pool_index, offset, count,
                                 phase)
            return Emit((source,), header + bytes(data[HEADER_BYTES : job.frame_bytes]))
        if seen & bit:
            if job.counter[copy] == workers:  # complete: the sender lost its RESULT
                job.resends += 1
                return self._result(job, copy, op, job_id, worker_id, Flags.RESEND, pool_index, offset, count,
                                    phase, (source,))
            return self.drop(Drop.DUPLICATE, job)
        if seen and job.counter[copy] == workers:  # the sender already left this complete copy
            return self.drop(Drop.STALE, job)
        job.bitmap[copy ^ 1] &= ~bit
        seen |= bit
        job.bitmap[copy] = seen

        # value_processor
        if words is None:
            incoming = np.frombuffer(data, dtype=">i4", count=job.words, offset=HEADER_BYTES)
        else:
            incoming = words[: job.words]
        values = job.rows[copy]
        if seen == bit:  # first arrival: write
            values[...] = incoming
            job.offset[copy] = offset
            job.phase[copy] = phase
            job.counter[copy] = 1
        else:
            _COMBINE[op](values, incoming, out=values, casting="unsafe")
            job.counter[copy] += 1
        job.updates += 1
        if seen != job.full:
            return None
        job.results += 1
        return self._result(job, copy, op, job_id, worker_id, 0, pool_index, offset, count, phase, job.group)

    def _result(self, job: _JobState, copy: int, op: int, job_id: int, worker_id: int, flags: int,
                pool_index: int, offset: int, count: int, phase: int, dests: tuple) -> Emit:
        if self.reuse_buffers:
            job.result_words[...] = job.rows[copy]
            pack_header_into(job.result, 0, _RESULT, op, job_id, worker_id, flags, pool_index, offset, count,
                             phase)
            return _emit((dests, job.result_view))
        header = pack_header(MsgType.RESULT, op, job_id, worker_id, flags, pool_index, offset, count, phase)
        return Emit(dests, header + job.values[copy].astype(">i4").tobytes())
