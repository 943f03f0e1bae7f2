"""hina's window beside a loss-based TCP flow on a virtual clock: the delay rule alone against the contested window.

Dense aggregation of 4 workers (Mininet's star: 85 Mbit/s, 9000-byte
frames, K = 2239 words) whose rank 0 downlink is a drop-tail queue of
`--queues` packets shared, from round 1 on, with a TCP Reno flow
(sim/netsim.py `beside_reno`; round 0 alone).  For each queue and seed,
the workers' own `CongestionWindow` with the delay rule alone
(`contest=inf`) and as shipped (contested after `CONTEST` windows): the
rounds' seconds beside the flow over round 0's, hina's share of the link,
rank 0's window after each round and the frames resent.  A run is a pure
function of its seed: no sockets, no CPU time in the figures.

    python benchmarks/contest_model.py [--queues 32 64 128 256] [--seeds 4]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from hina.cliargs import OneLineParser, between
from hina.host.window import CongestionWindow
from hina.provenance import command_line, default_out, out_help, write_result
from hina.sim.netsim import beside_reno

RULES = {"delay rule alone": math.inf, "contested": CongestionWindow.CONTEST}


def table(data: dict) -> list[str]:
    """Markdown rows: per queue and rule, the seeds' mean slowdown, share, window and resends."""
    lines = ["| drop-tail queue (packets) | sender | rounds beside the flow / alone | hina's share of the link | "
             "rank 0's window after each round (chunks) | contested | frames resent per round |",
             "|---|---|---|---|---|---|---|"]
    for row in data["rows"]:
        lines.append(f"| {row['queue']} | {row['rule']} | {row['slowdown']:.1f}x | {row['share']:.0%} | "
                     f"{row['cwnd_min']:.0f}-{row['cwnd_max']:.0f} | {row['contests']} | {row['resent']:.0f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="contest_model.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--queues", type=between(4, 4096), nargs="+", default=[32, 64, 128, 256],
                    help="drop-tail queues to model, packets (default: 32 64 128 256)")
    ap.add_argument("--seeds", type=between(1, 100), default=4, help="seeds per case (default: 4)")
    ap.add_argument("--out", type=Path, default=default_out("contest_model.json"), help=out_help("contest_model.json"))
    args = ap.parse_args(argv)
    rows = []
    for queue in args.queues:
        for rule, contest in RULES.items():
            runs = [beside_reno(contest, seed, queue=queue) for seed in range(args.seeds)]
            cwnds = [c for r in runs for c in r["cwnds"]]
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
