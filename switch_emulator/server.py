"""What every emulator I/O backend shares: the select loop, control port, impairments, stats.

A backend (`udp.UdpSwitch`, `raw.RawSwitch`) registers its data sockets,
drains them into `_ingress(frame, source)`, says how to turn a frame into
outputs (`_process`) and how to send one (`_send`); this class does the
rest in one thread: impairments on both directions, the JSON control port
(`control.handle`), periodic counters on stderr with `stats_every`.

With `pipes` P > 1 the backend opens P sets of data sockets that the kernel
steers by slot (`pipes.py`), and this class forks one process per set
(`serve_pipe`), each running the loop above on its own copy of the
pipeline; this process keeps the control port, with `pipes.Pipes` in the
pipeline's place, and watches the pipes.

Every `TICK` seconds the loop notes which jobs were heard from (the
compiled rules count UPDATEs per job; `Pipeline.note_activity` compares the
counts, so nothing is added per packet), and the process that holds the
control port removes the jobs whose lease ran out (`set_lease`: no member
heard for that long; jobs from the command line or a `configure` are
pinned), saying so in one line on stderr.  With a token (`set_token`) the
requests that change the switch must carry proof of it
(`hina.control.auth`).

With a slow pipe (`ImpairmentConfig.pipe_rate`) every frame that the
inbound impairment lets through waits in the pipe's queue
(`slow_pipe.SlowPipe`) until the pipe may take it, then goes through the
rules and the outbound impairment; the loop wakes when the next one may.
On the per-packet path the queue holds the frames themselves; a backend's
batched path may keep them its own way (`_queue_batch`, `_serve_queue`).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import resource
import selectors
import socket
import sys
import threading
import time
from collections.abc import Hashable

import numpy as np

from hina.control.auth import Guard
from hina.control.ledger import Ledger

from .control_port import handle
from .impair import Impairment, ImpairmentConfig
from .pipeline import Pipeline, job_state
from .pipes import PipeDown, Pipes, merge
from .slow_pipe import SlowPipe

TICK = 0.5  # seconds between looks at the jobs' counters (activity, leases)


def _no_clock() -> float:
    return 0.0


def check_pipes(pipes: int) -> int:
    if isinstance(pipes, bool) or not isinstance(pipes, int) or pipes < 1:
        raise ValueError(f"pipes must be a positive integer, got {pipes!r}")
    return pipes


class SwitchServer:
    def __init__(self, pipeline: Pipeline, *, control: tuple[str, int], impair: ImpairmentConfig | None,
                 stats_every: float, stats_stream, pipes: int = 1):
        self.pipeline = pipeline
        self.pipes = check_pipes(pipes)
        self.pipe_set: Pipes | None = None  # the pipe processes, when pipes > 1
        self.pipe_index: int | None = 0 if pipes == 1 else None  # which pipe this process serves
        # seconds: wait, recv, rules, send (and unwrap), where $HINA_PROFILE is 1 (benchmarks/budget.py): a clock
        # read costs a system call, so a switch that is not asked reads none
        self.profile: collections.Counter[str] = collections.Counter()
        self.clock = time.thread_time if os.environ.get("HINA_PROFILE") == "1" else _no_clock
        self._pipe_socks: list[list[tuple[socket.socket, Hashable]]] = []  # per pipe, filled by the backend
        self._channel: socket.socket | None = None  # a pipe's control requests from the parent
        self._control = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._control.bind(control)
        self._control_name = self._control.getsockname()  # kept for the pipes, which close the socket
        self.started = time.monotonic()
        self.lease = 0.0  # seconds without a member heard before a job is removed; 0: never (`set_lease`)
        self.guard: Guard | None = None  # the token's check, where the switch has one (`set_token`)
        self.ledger = Ledger()  # the slots it hands out, their policy, who waits, who owns what (`set_slots`)
        self._log = lambda line: print(f"hina.emulator: {line}", file=sys.stderr, flush=True)
        self._impair_cfg = cfg = impair or ImpairmentConfig()
        self.impair_in = Impairment(cfg, stream=1)
        self.impair_out = Impairment(cfg, stream=2)
        self._impaired = cfg.active
        self.slow_pipe = SlowPipe(cfg.pipe_rate, cfg.pipe_queue) if cfg.pipe_rate else None
        self._waiting: collections.deque[tuple[bytes, Hashable]] = collections.deque()  # the per-packet path's
        self._holds = self._impaired or self.slow_pipe is not None  # a frame may wait: the per-packet path copies it
        self._outbox: list[tuple[bytes, Hashable]] = []  # what the impaired path lets out, sent together (`_flush`)
        self._stop = threading.Event()
        self.tx_errors = 0
        self._stats_every, self._stats_stream = stats_every, stats_stream or sys.stderr

    def set_lease(self, seconds: float) -> None:
        """Remove a job (not pinned) once none of its members has been heard for `seconds`; 0: never."""
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
            raise ValueError(f"a lease is a finite number of seconds >= 0 (0: none), got {seconds!r}")
        self.lease = float(seconds)

    def set_token(self, token: bytes | None, tenants: dict[str, bytes] | None = None) -> None:
        """Refuse state-changing control requests without proof of `token` (the operator's) or of a tenant's
        secret (`tenants`: owner -> secret); None and no tenants: take them all."""
        self.guard = Guard(token, tenants=tenants) if token or tenants else None

    def set_slots(self, space: int, policy: str) -> None:
        """The slots this switch hands out to jobs that join without a range, and how it shares them."""
        self.ledger = Ledger(space, policy)

    def _start_pipes(self) -> None:
        """With pipes > 1, fork the pipe processes (once the backend has filled `_pipe_socks`)."""
        if self.pipes > 1:
            try:
                self.pipe_set = Pipes(self.pipes, self.serve_pipe)
            except BaseException:
                self.close()
                raise
            self.pipeline = self.pipe_set

    def serve_pipe(self, index: int, channel: socket.socket) -> None:
        """In a forked pipe process: serve pipe `index`'s sockets, take control requests from `channel`."""
        self.pipe_index, self._channel, self.pipe_set = index, channel, None
        self._control.close()
        for i, socks in enumerate(self._pipe_socks):
            if i != index:
                for sock, _ in socks:
                    sock.close()
        cfg = dataclasses.replace(self._impair_cfg, seed=self._impair_cfg.seed + index)
        self.impair_in = Impairment(cfg, stream=1)
        self.impair_out = Impairment(cfg, stream=2)
        self.slow_pipe = SlowPipe(cfg.pipe_rate, cfg.pipe_queue) if cfg.pipe_rate else None  # each pipe its own
        self._stats_every = 0.0  # the parent prints the summed counters
        self._stop = threading.Event()
        self._enter_pipe(index)
        self.serve_forever()

    # -- for backends ----------------------------------------------------------
    def _enter_pipe(self, index: int) -> None:
        """In the pipe process: make pipe `index`'s sockets the ones `_drain` and `_send` use."""

    def _data_sockets(self) -> list[tuple[socket.socket, Hashable]]:
        """The data sockets this process serves: its pipe's (none in the parent of several pipes)."""
        return [] if self.pipe_index is None else self._pipe_socks[self.pipe_index]

    def _drain(self, sock: socket.socket, tag: Hashable) -> None:
        raise NotImplementedError

    def _process(self, frame: bytes, source: Hashable) -> list[tuple[Hashable, bytes]]:
        raise NotImplementedError

    def _send(self, frame: bytes, dest: Hashable) -> None:
        raise NotImplementedError

    def _send_all(self, frames: list[tuple[bytes, Hashable]]) -> None:
        """Send every (frame, destination): one `_send` each here; a backend with batched sockets sends them
        with one system call (`_send_ring`)."""
        for frame, dest in frames:
            self._send(frame, dest)

    def _send_ring(self, io, frames: list[tuple[bytes, Hashable]], address) -> None:
        """Send `frames` with one sendmmsg on `io` (a `BatchSocket`; a ring's worth at a time), each to
        `address(destination)`, its socket address as the ring names it; one whose `address` is None goes by
        `_send`."""
        m = used = 0
        for frame, dest in frames:
            name = address(dest)
            if name is None:
                self._send(frame, dest)
                continue
            size = len(frame)
            if m == io.tx_capacity or used + size > io.tx_array.size:
                self._sent(io, m)
                m = used = 0
            io.tx_array[used : used + size] = np.frombuffer(frame, np.uint8)
            io.tx_names_array[m] = name
            io.tx_iov[2 * m], io.tx_iov[2 * m + 1] = io.tx_address + used, size
            m, used = m + 1, used + size
        self._sent(io, m)

    def _sent(self, io, messages: int) -> None:
        """Send ring messages 0..messages-1 of `io`, counting them and the call (`profile`) and any refused."""
        if messages:
            self.tx_errors += io.send(messages)
            self.profile["sent"] += messages
            self.profile["sends"] += 1

    def _configure(self):  # a callable installing a Topology, or None
        return None

    def counters(self) -> dict:
        if self.pipe_set is not None:
            return self.pipe_set.counters()  # each pipe's already holds its impairment counters
        return {**self.pipeline.counters(), **self.impairment_counters(), "profile": self.profile_counters()}

    def profile_counters(self) -> dict:
        """Where this process's time went: waiting in select (wall seconds), the backend's batched path's
        receiving, compiled rules (replicas written included) and sending (CPU seconds of the serving thread;
        `self.profile`, with the datagrams received and sent and the system calls that moved them: `receives`,
        the reads that found any, and `sends`); and its CPU time, user and system.  Summed over the pipes with
        their counters."""
        cpu = resource.getrusage(resource.RUSAGE_SELF)  # microseconds (os.times counts clock ticks: 10 ms)
        return {**self.profile, "cpu_user": cpu.ru_utime, "cpu_system": cpu.ru_stime}

    # -- shared ----------------------------------------------------------------
    @property
    def control_address(self) -> tuple[str, int]:
        return self._control_name

    # -- jobs: listing, leases -------------------------------------------------
    def listing(self) -> list[dict]:
        """Every job (`Pipeline.listing`, summed over the pipes), with its lease: seconds left (None: pinned
        or no lease)."""
        if self.pipe_set is None:
            jobs = self.pipeline.listing()
        else:
            jobs = self._pipe_listing()
        for job in jobs:
            job["lease_left_s"] = (None if job["pinned"] or not self.lease
                                   else round(max(0.0, self.lease - job["idle_s"]), 3))
        return jobs

    def _pipe_listing(self) -> list[dict]:
        """Each live pipe's jobs merged: counters summed, the latest activity of any pipe."""
        merged: dict[int, dict] = {}
        for index in range(self.pipe_set.count):
            try:
                reply = self.pipe_set._ask(index, {"op": "jobs"})
            except PipeDown:
                continue
            for job in reply.get("jobs", []):
                have = merged.get(job["job_id"])
                if have is None:
                    merged[job["job_id"]] = job
                    continue
                merge(have["counters"], job["counters"])
                have["idle_s"] = min(have["idle_s"], job["idle_s"])
                have["age_s"] = max(have["age_s"], job["age_s"])
                for key in ("frame_s", "refused_s"):  # None: never
                    if job[key] is not None:
                        have[key] = job[key] if have[key] is None else min(have[key], job[key])
        for job in merged.values():
            job["state"] = job_state(job["frame_s"], job["refused_s"])
        return [merged[k] for k in sorted(merged)]

    def info(self) -> dict:
        """What `status` adds: uptime, the lease, whether a token guards the port, each job's lease left."""
        jobs = self.listing()
        return {"uptime_s": round(time.monotonic() - self.started, 3), "lease_s": self.lease,
                "token": self.guard is not None, "tenants": sorted(self.guard.tenants) if self.guard else [],
                "slot_space": self.ledger.space, "slot_policy": self.ledger.policy,
                "waiting": list(self.ledger.waiting), "jobs": len(jobs),
                "leases": {job["job_id"]: job["lease_left_s"] for job in jobs}}

    def _tick(self, now: float) -> None:
        """Note the jobs' activity; where this process holds the control port, end the leases that ran out."""
        if self.pipe_set is None:
            self.pipeline.note_activity(now)
        if self._channel is not None or not self.lease:
            return
        for job in self.listing():
            if job["lease_left_s"] is None or job["lease_left_s"] > 0:
                continue
            try:
                self.pipeline.remove_job(job["job_id"])
            except Exception as exc:  # noqa: BLE001 - a pipe down: said in its own line; try again next tick
                self._log(f"job {job['job_id']}'s lease ran out, but removing it failed: {exc}")
                continue
            self.ledger.forget(job["job_id"])
            self._log(f"job {job['job_id']} removed: none of its members heard for {job['idle_s']:.0f} s "
                      f"(lease {self.lease:g} s); slots [{job['slot_base']}, {job['slot_base'] + job['slots']}) "
                      f"are free")

    def impairment_counters(self) -> dict:
        if self.pipe_set is not None:  # summed over the pipes
            counters = self.pipe_set.counters()
            return {key: counters.get(key, {}) for key in ("impair_in", "impair_out", "slow_pipe")} | {
                "tx_errors": counters.get("tx_errors", 0)}
        return {"impair_in": dict(self.impair_in.stats), "impair_out": dict(self.impair_out.stats),
                "slow_pipe": dict(self.slow_pipe.stats) if self.slow_pipe else {}, "tx_errors": self.tx_errors}

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        """Stop serving, stop the pipes, close the sockets, after the serving thread (if any) has let go."""
        self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        if self.pipe_set is not None:
            self.pipe_set.close()
        for socks in self._pipe_socks:
            for sock, _ in socks:
                sock.close()
        self._control.close()

    def start_thread(self) -> threading.Thread:
        """Serve in a daemon thread (tests, in-process demos); `stop()` or `close()` ends it."""
        self._thread = threading.Thread(target=self.serve_forever, name="hina-switch", daemon=True)
        self._thread.start()
        return self._thread

    def _ingress(self, frame: bytes, source: Hashable) -> None:
        if not self._holds:  # the fast path: no impairment bookkeeping per packet
            for dest, out in self._process(frame, source):
                self._send(out, dest)
            return
        now = time.monotonic()
        for f, src in self.impair_in.apply((frame, source), source, now):
            self._to_rules(f, src, now)

    def _to_rules(self, frame: bytes, source: Hashable, now: float) -> None:
        """A frame past the inbound impairment: through the rules now, or into the slow pipe's queue."""
        if self.slow_pipe is None:
            return self._impaired_process(frame, source, now)
        if self.slow_pipe.arrive(now, 1):
            self._waiting.append((frame, source))
        self._serve_queue(now)

    def _serve_queue(self, now: float) -> None:
        """The frames whose turn in the slow pipe has come, through the rules (the per-packet path's queue)."""
        for _ in range(self.slow_pipe.take(now)):
            frame, source = self._waiting.popleft()
            self._impaired_process(frame, source, now)

    def _impaired_process(self, frame: bytes, source: Hashable, now: float) -> None:
        for dest, out in self._process(frame, source):
            # the backend may hand out a reused buffer: copy what the impairment may hold back
            self._outbox.extend(self.impair_out.apply((bytes(out), dest), dest, now))

    def _flush(self) -> None:
        """Send what the impaired path let out since the last flush (every member's replica of each RESULT,
        what the delay line released) together: one sendmmsg a turn of the loop where the backend batches,
        not one send per member."""
        if self._outbox:
            frames, self._outbox = self._outbox, []
            self._send_all(frames)

    def serve_forever(self) -> None:
        if self.pipe_set is not None:
            return self._watch_pipes()
        sel = selectors.DefaultSelector()
        for sock, tag in self._data_sockets():
            sel.register(sock, selectors.EVENT_READ, ("data", tag))
        sel.register(self._channel or self._control, selectors.EVENT_READ, ("control", None))
        next_stats = time.monotonic() + self._stats_every if self._stats_every > 0 else None
        next_tick = time.monotonic() + TICK
        try:
            while not self._stop.is_set():
                timers = [t for t in (self.impair_in.next_timer(), self.impair_out.next_timer(), next_stats,
                                      next_tick, self.slow_pipe and self.slow_pipe.next_timer()) if t is not None]
                timeout = max(0.0, min(timers) - time.monotonic()) if timers else 0.2
                t = self.clock()
                ready = sel.select(timeout)
                self.profile["wait"] += self.clock() - t
                for key, _ in ready:
                    kind, tag = key.data
                    if kind == "data":
                        self._drain(key.fileobj, tag)
                    else:
                        self._serve_control()
                now = time.monotonic()
                for frame, source in self.impair_in.due(now):
                    self._to_rules(frame, source, now)
                if self.slow_pipe is not None:
                    self._serve_queue(now)
                self._outbox.extend(self.impair_out.due(now))
                self._flush()
                if now >= next_tick:
                    next_tick = now + TICK
                    self._tick(now)
                if next_stats is not None and now >= next_stats:
                    next_stats = now + self._stats_every
                    print(json.dumps(self.counters()), file=self._stats_stream, flush=True)
        finally:
            sel.close()

    def _watch_pipes(self) -> None:
        """The parent of several pipes: serve the control port, report pipes that die, print stats."""
        pipes = self.pipe_set
        sel = selectors.DefaultSelector()
        for index, sentinel in enumerate(pipes.sentinels):
            sel.register(sentinel, selectors.EVENT_READ, index)
        sel.register(self._control, selectors.EVENT_READ, None)
        next_stats = time.monotonic() + self._stats_every if self._stats_every > 0 else None
        next_lease = time.monotonic() + 2 * TICK  # a round trip to every pipe: not more often than this
        try:
            while not self._stop.is_set():
                timeout = max(0.0, next_stats - time.monotonic()) if next_stats is not None else 0.2
                for key, _ in sel.select(min(timeout, 0.2)):
                    if key.data is None:
                        self._serve_control()
                    else:
                        sel.unregister(key.fileobj)
                        self._report_down()
                self._report_down()
                if self.lease and time.monotonic() >= next_lease:
                    next_lease = time.monotonic() + 2 * TICK
                    self._tick(time.monotonic())
                if next_stats is not None and time.monotonic() >= next_stats:
                    next_stats = time.monotonic() + self._stats_every
                    print(json.dumps(self.counters()), file=self._stats_stream, flush=True)
        finally:
            sel.close()

    def _report_down(self) -> None:
        self.pipe_set.poll()  # logs each pipe found dead on stderr

    def _serve_control(self) -> None:
        sock = self._channel or self._control
        try:
            request, peer = sock.recvfrom(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        if self._channel is not None and not request:
            self._stop.set()  # the parent closed its end: it is gone or stopping
            return
        status = extra = None
        if self.pipe_set is not None:  # each pipe's counters hold its own extras
            status = self.pipe_set.status
        else:
            extra = {k: v for k, v in self.counters().items() if k not in ("frames", "drops", "jobs")}
        owner = self._channel is None  # the process holding the control port: a pipe's parent checks for it
        reply, shutdown = handle(self.pipeline, request, extra=extra, configure=self._configure(), status=status,
                                 listing=self.listing if owner else None, info=self.info if owner else None,
                                 guard=self.guard if owner else None, peer=peer if owner else None,
                                 where=self._control_name, ledger=self.ledger if owner else None)
        try:
            if self._channel is not None:
                sock.send(json.dumps(reply).encode())
            else:
                sock.sendto(json.dumps(reply).encode(), peer)
        except OSError:
            pass
        if shutdown:
            self._stop.set()
