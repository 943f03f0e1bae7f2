"""A scale model of in-network aggregation: the real sender and slot rules on modelled links, 8 to 1,024 workers.

The command line of the scale model whose engine is sim/scale.py
(`hina.sim.scale`: the representative path on the simulator's clock, what
each round carries, the ring): it projects the workload presets to N
workers (`project`), models Mininet runs to validate the model against
them (`mininet_case`), writes the result with its provenance, plots it and
renders its markdown tables (`tables`, `validation_table`,
`projection_table`, which tools/tables.py renders into the docs).

    python benchmarks/scale_model.py [--validate MININET.json ...] [--workers 8,16,...,1024]
        [--gbps 10,100,400] [--topologies star,tree2,tree3] [--presets ...] [--queue N] [--out PATH]

Every topology is a `hina.control.Fabric` (`Fabric.star`, `Fabric.tree`).
With `--queue`, every switch port holds that many packets; a point where
one would have to hold more lies outside the model's domain: its row says
so (`in_domain`, `outside`) and the command prints the ns-3 run that
measures it (benchmarks/ns3_scale.py).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from hina.cliargs import OneLineParser, between, checked, existing_file, non_negative, positive
from hina.codec.params import MAX_WORKERS
from hina.control import Fabric
from hina.host.congestion_settings import CongestionSettings
from hina.host.workloads import preset
from hina.provenance import command_line, default_out, out_help, out_path, write_result
from hina.sim.scale import (
    EMULATOR_SERVICE,
    Setup,
    aggregation_seconds,
    codec_rounds,
    outside,
    preset_rounds,
    ring_for,
    support_scale,
    union_stats,
)
from hina.wire.headers import FRAME_OVERHEAD, max_words

ROOT = Path(__file__).resolve().parent.parent


PAPER_SPEEDUP = {"seed paper (lossless homomorphic compression)": 6.33, "OmniReduce": 8.2}
DEFAULT_WORKERS = (8, 16, 32, 64, 128, 256, 512, 1024)


# -- validation against Mininet -----------------------------------------------------------------
def mininet_case(path: Path) -> list[dict]:
    """Model each run of a mininet/run.py result file (star, its links, K from its MTU, its gradients)."""
    from hina.host.synthetic import gradient_for

    data = json.loads(Path(path).read_text())
    cfg = data["config"]
    if cfg.get("switch") != "emulator" or not cfg.get("bw") or cfg.get("loss"):
        raise ValueError(f"{path}: validation takes emulator runs on shaped, lossless links")
    grads = [gradient_for(cfg["length"], cfg["density"], seed=cfg["seed"], rank=r, workload=cfg.get("workload"),
                          scale=cfg.get("scale", 1.0)) for r in range(cfg["workers"])]
    net = Setup(Fabric.star(cfg["workers"], rate=cfg["bw"]), delay=cfg.get("delay", 0.0) / 1000 + 25e-6,
                switch_latency=0.0, switch_service=EMULATOR_SERVICE, words=max_words(cfg["mtu"]),
                slots=cfg["slots"], overhead=FRAME_OVERHEAD)
    out = []
    for run in data["runs"]:
        codec_run = codec_rounds(grads, run["mode"], link_gbps=cfg["bw"] / 1000)
        model = aggregation_seconds(net, codec_run["rounds"], congestion=CongestionSettings())  # Mininet's workers
        measured_net = sum(run["phase_seconds"].values())
        compute = sum(run.get("compute_seconds", {}).values())
        payload = 4 * sum(sum(r) for r in codec_run["rounds"])
        out.append({
            "file": _shown(Path(path)),
            "command": data.get("command"), "workers": cfg["workers"], "mbps": cfg["bw"], "mode": run["mode"],
            "workload": cfg.get("workload") or f"uniform {cfg['density']:g}", "length": cfg["length"],
            "encoding": codec_run["encoding"], "measured_encoding": run.get("encoding"),
            "payload_bytes_model": payload, "payload_bytes_measured": run.get("payload_bytes_per_worker"),
            "measured_seconds": run["seconds"], "measured_network_seconds": measured_net,
            "measured_compute_seconds": compute, "model_network_seconds": model["seconds"],
            "model_seconds": model["seconds"] + compute,
            "ratio": run["seconds"] / (model["seconds"] + compute),
            "network_ratio": measured_net / model["seconds"],
            "line_rate_seconds": run.get("line_rate_seconds"),
            "verdict": _verdict(run), "verdict_rounds": run.get("fidelity_rounds"),
            "load": data.get("load")})
    return out


def _shown(path: Path) -> str:
    """A path relative to the checkout where it lies inside it."""
    full = path.resolve()
    return str(full.relative_to(ROOT)) if full.is_relative_to(ROOT) else str(path)


def _verdict(run: dict) -> str | None:
    """The fidelity monitor's verdict (mininet/fidelity.py) of a Mininet run's reported round, with its
    detail (the busiest link's share of its rate), where the run recorded one."""
    fid = run.get("fidelity")
    if not isinstance(fid, dict) or "verdict" not in fid:
        return None
    return fid["verdict"] + (f" ({fid['detail']})" if fid.get("detail") else "")


# -- the projection -----------------------------------------------------------------------------
def fabric_for(workers: int, gbps: float, depth: int, *, uplink_gbps: float | None = None,
               queue: int | None = None) -> Fabric:
    """The projection's topology: a star (a hypothetical switch beyond 32 workers) or a tree of `depth` tiers,
    its uplinks at `uplink_gbps` (default the workers' rate), every switch port holding `queue` packets."""
    rate = gbps * 1000
    if depth == 1:
        return Fabric.star(workers, rate=rate, queue=queue)
    return Fabric.tree(workers, depth, rate=rate, uplink_rate=(uplink_gbps or gbps) * 1000, queue=queue)


def ns3_command(row: dict, *, uplink_gbps: float | None, queue: int | None, mtu: int, slots: int) -> str:
    """The benchmarks/ns3_scale.py command that runs a projection row's point on ns-3, with every worker."""
    if row["topology"] == "star" and row["workers"] > MAX_WORKERS:
        return f"none: a star of more than {MAX_WORKERS} workers is no switch ns-3 runs (a tree is: --topologies tree2)"
    fabric = "--fabrics star" if row["topology"] == "star" else f"--fabrics tree --depth {row['topology'][-1]}"
    flags = [f"--workers {row['workers']}", fabric, f"--presets {row['preset']}", "--modes dense,auto",
             f"--gbps {row['gbps']:g}", *([f"--uplink-gbps {uplink_gbps:g}"] if uplink_gbps else []),
             *([f"--queue {queue}"] if queue else []), f"--mtu {mtu}", f"--slots {slots}", "--cap 0"]
    return "python benchmarks/ns3_scale.py " + " ".join(flags)


def project(presets: Sequence[str], workers: Sequence[int], gbps: Sequence[float], depths: Sequence[int], *,
            scale: float | None, seed: int, cap: int, host_alpha: float, mtu: int = 9000, slots: int = 64,
            uplink_gbps: float | None = None, queue: int | None = None, log=print) -> list[dict]:
    """Dense INA, hina auto and the ring for every preset, worker count, rate and topology; `scale`:
    where the supports are drawn (None: `support_scale`, full size but for NCF).  A row whose switch ports
    would drop (`queue`) lies outside the model's domain: it says so, and the log names the ns-3 run."""
    rows = []
    for name in presets:
        length = preset(name).size
        start = time.perf_counter()
        drawn = scale or support_scale(name, max(workers))
        stats = union_stats(name, workers, drawn, seed)
        log(f"{name}: union of {max(workers)} workers at scale {drawn:.4g} in {time.perf_counter() - start:.1f} s")
        for st in stats:
            for rate in gbps:
                plans = {mode: preset_rounds(st, length, mode, rate) for mode in ("dense", "auto")}
                for depth in depths:
                    if depth > 1 and st.workers < 2 ** depth:
                        continue
                    fabric = fabric_for(st.workers, rate, depth, uplink_gbps=uplink_gbps, queue=queue)
                    net = Setup(fabric, words=max_words(mtu), slots=slots)
                    row = {"preset": name, "length": length, "workers": st.workers, "gbps": rate,
                           "topology": "star" if depth == 1 else f"tree{depth}", "fanins": list(net.fanins),
                           "union_density": st.occupied[0], "support_scale": drawn}
                    for mode, plan in plans.items():
                        m = aggregation_seconds(net, plan["rounds"], plan["residual_chance"], cap=cap)
                        key = "dense_ina" if mode == "dense" else "hina_auto"
                        row[key] = {"seconds": m["seconds"], "encoding": plan["encoding"], "group": plan["group"],
                                    "words_per_worker": sum(sum(r) for r in plan["rounds"]),
                                    "rounds": [list(r) for r in plan["rounds"]], "chunks": m["chunks"],
                                    "residual_chance": plan["residual_chance"], "in_domain": m["in_domain"],
                                    "outside": outside(m), "deepest_queue": m["deepest_queue"]}
                    row["ring"] = {"seconds": ring_for(net, length, host_alpha), "alpha_host": host_alpha}
                    row["speedup_vs_dense"] = row["dense_ina"]["seconds"] / row["hina_auto"]["seconds"]
                    row["speedup_vs_ring"] = row["ring"]["seconds"] / row["hina_auto"]["seconds"]
                    row["in_domain"] = row["dense_ina"]["in_domain"] and row["hina_auto"]["in_domain"]
                    if not row["in_domain"]:
                        row["ns3_command"] = ns3_command(row, uplink_gbps=uplink_gbps, queue=queue, mtu=mtu,
                                                         slots=slots)
                        why = row["dense_ina"]["outside"] or row["hina_auto"]["outside"]
                        log(f"{name} {row['topology']} {st.workers} workers at {rate:g} Gbit/s: outside the scale "
                            f"model's domain ({why}); ns-3 runs it: {row['ns3_command']}")
                    rows.append(row)
        log(f"{name}: projected in {time.perf_counter() - start:.1f} s")
    return rows


def plot(rows: list[dict], path: Path, gbps: float, topology: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    pick = [r for r in rows if r["gbps"] == gbps and r["topology"] == topology]
    names = sorted({r["preset"] for r in pick})
    if not names:
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    colours = dict(zip(names, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for name in names:
        rs = sorted((r for r in pick if r["preset"] == name), key=lambda r: r["workers"])
        n = [r["workers"] for r in rs]
        c = colours[name]
        ax1.plot(n, [r["hina_auto"]["seconds"] for r in rs], "-o", color=c, label=f"{name} hina auto")
        ax1.plot(n, [r["dense_ina"]["seconds"] for r in rs], "--s", color=c, label=f"{name} dense INA", alpha=0.7)
        ax1.plot(n, [r["ring"]["seconds"] for r in rs], ":^", color=c, label=f"{name} ring", alpha=0.5)
        ax2.plot(n, [r["speedup_vs_dense"] for r in rs], "-o", color=c, label=name)
    for label, value in PAPER_SPEEDUP.items():
        ax2.axhline(value, color="grey", linestyle=":", linewidth=1)
        ax2.text(n[0], value * 1.05, f"{label}: {value}x", fontsize=7, color="grey")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("workers")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_yscale("log")
    ax1.set_ylabel("seconds per aggregation (model)")
    ax1.set_title(f"{topology}, {gbps:g} Gbit/s links")
    ax1.legend(fontsize=6, ncol=2)
    ax2.set_yscale("log")
    ax2.set_ylabel("hina auto speedup over dense INA")
    ax2.set_title("speedup (dense INA seconds / hina auto seconds)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def tables(result: dict) -> str:
    """The validation table and the projection to the largest worker count at 100 Gbit/s, as markdown."""
    val, proj = validation_table(result), projection_table(result)
    return "\n".join([*val, *([""] if val and proj else []), *proj])


def validation_table(result: dict) -> list[str]:
    """The model against each Mininet run of `validation`, a markdown table's lines (none without runs)."""
    val = result.get("validation") or []
    if not val:
        return []
    out = ["| workers | Mbit/s | workload | mode | ran | measured s | model s | measured / model "
           "| network: measured / model s | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in val:
        out.append(f"| {r['workers']} | {r['mbps']:g} | {r['workload']} | {r['mode']} | {r['encoding']} "
                   f"| {r['measured_seconds']:.3f} | {r['model_seconds']:.3f} | {r['ratio']:.2f} "
                   f"| {r['measured_network_seconds']:.3f} / {r['model_network_seconds']:.3f} "
                   f"| {_short(r.get('verdict'))} |")
    return out


def projection_table(result: dict, workers: int | None = None, gbps: float | None = None) -> list[str]:
    """The projection's rows at `workers` (default the largest) and `gbps` (default 100 where projected),
    every preset and topology, a markdown table's lines (none without a projection)."""
    rows = result.get("projection") or []
    if not rows:
        return []
    top = workers or max(r["workers"] for r in rows)
    rate = gbps or (100.0 if any(r["gbps"] == 100.0 for r in rows) else rows[0]["gbps"])
    out = [f"| preset | topology | union of {top} | hina auto runs | dense INA s | hina auto s | ring s "
           "| hina / dense INA | hina / ring |", "|---|---|---|---|---|---|---|---|---|"]
    shown = [r for r in rows if r["workers"] == top and r["gbps"] == rate]
    for r in shown:
        h = r["hina_auto"]
        ran = h["encoding"] + (f" (G = {h['group']})" if h["group"] else "")
        mark = "" if r.get("in_domain", True) else " *"
        out.append(f"| {r['preset']} | {r['topology']} {'x'.join(map(str, r['fanins']))}{mark} "
                   f"| {r['union_density']:.2%} | {ran} | {r['dense_ina']['seconds']:.4f} | {h['seconds']:.4f} "
                   f"| {r['ring']['seconds']:.4f} | {r['speedup_vs_dense']:.2f}x | {r['speedup_vs_ring']:.2f}x |")
    if not all(r.get("in_domain", True) for r in shown):
        out += ["", "\\* outside the model's domain: a switch port would queue more than it holds, and drop; the "
                    "seconds are what the round takes if it held (the row's `ns3_command` measures it on ns-3)."]
    return out


def _short(verdict: str | None) -> str:
    """A verdict for a table cell: network-bound with its link figures, anything else without its detail."""
    if not verdict:
        return "not recorded"
    return verdict if verdict.startswith("network-bound") else verdict.split(" (")[0]


def _int_list(text: str) -> list[int]:
    return [between(1, 4096, " workers")(t) for t in text.split(",")]


def _gbps_list(text: str) -> list[float]:
    return [positive(t) for t in text.split(",")]


def _topologies(text: str) -> list[int]:
    depths = {"star": 1, "tree2": 2, "tree3": 3}
    out = []
    for t in text.split(","):
        if t not in depths:
            raise ValueError(f"unknown topology {t!r}: star, tree2 or tree3")
        out.append(depths[t])
    return out


def projection(args, log) -> dict:
    """The command line's projection: its rows, the papers' speedups and the plots written beside `--out`."""
    rows = project(args.presets, args.workers, args.gbps, args.topologies, scale=args.scale, seed=args.seed,
                   cap=args.cap, host_alpha=args.ring_alpha_us * 1e-6, mtu=args.mtu, slots=args.slots,
                   uplink_gbps=args.uplink_gbps, queue=args.queue, log=log)
    off = sum(not r["in_domain"] for r in rows)
    if off:
        log(f"{off} of {len(rows)} points outside the scale model's domain (in_domain false; each row's ns3_command "
            f"runs it on ns-3)")
    plots = []
    for rate in args.gbps:
        for depth in args.topologies:
            topo = "star" if depth == 1 else f"tree{depth}"
            png = args.out.with_name(f"{args.out.stem}_{topo}_{rate:g}g.png")
            if plot(rows, png, rate, topo):
                plots.append(_shown(png))
    return {"projection": rows, "paper_speedups": PAPER_SPEEDUP, "plots": plots}


def main(argv: list[str] | None = None) -> int:
    from hina.host.workloads import PRESETS

    ap = OneLineParser(prog="scale_model.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--validate", type=existing_file, nargs="*", default=[], metavar="MININET_JSON",
                    help="mininet/run.py result files (emulator, shaped, lossless) to model and compare")
    ap.add_argument("--workers", type=checked(_int_list), default=list(DEFAULT_WORKERS),
                    help="worker counts, comma-separated (default: 8,16,...,1024)")
    ap.add_argument("--gbps", type=checked(_gbps_list), default=[10.0, 100.0, 400.0],
                    help="link rates in Gbit/s, comma-separated (default: 10,100,400)")
    ap.add_argument("--topologies", type=checked(_topologies), default=[1, 2, 3],
                    help="star, tree2, tree3, comma-separated (default: all three)")
    ap.add_argument("--presets", nargs="*", choices=list(PRESETS), default=list(PRESETS),
                    help="workload presets to project (default: all)")
    ap.add_argument("--scale", type=checked(positive), default=None,
                    help="the scale at which the workers' supports are drawn (default: 1, full size, but for "
                         "NCF, whose million lookups per worker are drawn at the scale that keeps 5e7 in all)")
    ap.add_argument("--cap", type=between(256), default=2048,
                    help="chunks per round run on the clock before the steady state is extrapolated (default: 2048)")
    ap.add_argument("--ring-alpha-us", type=checked(non_negative), default=0.0,
                    help="the ring's per-step host overhead in microseconds (default: 0, the ring's best case)")
    ap.add_argument("--mtu", type=between(128, 9000), default=9000,
                    help="the links' MTU; K, the words per frame, follows (default: 9000, K = 2239, the emulator's)")
    ap.add_argument("--slots", type=between(1, 1 << 15), default=64, help="the job's slots W (default: 64)")
    ap.add_argument("--uplink-gbps", type=checked(positive), default=None,
                    help="every link between switches in Gbit/s (default: the workers' rate)")
    ap.add_argument("--queue", type=between(1), default=None,
                    help="packets each switch port holds; a point where one would hold more is outside the "
                         "model's domain, and the command names its ns-3 run (default: no limit)")
    ap.add_argument("--seed", type=between(0), default=0, help="seed of the supports (default: 0)")
    ap.add_argument("--tables", type=existing_file, metavar="RESULT_JSON",
                    help="print the markdown tables of a result file and exit")
    ap.add_argument("--no-project", action="store_true", help="validate only")
    ap.add_argument("--out", type=out_path, default=default_out("scale_model.json"),
                    help=out_help("scale_model.json", "the result JSON, plots beside it"))
    args = ap.parse_args(argv)
    if args.tables:
        print(tables(json.loads(args.tables.read_text())))
        return 0
    if args.scale is not None and args.scale > 1:
        ap.error(f"argument --scale: must be in (0, 1], got {args.scale}")
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    result: dict = {"parameters": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
                                   if k not in ("validate", "out")}}
    validation = []
    for path in args.validate:
        for row in mininet_case(path):
            validation.append(row)
            log(f"{row['workers']} workers {row['mbps']:g} Mbit/s {row['workload']} {row['mode']}: measured "
                f"{row['measured_seconds']:.3f} s, model {row['model_seconds']:.3f} s (ratio {row['ratio']:.2f}); "
                f"network {row['measured_network_seconds']:.3f} vs {row['model_network_seconds']:.3f} s")
    if validation:
        result["validation"] = validation
        # the model is tested by the runs whose links set the time (the fidelity monitor's verdict)
        bound = [r for r in validation if (r.get("verdict") or "").startswith("network-bound")]
        result["validation_network_bound"] = {
            "runs": len(bound), "within_20pct": sum(abs(r["ratio"] - 1) <= 0.2 for r in bound),
            "ratios": sorted(round(r["ratio"], 3) for r in bound)}
        log(f"network-bound runs within 20% of the model: {result['validation_network_bound']['within_20pct']} "
            f"of {len(bound)}")
    if not args.no_project:
        result.update(projection(args, log))
    write_result(args.out, result, command_line("benchmarks/scale_model.py", argv))
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
