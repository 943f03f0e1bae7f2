"""Run a hina experiment on Mininet (as root): a star of workers around the switch, every result checked.

    sudo .venv/bin/python mininet/run.py --workers 8 --switch emulator --mode both \\
        --bw 1000 --length 16777216 --density 0.01

Writes a JSON result and a PNG plot (time per phase, bytes on the wire per
mode) into --out, exits non-zero unless every worker's result is exact.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hina_net import Experiment, ExperimentConfig, missing_requirements, plot  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--switch", choices=("emulator", "bmv2"), default="emulator")
    ap.add_argument("--mode", choices=("hina", "dense", "blocks", "both", "all"), default="hina",
                    help="both: hina and dense; all: hina, dense and blocks (OmniReduce-style)")
    ap.add_argument("--workload", help="a model-shaped preset of benchmarks/workloads.py (sets --length)")
    ap.add_argument("--scale", type=float, default=0.02, help="with --workload: shrink the preset by this factor")
    ap.add_argument("--bw", type=float, default=1000.0, help="Mbit/s per link (0: unshaped)")
    ap.add_argument("--delay", type=float, default=0.0, help="ms per link")
    ap.add_argument("--loss", type=float, default=0.0, help="percent per link and direction")
    ap.add_argument("--length", type=int, default=1 << 20)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--mtu", type=int, default=9000)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1, help="aggregations per mode (the fastest is reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=60.0)
    ap.add_argument("--transport", choices=("auto", "udp", "raw"), default="auto",
                    help="workers' transport: UDP to the switch address when routed (auto), or raw frames")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results",
                    help="where the JSON and PNG go (default: mininet/results of this checkout)")
    args = ap.parse_args(argv)

    problem = missing_requirements(args.switch)
    if problem:
        print(f"mininet/run.py: {problem}", file=sys.stderr)
        return 2
    modes = {"both": ("hina", "dense"), "all": ("hina", "dense", "blocks")}.get(args.mode, (args.mode,))
    cfg = ExperimentConfig(workers=args.workers, switch=args.switch, modes=modes, bw=args.bw or None,
                           delay=args.delay, loss=args.loss, length=args.length, density=args.density,
                           mtu=args.mtu, slots=args.slots, rounds=args.rounds, seed=args.seed,
                           deadline=args.deadline, transport=args.transport, workload=args.workload,
                           scale=args.scale)
    try:
        results = Experiment(cfg, log=lambda m: print(m, file=sys.stderr, flush=True)).run()
    except (RuntimeError, ValueError) as exc:
        print(f"mininet/run.py: {exc}", file=sys.stderr)
        return 2
    results["command"] = " ".join(["mininet/run.py"] + (argv if argv is not None else sys.argv[1:]))
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"{args.switch}-{args.mode}-{args.workers}w-{time.strftime('%Y%m%d-%H%M%S')}"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    png = args.out / f"{stem}.png"
    for r in results["runs"]:
        line = f" (line rate {r['line_rate_seconds']:.3f} s)" if r["line_rate_seconds"] else ""
        print(f"{r['mode']:<5s} exact={r['exact']} {r['seconds']:.3f} s{line}, "
              f"{r['wire_bytes_per_worker']:,.0f} B/worker on the wire, {r['retransmissions']} retransmissions")
    by_mode = {r["mode"]: r for r in results["runs"]}
    if "hina" in by_mode and "dense" in by_mode:
        print(f"hina is {by_mode['dense']['seconds'] / by_mode['hina']['seconds']:.2f}x faster than dense")
    if "ping" in results:
        print(f"ping {results['ping']['from']} -> {results['ping']['to']}: "
              f"{results['ping']['received']}/{results['ping']['sent']} received")
    print(f"wrote {args.out / (stem + '.json')}" + (f" and {png}" if plot(results, png) else ""))
    return 0 if all(r["exact"] for r in results["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
