"""hina at scale on ns-3, cross-checked against the scale model: the same rounds, fabrics and caps on both.

For each fabric (star, leaf/spine, k-ary fat tree, a tree of 2 or 3 tiers:
one `hina.control.Fabric`, its rates and queues), worker count, preset and
mode (dense, blocks, auto), the rounds one worker sends come from the scale
model's own sizing (`hina.sim.scale.union_stats` and `preset_rounds`: the N
workers' union drawn at full size from the preset's generators), so both
simulators see the same bytes.  Each point runs on ns-3 (`hina.sim.ns3sim`:
every worker's sender, every switch's pipeline, ns-3's links and queues)
and on the scale model (`aggregation_seconds` on the same fabric), and
reports their ratio, whether the point lies in the model's domain (no
switch port would drop), and, from ns-3, where the time went: seconds per
round, retransmissions, drops, the deepest queue at the root.

The words the ns-3 workers send are real: the preset's gradient at a
scale that keeps it small (`ns3sim.RealWords`: about 131,072 words at the
preset's density, quantized, each worker's rotated), and every RESULT every
worker receives, and every round's result, is checked against numpy's sum
(the `exact` column).  A point that is not exact is a failure: the command
says which and exits with status 1.  It writes `ns3_scale.json` and its
plots (`ns3_scale_<fabric>.png`, `ns3_scale_breakdown.png`).

    python benchmarks/ns3_scale.py [--workers 8,64,256,1024] [--fabrics leaf_spine,fat_tree]
        [--presets deeplight lstm] [--modes dense,blocks,auto] [--gbps 100] [--cap 256] [--out PATH]
    python benchmarks/ns3_scale.py --tables RESULT_JSON

Needs ns-3's Python bindings: pip install 'hina[ns3]' (`make install` does).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from hina.cliargs import OneLineParser, between, checked, existing_file, non_negative, positive
from hina.codec.params import MAX_WORKERS
from hina.control import Fabric
from hina.host.workloads import PRESETS, preset
from hina.provenance import command_line, default_out, out_help, out_path, write_result
from hina.sim import ns3sim
from hina.sim.scale import Setup, aggregation_seconds, outside, preset_rounds, round_chunks, support_scale, union_stats
from hina.wire.headers import max_words

MODES = ("dense", "blocks", "auto")
FABRICS = ("star", "leaf_spine", "fat_tree", "tree")
MODEL_CAP = 2048  # the scale model's own default, at which its published projection was made
AGREE = 0.15  # the cross-check's bar: ns-3 and the model within 15% of each other


def fabric_for(name: str, workers: int, args) -> tuple[str, Fabric] | None:
    """The fabric `name` for `workers` with the flags' rates and queue, and its label in the rows; None where it
    cannot hold them on ns-3 (a star of more than 32: a switch's arrival bitmap)."""
    rate, uplink, queue = args.gbps * 1000, args.uplink_gbps * 1000, args.queue
    if name == "star":
        return ("star", Fabric.star(workers, rate=rate, queue=queue)) if workers <= MAX_WORKERS else None
    if name == "leaf_spine":
        return name, Fabric.leaf_spine(workers, rack=args.rack, spines=args.spines, rate=rate, uplink_rate=uplink,
                                       queue=queue)
    if name == "tree":
        return f"tree{args.depth}", Fabric.tree(workers, args.depth, rate=rate, uplink_rate=uplink, queue=queue)
    return f"fat_tree_k{args.k}", Fabric.fat_tree(workers, k=args.k, rate=rate, queue=queue)


def run_point(fabric: Fabric, plan: dict, data: ns3sim.RealWords, args, log) -> dict:
    """One fabric, worker count and mode on ns-3 (real words, every result checked) and on the scale model."""
    words = max_words(args.mtu)
    cap = args.cap or None
    net = Setup(fabric, words=words, slots=args.slots, delay=args.delay_us * 1e-6,
                switch_latency=args.switch_latency_us * 1e-6)
    # --cap 0: every chunk on both (under loss a capped round is no steady state to extrapolate)
    every = max(round_chunks(r, words) for r in plan["rounds"])
    model = aggregation_seconds(net, plan["rounds"], plan["residual_chance"], cap=cap or every)
    model_default = (model if cap == MODEL_CAP else
                     aggregation_seconds(net, plan["rounds"], plan["residual_chance"], cap=MODEL_CAP))
    opts = dict(words=words, slots=args.slots, cap=cap, delay=args.delay_us * 1e-6,
                switch_latency=args.switch_latency_us * 1e-6, start_spread=args.start_spread_us * 1e-6,
                seed=args.seed, data=data)
    run = ns3sim.simulate(fabric, plan["rounds"], progress=log if len(fabric.hosts) >= 256 else None, **opts)
    seconds, wall, exact, checked = run.seconds, run.wall_seconds, run.exact, run.checked
    if plan["residual_chance"]:  # the sketch's residual round, charged as the scale model charges it
        extra = ns3sim.simulate(fabric, [(1,)], **opts)
        seconds += extra.seconds * plan["residual_chance"]
        wall, exact, checked = wall + extra.wall_seconds, exact and extra.exact, checked + extra.checked
    return {"seconds": seconds, "model_seconds": model["seconds"], "model_seconds_cap2048": model_default["seconds"],
            "ratio": seconds / model["seconds"], "model_in_domain": model["in_domain"], "model_outside": outside(model),
            "model_deepest_queue": model["deepest_queue"], "encoding": plan["encoding"], "rounds": run.rounds,
            "model_rounds": [r["seconds"] for r in model["rounds"]],
            "retransmissions": run.retransmissions, "timeouts": run.timeouts, "model_retransmissions":
            model["retransmissions"], "drops": run.drops, "root_max_queue": run.root_max_queue,
            "max_queue": run.max_queue, "frames": run.frames, "exact": exact, "checked_results": checked,
            "wall_seconds": wall}


def cross_check(args, log) -> list[dict]:
    rows = []
    for name in args.presets:
        length = preset(name).size
        start = time.perf_counter()
        drawn = support_scale(name, max(args.workers))
        stats = union_stats(name, args.workers, drawn, args.seed)
        log(f"{name}: union of {max(args.workers)} workers drawn in {time.perf_counter() - start:.1f} s")
        for st in stats:
            plans = {mode: preset_rounds(st, length, mode, args.gbps) for mode in args.modes}
            data = ns3sim.RealWords.of_preset(name, st.workers, seed=args.seed)
            for fab_name in args.fabrics:
                made = fabric_for(fab_name, st.workers, args)
                if made is None:
                    log(f"{name} {fab_name} {st.workers} workers: skipped (a switch holds {MAX_WORKERS} children)")
                    continue
                label, fabric = made
                for mode, plan in plans.items():
                    step = lambda m, at=f"{name} {label} {mode} ": log(f"  {at}{m}")  # noqa: E731
                    point = run_point(fabric, plan, data, args, step)
                    rows.append({"preset": name, "fabric": label, "workers": st.workers, "mode": mode,
                                 "gbps": args.gbps, "uplink_gbps": args.uplink_gbps,
                                 "shape": list(Setup(fabric).fanins),
                                 "oversubscription": fabric.oversubscription_at(fabric.hosts[0].switch),
                                 "switches": len(fabric.switches), "queue": fabric.queue,
                                 "payload": {"preset": name, "words": int(data.block.size),
                                             "density": float(np.count_nonzero(data.block) / data.block.size)},
                                 **point})
                    log(_said(rows[-1]))
    return rows


def _said(row: dict) -> str:
    """A row in a line: both times, the ratio, whether it was exact, the model's domain."""
    domain = "" if row["model_in_domain"] else f"; outside the scale model's domain: {row['model_outside']}"
    return (f"{row['preset']} {row['fabric']} {row['workers']} workers {row['mode']} ({row['encoding']}): ns-3 "
            f"{row['seconds'] * 1e3:.3f} ms, model {row['model_seconds'] * 1e3:.3f} ms, ratio {row['ratio']:.3f}; "
            f"{'exact' if row['exact'] else 'NOT EXACT'} ({row['checked_results']:,} results checked); "
            f"{row['retransmissions']} retransmissions, {row['drops']} drops; {row['wall_seconds']:.1f} s wall"
            + domain)


# -- what the rows show --------------------------------------------------------------------------
def speedups(rows: list[dict]) -> list[dict]:
    """hina auto over dense at every (preset, fabric, workers) that has both, on ns-3 and on the model."""
    by = {(r["preset"], r["fabric"], r["workers"], r["mode"]): r for r in rows}
    out = []
    for (name, fab, n, mode), r in sorted(by.items()):
        dense = by.get((name, fab, n, "dense"))
        if mode == "auto" and dense:
            out.append({"preset": name, "fabric": fab, "workers": n, "ns3": dense["seconds"] / r["seconds"],
                        "model": dense["model_seconds"] / r["model_seconds"],
                        "model_cap2048": dense["model_seconds_cap2048"] / r["model_seconds_cap2048"]})
    return out


def phases(row: dict) -> dict:
    """A row's ns-3 seconds by phase: the first round (check, scale, stats), the index rounds, the values."""
    secs = [r["seconds"] for r in row["rounds"]]
    if len(secs) == 1:
        return {"first round": secs[0], "index": 0.0, "values": 0.0}
    return {"first round": secs[0], "index": sum(secs[1:-1]), "values": secs[-1]}


def plot(rows: list[dict], out: Path) -> list[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    presets = sorted({r["preset"] for r in rows})
    colours = dict(zip(MODES, ("tab:red", "tab:orange", "tab:blue")))
    for fab in sorted({r["fabric"] for r in rows}):
        fig, axes = plt.subplots(2, len(presets), figsize=(5.5 * len(presets), 7), squeeze=False,
                                 gridspec_kw={"height_ratios": [3, 1.3]})
        for col, name in enumerate(presets):
            top, bottom = axes[0][col], axes[1][col]
            for mode in MODES:
                rs = sorted((r for r in rows if r["fabric"] == fab and r["preset"] == name and r["mode"] == mode),
                            key=lambda r: r["workers"])
                if not rs:
                    continue
                n = [r["workers"] for r in rs]
                top.plot(n, [r["seconds"] for r in rs], "-o", color=colours[mode], label=f"{mode}: ns-3")
                top.plot(n, [r["model_seconds"] for r in rs], "--x", color=colours[mode], alpha=0.7,
                         markersize=9, label=f"{mode}: scale model")
                bottom.plot(n, [r["ratio"] for r in rs], "-o", color=colours[mode], label=mode)
            bottom.axhspan(1 - AGREE, 1 + AGREE, color="grey", alpha=0.15)
            bottom.axhline(1, color="grey", linewidth=0.8)
            top.set_title(f"{name}, {fab}")
            top.set_yscale("log")
            top.set_ylabel("simulated seconds per aggregation")
            bottom.set_ylabel("ns-3 / scale model")
            ratios = [r["ratio"] for r in rows if r["fabric"] == fab and r["preset"] == name]
            bottom.set_ylim(min(0.7, min(ratios, default=1) * 0.9), max(1.3, max(ratios, default=1) * 1.1))
            for ax in (top, bottom):
                ax.set_xscale("log", base=2)
                ax.grid(True, which="both", alpha=0.3)
            bottom.set_xlabel("workers")
            top.legend(fontsize=7)
        written.append(_save(plt, fig, out, fab))
    top_n = max(r["workers"] for r in rows)
    auto = [r for r in rows if r["workers"] == top_n and r["mode"] == "auto"]
    sp = [s for s in speedups(rows) if s["workers"] == top_n]
    if auto and sp:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
        labels = [f"{s['preset']}\n{s['fabric']}" for s in sp]
        x = range(len(sp))
        ax1.bar([i - 0.2 for i in x], [s["ns3"] for s in sp], 0.4, label="ns-3")
        ax1.bar([i + 0.2 for i in x], [s["model"] for s in sp], 0.4, label="scale model")
        for i, s in enumerate(sp):
            ax1.text(i - 0.2, s["ns3"], f"{s['ns3']:.2f}x", ha="center", va="bottom", fontsize=7)
        ax1.set_xticks(list(x), labels, fontsize=7)
        ax1.set_ylabel("hina auto speedup over dense")
        ax1.set_title(f"{top_n} workers")
        ax1.legend(fontsize=7)
        labels = [f"{r['preset']}\n{r['fabric']}" for r in auto]
        bottom = [0.0] * len(auto)
        for phase, colour in zip(("first round", "index", "values"), ("tab:grey", "tab:orange", "tab:blue")):
            vals = [phases(r)[phase] * 1e3 for r in auto]
            ax2.bar(range(len(auto)), vals, 0.6, bottom=bottom, color=colour, label=phase)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax2.set_xticks(range(len(auto)), labels, fontsize=7)
        ax2.set_ylabel("simulated ms per aggregation (ns-3)")
        ax2.set_title(f"hina auto at {top_n} workers: where the time goes")
        ax2.legend(fontsize=7)
        written.append(_save(plt, fig, out, "breakdown"))
    return written


def _save(plt, fig, out: Path, what: str) -> str:
    """The figure as `<out's stem>_<what>.png` beside `out`; returns the file's name."""
    fig.tight_layout()
    png = out.with_name(f"{out.stem}_{what}.png")
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png.name


def tables(result: dict) -> str:
    rows = result["rows"]
    lines = ["| preset | fabric | workers | mode | ns-3 ms | model ms | ratio | the model's domain | exact | "
             "retransmissions | drops | deepest root queue | wall s |",
             "|---|---|---:|---|---:|---:|---:|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['preset']} | {r['fabric']} | {r['workers']} | {r['mode']} ({r['encoding']}) | "
                     f"{r['seconds'] * 1e3:.3f} | {r['model_seconds'] * 1e3:.3f} | {r['ratio']:.3f} | "
                     f"{domain_cell(r)} | {exact_cell(r)} | {r['retransmissions']} | {r['drops']} | "
                     f"{r['root_max_queue']} | {r['wall_seconds']:.1f} |")
    sp = speedups(rows)
    if sp:
        lines += ["", "| preset | fabric | workers | speedup over dense, ns-3 | scale model (same cap) | "
                  f"scale model (cap {MODEL_CAP}) |", "|---|---|---:|---:|---:|---:|"]
        lines += [f"| {s['preset']} | {s['fabric']} | {s['workers']} | {s['ns3']:.2f}x | {s['model']:.2f}x | "
                  f"{s['model_cap2048']:.2f}x |" for s in sp]
    return "\n".join(lines)


def domain_cell(row: dict) -> str:
    """Whether a row lies in the scale model's domain, for a table: "in", or where a port would drop."""
    if "model_in_domain" not in row:
        return "not recorded"
    return "in" if row["model_in_domain"] else f"outside: {row['model_outside']}"


def exact_cell(row: dict) -> str:
    """Whether every worker's result was numpy's sum, for a table (rows from before the check: not checked)."""
    if "exact" not in row:
        return "not checked (zeros)"
    return "yes" if row["exact"] else "**NO**"


def _list(kind, choices=None):
    def parse(text: str):
        out = [kind(t) for t in text.split(",")]
        bad = [t for t in out if choices is not None and t not in choices]
        if bad:
            raise ValueError(f"unknown {bad[0]!r}: one of {', '.join(choices)}")
        return out
    return parse


def _even_k(text: str) -> int:
    k = int(text)
    if k % 2 or not 4 <= k <= 16:
        raise ValueError(f"must be even, 4..16 (an edge switch spreads its slots over k/2 parents, at most 8), got {k}")
    return k


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="ns3_scale.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=checked(_list(between(1, 4096, " workers"))), default=[8, 64, 256, 1024],
                    help="worker counts, comma-separated (default: 8,64,256,1024)")
    ap.add_argument("--fabrics", type=checked(_list(str, FABRICS)), default=["star", "leaf_spine", "fat_tree"],
                    help="star, leaf_spine, fat_tree, tree, comma-separated (default: star, leaf_spine, fat_tree; "
                         "a star only to 32)")
    ap.add_argument("--presets", type=checked(_list(str, PRESETS)), default=["deeplight", "lstm"],
                    help=f"workload presets, comma-separated, of {', '.join(PRESETS)} (default: deeplight,lstm)")
    ap.add_argument("--modes", type=checked(_list(str, MODES)), default=list(MODES),
                    help="dense, blocks, auto, comma-separated (default: all three)")
    ap.add_argument("--gbps", type=checked(positive), default=100.0, help="the workers' links (default: 100)")
    ap.add_argument("--uplink-gbps", type=checked(positive), default=None,
                    help="each link between switches (default: --gbps)")
    ap.add_argument("--rack", type=between(1, MAX_WORKERS), default=32,
                    help="workers per leaf in the leaf/spine (default: 32)")
    ap.add_argument("--spines", type=between(1, 8), default=4, help="spines in the leaf/spine (default: 4)")
    ap.add_argument("--k", type=checked(_even_k), default=16, help="the fat tree's k, even, 4..16 (default: 16, "
                                                                    "1,024 hosts)")
    ap.add_argument("--depth", type=between(2, 3), default=2,
                    help="tiers of the tree (2 or 3; fan-in ceil(N^(1/depth)) below the root; default: 2)")
    ap.add_argument("--queue", type=between(1), default=100, help="packets each port's queue holds (default: 100)")
    ap.add_argument("--delay-us", type=checked(non_negative), default=1.0,
                    help="propagation per link in microseconds (default: 1)")
    ap.add_argument("--switch-latency-us", type=checked(non_negative), default=1.0,
                    help="a switch's pipeline latency in microseconds (default: 1)")
    ap.add_argument("--start-spread-us", type=checked(non_negative), default=0.0,
                    help="workers start at random instants within this many microseconds (default: 0, together)")
    ap.add_argument("--cap", type=between(0), default=256,
                    help="chunks per round simulated before the steady state is extrapolated, on both "
                         "simulators (default: 256; 0: every chunk, on both)")
    ap.add_argument("--mtu", type=between(128, 9000), default=9000, help="the links' MTU (default: 9000)")
    ap.add_argument("--slots", type=between(1, 1 << 15), default=64, help="the job's slots W (default: 64)")
    ap.add_argument("--seed", type=between(0), default=0, help="seed of the supports and start instants")
    ap.add_argument("--tables", type=existing_file, metavar="RESULT_JSON",
                    help="print the markdown tables of a result file and exit")
    ap.add_argument("--out", type=out_path, default=default_out("ns3_scale.json"),
                    help=out_help("ns3_scale.json", "the result JSON, plots beside it"))
    args = ap.parse_args(argv)
    if args.tables:
        print(tables(json.loads(args.tables.read_text())))
        return 0
    if args.cap and args.cap < 4 * args.slots:
        ap.error(f"argument --cap: at least 4 windows ({4 * args.slots} chunks) or 0, got {args.cap}")
    if args.uplink_gbps is None:
        args.uplink_gbps = args.gbps
    missing = ns3sim.available()
    if missing:
        print(f"ns3_scale.py: {missing}", file=sys.stderr)
        return 2
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    started = time.perf_counter()
    rows = cross_check(args, log)
    result = {"parameters": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                             if k not in ("out", "tables")},
              "rows": rows, "speedups": speedups(rows), "wall_seconds": time.perf_counter() - started}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result["plots"] = plot(rows, args.out)
    write_result(args.out, result, command_line("benchmarks/ns3_scale.py", argv))
    log(f"wrote {args.out}")
    wrong = [r for r in rows if not r["exact"]]
    if wrong:  # a wrong sum is a failure, whatever the times
        log(f"ns3_scale.py: {len(wrong)} of {len(rows)} points NOT EXACT (a worker's result was not numpy's sum): "
            + "; ".join(f"{r['preset']} {r['fabric']} {r['workers']} workers {r['mode']}" for r in wrong))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
