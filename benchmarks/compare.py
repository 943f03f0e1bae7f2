"""The comparison table: dense (SwitchML-style), OmniReduce-style blocks and hina on model-shaped workloads.

For each preset of benchmarks/workloads.py (scaled to fit this machine) and
N workers (default 8) it aggregates the same gradients in each mode of
--modes (default: dense, blocks, auto) through the same switch:

- dense: every quantized element, ADDed slot by slot (SwitchML's scheme);
- blocks: OmniReduce-style block sparsity on the switch: an OR over the
  bitmap of non-zero 256-element blocks, then an ADD over the union's
  blocks only.  Real OmniReduce sends each worker's own non-zero blocks to
  a server aggregator; a switch needs aligned operands, so here every
  worker sends every union block (zeros included).  Where workers' blocks
  coincide the bytes are the same; where they differ this sends more;
- auto: hina's cost model picks dense, blocks, aligned or sketch per
  tensor (the same choice on every worker); aligned (an index, then the
  values at the union) and sketch (an index and a count sketch, peeled)
  can also be run on their own.

Runs on the emulator on loopback always and, as root with Mininet, on a
star at 1 and 10 Gbit/s.  Every result is checked exact.  Reports per
preset, environment and mode: per-worker and union density, what auto
chose, bytes per worker, seconds (best of --rounds, every round listed),
dense-equivalent throughput, speedup over dense, the shares of index /
values / dense bytes, and per (environment, preset) whether auto met the
rule "never more than 5% slower than the best of dense and blocks".

    python benchmarks/compare.py [--workers 8] [--presets ncf lstm ...] [--modes dense blocks auto] [--mininet auto|off]
Writes benchmarks/results/compare.json, compare.md and compare_speedup.png, compare_bytes.png.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "mininet")]

import workloads  # noqa: E402

from codec.params import MODES  # noqa: E402
from host.demo import DemoConfig, run_demo  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_MODES = ("dense", "blocks", "auto")
MODE_LABEL = {"dense": "dense (SwitchML-style)", "blocks": "blocks (OmniReduce-style)", "auto": "hina auto",
              "aligned": "hina aligned", "sketch": "hina sketch"}
# payload_by_phase segments by what they carry (check, scale and stats, a few words each, are left out)
SHARE_PARTS = {"index": ("index", "index_coarse", "index_fine", "block_index"),
               "values": ("values", "blocks", "sketch", "residual"),
               "dense": ("dense",)}
SEGMENTS = ("check", "scale", "stats", "index", "index_coarse", "index_fine", "values", "sketch", "residual",
            "dense", "block_index", "blocks")
SEGMENT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
                   "#17becf", "#aec7e8", "#ffbb78", "#98df8a")  # one per segment, no greys
RULE_SLACK = 1.05  # the rule: auto never more than 5% slower than the best of dense and blocks
RULE_COLUMN = "auto vs best of dense/blocks"
# scales that put every preset near 2^22 elements: small enough for 8 workers on this machine
DEFAULT_SCALE = {"ncf": 0.02, "lstm": 0.01, "bert_base": 0.04, "vgg19": 0.03, "deeplight": 0.007}
PAPER = ("The lossless homomorphic compression paper reports up to 6.33x aggregation throughput over dense "
         "in-network aggregation on NCF, LSTM, VGG19 and BERT-base.")


def mininet_available() -> str | None:
    try:
        import hina_net
    except ImportError as exc:  # hina_net says "Mininet is not installed ..."
        return str(exc)
    return hina_net.missing_requirements()


def byte_shares(payload: dict[str, int]) -> dict[str, float]:
    """Shares of index / values / dense bytes in one worker's payload (by segment name)."""
    parts = {k: sum(payload.get(seg, 0) for seg in segs) for k, segs in SHARE_PARTS.items()}
    total = sum(parts.values()) or 1
    return {k: v / total for k, v in parts.items()}


def chose_text(r: dict) -> str:
    """What auto ran: the encoding and the index's group size (1: one level; 0: no index)."""
    if r["mode"] != "auto" or not r.get("encoding"):
        return ""
    group = r.get("group") or 0
    return r["encoding"] + ("" if not group else f", group {group}")


def row(env: str, preset: str, mode: str, length: int, dens: dict, r: dict) -> dict:
    seconds = r["seconds"]
    payload = r.get("payload_by_phase", {})
    return {"env": env, "preset": preset, "mode": mode, "length": length, "exact": r["exact"],
            "per_worker_density": dens["per_worker"], "union_density": dens["union"],
            "bytes_per_worker": r["bytes_per_worker"], "payload_by_phase": payload,
            "seconds": seconds, "throughput_gbps": 4 * length * 8 / seconds / 1e9,
            "round_seconds": r.get("round_seconds", [seconds]),
            "retransmissions": r["retransmissions"], "encoding": r.get("encoding"), "group": r.get("group"),
            "byte_shares": byte_shares(payload)}


def rule_checks(rows: list[dict]) -> list[dict]:
    """Per (env, preset): is auto within 5% of the faster of dense and blocks (best-of-rounds seconds)?"""
    checks = []
    for env, preset in dict.fromkeys((r["env"], r["preset"]) for r in rows):
        by_mode = {r["mode"]: r for r in rows if (r["env"], r["preset"]) == (env, preset)}
        check = {"env": env, "preset": preset, "rule": f"auto <= {RULE_SLACK:g} x min(dense, blocks) seconds"}
        missing = [m for m in ("auto", "dense", "blocks") if m not in by_mode]
        if missing:
            check.update(met=None, why=f"not run: {', '.join(missing)}")
        else:
            best = min(("dense", "blocks"), key=lambda m: by_mode[m]["seconds"])
            auto, base = by_mode["auto"]["seconds"], by_mode[best]["seconds"]
            check.update(auto_seconds=auto, best_mode=best, best_seconds=base, ratio=auto / base,
                         auto_encoding=chose_text(by_mode["auto"]), met=auto <= RULE_SLACK * base)
        checks.append(check)
    return checks


def rule_text(check: dict) -> str:
    if check["met"] is None:
        return f"n/a ({check['why']})"
    return f"{check['ratio'] - 1:+.0%} vs {check['best_mode']}: {'met' if check['met'] else 'MISSED'}"


def run_loopback(preset: str, scale: float, workers: int, rounds: int, modes: tuple[str, ...], log) -> list[dict]:
    rows = []
    for mode in modes:
        best, times = None, []
        for seed in range(rounds):
            s = run_demo(DemoConfig(workers=workers, mode=mode, workload=preset, scale=scale, seed=seed,
                                    deadline=60.0))
            if not s["exact"]:
                raise RuntimeError(f"{preset} {mode} on loopback was not exact: {s['errors']}")
            times.append(s["seconds"])
            best = s if best is None or s["seconds"] < best["seconds"] else best
        rows.append({**best, "round_seconds": times})
        log(f"  loopback {mode:<7s} {best['seconds']:.3f} s, {best['bytes_per_worker']:,.0f} B/worker, "
            f"ran {best['encoding']}")
    return rows


def run_mininet(preset: str, scale: float, workers: int, bw: float, rounds: int, modes: tuple[str, ...],
                log) -> list[dict]:
    import hina_net

    cfg = hina_net.ExperimentConfig(workers=workers, modes=modes, bw=bw, workload=preset, scale=scale,
                                    rounds=rounds, ping=False, deadline=120.0)
    results = hina_net.Experiment(cfg, log=lambda m: None).run()
    rows = []
    for r in results["runs"]:
        if not r["exact"]:
            raise RuntimeError(f"{preset} {r['mode']} on Mininet at {bw} Mbit/s was not exact: {r['errors']}")
        rows.append({**r, "bytes_per_worker": r["wire_bytes_per_worker"],
                     "round_seconds": [x["seconds"] for x in r["rounds"]]})
        log(f"  mininet {bw / 1000:g}G {r['mode']:<7s} {r['seconds']:.3f} s, "
            f"{r['wire_bytes_per_worker']:,.0f} B/worker, ran {r['encoding']}")
    return rows


def markdown(rows: list[dict], checks: list[dict], meta: dict) -> str:
    rule = {(c["env"], c["preset"]): c for c in checks}
    lines = [f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']} CPUs), {meta['workers']} workers, "
             f"command: `{meta['command']}`.", "",
             "| model (scale, elements) | env | density per worker / union | mode | encoding auto chose | "
             "bytes per worker | seconds, best (all rounds) | retrans. | Gbit/s (dense-eq.) | speedup vs dense | "
             f"bytes: index / values / dense | {RULE_COLUMN} |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        dense = next((x for x in rows if (x["env"], x["preset"], x["mode"]) == (r["env"], r["preset"], "dense")),
                     None)
        shares = r["byte_shares"]
        share_text = " / ".join(f"{100 * shares[k]:.0f}%" for k in SHARE_PARTS)
        speedup = f"{dense['seconds'] / r['seconds']:.2f}x" if dense else "n/a"
        verdict = rule_text(rule[(r["env"], r["preset"])]) if r["mode"] == "auto" else ""
        lines.append(
            f"| {r['preset']} ({meta['scales'][r['preset']]}, {r['length']:,}) | {r['env']} | "
            f"{r['per_worker_density']:.2%} / {r['union_density']:.2%} | {MODE_LABEL[r['mode']]} | "
            f"{chose_text(r)} | {r['bytes_per_worker']:,.0f} | {r['seconds']:.3f} "
            f"({', '.join(f'{t:.2f}' for t in r.get('round_seconds', [r['seconds']]))}) | "
            f"{r['retransmissions']:,.0f} | {r['throughput_gbps']:.2f} | {speedup} | {share_text} | {verdict} |")
    judged = [c for c in checks if c["met"] is not None]
    if judged:
        lines += ["", f"Rule \"auto never more than 5% slower than the best of dense and blocks\" (best-of-rounds "
                      f"seconds): met in {sum(c['met'] for c in judged)} of {len(judged)} (env, model) pairs."]
    return "\n".join(lines) + "\n"


def _offsets(n: int, total: float = 0.8) -> tuple[float, list[float]]:
    """Bar width and each of n bars' offset from its group's centre."""
    width = total / max(n, 1)
    return width, [(i - (n - 1) / 2) * width for i in range(n)]


def plots(rows: list[dict], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    envs = list(dict.fromkeys(r["env"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    width, offsets = _offsets(len(modes))
    find = {(r["env"], r["preset"], r["mode"]): r for r in rows}
    written = []
    if "dense" in modes:
        fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 3.8), squeeze=False, sharey=True)
        for ax, env in zip(axes[0], envs):
            for i, mode in enumerate(modes):
                xs, speedups = [], []
                for j, p in enumerate(presets):
                    d, m = find.get((env, p, "dense")), find.get((env, p, mode))
                    if d and m:
                        xs.append(j + offsets[i])
                        speedups.append(d["seconds"] / m["seconds"])
                ax.bar(xs, speedups, width, label=MODE_LABEL[mode], color=f"C{i}")
                if mode == "auto":  # what auto ran, over its bar
                    for x, p, v in zip(xs, presets, speedups):
                        ax.text(x, v, find[(env, p, "auto")].get("encoding") or "", ha="center", va="bottom",
                                fontsize=6, rotation=90)
            ax.axhline(1.0, color="grey", lw=1)
            ax.set_xticks(range(len(presets)), presets, rotation=20)
            ax.set_title(env)
        axes[0][0].set_ylabel("speedup over dense (seconds)")
        axes[0][-1].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "compare_speedup.png", dpi=120)
        plt.close(fig)
        written.append(out / "compare_speedup.png")

    env = envs[0]
    fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(presets) * len(modes) / 2), 3.8))
    colour = dict(zip(SEGMENTS, SEGMENT_COLOURS))
    for j, p in enumerate(presets):
        for i, mode in enumerate(modes):
            r = find.get((env, p, mode))
            if r is None:
                continue
            bottom = 0.0
            payload = r["payload_by_phase"]
            for part in [*SEGMENTS, *sorted(set(payload) - set(SEGMENTS))]:
                v = payload.get(part, 0) / 1e6
                if v:
                    ax.bar(j + offsets[i], v, width, bottom=bottom, color=colour.get(part, "black"), label=part)
                    bottom += v
    ax.set_xticks(range(len(presets)), presets, rotation=20)
    ax.set_ylabel("payload MB per worker")
    ax.set_title(f"bytes per worker by segment ({env}); bars: {', '.join(modes)}", fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))  # one legend entry per segment
    ax.legend(uniq.values(), uniq.keys(), fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "compare_bytes.png", dpi=120)
    plt.close(fig)
    written.append(out / "compare_bytes.png")
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=list(workloads.PRESETS), choices=list(workloads.PRESETS),
                    help=f"workload presets to run (default: all: {' '.join(workloads.PRESETS)})")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(DEFAULT_MODES),
                    help=f"codec modes to compare, any of {', '.join(MODES)}; dense, the reference of the "
                         f"speedup column, is added when left out (default: {' '.join(DEFAULT_MODES)})")
    ap.add_argument("--workers", type=int, default=8, help="workers per aggregation (default: 8)")
    ap.add_argument("--scale", type=float, help="one scale for every preset (default: each preset near 2^22)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs per mode (loopback: a new seed each); the fastest is kept, all are listed (default: 3)")
    ap.add_argument("--mininet", choices=("auto", "off"), default="auto",
                    help="auto: also run on Mininet stars when root with Mininet installed (default: auto)")
    ap.add_argument("--bws", type=float, nargs="+", default=[1000.0, 10000.0],
                    help="Mininet link rates, Mbit/s (default: 1000 10000)")
    ap.add_argument("--out", type=Path, default=RESULTS,
                    help="where the JSON, markdown and PNGs go (default: benchmarks/results of this checkout)")
    args = ap.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731

    modes = tuple(dict.fromkeys(args.modes))
    if "dense" not in modes:
        log("adding dense: the speedup column is relative to it")
        modes = ("dense", *modes)
    mininet_reason = "disabled with --mininet off" if args.mininet == "off" else mininet_available()
    if mininet_reason:
        log(f"Mininet runs skipped: {mininet_reason}")
    scales = {p: args.scale or DEFAULT_SCALE.get(p, 0.01) for p in args.presets}
    rows = []
    for preset in args.presets:
        w = workloads.preset(preset, scales[preset])
        dens = workloads.densities(w.gradients(args.workers, seed=0))
        log(f"{preset}: {w.size:,} elements at scale {scales[preset]}, density {dens['per_worker']:.2%} per worker, "
            f"{dens['union']:.2%} union of {args.workers}")
        for r in run_loopback(preset, scales[preset], args.workers, args.rounds, modes, log):
            rows.append(row("loopback", preset, r["mode"], w.size, dens, r))
        if not mininet_reason:
            for bw in args.bws:
                for r in run_mininet(preset, scales[preset], args.workers, bw, args.rounds, modes, log):
                    rows.append(row(f"mininet {bw / 1000:g} Gbit/s", preset, r["mode"], w.size, dens, r))

    checks = rule_checks(rows)
    meta = {"command": " ".join(["benchmarks/compare.py"] + (argv if argv is not None else sys.argv[1:])),
            "date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": platform.platform(),
            "cpus": os.cpu_count(), "workers": args.workers, "modes": list(modes), "rounds": args.rounds,
            "scales": scales, "mininet": mininet_reason or "ran", "paper": PAPER}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps({"meta": meta, "rows": rows, "auto_rule": checks}, indent=1))
    table = markdown(rows, checks, meta)
    (args.out / "compare.md").write_text(table)
    print(table)
    for c in checks:
        print(f"{RULE_COLUMN}, {c['preset']} on {c['env']}: " + (
            rule_text(c) if c["met"] is None else
            f"auto {c['auto_seconds']:.3f} s ({c['auto_encoding']}), {c['best_mode']} {c['best_seconds']:.3f} s, "
            f"{rule_text(c)}"))
    for path in plots(rows, args.out):
        print(f"wrote {path}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
