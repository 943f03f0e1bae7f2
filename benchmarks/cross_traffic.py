"""hina's sender beside a competing TCP flow (Mininet, root): does its congestion window collapse?

Runs dense aggregation on hina's Mininet star twice, without and with an
iperf3 TCP flow from rank 1's host to rank 0's (it shares rank 1's uplink,
where rank 1's UPDATEs go, and rank 0's downlink, where rank 0's RESULTs
come, with the aggregation), and traces every worker's congestion window:
each worker is `hina worker` (host/cli.py) with a thread that reads its
`CongestionWindow` (cwnd, cuts) every 2 ms.  Reports per run and worker the
seconds, the window's least / mean / last value and cuts, the resends, and
the flow's own throughput (iperf3), with the fidelity verdict.

*The contested link* is rank 0's downlink (the switch's port to rank 0's
host): the one link where the aggregation's packets (every RESULT to rank
0) and the flow's wait in one queue, the htb class Mininet's TCLink puts on
it with its default leaf, a pfifo of the interface's txqueuelen (1000
frames).  hina's *share* of it in a round is the bytes rank 0's RESULTs
had to bring (its chunks, on the wire, resends not counted) over what the
link carries in the round's seconds: alone it is about 1, and an equal
split with the flow is 0.5.  A thread samples that queue (`tc -s qdisc`:
backlog and drops) every 50 ms while each run lasts.

    sudo .venv/bin/python benchmarks/cross_traffic.py --workers 4 --bw 100 --length 4000000 --rounds 2
    sudo .venv/bin/python benchmarks/cross_traffic.py --workers 4 --bws 30 60 85 120 200 [--cap 40] [--slots 512]

`--bws` runs the pair (alone, beside the flow) once per rate; `table(result)`
is the markdown table of rate against hina's share and slowdown.  Writes
--out (default: cross_traffic.json in $HINA_RESULTS, else hina-results/).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

TRACE_PERIOD = 0.002  # seconds between window samples in a worker
QUEUE_PERIOD = 0.05  # seconds between samples of the contested link's queue


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
                            "frames": report["frames"], "resent": report["retransmissions"],
                            "wire_bytes": report["wire_bytes"],
                            "cuts": t["trace"][-1][2] if t["trace"] else None, "limit": t["limit"],
                            "minimum": t["minimum"], "samples": len(cw), "contests": t["contests"],
                            "srtt": t["srtt"], "min_rtt": t["min_rtt"],
                            "trace": [(round(a, 4), round(b, 2)) for a, b, _ in t["trace"][:: max(1, len(cw) // 200)]]}
        return report

    hina.host.agent.Worker = TracedWorker
    hina.host.demo.timed_aggregate = timed_with_trace
    return cli.main(["worker", *argv])


class QueueProbe:
    """Samples interfaces' root qdisc (`tc -s -j qdisc show`: backlog in packets, drops) every `period`
    seconds on a thread, from `start()` until `stop()`, which returns each interface's samples."""

    def __init__(self, interfaces: list[str], period: float = QUEUE_PERIOD):
        self.interfaces, self.period = interfaces, period
        self.samples: dict[str, list[tuple[float, int, int]]] = {i: [] for i in interfaces}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def read(interface: str) -> tuple[int, int] | None:
        """(packets queued, packets dropped so far) of the interface's root qdisc; None if tc cannot say."""
        import json
        import subprocess

        out = subprocess.run(["tc", "-s", "-j", "qdisc", "show", "dev", interface], capture_output=True, text=True)
        try:
            root = next(q for q in json.loads(out.stdout) if q.get("root"))
            return int(root["qlen"]), int(root["drops"])
        except (ValueError, StopIteration, KeyError, TypeError):
            return None

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.wait(self.period):
            for i in self.interfaces:
                got = self.read(i)
                if got is not None:
                    self.samples[i].append((round(time.monotonic() - t0, 3), *got))

    def start(self) -> QueueProbe:
        self._thread.start()
        return self

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        out = {}
        for i, rows in self.samples.items():
            backlog = [b for _, b, _ in rows] or [0]
            out[i] = {"samples": len(rows), "backlog_max": max(backlog), "backlog_mean": sum(backlog) / len(backlog),
                      "drops": rows[-1][2] - rows[0][2] if rows else None,
                      "trace": [list(r) for r in rows[:: max(1, len(rows) // 200)]]}
        return out


def contested_share(rnd: dict, bw: float) -> float | None:
    """hina's share of the contested link in a round: the wire bytes of the chunks rank 0's RESULTs
    brought (its frames less its resends, each frame with its Ethernet overhead) over what `bw` Mbit/s
    carries in the round's seconds."""
    from hina.wire.headers import FRAME_OVERHEAD

    w = next((x["window"] for x in rnd["workers"] if x["rank"] == 0 and "window" in x), None)
    if not w or not w.get("frames") or not rnd["seconds"]:
        return None
    per_frame = w["wire_bytes"] / w["frames"] + FRAME_OVERHEAD
    return (w["frames"] - w["resent"]) * per_frame * 8 / (bw * 1e6 * rnd["seconds"])


def cap_arg(text: str) -> str:
    """`--cap`: Mbit/s ("40") or a share of the link ("50%"), kept as text until the link's rate is known."""
    number = text[:-1] if text.endswith("%") else text
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if not value > 0 or (text.endswith("%") and value > 100):
        raise argparse.ArgumentTypeError(f"{text!r} is neither Mbit/s nor a share of the link such as 50%")
    return text


def cap_mbps(cap: str | None, bw: float) -> float | None:
    """The flow's cap in Mbit/s on a `bw` Mbit/s link, or None for none."""
    if not cap:
        return None
    return float(cap[:-1]) / 100 * bw if cap.endswith("%") else float(cap)


def run(args, bw: float) -> list[dict]:
    """The pair of runs at `bw` Mbit/s: alone, then beside the flow."""
    from hina.host.congestion_settings import CongestionSettings
    from hina.mininet import hina_net

    cap = cap_mbps(args.cap, bw)

    probes: list[dict] = []

    class TracedExperiment(hina_net.Experiment):
        """hina_net's experiment whose workers are `probe_worker`s (the same worker, traced), with the
        contested link's queue sampled."""

        def _aggregate(self, mode, topology):
            original = [h.popen for h in self._hosts()]
            for h in self._hosts():
                def traced(cmd, *a, _h=h, _orig=h.popen, **kw):
                    if cmd[:4] == [sys.executable, "-m", "hina", "worker"]:
                        cmd = [sys.executable, str(Path(__file__).resolve()), "--probe-worker", *cmd[4:]]
                    return _orig(cmd, *a, **kw)
                h.popen = traced
            switch, hosts = self.net[self.names.switch], self._hosts()
            # the switch's port to rank 0 (the contested link) and rank 1's own port (the flow's source)
            ports = [link.intf1.name if link.intf1.node is switch else link.intf2.name
                     for link in self.net.linksBetween(hosts[0], switch)]
            probe = QueueProbe(ports + [hosts[1].defaultIntf().name]).start()
            try:
                run = super()._aggregate(mode, topology)
            finally:
                probes.append(probe.stop())
                for h, p in zip(self._hosts(), original):
                    h.popen = p
            return run

    out = []
    for cross in ((), (f"1>0{f'@{cap:g}' if cap else ''}",)):
        cfg = hina_net.ExperimentConfig(workers=args.workers, bw=bw, length=args.length, density=1.0,
                                        modes=("dense",), rounds=args.rounds, ping=False, deadline=120.0,
                                        cross=cross, slots=args.slots,
                                        congestion=CongestionSettings(fair=not args.delay_rule))
        load = os.getloadavg()
        res = TracedExperiment(cfg, log=lambda m: print(m, file=sys.stderr, flush=True)).run()
        (r,) = res["runs"]
        rounds = [{"seconds": x["seconds"], "fidelity": x["fidelity"]["verdict"], "workers": x["workers"]}
                  for x in r["rounds"]]
        for x in rounds:
            x["share"] = contested_share(x, bw)
        out.append({"bw": bw, "cap": cap, "slots": args.slots, "fair_share": not args.delay_rule, "cross": list(cross),
                    "loadavg": load,
                    "exact": r["exact"], "seconds": r["seconds"],
                    "line_rate_seconds": r["line_rate_seconds"], "retransmissions": r["retransmissions"],
                    "timeouts": r["timeouts"], "fidelity": r["fidelity"]["verdict"],
                    "fidelity_detail": r["fidelity"].get("detail"), "flow": res.get("cross"), "rounds": rounds,
                    "queues": probes[-1] if probes else {},
                    "links": {f["link"]: f["bytes"] for f in r["fidelity"]["links"]}})
    return out


TABLE_HEADER = ["| link (Mbit/s) | flow | sender | seconds alone (best round) | seconds beside the flow (each round) | "
                "slowdown (slowest round) | hina's share of the contested link (least round) | the flow (Mbit/s) | "
                "rank 0's window: least / mean (chunks) | cuts per worker | frames resent | contested link's queue: "
                "most / mean (packets), drops | verdicts (alone / beside) |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]


def table(result: dict) -> list[str]:
    """Markdown: `TABLE_HEADER` and `table_rows`."""
    return [*TABLE_HEADER, *table_rows(result)]


def table_rows(result: dict) -> list[str]:
    """Markdown rows: per rate, hina's seconds alone (best round) and beside the flow (each round), its
    slowdown (its slowest round beside the flow over its best alone), its share of the contested link
    (the least of its rounds beside the flow), the flow's rate (over its whole run, the aggregation's
    time and after it), rank 0's window, the queue and the verdicts."""
    lines = []
    runs = result["runs"]
    for alone, beside in zip(runs[0::2], runs[1::2]):
        best = min(x["seconds"] for x in alone["rounds"])
        slowest = max(x["seconds"] for x in beside["rounds"])
        shares = [x["share"] for x in beside["rounds"] if x.get("share") is not None]
        zero = [w["window"] for x in beside["rounds"] for w in x["workers"] if w["rank"] == 0 and "window" in w]
        cuts = [w["window"]["cuts"] for x in beside["rounds"] for w in x["workers"]
                if "window" in w and w["window"]["cuts"] is not None]
        flows = beside.get("flow") or [{}]
        mbps = flows[0].get("mbps")
        q = next(iter((beside.get("queues") or {}).values()), None) or {}
        cap = beside.get("cap")
        lines.append(
            f"| {beside['bw']:g} | TCP{f', capped at {cap:g} Mbit/s' if cap else ''} | "
            f"{'fair share' if beside.get('fair_share') else 'delay rule'} | {best:.3f} | "
            + ", ".join(f"{x['seconds']:.3f}" for x in beside["rounds"]) + f" | {slowest / best:.2f}x | "
            + (f"{min(shares):.0%}" if shares else "-") + " | "
            + (f"{mbps:.1f}" if mbps is not None else "-") + " | "
            + (f"{min(w['least'] for w in zero):.1f} / {sum(w['mean'] for w in zero) / len(zero):.1f}" if zero else "-")
            + f" | {min(cuts, default=0)}-{max(cuts, default=0)} | {beside['retransmissions']} | "
            + (f"{q['backlog_max']} / {q['backlog_mean']:.0f}, {q['drops']}" if q else "-")
            + f" | {alone['fidelity']} / {beside['fidelity']} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--probe-worker"]:
        return probe_worker(argv[1:])
    from hina.cliargs import OneLineParser, between, positive
    from hina.control.ledger import DEFAULT_SPACE
    from hina.host.job import DEFAULT_SLOTS
    from hina.provenance import default_out, out_help, out_path

    ap = OneLineParser(prog="cross_traffic.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=between(2, 32), default=4, help="workers (default: 4)")
    ap.add_argument("--bw", type=positive, default=100.0, help="Mbit/s per link (default: 100)")
    ap.add_argument("--bws", type=positive, nargs="+", help="run once per rate, Mbit/s (instead of --bw)")
    ap.add_argument("--slots", type=between(2, DEFAULT_SPACE), default=DEFAULT_SLOTS,
                    help=f"the job's slots, W (default: {DEFAULT_SLOTS})")
    ap.add_argument("--delay-rule", action="store_true",
                    help="the workers' windows with the delay rule alone, for comparison (default: the fair-share "
                         "rules)")
    ap.add_argument("--length", type=between(1), default=4_000_000, help="elements per gradient (default: 4e6)")
    ap.add_argument("--rounds", type=between(1), default=2, help="aggregations per run (default: 2)")
    ap.add_argument("--cap", type=cap_arg, help="cap the iperf3 flow at this many Mbit/s, or this share of the link "
                    "with a %% sign, e.g. 50%% (default: TCP's own)")
    ap.add_argument("--out", type=out_path, default=default_out("cross_traffic.json"),
                    help=out_help("cross_traffic.json"))
    args = ap.parse_args(argv)
    from hina.mininet import hina_net

    problem = hina_net.missing_requirements()
    if problem:
        print(f"cross_traffic.py: {problem}", file=sys.stderr)
        return 2
    out = {"runs": [run_ for bw in (args.bws or [args.bw]) for run_ in run(args, bw)]}
    from hina.provenance import command_line, write_result

    write_result(args.out, out, command_line("benchmarks/cross_traffic.py", argv))
    print("\n".join(table(out)))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
