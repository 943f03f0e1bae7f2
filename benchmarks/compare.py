"""The comparison table: hina, dense (SwitchML-style), OmniReduce-style blocks and host-based baselines.

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

and the host-based allreduces of `baselines/` (--baselines, default all),
which need no programmable switch: gloo's ring all_reduce of the dense
tensor, SparCML (SSAR recursive doubling or DSAR split-allgather), Ok-Topk
lossless and with its top-k at k = --topk-density x length (lossy), and Zen
(hash-partitioned push, hash-bitmap pull), one process per worker over
gloo (TCP), on the same gradients (same presets, scales, seeds).

Runs on loopback always (hina through the emulator; the baselines as N
processes on 127.0.0.1) and, as root with Mininet, on stars at 1 and 10
Gbit/s (hina through --switch: the emulator, the XDP switch or BMv2; the
baselines through a plain Linux bridge with the same links, their rate
and MTU: mininet/plain_star.py).  Every hina result is checked exact;
every lossless baseline within float32 rounding of numpy's float64 sum
(baselines/check.py), the lossy one reports its error.
Reports per preset, environment and system: per-worker and union density,
what ran, bytes per worker, seconds (best of --rounds, every round
listed), dense-equivalent throughput, speedup over dense and over ring,
the shares of index / values / dense bytes, the result against numpy, and
per (environment, preset) whether auto met the rule "never more than 5%
slower than the best of dense and blocks".

    python benchmarks/compare.py [--workers 8] [--presets ncf lstm ...] [--modes dense blocks auto]
        [--baselines ring sparcml oktopk oktopk_topk zen | none] [--systems auto ring zen ...] [--mininet auto|off]
Writes compare.json, compare.md and compare_speedup.png, compare_bytes.png (--name: another stem) into --out
(default: $HINA_RESULTS, else hina-results/ in the current directory; benchmarks/results/ only when named).  The
Mininet link rates, without --bws: the faithful rate `mininet/run.py --calibrate` recorded on this machine for the
same star or tree (docs/mininet.md, "Choosing link rates"), else 1 and 10 Gbit/s with a warning; progress goes to
stderr (a bar on a terminal, a line per step in a log).  Every Mininet row carries the fidelity monitor's
verdict (mininet/fidelity.py); --host-bw, --host-delay, --straggler, --compute and --cross make the Mininet
runs heterogeneous (mininet/heterogeneity.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

from hina.baselines import registry
from hina.cliargs import OneLineParser
from hina.codec.params import MODES
from hina.control.fabric import TARGETS
from hina.host import workloads
from hina.host.demo import DemoConfig, run_demo
from hina.progress import Progress
from hina.provenance import default_out, out_help, out_path

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_MODES = ("dense", "blocks", "auto")
# hina's modes as this script's tables name them; a baseline's label is its `detail` (hina.baselines.registry)
MODE_LABEL = {"dense": "dense (SwitchML-style)", "blocks": "blocks (OmniReduce-style)", "auto": "hina auto",
              "aligned": "hina aligned", "sketch": "hina sketch"}
# payload_by_phase segments by what they carry (check, scale and stats, a few words each, are left out)
SHARE_PARTS = {"index": ("index", "index_coarse", "index_fine", "block_index"),
               "values": ("values", "blocks", "sketch", "residual"),
               "dense": ("dense",)}
SEGMENTS = ("check", "scale", "stats", "index", "index_coarse", "index_fine", "values", "sketch", "residual",
            "dense", "block_index", "blocks", "meta")
SEGMENT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
                   "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896")  # one per segment, no greys
# the rule auto's cost model is held to: never more than 5% slower than the better of dense and blocks, the two
# fixed modes it chooses between on a dense or block-sparse tensor
RULE_SLACK = 1.05
RULE_COLUMN = "auto vs best of dense/blocks"
DEFAULT_BWS = [1000.0, 10000.0]  # Mbit/s: --bws when neither given nor calibrated here (a warning says so)
# scales that put every preset near 2^22 elements: small enough for 8 workers on this machine
DEFAULT_SCALE = {"ncf": 0.02, "lstm": 0.01, "bert_base": 0.04, "vgg19": 0.03, "deeplight": 0.007}
PAPER = ("The lossless homomorphic compression paper reports up to 6.33x aggregation throughput over dense "
         "in-network aggregation on NCF, LSTM, VGG19 and BERT-base.")


def label(mode: str) -> str:
    """A row's system as the tables name it: hina's mode, a baseline's `detail`, or the name itself."""
    if mode in MODE_LABEL:
        return MODE_LABEL[mode]
    return registry.BASELINES[mode].detail if mode in registry.BASELINES else mode


def _commit() -> str | None:
    import subprocess

    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return out.stdout.strip() or None


def mininet_available() -> str | None:
    try:
        from hina.mininet import hina_net
    except ImportError as exc:  # hina_net says "Mininet is not installed ..."
        return str(exc)
    return hina_net.missing_requirements()


def baselines_available() -> str | None:
    """None if the host-based baselines can run here (torch with gloo), else why not."""
    from hina.baselines.comm import require_torch

    try:
        require_torch()
    except ImportError as exc:
        return str(exc)
    return None


def byte_shares(payload: dict[str, int]) -> dict[str, float]:
    """Shares of index / values / dense bytes in one worker's payload (by segment name)."""
    parts = {k: sum(payload.get(seg, 0) for seg in segs) for k, segs in SHARE_PARTS.items()}
    total = sum(parts.values()) or 1
    return {k: v / total for k, v in parts.items()}


def chose_text(r: dict) -> str:
    """What auto ran (the encoding and the index's group size; 1: one level, 0: no index), or a baseline's scheme."""
    if r["mode"] in registry.BASELINES:
        return r.get("encoding") or ""
    if r["mode"] != "auto" or not r.get("encoding"):
        return ""
    group = r.get("group") or 0
    return r["encoding"] + ("" if not group else f", group {group}")


def resent_share(r: dict) -> float | None:
    """hina's resent frames over the frames a loss-free run sends (all workers); None for TCP baselines."""
    frames = r["frames"] if "frames" in r else r.get("frames_per_worker", 0) * r.get("workers", 0)
    if r.get("retransmissions") is None or frames <= r["retransmissions"]:
        return None
    return r["retransmissions"] / (frames - r["retransmissions"])


def row(env: str, preset: str, mode: str, length: int, dens: dict, r: dict) -> dict:
    seconds = r["seconds"]
    payload = r.get("payload_by_phase", {})
    return {"env": env, "preset": preset, "mode": mode, "length": length, "exact": r["exact"],
            "per_worker_density": dens["per_worker"], "union_density": dens["union"],
            "bytes_per_worker": r["bytes_per_worker"], "payload_by_phase": payload,
            "seconds": seconds, "throughput_gbps": 4 * length * 8 / seconds / 1e9,
            "round_seconds": r.get("round_seconds", [seconds]),
            "retransmissions": r["retransmissions"], "resent_share": resent_share(r),
            "encoding": r.get("encoding"), "group": r.get("group"),
            "byte_shares": byte_shares(payload), "system": "baseline" if mode in registry.BASELINES else "hina",
            # the fidelity monitor's verdict (Mininet only): the best round's, and over all rounds
            "fidelity": r["fidelity"]["verdict"] if "fidelity" in r else None,
            "fidelity_detail": r["fidelity"].get("detail") if "fidelity" in r else None,
            "fidelity_rounds": r.get("fidelity_rounds"),
            "workers_waited": [max(w["waited"] for w in x["workers"] if w["waited"] is not None)
                               for x in r.get("rounds", []) if isinstance(x, dict) and x.get("workers")],
            **{k: r[k] for k in ("lossy", "max_abs_diff", "max_diff_over_bound", "rel_l2_error", "identical",
                                 "bytes_measured", "payload_bytes_per_worker", "uplinks",
                                 "uplink_bytes_per_aggregation") if k in r}}


def result_text(r: dict) -> str:
    """The result against numpy: hina's exact fixed-point sum, a baseline's float32 rounding, or a lossy error."""
    if r["system"] == "hina":
        return "exact (fixed point)"
    if r.get("lossy"):
        return f"lossy: rel. L2 error {r['rel_l2_error']:.2g}"
    return (f"{'within' if r['exact'] else 'OUTSIDE'} float32 rounding: max diff {r['max_abs_diff']:.1e} "
            f"({r['max_diff_over_bound']:.2f} of bound)")


def speedup_text(r: dict, ref: dict | None) -> str:
    return f"{ref['seconds'] / r['seconds']:.2f}x" if ref else "n/a"


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


def check_baselines(runs: list[dict], where: str) -> None:
    for r in runs:
        if not r["identical"] or (not r["lossy"] and not r["exact"]):
            raise RuntimeError(f"{where}: {r['mode']} was not within float32 rounding of numpy's sum on every rank "
                               f"(max diff {r['max_abs_diff']:.3g}, {r['max_diff_over_bound']:.3g} of the bound)")


def log_baselines(runs: list[dict], env: str, log) -> None:
    for r in runs:
        log(f"  {env} {r['mode']:<11s} {r['seconds']:.3f} s, {r['bytes_per_worker']:,.0f} B/worker"
            + (f", {r['encoding']}" if r["encoding"] else "")
            + (f", lossy: rel. L2 error {r['rel_l2_error']:.2g}" if r["lossy"] else ""))


def run_baselines_loopback(preset: str, scale: float, workers: int, rounds: int, baselines: tuple[str, ...],
                           topk_density: float, log) -> list[dict]:
    """The host-based baselines as `workers` processes on 127.0.0.1, seeds 0..rounds-1 (as hina's loopback)."""
    from hina.baselines import launch

    spec = {"workload": preset, "scale": scale, "baselines": list(baselines), "seeds": list(range(rounds)),
            "topk_density": topk_density}
    runs = launch.run_loopback(spec, workers)
    check_baselines(runs, f"{preset} on loopback")
    log_baselines(runs, "loopback", log)
    return runs


def run_baselines_mininet(preset: str, scale: float, workers: int, bw: float, rounds: int,
                          baselines: tuple[str, ...], topk_density: float, log, hetero: dict | None = None,
                          tree: dict | None = None, mtu: int = 9000) -> list[dict]:
    """The host-based baselines on a plain-bridge star (or `tree`: the same fabric of plain bridges) with
    the same links (their rate and MTU), one rank per host, seed 0."""
    from hina.mininet import plain_star

    cfg = plain_star.StarConfig(workers=workers, bw=bw, mtu=mtu, baselines=baselines, rounds=rounds, workload=preset,
                                scale=scale, topk_density=topk_density, **(hetero or {}),
                                **({"fabric": tree["fabric"].to_config(),
                                    "oversubscription": tree["oversubscription"]} if tree else {}))
    runs = plain_star.run(cfg, log=lambda m: log(f"  {m}") if m.startswith("fidelity") else None)
    check_baselines(runs, f"{preset} on Mininet at {bw} Mbit/s")
    log_baselines(runs, f"mininet {bw / 1000:g}G", log)
    return runs


def run_mininet(preset: str, scale: float, workers: int, bw: float, rounds: int, modes: tuple[str, ...],
                log, hetero: dict | None = None, tree: dict | None = None, switch: str = "emulator") -> list[dict]:
    """hina on Mininet through `switch` (every hina switch of a tree): the star, or `tree` ({"fabric",
    "oversubscription"}: mininet/topo.py's trees)."""
    from hina.mininet import hina_net

    quiet = lambda m: log(f"  {m}") if m.startswith("fidelity") else None  # noqa: E731
    settings = dict(workers=workers, switch=switch, modes=modes, bw=bw, workload=preset, scale=scale, rounds=rounds,
                    ping=False, deadline=120.0, **(hetero or {}))
    if tree:
        from hina.mininet import topo

        cfg = topo.TreeConfig(**settings, oversubscription=tree["oversubscription"])
        results = topo.TreeExperiment(cfg, tree["fabric"], log=quiet).run()
    else:
        results = hina_net.Experiment(hina_net.ExperimentConfig(**settings), log=quiet).run()
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
             "| model (scale, elements) | env | density per worker / union | system | what ran | "
             "bytes per worker | seconds, best (all rounds) | resent frames (share) | Gbit/s (dense-eq.) | "
             "speedup vs dense | "
             f"speedup vs ring | bytes: index / values / dense | result vs numpy | {RULE_COLUMN} | fidelity |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    find = {(x["env"], x["preset"], x["mode"]): x for x in rows}
    for r in rows:
        dense, ring = (find.get((r["env"], r["preset"], m)) for m in ("dense", "ring"))
        shares = r["byte_shares"]
        share_text = " / ".join(f"{100 * shares[k]:.0f}%" for k in SHARE_PARTS)
        verdict = rule_text(rule[(r["env"], r["preset"])]) if r["mode"] == "auto" else ""
        retrans = "n/a (TCP)" if r["retransmissions"] is None else f"{r['retransmissions']:,.0f}" + (
            "" if r.get("resent_share") is None else f" ({r['resent_share']:.1%})")
        lines.append(
            f"| {r['preset']} ({meta['scales'][r['preset']]}, {r['length']:,}) | {r['env']} | "
            f"{r['per_worker_density']:.2%} / {r['union_density']:.2%} | {label(r['mode'])} | "
            f"{chose_text(r)} | {r['bytes_per_worker']:,.0f} | {r['seconds']:.3f} "
            f"({', '.join(f'{t:.2f}' for t in r.get('round_seconds', [r['seconds']]))}) | "
            f"{retrans} | {r['throughput_gbps']:.2f} | {speedup_text(r, dense)} | {speedup_text(r, ring)} | "
            f"{share_text} | {result_text(r)} | {verdict} | {r.get('fidelity') or 'n/a (loopback)'} |")
    judged = [c for c in checks if c["met"] is not None]
    if judged:
        lines += ["", f"Rule \"auto never more than 5% slower than the best of dense and blocks\" (best-of-rounds "
                      f"seconds): met in {sum(c['met'] for c in judged)} of {len(judged)} (env, model) pairs."]
    up = uplink_table(rows)
    if up:
        lines += ["", *up]
    if any(r["system"] == "baseline" for r in rows):
        lines += ["", "Baselines' bytes: on loopback the payload each rank sent (index, values, dense and size "
                      "headers; no TCP/IP headers); on Mininet its interface's transmitted bytes (TCP/IP headers "
                      "and ACKs included).  Their retransmissions are TCP's own and not counted."]
    return "\n".join(lines) + "\n"


def uplink_table(rows: list[dict], seconds: bool = False) -> list[str]:
    """Trees (--topology): what crossed the uplinks per aggregation, both ways, summed over them, against the
    ring's, as a markdown table's lines (none without uplink counts); `seconds`: with what ran, the best
    round's seconds and the result against numpy."""
    find = {(x["env"], x["preset"], x["mode"]): x for x in rows}
    up = [r for r in rows if "uplink_bytes_per_aggregation" in r]
    if not up:
        return []
    extra = ["what ran", "seconds, best", "result vs numpy"] if seconds else []
    lines = ["| " + " | ".join(["model", "env", "system", *extra, "uplink bytes per aggregation (all uplinks, both "
                                "ways)", "vs ring", "per uplink, up / down"]) + " |", "|---" * (6 + len(extra)) + "|"]
    for r in up:
        ring = find.get((r["env"], r["preset"], "ring"))
        ratio = (f"{ring['uplink_bytes_per_aggregation'] / r['uplink_bytes_per_aggregation']:.2f}x less"
                 if ring and "uplink_bytes_per_aggregation" in ring and r["uplink_bytes_per_aggregation"]
                 and r["mode"] != "ring" else "")
        per = ", ".join(f"{k} {v['up']:,.0f} / {v['down']:,.0f}" for k, v in r["uplinks"].items())
        cells = [chose_text(r), f"{r['seconds']:.3f}", result_text(r)] if seconds else []
        lines.append("| " + " | ".join([r["preset"], r["env"], label(r["mode"]), *cells,
                                        f"{r['uplink_bytes_per_aggregation']:,.0f}", ratio, per]) + " |")
    return lines


def _offsets(n: int, total: float = 0.8) -> tuple[float, list[float]]:
    """Bar width and each of n bars' offset from its group's centre."""
    width = total / max(n, 1)
    return width, [(i - (n - 1) / 2) * width for i in range(n)]


def plots(rows: list[dict], out: Path, name: str = "compare") -> list[Path]:
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
                ax.bar(xs, speedups, width, label=label(mode), color=f"C{i}")
                if mode == "auto":  # what auto ran, over its bar
                    for x, p, v in zip(xs, presets, speedups):
                        ax.text(x, v, find[(env, p, "auto")].get("encoding") or "", ha="center", va="bottom",
                                fontsize=6, rotation=90)
            ax.axhline(1.0, color="grey", lw=1)
            ax.set_xticks(range(len(presets)), presets, rotation=20)
            ax.set_title(env)
        axes[0][0].set_ylabel("speedup over dense (seconds)")
        axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside: 8 systems fit
        fig.tight_layout()
        fig.savefig(out / f"{name}_speedup.png", dpi=120, bbox_inches="tight")
        plt.close(fig)
        written.append(out / f"{name}_speedup.png")

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
            ax.text(j + offsets[i], bottom, mode, ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(presets)), presets, rotation=20)
    ax.set_ylabel("payload MB per worker")
    ax.set_title(f"payload bytes per worker by segment ({env})", fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))  # one legend entry per segment
    ax.legend(uniq.values(), uniq.keys(), fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(out / f"{name}_bytes.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    written.append(out / f"{name}_bytes.png")
    return written


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags, checked before anything runs (a bad one: one line, exit status 2); then the tree, if any, and
    the Mininet link rates (`link_rate`)."""
    from hina.mininet import heterogeneity

    ap = OneLineParser(prog="compare.py", description=__doc__.split("\n\n")[0])
    _system_flags(ap)
    _run_flags(ap)
    _network_flags(ap)
    heterogeneity.add_flags(ap, where="Mininet: ", bw_flag="--bws", seed_flag="a fixed seed")
    args = ap.parse_args(argv)
    try:
        check_args(args)
        args.tree = tree_of(args)
        heterogeneity.per_rank_links(args.host_bw, args.host_delay, args.workers)
        if args.straggler:
            heterogeneity.Straggler.parse(args.straggler).check(args.workers, args.compute)
        heterogeneity.flows(args.cross, args.workers)
    except ImportError as exc:
        ap.error(f"--topology {args.topology}: {exc}")
    except ValueError as exc:
        ap.error(str(exc))
    # the rates: given, else the faithful one calibrated here for hina's switch on this network, else the default
    from hina.mininet import run as mininet_run
    from hina.mininet.targets import default_mtu

    args.mtu = default_mtu(args.switch)  # every Mininet link's, hina's and the baselines'
    key = mininet_run.rate_key(args.workers, args.topology, args.oversubscription if args.tree else 1.0,
                               switch=args.switch, mtu=args.mtu)
    args.link_rate = mininet_run.choose_rate(args.bws, key, DEFAULT_BWS, flag="--bws")
    args.bws = args.link_rate.mbps
    return args


def _system_flags(ap: argparse.ArgumentParser) -> None:
    """What runs: hina's modes and the baselines (hina.baselines.registry's host allreduces)."""
    offered = [b.name for b in registry.compared()]
    ap.add_argument("--presets", nargs="+", default=list(workloads.PRESETS), choices=list(workloads.PRESETS),
                    help=f"workload presets to run (default: all: {' '.join(workloads.PRESETS)})")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(DEFAULT_MODES),
                    help=f"codec modes to compare, any of {', '.join(MODES)}; dense, the reference of the "
                         f"speedup column, is added when left out (default: {' '.join(DEFAULT_MODES)})")
    ap.add_argument("--baselines", nargs="+", choices=(*offered, "none"), default=offered,
                    help=f"host-based baselines to run, any of {', '.join(offered)}, or none (default: all)")
    ap.add_argument("--systems", nargs="+", choices=(*MODES, *offered),
                    help="run exactly these, codec modes and baselines alike (replaces --modes and --baselines; "
                         "nothing is added)")
    ap.add_argument("--topk-density", type=float, default=0.01,
                    help="Ok-Topk top-k (lossy): k = this fraction of the elements (default: 0.01)")


def _run_flags(ap: argparse.ArgumentParser) -> None:
    """How much runs, and where the results go."""
    ap.add_argument("--workers", type=int, default=8, help="workers per aggregation (default: 8)")
    ap.add_argument("--scale", type=float, help="one scale for every preset (default: each preset near 2^22)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="runs per mode (loopback: a new seed each); the fastest is kept, all are listed (default: 3)")
    ap.add_argument("--out", type=out_path, default=default_out(),
                    help=out_help(what="the folder the JSON, markdown and PNGs go into"))
    ap.add_argument("--name", default="compare",
                    help="the files' stem: NAME.json, NAME.md, NAME_speedup.png, NAME_bytes.png (default: compare)")


def _network_flags(ap: argparse.ArgumentParser) -> None:
    """Where it runs: loopback, Mininet stars at these rates, or a tree."""
    ap.add_argument("--mininet", choices=("auto", "off"), default="auto",
                    help="auto: also run on Mininet stars when root with Mininet installed (default: auto)")
    ap.add_argument("--loopback", choices=("on", "off"), default="on",
                    help="off: Mininet rows only (a heterogeneity run has nothing to change on loopback) (default: on)")
    ap.add_argument("--bws", type=float, nargs="+", default=None,
                    help="Mininet link rates, Mbit/s (default: the faithful rate mininet/run.py --calibrate recorded "
                         "on this machine for this star or tree and worker count; without one "
                         f"{' '.join(f'{b:g}' for b in DEFAULT_BWS)}, with a warning that they may be CPU-bound)")
    ap.add_argument("--topology", default="star", metavar="star|leafspine:L,S,H|FILE.json|NAME",
                    help="Mininet: the network every system runs on, as mininet/run.py's --topology (a topology "
                         "file, or the NAME of one in mininet/topologies/; docs/trees.md); the baselines over "
                         "plain bridges, a tree without cycles; a tree sets --workers to its hosts (default: star)")
    ap.add_argument("--oversubscription", type=float, default=1.0, metavar="R",
                    help="Mininet trees: uplinks at hosts x --bws / (R x uplinks) (default: 1)")
    ap.add_argument("--switch", choices=TARGETS, default="emulator",
                    help="Mininet: hina's switch (every switch of a tree), as mininet/run.py's --switch: the Python "
                         "emulator, BMv2, or the rules as an XDP program in the kernel; the links' MTU its default "
                         "(loopback rows: the emulator) (default: emulator)")


def check_args(args: argparse.Namespace) -> None:
    """A ValueError naming the first flag out of its range."""
    if "none" in args.baselines and len(args.baselines) > 1:
        raise ValueError(f"--baselines none cannot be combined with "
                         f"{' '.join(b for b in args.baselines if b != 'none')}")
    if not 0 < args.topk_density <= 1:
        raise ValueError(f"--topk-density must be in (0, 1], got {args.topk_density}")
    for name in ("workers", "rounds"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.scale is not None and not 0 < args.scale <= 1:
        raise ValueError(f"--scale must be in (0, 1], got {args.scale}")
    if args.bws is not None and any(bw <= 0 for bw in args.bws):
        raise ValueError(f"--bws must be positive Mbit/s, got {' '.join(f'{b:g}' for b in args.bws)}")


def tree_of(args: argparse.Namespace) -> dict | None:
    """--topology other than a star: its fabric and oversubscription (and --workers set to its hosts); a
    ValueError where the baselines' plain bridges would loop.  Mininet's own package is needed for it."""
    if args.topology == "star":
        return None
    from hina.mininet import topo

    fabric = topo.parse_topology(args.topology)
    if not 0 < args.oversubscription < float("inf"):
        raise ValueError(f"--oversubscription must be a positive ratio, got {args.oversubscription:g}")
    chosen = [s for s in (args.systems or args.baselines) if s in registry.BASELINES]
    if chosen and not fabric.is_tree:  # said now, not after hina's runs
        raise ValueError(f"--topology {args.topology}: the baselines ({', '.join(chosen)}) run over plain "
                         f"bridges, which loop where switches form a cycle (several spines or cores); "
                         f"give a tree, or --baselines none")
    args.workers = len(fabric.hosts)
    return {"fabric": fabric, "oversubscription": args.oversubscription}


def systems_to_run(args: argparse.Namespace, log) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """hina's modes (dense added when --modes leaves it out: the speedups are relative to it) and the
    baselines, as --systems, or --modes and --baselines, name them."""
    if args.systems:
        chosen = tuple(dict.fromkeys(args.systems))
        return (tuple(m for m in chosen if m in MODES), tuple(b for b in chosen if b in registry.BASELINES))
    modes = tuple(dict.fromkeys(args.modes))
    if "dense" not in modes:
        log("adding dense: the speedup column is relative to it")
        modes = ("dense", *modes)
    return modes, () if "none" in args.baselines else tuple(dict.fromkeys(args.baselines))


def measure(args: argparse.Namespace, modes: tuple, baselines: tuple, scales: dict, hetero: dict,
            bws: list[float]) -> list[dict]:
    """Every preset on loopback (unless --loopback off) and at each Mininet rate: hina's modes, then the
    baselines, a row each; a progress step per preset and environment, its lines above the bar."""
    rows = []
    with Progress(len(args.presets) * ((args.loopback == "on") + len(bws)), "compare") as bar:
        log = bar.print
        for preset in args.presets:
            w = workloads.preset(preset, scales[preset])
            dens = workloads.densities(w.gradients(args.workers, seed=0))
            log(f"{preset}: {w.size:,} elements at scale {scales[preset]}, density {dens['per_worker']:.2%} per "
                f"worker, {dens['union']:.2%} union of {args.workers}")
            if args.loopback == "on":
                bar.start(f"{preset} on loopback")
                found = run_loopback(preset, scales[preset], args.workers, args.rounds, modes, log) if modes else []
                if baselines:
                    found += run_baselines_loopback(preset, scales[preset], args.workers, args.rounds, baselines,
                                                    args.topk_density, log)
                rows += [row("loopback", preset, r["mode"], w.size, dens, r) for r in found]
                bar.done()
            for bw in bws:
                bar.start(f"{preset} on Mininet at {bw:g} Mbit/s")
                found = (run_mininet(preset, scales[preset], args.workers, bw, args.rounds, modes, log, hetero,
                                     args.tree, args.switch) if modes else [])
                if baselines:
                    found += run_baselines_mininet(preset, scales[preset], args.workers, bw, args.rounds, baselines,
                                                   args.topk_density, log, hetero, args.tree, args.mtu)
                env = f"mininet {bw / 1000:g} Gbit/s" + ("" if args.tree is None else f" {args.topology}")
                rows += [row(env, preset, r["mode"], w.size, dens, r) for r in found]
                bar.done()
    return rows


def report(args: argparse.Namespace, rows: list[dict], meta: dict) -> None:
    """The JSON, the markdown table (printed too), each preset's verdict on auto's rule, and the plots."""
    checks = rule_checks(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps({"meta": meta, "rows": rows, "auto_rule": checks},
                                                           indent=1))
    table = markdown(rows, checks, meta)
    (args.out / f"{args.name}.md").write_text(table)
    print(table)
    for c in checks:
        print(f"{RULE_COLUMN}, {c['preset']} on {c['env']}: " + (
            rule_text(c) if c["met"] is None else
            f"auto {c['auto_seconds']:.3f} s ({c['auto_encoding']}), {c['best_mode']} {c['best_seconds']:.3f} s, "
            f"{rule_text(c)}"))
    for path in plots(rows, args.out, args.name):
        print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    modes, baselines = systems_to_run(args, log)
    mininet_reason = "disabled with --mininet off" if args.mininet == "off" else mininet_available()
    if mininet_reason:
        log(f"Mininet runs skipped: {mininet_reason}")
    else:
        for line in args.link_rate.lines:  # the rates' warning or provenance, before anything runs
            log(line)
    baseline_reason = baselines_available() if baselines else "none chosen"
    if baselines and baseline_reason:
        log(f"baselines skipped: {baseline_reason}")
        baselines = ()
    scales = {p: args.scale or DEFAULT_SCALE.get(p, 0.01) for p in args.presets}
    hetero = {"host_bw": args.host_bw, "host_delay": args.host_delay, "straggler": args.straggler,
              "compute": args.compute, "cross": tuple(args.cross)}
    rows = measure(args, modes, baselines, scales, hetero, [] if mininet_reason else args.bws)
    meta = {"command": " ".join(["benchmarks/compare.py"] + (argv if argv is not None else sys.argv[1:])),
            "date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": platform.platform(),
            "cpus": os.cpu_count(), "workers": args.workers, "modes": list(modes), "baselines": list(baselines),
            "baselines_skipped": None if baselines else baseline_reason, "topk_density": args.topk_density,
            "rounds": args.rounds, "scales": scales, "mininet": mininet_reason or "ran", "paper": PAPER,
            "heterogeneity": hetero, "loadavg": os.getloadavg(), "commit": _commit(),
            "topology": args.topology, "oversubscription": args.oversubscription if args.tree else None,
            "switch": args.switch, "mtu": args.mtu,
            "link_rate": args.link_rate.as_json(single=False) if not mininet_reason else None}
    report(args, rows, meta)
    return 0


if __name__ == "__main__":
    sys.exit(main())
