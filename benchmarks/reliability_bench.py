"""Loss and disorder: exact results and the cost of retransmission at each loss rate, both modes.

For each drop probability (each direction, at the switch) with 1% duplication
and 1% reordering, runs `hina demo` (emulator on loopback, --workers worker
processes) in hina and dense mode and reports whether every worker was
exact, the seconds, and packets sent per useful packet: every frame the
workers sent over the frames a loss-free run needs.

    python benchmarks/reliability_bench.py [--length 1048576 --workers 4]
Writes reliability_bench.json and reliability.png beside it (--out; default: $HINA_RESULTS, else hina-results/).
"""

from __future__ import annotations

import sys

from hina.cliargs import OneLineParser, between, fraction, probability
from hina.codec.params import MAX_WORKERS
from hina.host.demo import DemoConfig, run_demo
from hina.host.job import JobSpec
from hina.provenance import command_line, default_out, out_help, out_path, write_result
from hina.wire.headers import max_words


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="reliability_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--drops", type=probability, nargs="+", default=[0.0, 0.001, 0.01, 0.05, 0.10])
    ap.add_argument("--length", type=between(1), default=1 << 20)
    ap.add_argument("--density", type=fraction, default=0.01)
    ap.add_argument("--workers", type=between(1, MAX_WORKERS), default=4)
    ap.add_argument("--words", type=between(1, max_words(65535)), default=256,
                    help="K: smaller packets, more of them to lose")
    ap.add_argument("--out", type=out_path, default=default_out("reliability_bench.json"),
                    help=out_help("reliability_bench.json", "the JSON result, reliability.png beside it"))
    args = ap.parse_args(argv)
    rows = []
    for drop in args.drops:
        for mode in ("auto", "dense"):
            extra = 0.01 if drop else 0.0
            s = run_demo(DemoConfig(workers=args.workers, length=args.length, density=args.density, mode=mode,
                                    drop=drop, dup=extra, reorder=extra, seed=1, job=JobSpec(words=args.words),
                                    deadline=60.0))
            frames = s["frames_per_worker"] * args.workers
            useful = frames - s["retransmissions"]
            row = {"drop": drop, "dup": extra, "reorder": extra, "mode": mode, "exact": s["exact"],
                   "seconds": s["seconds"], "frames": frames, "retransmissions": s["retransmissions"],
                   "packets_per_useful_packet": frames / useful, "switch_drops": s["switch_drop_reasons"],
                   "impairments": s["impairments"], "errors": s["errors"]}
            rows.append(row)
            print(f"drop {drop:6.1%} {mode:<5s} ({s['encoding']}) exact={row['exact']} {row['seconds']:7.3f} s  "
                  f"{row['packets_per_useful_packet']:.3f} packets sent per useful packet "
                  f"({s['retransmissions']} retransmissions of {frames:,.0f} frames)", flush=True)
    write_result(args.out, {"rows": rows}, command_line("benchmarks/reliability_bench.py", argv))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.4))
        for mode in ("auto", "dense"):
            sel = [r for r in rows if r["mode"] == mode]
            ax.plot([100 * r["drop"] for r in sel], [r["packets_per_useful_packet"] for r in sel], "o-", label=mode)
        ax.set_xlabel("drop probability per direction (%)")
        ax.set_ylabel("packets sent per useful packet")
        ax.set_title(f"{args.workers} workers, d={args.length:,}, +1% dup, +1% reorder", fontsize=9)
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out.with_name("reliability.png"), dpi=120)
    except ImportError:
        pass
    print(f"wrote {args.out}")
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
