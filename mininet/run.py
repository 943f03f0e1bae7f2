"""Run a hina experiment on Mininet (as root): a star of workers around the switch, every result checked.

    sudo .venv/bin/python mininet/run.py --workers 8 --switch emulator --mode both \\
        --bw 100 --length 16777216 --density 0.01

--mode is one of the codec's modes (auto, dense, blocks, aligned, sketch),
"both" (auto and dense) or "all" (every mode).  Writes a JSON result and a
PNG plot (time per phase, bytes on the wire per mode) into --out, exits
non-zero unless every worker's result is exact.  Every run carries the
fidelity monitor's verdict (mininet/fidelity.py): network-bound, or which
CPU set the time.  --calibrate instead bisects the link rate for the
highest at which dense aggregation stays network-bound on this machine,
and records it in a per-machine cache (~/.cache/hina/calibrate.json):
a run without --bw then uses half that rate (docs/mininet.md, "Choosing
link rates").  --calibrate-quick asks only whether this machine holds
--bw (that rate first; one trial where it does), as tools/reproduce.py
does before a claim.  Its trials' progress goes to stderr: a bar redrawn
on a terminal, one line per trial in a log.
Heterogeneity: --host-bw, --host-delay, --straggler, --compute, --cross
(mininet/heterogeneity.py).  See docs/fidelity.md.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from hina.cliargs import OneLineParser, pipes_flag, plural
from hina.codec.params import MODES
from hina.control.fabric import TARGETS
from hina.host.congestion_settings import add_flags, from_flags
from hina.mininet import heterogeneity
from hina.mininet.targets import default_mtu
from hina.provenance import default_out, out_help, out_path

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
QUICK_BRACKET = 4.0  # --calibrate-quick searches from the top / this up to the top ...
QUICK_STEPS = 2  # ... in this many bisection steps (the top known within a factor 4 ** (1 / 4), 1.41)
# How --calibrate measures, in the cache's key: raised when its search, its trials or the verdict that judges
# them changes, so that a rate calibrated the old way is measured again rather than taken for the new way's
CALIBRATE_VERSION = 2
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


def calibrate(cfg, steps: int, experiment, log, topology: str = "star", bar=None, low: float = CALIBRATE_LOW,
              quick: bool = False) -> dict:
    """The highest rate in [low, cfg.bw] at which dense aggregation's best round is network-bound, by bisection on
    a log scale; every trial with its verdict, and the lowest rate judged not network-bound (None where every
    trial was).  Both ends first: `low`, then the top; `quick`, the top first, and where it is network-bound no
    more trials (a machine that holds the rate asked about is told so in one).  `bar` (a hina.progress.Progress
    of steps + 2 trials at most): each trial is a step, its line the step's result (else the line goes to
    `log`)."""
    trials = []

    def network_bound(bw: float) -> bool:
        length = int(min(max(bw * 1e6 / 8 / 4 * CALIBRATE_SECONDS, CALIBRATE_LENGTH[0]), CALIBRATE_LENGTH[1]))
        if bar is not None:
            bar.start(f"dense aggregation at {bw:.1f} Mbit/s, {plural(length, 'element')}")
        trial = dataclasses.replace(cfg, bw=bw, modes=("dense",), length=length, density=1.0, workload=None,
                                    ping=False)
        run = experiment(trial, log=lambda m: None).run()["runs"][0]
        fid = run["fidelity"]
        held = fid["bound"] == "network" and run["exact"]
        trials.append({"mbps": bw, "length": length, "exact": run["exact"], "seconds": run["seconds"],
                       "line_rate_seconds": run["line_rate_seconds"], "verdict": fid["verdict"],
                       "network_bound": held, "detail": fid.get("detail"),
                       "rounds": [r["fidelity"]["verdict"] for r in run["rounds"]],
                       "busiest": fid.get("busiest"), "cpu": fid.get("cpu"),
                       "machine_cores_busy": fid.get("machine_cores_busy")})
        line = (f"calibrate: {bw:.1f} Mbit/s, {plural(length, 'element')}: {run['seconds']:.3f} s "
                f"(line rate {run['line_rate_seconds']:.3f} s), {fid['verdict']}")
        bar.done(line) if bar is not None else log(line)
        return held

    lo, hi = low, cfg.bw
    if quick and network_bound(hi):
        best = hi
    elif not network_bound(lo):
        best = None
    elif not quick and network_bound(hi):
        best = hi
    else:
        for _ in range(steps):
            mid = math.sqrt(lo * hi)
            if network_bound(mid):
                lo = mid
            else:
                hi = mid
        best = lo
    if bar is not None:  # the search may end before its last step
        bar.total = bar.count
    where = f"{plural(cfg.workers, 'worker')}, {cfg.switch}, {topology}"
    summary = (f"calibrate ({where}): dense aggregation stays network-bound up to {best:.0f} Mbit/s per link "
               f"(not at {hi:.0f})" if best is not None and best < cfg.bw else
               f"calibrate ({where}): network-bound at every rate up to {cfg.bw:g} Mbit/s" if best is not None
               else f"calibrate ({where}): not network-bound even at {low:g} Mbit/s")
    return {"config": dataclasses.asdict(cfg), "topology": topology, "highest_network_bound_mbps": best,
            "not_network_bound_mbps": min((t["mbps"] for t in trials if not t["network_bound"]), default=None),
            "searched_mbps": [low, cfg.bw], "quick": quick, "trials": trials, "summary": summary}


# -- link rates: the calibrated cache, and the rate a run uses when --bw (--bws) is not given ------------------

DEFAULT_BW = 1000.0  # Mbit/s: --bw when it is neither given nor calibrated on this machine
CALIBRATE_TOP = 1000.0  # Mbit/s: the top of --calibrate's search when --bw is not given
FAITHFUL_SHARE = 0.5  # the faithful rate: this share of the highest rate --calibrate found network-bound, so that
# systems busier per byte than dense aggregation (the baselines' all-to-all exchanges) stay within it too
CALIBRATE_HOW = "sudo .venv/bin/python mininet/run.py --calibrate"


def cache_path() -> Path:
    """The per-machine calibration cache: $XDG_CACHE_HOME/hina/calibrate.json, else ~/.cache/hina/calibrate.json
    (root's under sudo, as Mininet runs are)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "hina" / "calibrate.json"


def rate_key(workers: int, topology: str = "star", oversubscription: float = 1.0, leaves: str = "hina",
             switch: str = "emulator", spine_switch: str | None = None, pipes: int = 1, mtu: int = 9000,
             ranks_per_host: int = 1) -> dict:
    """What a calibrated rate holds for: this machine (CPU model and count, kernel, the CPU quota it runs under),
    the way --calibrate measures (CALIBRATE_VERSION) and the experiment's shape (topology, workers, switch kind
    and processes, MTU); a rate found for one key says nothing of another."""
    from hina.provenance import machine_key

    tree = topology != "star"
    return {**machine_key(), "calibration": CALIBRATE_VERSION, "topology": topology,
            "oversubscription": oversubscription if tree else None,
            "leaves": leaves if tree else None, "workers": workers, "switch": switch,
            "spine_switch": spine_switch if tree and spine_switch not in (None, switch) else None,
            "pipes": pipes, "mtu": mtu, "ranks_per_host": ranks_per_host}


def key_of(args) -> dict:
    """mininet/run.py's flags as a rate_key (after configure(): a tree's workers are its hosts)."""
    return rate_key(args.workers, args.topology, args.oversubscription, args.leaves, args.switch, args.spine_switch,
                    args.pipes, args.mtu, args.ranks_per_host)


def key_text(key: dict) -> str:
    """A key for a reader: "star, 8 workers, emulator" and what differs from the defaults."""
    where = key["topology"] if key["topology"] == "star" else f"{key['topology']} ({key['oversubscription']:g}:1)"
    parts = [where, plural(key['workers'], 'worker'), key["switch"] + (f" leaves, {key['spine_switch']} spines"
                                                                  if key.get("spine_switch") else "")]
    parts += ["plain leaves"] if key.get("leaves") == "plain" else []
    parts += [plural(key["pipes"], "pipe")] if key["pipes"] != 1 else []
    parts += [f"MTU {key['mtu']}"] if key["mtu"] != 9000 else []
    parts += [f"{plural(key['ranks_per_host'], 'rank')} per host"] if key["ranks_per_host"] != 1 else []
    parts += [f"under a CPU quota of {key['cpu_quota'] * 100:g}%"] if key.get("cpu_quota") else []
    return ", ".join(parts)


def calibrate_flags(key: dict) -> list[str]:
    """mininet/run.py's flags for the experiment `key` describes, those that differ from the defaults (--mtu
    wherever it is not 9000, the switch's own or not): what --calibrate needs to calibrate exactly that key."""
    flags = (["--workers", str(key["workers"])] if key["topology"] == "star" else
             ["--topology", key["topology"]] + (["--oversubscription", f"{key['oversubscription']:g}"]
                                                if key["oversubscription"] != 1 else []))
    flags += ["--switch", key["switch"]] if key["switch"] != "emulator" else []
    flags += ["--spine-switch", key["spine_switch"]] if key.get("spine_switch") else []
    flags += ["--leaves", "plain"] if key.get("leaves") == "plain" else []
    flags += ["--pipes", str(key["pipes"])] if key["pipes"] != 1 else []
    flags += ["--mtu", str(key["mtu"])] if key["mtu"] != 9000 else []
    flags += ["--ranks-per-host", str(key["ranks_per_host"])] if key["ranks_per_host"] != 1 else []
    return flags


def calibrate_command(key: dict) -> str:
    """The command that calibrates `key` here (under the key's CPU quota, tools/cpu_quota.py, where it has one)."""
    quota = (f"sudo .venv/bin/python tools/cpu_quota.py {key['cpu_quota'] * 100:g}% -- "
             if key.get("cpu_quota") else "")
    how = CALIBRATE_HOW.replace("sudo ", "", 1) if quota else CALIBRATE_HOW
    return quota + " ".join([how, shlex.join(calibrate_flags(key)), "--rounds 2"])


def load_cache(path: Path | None = None) -> list[dict]:
    """The cache's entries; none where it is missing or unreadable (a cache, never a reason to fail)."""
    try:
        data = json.loads((path or cache_path()).read_text())
        return [e for e in data.get("entries", []) if isinstance(e, dict) and isinstance(e.get("key"), dict)]
    except (OSError, ValueError, AttributeError):
        return []


def cached(key: dict, path: Path | None = None) -> dict | None:
    """The latest calibration recorded for exactly this key, or None."""
    return next((e for e in reversed(load_cache(path)) if e["key"] == key), None)


def faithful_rate(highest: float | None) -> float | None:
    """The rate a run uses from a calibration: FAITHFUL_SHARE of the highest network-bound rate, whole Mbit/s."""
    return None if highest is None else float(max(1, math.floor(highest * FAITHFUL_SHARE)))


def record_calibration(found: dict, key: dict, result: Path | None = None, path: Path | None = None) -> dict:
    """Put `found` (calibrate()'s result) into the cache under `key`, replacing that key's entry; the entry."""
    path = path or cache_path()
    entry = {"key": key, "highest_network_bound_mbps": found["highest_network_bound_mbps"],
             "faithful_mbps": faithful_rate(found["highest_network_bound_mbps"]),
             "not_network_bound_mbps": found.get("not_network_bound_mbps"), "quick": bool(found.get("quick")),
             "searched_mbps": found.get("searched_mbps") or [CALIBRATE_LOW, found["config"]["bw"]],
             "summary": found["summary"],
             "date": found.get("date") or time.strftime("%Y-%m-%dT%H:%M:%S%z"), "load_before": found.get("load_before"),
             "command": found.get("command"),
             "result": str(Path(result).resolve()) if result else None}
    entries = [e for e in load_cache(path) if e["key"] != key] + [entry]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": 1, "entries": entries}, indent=1))
    os.replace(tmp, path)
    return entry


def low_of(entry: dict) -> float:
    """The bottom of the search a cache entry records."""
    return (entry.get("searched_mbps") or [CALIBRATE_LOW])[0]


@dataclasses.dataclass
class LinkRate:
    """The link rates a run uses and why: explicit (given), calibrated (the cache's faithful rate for its key)
    or default (neither); `lines` are what to print before anything runs."""

    mbps: list[float]
    how: str
    why: str
    key: dict
    faithful: float | None = None
    lines: list[str] = dataclasses.field(default_factory=list)

    def as_json(self, single: bool = True) -> dict:
        return {"mbps": self.mbps[0] if single and len(self.mbps) == 1 else self.mbps, "how": self.how,
                "why": self.why, "faithful_mbps": self.faithful, "key": self.key}


def _rates(mbps: list[float]) -> str:
    return " and ".join("unshaped" if not r else f"{r:g} Mbit/s" for r in mbps)


def choose_rate(given: list[float] | None, key: dict, default: list[float], flag: str = "--bw",
                path: Path | None = None) -> LinkRate:
    """The rates to run at: `given` as it is (a warning line where one is above the faithful rate calibrated
    for `key`, or unshaped: 0), else that faithful rate, else `default` with a warning that it may be CPU-bound
    here and how to calibrate."""
    entry = cached(key, path)
    faithful = entry.get("faithful_mbps") if entry else None
    what = key_text(key)
    found = "" if faithful is None else (
        f"half the {entry['highest_network_bound_mbps']:g} Mbit/s at which dense aggregation stayed network-bound "
        f"in the calibration of {entry.get('date') or 'an earlier run'}, {path or cache_path()}")
    if given is not None:
        rate = LinkRate(list(given), "explicit", f"given with {flag}", key, faithful)
        above = [r for r in given if faithful is not None and (not r or r > faithful)]
        if above:
            rate.lines.append(f"warning: {flag} {_rates(above)} is above {faithful:g} Mbit/s, the faithful rate "
                              f"calibrated on this machine for {what} ({found}): the CPU, not the links, will likely "
                              f"set the time (the fidelity monitor judges each run)")
        elif entry and faithful is None and any(given):
            rate.lines.append(f"warning: {flag} {_rates(given)}: the calibration for {what} found dense aggregation "
                              f"CPU-bound even at {low_of(entry):g} Mbit/s on this machine")
        return rate
    if faithful is not None:
        rate = LinkRate([faithful], "calibrated", found, key, faithful)
        rate.lines.append(f"link rate {faithful:g} Mbit/s, calibrated for {what}: {found}; {flag} to choose another")
        return rate
    rate = LinkRate(list(default), "default", f"{flag} not given and no faithful rate calibrated on this machine "
                    f"for {what}", key, None)
    if entry:
        rate.lines.append(f"warning: {flag} not given; the calibration for {what} found no network-bound rate down "
                          f"to {low_of(entry):g} Mbit/s on this machine: {_rates(default)} will be CPU-bound here")
    else:
        rate.lines.append(f"warning: {flag} not given and no calibration for {what} on this machine: "
                          f"{_rates(default)} may be CPU-bound here, not network-bound (docs/fidelity.md); "
                          f"record a faithful rate with: {calibrate_command(key)}")
    return rate


def build_parser() -> OneLineParser:
    ap = OneLineParser(prog="mininet/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=3, help="workers (ranks) in the star (default: 3)")
    ap.add_argument("--ranks-per-host", type=int, default=1, metavar="R",
                    help="workers per host, each at a UDP port of its own, the switch sending each its RESULTs "
                         "(the star has --workers / R hosts; default: 1)")
    ap.add_argument("--no-offload", action="store_true",
                    help="frame by frame: no segmentation offload in the hosts' stacks, and the emulator reads "
                         "and sends every frame as the wire carries it")
    ap.add_argument("--no-pace", action="store_true",
                    help="the workers send a window of new chunks at once instead of at their link's rate")
    add_flags(ap, pace_default="each worker's own link rate; --no-pace: unpaced")  # --delay-rule, ...
    ap.add_argument("--switch", choices=TARGETS, default="emulator",
                    help="the switch: the Python emulator on raw sockets, BMv2 simple_switch_grpc, or the rules "
                         "as an XDP program in the kernel on the switch's interfaces (default: emulator)")
    ap.add_argument("--mode", choices=(*MODES, "both", "all"), default="auto",
                    help=f"the codec mode to run ({', '.join(MODES)}); both: auto and dense; all: every mode "
                         "(default: auto)")
    ap.add_argument("--workload", help="a model-shaped preset of hina.host.workloads; sets --length "
                                       "(default: none, uniform sparsity at --density)")
    ap.add_argument("--scale", type=float, default=0.02,
                    help="with --workload: shrink the preset by this factor (default: 0.02)")
    ap.add_argument("--bw", type=float, default=None,
                    help="Mbit/s per link, 0: unshaped (default: the faithful rate --calibrate recorded on this "
                         f"machine for this experiment's topology, workers, switch, pipes and MTU, "
                         f"{FAITHFUL_SHARE:g} x the highest rate it found network-bound; without one "
                         f"{DEFAULT_BW:g}, with a warning that it may be CPU-bound; with --calibrate, the top of "
                         f"the search, default {CALIBRATE_TOP:g})")
    ap.add_argument("--delay", type=float, default=0.0, help="ms per link (default: 0)")
    ap.add_argument("--loss", type=float, default=0.0, help="percent per link and direction (default: 0)")
    ap.add_argument("--length", type=int, default=1 << 20,
                    help=f"elements per gradient, without --workload (default: {1 << 20}, 2^20)")
    ap.add_argument("--density", type=float, default=0.01,
                    help="fraction of non-zero elements per worker, without --workload (default: 0.01)")
    ap.add_argument("--mtu", type=int, default=None,
                    help="MTU of every link; the emulator's words per packet follow from it (default: 9000; with "
                         "the XDP switch anywhere, 3506, the largest frame the XDP program takes)")
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
    shipped = ", ".join(sorted(p.stem for p in (Path(__file__).resolve().parent / "topologies").glob("*.json")))
    ap.add_argument("--topology", default="star", metavar="star|leafspine:L,S,H|FILE.json|NAME",
                    help="the network: a star of --workers around one switch, L leaves of H hosts under S spines "
                         "(the job rooted at the spines, slot s at spine s mod S; --workers is L x H), a topology "
                         "file of any depth (docs/trees.md, \"Topology files\"; the job rooted at its top tier, "
                         "--workers its hosts), or the NAME of a file shipped in mininet/topologies/: "
                         f"{shipped} (default: star)")
    ap.add_argument("--oversubscription", type=float, default=1.0, metavar="R",
                    help="trees: each leaf's uplinks run at hosts x --bw / (R x uplinks) (default: 1)")
    ap.add_argument("--spine-switch", choices=TARGETS,
                    help="trees: the switches without hosts run this target, --switch the leaves (a mixed tree; "
                         "default: --switch)")
    ap.add_argument("--leaves", choices=("hina", "plain"), default="hina",
                    help="trees: hina switches that sum their rack (hina), or Linux bridges that forward every "
                         "frame, the job summed at the one spine only (plain) (default: hina)")
    ap.add_argument("--calibrate", action="store_true",
                    help="find the highest link rate in [10 Mbit/s, --bw] at which dense aggregation is judged "
                         "network-bound here (a bisection on a log scale, --rounds rounds per rate), and record it "
                         "in this machine's cache (~/.cache/hina/calibrate.json), where runs without --bw (and "
                         "benchmarks/compare.py without --bws) of the same experiment find their rate")
    ap.add_argument("--calibrate-steps", type=int, default=None,
                    help=f"bisection steps of --calibrate (default: 6; with --calibrate-quick {QUICK_STEPS})")
    ap.add_argument("--calibrate-quick", action="store_true",
                    help="with --calibrate: the quick search tools/reproduce.py runs before a claim, asking whether "
                         "this machine holds --bw: that rate first, and where dense aggregation is network-bound "
                         f"there, no more trials; else the search from --bw / {QUICK_BRACKET:g} up (recorded in "
                         "the same cache)")
    ap.add_argument("--run-id", metavar="ID",
                    help="the run's names: its switches, hosts and links begin with it (a letter and two "
                         "letters or digits; default: a fresh one, so that experiments share a machine)")
    ap.add_argument("--cleanup", metavar="ID",
                    help="remove what the crashed run ID left (switches, hosts, links, loss tables) and exit")
    ap.add_argument("--out", type=out_path, default=default_out(),
                    help=out_help(what="the folder the JSON and PNG go into"))
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
    if fabric is not None and args.ranks_per_host != 1:
        raise ValueError("--ranks-per-host runs on the star (--topology star)")
    if args.mtu is None:  # the rate's key names the MTU before the config is made
        args.mtu = default_mtu(args.switch, args.spine_switch, *(s.target for s in (fabric.switches if fabric else ())))
    args.bw_given = args.bw is not None
    if args.calibrate:  # --bw is the top of the search
        args.link_rate = None
        args.bw = CALIBRATE_TOP if args.bw is None else args.bw
    else:  # given, else calibrated here, else the default (with a warning, printed before the run)
        args.link_rate = choose_rate(None if args.bw is None else [args.bw], key_of(args), [DEFAULT_BW])
        args.bw = args.link_rate.mbps[0]
    cfg = config(workers=args.workers, switch=args.switch, modes=modes_for(args.mode),
                 bw=args.bw or None, delay=args.delay, loss=args.loss, length=args.length,
                 density=args.density, mtu=args.mtu, slots=args.slots, rounds=args.rounds,
                 seed=args.seed, deadline=args.deadline, transport=args.transport,
                 workload=args.workload, scale=args.scale, pipes=args.pipes,
                 host_bw=args.host_bw, host_delay=args.host_delay, straggler=args.straggler,
                 compute=args.compute, cross=tuple(args.cross),
                 **({"ranks_per_host": args.ranks_per_host} if args.ranks_per_host != 1 else {}),
                 congestion=from_flags(args), **({"pace": False} if args.no_pace else {}),
                 **({"offload": False} if args.no_offload else {}))
    if args.calibrate_steps is None:
        args.calibrate_steps = QUICK_STEPS if args.calibrate_quick else 6
    args.calibrate_low = args.bw / QUICK_BRACKET if args.calibrate_quick and args.bw else CALIBRATE_LOW
    if args.calibrate and (not args.bw or args.bw <= args.calibrate_low or args.calibrate_steps < 1):
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
        rounds = [x["seconds"] for x in r.get("rounds", [])]
        if len(rounds) > 1:  # the first round beside the steady state (the best of the later ones)
            line += f", first round {rounds[0]:.3f} s, steady {min(rounds[1:]):.3f} s"
        print(f"{r['mode']:<7s} exact={r['exact']} ran {r.get('encoding')}{index}, {r['seconds']:.3f} s{line}, "
              f"{r['wire_bytes_per_worker']:,.0f} B/worker on the wire, "
              f"{plural(r['retransmissions'], 'retransmission')}; {r['fidelity']['verdict']}")
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
        print(f"switch: {plural(args.pipes, 'pipe')}, frames per pipe {[p['frames'] for p in pipes]}")


def calibrate_and_record(args, cfg, experiment, command: str, log) -> int:
    """--calibrate: the bisection for the highest network-bound rate, its result file, and the faithful rate
    recorded in the machine's cache for runs without --bw."""
    from hina.progress import Progress

    load = list(os.getloadavg())  # a busy machine holds less: the cache says how busy this one was
    try:
        with Progress(args.calibrate_steps + 2, "calibrate") as bar:  # at most: the ends, then the bisection
            found = calibrate(cfg, args.calibrate_steps, experiment, log, topology=describe_topology(args),
                              low=args.calibrate_low, quick=args.calibrate_quick, bar=bar)
    except (RuntimeError, ValueError) as exc:
        print(f"mininet/run.py: {exc}", file=sys.stderr)
        return 2
    key = key_of(args)
    found.update(command=command, **provenance(), load_before=load,
                 link_rate={"mbps": args.bw, "how": "explicit" if args.bw_given else "default",
                            "why": "the top of the search" + (" (--bw)" if args.bw_given else
                                                               f" (--bw not given: {CALIBRATE_TOP:g})")},
                 cache={"path": str(cache_path()), "key": key,
                        "faithful_mbps": faithful_rate(found["highest_network_bound_mbps"])})
    path = args.out / f"{stem_of(args, 'calibrate')}.json"
    path.write_text(json.dumps(found, indent=1))
    print(found["summary"])
    print(f"wrote {path}")
    try:
        entry = record_calibration(found, key, result=path)
    except OSError as exc:  # a cache: say so, the result file stands
        log(f"calibrate: not recorded in {cache_path()}: {exc}")
        return 0
    print(f"recorded in {cache_path()}: " + (
        f"runs of {key_text(key)} without --bw now use {entry['faithful_mbps']:g} Mbit/s "
        f"({FAITHFUL_SHARE:g} x {entry['highest_network_bound_mbps']:g})"
        if entry["faithful_mbps"] is not None else f"no faithful rate for {key_text(key)} on this machine"))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.name is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.name):
        ap.error(f"--name must be a file stem (letters, digits, '.', '_', '-'), got {args.name!r}")
    if args.calibrate_quick and not args.calibrate:
        ap.error("--calibrate-quick is a way to --calibrate: give both")
    fail = lambda why: print(f"mininet/run.py: {why}", file=sys.stderr) or 2  # noqa: E731
    if args.cleanup is not None:
        try:
            from hina.mininet import hina_net, plain_star

            hina_net.cleanup(args.cleanup)
            plain_star.cleanup(args.cleanup)
        except (ImportError, ValueError) as exc:
            return fail(exc)
        print(f"removed what run {args.cleanup} left")
        return 0
    try:
        if args.run_id is not None:
            from hina.mininet.hina_net import check_run_id

            check_run_id(args.run_id)
        cfg, experiment = configure(args)
        from hina.mininet.hina_net import missing_requirements, plot
    except (ImportError, ValueError) as exc:  # no Mininet, or a bad value: named before anything runs
        return fail(exc)
    problem = missing_requirements(args.switch)
    if problem:
        return fail(problem)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    command = " ".join(["mininet/run.py"] + (argv if argv is not None else sys.argv[1:]))
    for line in args.link_rate.lines if args.link_rate else ():  # before anything runs
        log(line)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.calibrate:
        return calibrate_and_record(args, cfg, experiment, command, log)
    try:
        results = experiment(cfg, log=log, run_id=args.run_id).run()
    except (RuntimeError, ValueError) as exc:
        return fail(exc)
    results["command"] = command
    results.update(provenance())
    results["link_rate"] = args.link_rate.as_json()
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
