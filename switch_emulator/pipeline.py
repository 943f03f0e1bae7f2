"""The switch data plane without I/O: feed it a hina frame and its source, get back what to send.

`Pipeline` holds the switch's registers (`registers.py`: a record per job,
a record per slot copy, the words, the counters) and its control plane:
install, join, remove and reset jobs, read counters.  The ingress rules
themselves, `p4/hina.p4`'s controls step for step, are compiled
(`controls.py`): `update` runs them on one frame, and the backends run them
on a whole `recvmmsg` batch at once (`batch.py`) on the same registers.
Anything malformed is dropped and counted by reason; the pipeline never
raises on a frame.  The slot protocol is described in `controls.py`
(docs/design.md, "The slot protocol").

A source is whatever the backend names a sender by (a UDP (host, port), a
switch port, an in-process port name); the registers hold an integer id
per member source (`registers.udp_source_id`, `port_source_id`, or a
number given out here), and a frame's source is looked up in the same map.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import time
from collections.abc import Hashable
from typing import NamedTuple

import numpy as np

from hina.control.config import JobConfig, Member, PortAddress
from hina.wire.frames import ip_bytes, mac_bytes
from hina.wire.headers import AT_WORKER_ID, MAX_FRAME_BYTES, Drop
from hina.wire.sockio import sockaddr_in

from . import batch
from . import registers as reg
from .controls import NOTHING, TO_GROUP, TO_PARENT, TO_SENDER, ingress_bytes


class UnknownJob(KeyError):
    """A control operation named a job this switch does not have."""

    def __str__(self) -> str:
        return str(self.args[0])


class JobMismatch(ValueError):
    """join named a job the switch holds with another shape (workers, words or slots)."""

    def __init__(self, message: str, job_id: int):
        super().__init__(message)
        self.job_id = job_id


_REASONS = frozenset(Drop)
ACTIVE_SECONDS = 5.0  # a job heard from (or refusing runs) within this many seconds is "active" ("refusing")
PINNED = frozenset({"command line", "configure"})  # where a job came from that no lease removes
# what a member's frame moves once it passed the job's checks of its source: taking it in, answering it,
# or dropping it as a duplicate, stale, another run's, or out of the job's counts and slots
_HEARD = ("updates", "results", "resends", "resent_up", "pending")
_HEARD_DROPS = [int(d) for d in (Drop.DUPLICATE, Drop.STALE, Drop.STALE_RUN, Drop.BAD_COUNT, Drop.BAD_SLOT)]


def job_state(frame_s: float | None, refused_s: float | None) -> str:
    """refusing: the switch refused a run's chunk (STALE_RUN) lately; active: a member's frames came lately; idle.
    (Seconds since the last such frame and refusal; None: never.)"""
    if refused_s is not None and refused_s < ACTIVE_SECONDS:
        return "refusing"
    return "active" if frame_s is not None and frame_s < ACTIVE_SECONDS else "idle"


def _counter(row: np.ndarray) -> collections.Counter:
    """Drops by reason from a `drops` register, indexed by reason (index 0 is no reason)."""
    return collections.Counter({Drop(r): n for r, n in enumerate(row.tolist()) if n and r in _REASONS})


class _JobState:
    """One job: its config and members, and views of its records in the pipeline's registers (`register`,
    its `registers.JOB`; `copies`, its `registers.COPY` records; `values`, their words)."""

    def __init__(self, cfg: JobConfig, pipeline: Pipeline):
        self.cfg = cfg
        self.pipeline, self.row = pipeline, None  # the row: once the pipeline has placed the job
        self.words, self.copies_count = cfg.words, 2 * cfg.slots
        # until the pipeline places the job in its registers: records of its own
        own = reg.Registers(1, self.copies_count, self.copies_count * cfg.words, reg.counters())
        self.bind(own.jobs[0, ...], own.copies, own.values)
        for field, value in (("workers", cfg.workers), ("words", cfg.words), ("frame_bytes", cfg.frame_bytes),
                             ("slot_base", cfg.slot_base), ("slots", cfg.slots), ("full", cfg.full_mask),
                             ("needed", cfg.children)):
            self.register[field] = value
        self.set_members(cfg)
        # bookkeeping for leases and listings (monotonic seconds): where the job came from, when a member
        # was last heard (it joined, or its frames moved the counters), its last frame, the last refusal
        self.origin = "add_job"
        self.installed = self.heard = time.monotonic()
        self.framed: float | None = None
        self.refused: float | None = None
        self._marks = (0, 0)

    def note(self, now: float) -> None:
        """Look at the job's counters (the compiled rules move them): heard from, or refused, since the last look?"""
        r = self.register
        heard = sum(int(r[field]) for field in _HEARD) + int(r["drops"][_HEARD_DROPS].sum())
        refused = int(r["drops"][Drop.STALE_RUN])
        if heard != self._marks[0]:
            self.heard = self.framed = now
        if refused != self._marks[1]:
            self.refused = now
        self._marks = (heard, refused)

    def bind(self, register: np.ndarray, copies: np.ndarray, values: np.ndarray) -> None:
        """Point the job at its records (views of the pipeline's registers), already holding its state."""
        self.register, self.copies = register, copies
        self.values = values.reshape(self.copies_count, self.words)
        self.bitmap, self.counter = copies["bitmap"], copies["counter"]
        self.offset, self.phase, self.total = copies["offset"], copies["phase"], copies["total"]

    def set_members(self, cfg: JobConfig) -> None:
        """Who may send for which worker_id, the multicast group, the parent (the slots are kept)."""
        self.cfg = cfg
        # one copy per port: several workers behind one port (plain switches below) get it there
        self.group = tuple(dict.fromkeys(m.source for m in sorted(cfg.members, key=lambda m: m.worker_id)))
        self.up = tuple((m.source,) for m in cfg.parents)  # Emit dests per parent
        if self.row is not None:
            self.pipeline._install_members(self)

    @property
    def updates(self) -> int:
        return int(self.register["updates"])

    @property
    def results(self) -> int:
        return int(self.register["results"])

    @property
    def resends(self) -> int:
        return int(self.register["resends"])

    @property
    def sent_up(self) -> int:
        return int(self.register["sent_up"])

    @property
    def resent_up(self) -> int:
        return int(self.register["resent_up"])

    @property
    def pending(self) -> int:
        return int(self.register["pending"])

    @property
    def dropped(self) -> collections.Counter:
        return _counter(self.register["drops"])

    def reset(self) -> None:
        self.copies[...] = 0  # every field of every copy
        self.values[...] = 0

    def clear_leftovers(self, worker_id: int) -> int:
        """Empty the copies an earlier run left behind, as worker `worker_id` (re)joins before sending.

        A joining worker has sent nothing in its run yet, so no copy of its run can hold its bit
        or be complete (completion needs it): a copy that does, or that holds a bit outside the
        job's workers, is another run's, and is emptied.  Copies holding only the bits of workers
        that joined earlier (its run's first chunks, already on their way) are kept.  Once every
        worker has joined, nothing of an earlier run is left.  Returns the copies emptied.
        """
        seen = self.bitmap
        stale = (seen != 0) & (((seen & (1 << worker_id)) != 0) | ((seen & ~self.cfg.full_mask) != 0)
                               | (self.counter >= self.cfg.children))
        self.bitmap[stale] = 0
        self.counter[stale] = 0
        self.total[stale] = 0
        return int(stale.sum())


class Emit(NamedTuple):
    """One frame to send to each of `dests` (sources, in the members' terms)."""

    dests: tuple[Hashable, ...]
    frame: bytes


_emit = functools.partial(tuple.__new__, Emit)  # Emit((dests, frame)) without NamedTuple's Python-level __new__


class Pipeline:
    """Switch registers plus the per-frame ingress (compiled); the control operations are methods.

    With `reuse_buffers` a RESULT's frame is a memoryview of a buffer the pipeline reuses, valid
    until the next `update` (an I/O loop that sends it at once saves a copy and an allocation
    per packet); otherwise it is fresh bytes.
    """

    def __init__(self, *, reuse_buffers: bool = False) -> None:
        self.jobs: dict[int, _JobState] = {}
        self.reuse_buffers = reuse_buffers
        self.counts = reg.counters()  # frames seen, drops by reason: the switch's `registers.COUNTERS`
        self._source_ids: dict[Hashable, int] = {}
        self._next_id = itertools.count(reg.OTHER_IDS)  # for sources that are neither UDP addresses nor ports
        self._out = bytearray(MAX_FRAME_BYTES)
        self._out_array = np.frombuffer(self._out, np.uint8)
        self._out_view = memoryview(self._out)
        self._layout()
        batch.warm()

    # -- registers ----------------------------------------------------------
    def _layout(self) -> None:
        """(Re)build the registers for the installed jobs, keeping each job's state and counters."""
        jobs = list(self.jobs.values())
        r = reg.Registers(len(jobs), sum(j.copies_count for j in jobs), sum(j.copies_count * j.words for j in jobs),
                          self.counts)
        c = v = 0
        for row, job in enumerate(jobs):
            nc, nv = job.copies_count, job.copies_count * job.words
            r.jobs[row] = job.register
            r.jobs["copy_base"][row], r.jobs["value_base"][row] = c, v
            r.copies[c : c + nc] = job.copies
            r.values[v : v + nv] = job.values.reshape(-1)
            r.job_index[job.cfg.job_id] = row
            job.bind(r.jobs[row, ...], r.copies[c : c + nc], r.values[v : v + nv])
            job.row = row
            c, v = c + nc, v + nv
        self.registers = r
        self.kernel_args = r.kernel_args  # what the compiled entry points take (`batch.udp_batch`, ...)
        self._rows = jobs
        for job in jobs:
            self._install_members(job)

    def _install_members(self, job: _JobState) -> None:
        """Write the job's members and parents into its register: their source ids and names."""
        r = job.register
        r["worker_source"], r["parent_source"] = reg.NO_MEMBER, reg.NO_MEMBER
        r["worker_name"], r["parent_name"] = 0, 0
        for m in job.cfg.members:
            sid = r["worker_source"][m.worker_id] = self.source_id(m.source)
            if sid < reg.PORT_IDS:  # a UDP address: where the batch path sends its RESULTs
                r["worker_name"][m.worker_id] = np.frombuffer(sockaddr_in(*m.source), np.uint8)
            elif sid >= reg.RAW_IDS:  # a worker at its own address behind a port: its replica's destination
                name = reg.raw_name(mac_bytes(m.mac), ip_bytes(m.source.ip), m.source.udp_port)
                r["worker_name"][m.worker_id, : len(name)] = np.frombuffer(name, np.uint8)
        r["parents"] = len(job.cfg.parents)
        r["member"] = job.cfg.parents[0].worker_id if job.cfg.parents else 0
        for k, parent in enumerate(job.cfg.parents):
            sid = r["parent_source"][k] = self.source_id(parent.source)
            if sid < reg.PORT_IDS:  # a UDP address: where the batch path sends partials up
                r["parent_name"][k] = np.frombuffer(sockaddr_in(*parent.source), np.uint8)

    def source_id(self, source: Hashable) -> int:
        """The integer the registers name `source` by (given out once per source)."""
        sid = self._source_ids.get(source)
        if sid is None:
            if isinstance(source, PortAddress):
                sid = reg.raw_source_id(*source)
            elif isinstance(source, tuple) and len(source) == 2:
                sid = reg.udp_source_id(*source)
            elif isinstance(source, int) and not isinstance(source, bool) and 0 <= source < 1 << 32:
                sid = reg.port_source_id(source)
            if sid is None:
                sid = next(self._next_id)
            self._source_ids[source] = sid
        return sid

    @property
    def frames(self) -> int:
        return int(self.counts["frames"][0])

    @property
    def drops(self) -> collections.Counter:
        return _counter(self.counts["drops"][0])

    # -- control plane ------------------------------------------------------
    def add_job(self, cfg: JobConfig, *, origin: str = "add_job") -> None:
        """Install (or replace) a job; its slots start empty.  Slot ranges may not overlap."""
        for other in self.jobs.values():
            if other.cfg.job_id != cfg.job_id and other.cfg.overlaps(cfg):
                raise ValueError(
                    f"job {cfg.job_id}'s slots [{cfg.slot_base}, {cfg.slot_base + cfg.slots}) overlap job "
                    f"{other.cfg.job_id}'s [{other.cfg.slot_base}, {other.cfg.slot_base + other.cfg.slots})"
                )
        self.jobs.pop(cfg.job_id, None)
        self.jobs[cfg.job_id] = _JobState(cfg, self)
        self.jobs[cfg.job_id].origin = origin  # "command line" and "configure" are pinned: no lease removes them
        self._layout()

    def join(self, cfg: JobConfig, member) -> Member | None:
        """Authorize one member of job `cfg` (its members are ignored): install the job if this switch
        lacks it, else check that it has the same shape and add or move the member, keeping the slots.
        Returns the member it replaced, where its rank was held from another place (a restarted worker,
        or a second worker given the same rank: the caller says so), else None."""
        job = self.jobs.get(cfg.job_id)
        if job is None:
            self.add_job(dataclasses.replace(cfg, members=(member,)), origin="join")
            return None
        have = job.cfg
        diffs = [f"{k} {getattr(have, k)} on the switch, {getattr(cfg, k)} asked"
                 for k in ("workers", "words", "slot_base", "slots") if getattr(have, k) != getattr(cfg, k)]
        if diffs:  # the control port adds the command that removes it (`control_port.handle`)
            raise JobMismatch(f"job {cfg.job_id} differs from the one on the switch: {'; '.join(diffs)}", cfg.job_id)
        others = tuple(m for m in have.members if m.worker_id != member.worker_id)
        before = next((m for m in have.members if m.worker_id == member.worker_id), None)
        job.set_members(dataclasses.replace(have, members=others + (member,)))  # mask and parent kept
        job.clear_leftovers(member.worker_id)
        job.heard = time.monotonic()  # a member joining is a member heard
        return before if before is not None and before != member else None

    def leave(self, job_id: int, worker_id: int) -> bool:
        """Member `worker_id` of a job is done: it is no longer authorized, and when it was the last member of
        a job that a join installed the job goes, its slots free.  Whether the job went."""
        job = self._job(job_id)
        others = tuple(m for m in job.cfg.members if m.worker_id != worker_id)
        if not others and job.origin == "join":
            self.remove_job(job_id)
            return True
        job.set_members(dataclasses.replace(job.cfg, members=others))
        return False

    def remove_job(self, job_id: int) -> None:
        self._job(job_id)
        del self.jobs[job_id]
        self._layout()

    def reset_job(self, job_id: int) -> None:
        """Empty every slot copy of a job (after a worker failure, before the survivors go on)."""
        self._job(job_id).reset()

    def note_activity(self, now: float | None = None) -> None:
        """Note which jobs were heard from since the last call (the server calls this every ~0.5 s: the
        compiled rules only count, they keep no clock)."""
        now = time.monotonic() if now is None else now
        for job in self.jobs.values():
            job.note(now)

    def listing(self, now: float | None = None) -> list[dict]:
        """Every job: its shape, members, counters, state, seconds since a member was last heard (idle_s:
        joined, or sent), since its last frame (frame_s) and since a run was last refused (refused_s; None:
        never), its age, where it came from (origin) and whether it is pinned (no lease removes it)."""
        now = time.monotonic() if now is None else now
        self.note_activity(now)
        out = []
        for _, st in sorted(self.jobs.items()):
            entry = st.cfg.to_config()
            idle = round(now - st.heard, 3)
            framed = None if st.framed is None else round(now - st.framed, 3)
            refused = None if st.refused is None else round(now - st.refused, 3)
            entry.update(counters=self._job_counters(st), state=job_state(framed, refused), idle_s=idle,
                         frame_s=framed, refused_s=refused, age_s=round(now - st.installed, 3), origin=st.origin,
                         pinned=st.origin in PINNED)
            out.append(entry)
        return out

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
            "jobs": {job_id: self._job_counters(st) for job_id, st in sorted(self.jobs.items())},
        }

    @staticmethod
    def _job_counters(st: _JobState) -> dict:
        out = {"updates": st.updates, "results": st.results, "resends": st.resends, "pending": st.pending}
        if st.cfg.parents:  # in a tree: partials sent up, and sent up again
            out.update(sent_up=st.sent_up, resent_up=st.resent_up)
        out["drops"] = {d.name.lower(): n for d, n in sorted(st.dropped.items())}
        return out

    def refuse(self, reason: Drop) -> None:
        """A hina frame the parser or checksum unit rejected before `update`: a frame seen, and dropped."""
        self.counts["frames"] += 1
        self.drop(reason)

    def drop(self, reason: Drop, job: _JobState | None = None) -> None:
        self.counts["drops"][0, reason] += 1
        if job is not None:
            job.register["drops"][reason] += 1

    # -- data plane ---------------------------------------------------------
    def update(self, data: bytes | bytearray | memoryview, source: Hashable, length: int | None = None) -> Emit | None:
        """Process one hina frame (header + K words) that arrived from `source`.

        `length` is the hina length the frame claims (UDP length - 8 on raw frames); by default
        the bytes present (the rules, drops included, are `controls.ingress`'s).
        """
        frame = np.frombuffer(data, np.uint8)
        if not frame.flags.writeable:  # bytes: the kernels are compiled for writable frames alone (one variant)
            frame = frame.copy()
        present = frame.size
        sid = self._source_ids.get(source)  # a member's source has its id since it joined
        if sid is None:  # a frame behind a port (its id is arithmetic), or nobody's
            sid = (reg.raw_source_id(*source) if isinstance(source, PortAddress) else None) or reg.NO_SOURCE
        action, row, size = ingress_bytes(*self.kernel_args, frame, 0, present, present if length is None else length,
                                          sid, self._out_array, 0)
        if action == NOTHING:
            return None
        out = self._out_view[:size] if self.reuse_buffers else bytes(self._out_view[:size])
        job = self._rows[row]
        if action == TO_SENDER:  # back where it came from; to the port (its host) for a member known by port
            back = isinstance(source, PortAddress) and job.register["worker_source"][frame[AT_WORKER_ID]] < reg.RAW_IDS
            dests = (source.port,) if back else (source,)
        else:
            dests = job.group if action == TO_GROUP else job.up[action - TO_PARENT]
        return _emit((dests, out))
