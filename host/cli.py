"""`hina`: the command line.

    hina demo [--workers N --length D --density P --mode auto|dense|blocks|aligned|sketch --drop P ...] [--json]
        the main job on loopback: emulator + N worker processes, verified exact
    hina roundtrip grad0.npy grad1.npy ... [--lanes L --cells-per-element C] [--json]
        the codec on your own gradients (one .npy per worker), numpy standing in for the switch
    hina worker --switch HOST:PORT [--control HOST:PORT] --rank R --workers N [--input g.npy] [--out sum.npy]
        one worker against a switch that is already running: joins the job (with --control), aggregates,
        writes the sum
    hina worker --spec SPEC.json --rank R
        one worker of an experiment (Mininet hosts): prints "ready", waits for "go" on stdin,
        aggregates a synthetic gradient through the switch, prints one JSON report per round
    hina switch jobs|remove JOB_ID|reset JOB_ID|status --control HOST:PORT (or --bmv2 GRPC_ADDR) [--json]
        a running switch's jobs (members, slots, state, counters, last heard), removing or resetting one,
        its status (`hina.control.switch_cli`)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import numpy as np

from hina.cliargs import PIPE_QUEUE, plural
from hina.wire.headers import UDP_PORT


def demo_config(args: argparse.Namespace):
    """The `DemoConfig` of parsed `hina demo` flags (ValueError names a bad value)."""
    from .congestion_settings import from_flags
    from .demo import DemoConfig
    from .job import JobSpec

    return DemoConfig(workers=args.workers, length=args.length, density=args.density, mode=args.mode,
                      drop=args.drop, dup=args.dup, reorder=args.reorder, seed=args.seed,
                      job=JobSpec(job_id=args.job_id, words=args.words, slots=args.slots),
                      deadline=args.deadline, workload=args.workload, scale=args.scale,
                      group=args.group, link_gbps=args.link_gbps, rounds=args.rounds, pipes=args.pipes,
                      pipe_rate=args.pipe_rate, pipe_queue=args.pipe_queue, congestion=from_flags(args))


def _demo(args: argparse.Namespace) -> int:
    from .demo import format_summary, run_demo

    try:
        cfg = demo_config(args)
    except ValueError as exc:
        print(f"hina demo: {exc}", file=sys.stderr)
        return 2
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731 - progress on stderr, also with --json
    # SIGTERM (a job scheduler, `timeout`, `kill`) and ^C end the demo through run_demo's cleanup, which stops
    # its switch and workers at once; then the demo ends as the signal would have ended it
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stopped)
    try:
        summary = run_demo(cfg, log=log)
    except RuntimeError as exc:
        print(f"hina demo: {exc}", file=sys.stderr)
        return 1
    except Stopped as stopped:
        print(f"hina demo: stopped by {stopped.signal.name}; its switch and {plural(cfg.workers, 'worker')} are "
              f"stopped", file=sys.stderr, flush=True)
        signal.signal(stopped.signal, signal.SIG_DFL)
        os.kill(os.getpid(), stopped.signal)  # ends as a process the signal ended does (a shell: 128 + its number)
        return 128 + stopped.signal
    if args.json:
        print(json.dumps(summary, allow_nan=False))
    else:
        print(format_summary(summary))
    return 0 if summary["exact"] else 1


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(BaseException):
    """A signal asked the demo to end (a BaseException: no `except Exception` on the way swallows it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signal = signal.Signals(signum)


def _stopped(signum: int, _frame) -> None:
    for each in STOP_SIGNALS:  # the cleanup runs once, whatever else arrives meanwhile
        signal.signal(each, signal.SIG_IGN)
    raise Stopped(signum)


class Failed(Exception):
    """A command ends: its one line (after the command's name, "hina worker: ") and exit status (2: bad input)."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


def _roundtrip(args: argparse.Namespace) -> int:
    from hina import codec

    try:
        grads = _roundtrip_inputs(args.files)
        result = codec.simulate_allreduce(grads, lanes=args.lanes, cells_per_element=args.cells_per_element,
                                          mode=args.mode, group=args.group, link_gbps=args.link_gbps)
    except (Failed, OSError, ValueError) as exc:
        print(f"hina roundtrip: {exc}", file=sys.stderr)
        return 2
    expected = np.zeros(grads[0].shape, dtype=np.int64)
    for g in grads:
        expected += codec.quantize(g, result.shift)
    exact = bool(np.array_equal(result.fixed, expected.astype(np.int32)))
    nnz = [int(np.count_nonzero(g)) for g in grads]
    summary = {
        "exact": exact, "workers": len(grads), "length": int(grads[0].size), "dtype": grads[0].dtype.name,
        "shift": result.shift, "encoding": result.encoding, "group": result.group, "union": result.union,
        "rows": result.rows, "residual": result.residual,
        "nonzeros_per_worker": nnz, "bytes_per_worker": result.bytes_per_worker,
        "dense_bytes_per_worker": result.dense_bytes_per_worker,
        "pairs_bytes_per_worker": 8 * max(nnz),
        "seconds": {k: round(v, 6) for k, v in result.workers[0].seconds.items()},
    }
    print(json.dumps(summary) if args.json else _roundtrip_lines(summary))
    return 0 if exact else 1


def _roundtrip_inputs(files: list[str]) -> list[np.ndarray]:
    """Each worker's gradient: a .npy file, or each array of an .npz archive, in its order; Failed names the
    file the codec could not take, before the codec refuses the array."""
    grads, names = [], []
    for path in files:
        try:
            loaded = np.load(path, allow_pickle=False)
            if isinstance(loaded, np.lib.npyio.NpzFile):
                with loaded:
                    if not loaded.files:
                        raise ValueError("an .npz archive without arrays")
                    for key in loaded.files:
                        grads.append(loaded[key])
                        names.append(f"{path}:{key}")
            else:
                grads.append(loaded)
                names.append(str(path))
        except (OSError, ValueError, EOFError) as exc:
            detail = ("not a .npy array or .npz archive of arrays (or one holding Python objects)"
                      if isinstance(exc, ValueError) and "without arrays" not in str(exc) else exc)
            raise Failed(f"{path}: {detail}") from None
    for name, g in zip(names, grads):
        problem = gradient_problem(g)
        if problem:
            raise Failed(f"{name}: {problem}")
    if len({g.shape for g in grads}) > 1:
        listing = ", ".join(f"{name} {g.shape} ({plural(g.size, 'element')})" for name, g in zip(names, grads))
        raise Failed(f"the workers' gradients differ in shape: {listing}")
    return grads


def _roundtrip_lines(s: dict) -> str:
    """The roundtrip's summary, as a reader takes it in."""
    total, length = s["bytes_per_worker"]["total"], s["length"]
    lines = [f"exact: {'yes' if s['exact'] else 'NO'}; {plural(s['workers'], 'worker')} x {length:,} {s['dtype']}; "
             f"encoding {s['encoding']}" + (f" (index group {s['group']})" if s["group"] else "")]
    if s["union"] is not None:
        lines.append(f"union: {s['union']:,} ({s['union'] / length:.2%}), sketch rows {s['rows']}, "
                     f"residual {s['residual']}")
    lines.append(f"bytes per worker: {total:,} = {total / s['dense_bytes_per_worker']:.2%} of dense; "
                 f"{', '.join(f'{k} {v:,}' for k, v in s['bytes_per_worker'].items() if k != 'total')}")
    lines.append(f"index/value pairs would send {s['pairs_bytes_per_worker']:,} bytes (the largest worker)")
    return "\n".join(lines)


def _worker(args: argparse.Namespace) -> int:
    if args.spec:
        return _experiment_worker(args)
    if args.switch is None:
        print("hina worker: give --switch HOST:PORT (a running switch) or --spec SPEC.json (an experiment)",
              file=sys.stderr)
        return 2
    return _standalone_worker(args)


def _load_gradient(path: Path) -> np.ndarray:
    """A worker's gradient from a .npy file, or an .npz archive of one array; ValueError names what is wrong."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except ValueError as exc:  # pickled objects, or not an array file at all
        raise ValueError(f"--input {path}: not a .npy array or .npz archive of arrays ({exc})") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            if len(loaded.files) != 1:
                raise ValueError(f"--input {path}: an .npz archive of {len(loaded.files)} arrays "
                                 f"({', '.join(loaded.files) or 'none'}); a worker takes one gradient: "
                                 f"a .npy file, or an .npz archive of one array")
            loaded = loaded[loaded.files[0]]
    problem = gradient_problem(loaded)
    if problem:
        raise ValueError(f"--input {path}: {problem}")
    return loaded


def gradient_problem(array: np.ndarray) -> str | None:
    """Why the codec cannot take `array` as a gradient (its shape or dtype), or None: said before it tries."""
    from hina.codec.params import DTYPES

    if array.ndim == 0:
        return "a 0-d array (a scalar); a gradient has at least one dimension"
    if array.size == 0:
        return f"an empty array (shape {array.shape}); a gradient has at least one element"
    if array.dtype.name not in DTYPES:
        return f"dtype {array.dtype} is not a gradient's ({', '.join(DTYPES[:-1])} or {DTYPES[-1]})"
    return None


QUIET_RTTS = 50  # a hello silent for this many control round trips (at least agent.QUIET s) asks the control port


def _standalone_worker(args: argparse.Namespace) -> int:
    """One worker against a switch that is already running: join, aggregate, write the sum."""
    try:
        grad, params, job = _worker_inputs(args)
        _resolve(args.switch)
        transport = _open_transport(args)
        with transport, contextlib.ExitStack() as leaving:
            job, pipes, quiet, path = _join(args, job, transport, leaving) if args.control else (job, 1, None, None)
            worker, result, reports = _aggregate(args, job, pipes, transport, params, grad, quiet, path)
        _write_sum(args, grad, result)
    except Failed as failed:
        print(f"hina worker: {failed}", file=sys.stderr)
        return failed.status
    summary = {"rank": args.rank, "workers": args.workers, "length": int(grad.size), "dtype": grad.dtype.name,
               "out": str(args.out) if args.out else None, "rounds": reports,
               "job": {"job_id": job.job_id, "slot_base": job.first_slot, "slots": job.slots},
               "window": worker.window.report()}
    print(json.dumps(summary) if args.json else
          f"worker {args.rank}: sum of {plural(args.workers, 'worker')}"
          + (f" written to {args.out}" if args.out else "")
          + f" ({reports[-1]['encoding']}, {reports[-1]['seconds']:.3f} s)")
    return 0


def _worker_inputs(args: argparse.Namespace):
    """The gradient, the codec's parameters and the job the flags ask for; Failed names a bad one."""
    from hina import codec

    from .job import JobSpec
    from .synthetic import synthetic_gradient

    if args.workers is None:
        raise Failed("--workers N is required with --switch")
    try:
        if not 0 <= args.rank < args.workers:
            raise ValueError(f"--rank must be 0..{args.workers - 1}, got {args.rank}")
        if not 0 < args.deadline < float("inf"):
            raise ValueError(f"--deadline must be a positive number of seconds, got {args.deadline}")
        if args.rounds < 1:
            raise ValueError(f"--rounds must be at least 1, got {args.rounds}")
        if args.out is not None and not args.out.parent.is_dir():  # before the job, not after it
            raise ValueError(f"--out {args.out}: no folder {args.out.parent}")
        if args.input:
            grad = _load_gradient(args.input)
        else:
            grad = synthetic_gradient(args.length, args.density, seed=args.seed, rank=args.rank)
        params = codec.CodecParams(length=grad.size, workers=args.workers, dtype=grad.dtype.name, mode=args.mode,
                                   group=args.group, link_gbps=args.link_gbps)
        job = JobSpec(job_id=args.job_id, words=args.words, slot_base=args.slot_base, slots=args.slots,
                      least=args.min_slots, when_full=args.when_full)
        codec.check_gradient(params, grad, who=str(args.input or "the synthetic gradient"))
    except (OSError, ValueError) as exc:
        raise Failed(f"{args.input}: {exc}" if args.input and isinstance(exc, OSError) else str(exc)) from None
    return grad, params, job


def _resolve(switch: tuple[str, int]) -> None:
    """The switch's name, before a socket is bound for it (an unknown host is not the bind address's fault)."""
    try:
        socket.getaddrinfo(switch[0], switch[1], socket.AF_INET, socket.SOCK_DGRAM)
    except OSError as exc:
        raise Failed(f"--switch {_where(switch)}: cannot resolve {switch[0]!r} ({exc.strerror or exc})") from None


def _open_transport(args: argparse.Namespace):
    """A UDP port of the worker's own (the kernel's choice), so that several workers (ranks) share a machine: the
    switch learns it from the join, or a job installed without --control names it (--bind)."""
    from .transport import UdpTransport

    bind = args.bind or (("127.0.0.1", 0) if args.switch[0].startswith("127.") else ("0.0.0.0", 0))
    try:
        return UdpTransport(args.switch, bind=bind)
    except OSError as exc:
        raise Failed(f"cannot send from {_where(bind)}: {exc.strerror or exc}") from None


def _join(args: argparse.Namespace, job, transport, leaving: contextlib.ExitStack):
    """Join the job at the control port; leaving it is then `leaving`'s (done or failed: the last member's leaving
    frees the slots).  (The job as granted, the switch's pipes, how long a silent hello waits before asking the
    control port why: QUIET_RTTS of its round trips, and the least of those round trips: the path's.)"""
    from hina.control.client import ControlClient, ControlError, NoReply
    from hina.control.config import Member

    from .agent import QUIET

    def waiting(position: int) -> None:
        print(f"hina worker: job {args.job_id} waits for slots on the switch: number {position} in line",
              file=sys.stderr, flush=True)

    me = Member(args.rank, transport.address)
    try:
        with ControlClient(args.control, token_file=args.token_file) as ctl:
            pipes = ctl.join(job.switch_config(args.workers), me, place=job.placement(), deadline=args.deadline,
                             waiting=waiting)
            replaced, asked, job = ctl.replaced, job.slots, job.granted(ctl.granted)
            start = time.monotonic()
            ctl.ping()
            quiet = max(QUIET, QUIET_RTTS * (time.monotonic() - start))
    except NoReply as exc:
        raise Failed(f"could not join job {args.job_id} at {_where(args.control)}: {exc}"
                           + _swapped(args)) from None
    except (ControlError, OSError, ValueError) as exc:  # ValueError: a bad --token-file
        raise Failed(f"could not join job {args.job_id} at {_where(args.control)}: {exc}") from None
    leaving.callback(_leave, args, job.job_id, me)
    if job.slots < asked:
        print(f"hina worker: job {args.job_id} runs on {job.slots} of the {asked} slots it asked for "
              f"([{job.slot_base}, {job.slot_base + job.slots}): the switch is full)", file=sys.stderr, flush=True)
    if replaced is not None:
        print(f"hina worker: rank {args.rank} of job {args.job_id} was held from {_where(replaced.source)}; this "
              f"worker took it over (a restarted worker does; if that one still runs, it stops, saying so)",
              file=sys.stderr, flush=True)
    return job, pipes, quiet, ctl.round_trip


def _swapped(args: argparse.Namespace) -> str:
    """Where the control port did not answer: whether --switch does, as a control port answers."""
    from hina.control.client import ControlClient, ControlError

    try:
        with ControlClient(args.switch, timeout=0.5, retries=1) as probe:
            probe.ping()
    except (ControlError, OSError):
        return ""
    return f"; --switch {_where(args.switch)} answers control requests: are --switch and --control swapped?"


def _aggregate(args: argparse.Namespace, job, pipes: int, transport, params, grad: np.ndarray, quiet: float | None,
               path: float | None):
    """Aggregate `--rounds` times through the switch: (the worker, its last result, each round's report)."""
    from .agent import AggregationTimeout, NotTheDataPort, StaleSwitchState, SwitchUnreachable, Worker
    from .congestion_settings import from_flags

    # batches of frames as single buffers where the switch is the emulator (it answered the join) with one pipe
    transport.segment_offload = bool(args.control) and pipes == 1
    here = transport.address
    print(f"worker {args.rank}/{args.workers}: {plural(grad.size, grad.dtype.name + ' element')}, job {job.job_id} "
          f"at {_where(args.switch)} from {_where(here)}, mode {args.mode}", file=sys.stderr, flush=True)
    worker = Worker(transport, job, args.rank, deadline=args.deadline, pipes=pipes, congestion=from_flags(args),
                    path_rtt=path)
    worker.silence = _SilentHello(args, job.job_id, here, quiet)
    worker.quiet = quiet or worker.quiet
    out = np.empty(grad.size, dtype=np.int32)
    out.fill(0)  # its pages touched now: a first round faults nothing in
    reports = []
    try:
        worker.prepare(params, grad)  # kernels loaded, run agreed with the others: not in the first round
        for _ in range(args.rounds):
            before = worker.stats.copy()
            began, start = time.time(), time.perf_counter()
            result = worker.aggregate(params, grad, out=out)
            stats = worker.stats - before
            # "start": the wall clock (hosts of one machine share it: benchmarks/tenants.py lines jobs up)
            reports.append({"seconds": time.perf_counter() - start, "start": began, "encoding": result.encoding,
                            "group": result.group, "union": result.union, "shift": result.shift,
                            "wire_bytes": stats["bytes"], "retransmissions": stats["retransmissions"]})
            print(f"worker {args.rank}: {reports[-1]['seconds']:.3f} s, ran {result.encoding}, "
                  f"{plural(stats['bytes'], 'byte')} sent", file=sys.stderr, flush=True)
    except SwitchUnreachable as exc:  # the wrong port, or nothing there: said of --switch
        raise Failed(f"--switch {_where(args.switch)}: {exc}", 2 if isinstance(exc, NotTheDataPort) else 1) \
            from None
    except AggregationTimeout as exc:  # where another worker took this one's rank over, that is the news
        taken = _rank_taken(args, job.job_id, here)
        raise (Failed(taken, 2) if taken else Failed(str(exc), 1)) from None
    except StaleSwitchState as exc:  # the switch holds an earlier run's slots: the line says how to clear them
        raise Failed(str(exc), 2) from None
    except ValueError as exc:  # the other workers disagree on the job's parameters
        raise Failed(str(exc), 1) from None
    return worker, result, reports


class _SilentHello:
    """`Worker.silence` for `hina worker`: while its hello is unanswered, what the switch's control port knows
    (another worker took this one's rank over; the switch counted none of the job's frames: --switch is not its
    data port), or, without --control, a line naming the address that stays silent (or that holds the hello and
    waits for the other workers: its PENDING answers came)."""

    def __init__(self, args: argparse.Namespace, job_id: int, here: tuple[str, int], quiet: float | None):
        self.args, self.job_id, self.here, self.quiet = args, job_id, here, quiet
        self.told = False

    def __call__(self, seconds: float, heard: int = 0) -> None:
        args = self.args
        if args.control is None:
            if heard:
                self.say(f"the switch at {_where(args.switch)} holds this worker's hello and waits for the other "
                         f"workers of job {self.job_id} (up to --deadline {args.deadline:g} s)")
            else:
                self.say(f"nothing from {_where(args.switch)} in {seconds:.1f} s yet: waiting for the other workers "
                         f"of job {self.job_id} (up to --deadline {args.deadline:g} s); if they all run, is it the "
                         f"switch's data port?")
            return
        job = _listed(args, self.job_id)
        if job is None:
            return
        taken = _rank_taken(args, self.job_id, self.here, job)
        if taken:
            raise Failed(taken, 2)
        if job["frame_s"] is None:
            raise Failed(f"--switch {_where(args.switch)}: the switch at --control {_where(args.control)} has "
                               f"counted no frame of job {self.job_id} in {seconds:.1f} s of this worker's sending: "
                               f"--switch is not that switch's data port (the emulator prints it as \"data\")")
        self.say(f"job {self.job_id} waits for its other workers: {len(job['members'])} of {args.workers} have "
                 f"joined the switch")

    def say(self, line: str) -> None:
        if not self.told:
            self.told = True
            print(f"hina worker: {line}", file=sys.stderr, flush=True)


def _listed(args: argparse.Namespace, job_id: int) -> dict | None:
    """Job `job_id` as the control port lists it (None: not there, or no answer)."""
    from hina.control.client import ControlClient, ControlError

    try:
        with ControlClient(args.control, token_file=args.token_file, retries=1) as ctl:
            return next((j for j in ctl.jobs() if j["job_id"] == job_id), None)
    except (ControlError, OSError, ValueError):
        return None


def _rank_taken(args: argparse.Namespace, job_id: int, here: tuple[str, int], job: dict | None = None) -> str | None:
    """Where another address holds this worker's rank now (it joined with the same --rank): the line that says so."""
    from hina.control.config import Member

    if args.control is None:
        return None
    job = job or _listed(args, job_id)
    holder = next((m for m in (job or {}).get("members", ()) if m["worker_id"] == args.rank), None)
    if holder is None or Member.from_config(holder) == Member(args.rank, here):
        return None
    return (f"rank {args.rank} of job {job_id} is held from {_where(Member.from_config(holder).source)} now: another "
            f"worker joined with --rank {args.rank} after this one and took it over (a restarted worker does; if "
            f"both should run, give each its own --rank)")


def _write_sum(args: argparse.Namespace, grad: np.ndarray, result) -> None:
    """The sum into --out: in the input's dtype (the exact fixed-point sum rounded once), or float64."""
    if not args.out:
        return
    total = result.sum.reshape(grad.shape)
    if args.out_dtype == "input" or grad.dtype == np.int32:
        with np.errstate(over="ignore"):
            rounded = total.astype(grad.dtype)
        if not np.isfinite(rounded).all():  # only a float16 sum can leave its dtype's range
            raise Failed(f"the sum leaves {grad.dtype.name}'s range (largest |sum| {np.abs(total).max():.6g}): "
                               f"use --out-dtype float64", 1)
        total = rounded
    np.save(args.out, total)


def _where(address) -> str:
    """HOST:PORT (a raw switch's port number as it is)."""
    return ":".join(map(str, address)) if isinstance(address, tuple | list) else str(address)


def _leave(args: argparse.Namespace, job_id: int, me) -> None:
    """Tell the switch this worker is done with its job (best effort: a lease frees what this misses); a rank that
    another worker took over is that one's, and stays."""
    from hina.control.client import ControlClient, ControlError

    try:
        with ControlClient(args.control, token_file=args.token_file, retries=2) as ctl:
            ctl.leave(job_id, args.rank, member=me)
    except (ControlError, OSError, ValueError) as exc:
        print(f"hina worker: could not leave job {job_id} ({exc}); its lease frees its slots", file=sys.stderr)


def _experiment_worker(args: argparse.Namespace) -> int:
    """Run one worker from an experiment spec (see mininet/hina_net.py: worker_spec)."""
    from hina import codec

    from .agent import Worker
    from .congestion_settings import CongestionSettings, from_flags
    from .demo import timed_aggregate
    from .job import JobSpec
    from .synthetic import gradient_for
    from .transport import open_transport

    try:
        spec = json.loads(Path(args.spec).read_text())
        params = codec.CodecParams.from_config(spec["params"])
        job = JobSpec.from_config(spec["job"])
        if not 0 <= args.rank < len(spec["hosts"]):
            raise ValueError(f"--rank must be 0..{len(spec['hosts']) - 1} (the spec's hosts), got {args.rank}")
        me = spec["hosts"][args.rank]
        grad = gradient_for(params.length, spec["density"], seed=spec["seed"], rank=args.rank,
                            workload=spec.get("workload"), scale=spec.get("scale", 1.0))
        switch_ip, switch_mac = spec["switch"]["ip"], spec["switch"]["mac"]
        congestion = from_flags(args, CongestionSettings.from_config(me.get("congestion", {})))  # flags win
    except (OSError, ValueError, KeyError, TypeError) as exc:  # json's errors are ValueErrors
        what = f"lacks {exc}" if isinstance(exc, KeyError) else exc
        print(f"hina worker: --spec {args.spec}: {what}", file=sys.stderr)
        return 2
    transport = open_transport(switch_ip, ifname=me.get("ifname"), src_mac=me.get("mac"),
                               src_ip=me.get("ip"), switch_mac=switch_mac, kind=args.transport,
                               bind_ip=spec["switch"].get("answers_to", "0.0.0.0"), port=me.get("udp_port", UDP_PORT),
                               offload=spec.get("offload", False))
    # the switch's pipes: with P > 1 loss detection compares a chunk only with chunks of its own pipe
    worker = Worker(transport, job, args.rank, deadline=spec.get("deadline", 30.0), pipes=spec.get("pipes", 1),
                    congestion=congestion)
    out = np.empty(grad.size, dtype=np.int32)  # reused, as a training step (and `hina demo`) reuses its buffers
    out.fill(0)  # its pages touched now, before "ready": a first round faults nothing in
    try:  # before "ready", as a training job sets up before its first step: kernels loaded, run agreed
        worker.prepare(params, grad)
    except Exception as exc:  # reported to the orchestrator, which fails the run
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    print(json.dumps({"ready": args.rank, "transport": type(transport).__name__}), flush=True)
    status = 0
    for line in sys.stdin:
        if line.strip() != "go":
            break
        try:
            print(json.dumps(timed_aggregate(worker, params, grad, out=out)), flush=True)
        except Exception as exc:  # reported to the orchestrator, which fails the run
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
            status = 1
    transport.close()
    return status


def _compile(args: argparse.Namespace) -> int:
    from hina import kernels

    if args.status:
        for group in kernels.GROUPS:
            where = kernels.stamp(group)
            print(f"{group:13} {'compiled' if where.exists() else 'not compiled'}  ({where.parent})")
        return 0
    start = time.monotonic()
    try:
        took = kernels.compile_all(jobs=args.jobs)
    except RuntimeError as exc:
        print(f"hina compile: {exc}", file=sys.stderr)
        return 1
    if not took:
        print("hina compile: every kernel is compiled on this machine already")
    else:
        print(f"hina compile: {', '.join(took)} compiled in {time.monotonic() - start:.1f} s "
              f"({sum(took.values()):.1f} s of compiling, {args.jobs or os.cpu_count()} at a time)")
    return 0


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _codec_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--group", type=int, default=0,
                    help="index group size: 1 = one-level bitmap, 2..1024 (a power of two) = two levels, "
                         "0 = chosen per tensor")
    ap.add_argument("--link-gbps", type=float, default=10.0, help="the link rate auto's cost model weighs bytes with")


def build_parser() -> argparse.ArgumentParser:
    from importlib.metadata import version

    from hina.cliargs import OneLineParser
    from hina.control.switch_cli import add_parser as add_switch

    ap = OneLineParser(prog="hina", description="homomorphic in-network aggregation")
    ap.add_argument("--version", action="version", version=f"hina {version('hina')}")
    sub = ap.add_subparsers(dest="command", required=True)
    for add in (_demo_parser, _roundtrip_parser, _worker_parser, _compile_parser):
        add(sub)
    add_switch(sub)
    return ap


def _subcommand(sub, name: str, help: str) -> argparse.ArgumentParser:
    """A subcommand whose every flag's help states its default, once."""
    from hina.cliargs import DefaultsFormatter

    return sub.add_parser(name, help=help, formatter_class=DefaultsFormatter)


def _demo_parser(sub) -> None:
    from hina.codec.params import MODES

    from .congestion_settings import add_flags
    from .job import DEFAULT_SLOTS, DEFAULT_WORDS
    from .synthetic import PRESET_NAMES

    d = _subcommand(sub, "demo", "the main job on loopback, verified exact")
    d.add_argument("--workers", type=int, default=4, help="worker processes, 1..32")
    d.add_argument("--length", type=int, default=1 << 22, help="elements per gradient")
    d.add_argument("--density", type=float, default=0.01, help="non-zero fraction per worker")
    d.add_argument("--mode", choices=MODES, default="auto",
                   help="auto: the cheapest encoding by the cost model, per tensor; dense: SwitchML-style; "
                        "blocks: OmniReduce-style; aligned: index + values at the union; "
                        "sketch: index + count sketch in one round")
    d.add_argument("--workload", choices=PRESET_NAMES, help="a model-shaped preset instead of uniform sparsity")
    d.add_argument("--scale", type=float, default=0.02, help="with --workload: shrink the preset by this factor")
    d.add_argument("--drop", type=float, default=0.0, help="switch drop probability, each direction")
    d.add_argument("--dup", type=float, default=0.0, help="switch duplication probability")
    d.add_argument("--reorder", type=float, default=0.0, help="switch reordering probability")
    d.add_argument("--seed", type=int, default=0, help="seed of the gradients and the impairments")
    d.add_argument("--job-id", type=int, default=1, help="the job's id on the switch")
    d.add_argument("--words", type=int, default=DEFAULT_WORDS, help="K, words per packet")
    d.add_argument("--slots", type=int, default=DEFAULT_SLOTS, help="W, packets in flight per worker")
    d.add_argument("--pipes", type=int, default=1,
                   help="the emulator's data plane as P processes, steered by slot in the kernel (1..64)")
    d.add_argument("--pipe-rate", type=float, default=0.0, metavar="PPS",
                   help="a slow pipe, as BMv2's: each pipe takes at most this many packets a second through its "
                        "rules, the rest wait in its queue (0: as fast as the host goes)")
    d.add_argument("--pipe-queue", type=int, default=PIPE_QUEUE, metavar="N",
                   help="with --pipe-rate: packets waiting for a pipe at most, more are dropped "
                        "(BMv2's input buffer holds 1024)")
    d.add_argument("--deadline", type=float, default=20.0, help="seconds without progress before a worker gives up")
    _codec_flags(d)
    d.add_argument("--rounds", type=int, default=1,
                   help="aggregations per worker; with more than one, seconds is the best after the first "
                        "(the steady state of a training loop) and first_seconds the first")
    d.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    add_flags(d)
    d.set_defaults(func=_demo)


def _roundtrip_parser(sub) -> None:
    from hina.codec.params import MODES

    r = _subcommand(sub, "roundtrip", "the codec on your .npy gradients, one file per worker")
    r.add_argument("files", nargs="+", help="one .npy gradient per worker (or .npz archives: each array a worker), "
                                            "same shape and dtype")
    r.add_argument("--lanes", type=int, default=1024, help="L, elements per sketch block")
    r.add_argument("--cells-per-element", type=float, default=1.3, help="c, sketch cells per union element")
    r.add_argument("--mode", choices=MODES, default="auto", help="the encoding")
    _codec_flags(r)
    r.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    r.set_defaults(func=_roundtrip)


def _worker_parser(sub) -> None:
    w = _subcommand(sub, "worker", "one worker against a running switch (--switch), or of an experiment (--spec, "
                                   "Mininet hosts)")
    _worker_job_flags(w)
    _worker_run_flags(w)
    w.set_defaults(func=_worker)


def _worker_job_flags(w: argparse.ArgumentParser) -> None:
    """Which switch, which job, which rank, which slots."""
    from hina.control.ledger import DEFAULT_WHEN_FULL, WHEN_FULL

    from .job import DEFAULT_SLOTS, DEFAULT_WORDS

    w.add_argument("--switch", type=_address, help="the running switch's data HOST:PORT")
    w.add_argument("--control", type=_address,
                   help="the emulator's control HOST:PORT: join the job there (installs it if absent); "
                        "without it the job must already authorize this worker (BMv2, Mininet)")
    w.add_argument("--rank", type=int, required=True, help="this worker's rank, 0..N-1")
    w.add_argument("--workers", type=int, default=None, help="N, workers in the job (with --switch)")
    w.add_argument("--job-id", type=int, default=1, help="the job's id on the switch")
    w.add_argument("--words", type=int, default=DEFAULT_WORDS, help="K, words per packet")
    w.add_argument("--slot-base", type=int, default=None,
                   help="the job's first slot (default: the switch chooses, where --control takes the join; else 0)")
    w.add_argument("--slots", type=int, default=DEFAULT_SLOTS, help="W, the job's slots (asked of the switch, where it "
                                                                    "chooses)")
    w.add_argument("--when-full", choices=WHEN_FULL, default=DEFAULT_WHEN_FULL,
                   help="where the switch chooses the slots and has too few free: refuse (fail at once, naming who "
                        "holds them), fewer (run on the largest free range of at least --min-slots), wait (in line "
                        "until a job leaves, up to --deadline)")
    w.add_argument("--min-slots", type=int, default=None, help="with --when-full fewer: the fewest slots to run on "
                                                               "(default: 1)")


def _worker_run_flags(w: argparse.ArgumentParser) -> None:
    """The gradient, the sum, the run; an experiment's spec; the congestion window's and pacer's settings."""
    from hina.codec.params import MODES

    from .congestion_settings import add_flags

    w.add_argument("--input", type=Path, help="this worker's gradient (.npy); default: a synthetic one")
    w.add_argument("--length", type=int, default=1 << 20, help="synthetic gradient: elements")
    w.add_argument("--density", type=float, default=0.01, help="synthetic gradient: non-zero fraction")
    w.add_argument("--seed", type=int, default=0, help="synthetic gradient: seed (with the rank)")
    w.add_argument("--out", type=Path, help="write the sum here (.npy, in --out-dtype)")
    w.add_argument("--out-dtype", choices=("input", "float64"), default="input",
                   help="the sum's dtype in --out: input (the gradient's own dtype: the exact fixed-point sum "
                        "rounded once, as the DDP hook writes a bucket) or float64 (the fixed-point sum exactly, "
                        "for checking bits; int32 input is always written as int32, exactly)")
    w.add_argument("--mode", choices=MODES, default="auto", help="the encoding")
    _codec_flags(w)
    w.add_argument("--rounds", type=int, default=1, help="aggregations of the same gradient")
    w.add_argument("--deadline", type=float, default=30.0, help="seconds without progress before giving up")
    w.add_argument("--json", action="store_true", help="print one JSON object instead of a summary line")
    w.add_argument("--bind", type=_address, help="send from (and take RESULTs at) this HOST:PORT: a job installed "
                                                 "without --control names its members' addresses and UDP ports; "
                                                 "default: a port of its own, the kernel's choice (several "
                                                 "ranks share a machine)")
    w.add_argument("--token-file", type=Path, help="the switch's shared secret, to sign the join "
                                                   "(default: $HINA_TOKEN)")
    w.add_argument("--spec", help="experiment spec JSON (mininet/hina_net.py writes it) instead of --switch")
    w.add_argument("--transport", choices=("auto", "udp", "raw"), default="auto",
                   help="with --spec: UDP to the switch address when routed (auto), or raw frames")
    add_flags(w)


def _compile_parser(sub) -> None:
    from hina.cliargs import between

    c = _subcommand(sub, "compile", "compile the kernels on this machine now (make install does): the first run "
                                    "then starts at once")
    c.add_argument("--jobs", type=between(1, 64, " (processes)"), default=None,
                   help="kernel groups compiled at once (default: the CPU count)")
    c.add_argument("--status", action="store_true", help="say which kernel groups this machine has compiled")
    c.set_defaults(func=_compile)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
