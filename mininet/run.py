"""Run a hina experiment on Mininet (as root): a star of workers around the switch, every result checked.

    sudo .venv/bin/python mininet/run.py --workers 8 --switch emulator --mode both \\
        --bw 1000 --length 16777216 --density 0.01

--mode is one of the codec's modes (auto, dense, blocks, aligned, sketch),
"both" (auto and dense) or "all" (every mode).  Writes a JSON result and a
PNG plot (time per phase, bytes on the wire per mode) into --out, exits
non-zero unless every worker's result is exact.  Every run carries the
fidelity monitor's verdict (mininet/fidelity.py): network-bound, or which
CPU set the time.  --calibrate instead bisects the link rate for the
highest at which dense aggregation stays network-bound on this machine.
Heterogeneity: --host-bw, --host-delay, --straggler, --compute, --cross
(mininet/heterogeneity.py).  See docs/fidelity.md.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

from hina.cliargs import OneLineParser, pipes_flag
from hina.codec.params import MODES
from hina.mininet import heterogeneity

MODE_SETS = {"both": ("auto", "dense"), "all": MODES}


def modes_for(choice: str) -> tuple[str, ...]:
    """The modes one --mode value runs, in order."""
    return MODE_SETS.get(choice, (choice,))


def comparisons(runs: list[dict]) -> list[str]:
    """Each non-dense mode against dense: "auto is 2.31x faster than dense" or "... 0.76x of dense (slower)"."""
    by_mode = {r["mode"]: r for r in runs}
    if "dense" not in by_mode:
        return []
    dense = by_mode["dense"]["seconds"]
    lines = []
    for mode, r in by_mode.items():
        if mode == "dense":
            continue
        ratio = dense / r["seconds"]
        what = f"{ratio:.2f}x faster than dense" if ratio >= 1 else f"{ratio:.2f}x of dense (slower)"
        lines.append(f"{mode} is {what}")
    return lines


CALIBRATE_LOW = 10.0  # Mbit/s: the bottom of --calibrate's search
CALIBRATE_SECONDS = 1.0  # each trial's gradient is sized to take about this long at its rate ...
CALIBRATE_LENGTH = (1 << 18, 1 << 23)  # ... within these many elements


def provenance() -> dict:
    """Where and when a result was measured: machine, CPUs, load, date, commit."""
    import os

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parent).stdout.strip()
    return {"machine": platform.platform(), "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "commit": commit or None}


def shape_of(args) -> str:
    """The topology in a result's file name: "" for the star, else "-leafspine214" and the like."""
    if args.topology == "star":
        return ""
    return ("-" + re.sub(r"[^a-z0-9]+", "", Path(args.topology).stem.lower())
            + ("-plainleaves" if args.leaves == "plain" else ""))


def describe_topology(args) -> str:
    """The topology as a reader wants it named: star, or the tree with its uplinks' oversubscription."""
    if args.topology == "star":
        return "star"
    return (f"{args.topology}, {args.oversubscription:g}:1 uplinks"
            + (", plain leaves" if args.leaves == "plain" else ""))


def calibrate(cfg, steps: int, experiment, log, topology: str = "star") -> dict:
    """The highest rate in [CALIBRATE_LOW, cfg.bw] at which dense aggregation's best round is network-bound,
    by bisection on a log scale; every trial with its verdict."""
    trials = []

    def network_bound(bw: float) -> bool:
        length = int(min(max(bw * 1e6 / 8 / 4 * CALIBRATE_SECONDS, CALIBRATE_LENGTH[0]), CALIBRATE_LENGTH[1]))
        trial = dataclasses.replace(cfg, bw=bw, modes=("dense",), length=length, density=1.0, workload=None,
                                    ping=False)
        run = experiment(trial, log=lambda m: None).run()["runs"][0]
        fid = run["fidelity"]
        trials.append({"mbps": bw, "length": length, "exact": run["exact"], "seconds": run["seconds"],
                       "line_rate_seconds": run["line_rate_seconds"], "verdict": fid["verdict"],
                       "detail": fid.get("detail"), "rounds": [r["fidelity"]["verdict"] for r in run["rounds"]],
                       "busiest": fid.get("busiest"), "cpu": fid.get("cpu"),
                       "machine_cores_busy": fid.get("machine_cores_busy")})
        log(f"calibrate: {bw:.1f} Mbit/s, {length:,} elements: {run['seconds']:.3f} s "
            f"(line rate {run['line_rate_seconds']:.3f} s), {fid['verdict']}")
        return fid["bound"] == "network" and run["exact"]

    lo, hi = CALIBRATE_LOW, cfg.bw
    if not network_bound(lo):
        best = None
    elif network_bound(hi):
        best = hi
    else:
        for _ in range(steps):
            mid = math.sqrt(lo * hi)
            if network_bound(mid):
                lo = mid
            else:
                hi = mid
        best = lo
    where = f"{cfg.workers} workers, {cfg.switch}, {topology}"
    summary = (f"calibrate ({where}): dense aggregation stays network-bound up to {best:.0f} Mbit/s per link "
               f"(not at {hi:.0f})" if best is not None and best < cfg.bw else
               f"calibrate ({where}): network-bound at every rate up to {cfg.bw:g} Mbit/s" if best is not None
               else f"calibrate ({where}): not network-bound even at {CALIBRATE_LOW:g} Mbit/s")
    return {"config": dataclasses.asdict(cfg), "topology": topology, "highest_network_bound_mbps": best,
            "trials": trials, "summary": summary}


def build_parser() -> OneLineParser:
    ap = OneLineParser(prog="mininet/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=3, help="worker hosts in the star (default: 3)")
    ap.add_argument("--switch", choices=("emulator", "bmv2"), default="emulator",
                    help="the switch: the Python emulator on raw sockets, or BMv2 simple_switch_grpc "
                         "(default: emulator)")
    ap.add_argument("--mode", choices=(*MODES, "both", "all"), default="auto",
                    help=f"the codec mode to run ({', '.join(MODES)}); both: auto and dense; all: every mode "
                         "(default: auto)")
    ap.add_argument("--workload", help="a model-shaped preset of hina.host.workloads; sets --length "
                                       "(default: none, uniform sparsity at --density)")
    ap.add_argument("--scale", type=float, default=0.02,
                    help="with --workload: shrink the preset by this factor (default: 0.02)")
    ap.add_argument("--bw", type=float, default=1000.0, help="Mbit/s per link, 0: unshaped (default: 1000)")
    ap.add_argument("--delay", type=float, default=0.0, help="ms per link (default: 0)")
    ap.add_argument("--loss", type=float, default=0.0, help="percent per link and direction (default: 0)")
    ap.add_argument("--length", type=int, default=1 << 20,
                    help=f"elements per gradient, without --workload (default: {1 << 20}, 2^20)")
    ap.add_argument("--density", type=float, default=0.01,
                    help="fraction of non-zero elements per worker, without --workload (default: 0.01)")
    ap.add_argument("--mtu", type=int, default=9000,
                    help="MTU of every link; the emulator's words per packet follow from it (default: 9000)")
    ap.add_argument("--slots", type=int, default=64, help="the job's switch slots (default: 64)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="aggregations per mode; the fastest is reported, all are in the JSON (default: 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the workers' gradients (default: 0)")
    ap.add_argument("--deadline", type=float, default=60.0,
                    help="seconds a worker waits without progress before it fails (default: 60)")
    ap.add_argument("--transport", choices=("auto", "udp", "raw"), default="auto",
                    help="workers' transport: UDP to the switch address when routed (auto), or raw frames "
                         "(default: auto)")
    ap.add_argument("--pipes", type=pipes_flag, default=1, metavar="P",
                    help="the emulator's data plane as P processes, each interface's frames handed to pipe "
                         "slot mod P by the kernel (PACKET_FANOUT); emulator only (default: 1)")
    heterogeneity.add_flags(ap)
    ap.add_argument("--topology", default="star", metavar="star|leafspine:L,S,H|FILE.json",
                    help="the network: a star of --workers around one switch, L leaves of H hosts under S spines "
                         "(the job rooted at the spines, slot s at spine s mod S; --workers is L x H), or a "
                         "fabric file (hina.control.fabric; mininet/topo.py, docs/trees.md) (default: star)")
    ap.add_argument("--oversubscription", type=float, default=1.0, metavar="R",
                    help="trees: each leaf's uplinks run at hosts x --bw / (R x uplinks) (default: 1)")
    ap.add_argument("--spine-switch", choices=("emulator", "bmv2"),
                    help="trees: the switches without hosts run this target, --switch the leaves (a mixed tree; "
                         "default: --switch)")
    ap.add_argument("--leaves", choices=("hina", "plain"), default="hina",
                    help="trees: hina switches that sum their rack (hina), or Linux bridges that forward every "
                         "frame, the job summed at the one spine only (plain) (default: hina)")
    ap.add_argument("--calibrate", action="store_true",
                    help="find the highest link rate in [10 Mbit/s, --bw] at which dense aggregation is judged "
                         "network-bound here (a bisection on a log scale, --rounds rounds per rate)")
    ap.add_argument("--calibrate-steps", type=int, default=6, help="bisection steps of --calibrate (default: 6)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results",
                    help="where the JSON and PNG go (default: mininet/results of this checkout)")
    ap.add_argument("--name", metavar="STEM",
                    help="the result files' stem, NAME.json and NAME.png (default: SWITCH[-SHAPE]-MODE-Nw-DATE, "
                         "with --calibrate calibrate-SWITCH[-SHAPE]-Nw-DATE)")
    return ap


def configure(args) -> tuple:
    """(the experiment's configuration, the experiment class to run it) from the flags; a bad value raises
    ValueError and an absent Mininet ImportError, before any host or link exists."""
    from hina.mininet.hina_net import Experiment, ExperimentConfig
    from hina.mininet.topo import TreeConfig, TreeExperiment, parse_topology

    fabric = parse_topology(args.topology)
    config, experiment = ExperimentConfig, Experiment
    if fabric is not None:  # a tree: the workers are the fabric's hosts
        args.workers = len(fabric.hosts)
        config = functools.partial(TreeConfig, spine_switch=args.spine_switch,
                                   oversubscription=args.oversubscription, leaves=args.leaves)
        experiment = functools.partial(TreeExperiment, fabric=fabric)
    elif args.leaves != "hina":
        raise ValueError("--leaves plain needs a --topology with leaves")
    cfg = config(workers=args.workers, switch=args.switch, modes=modes_for(args.mode),
                 bw=args.bw or None, delay=args.delay, loss=args.loss, length=args.length,
                 density=args.density, mtu=args.mtu, slots=args.slots, rounds=args.rounds,
                 seed=args.seed, deadline=args.deadline, transport=args.transport,
                 workload=args.workload, scale=args.scale, pipes=args.pipes,
                 host_bw=args.host_bw, host_delay=args.host_delay, straggler=args.straggler,
                 compute=args.compute, cross=tuple(args.cross))
    if args.calibrate and (not args.bw or args.bw <= CALIBRATE_LOW or args.calibrate_steps < 1):
        raise ValueError(f"--calibrate needs --bw above {CALIBRATE_LOW:g} Mbit/s (the top of the search) and "
                         f"--calibrate-steps >= 1, got --bw {args.bw:g}, --calibrate-steps {args.calibrate_steps}")
    return cfg, experiment


def stem_of(args, kind: str = "") -> str:
    """The result files' stem: --name, or what ran and when."""
    if args.name:
        return args.name
    what = f"calibrate-{args.switch}{shape_of(args)}" if kind == "calibrate" else \
        f"{args.switch}{shape_of(args)}-{args.mode}"
    return f"{what}-{args.workers}w-{time.strftime('%Y%m%d-%H%M%S')}"


def report(results: dict, args) -> None:
    """Each mode's line (exact, what ran, seconds, bytes, verdict), the uplinks of a tree, ping, pipes."""
    for r in results["runs"]:
        line = f" (line rate {r['line_rate_seconds']:.3f} s)" if r["line_rate_seconds"] else ""
        index = "" if not r.get("group") else (" (one-level index)" if r["group"] == 1
                                               else f" (index of {r['group']}-element groups)")
        print(f"{r['mode']:<7s} exact={r['exact']} ran {r.get('encoding')}{index}, {r['seconds']:.3f} s{line}, "
              f"{r['wire_bytes_per_worker']:,.0f} B/worker on the wire, {r['retransmissions']} retransmissions; "
              f"{r['fidelity']['verdict']}")
        if "uplinks" in r:  # a tree: every uplink's bytes per aggregation
            print("        uplinks per aggregation: " + ", ".join(
                f"{k} {v['up']:,.0f} B up, {v['down']:,.0f} B down" for k, v in r["uplinks"].items()))
            drops = r.get("uplink_drops") or {}
            if any(v["up"] or v["down"] for v in drops.values()):
                print("        frames dropped on the uplinks (all rounds): " + ", ".join(
                    f"{k} {v['up']} up, {v['down']} down" for k, v in drops.items()))
    if "ping" in results:
        print(f"ping {results['ping']['from']} -> {results['ping']['to']}: "
              f"{results['ping']['received']}/{results['ping']['sent']} received")
    pipes = results.get("counters", {}).get("pipes")
    if pipes:
        print(f"switch: {args.pipes} pipes, frames per pipe {[p['frames'] for p in pipes]}")


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.name):
        ap.error(f"--name must be a file stem (letters, digits, '.', '_', '-'), got {args.name!r}")
    fail = lambda why: print(f"mininet/run.py: {why}", file=sys.stderr) or 2  # noqa: E731
    try:
        cfg, experiment = configure(args)
        from hina.mininet.hina_net import missing_requirements, plot
    except (ImportError, ValueError) as exc:  # no Mininet, or a bad value: named before anything runs
        return fail(exc)
    problem = missing_requirements(args.switch)
    if problem:
        return fail(problem)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    command = " ".join(["mininet/run.py"] + (argv if argv is not None else sys.argv[1:]))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.calibrate:
        try:
            found = calibrate(cfg, args.calibrate_steps, experiment, log, topology=describe_topology(args))
        except (RuntimeError, ValueError) as exc:
            return fail(exc)
        found.update(command=command, **provenance())
        path = args.out / f"{stem_of(args, 'calibrate')}.json"
        path.write_text(json.dumps(found, indent=1))
        print(found["summary"])
        print(f"wrote {path}")
        return 0
    try:
        results = experiment(cfg, log=log).run()
    except (RuntimeError, ValueError) as exc:
        return fail(exc)
    results["command"] = command
    results.update(provenance())
    if "bmv2" in (args.switch, args.spine_switch):  # the toolchain its figures are BMv2's on
        from hina.provenance import p4_versions

        results["p4"] = p4_versions()
    stem = stem_of(args)
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    png = args.out / f"{stem}.png"
    report(results, args)
    print(f"wrote {args.out / (stem + '.json')}" + (f" and {png}" if plot(results, png) else ""))
    for line in comparisons(results["runs"]):  # last: the summary
        print(line)
    return 0 if all(r["exact"] for r in results["runs"]) else 1

if __name__ == "__main__":
    sys.exit(main())
