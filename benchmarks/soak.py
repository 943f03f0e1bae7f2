"""Soak: workers aggregate new gradients again and again under loss for a minute or more.

8 worker processes (default) and the emulator (a separate process, with 5%
drop, 1% duplication and 1% reordering on both directions) run back-to-back
aggregations of 2^22-element gradients, a new seed each round, until
--seconds have passed.  Every round's result must be exact on every worker
(checked against numpy's sum, computed here while the workers aggregate
the round), and the resident memory (VmRSS) of the emulator and of each
worker is reported after the first round and at the end.

    python benchmarks/soak.py [--seconds 60 --workers 8 --length 4194304]     (make soak)
Writes soak.json (--out; default: in $HINA_RESULTS, else hina-results/).  Progress on stderr: a bar
(round, seconds of --seconds, time left) redrawn on a terminal, the round lines above it; in a log, each
round's line with the same facts appended.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from pathlib import Path

from hina import codec
from hina.cliargs import OneLineParser, between, fraction, positive, probability
from hina.codec.params import MAX_WORKERS
from hina.control.client import ControlClient
from hina.control.config import Member
from hina.host.agent import Worker
from hina.host.demo import DemoConfig, digest, expected_fixed, start_switch
from hina.host.job import JobSpec
from hina.host.synthetic import synthetic_gradient
from hina.host.transport import UdpTransport
from hina.progress import Progress
from hina.provenance import command_line, default_out, out_help, out_path, write_result


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def worker_loop(switch, rank, workers, length, density, deadline, conn) -> None:
    """Aggregate round after round; each round's gradient comes from seed = round."""
    with UdpTransport(tuple(switch)) as transport:
        conn.send(transport.address)
        worker = Worker(transport, JobSpec(), rank, deadline=deadline)
        params = codec.CodecParams(length=length, workers=workers)
        while (rnd := conn.recv()) is not None:
            grad = synthetic_gradient(length, density, seed=rnd, rank=rank)
            try:
                result = worker.aggregate(params, grad)
                conn.send(("ok", digest(result.fixed), worker.stats["retransmissions"]))
            except Exception as exc:
                conn.send(("error", f"{type(exc).__name__}: {exc}", worker.stats["retransmissions"]))


def parse_args(argv: list[str] | None):
    ap = OneLineParser(prog="soak.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=positive, default=60.0)
    ap.add_argument("--workers", type=between(1, MAX_WORKERS), default=8)
    ap.add_argument("--length", type=between(1), default=1 << 22)
    ap.add_argument("--density", type=fraction, default=0.01)
    ap.add_argument("--drop", type=probability, default=0.05)
    ap.add_argument("--dup", type=probability, default=0.01)
    ap.add_argument("--reorder", type=probability, default=0.01)
    ap.add_argument("--out", type=out_path, default=default_out("soak.json"), help=out_help("soak.json"))
    return ap.parse_args(argv)


def start_workers(cfg: DemoConfig, where: dict, procs: list, conns: list) -> ControlClient:
    """One process per worker (appended to `procs`, its end of the pipe to `conns`), the job added to the
    switch with their addresses; the control client, to read the counters at the end."""
    ctx = mp.get_context("spawn")
    for rank in range(cfg.workers):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=worker_loop, daemon=True, args=(where["data"], rank, cfg.workers, cfg.length,
                                                               cfg.density, cfg.deadline, child))
        p.start()
        procs.append(p)
        conns.append(parent)
    members = [Member(rank, tuple(c.recv())) for rank, c in enumerate(conns)]
    ctl = ControlClient(tuple(where["control"]))
    ctl.add_job(cfg.job.switch_config(cfg.workers, members))
    return ctl


def one_round(cfg: DemoConfig, conns: list, rnd: int) -> tuple[list[str], int]:
    """Every worker aggregates round `rnd`'s gradients while numpy's sum is computed here: what was wrong (the
    workers that failed or returned another sum), and the retransmissions so far."""
    for c in conns:
        c.send(rnd)
    want = digest(expected_fixed(cfg.workers, cfg.length, cfg.density, rnd))
    replies = [c.recv() for c in conns]
    bad = [f"round {rnd} worker {w}: {r[1] if r[0] == 'error' else 'WRONG SUM'}"
           for w, r in enumerate(replies) if r[0] != "ok" or r[1] != want]
    return bad, sum(r[2] for r in replies)


def memory(switch, procs: list) -> dict:
    """Resident memory now, KiB: the switch's and each worker's."""
    return {"switch": rss_kib(switch.pid), "workers": [rss_kib(p.pid) for p in procs]}


def soak(cfg: DemoConfig, seconds: float, conns: list, switch, procs: list) -> dict:
    """Rounds until `seconds` have passed (at least one): how many, how long, what failed, the memory after the
    first round, after each and at the end, and the retransmissions."""
    out = {"rounds": 0, "failures": [], "rss_kib": {}, "retransmissions": 0}
    rss = out["rss_kib"]
    start = time.monotonic()
    with Progress(seconds, "soak", unit="s", label="round 1") as bar:
        while time.monotonic() - start < seconds or out["rounds"] == 0:
            began = time.monotonic()
            bad, out["retransmissions"] = one_round(cfg, conns, out["rounds"])
            out["failures"] += bad
            out["rounds"] += 1
            now = memory(switch, procs)
            rss.setdefault("start", now)
            rss.setdefault("per_round", []).append({"switch": now["switch"], "workers_max": max(now["workers"])})
            bar.done(f"round {out['rounds']}: {'exact' if not bad else bad} at {time.monotonic() - start:.1f} s, "
                     f"RSS switch {now['switch'] / 1024:.1f} MiB, workers up to {max(now['workers']) / 1024:.1f} "
                     f"MiB", n=time.monotonic() - began, label=f"round {out['rounds'] + 1}")
    out["seconds"] = time.monotonic() - start
    rss["end"] = memory(switch, procs)
    return out


def stop(conns: list, procs: list, switch) -> None:
    """The workers told to end, and killed if they do not within 5 s; the switch terminated."""
    for c in conns:
        try:
            c.send(None)
        except OSError:
            pass
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
    if switch.poll() is None:
        switch.terminate()
    switch.wait(5)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = DemoConfig(workers=args.workers, length=args.length, density=args.density, drop=args.drop, dup=args.dup,
                     reorder=args.reorder, seed=7, deadline=60.0)
    switch, where = start_switch(cfg)
    procs, conns = [], []
    try:
        ctl = start_workers(cfg, where, procs, conns)
        run = soak(cfg, args.seconds, conns, switch, procs)
        counters = ctl.counters()
        ctl.shutdown()
        ctl.close()
    finally:
        stop(conns, procs, switch)
    failures, rss = run["failures"], run["rss_kib"]
    summary = {"rounds": run["rounds"], "seconds": run["seconds"], "all_exact": not failures,
               "failures": failures[:20], "workers": args.workers, "length": args.length, "drop": args.drop,
               "dup": args.dup, "reorder": args.reorder, "rss_kib": rss, "retransmissions": run["retransmissions"],
               "switch_counters": counters}
    write_result(args.out, summary, command_line("benchmarks/soak.py", argv))
    w0, w1 = rss["start"]["workers"], rss["end"]["workers"]
    print(f"{run['rounds']} rounds in {run['seconds']:.0f} s, every result exact: {not failures}")
    print(f"emulator RSS {rss['start']['switch'] / 1024:.1f} -> {rss['end']['switch'] / 1024:.1f} MiB; "
          f"workers RSS {min(w0) / 1024:.0f}-{max(w0) / 1024:.0f} -> {min(w1) / 1024:.0f}-{max(w1) / 1024:.0f} MiB")
    print(f"wrote {args.out}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
