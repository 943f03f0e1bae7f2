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
whose result files say "dirty".  After each step that succeeded, its wall seconds, the CPU seconds its
processes used, the load average before it, the machine's CPUs and the commit are merged into
benchmarks/results/campaign.json (--out; a re-run replaces that step's entry and keeps the others'),
written as every result is (`hina.provenance.write_result`): docs/reproduce.md quotes those times.
--dry-run and --list write nothing.

The steps are a table, `STEPS`: each row a step's name, its group, its result file, its command and
what it measures; a family of steps (the calibrations, the trees, the validation runs) is one row over
its parameters, which tools/reproduce.py and tools/tables.py read too.

Exit status: 0 when every step that ran succeeded, 1 when one failed (the rest still run with
--keep-going), 2 on a bad argument or a checkout with uncommitted code.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
import resource
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
    """One step: its name, its group (what it needs: `GROUPS`), the script and its arguments (run with this
    Python from the checkout's root), what it measures, and the result files it writes."""

    name: str
    group: str
    args: tuple[str, ...]
    what: str
    outputs: tuple[str, ...] = ()

    @classmethod
    def row(cls, name: str, group: str, result: str, command: str, what: str) -> Step:
        """A row of `STEPS`: the result file under benchmarks/results/, the command as one line (split as a shell
        splits it)."""
        return cls(name, group, tuple(shlex.split(command)), what, (f"{R}/{result}",))

    def command(self) -> list[str]:
        return [sys.executable, *self.args]


# the 8-worker and 4-worker stars and the tree: where dense aggregation stays network-bound
# (the top of each search: above what its machine keeps network-bound, 4 workers past 1 Gbit/s)
CALIBRATIONS = (("calibrate-star-8w", "--workers 8 --bw 1000"), ("calibrate-star-4w", "--workers 4 --bw 3000"),
                ("calibrate-leafspine214-8w", "--topology leafspine:2,1,4 --oversubscription 4 --bw 1000"),
                # the same star and tree through the XDP switch (its frames at most 3,506 bytes)
                ("calibrate-star-8w-xdp", "--switch xdp --workers 8 --bw 3000"),
                ("calibrate-leafspine214-8w-xdp", "--switch xdp --topology leafspine:2,1,4 --oversubscription 4 "
                 "--bw 2000"))
# the link rates the comparisons run at, from those calibrations (docs/fidelity.md says why these): about half the
# highest rate at which dense aggregation stayed network-bound (benchmarks/results/calibrate/: the 8-worker star
# 487-562 Mbit/s over two runs, the 4-worker star 1471 at most a third, the 4:1 leaf/spine tree 487)
STAR_MBPS, STAR4_MBPS, TREE_MBPS = "250", "500", "200"
# the same comparison through the XDP switch, at about half the rate its 8-worker star held network-bound (721)
XDP_STAR_MBPS = "350"
# the rate no calibration chose: the cross-traffic runs' and the one-shot comparison's (the scale model's
# validation runs have theirs below)
CROSS_MBPS = "100"
# the scale model's validation: 4 and 8 workers, uniform and DeepLight-shaped, at two rates each
VALIDATION = tuple((f"star-{n}w-{bw}-{kind}", n, bw, data)
                   for n in (4, 8) for bw in (100, 50)
                   for kind, data in (("uniform", "--length 16777216 --density 0.01"),
                                      ("deeplight", "--workload deeplight --scale 0.02")))
TREE = "--topology leafspine:2,1,4 --oversubscription 4"
# every mode through emulator trees: the 4:1 tree without and with loss on every link, two spines
EXACT_TREES = (("exact-leafspine214", TREE), ("exact-leafspine214-loss1", f"{TREE} --loss 1"),
               ("exact-leafspine422-loss1", "--topology leafspine:4,2,2 --oversubscription 2 --loss 1"))
# the same tree with hina's leaves summing their racks, then plain leaves (the spine sums alone)
LEAVES = (("lstm", "0.01"), ("deeplight", "0.007"))
# BMv2 in trees: BMv2 everywhere, mixed both ways, the spine alone, two spines; 1% loss on every link
BMV2_TREES = (("bmv2-leafspine214", f"{TREE} --switch bmv2"),
              ("bmv2-leaves-emulator-spine", f"{TREE} --switch bmv2 --spine-switch emulator"),
              ("emulator-leaves-bmv2-spine", f"{TREE} --switch emulator --spine-switch bmv2"),
              ("bmv2-spine-plain-leaves", f"{TREE} --switch bmv2 --leaves plain"),
              ("bmv2-leafspine422", "--switch bmv2 --topology leafspine:4,2,2 --oversubscription 2"))
# ranks per host: 8 workers as 2 hosts of 4 ranks and as 8 hosts, through the emulator and BMv2
RANKS = (("emulator-2x4", "mininet", "--ranks-per-host 4 --length 4000000"),
         ("emulator-8x1", "mininet", "--ranks-per-host 1 --length 4000000"),
         ("bmv2-2x4", "bmv2", "--switch bmv2 --mtu 172 --ranks-per-host 4 --length 200000"),
         ("bmv2-8x1", "bmv2", "--switch bmv2 --mtu 172 --ranks-per-host 1 --length 200000"))
# the codec on one backend at one length: the accelerator path's CPU reference beside numba
CODEC = (("numba-2e22", "numba", "4194304", "codec_bench_numba_2e22"),
         ("torch-cpu-2e22", "torch --device cpu", "4194304", "codec_bench_torch_cpu"),
         ("numba-2e25", "numba", "33554432", "codec_bench_numba_2e25"),
         ("torch-cpu-2e25", "torch --device cpu", "33554432", "codec_bench_torch_cpu_2e25"))
# time to accuracy (docs/ddp.md): to the target at 4 ranks, then per step with buckets, dense gradients, 8 ranks;
# each on the star calibrated for its ranks
EXACT = "--systems hina,hina-dense,gloo --target 1"
TTA_RUNS = (("4", "every system trained to the target held-out loss and on to the budget, three seeds",
             f"--bw {STAR4_MBPS} --workers 4 --target 4.25 --steps 300 --keep-going --seeds 0 1 2"),
            ("4_buckets", "per step with several DDP buckets",
             f"--bw {STAR4_MBPS} --workers 4 {EXACT} --bucket-mb 4 --steps 30 --eval-every 30"),
            ("4_dense_model", "per step on a model with dense gradients",
             f"--bw {STAR4_MBPS} --workers 4 {EXACT} --vocab 2000 --samples 0 --steps 30 --eval-every 30"),
            ("8_per_iteration", "per step at 8 ranks",
             f"--bw {STAR_MBPS} --workers 8 {EXACT} --steps 20 --eval-every 20"),
            # through the XDP switch: 4 ranks at the same rate, 8 ranks at the rate its star holds
            ("4_xdp", "per step through the XDP switch",
             f"--bw {STAR4_MBPS} --workers 4 --switch xdp {EXACT} --steps 30 --eval-every 30"),
            ("8_xdp", "per step at 8 ranks through the XDP switch",
             f"--bw {XDP_STAR_MBPS} --workers 8 --switch xdp {EXACT} --steps 20 --eval-every 20"))

RUN, COMPARE, SCALE, NS3, TTA = ("mininet/run.py", "benchmarks/compare.py", "benchmarks/scale_model.py",
                                 "benchmarks/ns3_scale.py", "benchmarks/time_to_accuracy.py")
STAR = f"--workers 8 --rounds 2 --bws {STAR_MBPS} --loopback off --out {R}"
SHARE = "hina's share of a link beside an iperf3 flow, 30 to 200 Mbit/s"
SIMTEST = "benchmarks/simtest.py"
SIMTEST_CI = "--runs 24 --seed 7"  # the small campaign tests/sim/test_simtest.py runs in the fast lane

# Every step, in the order the campaign runs them: name, group, result file (under benchmarks/results/), command
# (a script of this checkout and its arguments; --out puts the result where the table says), what it measures.
STEPS: tuple[Step, ...] = (
    *(Step.row(name, "mininet", f"calibrate/{name}.json", f"{RUN} --calibrate {flags} --rounds 2 --calibrate-steps 5 "
               f"--out {R}/calibrate --name {name}", "--calibrate: the highest rate at which dense aggregation is "
               "network-bound") for name, flags in CALIBRATIONS),
    Step.row("budget", "mininet", "budget.json", f"benchmarks/budget.py --switches emulator xdp --out {R}/budget.json",
             "where the CPU goes per megabyte on the 8-worker star, the emulator's two data paths and the XDP "
             "switch's, beside the kernel alone"),
    Step.row("compare-faithful", "mininet", "compare_faithful.json", f"{COMPARE} {STAR} --name compare_faithful",
             "every system and preset on the 8-worker star at a calibrated rate"),
    Step.row("compare-xdp", "mininet", "compare_xdp.json", f"{COMPARE} --workers 8 --rounds 2 --bws {XDP_STAR_MBPS} "
             f"--loopback off --switch xdp --out {R} --name compare_xdp",
             "every system and preset on the 8-worker star through the XDP switch, at the rate it holds"),
    Step.row("compare-straggler", "mininet", "compare_straggler.json", f"{COMPARE} --presets lstm deeplight {STAR} "
             "--straggler rank7:+50% --compute 1000 --name compare_straggler",
             "LSTM and DeepLight with rank 7 starting 50% of a 1 s step late"),
    Step.row("compare-cross", "mininet", "compare_cross.json", f"{COMPARE} --presets lstm deeplight {STAR} "
             "--cross '1>0' --name compare_cross", "LSTM and DeepLight beside an iperf3 flow from rank 1 to rank 0"),
    Step.row("slowdown-straggler", "loopback", "slowdown_straggler.json", f"benchmarks/slowdown.py "
             f"{R}/compare_faithful.json {R}/compare_straggler.json --out {R}/slowdown_straggler.md",
             "each system's slowdown under the straggler"),
    Step.row("slowdown-cross", "loopback", "slowdown_cross.json", f"benchmarks/slowdown.py {R}/compare_faithful.json "
             f"{R}/compare_cross.json --out {R}/slowdown_cross.md", "each system's slowdown beside the flow"),
    Step.row("cross-traffic", "mininet", "cross_traffic.json", f"benchmarks/cross_traffic.py --workers 4 --bw "
             f"{CROSS_MBPS} --length 4000000 --rounds 2 --out {R}/cross_traffic.json",
             "hina's congestion windows alone and beside an iperf3 flow"),
    *(Step.row(f"cross-traffic-{name.replace('_', '-')}", "mininet", f"cross_traffic/{name}.json",
               f"benchmarks/cross_traffic.py --workers 4 --bws 30 60 100 200 {flags} "
               f"--out {R}/cross_traffic/{name}.json", SHARE)
      for name, flags in (("fair", ""), ("fair_cap", "--cap 50%"), ("delay", "--delay-rule"),
                          ("delay_cap", "--delay-rule --cap 50%"))),
    Step.row("compare", "mininet", "compare.json", f"{COMPARE} --workers 8 --rounds 1 --bws {CROSS_MBPS} 1000 10000 "
             f"--out {R}", "one-shot aggregations of every system and preset: loopback, and the 8-worker star at "
             "100 Mbit/s, 1 and 10 Gbit/s"),
    *(Step.row(name, "mininet", f"trees/{name}.json", f"{RUN} {flags} --mode all --bw {TREE_MBPS} --rounds 2 "
               f"--out {R}/trees --name {name}", "every mode through an emulator tree, against numpy")
      for name, flags in EXACT_TREES),
    Step.row("tree-compare", "mininet", "trees/tree-compare.json", f"{COMPARE} {TREE} --bws {TREE_MBPS} --rounds 2 "
             f"--loopback off --out {R}/trees --name tree-compare",
             "every system and preset on the 4:1 leaf/spine tree"),
    *(Step.row(f"leaves-{preset}-{leaves}", "mininet", f"trees/leaves-{preset}-{leaves}.json", f"{RUN} {TREE} "
               f"--leaves {leaves} --mode both --bw {TREE_MBPS} --rounds 2 --workload {preset} --scale {scale} "
               f"--out {R}/trees --name leaves-{preset}-{leaves}", "leaves summing their rack, or the spine alone")
      for preset, scale in LEAVES for leaves in ("hina", "plain")),
    *(Step.row(f"validate-{name}", "mininet", f"validation/{name}.json", f"{RUN} --switch emulator --mode both "
               f"--workers {n} --bw {bw} --rounds 2 {data} --out {R}/validation --name {name}",
               "a star run the scale model is checked against") for name, n, bw, data in VALIDATION),
    Step.row("scale-model", "model", "scale_model.json", f"{SCALE} --validate "
             + " ".join(f"{R}/validation/{name}.json" for name, *_ in VALIDATION) + f" --out {R}/scale_model.json",
             "validation against the runs above, then the projection to 1,024 workers"),
    *(Step.row(f"scale-model-k32-w{w}", "model", f"scale_model_k32_w{w}.json", f"{SCALE} --presets deeplight vgg19 "
               f"--workers 1024 --gbps 100 --topologies tree2 --mtu 172 --slots {w} "
               f"--out {R}/scale_model_k32_w{w}.json", f"K = 32 words, {w:,} slots") for w in (64, 1024)),
    Step.row("ns3", "model", "ns3_scale.json", f"{NS3} --out {R}/ns3_scale.json", "hina on ns-3 beside the scale "
             "model: star, leaf/spine and fat tree, 8 to 1,024 workers, DeepLight and LSTM, every mode"),
    Step.row("ns3-10g", "model", "ns3_10g.json", f"{NS3} --gbps 10 --fabrics leaf_spine,fat_tree --presets deeplight "
             f"--out {R}/ns3_10g.json", "hina on ns-3 beside the scale model at 10 Gbit/s: leaf/spine and fat tree, "
             "8 to 1,024 workers, DeepLight, every mode"),
    Step.row("ns3-full", "model", "ns3_full.json", f"{NS3} --workers 1024 --fabrics leaf_spine --presets deeplight "
             f"--modes auto --cap 0 --out {R}/ns3_full.json", "DeepLight at 1,024 workers on ns-3, every chunk of "
             "every round"),
    Step.row("ns3-every-chunk", "model", "ns3_every_chunk.json", f"{NS3} --workers 8 --fabrics leaf_spine --rack 4 "
             f"--spines 2 --cap 0 --out {R}/ns3_every_chunk.json", "every mode at 8 workers on ns-3, every chunk of "
             "every round"),
    Step.row("ns3-uplink50", "model", "ns3_uplink50.json", f"{NS3} --workers 32,64,128 --fabrics leaf_spine "
             "--presets deeplight --modes auto --spines 1 --uplink-gbps 50 --queue 32 --cap 0 "
             f"--out {R}/ns3_uplink50.json", "racks of 32 under one 50 Gbit/s uplink whose ports queue 32 packets, "
             "every chunk on ns-3 and the scale model"),
    Step.row("ns3-shallow", "model", "ns3_shallow.json", f"{NS3} --workers 32,64,128,256 --fabrics leaf_spine "
             "--presets deeplight --modes auto --spines 2 --uplink-gbps 25 --queue 16 --cap 0 "
             f"--out {R}/ns3_shallow.json", "an oversubscribed leaf/spine whose ports queue 16 packets, every chunk "
             "on ns-3 and the scale model"),
    Step.row("simtest", "model", "simtest.json", f"{SIMTEST} --runs 2000 --seed 1 --out {R}/simtest.json",
             "the simulation campaign: 2,000 scenarios on ns-3 (loss, stragglers, a killed worker, a restarted switch, "
             "jobs at once), every sum and every time bound checked"),
    Step.row("simtest-ci", "model", "simtest_ci.json", f"{SIMTEST} {SIMTEST_CI} --out {R}/simtest_ci.json",
             "the simulation campaign at CI's size: the scenarios tests/sim/test_simtest.py runs"),
    Step.row("contest-model", "model", "contest_model.json", f"benchmarks/contest_model.py --out "
             f"{R}/contest_model.json", "hina's window beside a Reno flow on a virtual clock"),
    Step.row("loss-model", "model", "loss_model.json", f"benchmarks/loss_model.py --out {R}/loss_model.json",
             "the sender's recovery under loss on a virtual clock"),
    *(Step.row(f"ranks-{name}", group, f"ranks/{name}.json", f"{RUN} --workers 8 {flags} --mode all --bw {STAR_MBPS} "
               f"--density 0.01 --rounds 2 --out {R}/ranks --name {name}", "8 workers as hosts of ranks, each at a "
               "UDP port of its own") for name, group, flags in RANKS),
    Step.row("deploy", "mininet", "deploy.json", f"mininet/deploy.py --ranks 4 --bw {STAR_MBPS} --steps 10 "
             f"--out {R}/deploy.json", "the cluster guide's commands: 2 machines x 4 ranks, the switch on a third, "
             "standalone workers and multi-node torchrun against gloo"),
    Step.row("side-by-side", "mininet", "side_by_side.json", f"benchmarks/side_by_side.py --bw {STAR_MBPS} "
             f"--out {R}/side_by_side.json", "two experiments at once on one machine"),
    Step.row("tenants", "bmv2", "tenants.json", f"benchmarks/tenants.py --jobs 2 4 8 --full --star emulator bmv2 "
             f"--out {R}/tenants.json", "2, 4 and 8 jobs at once through one switch, a job meeting a full switch, "
             "and two jobs through the emulator's and BMv2's star"),
    Step.row("churn-model", "model", "churn_model.json", f"benchmarks/churn_model.py --out {R}/churn_model.json",
             "an hour of jobs arriving at and leaving one switch on a virtual clock"),
    Step.row("lease", "loopback", "lease.json", f"benchmarks/lease.py --lease 5 --out {R}/lease.json",
             "a dead job's slots freed by the lease, a new job exact on them"),
    *(Step.row(f"tree-{name}", "bmv2", f"trees/bmv2/{name}.json", f"{RUN} {flags} --mode all --bw {TREE_MBPS} "
               f"--loss 1 --length 50000 --density 0.01 --rounds 1 --out {R}/trees/bmv2 --name {name}",
               "every mode through a BMv2 or mixed tree, 1% loss on every link") for name, flags in BMV2_TREES),
    Step.row("switch-bench", "bmv2", "switch_bench.json", f"benchmarks/switch_bench.py --out {R}", "the emulator at "
             "1, 2 and 4 pipes and BMv2 (as built and -O3) in one 32-word star, 1% loss"),
    Step.row("switch-bench-lossless", "bmv2", "switch_bench_lossless/switch_bench.json", "benchmarks/switch_bench.py "
             f"--pipes 1 --loss 0 --out {R}/switch_bench_lossless", "the one-pipe emulator and BMv2 (as built and -O3) "
             "in the same star without loss"),
    Step.row("codec-bench", "loopback", "codec_bench.json", f"benchmarks/codec_bench.py --out {R}/codec_bench.json",
             "the codec's encode and decode against a memory copy, bytes against the bound"),
    *(Step.row(f"codec-bench-{name}", "loopback", f"{file}.json", f"benchmarks/codec_bench.py --backend {backend} "
               f"--lengths {length} --densities 0.001 0.01 0.05 --workers 8 --presets --out {R}/{file}.json",
               f"the {name.rsplit('-', 1)[0]} codec at d = {length}, the accelerator path's CPU reference")
      for name, backend, length, file in CODEC),
    Step.row("capture-torch", "loopback", "capture_torch.json", f"benchmarks/capture_torch.py --aggregate "
             f"--out {R}/capture_torch.json", "real gradients of small PyTorch models against the generators' "
             "densities, summed exact"),
    Step.row("first-run", "loopback", "first_run.json", f"benchmarks/first_run.py --out {R}/first_run.json",
             "a fresh clone's make install and make demo, a wheel's first demo alone and beside two CPU-bound "
             "processes (needs pip's registry)"),
    Step.row("demo", "loopback", "demo.json", f"benchmarks/demo_result.py --out {R}/demo.json", "README's main job"),
    Step.row("sender-bench", "loopback", "sender_bench.json", f"benchmarks/sender_bench.py --out {R}/sender_bench.json",
             "the sender's own cost per chunk"),
    Step.row("reliability", "loopback", "reliability_bench.json", "benchmarks/reliability_bench.py "
             f"--out {R}/reliability_bench.json", "seconds and overhead against the drop rate"),
    Step.row("soak", "loopback", "soak.json", f"benchmarks/soak.py --seconds 60 --out {R}/soak.json",
             "a minute of impaired rounds, memory flat"),
    Step.row("fuzz", "loopback", "fuzz_bench.json", f"benchmarks/fuzz_bench.py --frames 2000000 "
             f"--out {R}/fuzz_bench.json", "2,000,000 hostile frames"),
    Step.row("emulator-bench", "loopback", "emulator_bench.json", "benchmarks/emulator_bench.py "
             f"--out {R}/emulator_bench.json", "the switch's packet rate against an echo server"),
    Step.row("train-ddp", "loopback", "train_ddp.json", f"benchmarks/train_ddp.py --workers 4 8 --steps 10 "
             f"--out {R}/train_ddp.json", "DDP training steps through hina against gloo's allreduce"),
    Step.row("train-ddp-mininet", "mininet", "train_ddp_mininet.json", "benchmarks/train_ddp.py --workers 4 8 "
             f"--steps 10 --env mininet --out {R}/train_ddp_mininet.json", "the same on a star of shaped links"),
    Step.row("tta-curve", "loopback", "time_to_accuracy/loopback_gloo_curve.json", f"{TTA} --workers 4 --systems gloo "
             f"--steps 400 --target 1 --out {R}/time_to_accuracy/loopback_gloo_curve.json",
             "gloo's held-out loss curve, where the default target comes from"),
    *(Step.row(f"tta-{name}", "mininet", f"time_to_accuracy/mininet_{name}.json", f"{TTA} --env mininet {flags} "
               f"--out {R}/time_to_accuracy/mininet_{name}.json", what) for name, what, flags in TTA_RUNS),
)


def steps() -> list[Step]:
    """Every step, in the campaign's order (`STEPS`)."""
    return list(STEPS)


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


def children_cpu() -> float:
    """CPU seconds (user and system) of every child process this one has waited for: a step's processes, once
    it has ended (a step's own children count when it waited for them)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def record(path: Path, step: Step, seconds: float, load: list[float], command: str, cpu: float | None = None) -> None:
    """Merge one step's wall seconds, the CPU seconds its processes used, the load average before it, this
    machine's CPUs and the commit into the timings file (the other steps' entries kept), written by
    `provenance.write_result` like every result.  Load stretches the wall seconds of a step that computes
    (others hold the cores), not its CPU seconds: docs/reproduce.md reads both."""
    try:
        steps = dict(json.loads(path.read_text()).get("steps") or {})
    except (OSError, ValueError, AttributeError):
        steps = {}
    head, dirty = provenance.commit()
    steps[step.name] = {"group": step.group, "seconds": round(seconds, 1),
                        **({"cpu_seconds": round(cpu, 1)} if cpu is not None else {}), "cpus": os.cpu_count(),
                        "load_before": [round(x, 2) for x in load], "commit": head, "dirty": dirty,
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
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
        args.chosen = select(steps(), args.only, args.skip, args.start)
    except ValueError as exc:
        ap.error(str(exc))
    return args


def list_steps(chosen: list[Step]) -> None:
    for s in chosen:
        why = unavailable(s.group)
        print(f"{s.name:<30} {s.group:<9} {s.what}" + (f"  [skipped here: {why}]" if why else ""))
        print(f"{'':<30} {shlex.join(['python', *s.args])}")


def runnable_here(chosen: list[Step], only: list[str]) -> list[Step]:
    """The chosen steps this machine can run; the others are skipped with the reason, unless --only named
    them (or their group): then a ValueError says why."""
    runnable = []
    for s in chosen:
        why = unavailable(s.group)
        if why is None:
            runnable.append(s)
        elif s.name in only or s.group in only:
            raise ValueError(f"{s.name}: {why}")
        else:
            print(f"skip {s.name}: {why}", file=sys.stderr)
    return runnable


def run_all(runnable: list[Step], args: argparse.Namespace, command: str) -> tuple[list[str], list[str]]:
    """Run the steps in order (or print them, --dry-run), recording each one's time as it succeeds; the names
    of those done and those failed."""
    failed, done = [], []
    with Progress(len(runnable), "campaign") as bar:
        for i, s in enumerate(runnable, 1):
            loadavg = list(os.getloadavg())
            what = f"{s.name} ({s.group}, load {', '.join(f'{x:.2f}' for x in loadavg)}): " + \
                shlex.join(["python", *s.args])
            if args.dry_run:
                bar.print(f"[{i}/{len(runnable)}] {what}")
                bar.done()
                continue
            bar.start(what)
            t0, cpu0 = time.monotonic(), children_cpu()
            code = run_step(s, bar)
            took, cpu = time.monotonic() - t0, children_cpu() - cpu0
            (done if code == 0 else failed).append(s.name)
            bar.done(f"{s.name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {clock(took)}")
            if code == 0:  # a failed step's time says nothing about how long the step takes
                try:
                    record(args.out, s, took, loadavg, command, cpu=cpu)
                except SystemExit as exc:  # the code changed under the campaign: write_result says what
                    bar.print(f"campaign.py: {s.name}'s time not recorded: {exc}", stream=sys.stderr)
            if code and not args.keep_going:
                break
    return done, failed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        list_steps(args.chosen)
        return 0
    if args.allow_dirty:
        os.environ[provenance.ALLOW_DIRTY] = "1"  # the steps (children) write their drafts too
    refusal = dirty_start()  # before any step runs, not after each one's set-up
    if refusal and not args.dry_run:
        print(f"campaign.py: {refusal}", file=sys.stderr)
        return 2
    if refusal:
        print(f"campaign.py: (a real run would refuse) {refusal}", file=sys.stderr)
    try:
        runnable = runnable_here(args.chosen, args.only)
    except ValueError as exc:
        print(f"campaign.py: {exc}", file=sys.stderr)
        return 2
    done, failed = run_all(runnable, args, provenance.command_line("tools/campaign.py", argv))
    if not args.dry_run and not args.no_tables and done:
        subprocess.run([sys.executable, "tools/tables.py"], cwd=ROOT, check=False)
    if failed:
        print(f"campaign.py: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
