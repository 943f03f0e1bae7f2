"""hina's window beside a loss-based TCP flow on a virtual clock: the delay rule alone, contested, fair share.

Dense aggregation of 4 workers (Mininet's star: 85 Mbit/s, 9000-byte
frames, K = 2239 words) whose rank 0 downlink is a drop-tail queue of
`--queues` packets shared, from round 1 on, with a TCP Reno flow
(sim/netsim.py `beside_reno`; round 0 alone).  For each queue and seed,
the workers' own `CongestionWindow` with the delay rule alone
(`contest=inf`), contested after `CONTEST` windows (the rules without
`fair`), and with the fair-share rules (`fair=True`, every worker's default): the
rounds' seconds beside the flow over round 0's, hina's share of the link,
rank 0's window after each round and the frames resent.  A run is a pure
function of its seed: no sockets, no CPU time in the figures.

    python benchmarks/contest_model.py [--queues 32 64 128 256] [--seeds 4]

With `--rates` it sweeps the link's rate instead (the queue 128 packets: 310 ms at 30 Mbit/s, 46 ms
at 200), the flow uncapped and capped at `--cap` Mbit/s, as shipped and with the fair-share rules: hina's share of the
contested link, its rounds beside the flow over the same rounds alone, the cuts and the resends
(`rates_table`; written to contest_rates.json):

    python benchmarks/contest_model.py --rates 30 60 100 200 --cap 40 [--rounds 4] [--seeds 2]
"""

from __future__ import annotations

import math
import sys

import numpy as np

from hina.cliargs import OneLineParser, between, positive
from hina.provenance import command_line, default_out, out_help, out_path, write_result
from hina.sim.netsim import beside_reno

# each sender: beside_reno's arguments
RULES = {"delay rule alone": {"contest": math.inf}, "contested": {"contest": None},
         "fair share": {"contest": None, "fair": True}}
SHIPPED = ("contested", "fair share")  # the senders a user can run (CongestionSettings(fair=False), and the default)


def table(data: dict) -> list[str]:
    """Markdown rows: per queue and rule, the seeds' mean slowdown, share, window and resends."""
    lines = ["| drop-tail queue (packets) | sender | rounds beside the flow / alone | hina's share of the link | "
             "rank 0's window after each round (chunks) | contested | frames resent per round |",
             "|---|---|---|---|---|---|---|"]
    for row in data["rows"]:
        lines.append(f"| {row['queue']} | {row['rule']} | {row['slowdown']:.1f}x | {row['share']:.0%} | "
                     f"{row['cwnd_min']:.0f}-{row['cwnd_max']:.0f} | {row['contests']} | {row['resent']:.0f} |")
    return lines


def rates_table(data: dict) -> list[str]:
    """Markdown rows: per rate and flow, the seeds' mean share, slowdown, cuts and resends."""
    lines = ["| link (Mbit/s) | flow | sender | hina's share of the contested link | the flow's | hina's "
             "fair share | rounds beside the flow / alone | rank 0's cuts per round | frames resent "
             "per round | exact |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in data["rates"]:
        flow = "Reno" + (f", capped at {row['cap']:g} Mbit/s" if row["cap"] else "")
        lines.append(f"| {row['rate']:g} | {flow} | {row['rule']} | {row['share']:.0%} | {row['flow_share']:.0%} | "
                     f"{row['fair']:.0%} | {row['slowdown']:.2f}x | {row['cuts']:.1f} | {row['resent']:.0f} | "
                     f"{'yes' if row['exact'] else 'no'} |")
    return lines


def sweep_rates(rates: list[float], cap: float | None, rounds: int, seeds: int) -> list[dict]:
    """Each shipped sender beside a Reno flow (and, with `cap`, beside one capped at `cap` Mbit/s) at each
    rate, against the same rounds alone."""
    rows = []
    for cap_, rate, rule in ((c, r, s) for c in ((None, cap) if cap else (None,)) for r in rates for s in SHIPPED):
        runs = []
        for seed in range(seeds):
            alone = beside_reno(seed=seed, flow=False, rate_mbps=rate, rounds=rounds, **RULES[rule])
            beside = beside_reno(seed=seed, rate_mbps=rate, rounds=rounds, cap=cap_, **RULES[rule])
            runs.append((alone, beside))  # beside_reno raised had any sum been wrong
        fair = 0.5 if cap_ is None else max(0.5, 1 - cap_ / rate)
        row = {"rate": rate, "cap": cap_, "rule": rule, "fair": fair, "rounds": rounds, "seeds": seeds,
               "exact": True,
               "share": float(np.mean([b["share"] for _, b in runs])),
               "flow_share": float(np.mean([b["flow_share"] for _, b in runs])),
               "slowdown": float(np.mean([b["later"] / a["later"] for a, b in runs])),
               "cuts": float(np.mean([b["cuts"][0] / (rounds - 1) for _, b in runs])),
               "contests": sum(b["window"].contests for _, b in runs),
               "resent": float(np.mean([b["resent"] for _, b in runs]))}
        rows.append(row)
        capped = "uncapped" if cap_ is None else f"capped at {cap_:g}"
        print(f"{rate:5g} Mbit/s, flow {capped}, {rule}: share "
              f"{row['share']:.0%} (the flow {row['flow_share']:.0%}), {row['slowdown']:.2f}x alone, "
              f"{row['cuts']:.1f} cuts a round", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="contest_model.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--queues", type=between(4, 4096), nargs="+", default=[32, 64, 128, 256],
                    help="drop-tail queues to model, packets (default: 32 64 128 256)")
    ap.add_argument("--seeds", type=between(1, 100), default=4, help="seeds per case (default: 4)")
    ap.add_argument("--rates", type=positive, nargs="+", help="sweep these link rates, Mbit/s, instead of the queues")
    ap.add_argument("--cap", type=positive, help="with --rates: also beside a flow capped at this many Mbit/s")
    ap.add_argument("--rounds", type=between(2, 100), default=4, help="with --rates: rounds per run (default: 4)")
    ap.add_argument("--out", type=out_path, help=out_help("contest_model.json") + " (--rates: contest_rates.json)")
    args = ap.parse_args(argv)
    if args.rates:
        out = args.out or default_out("contest_rates.json")
        data = {"rates": sweep_rates(args.rates, args.cap, args.rounds, args.seeds), "queue": 128, "workers": 4,
                "slots": 64, "frame_bytes": 9014}
        write_result(out, data, command_line("benchmarks/contest_model.py", argv))
        print("\n".join(rates_table(data)))
        print(f"wrote {out}")
        return 0
    args.out = args.out or default_out("contest_model.json")
    rows = []
    for queue in args.queues:
        for rule, kwargs in RULES.items():
            runs = [beside_reno(seed=seed, queue=queue, **kwargs) for seed in range(args.seeds)]
            cwnds = [c for r in runs for c in r["cwnds"]]
            contest = runs[0]["window"].state["contest"][0].item()
            row = {"queue": queue, "rule": rule, "contest": None if math.isinf(contest) else contest,
                   "slowdown": float(np.mean([r["later"] / r["alone"] for r in runs])),
                   "share": float(np.mean([r["share"] for r in runs])),
                   "cwnd_min": min(cwnds), "cwnd_max": max(cwnds),
                   "contests": sum(r["window"].contests for r in runs),
                   "resent": float(np.mean([r["resent"] for r in runs])), "seeds": args.seeds}
            rows.append(row)
            print(f"queue {queue:4d}, {rule:16s}: {row['slowdown']:5.1f}x alone, share {row['share']:4.0%}, "
                  f"window {row['cwnd_min']:.0f}-{row['cwnd_max']:.0f}, {row['contests']} contests", flush=True)
    data = {"rows": rows, "link_mbps": 85.0, "workers": 4, "frame_bytes": 9014}
    write_result(args.out, data, command_line("benchmarks/contest_model.py", argv))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
