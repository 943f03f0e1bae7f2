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


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="soak.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=positive, default=60.0)
    ap.add_argument("--workers", type=between(1, MAX_WORKERS), default=8)
    ap.add_argument("--length", type=between(1), default=1 << 22)
    ap.add_argument("--density", type=fraction, default=0.01)
    ap.add_argument("--drop", type=probability, default=0.05)
    ap.add_argument("--dup", type=probability, default=0.01)
    ap.add_argument("--reorder", type=probability, default=0.01)
    ap.add_argument("--out", type=out_path, default=default_out("soak.json"), help=out_help("soak.json"))
    args = ap.parse_args(argv)

    cfg = DemoConfig(workers=args.workers, length=args.length, density=args.density, drop=args.drop, dup=args.dup,
                     reorder=args.reorder, seed=7, deadline=60.0)
    switch, where = start_switch(cfg)
    ctx = mp.get_context("spawn")
    procs, conns = [], []
    bar = None
    rounds, failures, rss = 0, [], {}
    try:
        for rank in range(args.workers):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=worker_loop, daemon=True, args=(where["data"], rank, args.workers, args.length,
                                                                   args.density, cfg.deadline, child))
            p.start()
            procs.append(p)
            conns.append(parent)
        members = [Member(rank, tuple(c.recv())) for rank, c in enumerate(conns)]
        ctl = ControlClient(tuple(where["control"]))
        ctl.add_job(cfg.job.switch_config(args.workers, members))
        start = time.monotonic()
        retransmissions = 0
        bar = Progress(args.seconds, "soak", unit="s", label="round 1").__enter__()  # closed below, or in finally
        while time.monotonic() - start < args.seconds or rounds == 0:
            began = time.monotonic()
            for c in conns:
                c.send(rounds)
            want = digest(expected_fixed(args.workers, args.length, args.density, rounds))
            replies = [c.recv() for c in conns]
            bad = [f"round {rounds} worker {w}: {r[1] if r[0] == 'error' else 'WRONG SUM'}"
                   for w, r in enumerate(replies) if r[0] != "ok" or r[1] != want]
            failures += bad
            retransmissions = sum(r[2] for r in replies)
            rounds += 1
            now_rss = {"switch": rss_kib(switch.pid), "workers": [rss_kib(p.pid) for p in procs]}
            rss.setdefault("start", now_rss)
            rss.setdefault("per_round", []).append(
                {"switch": now_rss["switch"], "workers_max": max(now_rss["workers"])})
            bar.done(f"round {rounds}: {'exact' if not bad else bad} at {time.monotonic() - start:.1f} s, "
                     f"RSS switch {now_rss['switch'] / 1024:.1f} MiB, workers up to "
                     f"{max(now_rss['workers']) / 1024:.1f} MiB", n=time.monotonic() - began,
                     label=f"round {rounds + 1}")
        bar.close()
        seconds = time.monotonic() - start
        rss["end"] = {"switch": rss_kib(switch.pid), "workers": [rss_kib(p.pid) for p in procs]}
        counters = ctl.counters()
        ctl.shutdown()
        ctl.close()
    finally:
        if bar is not None:
            bar.close()
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

    summary = {"rounds": rounds, "seconds": seconds, "all_exact": not failures, "failures": failures[:20],
               "workers": args.workers, "length": args.length, "drop": args.drop, "dup": args.dup,
               "reorder": args.reorder, "rss_kib": rss, "retransmissions": retransmissions,
               "switch_counters": counters}
    write_result(args.out, summary, command_line("benchmarks/soak.py", argv))
    w0, w1 = rss["start"]["workers"], rss["end"]["workers"]
    print(f"{rounds} rounds in {seconds:.0f} s, every result exact: {not failures}")
    print(f"emulator RSS {rss['start']['switch'] / 1024:.1f} -> {rss['end']['switch'] / 1024:.1f} MiB; "
          f"workers RSS {min(w0) / 1024:.0f}-{max(w0) / 1024:.0f} -> {min(w1) / 1024:.0f}-{max(w1) / 1024:.0f} MiB")
    print(f"wrote {args.out}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
