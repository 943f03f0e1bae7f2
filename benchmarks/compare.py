"""The comparison table: dense (SwitchML-style), hina and an OmniReduce-style baseline on model-shaped workloads.

For each preset of benchmarks/workloads.py (scaled to fit this machine) and
N workers (default 8) it aggregates the same gradients in three modes
through the same switch:

- dense: every quantized element, ADDed slot by slot (SwitchML's scheme);
- hina: the codec (index OR, sketch ADD, peeling; a dense ADD after the
  index phase when the union is too dense for the sketch to pay);
- blocks: OmniReduce-style block sparsity on the switch: an OR over the
  bitmap of non-zero 256-element blocks, then an ADD over the union's
  blocks only.  Real OmniReduce sends each worker's own non-zero blocks to
  a server aggregator; a switch needs aligned operands, so here every
  worker sends every union block (zeros included).  Where workers' blocks
  coincide the bytes are the same; where they differ this sends more.

Runs on the emulator on loopback always and, as root with Mininet, on a
star at 1 and 10 Gbit/s.  Every result is checked exact.  Reports per
preset, environment and mode: per-worker and union density, bytes per
worker, seconds, dense-equivalent throughput, speedup over dense, and for
hina the share of index / sketch / residual (/ dense fall-back) bytes.

    python benchmarks/compare.py [--workers 8] [--presets ncf lstm ...] [--mininet auto|off]
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

from host.demo import DemoConfig, run_demo  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
MODES = ("dense", "hina", "blocks")
MODE_LABEL = {"dense": "dense (SwitchML-style)", "hina": "hina", "blocks": "blocks (OmniReduce-style)"}
# scales that put every preset near 2^22 elements: small enough for 8 workers on this machine
DEFAULT_SCALE = {"ncf": 0.02, "lstm": 0.01, "bert_base": 0.04, "vgg19": 0.03, "deeplight": 0.007}
PAPER = ("The lossless homomorphic compression paper reports up to 6.33x aggregation throughput over dense "
         "in-network aggregation on NCF, LSTM, VGG19 and BERT-base.")


def mininet_available() -> str | None:
    try:
        import hina_net
    except ImportError as exc:
        return f"Mininet is not importable ({exc})"
    return hina_net.missing_requirements()


def hina_shares(payload: dict[str, int]) -> dict[str, float]:
    parts = {k: payload.get(k, 0) for k in ("index", "sketch", "residual", "dense")}
    total = sum(parts.values()) or 1
    return {k: v / total for k, v in parts.items()}


def row(env: str, preset: str, mode: str, length: int, dens: dict, r: dict) -> dict:
    seconds = r["seconds"]
    return {"env": env, "preset": preset, "mode": mode, "length": length, "exact": r["exact"],
            "per_worker_density": dens["per_worker"], "union_density": dens["union"],
            "bytes_per_worker": r["bytes_per_worker"], "payload_by_phase": r.get("payload_by_phase", {}),
            "seconds": seconds, "throughput_gbps": 4 * length * 8 / seconds / 1e9,
            "round_seconds": r.get("round_seconds", [seconds]),
            "retransmissions": r["retransmissions"], "fell_back": r.get("fell_back"),
            "hina_shares": hina_shares(r.get("payload_by_phase", {})) if mode == "hina" else None}


def run_loopback(preset: str, scale: float, workers: int, rounds: int, log) -> list[dict]:
    rows = []
    for mode in MODES:
        best, times = None, []
        for seed in range(rounds):
            s = run_demo(DemoConfig(workers=workers, mode=mode, workload=preset, scale=scale, seed=seed,
                                    deadline=60.0))
            if not s["exact"]:
                raise RuntimeError(f"{preset} {mode} on loopback was not exact: {s['errors']}")
            times.append(s["seconds"])
            best = s if best is None or s["seconds"] < best["seconds"] else best
        rows.append({**best, "round_seconds": times})
        log(f"  loopback {mode:<6s} {best['seconds']:.3f} s, {best['bytes_per_worker']:,.0f} B/worker")
    return rows


def run_mininet(preset: str, scale: float, workers: int, bw: float, rounds: int, log) -> list[dict]:
    import hina_net

    cfg = hina_net.ExperimentConfig(workers=workers, modes=MODES, bw=bw, workload=preset, scale=scale,
                                    rounds=rounds, ping=False, deadline=120.0)
    results = hina_net.Experiment(cfg, log=lambda m: None).run()
    rows = []
    for r in results["runs"]:
        if not r["exact"]:
            raise RuntimeError(f"{preset} {r['mode']} on Mininet at {bw} Mbit/s was not exact: {r['errors']}")
        rows.append({**r, "bytes_per_worker": r["wire_bytes_per_worker"],
                     "round_seconds": [x["seconds"] for x in r["rounds"]]})
        log(f"  mininet {bw / 1000:g}G {r['mode']:<6s} {r['seconds']:.3f} s, {r['wire_bytes_per_worker']:,.0f} B/worker")
    return rows


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']} CPUs), {meta['workers']} workers, "
             f"command: `{meta['command']}`.", "",
             "| model (scale, elements) | env | density per worker / union | mode | bytes per worker | seconds, best "
             "(all rounds) | retrans. | Gbit/s (dense-eq.) | speedup vs dense | hina bytes: index / sketch / "
             "residual / dense |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        dense = next(x for x in rows if (x["env"], x["preset"], x["mode"]) == (r["env"], r["preset"], "dense"))
        shares = r["hina_shares"]
        share_text = (" / ".join(f"{100 * shares[k]:.0f}%" for k in ("index", "sketch", "residual", "dense"))
                      if shares else "")
        lines.append(
            f"| {r['preset']} ({meta['scales'][r['preset']]}, {r['length']:,}) | {r['env']} | "
            f"{r['per_worker_density']:.2%} / {r['union_density']:.2%} | {MODE_LABEL[r['mode']]} | "
            f"{r['bytes_per_worker']:,.0f} | {r['seconds']:.3f} "
            f"({', '.join(f'{t:.2f}' for t in r.get('round_seconds', [r['seconds']]))}) | "
            f"{r['retransmissions']:,.0f} | {r['throughput_gbps']:.2f} | "
            f"{dense['seconds'] / r['seconds']:.2f}x | {share_text} |")
    return "\n".join(lines) + "\n"


def plots(rows: list[dict], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    envs = list(dict.fromkeys(r["env"] for r in rows))
    written = []
    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 3.8), squeeze=False, sharey=True)
    for ax, env in zip(axes[0], envs):
        width = 0.27
        for i, mode in enumerate(MODES):
            speedups = []
            for p in presets:
                d = next(r for r in rows if (r["env"], r["preset"], r["mode"]) == (env, p, "dense"))
                m = next(r for r in rows if (r["env"], r["preset"], r["mode"]) == (env, p, mode))
                speedups.append(d["seconds"] / m["seconds"])
            ax.bar([j + (i - 1) * width for j in range(len(presets))], speedups, width, label=MODE_LABEL[mode])
        ax.axhline(1.0, color="grey", lw=1)
        ax.set_xticks(range(len(presets)), presets, rotation=20)
        ax.set_title(env)
    axes[0][0].set_ylabel("speedup over dense (seconds)")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "compare_speedup.png", dpi=120)
    written.append(out / "compare_speedup.png")

    env = envs[0]
    fig, ax = plt.subplots(figsize=(7, 3.8))
    parts = ("index", "sketch", "residual", "dense", "block_index", "blocks")
    for j, p in enumerate(presets):
        for i, mode in enumerate(MODES):
            r = next(x for x in rows if (x["env"], x["preset"], x["mode"]) == (env, p, mode))
            bottom = 0.0
            for k, part in enumerate(parts):
                v = r["payload_by_phase"].get(part, 0) / 1e6
                if v:
                    ax.bar(j + (i - 1) * 0.27, v, 0.27, bottom=bottom, color=f"C{k}", label=part)
                    bottom += v
    ax.set_xticks(range(len(presets)), presets, rotation=20)
    ax.set_ylabel("payload MB per worker")
    ax.set_title(f"bytes per worker by phase ({env}); bars: dense, hina, blocks")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))  # one legend entry per phase
    ax.legend(uniq.values(), uniq.keys(), fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "compare_bytes.png", dpi=120)
    written.append(out / "compare_bytes.png")
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", nargs="+", default=list(workloads.PRESETS))
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--scale", type=float, help="one scale for every preset (default: each preset near 2^22)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs per mode (loopback: a new seed each); the fastest is kept, all are listed")
    ap.add_argument("--mininet", choices=("auto", "off"), default="auto")
    ap.add_argument("--bws", type=float, nargs="+", default=[1000.0, 10000.0], help="Mininet link rates, Mbit/s")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731

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
        for r in run_loopback(preset, scales[preset], args.workers, args.rounds, log):
            rows.append(row("loopback", preset, r["mode"], w.size, dens, r))
        if not mininet_reason:
            for bw in args.bws:
                for r in run_mininet(preset, scales[preset], args.workers, bw, args.rounds, log):
                    rows.append(row(f"mininet {bw / 1000:g} Gbit/s", preset, r["mode"], w.size, dens, r))

    meta = {"command": " ".join(["benchmarks/compare.py"] + (argv if argv is not None else sys.argv[1:])),
            "date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": platform.platform(),
            "cpus": os.cpu_count(), "workers": args.workers, "scales": scales, "mininet": mininet_reason or "ran",
            "paper": PAPER}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    table = markdown(rows, meta)
    (args.out / "compare.md").write_text(table)
    print(table)
    for path in plots(rows, args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
