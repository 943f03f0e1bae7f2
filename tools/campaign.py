"""Every measured figure of README.md and docs/, re-run in order on this checkout, then every table.

    sudo .venv/bin/python tools/campaign.py              # everything this machine can run (hours)
    sudo .venv/bin/python tools/campaign.py --list       # the steps, what each needs, its result files
    sudo .venv/bin/python tools/campaign.py --only bmv2 tree-compare --dry-run

A figure is only worth its seconds when the emulated links, not this machine, set them
(docs/fidelity.md), so the campaign runs one experiment at a time and says the load average before
each; run it on an otherwise idle machine.  Steps are grouped: `loopback` (no root), `model` (virtual
clocks, no sockets), `mininet` (root and Debian's mininet), `bmv2` (also simple_switch_grpc and
`make p4`'s p4/build).  A step whose group cannot run here is skipped with the reason; naming it in
--only makes that an error instead.  Every result goes to a fixed path under benchmarks/results/
(what `tools/tables.py` reads), named by the step's own --out (the scripts' defaults are a scratch
folder, hina.provenance.default_out), so a re-run replaces the figures it measured and nothing else.
After the last step the tables are regenerated (--no-tables to skip).  Progress goes to stderr: on a
terminal a bar (the step under way, steps done of all, the time so far and left, estimated from the
steps done) below the steps' own output; in a log, a line as each step starts and one as it ends.

Committed figures come from clean commits, so the campaign refuses to start (one line naming what
differs, exit 2) on a checkout with uncommitted code, before any step runs: every step would refuse
its own --out after its set-up anyway.  --allow-dirty (or HINA_ALLOW_DIRTY=1) runs it for drafts,
whose result files say "dirty".  After each step that succeeded, its wall seconds, the load average
before it and the commit are merged into benchmarks/results/campaign.json (--out; a re-run replaces
that step's entry and keeps the others'), written as every result is (`hina.provenance.write_result`):
docs/reproduce.md quotes those times.  --dry-run and --list write nothing.

Exit status: 0 when every step that ran succeeded, 1 when one failed (the rest still run with
--keep-going), 2 on a bad argument or a checkout with uncommitted code.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

from hina import provenance
from hina.cliargs import OneLineParser
from hina.progress import Progress

ROOT = Path(__file__).resolve().parent.parent

R = "benchmarks/results"
GROUPS = ("loopback", "model", "mininet", "bmv2")
# each step's latest wall seconds, load average before it and commit (docs/reproduce.md shows the times)
TIMINGS = f"{R}/campaign.json"


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    group: str
    args: tuple[str, ...]  # a script under this checkout and its arguments (run with this Python)
    what: str
    outputs: tuple[str, ...] = ()

    def command(self) -> list[str]:
        return [sys.executable, *self.args]


def _run_py(name: str, group: str, what: str, *args: str, outputs: tuple[str, ...] = ()) -> Step:
    return Step(name, group, args, what, outputs)


# the 8-worker and 4-worker stars and the tree: where dense aggregation stays network-bound
# (the top of each search: above what its machine keeps network-bound, 4 workers past 1 Gbit/s)
CALIBRATIONS = (("calibrate-star-8w", ("--workers", "8", "--bw", "1000")),
                ("calibrate-star-4w", ("--workers", "4", "--bw", "3000")),
                ("calibrate-leafspine214-8w", ("--topology", "leafspine:2,1,4", "--oversubscription", "4", "--bw",
                                               "1000")))
# the link rates the comparisons run at, from those calibrations (docs/fidelity.md says why these): about half the
# highest rate at which dense aggregation stayed network-bound (benchmarks/results/calibrate/: the 8-worker star
# 487-562 Mbit/s over two runs, the 4-worker star 1471 at most a third, the 4:1 leaf/spine tree 487)
STAR_MBPS, STAR4_MBPS, TREE_MBPS = "250", "500", "200"
# the rate no calibration chose: the cross-traffic runs' and the one-shot comparison's (the scale model's
# validation runs have theirs below)
CROSS_MBPS = "100"
# the scale model's validation: 4 and 8 workers, uniform and DeepLight-shaped, at two rates each
VALIDATION = tuple((f"star-{n}w-{bw}-{kind}", n, bw, data)
                   for n in (4, 8) for bw in (100, 50)
                   for kind, data in (("uniform", ("--length", "16777216", "--density", "0.01")),
                                      ("deeplight", ("--workload", "deeplight", "--scale", "0.02"))))
TREE = ("--topology", "leafspine:2,1,4", "--oversubscription", "4")
# every mode through emulator trees: the 4:1 tree without and with loss on every link, two spines
EXACT_TREES = (("exact-leafspine214", ()), ("exact-leafspine214-loss1", ("--loss", "1")),
               ("exact-leafspine422-loss1", ("--topology", "leafspine:4,2,2", "--oversubscription", "2",
                                             "--loss", "1")))
# the same tree with hina's leaves summing their racks, then plain leaves (the spine sums alone)
LEAVES = (("lstm", "0.01"), ("deeplight", "0.007"))
# BMv2 in trees: BMv2 everywhere, mixed both ways, the spine alone, two spines; 1% loss on every link
BMV2_TREES = (("bmv2-leafspine214", ("--switch", "bmv2")),
              ("bmv2-leaves-emulator-spine", ("--switch", "bmv2", "--spine-switch", "emulator")),
              ("emulator-leaves-bmv2-spine", ("--switch", "emulator", "--spine-switch", "bmv2")),
              ("bmv2-spine-plain-leaves", ("--switch", "bmv2", "--leaves", "plain")),
              ("bmv2-leafspine422", ("--switch", "bmv2", "--topology", "leafspine:4,2,2",
                                     "--oversubscription", "2")))
# ranks per host: 8 workers as 2 hosts of 4 ranks and as 8 hosts, through the emulator and BMv2
RANKS = (("emulator-2x4", ("--ranks-per-host", "4", "--length", "4000000")),
         ("emulator-8x1", ("--ranks-per-host", "1", "--length", "4000000")),
         ("bmv2-2x4", ("--switch", "bmv2", "--mtu", "172", "--ranks-per-host", "4", "--length", "200000")),
         ("bmv2-8x1", ("--switch", "bmv2", "--mtu", "172", "--ranks-per-host", "1", "--length", "200000")))

# time to accuracy (docs/ddp.md): to the target at 4 ranks, then per step with buckets, dense gradients, 8 ranks
EXACT = ("--systems", "hina,hina-dense,gloo", "--target", "1")
TTA_RUNS = (("4", "every system trained to the target held-out loss and on to the budget, three seeds",
             ("--workers", "4", "--target", "4.25", "--steps", "300", "--keep-going", "--seeds", "0", "1", "2")),
            ("4_buckets", "per step with several DDP buckets", ("--workers", "4", *EXACT, "--bucket-mb", "4",
                                                                "--steps", "30", "--eval-every", "30")),
            ("4_dense_model", "per step on a model with dense gradients", ("--workers", "4", *EXACT, "--vocab", "2000",
                                                                           "--samples", "0", "--steps", "30",
                                                                           "--eval-every", "30")),
            ("8_per_iteration", "per step at 8 ranks", ("--workers", "8", *EXACT, "--steps", "20", "--eval-every",
                                                        "20")))


def steps() -> list[Step]:
    out: list[Step] = []
    run = "mininet/run.py"
    for name, args in CALIBRATIONS:
        out.append(_run_py(name, "mininet", "--calibrate: the highest rate at which dense aggregation is "
                           "network-bound", run, "--calibrate", *args, "--rounds", "2",
                           "--calibrate-steps", "5", "--out", f"{R}/calibrate", "--name", name,
                           outputs=(f"{R}/calibrate/{name}.json",)))
    out.append(_run_py("budget", "mininet", "where the CPU goes per megabyte on the 8-worker star, both data paths, "
                       "beside the kernel alone", "benchmarks/budget.py", "--out", f"{R}/budget.json",
                       outputs=(f"{R}/budget.json",)))
    compare = "benchmarks/compare.py"
    star = ("--workers", "8", "--rounds", "2", "--bws", STAR_MBPS, "--loopback", "off", "--out", R)
    out += [
        _run_py("compare-faithful", "mininet", "every system and preset on the 8-worker star at a calibrated "
                "rate", compare, *star, "--name", "compare_faithful", outputs=(f"{R}/compare_faithful.json",)),
        _run_py("compare-straggler", "mininet", "LSTM and DeepLight with rank 7 starting 50% of a 1 s step late",
                compare, "--presets", "lstm", "deeplight", *star, "--straggler", "rank7:+50%", "--compute", "1000",
                "--name", "compare_straggler", outputs=(f"{R}/compare_straggler.json",)),
        _run_py("compare-cross", "mininet", "LSTM and DeepLight beside an iperf3 flow from rank 1 to rank 0",
                compare, "--presets", "lstm", "deeplight", *star, "--cross", "1>0", "--name", "compare_cross",
                outputs=(f"{R}/compare_cross.json",)),
        _run_py("slowdown-straggler", "loopback", "each system's slowdown under the straggler",
                "benchmarks/slowdown.py", f"{R}/compare_faithful.json", f"{R}/compare_straggler.json",
                "--out", f"{R}/slowdown_straggler.md", outputs=(f"{R}/slowdown_straggler.json",)),
        _run_py("slowdown-cross", "loopback", "each system's slowdown beside the flow", "benchmarks/slowdown.py",
                f"{R}/compare_faithful.json", f"{R}/compare_cross.json", "--out", f"{R}/slowdown_cross.md",
                outputs=(f"{R}/slowdown_cross.json",)),
        _run_py("cross-traffic", "mininet", "hina's congestion windows alone and beside an iperf3 flow",
                "benchmarks/cross_traffic.py", "--workers", "4", "--bw", CROSS_MBPS, "--length", "4000000",
                "--rounds", "2", "--out", f"{R}/cross_traffic.json", outputs=(f"{R}/cross_traffic.json",)),
        *(_run_py(f"cross-traffic-{name.replace('_', '-')}", "mininet",
                  "hina's share of a link beside an iperf3 flow, 30 to 200 Mbit/s", "benchmarks/cross_traffic.py",
                  "--workers", "4", "--bws", "30", "60", "100", "200", *flags,
                  "--out", f"{R}/cross_traffic/{name}.json", outputs=(f"{R}/cross_traffic/{name}.json",))
          for name, flags in (("fair", ()), ("fair_cap", ("--cap", "50%")), ("delay", ("--delay-rule",)),
                              ("delay_cap", ("--delay-rule", "--cap", "50%")))),
        _run_py("compare", "mininet", "one-shot aggregations of every system and preset: loopback, and the 8-worker "
                "star at 100 Mbit/s, 1 and 10 Gbit/s", compare, "--workers", "8", "--rounds", "1", "--bws", CROSS_MBPS,
                "1000", "10000", "--out", R, outputs=(f"{R}/compare.json",)),
    ]
    trees = f"{R}/trees"
    for name, extra in EXACT_TREES:
        topo = extra if "--topology" in extra else (*TREE, *extra)
        out.append(_run_py(name, "mininet", "every mode through an emulator tree, against numpy", run, *topo,
                           "--mode", "all", "--bw", TREE_MBPS, "--rounds", "2", "--out", trees, "--name", name,
                           outputs=(f"{trees}/{name}.json",)))
    out.append(_run_py("tree-compare", "mininet", "every system and preset on the 4:1 leaf/spine tree", compare,
                       *TREE, "--bws", TREE_MBPS, "--rounds", "2", "--loopback", "off", "--out", trees,
                       "--name", "tree-compare",
                       outputs=(f"{trees}/tree-compare.json",)))
    for preset, scale in LEAVES:
        for leaves in ("hina", "plain"):
            name = f"leaves-{preset}-{leaves}"
            out.append(_run_py(name, "mininet", "leaves summing their rack, or the spine alone", run, *TREE,
                               "--leaves", leaves, "--mode", "both", "--bw", TREE_MBPS, "--rounds", "2",
                               "--workload", preset, "--scale", scale, "--out", trees, "--name", name,
                               outputs=(f"{trees}/{name}.json",)))
    valid = f"{R}/validation"
    for name, n, bw, data in VALIDATION:
        out.append(_run_py(f"validate-{name}", "mininet", "a star run the scale model is checked against", run,
                           "--switch", "emulator", "--mode", "both", "--workers", str(n), "--bw", str(bw),
                           "--rounds", "2", *data, "--out", valid, "--name", name,
                           outputs=(f"{valid}/{name}.json",)))
    model = "benchmarks/scale_model.py"
    out += [
        _run_py("scale-model", "model", "validation against the runs above, then the projection to 1,024 "
                "workers", model, "--validate", *(f"{valid}/{name}.json" for name, *_ in VALIDATION),
                "--out", f"{R}/scale_model.json", outputs=(f"{R}/scale_model.json",)),
        _run_py("scale-model-k32-w64", "model", "K = 32 words, 64 slots", model, "--presets", "deeplight", "vgg19",
                "--workers", "1024", "--gbps", "100", "--topologies", "tree2", "--mtu", "172", "--slots", "64",
                "--out", f"{R}/scale_model_k32_w64.json", outputs=(f"{R}/scale_model_k32_w64.json",)),
        _run_py("scale-model-k32-w1024", "model", "K = 32 words, 1,024 slots", model, "--presets", "deeplight",
                "vgg19", "--workers", "1024", "--gbps", "100", "--topologies", "tree2", "--mtu", "172", "--slots",
                "1024", "--out", f"{R}/scale_model_k32_w1024.json", outputs=(f"{R}/scale_model_k32_w1024.json",)),
        _run_py("ns3", "model", "hina on ns-3 beside the scale model: star, leaf/spine and fat tree, 8 to 1,024 "
                "workers, DeepLight and LSTM, every mode", "benchmarks/ns3_scale.py", "--out", f"{R}/ns3_scale.json",
                outputs=(f"{R}/ns3_scale.json",)),
        _run_py("ns3-10g", "model", "hina on ns-3 beside the scale model at 10 Gbit/s: leaf/spine and fat tree, 8 to "
                "1,024 workers, DeepLight, every mode", "benchmarks/ns3_scale.py", "--gbps", "10", "--fabrics",
                "leaf_spine,fat_tree", "--presets", "deeplight", "--out", f"{R}/ns3_10g.json",
                outputs=(f"{R}/ns3_10g.json",)),
        _run_py("ns3-full", "model", "DeepLight at 1,024 workers on ns-3, every chunk of every round",
                "benchmarks/ns3_scale.py", "--workers", "1024", "--fabrics", "leaf_spine", "--presets", "deeplight",
                "--modes", "auto", "--cap", "0", "--out", f"{R}/ns3_full.json", outputs=(f"{R}/ns3_full.json",)),
        _run_py("ns3-every-chunk", "model", "every mode at 8 workers on ns-3, every chunk of every round",
                "benchmarks/ns3_scale.py", "--workers", "8", "--fabrics", "leaf_spine", "--rack", "4", "--spines", "2",
                "--cap", "0", "--out", f"{R}/ns3_every_chunk.json", outputs=(f"{R}/ns3_every_chunk.json",)),
        _run_py("ns3-shallow", "model", "an oversubscribed leaf/spine whose ports queue 16 packets, every chunk on "
                "ns-3 and the scale model", "benchmarks/ns3_scale.py", "--workers", "64,256", "--fabrics", "leaf_spine",
                "--presets", "deeplight", "--modes", "auto", "--spines", "2", "--uplink-gbps", "25", "--queue",
                "16", "--cap", "0", "--out", f"{R}/ns3_shallow.json", outputs=(f"{R}/ns3_shallow.json",)),
        _run_py("contest-model", "model", "hina's window beside a Reno flow on a virtual clock",
                "benchmarks/contest_model.py", "--out", f"{R}/contest_model.json",
                outputs=(f"{R}/contest_model.json",)),
        _run_py("loss-model", "model", "the sender's recovery under loss on a virtual clock",
                "benchmarks/loss_model.py", "--out", f"{R}/loss_model.json", outputs=(f"{R}/loss_model.json",)),
    ]
    ranks = f"{R}/ranks"
    for name, extra in RANKS:
        out.append(_run_py(f"ranks-{name}", "bmv2" if "bmv2" in extra else "mininet", "8 workers as hosts of "
                           "ranks, each at a UDP port of its own", run, "--workers", "8", *extra, "--mode", "all",
                           "--bw", STAR_MBPS, "--density", "0.01", "--rounds", "2", "--out", ranks, "--name", name,
                           outputs=(f"{ranks}/{name}.json",)))
    out += [
        _run_py("deploy", "mininet", "the cluster guide's commands: 2 machines x 4 ranks, the switch on a third, "
                "standalone workers and multi-node torchrun against gloo", "mininet/deploy.py", "--ranks", "4",
                "--bw", STAR_MBPS, "--steps", "10", "--out", f"{R}/deploy.json", outputs=(f"{R}/deploy.json",)),
        _run_py("side-by-side", "mininet", "two experiments at once on one machine", "benchmarks/side_by_side.py",
                "--bw", STAR_MBPS, "--out", f"{R}/side_by_side.json", outputs=(f"{R}/side_by_side.json",)),
        _run_py("tenants", "bmv2", "2, 4 and 8 jobs at once through one switch, a job meeting a full switch, and two "
                "jobs through the emulator's and BMv2's star", "benchmarks/tenants.py", "--jobs", "2", "4", "8",
                "--full", "--star", "emulator", "bmv2", "--out", f"{R}/tenants.json", outputs=(f"{R}/tenants.json",)),
        _run_py("churn-model", "model", "an hour of jobs arriving at and leaving one switch on a virtual clock",
                "benchmarks/churn_model.py", "--out", f"{R}/churn_model.json", outputs=(f"{R}/churn_model.json",)),
        _run_py("lease", "loopback", "a dead job's slots freed by the lease, a new job exact on them",
                "benchmarks/lease.py", "--lease", "5", "--out", f"{R}/lease.json", outputs=(f"{R}/lease.json",)),
    ]
    bmv2 = f"{trees}/bmv2"
    for name, extra in BMV2_TREES:
        topo = () if "--topology" in extra else TREE
        out.append(_run_py(f"tree-{name}", "bmv2", "every mode through a BMv2 or mixed tree, 1% loss on every "
                           "link", run, *topo, *extra, "--mode", "all", "--bw", TREE_MBPS, "--loss", "1",
                           "--length", "50000", "--density", "0.01", "--rounds", "1", "--out", bmv2,
                           "--name", name, outputs=(f"{bmv2}/{name}.json",)))
    out += [
        _run_py("switch-bench", "bmv2", "the emulator at 1, 2 and 4 pipes and BMv2 (as built and -O3) in one 32-word "
                "star, 1% loss", "benchmarks/switch_bench.py", "--out", R, outputs=(f"{R}/switch_bench.json",)),
        _run_py("switch-bench-lossless", "bmv2", "the one-pipe emulator and BMv2 (as built and -O3) in the same star "
                "without loss", "benchmarks/switch_bench.py", "--pipes", "1", "--loss", "0", "--out",
                f"{R}/switch_bench_lossless", outputs=(f"{R}/switch_bench_lossless/switch_bench.json",)),
        _run_py("codec-bench", "loopback", "the codec's encode and decode against a memory copy, bytes against the "
                "bound", "benchmarks/codec_bench.py", "--out", f"{R}/codec_bench.json",
                outputs=(f"{R}/codec_bench.json",)),
        *(_run_py(f"codec-bench-{backend}-{size}", "loopback", f"the {backend} codec at d = {length}, the accelerator "
                  "path's CPU reference", "benchmarks/codec_bench.py", "--backend", backend.split("-")[0],
                  *(("--device", "cpu") if backend == "torch-cpu" else ()), "--lengths", length, "--densities",
                  "0.001", "0.01", "0.05", "--workers", "8", "--presets", "--out", f"{R}/{name}.json",
                  outputs=(f"{R}/{name}.json",))
          for backend, size, length, name in (
              ("numba", "2e22", "4194304", "codec_bench_numba_2e22"),
              ("torch-cpu", "2e22", "4194304", "codec_bench_torch_cpu"),
              ("numba", "2e25", "33554432", "codec_bench_numba_2e25"),
              ("torch-cpu", "2e25", "33554432", "codec_bench_torch_cpu_2e25"))),
        _run_py("capture-torch", "loopback", "real gradients of small PyTorch models against the generators' "
                "densities, summed exact", "benchmarks/capture_torch.py", "--aggregate", "--out",
                f"{R}/capture_torch.json", outputs=(f"{R}/capture_torch.json",)),
        _run_py("first-run", "loopback", "a fresh clone's make install and make demo, a wheel's first demo alone and "
                "beside two CPU-bound processes (needs pip's registry)", "benchmarks/first_run.py", "--out",
                f"{R}/first_run.json", outputs=(f"{R}/first_run.json",)),
        _run_py("demo", "loopback", "README's main job", "benchmarks/demo_result.py", "--out", f"{R}/demo.json",
                outputs=(f"{R}/demo.json",)),
        _run_py("sender-bench", "loopback", "the sender's own cost per chunk", "benchmarks/sender_bench.py",
                "--out", f"{R}/sender_bench.json", outputs=(f"{R}/sender_bench.json",)),
        _run_py("reliability", "loopback", "seconds and overhead against the drop rate",
                "benchmarks/reliability_bench.py", "--out", f"{R}/reliability_bench.json",
                outputs=(f"{R}/reliability_bench.json",)),
        _run_py("soak", "loopback", "a minute of impaired rounds, memory flat", "benchmarks/soak.py", "--seconds",
                "60", "--out", f"{R}/soak.json", outputs=(f"{R}/soak.json",)),
        _run_py("fuzz", "loopback", "2,000,000 hostile frames", "benchmarks/fuzz_bench.py", "--frames", "2000000",
                "--out", f"{R}/fuzz_bench.json", outputs=(f"{R}/fuzz_bench.json",)),
        _run_py("emulator-bench", "loopback", "the switch's packet rate against an echo server",
                "benchmarks/emulator_bench.py", "--out", f"{R}/emulator_bench.json",
                outputs=(f"{R}/emulator_bench.json",)),
        _run_py("train-ddp", "loopback", "DDP training steps through hina against gloo's allreduce",
                "benchmarks/train_ddp.py", "--workers", "4", "8", "--steps", "10", "--out", f"{R}/train_ddp.json",
                outputs=(f"{R}/train_ddp.json",)),
        _run_py("train-ddp-mininet", "mininet", "the same on a star of shaped links", "benchmarks/train_ddp.py",
                "--workers", "4", "8", "--steps", "10", "--env", "mininet", "--out", f"{R}/train_ddp_mininet.json",
                outputs=(f"{R}/train_ddp_mininet.json",)),
    ]
    tta = f"{R}/time_to_accuracy"
    out.append(_run_py("tta-curve", "loopback", "gloo's held-out loss curve, where the default target comes from",
                       "benchmarks/time_to_accuracy.py", "--workers", "4", "--systems", "gloo", "--steps", "400",
                       "--target", "1", "--out", f"{tta}/loopback_gloo_curve.json",
                       outputs=(f"{tta}/loopback_gloo_curve.json",)))
    for name, what, extra in TTA_RUNS:
        rate = STAR_MBPS if extra[1] == "8" else STAR4_MBPS  # the star's calibration for that many ranks
        out.append(_run_py(f"tta-{name}", "mininet", what, "benchmarks/time_to_accuracy.py", "--env", "mininet",
                           "--bw", rate, *extra, "--out", f"{tta}/mininet_{name}.json",
                           outputs=(f"{tta}/mininet_{name}.json",)))
    return out


@functools.cache
def unavailable(group: str) -> str | None:
    """Why this machine cannot run a group's steps, or None."""
    if group in ("loopback", "model"):
        return None
    if os.geteuid() != 0:
        return "needs root (sudo)"
    try:
        from hina.mininet import hina_net
    except ImportError:
        return "needs Debian's mininet package (make install links it into .venv)"
    return hina_net.missing_requirements("bmv2" if group == "bmv2" else "emulator")


def select(all_steps: list[Step], only: list[str], skip: list[str], start: str | None) -> list[Step]:
    names = {s.name for s in all_steps}
    for word in [*only, *skip, *([start] if start else [])]:
        if word not in names and word not in GROUPS:
            raise ValueError(f"no step or group named {word!r} (--list shows them)")
    chosen = [s for s in all_steps if not only or s.name in only or s.group in only]
    chosen = [s for s in chosen if s.name not in skip and s.group not in skip]
    if start:
        first = next((i for i, s in enumerate(chosen) if s.name == start or s.group == start), None)
        if first is None:
            raise ValueError(f"--from {start}: not among the chosen steps")
        chosen = chosen[first:]
    return chosen


def clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def dirty_start() -> str | None:
    """Why the campaign may not start here, or None: its steps write committed figures, which come from clean
    commits (`provenance.dirty_refusal`'s rule, said once for the whole campaign, before any step runs)."""
    if os.environ.get(provenance.ALLOW_DIRTY) == "1":
        return None
    changed = provenance.changes()
    if not changed:
        return None
    shown = ", ".join(line[3:] for line in changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    return (f"not started: every step writes a committed figure into {R}/, which must come from a clean commit, and "
            f"this checkout has uncommitted changes ({shown}): commit them first, or pass --allow-dirty "
            f"({provenance.ALLOW_DIRTY}=1) for drafts")


def record(path: Path, step: Step, seconds: float, load: list[float], command: str) -> None:
    """Merge one step's wall seconds, the load average before it and the commit into the timings file (the
    other steps' entries kept), written by `provenance.write_result` like every result."""
    try:
        steps = dict(json.loads(path.read_text()).get("steps") or {})
    except (OSError, ValueError, AttributeError):
        steps = {}
    head, dirty = provenance.commit()
    steps[step.name] = {"group": step.group, "seconds": round(seconds, 1), "load_before": [round(x, 2) for x in load],
                        "commit": head, "dirty": dirty,
                        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    provenance.write_result(path, {"steps": dict(sorted(steps.items()))}, command)


def run_step(step: Step, bar: Progress) -> int:
    """Run one step; its exit status.  Under a bar on a terminal, the step's output is relayed line by line
    above the bar (stdout to stdout, stderr to stderr; the step, writing to pipes, prints plain progress
    lines of its own); elsewhere it writes to the campaign's own streams."""
    if not bar.tty:
        return subprocess.run(step.command(), cwd=ROOT).returncode
    proc = subprocess.Popen(step.command(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", bufsize=1, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def relay(pipe, stream) -> None:
        for line in pipe:
            bar.print(line, stream=stream)

    threads = [threading.Thread(target=relay, args=(proc.stdout, sys.stdout), daemon=True),
               threading.Thread(target=relay, args=(proc.stderr, sys.stderr), daemon=True)]
    for t in threads:
        t.start()
    try:
        code = proc.wait()
    except BaseException:  # Ctrl-C: the step gets it too (same process group); do not leave it behind
        proc.kill()
        raise
    for t in threads:
        t.join()
    return code


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="campaign.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print the steps and exit")
    ap.add_argument("--only", nargs="+", default=[], metavar="STEP|GROUP",
                    help=f"run these steps or groups only ({', '.join(GROUPS)})")
    ap.add_argument("--skip", nargs="+", default=[], metavar="STEP|GROUP", help="leave these out")
    ap.add_argument("--from", dest="start", metavar="STEP|GROUP", help="start at this step (resume a campaign)")
    ap.add_argument("--dry-run", action="store_true", help="print each command instead of running it")
    ap.add_argument("--keep-going", action="store_true", help="run the remaining steps after a failure")
    ap.add_argument("--no-tables", action="store_true", help="do not regenerate the tables at the end")
    ap.add_argument("--allow-dirty", action="store_true",
                    help=f"run on a checkout with uncommitted code (drafts; as {provenance.ALLOW_DIRTY}=1)")
    ap.add_argument("--out", type=Path, default=ROOT / TIMINGS, metavar="PATH",
                    help=f"where each step's time goes (default: {TIMINGS}; the steps' results always go to their "
                         "own fixed paths)")
    args = ap.parse_args(argv)
    try:
        chosen = select(steps(), args.only, args.skip, args.start)
    except ValueError as exc:
        ap.error(str(exc))
    if args.list:
        for s in chosen:
            why = unavailable(s.group)
            print(f"{s.name:<30} {s.group:<9} {s.what}" + (f"  [skipped here: {why}]" if why else ""))
            print(f"{'':<30} {shlex.join(['python', *s.args])}")
        return 0
    if args.allow_dirty:
        os.environ[provenance.ALLOW_DIRTY] = "1"  # the steps (children) write their drafts too
    refusal = dirty_start()  # before any step runs, not after each one's set-up
    if refusal and not args.dry_run:
        print(f"campaign.py: {refusal}", file=sys.stderr)
        return 2
    if refusal:
        print(f"campaign.py: (a real run would refuse) {refusal}", file=sys.stderr)
    command = provenance.command_line("tools/campaign.py", argv)
    runnable = []
    for s in chosen:
        why = unavailable(s.group)
        if why is None:
            runnable.append(s)
        elif s.name in args.only or s.group in args.only:
            print(f"campaign.py: {s.name}: {why}", file=sys.stderr)
            return 2
        else:
            print(f"skip {s.name}: {why}", file=sys.stderr)
    failed, done = [], []
    with Progress(len(runnable), "campaign") as bar:
        for i, s in enumerate(runnable, 1):
            loadavg = list(os.getloadavg())
            load = ", ".join(f"{x:.2f}" for x in loadavg)
            what = f"{s.name} ({s.group}, load {load}): {shlex.join(['python', *s.args])}"
            if args.dry_run:
                bar.print(f"[{i}/{len(runnable)}] {what}")
                bar.done()
                continue
            bar.start(what)
            t0 = time.monotonic()
            code = run_step(s, bar)
            took = time.monotonic() - t0
            (done if code == 0 else failed).append(s.name)
            bar.done(f"{s.name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {clock(took)}")
            if code == 0:  # a failed step's time says nothing about how long the step takes
                try:
                    record(args.out, s, took, loadavg, command)
                except SystemExit as exc:  # the code changed under the campaign: write_result says what
                    bar.print(f"campaign.py: {s.name}'s time not recorded: {exc}", stream=sys.stderr)
            if code and not args.keep_going:
                break
    if not args.dry_run and not args.no_tables and done:
        subprocess.run([sys.executable, "tools/tables.py"], cwd=ROOT, check=False)
    if failed:
        print(f"campaign.py: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
