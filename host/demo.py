"""The main job: the emulator on loopback, N worker processes, every result checked exact.

`run_demo` starts `python -m hina.emulator` as a process, starts N worker
processes that each bind a UDP socket, registers them with the switch's
control port, lets them aggregate synthetic sparse gradients at the same
moment, and compares every worker's result with numpy's sum of the
quantized inputs, which it rebuilds from the same seeds.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import multiprocessing as mp
import os
import resource
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from hina import codec, kernels
from hina.cliargs import MAX_PIPE_QUEUE, MAX_PIPES, PIPE_QUEUE, plural
from hina.control.client import ControlClient
from hina.control.config import Member
from hina.wire.headers import UDP_PORT

from . import workloads
from .congestion_settings import CongestionSettings
from .job import JobSpec
from .synthetic import gradient_for, workload_preset
from .transport import UdpTransport

if TYPE_CHECKING:
    from .agent import Worker


@dataclasses.dataclass(frozen=True)
class DemoConfig:
    workers: int = 4
    length: int = 1 << 22
    density: float = 0.01
    mode: str = "auto"
    drop: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0
    seed: int = 0
    job: JobSpec = JobSpec()
    deadline: float = 20.0
    workload: str | None = None  # a preset of benchmarks/workloads.py instead of uniform sparsity
    scale: float = 1.0
    group: int = 0  # the index's group size (codec.CodecParams.group; 0: chosen per tensor)
    link_gbps: float = 10.0  # the cost model's link rate (codec.CodecParams.link_gbps)
    rounds: int = 1  # aggregations per worker process; with more than one, `seconds` is the steady state
    pipes: int = 1  # the switch's data plane processes (python -m hina.emulator --pipes)
    pipe_rate: float = 0.0  # packets a second each pipe takes at most (--pipe-rate; 0: as fast as it goes)
    pipe_queue: int = PIPE_QUEUE  # packets waiting for a slow pipe at most (--pipe-queue)
    congestion: CongestionSettings = CongestionSettings()  # the workers' congestion windows and pacers

    def __post_init__(self) -> None:
        if self.workload is not None:  # the preset fixes the length
            object.__setattr__(self, "length", workload_preset(self.workload, self.scale).size)
        self.params  # noqa: B018 - refuse bad parameters here, before any process starts
        for name in ("density", "drop", "dup", "reorder"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value}")
        if not 0 < self.deadline < float("inf"):
            raise ValueError(f"deadline must be a positive number of seconds, got {self.deadline}")
        if self.rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {self.rounds}")
        if not 1 <= self.pipes <= MAX_PIPES:
            raise ValueError(f"pipes must be 1..{MAX_PIPES}, got {self.pipes}")
        if not 0 <= self.pipe_rate < float("inf"):
            raise ValueError(f"pipe_rate must be a finite number of packets per second >= 0, got {self.pipe_rate}")
        if not 1 <= self.pipe_queue <= MAX_PIPE_QUEUE:
            raise ValueError(f"pipe_queue must be 1..{MAX_PIPE_QUEUE} packets, got {self.pipe_queue}")

    @property
    def params(self) -> codec.CodecParams:
        return codec.CodecParams(length=self.length, workers=self.workers, mode=self.mode, group=self.group,
                                 link_gbps=self.link_gbps)

    def gradient(self, rank: int) -> np.ndarray:
        return gradient_for(self.length, self.density, seed=self.seed, rank=rank, workload=self.workload,
                            scale=self.scale)


def digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def expected_fixed(workers: int, length: int, density: float, seed: int, workload: str | None = None,
                   scale: float = 1.0) -> np.ndarray:
    """numpy's sum of the workers' quantized inputs: the answer every worker must get."""
    grads = [gradient_for(length, density, seed=seed, rank=w, workload=workload, scale=scale)
             for w in range(workers)]
    shift = codec.shift_for(max(codec.exponent(g) for g in grads), workers)
    total = np.zeros(length, dtype=np.int64)
    for g in grads:
        total += codec.quantize(g, shift)
    return total.astype(np.int32)


def timed_aggregate(worker: Worker, params: codec.CodecParams, grad: np.ndarray,
                    out: np.ndarray | None = None) -> dict[str, Any]:
    """Aggregate once and report what an orchestrator needs: a digest of the result and the costs."""
    before = worker.stats.copy()  # the worker's counters run over its whole life: report this round's
    io = worker.batch_io
    sent = io.sent if io is not None else 0
    spent = worker.profile.copy()
    cpu = resource.getrusage(resource.RUSAGE_SELF)  # microseconds (os.times counts clock ticks: 10 ms)
    start = time.perf_counter()
    result = worker.aggregate(params, grad, out=out)
    seconds = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    stats = worker.stats - before
    profile = {k: v - spent.get(k, 0.0) for k, v in worker.profile.items()}
    profile.update(cpu_user=cpu_after.ru_utime - cpu.ru_utime, cpu_system=cpu_after.ru_stime - cpu.ru_stime)
    return {
        "digest": digest(result.fixed), "seconds": seconds, "wire_bytes": stats["bytes"],
        "frames": stats["frames"],
        # what left by batched sends: its messages, fewer than its frames where the kernel cut them (segmentation
        # offload); 0 without batched I/O
        "messages": io.sent - sent if io is not None else 0, "retransmissions": stats["retransmissions"],
        "timeouts": stats["timeouts"], "fast_retransmissions": stats["fast_retransmissions"],
        "probes": stats["probes"],
        # PENDING answers heard (the switch holds the chunk and waits for the members it lacks), and the chunks
        # sent again on them: held ones asking again, and ones the answer said were lost
        "pending": stats["pending"], "asked": stats["asked"],
        "ignored": stats["ignored"], "payload_bytes": sum(result.bytes_sent.values()),
        "phases": worker.phase_seconds, "compute": result.seconds, "payload_by_phase": result.bytes_sent,
        "union": result.union, "residual": result.residual, "encoding": result.encoding, "group": result.group,
        "rounds": result.rounds, "profile": profile,
    }


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_SECONDS = 5.0  # how long the demo's processes have to end on their own once it is done, all at once


def die_with_parent(parent: int) -> None:
    """In a child of the demo: end (SIGKILL) when the demo does, whatever ends it, a SIGKILL included
    (PR_SET_PDEATHSIG; Linux); ^C reaches the whole terminal's group, and the demo stops its children itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the demo's own cleanup is all there is
        pass
    if os.getppid() != parent:  # the demo ended before the request took
        os._exit(1)


def _worker_main(cfg: DemoConfig, rank: int, switch: tuple[str, int], conn, parent: int) -> None:
    """One worker process: load its kernels, bind, report its address, wait for go, aggregate, report."""
    die_with_parent(parent)
    try:
        start = time.perf_counter()  # before anything imports them: no limit in seconds covers a compile
        from .agent import Worker, load_kernels

        load_kernels()
        conn.send(("kernels", time.perf_counter() - start))
        grad = cfg.gradient(rank)
        with UdpTransport(switch, segment_offload=cfg.pipes == 1) as transport:
            conn.send(("ready", transport.address))
            if conn.recv() != "prepare":
                return
            # before the first round, as a training job sets up before its first step: the codec's kernels
            # loaded, the buffers touched, the run's identity agreed (with every worker, the job installed)
            start = time.perf_counter()
            worker = Worker(transport, cfg.job, rank, deadline=cfg.deadline, pipes=cfg.pipes, congestion=cfg.congestion)
            worker.prepare(cfg.params, grad)
            conn.send(("prepared", time.perf_counter() - start))
            if conn.recv() != "go":
                return
            out = np.empty(grad.size, dtype=np.int32)  # reused, as a training step reuses its buffers
            out.fill(0)  # its pages touched before the first round is timed
            reports = []
            for r in range(cfg.rounds):
                if r:  # every round starts together, as a training step's allreduce: a worker still
                    conn.send(("round", r))  # hashing its last result must not count in the others' time
                    if conn.recv() != "go":
                        return
                reports.append(timed_aggregate(worker, cfg.params, grad, out=out))
            conn.send(("done", reports))
    except Exception as exc:  # reported, never swallowed: the parent prints it and fails
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def start_switch(cfg: DemoConfig, warn=lambda line: print(line, file=sys.stderr, flush=True)) -> tuple[
        subprocess.Popen, dict]:
    """`python -m hina.emulator` with the demo's impairments; returns the process and its addresses.

    It listens on UDP port 0x4E41, hina's port, so that captures of the demo dissect as hina in
    scapy and Wireshark as they are; if another process holds that port, on a free one, and `warn`
    says so (a capture filtered on port 20033 would then see nothing of the demo).
    """
    for port in (UDP_PORT, 0):
        if port == 0:
            warn(f"hina demo: UDP port {UDP_PORT} (hina's) is in use, by another switch or demo: this demo's "
                 f"switch listens on a free port instead (captures: filter on the port printed below, and "
                 f"decode it as hina: tshark -d udp.port==PORT,hina)")
        cmd = [sys.executable, "-m", "hina.emulator", "--listen", f"127.0.0.1:{port}", "--drop", str(cfg.drop),
               "--dup", str(cfg.dup), "--reorder", str(cfg.reorder), "--seed", str(cfg.seed),
               "--pipes", str(cfg.pipes), "--pipe-rate", str(cfg.pipe_rate), "--pipe-queue", str(cfg.pipe_queue)]
        parent = os.getpid()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: die_with_parent(parent))
        line = proc.stdout.readline()
        if line:
            where = json.loads(line)
            if port == 0:
                warn(f"hina demo: the switch listens on {where['data'][0]}:{where['data'][1]}")
            return proc, where
        proc.wait(5)
        error = proc.stderr.read().strip()
        if "in use" not in error:
            break
    raise RuntimeError(f"the switch emulator did not start: {error}")


def run_demo(cfg: DemoConfig, log=lambda msg: None) -> dict[str, Any]:
    """Run the main job once and return its summary (see README for the keys)."""
    # the kernels first, each group by one process, with progress: the switch and the workers then load
    # them in milliseconds (on a machine that compiled them before: nothing to do)
    kernels.compile_all()
    switch, where = start_switch(cfg)
    data, control = tuple(where["data"]), tuple(where["control"])
    slow = f", each pipe {cfg.pipe_rate:g} packets/s, {cfg.pipe_queue} queued at most" if cfg.pipe_rate else ""
    log(f"switch emulator on {data[0]}:{data[1]} (control {control[1]}), drop={cfg.drop} dup={cfg.dup} "
        f"reorder={cfg.reorder}{slow}")
    procs: list = []
    try:
        conns, members = _start_workers(cfg, data, procs)
        with ControlClient(control) as ctl:
            ctl.add_job(cfg.job.switch_config(cfg.workers, members))
            log(f"{plural(cfg.workers, 'worker')} ready; job {cfg.job.job_id}: K={cfg.job.words} words/packet, "
                f"{plural(cfg.job.slots, 'slot')}; aggregating {plural(cfg.length, 'element')}, {_what(cfg)}, "
                f"mode {cfg.mode}, "
                f"{plural(cfg.rounds, 'round')}")
            log("computing numpy's reference sum ...")
            expected = digest(expected_fixed(cfg.workers, cfg.length, cfg.density, cfg.seed, cfg.workload, cfg.scale))
            prepare = _prepare_workers(cfg, conns)
            log(f"workers prepared (kernels loaded, run agreed) in {max(prepare):.3f} s")
            per_worker, errors = _run_rounds(cfg, conns, log)
            counters = ctl.counters()
            ctl.shutdown()
    except BaseException:  # a failure, or a signal (`hina demo` turns SIGTERM into one): nothing waits for the rest
        stop(procs, switch, wait=0.0)
        raise
    stop(procs, switch)
    summary = _summary(cfg, per_worker, errors, counters, expected)
    summary["prepare_seconds"] = max(prepare)
    return summary


def stop(procs: list, switch: subprocess.Popen, wait: float = STOP_SECONDS) -> None:
    """End the demo's processes, all at once: each has `wait` seconds to end on its own (a worker that sent its
    last report, a switch told to shut down), then SIGTERM, then SIGKILL."""
    give_up = time.monotonic() + wait
    for p in procs:
        p.join(max(0.0, give_up - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.terminate()
    if switch.poll() is None:
        try:
            switch.wait(max(0.0, give_up - time.monotonic()))
        except subprocess.TimeoutExpired:
            switch.terminate()
    for p in procs:
        p.join(STOP_SECONDS)
        if p.is_alive():
            p.kill()
            p.join()
    try:
        switch.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        switch.kill()
        switch.wait()


def _prepare_workers(cfg: DemoConfig, conns: list) -> list[float]:
    """Every worker prepares at once (the run's identity is agreed between them); each one's seconds."""
    for conn in conns:
        conn.send("prepare")
    seconds = []
    for rank, conn in enumerate(conns):
        kind, value = _expect(conn, cfg.deadline + 60, rank)
        if kind != "prepared":
            raise RuntimeError(f"worker {rank} failed to prepare: {value}")
        seconds.append(value)
    return seconds


def _start_workers(cfg: DemoConfig, data: tuple[str, int], procs: list) -> tuple[list, list[Member]]:
    """One process per worker (appended to `procs`), each bound to its own port: (its pipe, the members)."""
    ctx = mp.get_context("spawn")
    conns = []
    for rank in range(cfg.workers):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker_main, args=(cfg, rank, data, child, os.getpid()), daemon=True)
        p.start()
        procs.append(p)
        conns.append(parent)
    for rank, (conn, p) in enumerate(zip(conns, procs[-cfg.workers:])):
        kind, value = _while_alive(conn, p, rank)  # loading (or compiling) kernels: no limit in seconds
        if kind != "kernels":
            raise RuntimeError(f"worker {rank} failed before starting: {value}")
    members = []
    for rank, conn in enumerate(conns):
        kind, value = _expect(conn, cfg.deadline + 60, rank)
        if kind != "ready":
            raise RuntimeError(f"worker {rank} failed before starting: {value}")
        members.append(Member(rank, tuple(value)))
    return conns, members


def _what(cfg: DemoConfig) -> str:
    """The gradients, as the log names them."""
    if not cfg.workload:
        return f"{cfg.density:.2%} per worker"
    dens = workloads.densities([cfg.gradient(w) for w in range(cfg.workers)])
    return (f"workload {cfg.workload} (scale {cfg.scale}): {dens['per_worker']:.2%} per worker, "
            f"{dens['union']:.2%} union")


def _run_rounds(cfg: DemoConfig, conns: list, log) -> tuple[list[list[dict]], list[str]]:
    """Start every round on every worker still alive; (each finished worker's reports by round, the errors)."""
    errors, failed = [], set()
    wait = cfg.deadline * 20 + 60
    for r in range(cfg.rounds):
        for rank, conn in enumerate(conns):
            if rank not in failed:
                conn.send("go")
        if r == cfg.rounds - 1:
            break
        for rank, conn in enumerate(conns):  # between rounds: wait until every worker is ready
            if rank not in failed:
                kind, value = _expect(conn, wait, rank)
                if kind != "round":
                    failed.add(rank)
                    errors.append(f"worker {rank}: {value}")
                    log(f"worker {rank} FAILED: {value}")
    per_worker = []
    for rank, conn in enumerate(conns):
        if rank in failed:
            continue
        kind, value = _expect(conn, wait, rank)
        if kind == "done":
            per_worker.append(value)
            times = ", ".join(f"{v['seconds']:.3f}" for v in value)
            log(f"worker {rank}: {times} s, {plural(sum(v['retransmissions'] for v in value), 'retransmission')}")
        else:
            errors.append(f"worker {rank}: {value}")
            log(f"worker {rank} FAILED: {value}")
    return per_worker, errors


def _summary(cfg: DemoConfig, per_worker: list[list[dict]], errors: list[str], counters: dict,
             expected: str) -> dict[str, Any]:
    """The job's summary from every worker's reports: exact or not, the steady state's round, bytes, resends."""
    exact = not errors and all(r["digest"] == expected for rounds in per_worker for r in rounds)
    # each round's time is its slowest worker's; past the first, the best round is the steady state
    round_seconds = ([max(rounds[i]["seconds"] for rounds in per_worker) for i in range(cfg.rounds)]
                     if per_worker else [])
    seconds = min(round_seconds[1:] or round_seconds, default=None)  # None (JSON null): no worker finished
    best = round_seconds.index(seconds) if per_worker else 0
    reports = [rounds[best] for rounds in per_worker]
    n = max(len(reports), 1)
    first = reports[0] if reports else {}
    return {
        "exact": exact,
        "mode": cfg.mode,
        "workers": cfg.workers,
        "length": cfg.length,
        "density": cfg.density,
        "workload": cfg.workload,
        "scale": cfg.scale if cfg.workload else None,
        "bytes_per_worker": round(sum(r["wire_bytes"] for r in reports) / n),
        "dense_bytes_per_worker": 4 * cfg.length,
        "seconds": seconds,
        "first_seconds": round_seconds[0] if round_seconds else None,
        "round_seconds": round_seconds,
        "goodput_gbps": 4 * cfg.length * 8 / seconds / 1e9 if reports else None,
        "retransmissions": sum(r["retransmissions"] for r in reports),
        "timeouts": sum(r["timeouts"] for r in reports),  # of them: the oldest chunk, resent on a timeout
        "fast_retransmissions": sum(r["fast_retransmissions"] for r in reports),  # of them: overtaken chunks
        "probes": sum(r["probes"] for r in reports),  # of them: tail probes after a silence
        "switch_drops": sum(counters["drops"].values()),
        "switch_drop_reasons": counters["drops"],
        "payload_bytes_per_worker": round(sum(r["payload_bytes"] for r in reports) / n),
        "frames_per_worker": round(sum(r["frames"] for r in reports) / n),
        "phase_seconds": first.get("phases", {}),
        "payload_by_phase": first.get("payload_by_phase", {}),
        "encoding": first.get("encoding"),
        "group": first.get("group"),
        "compute_seconds": first.get("compute", {}),
        "union": first.get("union"),
        "residual": first.get("residual"),
        "impairments": {k: counters.get(k, {}) for k in ("impair_in", "impair_out", "slow_pipe")},
        "errors": errors,
    }


def _while_alive(conn, proc, rank: int):
    """The next message from a worker, however long it takes, as long as its process lives."""
    while not conn.poll(1.0):
        if not proc.is_alive():
            if conn.poll(0):  # it said something just before it ended
                break
            raise RuntimeError(f"worker {rank} ended (exit status {proc.exitcode}) while loading its kernels")
    return conn.recv()


def _expect(conn, timeout: float, rank: int):
    if not conn.poll(timeout):
        raise RuntimeError(f"worker {rank} said nothing for {timeout:g} s")
    return conn.recv()


def _index_label(s: dict[str, Any]) -> str:
    if s.get("encoding") in ("aligned", "sketch"):
        return ", one-level index" if s["group"] == 1 else f", two-level index of {s['group']}-element groups"
    return ""


def _seconds_line(s: dict[str, Any]) -> str:
    if s["seconds"] is None:
        return "seconds:          none (no worker finished)"
    phases = ", ".join(f"{k} {v:.3f}" for k, v in s["phase_seconds"].items())
    line = f"seconds:          {s['seconds']:.3f} ({phases})"
    if len(s["round_seconds"]) > 1:
        line += f"; steady state of {len(s['round_seconds'])} rounds, the first took {s['first_seconds']:.3f}"
    return line


def _drops_line(s: dict[str, Any]) -> str:
    """The frames the switch dropped: those its impairment was asked to (--drop, each direction), those a slow
    pipe's full queue dropped, then those its rules dropped, by reason; and the frames --dup and --reorder
    touched."""
    impaired = s.get("impairments", {})
    into, out, slow = (impaired.get(k, {}) for k in ("impair_in", "impair_out", "slow_pipe"))
    parts = []
    asked = into.get("dropped", 0) + out.get("dropped", 0)
    if asked:
        parts.append(f"{asked:,} by the impairment ({into.get('dropped', 0):,} in, {out.get('dropped', 0):,} out)")
    if slow.get("dropped"):
        parts.append(f"{slow['dropped']:,} by the slow pipe's full queue")
    if s["switch_drops"]:
        reasons = ", ".join(f"{reason} {n:,}" for reason, n in s["switch_drop_reasons"].items())
        parts.append(f"{s['switch_drops']:,} of its own ({reasons})")
    line = f"switch drops:     {', '.join(parts) or 'none'}"
    touched = [plural(into.get(k, 0) + out.get(k, 0), "frame") + f" {k}" for k in ("duplicated", "reordered")
               if into.get(k, 0) + out.get(k, 0)]
    return line + (f"; {', '.join(touched)}" if touched else "")


def format_summary(s: dict[str, Any]) -> str:
    lines = [
        f"exact:            {'yes, every worker' if s['exact'] else 'NO'}",
        f"mode:             {s['mode']} (ran {s['encoding']}{_index_label(s)}), {plural(s['workers'], 'worker')}, "
        f"{plural(s['length'], 'element')} "
        + (f"of workload {s['workload']} (scale {s['scale']})" if s.get("workload") else f"at {s['density']:.2%}"),
        f"bytes per worker: {s['bytes_per_worker']:,.0f} on the wire "
        f"({s['bytes_per_worker'] / s['dense_bytes_per_worker']:.1%} of dense {s['dense_bytes_per_worker']:,})",
        _seconds_line(s),
        "goodput:          " + (f"{s['goodput_gbps']:.2f} Gbit/s dense-equivalent per worker"
                                 if s["goodput_gbps"] is not None else "none"),
        f"retransmissions:  {s['retransmissions']} (all workers; {s['fast_retransmissions']} overtaken, "
        f"{plural(s['probes'], 'tail probe')}, {plural(s['timeouts'], 'timeout')})",
        _drops_line(s),
    ]
    lines += [f"error: {e}" for e in s["errors"]]
    return "\n".join(lines)
