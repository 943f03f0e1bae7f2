"""The switches side by side in Mininet: the emulator with P pipes, the XDP switch and BMv2, same star, same frames.

Is the emulator much faster than an optimized BMv2 on the same hosts, and the rules in the kernel faster
than both?  This runs one experiment of `mininet/hina_net.py` per
switch: the emulator with each --pipes P, the XDP switch where it loads
(clang, libbpf), BMv2 (simple_switch_grpc with
`p4/build/hina.json`) where it is installed, and the -O3 BMv2 without
logging that `tools/p4-toolchain.sh --fast-bmv2 /opt/bmv2-fast` builds
(--fast-bmv2 PATH for another place); each aggregates the same
gradients in each --modes mode for --rounds rounds, every result checked
exact.  The defaults are docs/benchmarks.md's run: 3 workers, 100 Mbit/s links, 1%
loss, 200,000 elements at 1% density, and 32-word packets for every switch
(BMv2's program carries 32 words; the emulator gets them from --mtu 172).

Per switch and mode it reports the best and the median round, resent
frames (of them tail probes and timeouts), the switch's CPU per frame the workers sent (its
processes' CPU time, the fidelity monitor's switch role, and the XDP switch's programs' run time in
the kernel, which no process shows), and the ratio of each BMv2 build's and the XDP switch's seconds
to each emulator row's (best to best, median to median).  Without a BMv2 build or the XDP switch the
emulator rows are still measured and the table says why that switch is missing.

    sudo .venv/bin/python benchmarks/switch_bench.py [--pipes 1 2 4] [--rounds 10] [--modes dense auto]
        [--bmv2 auto|off] [--fast-bmv2 PATH|off] [--xdp auto|off]
        [--workers 3 --bw 100 --loss 1 --length 200000 --density 0.01 --mtu 172]

Writes switch_bench.json, .md and .png into --out (default: $HINA_RESULTS, else hina-results/).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from hina.cliargs import OneLineParser, between, fraction, non_negative, pipes_flag, positive
from hina.codec.params import MAX_WORKERS, MODES
from hina.provenance import command_line, default_out, out_help, out_path, p4_versions, write_result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = OneLineParser(prog="switch_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--pipes", type=pipes_flag, nargs="+", default=[1, 2, 4],
                    help="the emulator's pipe counts, one experiment each (default: 1 2 4)")
    ap.add_argument("--bmv2", choices=("auto", "off"), default="auto",
                    help="auto: also run BMv2 where simple_switch_grpc and p4/build are present (default: auto)")
    ap.add_argument("--fast-bmv2", metavar="PATH|off", default=None,
                    help="the -O3 BMv2 build without logging, also run where it is installed (default: "
                         "/opt/bmv2-fast/bin/simple_switch_grpc, where tools/p4-toolchain.sh --fast-bmv2 "
                         "/opt/bmv2-fast puts it; off: not run)")
    ap.add_argument("--xdp", choices=("auto", "off"), default="auto",
                    help="auto: also run the XDP switch where it loads (root, clang, libbpf) (default: auto)")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=["dense", "auto"],
                    help="codec modes, each a run per switch (default: dense auto)")
    ap.add_argument("--rounds", type=between(1), default=10, help="aggregations per mode (default: 10)")
    ap.add_argument("--workers", type=between(1, MAX_WORKERS), default=3, help="worker hosts (default: 3)")
    ap.add_argument("--bw", type=positive, default=100.0, help="Mbit/s per link (default: 100)")
    ap.add_argument("--loss", type=non_negative, default=1.0, help="percent per link and direction (default: 1)")
    ap.add_argument("--length", type=between(1), default=200_000, help="elements per gradient (default: 200000)")
    ap.add_argument("--density", type=fraction, default=0.01, help="non-zero fraction per worker (default: 0.01)")
    ap.add_argument("--mtu", type=between(68, 65535), default=172,
                    help="the links' MTU; the emulator's words per packet follow (172: 32, as BMv2's) "
                         "(default: 172)")
    ap.add_argument("--out", type=out_path, default=default_out(),
                    help=out_help(what="the folder the JSON, markdown and PNG go into"))
    return ap.parse_args(argv)


# BMv2's builds: the one on PATH (built as Debian or tools/p4-toolchain.sh builds it), and -O3 without logging
BUILDS = {"default": "BMv2", "fast": "BMv2 -O3"}


def switch_cpu(rnd: dict) -> float | None:
    """The switch's CPU seconds over a round: its processes' (the fidelity monitor's switch role) and, on the
    XDP switch, its programs' run time in the kernel (`bpf_stats_enabled`); None where the round was not
    monitored."""
    role = ((rnd.get("cpu") or {}).get("roles") or {}).get("switch")
    if role is None:
        return None
    profile = rnd.get("switch_profile") or {}
    return role["user"] + role["system"] + profile.get("xdp_ingress_s", 0.0) + profile.get("xdp_egress_s", 0.0)


def rows_of(results: dict, switch: str, pipes: int, words: int, build: str | None = None) -> list[dict]:
    rows = []
    for run in results["runs"]:
        seconds = [r["seconds"] for r in run["rounds"]]
        cpu = [switch_cpu(r) for r in run["rounds"]]
        frames = sum(r["frames"] for r in run["rounds"])
        rows.append({"switch": switch, "pipes": pipes, "build": build, "mode": run["mode"],
                     "encoding": run.get("encoding"),
                     "exact": run["exact"], "best": min(seconds), "median": statistics.median(seconds),
                     "rounds": seconds, "resent": sum(r["retransmissions"] for r in run["rounds"]),
                     "timeouts": sum(r["timeouts"] for r in run["rounds"]),
                     "probes": sum(r["probes"] for r in run["rounds"]),
                     "frames": sum(r["frames"] for r in run["rounds"]),
                     "line_rate": run["line_rate_seconds"], "words": words,
                     # the switch's CPU per frame the workers sent, over every round
                     "switch_us_per_frame": 1e6 * sum(cpu) / frames if frames and None not in cpu else None,
                     # what set the best round's time (mininet/fidelity.py), and every round's
                     "fidelity": {"verdict": run["fidelity"]["verdict"]},
                     "verdict_rounds": [r["fidelity"]["verdict"] for r in run["rounds"] if "fidelity" in r]})
    return rows


def name(row: dict) -> str:
    if row["switch"] == "xdp":
        return "XDP"
    return BUILDS[row.get("build") or "default"] if row["switch"] == "bmv2" else f"emulator P={row['pipes']}"


# the switches each emulator row is held against: (switch, BMv2 build, the ratio's key)
AGAINST = (("bmv2", "default", "bmv2"), ("bmv2", "fast", "fast"), ("xdp", "default", "xdp"))


def with_ratios(rows: list[dict]) -> list[dict]:
    """Each BMv2 build's and the XDP switch's best and median over each emulator row's of the same mode:
    bmv2_over_* for the default build, fast_over_* for -O3, xdp_over_* (None where that switch did not run)."""
    for switch, build, key in AGAINST:
        other = {r["mode"]: r for r in rows if (r["switch"], r.get("build") or "default") == (switch, build)}
        for r in rows:
            b = other.get(r["mode"]) if r["switch"] == "emulator" else None
            r[f"{key}_over_best"] = b["best"] / r["best"] if b else None
            r[f"{key}_over_median"] = b["median"] / r["median"] if b else None
    return rows


def markdown(rows: list[dict], missing: str | None, cfg: dict, fast_missing: str | None = None,
             xdp_missing: str | None = None) -> str:
    """The table: a row per switch and mode.  Results measured before the XDP switch ran here have no XDP rows
    and no CPU per frame: their cells read "-"."""
    lines = [f"{cfg['workers']} workers, {cfg['bw']:g} Mbit/s, loss {cfg['loss']:g}%, d = {cfg['length']:,} at "
             f"{cfg['density']:.2%}, {cfg['rounds']} rounds per mode; every worker's sum checked against numpy "
             "(exact).", "",
             "| switch | mode | ran | K | best s | median s | line rate s | resent (of frames) | probes | timeouts "
             "| exact | switch CPU µs per frame | BMv2 / this (best) | BMv2 / this (median) | BMv2 -O3 / this (best) "
             "| BMv2 -O3 / this (median) | XDP / this (best) | XDP / this (median) | what set the best round's time |",
             "|---" * 19 + "|"]
    for r in rows:
        ratio = [f"{x:.2f}x" if x else "-" for x in (r["bmv2_over_best"], r["bmv2_over_median"],
                                                     r.get("fast_over_best"), r.get("fast_over_median"),
                                                     r.get("xdp_over_best"), r.get("xdp_over_median"))]
        line_rate = f"{r['line_rate']:.3f}" if r["line_rate"] else "-"
        share = f" ({r['resent'] / r['frames']:.1%})" if r["frames"] else ""
        verdict = r.get("fidelity", {}).get("verdict", "-")
        cpu = f"{r['switch_us_per_frame']:.1f}" if r.get("switch_us_per_frame") is not None else "-"
        lines.append(f"| {name(r)} | {r['mode']} | {r['encoding']} | {r['words']} | {r['best']:.3f} | "
                     f"{r['median']:.3f} | {line_rate} | {r['resent']:,}{share} | {r['probes']} | {r['timeouts']} | "
                     f"{'yes' if r['exact'] else 'NO'} | {cpu} | {' | '.join(ratio)} | {verdict} |")
    notes = [f"{what} not measured: {why}." for what, why in (("BMv2", missing), ("BMv2 -O3", fast_missing),
                                                              ("The XDP switch", xdp_missing)) if why]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def plot(rows: list[dict], path: Path) -> bool:
    """Every round's seconds per switch, one panel per mode (a box and the points)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    fig, axes = plt.subplots(1, len(modes), figsize=(4.5 * len(modes), 3.6), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        mine = [r for r in rows if r["mode"] == mode]
        ax.boxplot([r["rounds"] for r in mine], showfliers=False)
        for i, r in enumerate(mine, start=1):
            ax.plot([i] * len(r["rounds"]), r["rounds"], ".", color="tab:blue", alpha=0.6)
        ax.set_xticks(range(1, len(mine) + 1), [name(r) for r in mine], rotation=20, fontsize=8)
        if mine[0]["line_rate"]:
            ax.axhline(mine[0]["line_rate"], ls="--", color="black", lw=1, label="line rate")
            ax.legend(fontsize=7)
        ax.set_ylabel("seconds per round")
        ax.set_title(mode)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from hina.mininet import hina_net
    except ImportError as exc:
        print(f"switch_bench.py: {exc}", file=sys.stderr)
        return 2
    problem = hina_net.missing_requirements("emulator")
    if problem:
        print(f"switch_bench.py: {problem}", file=sys.stderr)
        return 2
    missing = "--bmv2 off" if args.bmv2 == "off" else hina_net.missing_requirements("bmv2")
    fast = args.fast_bmv2 or hina_net.FAST_BMV2
    if args.fast_bmv2 == "off":
        fast_missing = "--fast-bmv2 off"
    elif not args.fast_bmv2 and not Path(fast).exists():
        fast_missing = f"not installed at {fast} (sudo bash tools/p4-toolchain.sh --fast-bmv2 /opt/bmv2-fast)"
    else:
        fast_missing = hina_net.missing_requirements("bmv2", fast)
    shape = dict(workers=args.workers, modes=tuple(dict.fromkeys(args.modes)), bw=args.bw, loss=args.loss,
                 length=args.length, density=args.density, rounds=args.rounds, ping=False)
    xdp_missing = "--xdp off" if args.xdp == "off" else hina_net.missing_requirements("xdp")
    runs = ([("emulator", p, None) for p in dict.fromkeys(args.pipes)] + ([] if xdp_missing else [("xdp", 1, None)])
            + ([] if missing else [("bmv2", 1, "default")]) + ([] if fast_missing else [("bmv2", 1, "fast")]))
    rows = []
    for switch, pipes, build in runs:
        label = name({"switch": switch, "build": build, "pipes": pipes})
        print(f"{label}: {len(shape['modes'])} modes x {args.rounds} rounds ...", file=sys.stderr, flush=True)
        binary = {"bmv2_binary": fast} if build == "fast" else {}
        try:
            cfg = hina_net.ExperimentConfig(switch=switch, pipes=pipes, mtu=args.mtu, **binary, **shape)
            results = hina_net.Experiment(cfg, log=lambda m: print(f"  {m}", file=sys.stderr, flush=True)).run()
        except (RuntimeError, ValueError) as exc:
            print(f"switch_bench.py: {label}: {exc}", file=sys.stderr)
            return 2
        rows += rows_of(results, switch, pipes, cfg.words, build)
    rows = with_ratios(rows)
    config = {**shape, "modes": list(shape["modes"]), "mtu": args.mtu, "pipes": list(dict.fromkeys(args.pipes)),
              "fast_bmv2": None if fast_missing else fast}
    table = markdown(rows, missing, config, fast_missing, xdp_missing)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    write_result(args.out / "switch_bench.json", {"config": config, "bmv2_missing": missing,
                                                   "fast_bmv2_missing": fast_missing, "xdp_missing": xdp_missing,
                                                   "rows": rows},
                 command_line("benchmarks/switch_bench.py", argv),
                 **({} if missing and fast_missing else {"p4": p4_versions()}))
    (args.out / "switch_bench.md").write_text(table)
    png = args.out / "switch_bench.png"
    print(f"wrote {args.out / 'switch_bench.json'}, .md" + (f" and {png}" if plot(rows, png) else ""))
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
