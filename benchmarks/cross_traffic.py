"""hina's sender beside a competing TCP flow (Mininet, root): does its congestion window collapse?

Runs dense aggregation on hina's Mininet star twice, without and with an
iperf3 TCP flow from rank 1's host to rank 0's (it shares rank 1's uplink,
where rank 1's UPDATEs go, and rank 0's downlink, where rank 0's RESULTs
come, with the aggregation), and traces every worker's congestion window:
each worker is `hina worker` (host/cli.py) with a thread that reads its
`CongestionWindow` (cwnd, cuts) every 2 ms.  Reports per run and worker the
seconds, the window's least / mean / last value and cuts, the resends, and
the flow's own throughput (iperf3), with the fidelity verdict.

    sudo .venv/bin/python benchmarks/cross_traffic.py --workers 4 --bw 100 --length 4000000 --rounds 2

Writes --out (default: cross_traffic.json in $HINA_RESULTS, else hina-results/).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

TRACE_PERIOD = 0.002  # seconds between window samples in a worker


def probe_worker(argv: list[str]) -> int:
    """`hina worker --spec` with its window traced: the same worker, its report extended by the trace."""
    import hina.host.agent
    import hina.host.demo
    from hina.host import cli

    traces: list[dict] = []

    class TracedWorker(hina.host.agent.Worker):
        def aggregate(self, *args, **kwargs):
            trace, stop = [], threading.Event()

            def sample():
                t0 = time.monotonic()
                while not stop.wait(TRACE_PERIOD):
                    trace.append((time.monotonic() - t0, self.window.cwnd, self.window.cuts))

            thread = threading.Thread(target=sample, daemon=True)
            thread.start()
            try:
                return super().aggregate(*args, **kwargs)
            finally:
                stop.set()
                thread.join()
                traces.append({"trace": trace, "limit": self.window.limit, "minimum": self.window.minimum,
                               "contests": self.window.contests, "srtt": self.rtt.srtt,
                               "min_rtt": self.rtt.min_rtt})

    timed = hina.host.demo.timed_aggregate

    def timed_with_trace(*args, **kwargs):
        report = timed(*args, **kwargs)
        t = traces.pop()
        cw = [c for _, c, _ in t["trace"]] or [float("nan")]
        report["window"] = {"least": min(cw), "mean": sum(cw) / len(cw), "last": cw[-1],
                            "cuts": t["trace"][-1][2] if t["trace"] else None, "limit": t["limit"],
                            "minimum": t["minimum"], "samples": len(cw), "contests": t["contests"],
                            "srtt": t["srtt"], "min_rtt": t["min_rtt"],
                            "trace": [(round(a, 4), round(b, 2)) for a, b, _ in t["trace"][:: max(1, len(cw) // 200)]]}
        return report

    hina.host.agent.Worker = TracedWorker
    hina.host.demo.timed_aggregate = timed_with_trace
    return cli.main(["worker", *argv])


def run(args) -> dict:
    from hina.mininet import hina_net

    class TracedExperiment(hina_net.Experiment):
        """hina_net's experiment whose workers are `probe_worker`s (the same worker, traced)."""

        def _aggregate(self, mode, topology):
            original = [h.popen for h in self._hosts()]
            for h in self._hosts():
                def traced(cmd, *a, _h=h, _orig=h.popen, **kw):
                    if cmd[:4] == [sys.executable, "-m", "hina", "worker"]:
                        cmd = [sys.executable, str(Path(__file__).resolve()), "--probe-worker", *cmd[4:]]
                    return _orig(cmd, *a, **kw)
                h.popen = traced
            try:
                run = super()._aggregate(mode, topology)
            finally:
                for h, p in zip(self._hosts(), original):
                    h.popen = p
            return run

    out = {"runs": []}
    for cross in ((), (f"1>0{'@' + str(args.cap) if args.cap else ''}",)):
        cfg = hina_net.ExperimentConfig(workers=args.workers, bw=args.bw, length=args.length, density=1.0,
                                        modes=("dense",), rounds=args.rounds, ping=False, deadline=120.0,
                                        cross=cross)
        load = os.getloadavg()
        res = TracedExperiment(cfg, log=lambda m: print(m, file=sys.stderr, flush=True)).run()
        (r,) = res["runs"]
        out["runs"].append({"cross": list(cross), "loadavg": load, "exact": r["exact"], "seconds": r["seconds"],
                            "line_rate_seconds": r["line_rate_seconds"], "retransmissions": r["retransmissions"],
                            "timeouts": r["timeouts"], "fidelity": r["fidelity"]["verdict"],
                            "fidelity_detail": r["fidelity"].get("detail"), "flow": res.get("cross"),
                            "rounds": [{"seconds": x["seconds"], "fidelity": x["fidelity"]["verdict"],
                                        "workers": x["workers"]} for x in r["rounds"]],
                            "links": {f["link"]: f["bytes"] for f in r["fidelity"]["links"]}})
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--probe-worker"]:
        return probe_worker(argv[1:])
    from hina.cliargs import OneLineParser, between, positive
    from hina.provenance import default_out, out_help

    ap = OneLineParser(prog="cross_traffic.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=between(2, 32), default=4, help="workers (default: 4)")
    ap.add_argument("--bw", type=positive, default=100.0, help="Mbit/s per link (default: 100)")
    ap.add_argument("--length", type=between(1), default=4_000_000, help="elements per gradient (default: 4e6)")
    ap.add_argument("--rounds", type=between(1), default=2, help="aggregations per run (default: 2)")
    ap.add_argument("--cap", type=positive, help="cap the iperf3 flow at this many Mbit/s (default: TCP's own)")
    ap.add_argument("--out", type=Path, default=default_out("cross_traffic.json"), help=out_help("cross_traffic.json"))
    args = ap.parse_args(argv)
    from hina.mininet import hina_net

    problem = hina_net.missing_requirements()
    if problem:
        print(f"cross_traffic.py: {problem}", file=sys.stderr)
        return 2
    out = run(args)
    from hina.provenance import command_line, write_result

    write_result(args.out, out, command_line("benchmarks/cross_traffic.py", argv))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
