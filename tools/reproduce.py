"""The project's headline claims, each re-measured here and checked against its committed figures.

    python tools/reproduce.py                          # every claim: statement, needs, time, tolerance
    python tools/reproduce.py demo scale-deeplight     # re-run their campaign steps here and compare
    python tools/reproduce.py --committed-only         # the committed figures and verdicts; nothing runs
    sudo make reproduce CLAIM=tree-lstm                # the same through make (root for the Mininet claims)
    sudo make reproduce CLAIM=tree-lstm QUOTA=100%     # under a CPU quota of one core's time (--cpu-quota)
    sudo .venv/bin/python tools/reproduce.py --switch xdp tree-leaves   # through the XDP switch instead

A claim names the steps of tools/campaign.py that measure it, the result files it reads and an
extractor that pulls its figures from them: ratios measured within one run (hina against dense
in-network aggregation, against gloo, against line rate, against the same run alone) and pass/fail
for exactness, never seconds, which do not travel between machines (the same calibration finds 205
Mbit/s network-bound on one 2-core machine and 115 on another).  Each figure has a tolerance, relative
on the ratio, with the reason for its width.

A re-run runs each step as the campaign does, its --out moved from benchmarks/results/ into a scratch
folder (a fresh one under hina.provenance.default_out(), or --out DIR; never benchmarks/results/,
so no committed figure changes) and every other argument, its inputs included, as it is.  Then, for
each figure: the committed value, the new one, new / committed, both runs' fidelity verdicts, and
whether the new one is within the tolerance.  --switch xdp re-runs a claim's Mininet steps through the
XDP switch wherever they ran the emulator (`switched`), against the same committed figures, which were
measured through the emulator: a claim that holds whatever the switch holds there too.
docs/reproduce.md is this registry as a table (tools/tables.py renders it from here).

Before a re-run, each Mininet claim's link rate (its steps' --bw or --bws, in their experiment) is checked
against the faithful rate this machine holds for that experiment: mininet/run.py's calibration cache, else
one quick calibration per experiment (--calibrate-quick), once, cached.  A claim above it is refused in one
line up front, not reported NOT REPRODUCED after minutes (--force runs it anyway; --recalibrate measures
again).  --cpu-quota runs it all under a CPU quota (tools/cpu_quota.py), as a machine slower per byte would,
its calibrations cached apart.

Exit status: 0 when every figure reproduced, 1 when one did not (or a step failed), 2 on a bad argument or
claim name, a claim this machine cannot run (one line naming what is missing), or a claim refused for its
link rate where nothing else failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import campaign
import cpu_quota
import result_files

from hina import provenance
from hina.baselines import registry
from hina.cliargs import OneLineParser, checked
from hina.progress import Progress, clock_text

ROOT = Path(__file__).resolve().parent.parent
RESULTS = result_files.RESULTS  # the committed figures (tests point this elsewhere)


# -- tolerances: how far a re-run may land and still reproduce a figure, and why ---------------------------

@dataclasses.dataclass(frozen=True)
class Tolerance:
    """What kind of figure, how far a re-run's value may lie from the committed one (relative, on new /
    committed; None: pass/fail, the new value must be yes) and why that width.  `better` "higher" (or
    "lower"): a value beyond the committed one on that side reproduces the claim too."""

    kind: str
    rel: float | None
    why: str
    better: str | None = None

    def __post_init__(self) -> None:
        if self.better not in (None, "higher", "lower"):
            raise ValueError(f"better must be None, 'higher' or 'lower', got {self.better!r}")
        if self.rel is not None and not 0 < self.rel < 1:
            raise ValueError(f"rel must lie in (0, 1), got {self.rel!r}")

    def holds(self, committed: float | bool, new: float | bool) -> bool:
        if self.rel is None:
            return new is True
        if committed == 0:
            return new == 0
        ratio = new / committed
        if self.better == "higher":
            return ratio >= 1 - self.rel
        if self.better == "lower":
            return ratio <= 1 + self.rel
        return abs(ratio - 1) <= self.rel

    def rule(self) -> str:
        if self.rel is None:
            return "pass/fail"
        if self.better == "higher":
            return f"at least {1 - self.rel:.0%} of it"
        if self.better == "lower":
            return f"at most {1 + self.rel:.0%} of it"
        return f"within ±{self.rel:.0%}"

    def text(self) -> str:
        return f"{self.kind}: {self.rule()}"


EXACT = Tolerance("exactness", None, "every worker's sum is numpy's, bit for bit, or it is not: no noise to allow for")
PASS = Tolerance("the check", None, "a failure here is a bug, not noise")
CHOICE = Tolerance("auto's choice", None, "auto chooses from the seeded gradients' statistics alone: the same choice "
                   "on every machine")
MODEL = Tolerance("modelled", 0.01, "a model on a virtual clock from seeded inputs: every machine computes the same "
                  "figures; 1% is float rounding")
PAYLOAD = Tolerance("payload bytes", 0.01, "the codec's payload follows from the seeded gradients alone: the same "
                    "bytes on every machine")
STEP_PAYLOAD = Tolerance("payload bytes per training step", 0.02, "the median step's payload follows from the "
                         "seeded model and data, up to PyTorch's float rounding on another CPU moving a few elements "
                         "of a gradient's support")
WIRE = Tolerance("bytes on the wire", 0.10, "headers and resends included, and resends vary with each run's timing "
                 "and losses")
LINKS = Tolerance("seconds, both network-bound", 0.10, "two runs that the same emulated links set (their verdicts): "
                  "the ratio follows from the bytes each sends; 10% covers TCP's and the queues' variation")
LEAD = Tolerance("hina's lead in seconds", 0.30, "hina's sparse runs take tens of milliseconds and this machine's CPU "
                 "often sets them (their verdicts say so): the ratio moves with the CPU and the load; a larger lead "
                 "reproduces the claim too", better="higher")
TRAINING = Tolerance("hina's lead in training time", 0.25, "dense's and gloo's steps are set by the links, hina's "
                     "partly by this machine's CPU (their verdicts): the ratio moves with the CPU; a larger lead "
                     "reproduces the claim too", better="higher")
LOOPBACK = Tolerance("hina's lead on loopback", 0.30, "on loopback the switch and every worker share the cores: the "
                     "seconds are the CPU's and noisy; a larger lead reproduces the claim too", better="higher")
SWITCHES = Tolerance("one switch's seconds over another's", 0.35, "both switches run on this machine's CPU (BMv2 on a "
                     "full core): their ratio moves with the CPU, its caches and the kernel")
SHARE = Tolerance("share of a link", 0.20, "TCP's share of a contested link varies from run to run; a larger share "
                  "for hina reproduces the claim too", better="higher")
SLOWDOWN = Tolerance("slowdown beside a flow", 0.25, "the flow's TCP dynamics vary from run to run; a smaller "
                     "slowdown reproduces the claim too", better="lower")
MEMORY = Tolerance("memory growth", 0.10, "resident memory at the end over the start; the allocator's rounding "
                   "varies; less growth reproduces the claim too", better="lower")


@dataclasses.dataclass(frozen=True)
class Figure:
    """One figure of a claim: a ratio (`unit` "x", "%" for a share, "" for a plain ratio) or pass/fail, the
    tolerance a re-run is held to, and the fidelity verdicts of the runs it divides."""

    name: str
    value: float | bool
    tolerance: Tolerance
    unit: str = "x"
    verdicts: tuple[str, ...] = ()
    missing: str | None = None  # a re-run's figure its machine could not measure, and why (value then unused)

    def text(self, value: float | bool | None = None) -> str:
        v = self.value if value is None else value
        if isinstance(v, bool):
            return "yes" if v else "NO"
        if self.unit == "%":
            return f"{v:.1%}"
        return (f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 100 else f"{v:.0f}") + self.unit


@dataclasses.dataclass(frozen=True)
class Claim:
    """A headline claim: its statement in words (no figures: those come from the results), the campaign steps
    that measure it, the result files it reads (relative to benchmarks/results/), the extractor that pulls its
    figures from them (file name -> parsed JSON), what it needs beyond what its steps' groups need, and the
    page that shows it."""

    name: str
    statement: str
    steps: tuple[str, ...]
    files: tuple[str, ...]
    extract: Callable[[dict[str, dict]], list[Figure]]
    needs: tuple[str, ...] = ()
    page: str = ""


# -- extractors --------------------------------------------------------------------------------------------

def verdict(label: str, row: dict) -> str:
    return f"{label} {result_files.short_verdict(row)}"


def compare_rows(data: dict) -> dict[tuple[str, str], dict]:
    """compare.py's rows on the emulated network (not its loopback rows), by (preset, mode)."""
    return {(r["preset"], r["mode"]): r for r in data["rows"] if not r["env"].startswith("loopback")}


def fastest_lossless(rows: dict[tuple[str, str], dict], preset: str) -> dict:
    return min((r for (p, m), r in rows.items()
                if p == preset and r.get("system") == "baseline" and not registry.lossy(m)), key=lambda r: r["seconds"])


FAITHFUL = "compare_faithful.json"
TREE_COMPARE = "trees/tree-compare.json"


def sparse_lead(preset: str) -> Callable[[dict[str, dict]], list[Figure]]:
    """hina auto against dense INA and the fastest lossless baseline on a sparse preset, 8-worker star."""
    def extract(results: dict[str, dict]) -> list[Figure]:
        rows = compare_rows(results[FAITHFUL])
        auto, dense = rows[preset, "auto"], rows[preset, "dense"]
        best = fastest_lossless(rows, preset)
        return [Figure("hina auto over dense INA, seconds", dense["seconds"] / auto["seconds"], LEAD,
                       verdicts=(verdict("auto", auto), verdict("dense", dense))),
                Figure("hina auto over the fastest lossless baseline, seconds", best["seconds"] / auto["seconds"], LEAD,
                       verdicts=(verdict("auto", auto), verdict(dict(result_files.systems())[best["mode"]], best))),
                Figure("dense INA's payload over hina auto's", dense["payload_bytes_per_worker"]
                       / auto["payload_bytes_per_worker"], PAYLOAD),
                Figure("hina auto exact", auto["exact"] is True, EXACT)]
    return extract


DENSE_PRESETS = ("ncf", "bert_base", "vgg19")


def auto_on_dense(results: dict[str, dict]) -> list[Figure]:
    rows = compare_rows(results[FAITHFUL])
    out = []
    for p in DENSE_PRESETS:
        auto, dense = rows[p, "auto"], rows[p, "dense"]
        out += [Figure(f"{p}: hina auto ran dense", auto.get("encoding") == "dense", CHOICE),
                Figure(f"{p}: hina auto's seconds over dense INA's", auto["seconds"] / dense["seconds"], LINKS,
                       verdicts=(verdict("auto", auto), verdict("dense", dense)))]
    return out


def dense_over_ring(results: dict[str, dict]) -> list[Figure]:
    rows = compare_rows(results[FAITHFUL])
    return [Figure(f"{p}: dense INA over gloo's ring, seconds",
                   rows[p, "ring"]["seconds"] / rows[p, "dense"]["seconds"], LINKS,
                   verdicts=(verdict("dense", rows[p, "dense"]), verdict("ring", rows[p, "ring"])))
            for p in result_files.PRESETS if (p, "ring") in rows]


TTA = "time_to_accuracy/mininet_4.json"


def tta_figures(results: dict[str, dict]) -> list[Figure]:
    """The 4-rank run to the target, as README's headline reads it (benchmarks/time_to_accuracy.py's `runs_of` and
    `spread`): the mean over the seeds, at the interpolated crossing where the result has it."""
    from hina.benchmarks import time_to_accuracy as tta

    data = results[TTA]
    runs = tta.runs_of(data)
    by = data.get("spread") or tta.spread(runs)
    key = "seconds_to_target_interp" if by["hina"].get("seconds_to_target_interp") else "seconds_to_target"
    first = {r["system"]: r for r in runs[0]["table"]}
    exact = ("hina", "hina-dense", "gloo")
    # per seed: hina and dense INA apply the same sums, so they cross in the same step (gloo's float sums may not)
    same = all(len({r["steps_to_target"] for r in run["table"] if r["system"] in ("hina", "hina-dense")}) == 1
               for run in runs)

    def sooner(other: str) -> Figure:
        return Figure(f"reached the target: {LABEL_TTA[other]}'s seconds over hina's",
                      by[other][key]["mean"] / by["hina"][key]["mean"], TRAINING,
                      verdicts=(verdict("hina", first["hina"]), verdict(LABEL_TTA[other], first[other])))

    return [sooner("hina-dense"), sooner("gloo"),
            Figure("payload bytes per step: dense INA's over hina's", by["hina-dense"]["bytes_per_step"]["mean"]
                   / by["hina"]["bytes_per_step"]["mean"], STEP_PAYLOAD),
            Figure("every exact system reached the target, hina in dense INA's steps on every seed",
                   all(by[s]["reached"] == len(runs) for s in exact) and same, PASS),
            Figure("hina's parameters identical to dense INA's after every step",
                   all(run["exactness"]["hina_vs_dense"]["identical_every_step"] is True for run in runs), EXACT)]


LABEL_TTA = {"hina-dense": "dense INA", "gloo": "gloo"}


def tree_lead(preset: str) -> Callable[[dict[str, dict]], list[Figure]]:
    """hina auto against dense INA, and the ring's uplink bytes against auto's, on the 4:1 leaf/spine tree."""
    def extract(results: dict[str, dict]) -> list[Figure]:
        rows = compare_rows(results[TREE_COMPARE])
        auto, dense, ring = rows[preset, "auto"], rows[preset, "dense"], rows[preset, "ring"]
        return [Figure("hina auto over dense INA, seconds", dense["seconds"] / auto["seconds"], LEAD,
                       verdicts=(verdict("auto", auto), verdict("dense", dense))),
                Figure("gloo's ring's uplink bytes over hina auto's", ring["uplink_bytes_per_aggregation"]
                       / auto["uplink_bytes_per_aggregation"], WIRE),
                Figure("hina auto exact", auto["exact"] is True, EXACT)]
    return extract


def leaves_figures(results: dict[str, dict]) -> list[Figure]:
    def up(run: dict) -> float:
        return sum(v["up"] for v in run["uplinks"].values())

    out, exact = [], []
    for preset, (summed, plain) in result_files.LEAVES_RUNS.items():
        for a, b in zip(results[summed]["runs"], results[plain]["runs"]):
            mode = a["mode"]
            out += [Figure(f"{preset} {mode}: uplink bytes up, spine only over leaves summing", up(b) / up(a), WIRE),
                    Figure(f"{preset} {mode}: seconds, spine only over leaves summing", b["seconds"] / a["seconds"],
                           LINKS if mode == "dense" else LEAD,
                           verdicts=(verdict("leaves summing", a), verdict("spine only", b)))]
            exact += [a["exact"], b["exact"]]
    return [*out, Figure("every run exact", all(x is True for x in exact), EXACT)]


def exact_trees(names: Iterable[str], folder: str) -> Callable[[dict[str, dict]], list[Figure]]:
    names = tuple(names)

    def extract(results: dict[str, dict]) -> list[Figure]:
        return [Figure(f"{name}: every mode exact", all(r["exact"] is True for r in results[f"{folder}/{name}.json"]
                                                         ["runs"]), EXACT) for name in names]
    return extract


def switch_figures(results: dict[str, dict]) -> list[Figure]:
    """Each BMv2 build's and the XDP switch's best round over the one-pipe emulator's, per mode (the XDP switch's
    where the result has it: benchmarks/switch_bench.py runs it where it loads)."""
    data = results["switch_bench.json"]
    rows = data["rows"]
    out = []
    for switch, build, key, label, why in (("bmv2", "default", "bmv2", "BMv2", "bmv2_missing"),
                                           ("bmv2", "fast", "fast", "BMv2 -O3", "fast_bmv2_missing"),
                                           ("xdp", "default", "xdp", "XDP", "xdp_missing")):
        other = {r["mode"]: r for r in rows if (r["switch"], r.get("build") or "default") == (switch, build)}
        ones = [r for r in rows if r["switch"] == "emulator" and r["pipes"] == 1]
        if data.get(why):  # switch_bench.py could not run it on that machine, and said why
            out += [Figure(f"{r['mode']}: {label}'s best round over the one-pipe emulator's", False, SWITCHES,
                           missing=data[why]) for r in ones]
            continue
        out += [Figure(f"{r['mode']}: {label}'s best round over the one-pipe emulator's", r[f"{key}_over_best"],
                       SWITCHES, verdicts=(verdict("emulator", r), verdict(label, other[r["mode"]])))
                for r in ones if r.get(f"{key}_over_best")]
    return [*out, Figure("every switch and mode exact", all(r["exact"] is True for r in rows), EXACT)]


def scale_figures(results: dict[str, dict]) -> list[Figure]:
    data = results["scale_model.json"]
    rows = [r for r in data["projection"] if r["topology"] == "tree2" and r["gbps"] == 100.0]
    n = max(r["workers"] for r in rows)
    by = {r["preset"]: r for r in rows if r["workers"] == n}
    deep = by["deeplight"]
    nb = data["validation_network_bound"]
    return [Figure("deeplight: hina auto over dense INA", deep["speedup_vs_dense"], MODEL),
            Figure("deeplight: hina auto over the ring", deep["speedup_vs_ring"], MODEL),
            Figure("the dense presets: least hina auto over dense INA",
                   min(r["speedup_vs_dense"] for p, r in by.items() if p != "deeplight"), MODEL),
            Figure("the model within 20% of every network-bound Mininet run it was checked against",
                   nb["runs"] > 0 and nb["within_20pct"] == nb["runs"], PASS)]


def ns3_figures(results: dict[str, dict]) -> list[Figure]:
    data = results["ns3_scale.json"]
    n = max(s["workers"] for s in data["speedups"])
    at = {s["fabric"]: s for s in data["speedups"] if s["preset"] == "deeplight" and s["workers"] == n}
    ls = at["leaf_spine"]
    rows = [r for r in data["rows"] if r["workers"] >= 64]
    return [Figure(f"deeplight, {n} workers, leaf/spine: hina auto over dense on ns-3", ls["ns3"], MODEL),
            Figure("that speedup over the scale model's", ls["ns3"] / ls["model"], MODEL, unit=""),
            Figure("ns-3 within 15% of the scale model at every point from 64 workers", bool(rows) and all(
                abs(r["ratio"] - 1) <= 0.15 for r in rows), PASS)]


SHARE_FAIR = ("cross_traffic/fair.json", "cross_traffic/fair_cap.json")


def share_figures(results: dict[str, dict]) -> list[Figure]:
    out, slowdowns, exact = [], [], []
    for name in SHARE_FAIR:
        runs = results[name]["runs"]
        for alone, beside in zip(runs[0::2], runs[1::2]):
            shares = [x["share"] for x in beside["rounds"] if x.get("share") is not None]
            cap = beside.get("cap")
            flow = f"flow capped at {cap:g} Mbit/s" if cap else "flow uncapped"
            out.append(Figure(f"{beside['bw']:g} Mbit/s, {flow}: hina's least share of the contested link",
                              min(shares), SHARE, unit="%", verdicts=(verdict("alone", alone),
                                                                       verdict("beside", beside))))
            slowdowns.append(max(x["seconds"] for x in beside["rounds"]) / min(x["seconds"] for x in alone["rounds"]))
            exact += [alone["exact"], beside["exact"]]
    return [*out, Figure("the slowest round beside the flow over the best alone, worst rate", max(slowdowns), SLOWDOWN),
            Figure("every sum exact", all(x is True for x in exact), EXACT)]


def contest_figures(results: dict[str, dict]) -> list[Figure]:
    rows = {(r["queue"], r["rule"]): r for r in results["contest_model.json"]["rows"]}
    queues = sorted({q for q, _ in rows})
    out = [Figure(f"queue {q}: contested rounds faster than the delay rule alone's",
                  rows[q, "delay rule alone"]["slowdown"] / rows[q, "contested"]["slowdown"], MODEL)
           for q in queues if q >= 128]
    return [*out, *(Figure(f"queue {q}: hina's share of the link, fair-share rules", rows[q, "fair share"]["share"],
                           MODEL, unit="%") for q in queues)]


def demo_figures(results: dict[str, dict]) -> list[Figure]:
    s = results["demo.json"]["summary"]
    return [Figure("every worker exact", s["exact"] is True, EXACT),
            Figure("payload over dense's bytes", s["payload_bytes_per_worker"] / s["dense_bytes_per_worker"], PAYLOAD,
                   unit="%"),
            Figure("bytes on the wire over dense's", s["bytes_per_worker"] / s["dense_bytes_per_worker"], WIRE,
                   unit="%")]


def loopback_figures(results: dict[str, dict]) -> list[Figure]:
    e2e = results["emulator_bench.json"]["end_to_end"]
    by = {(r["density"], r["mode"]): r for r in e2e}
    return [Figure("1% density: hina auto over dense, seconds",
                   by[0.01, "dense"]["seconds"] / by[0.01, "auto"]["seconds"], LOOPBACK),
            Figure("every density and mode exact", all(r["exact"] is True for r in e2e), EXACT)]


def fuzz_figures(results: dict[str, dict]) -> list[Figure]:
    f = results["fuzz_bench.json"]
    return [Figure("no hostile frame made the switch fail", f["failures"] == 0, PASS),
            Figure("the idle job's state untouched", f["victim_changed"] is False, PASS)]


def soak_figures(results: dict[str, dict]) -> list[Figure]:
    s = results["soak.json"]
    rss = s["rss_kib"]
    return [Figure("every round exact", s["all_exact"] is True, EXACT),
            Figure("the switch's memory, end over start", rss["end"]["switch"] / rss["start"]["switch"], MEMORY,
                   unit=""),
            Figure("the largest worker's memory, end over start", max(rss["end"]["workers"])
                   / max(rss["start"]["workers"]), MEMORY, unit="")]


# -- the claims --------------------------------------------------------------------------------------------

STAR = f"8 workers on an emulated {campaign.STAR_MBPS} Mbit/s star (Mininet)"
TREE = f"8 workers on the emulated 4:1 leaf/spine tree at {campaign.TREE_MBPS} Mbit/s (Mininet)"
EXACT_NAMES = tuple(name for name, _ in campaign.EXACT_TREES)
BMV2_NAMES = tuple(name for name, _ in campaign.BMV2_TREES)
LEAVES_STEPS = tuple(f"leaves-{p}-{kind}" for p, _ in campaign.LEAVES for kind in ("hina", "plain"))

# Every claim, in the order docs/reproduce.md lists them: name, statement, campaign steps, result files,
# extractor, and what it needs beyond its steps' groups and the page that shows it.
CLAIMS: dict[str, Claim] = {c.name: c for c in (
    Claim("compare-deeplight", f"DeepLight-shaped gradients, {STAR}: hina auto is exact and faster than dense "
          "in-network aggregation (SwitchML-style) and than the fastest lossless host baseline, at a fraction of "
          "dense's bytes.", ("compare-faithful",), (FAITHFUL,), sparse_lead("deeplight"), page="README.md"),
    Claim("compare-lstm", f"LSTM-shaped gradients, {STAR}: hina auto is exact and faster than dense in-network "
          "aggregation and than the fastest lossless host baseline, at a fraction of dense's bytes.",
          ("compare-faithful",), (FAITHFUL,), sparse_lead("lstm"), page="README.md"),
    Claim("auto-dense-models", f"On the models whose gradients are dense (NCF, BERT-base, VGG19), {STAR}: hina "
          "auto chooses dense and takes what dense in-network aggregation takes.", ("compare-faithful",),
          (FAITHFUL,), auto_on_dense, page="README.md"),
    Claim("dense-vs-ring", f"Dense in-network aggregation is faster than gloo's ring allreduce on every model, "
          f"{STAR}, both set by the links (at 8 workers dense sends 4/7 of the ring's bytes).",
          ("compare-faithful",), (FAITHFUL,), dense_over_ring, page="README.md"),
    Claim("tta", "Training a word-level LSTM to a target held-out loss, 4 ranks on an emulated "
          f"{campaign.STAR4_MBPS} Mbit/s star: hina reaches it sooner than dense in-network aggregation and "
          "gloo, in dense aggregation's steps, with parameters identical to dense aggregation's after every step, "
          "sending fewer bytes.", ("tta-4",), (TTA,),
          tta_figures, needs=("torch", "corpus"), page="docs/ddp.md"),
    Claim("tree-deeplight", f"DeepLight-shaped gradients, {TREE}: hina auto is exact and faster than dense "
          "in-network aggregation, and its uplinks carry a sliver of the ring's bytes.", ("tree-compare",),
          (TREE_COMPARE,), tree_lead("deeplight"), page="README.md"),
    Claim("tree-lstm", f"LSTM-shaped gradients, {TREE}: hina auto is exact and faster than dense in-network "
          "aggregation, and its uplinks carry a fraction of the ring's bytes.", ("tree-compare",),
          (TREE_COMPARE,), tree_lead("lstm"), page="README.md"),
    Claim("tree-leaves", f"{TREE}: hina's leaves summing their racks send one partial up each uplink where "
          "plain leaves under a summing spine forward every worker's copy, and run faster, exact either way.",
          LEAVES_STEPS, tuple(f for pair in result_files.LEAVES_RUNS.values() for f in pair), leaves_figures,
          page="docs/trees.md"),
    Claim("exact-trees", "Every mode is exact through emulator trees: the 4:1 leaf/spine tree without and with 1% "
          "loss on every link, and two spines with 1% loss.", EXACT_NAMES,
          tuple(f"trees/{n}.json" for n in EXACT_NAMES), exact_trees(EXACT_NAMES, "trees"), page="docs/trees.md"),
    Claim("exact-bmv2-trees", "Every mode is exact through BMv2 and mixed BMv2/emulator trees with 1% loss on "
          "every link.", tuple(f"tree-{n}" for n in BMV2_NAMES), tuple(f"trees/bmv2/{n}.json" for n in BMV2_NAMES),
          exact_trees(BMV2_NAMES, "trees/bmv2"), page="docs/trees.md"),
    Claim("switch-vs-bmv2", "In one 32-word star with 1% loss, the one-pipe switch emulator's rounds are far "
          "shorter than BMv2's (simple_switch_grpc, as built and at -O3 without logging), the XDP switch's held "
          "against them where it loads, all exact.",
          ("switch-bench",), ("switch_bench.json",), switch_figures, page="docs/benchmarks.md"),
    Claim("scale-deeplight", "Modelled at 1,024 workers under a 2-tier tree of 100 Gbit/s links: hina auto beats "
          "dense in-network aggregation and the ring on DeepLight and matches dense on the dense presets; the "
          "model agrees within 20% with every network-bound Mininet run it was checked against.",
          ("scale-model",), ("scale_model.json",), scale_figures, page="README.md"),
    Claim("ns3-deeplight", "On ns-3, with every worker's sender and every switch's slot rules on ns-3's links "
          "and queues, at 1,024 workers under a leaf/spine of 100 Gbit/s links: hina auto beats dense in-network "
          "aggregation on DeepLight as the scale model says, and the two simulators agree within 15% at every "
          "fabric, mode and worker count from 64 to 1,024.", ("ns3",), ("ns3_scale.json",), ns3_figures,
          needs=("ns3",), page="docs/ns3.md"),
    Claim("cross-traffic-share", "With the default window (the fair-share rules), beside one iperf3 TCP "
          "flow (uncapped or capped at half the link) on a 4-worker star at 30 to 200 Mbit/s, hina keeps "
          "more than an even share of the contested link, exact.", ("cross-traffic-fair", "cross-traffic-fair-cap"),
          SHARE_FAIR, share_figures, needs=("iperf3",), page="docs/fidelity.md"),
    Claim("contest-model", "On a virtual clock beside a Reno flow, the contested window keeps hina's rounds "
          "several times faster than the delay rule alone behind long queues, and the fair-share rules keep a "
          "large share of the link at every queue.", ("contest-model",), ("contest_model.json",),
          contest_figures, page="docs/fidelity.md"),
    Claim("demo", "README's main job (4 workers, 2^22 elements at 1%, 1% of the switch's packets dropped, on "
          "loopback): every worker exact, at a small fraction of dense's bytes.", ("demo",), ("demo.json",),
          demo_figures, page="README.md"),
    Claim("loopback-auto", "End to end on loopback (4 workers, 2^24 elements): at 1% density hina auto is "
          "several times faster than dense, exact at every density.", ("emulator-bench",),
          ("emulator_bench.json",), loopback_figures, page="docs/benchmarks.md"),
    Claim("fuzz", "2,000,000 random and mutated frames: the switch never fails and an idle job's state is "
          "untouched.", ("fuzz",), ("fuzz_bench.json",), fuzz_figures, page="docs/reliability.md"),
    Claim("soak", "A minute of 8 workers through 5% drop, 1% duplication and 1% reordering: every result exact, "
          "memory flat.", ("soak",), ("soak.json",), soak_figures, page="docs/reliability.md"),
)}


# -- what a claim needs, and whether this machine has it ---------------------------------------------------

GROUP_NEEDS = {"loopback": (), "model": (), "mininet": ("root", "Mininet"), "bmv2": ("root", "Mininet", "BMv2")}


def _corpus() -> str | None:
    from hina.host import corpus

    return corpus.missing()


EXTRA_NEEDS: dict[str, Callable[[], str | None]] = {
    "torch": lambda: None if importlib.util.find_spec("torch") else "needs PyTorch (make install installs it)",
    "corpus": _corpus,
    "iperf3": lambda: None if shutil.which("iperf3") else "needs iperf3 (Debian: apt install iperf3)",
    "ns3": lambda: None if importlib.util.find_spec("ns") else "needs ns-3's Python bindings (make install has them)",
}


def steps_of(claim: Claim) -> list[campaign.Step]:
    by = {s.name: s for s in campaign.steps()}
    return [by[name] for name in claim.steps]


def needs(claim: Claim) -> list[str]:
    """What the claim needs, in words: its steps' groups' (root, Mininet, BMv2), then its own."""
    words = [w for s in steps_of(claim) for w in GROUP_NEEDS[s.group]]
    return list(dict.fromkeys([*words, *claim.needs]))


def missing(claim: Claim) -> list[str]:
    """Why this machine cannot run the claim (campaign.py's reasons for its groups, then its own needs)."""
    why = [campaign.unavailable(g) for g in dict.fromkeys(s.group for s in steps_of(claim))]
    why += [EXTRA_NEEDS[n]() for n in claim.needs]
    return list(dict.fromkeys(w for w in why if w))


# -- the links: whether this machine holds the rate a Mininet claim runs its links at ---------------------------

@dataclasses.dataclass(frozen=True)
class LinkNeed:
    """A link rate one step of a claim runs at (Mbit/s per link), and the experiment it runs it in: a key of
    mininet/run.py's calibration cache (`run.rate_key`: this machine, its CPU quota and the experiment's shape)."""

    step: str
    key: dict
    mbps: float

    def text(self) -> str:
        return f"{self.mbps:g} Mbit/s per link on {mininet_run().key_text(self.key)}"


def mininet_run():
    """mininet/run.py (hina.mininet.run): its calibration and cache; imported where a claim's needs are met."""
    from hina.mininet import run

    return run


def _step_flags() -> argparse.ArgumentParser:
    """The flags by which the Mininet scripts (mininet/run.py, benchmarks/compare.py, cross_traffic.py,
    time_to_accuracy.py) name the experiment a step runs and the rate of its links; the rest are left alone."""
    ap = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for flag, kind, default in (("--workers", int, None), ("--topology", str, "star"),
                                ("--oversubscription", float, 1.0), ("--leaves", str, "hina"),
                                ("--switch", str, "emulator"), ("--spine-switch", str, None), ("--pipes", int, 1),
                                ("--mtu", int, None), ("--ranks-per-host", int, 1), ("--bw", float, None)):
        ap.add_argument(flag, type=kind, default=default)
    ap.add_argument("--bws", type=float, nargs="+")
    return ap


STEP_FLAGS = _step_flags()


def shape(args: list[str] | tuple[str, ...]) -> dict | None:
    """The experiment a command line names (`STEP_FLAGS`) and the highest link rate in it (--bw, --bws; unshaped
    ones left out) as "mbps", or None where it names no rate (its script's default)."""
    flags, _ = STEP_FLAGS.parse_known_args(list(args))
    rates = [r for r in (flags.bws or [flags.bw]) if r]
    if not rates:
        return None
    return {**{k: v for k, v in vars(flags).items() if k not in ("bw", "bws")}, "mbps": max(rates)}


def step_need(step: campaign.Step) -> LinkNeed | None:
    """The experiment a Mininet step runs and the highest link rate it names, or None: not a Mininet step, or
    one that names no rate (as switch_bench.py, whose figures are the switches' CPU)."""
    flags = shape(step.args[1:]) if step.group in ("mininet", "bmv2") else None
    if flags is None:
        return None
    from hina.mininet.hina_net import default_mtu
    from hina.mininet.topo import parse_topology

    fabric = parse_topology(flags["topology"])
    if fabric is None and flags["workers"] is None:
        raise ValueError(f"campaign step {step.name} names a link rate but not its workers (--workers)")
    workers = len(fabric.hosts) if fabric is not None else flags["workers"]
    key = mininet_run().rate_key(workers, flags["topology"], flags["oversubscription"], flags["leaves"],
                                 flags["switch"], flags["spine_switch"], flags["pipes"],
                                 flags["mtu"] or default_mtu(flags["switch"]), flags["ranks_per_host"])
    return LinkNeed(step.name, key, flags["mbps"])


def timed(claim: Claim) -> bool:
    """Whether the claim's figures hold only while the links set the time: some carry the runs' verdicts."""
    return any(f.verdicts for f in committed_figures(claim))


def rate_drift(claim: Claim) -> list[str]:
    """Where a timed claim's committed figures ran at another link rate or experiment than its campaign steps
    run now (read from the command each result file records), one phrase per difference, naming the files: a
    re-run would compare figures of two different experiments.  None once the campaign has measured them again."""
    if not timed(claim):
        return []
    found: dict[str, list[str]] = {}  # what differs -> the files it differs in
    for step in steps_of(claim):
        now = shape(step.args[1:]) if step.group in ("mininet", "bmv2") else None
        for name in [str(Path(o).relative_to(campaign.R)) for o in step.outputs] if now else []:
            command = provenance.meta_of(json.loads((RESULTS / name).read_text()))["command"]
            then = None if command == provenance.NOT_RECORDED else shape(shlex.split(command))
            if name in claim.files and then is not None and then != now:
                what = (f"ran at {then['mbps']:g} Mbit/s per link, its campaign steps now at {now['mbps']:g}"
                        if then["mbps"] != now["mbps"] else "ran another experiment than its campaign steps now ("
                        + ", ".join(f"--{k.replace('_', '-')} {then[k]}, now {now[k]}" for k in now
                                    if then[k] != now[k]) + ")")
                found.setdefault(what, []).append(name)
    return [f"its committed figures {what} ({', '.join(f'benchmarks/results/{n}' for n in names)})"
            for what, names in found.items()]


def link_needs(claim: Claim, switch: str = "emulator") -> list[LinkNeed]:
    """The link rates the claim's figures hold at only while the links, not this machine, set the time: each of
    its Mininet steps that names one, through `switch` as a re-run runs it (`switched`: the XDP switch holds
    other rates than the emulator), where the claim has such figures (those that carry the runs' verdicts);
    none for a claim whose figures hold at any rate (exactness, a check)."""
    if not timed(claim):
        return []
    found = [n for n in (step_need(through(s, switch)) for s in steps_of(claim)) if n is not None]
    return list({(kid(n), n.mbps): n for n in reversed(found)}.values())[::-1]  # each once, as first named


def holds(entry: dict, mbps: float) -> bool | None:
    """Whether a calibration (a cache entry) says this machine holds `mbps` per link, as a run's faithful rate:
    True where dense aggregation was network-bound at mbps / FAITHFUL_SHARE or above, False where it was not at
    that rate or below, None where its search did not come near enough to say."""
    run = mininet_run()
    need = mbps / run.FAITHFUL_SHARE
    highest, not_at = entry.get("highest_network_bound_mbps"), entry.get("not_network_bound_mbps")
    if highest is not None and highest >= need:
        return True
    if not_at is not None and not_at <= need:
        return False
    return None


def held_text(entry: dict) -> str:
    """What a calibration says this machine holds: "121 (half the 243 Mbit/s at which ..., calibrated DATE)"."""
    run = mininet_run()
    load = entry.get("load_before")
    when = (f"calibrated {str(entry.get('date') or 'earlier')[:16].replace('T', ' ')}"
            + (f", load {load[0]:.1f} before it" if load else ""))
    highest, not_at = entry.get("highest_network_bound_mbps"), entry.get("not_network_bound_mbps")
    if highest is None:
        return (f"none (dense aggregation was not network-bound even at {run.low_of(entry):.0f} Mbit/s, {when})")
    above = f", not at {not_at:.0f}" if not_at is not None else ""
    return (f"{entry['faithful_mbps']:g} ({run.FAITHFUL_SHARE:g} x the {highest:.0f} Mbit/s at which dense "
            f"aggregation stayed network-bound{above}; {when})")


def calibration_step(need: LinkNeed, folder: Path) -> campaign.Step:
    """The quick search (mininet/run.py --calibrate-quick) that says whether this machine holds `need`: its top
    is the rate at which dense aggregation must stay network-bound, need.mbps / FAITHFUL_SHARE."""
    run = mininet_run()
    name = "calibrate-" + re.sub(r"[^a-z0-9]+", "-", run.key_text(need.key).lower()).strip("-")
    args = ("mininet/run.py", "--calibrate", "--calibrate-quick", *run.calibrate_flags(need.key),
            "--bw", f"{need.mbps / run.FAITHFUL_SHARE:g}", "--rounds", "2", "--out", str(folder), "--name", name)
    return campaign.Step(name, "mininet", args, f"whether this machine holds {need.text()}")


def calibrate_for(need: LinkNeed, folder: Path, bar: Progress) -> tuple[dict | None, str]:
    """Run `calibration_step` for `need`; the cache's entry it recorded, or None and why not."""
    run = mininet_run()
    step = calibration_step(need, folder)
    bar.start(f"calibrating {run.key_text(need.key)} on this machine, once (cached in {run.cache_path()}): is "
              f"dense aggregation network-bound at {step.args[step.args.index('--bw') + 1]} Mbit/s per link?")
    code = campaign.run_step(step, bar)
    entry = run.cached(need.key)
    why = (f"mininet/run.py --calibrate exited {code}" if code else
           "" if entry else f"the calibration recorded no entry for this experiment in {run.cache_path()}")
    bar.done(f"{step.name}: " + (why or f"this machine holds {held_text(entry)}"))
    return (None, why) if why else (entry, "")


def check_links(chosen: list[Claim], folder: Path, recalibrate: bool = False, calibrate: bool = True,
                switch: str = "emulator") -> dict[str, list[tuple[LinkNeed, bool | None, str]]]:
    """Each chosen claim's link needs (through `switch`), and whether this machine holds each (True, False, or
    None: not known) with the words that say so.  The cache answers where it can; else (and once per experiment with
    `recalibrate`) a quick calibration into `folder` does, highest rate first, unless not `calibrate`."""
    run = mininet_run()
    needs = {c.name: link_needs(c, switch) for c in chosen}
    ordered = sorted({(kid(n), n.mbps): n for ns in needs.values() for n in ns}.values(), key=lambda n: -n.mbps)
    fresh: set[str] = set()  # experiments calibrated here, now
    failed: dict[str, str] = {}  # experiment -> why its calibration failed

    def entry_for(n: LinkNeed) -> dict | None:
        return None if recalibrate and kid(n) not in fresh else run.cached(n.key)

    def open_question(n: LinkNeed) -> bool:
        entry = entry_for(n)
        return kid(n) not in failed and (entry is None or holds(entry, n.mbps) is None)

    todo = [n for n in ordered if open_question(n)]
    if todo and calibrate:
        with Progress(len(todo), "link rates") as bar:
            for n in todo:
                if open_question(n):  # a higher rate's calibration of the same experiment may have answered it
                    entry, why = calibrate_for(n, folder, bar)
                    fresh.add(kid(n))
                    if entry is None:
                        failed[kid(n)] = why
            bar.total = bar.count
    answers = {}
    for n in ordered:
        entry = entry_for(n)
        answers[kid(n), n.mbps] = ((None, f"could not calibrate here ({failed[kid(n)]})") if kid(n) in failed else
                                   (None, "not yet calibrated here") if entry is None else
                                   (holds(entry, n.mbps), f"this machine holds {held_text(entry)}"))
    return {name: [(n, *answers[kid(n), n.mbps]) for n in ns] for name, ns in needs.items()}


def kid(need: LinkNeed) -> str:
    """A need's experiment as a dictionary key."""
    return json.dumps(need.key, sort_keys=True)


def drift_refusal(claim: Claim, drift: list[str], forced: bool = False) -> str:
    """The one line that refuses a claim whose committed figures ran at another rate than its steps run now."""
    return (f"{claim.name}: {'runs anyway (--force)' if forced else 'REFUSED'}: {'; '.join(drift)}: the campaign "
            f"measures it again first (tools/campaign.py --only {' '.join(claim.steps)})")


def refusal(claim: Claim, answers: list[tuple[LinkNeed, bool | None, str]], forced: bool = False) -> str | None:
    """The one line that refuses a claim this machine does not hold (or runs it anyway, `forced`), or None."""
    short = [f"needs {n.text()}; {said}" for n, held, said in answers if held is not True]
    if not short:
        return None
    what = "runs anyway (--force)" if forced else "REFUSED"
    return (f"{claim.name}: {what}: {'; and '.join(dict.fromkeys(short))}; --recalibrate to measure again"
            + ("" if forced else ", --force to run it anyway"))


# -- results: committed, new, and the time each step took -----------------------------------------------

def load_results(claim: Claim, folder: Path) -> dict[str, dict]:
    return {name: json.loads((folder / name).read_text()) for name in claim.files}


def committed_figures(claim: Claim) -> list[Figure]:
    """The committed figures, less any the committed run could not measure."""
    return [f for f in claim.extract(load_results(claim, RESULTS)) if not f.missing]


def timings_file() -> Path:
    """The campaign's record of each step's latest run (tools/campaign.py writes it)."""
    return RESULTS / Path(campaign.TIMINGS).name


def timings() -> dict[str, dict]:
    """Each campaign step's latest recorded run (`timings_file`), or {} before the campaign has run."""
    try:
        return dict(json.loads(timings_file().read_text()).get("steps") or {})
    except (OSError, ValueError, AttributeError):
        return {}


def seconds(claim: Claim, times: dict[str, dict] | None = None) -> float | None:
    """The claim's steps' recorded seconds, summed; None until every one of them has been timed."""
    times = timings() if times is None else times
    if not all(name in times for name in claim.steps):
        return None
    return sum(times[name]["seconds"] for name in claim.steps)


def time_said(entries: list[dict]) -> str:
    """Steps' recorded time and what set it: their wall seconds summed, then (where recorded) their machine's
    CPUs, the highest load average before one of them and the CPU seconds their processes used.  Other
    load stretches the wall seconds of a step that computes, not its CPU seconds."""
    said = []
    cpus = {e.get("cpus") for e in entries}
    if len(cpus) == 1 and None not in cpus:
        said.append(f"{cpus.pop()} CPUs")
    if all(e.get("load_before") for e in entries):
        said.append(f"load {max(e['load_before'][0] for e in entries):.1f} before it")
    if all(e.get("cpu_seconds") is not None for e in entries):
        said.append(f"{clock_text(sum(e['cpu_seconds'] for e in entries))} of CPU")
    return f"about {clock_text(sum(e['seconds'] for e in entries))}" + (f" ({', '.join(said)})" if said else "")


def time_text(claim: Claim, times: dict[str, dict] | None = None) -> str:
    """The claim's steps' time in the campaign's run (`time_said`), or "not yet timed" until each has one."""
    times = timings() if times is None else times
    if seconds(claim, times) is None:
        return "not yet timed"
    return time_said([times[name] for name in claim.steps])


def machine_now() -> str:
    """This machine's CPUs and load average now, beside which a claim's recorded time is read."""
    return f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} now"


def commits(claim: Claim) -> str:
    """The commits the claim's committed result files came from ("with uncommitted changes" where so)."""
    found = []
    for name in claim.files:
        m = provenance.meta_of(json.loads((RESULTS / name).read_text()))
        found.append(m["commit"] + (" with uncommitted changes" if m["dirty"] else ""))
    return ", ".join(dict.fromkeys(found))


def tolerances(figures: list[Figure]) -> list[Tolerance]:
    return list(dict.fromkeys(f.tolerance for f in figures))


# -- a re-run in a scratch folder --------------------------------------------------------------------------

def moved(path: str, scratch: Path) -> Path:
    """A path under benchmarks/results/ (as the campaign writes it), moved to the same place under `scratch`."""
    rel = Path(path).relative_to(campaign.R)  # ValueError for a path outside the committed figures
    return scratch / rel


def scratch_step(step: campaign.Step, scratch: Path) -> campaign.Step:
    """The step as the campaign runs it, but each --out (and so each output) moved from benchmarks/results/ to
    the same place under `scratch`; every other argument, its inputs included, as it is."""
    args = list(step.args)
    for i in range(len(args) - 1):
        if args[i] == "--out":
            args[i + 1] = str(moved(args[i + 1], scratch))
    return dataclasses.replace(step, args=tuple(args), outputs=tuple(str(moved(o, scratch)) for o in step.outputs))


# the scripts whose hina switch on Mininet --switch sets (their --switch and --spine-switch flags)
SWITCHED = ("mininet/run.py", "benchmarks/compare.py", "benchmarks/time_to_accuracy.py")


def switched(step: campaign.Step, switch: str) -> campaign.Step | None:
    """The step through `switch` wherever it ran the emulator: its script's --switch and --spine-switch emulator
    (given, or --switch by default) become `switch`, BMv2 stays BMv2; None where its script runs no hina switch
    on Mininet that --switch sets (or the step is not on Mininet)."""
    if step.group not in ("mininet", "bmv2") or step.args[0] not in SWITCHED:
        return None
    args = list(step.args)
    for i in range(len(args) - 1):
        if args[i] in ("--switch", "--spine-switch") and args[i + 1] == "emulator":
            args[i + 1] = switch
    if "--switch" not in args:
        args += ["--switch", switch]
    return dataclasses.replace(step, args=tuple(args))


def through(step: campaign.Step, switch: str) -> campaign.Step:
    """The step through `switch` where it has a hina switch (`switched`), else as it is."""
    return (switched(step, switch) or step) if switch != "emulator" else step


def switch_refusal(claims: list[Claim], switch: str, running: bool = True) -> str | None:
    """Why --switch `switch` cannot re-run these claims (one line), or None: each claim must have a step it
    changes, and (`running`: not a dry run) the XDP switch must load here."""
    if switch == "emulator":
        return None
    unswitched = [c.name for c in claims if not any(switched(s, switch) for s in steps_of(c))]
    if unswitched:
        able = [c.name for c in CLAIMS.values() if any(switched(s, switch) for s in steps_of(c))]
        return (f"--switch {switch}: no step of {', '.join(unswitched)} runs a hina switch on Mininet that --switch "
                f"sets (the claims it re-runs: {', '.join(able)})")
    from hina.emulator.xdp.build import cannot_load

    why = cannot_load() if running else None
    return f"--switch {switch}: the XDP switch cannot run here: {why}" if why else None


def fresh_scratch() -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return (provenance.default_out(f"reproduce-{stamp}")).resolve()


# -- printing ----------------------------------------------------------------------------------------------

def verdict_text(figure: Figure | None) -> str:
    return ", ".join(figure.verdicts) if figure and figure.verdicts else "-"


def print_committed(claim: Claim) -> None:
    old = load_results(claim, RESULTS)
    print(f"{claim.name}: {claim.statement}")
    print(f"  committed: {', '.join(f'benchmarks/results/{n}' for n in claim.files)} (commit {commits(claim)})")
    for f in claim.extract(old):
        if f.missing:
            print(f"  {f.name}: not measured ({f.missing})")
            continue
        print(f"  {f.name}: {f.text()} ({f.tolerance.rule()})"
              + (f"; verdicts: {verdict_text(f)}" if f.verdicts else ""))
    fidelity_lines(claim, old)


def compare(old: list[Figure], new: list[Figure]) -> list[tuple[str, bool | None]]:
    """Print each committed figure beside the re-run's; (figure name, reproduced) for each, None for one the
    re-run's machine could not measure (a switch build it lacks), which is not counted either way."""
    now = {f.name: f for f in new}
    outcome: list[tuple[str, bool | None]] = []
    for f in old:
        if f.missing:  # the committed run did not measure it: nothing to hold a re-run to
            continue
        g = now.get(f.name)
        if g is not None and g.missing:
            print(f"  {f.name}: committed {f.text()}, new: not measured here ({g.missing})")
            outcome.append((f.name, None))
            continue
        if g is None:
            print(f"  {f.name}: committed {f.text()}, new: not in the re-run's result: NOT REPRODUCED")
            outcome.append((f.name, False))
            continue
        ok = f.tolerance.holds(f.value, g.value)
        ratio = "" if isinstance(f.value, bool) or not f.value else f", {g.value / f.value:.2f} of it"
        print(f"  {f.name}: committed {f.text()}, new {f.text(g.value)}{ratio} ({f.tolerance.rule()}): "
              + ("reproduced" if ok else "NOT REPRODUCED"))
        if f.verdicts or g.verdicts:
            print(f"      verdicts: committed {verdict_text(f)}; new {verdict_text(g)}")
        outcome.append((f.name, ok))
    return outcome


def what_set_the_time(data: dict | None) -> str | None:
    """`result_files.fidelity_line` without its lead-in: "network-bound 25, CPU-bound 2", or None (no Mininet run)."""
    line = result_files.fidelity_line(data) if data is not None else None
    return line.split(": ", 1)[1].rstrip(".") if line else None


def fidelity_lines(claim: Claim, old: dict[str, dict], new: dict[str, dict] | None = None) -> None:
    """Per result file, what set the time by the fidelity monitor's verdicts: committed, and new if re-run."""
    for name in claim.files:
        a = what_set_the_time(old[name])
        if new is None:
            if a:
                print(f"  {name}, what set the time: {a}")
            continue
        b = what_set_the_time(new.get(name))
        if a or b:
            print(f"  {name}, what set the time: committed {a or '-'}; new {b or '-'}")


def list_claims(switch: str = "emulator") -> None:
    times = timings()
    links = check_links([c for c in CLAIMS.values() if not missing(c) and not rate_drift(c)], Path(),
                        calibrate=False, switch=switch)
    for claim in CLAIMS.values():
        figures = committed_figures(claim)
        print(f"{claim.name}: {claim.statement} ({claim.page})")
        print(f"    needs: {', '.join(needs(claim)) or 'nothing beyond make install'}; "
              f"time: {time_text(claim, times)}; campaign steps: {', '.join(claim.steps)}")
        for t in tolerances(figures):
            print(f"    tolerance, {t.text()}: {t.why}")
        why = missing(claim)
        print(f"    here: {'cannot run: ' + '; '.join(why) if why else 'can run'}")
        for phrase in rate_drift(claim):
            print(f"    links: {phrase}: a re-run is refused until the campaign measures it again")
        for n, held, said in links.get(claim.name, ()):
            print(f"    links: needs {n.text()}: {LINK_STATE[held]}{said}"
                  + (" (a re-run calibrates it first)" if held is None else
                     "; a re-run refuses it unless --force" if held is False else ""))
    print(how_to_run())


def how_to_run() -> str:
    """The lines that end the list: how to re-run a claim, and which claims this machine can run."""
    here = [c.name for c in CLAIMS.values() if not missing(c)]
    elsewhere = [c.name for c in CLAIMS.values() if c.name not in here]
    return "\n".join([
        "",
        "To re-run a claim here and check it against its committed figures:",
        "    make reproduce CLAIM=NAME                  (several: CLAIM=\"demo fuzz\"; root: sudo make reproduce ...)",
        "    .venv/bin/python tools/reproduce.py NAME   (the same, without make)",
        f"Claims this machine can run ({machine_now()}): {', '.join(here) or 'none'}.",
        *([f"Claims that need more than this machine has (see 'here' above): {', '.join(elsewhere)}."]
          if elsewhere else []),
        "Times are the campaign's run (docs/reproduce.md): a busier machine stretches them, CPU seconds excepted."])


# -- main --------------------------------------------------------------------------------------------------

def rerun_step(step: campaign.Step, scratch: Path, switch: str = "emulator") -> campaign.Step:
    """The step as a re-run runs it: into `scratch`, through `switch` where the step has a hina switch."""
    return through(scratch_step(step, scratch), switch)


def run_steps(names: list[str], scratch: Path, switch: str = "emulator") -> dict[str, int]:
    """Run the named campaign steps in order, their outputs moved into `scratch` (through `switch`: `rerun_step`);
    each one's exit status if it failed.  Beside each step's time here, the campaign's, and what set both (CPUs,
    load, CPU seconds)."""
    by = {s.name: rerun_step(s, scratch, switch) for s in campaign.steps() if s.name in names}
    times = timings()
    failed: dict[str, int] = {}
    with Progress(len(names), "reproduce") as bar:
        for name in names:
            step = by[name]
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())  # a busy machine sets the times, not the links
            bar.start(f"{name} ({step.group}, load {load}): {shlex.join(['python', *step.args])}")
            t0, cpu0 = time.monotonic(), campaign.children_cpu()
            code = campaign.run_step(step, bar)
            took, cpu = time.monotonic() - t0, campaign.children_cpu() - cpu0
            if code:
                failed[name] = code
            then = f"; the campaign's: {time_said([times[name]])}" if name in times else ""
            bar.done(f"{name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {clock_text(took)} "
                     f"({os.cpu_count()} CPUs, load {load.split(',')[0]} before it, {clock_text(cpu)} of CPU{then})")
    return failed


def judge(claim: Claim, scratch: Path, failed: dict[str, int],
          switch: str = "emulator") -> list[tuple[str, bool | None]]:
    """Print the claim's committed figures beside the re-run's; (figure, reproduced or None) for each."""
    print(f"\n{claim.name}: {claim.statement}")
    if switch != "emulator":
        print(f"  re-run through the {switch} switch where the committed run had the emulator")
    for name in claim.steps:
        if name in failed:
            print(f"  step {name} exited {failed[name]}")
    old = load_results(claim, RESULTS)
    try:
        new = load_results(claim, scratch)
        outcome = compare(claim.extract(old), claim.extract(new))
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as exc:
        print(f"  the re-run's figures could not be read ({type(exc).__name__}: {exc}): NOT REPRODUCED")
        outcome, new = [("its result", False)], {}
    fidelity_lines(claim, old, new)
    return outcome


def run(chosen: list[Claim], scratch: Path, refused: dict[str, str] | None = None, switch: str = "emulator") -> int:
    """Re-run the chosen claims' steps (each once, in the campaign's order) into `scratch` (through `switch`),
    then compare; the claims `refused` up front (name -> its line) are named in the summary."""
    refused = refused or {}
    order = [s.name for s in campaign.steps()]
    failed = run_steps(sorted({n for c in chosen for n in c.steps}, key=order.index), scratch, switch)
    results, bad = [], []
    for claim in chosen:
        outcome = judge(claim, scratch, failed, switch)
        results += outcome
        if any(ok is False for _, ok in outcome) or any(n in failed for n in claim.steps):
            bad.append(claim.name + " (" + ", ".join(n for n, ok in outcome if ok is False) + ")")
    done = sum(ok is True for _, ok in results)
    unmeasured = [n for n, ok in results if ok is None]
    print(f"\nreproduce.py: {done} of {len(results) - len(unmeasured)} figures reproduced"
          + (f"; not reproduced: {'; '.join(bad)}" if bad else "")
          + (f"; not measured here (this machine lacks what they need): {', '.join(unmeasured)}"
             if unmeasured else "")
          + (f"; REFUSED up front, this machine holding less than their links' rate: {', '.join(refused)}"
             if refused else "") + f"; the re-run's results are in {scratch}")
    return 1 if bad else 2 if refused or unmeasured else 0


QUOTA_ENV = "HINA_CPU_QUOTA"  # set by --cpu-quota for the run it starts under the quota: that run checks it


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = OneLineParser(prog="reproduce.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("claims", nargs="*", metavar="CLAIM", help="the claims to re-run (none: list every claim)")
    ap.add_argument("--committed-only", action="store_true",
                    help="print the committed figures (of the named claims, or every claim) and run nothing")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the commands a re-run would run and what the cache says of its link rates, and run "
                         "nothing")
    ap.add_argument("--switch", choices=("emulator", "xdp"), default="emulator",
                    help="the hina switch the claims' Mininet steps run where the committed runs had the emulator "
                         "(mininet/run.py's, compare.py's and time_to_accuracy.py's --switch and --spine-switch); "
                         "the figures are held to the committed ones all the same (default: emulator)")
    ap.add_argument("--out", type=Path, metavar="DIR",
                    help=f"the scratch folder the re-run writes into (default: a fresh reproduce-DATE-TIME folder in "
                         f"{provenance.OUT_RULE}; never benchmarks/results/)")
    ap.add_argument("--recalibrate", action="store_true",
                    help="measure the link rate this machine holds for each chosen Mininet claim again, instead of "
                         "taking it from the cache")
    ap.add_argument("--force", action="store_true",
                    help="run a Mininet claim even where this machine holds less than its links' rate (it is "
                         "refused up front otherwise)")
    ap.add_argument("--cpu-quota", type=checked(cpu_quota.parse_quota), metavar="PCT",
                    help="run everything under this CPU quota, as systemd's CPUQuota (100%%: one core's time per "
                         "second), as a machine slower per byte would (tools/cpu_quota.py; root); its link rates "
                         "are calibrated and cached apart")
    return ap.parse_args(argv)


def under_quota(percent: float, argv: list[str]) -> int:
    """This script again, with the same arguments, under the CPU quota (tools/cpu_quota.py); its exit status."""
    try:
        return cpu_quota.run(percent, [sys.executable, str(Path(__file__).resolve()), *argv],
                             env={**os.environ, QUOTA_ENV: f"{percent:g}"})
    except ValueError as exc:
        print(f"reproduce.py: --cpu-quota {percent:g}%: {exc}", file=sys.stderr)
        return 2


def quota_here(percent: float) -> str | None:
    """Why this run is not under the quota it was started under (None where it is): the quota in effect is read
    from this process's cgroups, not assumed."""
    have = provenance.cpu_quota()
    if have is not None and abs(have - percent / 100) < 0.005:
        return None
    return (f"--cpu-quota {percent:g}%: this process runs under "
            + ("no CPU quota" if have is None else f"a CPU quota of {have * 100:g}%"))


def refuse(chosen: list[Claim], folder: Path, recalibrate: bool, force: bool,
           switch: str = "emulator") -> dict[str, str]:
    """Check the chosen claims' link rates (through `switch`) against this machine (`check_links`, calibrating
    into `folder` where the cache cannot say) and print the line of each it does not hold, up front; the refused
    (none with `force`), name -> line."""
    drifted = {c.name: rate_drift(c) for c in chosen}
    answers = check_links([c for c in chosen if not drifted[c.name]], folder, recalibrate, switch=switch)
    refused = {}
    for claim in chosen:
        line = (drift_refusal(claim, drifted[claim.name], force) if drifted[claim.name] else
                refusal(claim, answers[claim.name], forced=force))
        if line:
            print(line, flush=True)
            if not force:
                refused[claim.name] = line
    return refused


def dry_run(chosen: list[Claim], scratch: Path, switch: str = "emulator") -> None:
    """The commands a re-run would run (through `switch`), then what the cache says of each link rate (and the
    calibration a re-run would run first, where it says nothing)."""
    order = [s.name for s in campaign.steps()]
    for name in sorted({n for c in chosen for n in c.steps}, key=order.index):
        step = rerun_step(next(s for s in campaign.steps() if s.name == name), scratch, switch)
        print(f"{name} ({step.group}): {shlex.join(['python', *step.args])}")
    for claim in chosen:
        if rate_drift(claim):
            print(drift_refusal(claim, rate_drift(claim)))
    here = [c for c in chosen if not missing(c) and not rate_drift(c)]
    for name, answers in check_links(here, scratch / "calibrate", calibrate=False, switch=switch).items():
        for n, held, said in answers:
            first = "" if held is not None else "; a re-run calibrates it first: " + shlex.join(
                ["python", *calibration_step(n, scratch / "calibrate").args])
            print(f"{name}: needs {n.text()}: {LINK_STATE[held]}{said}{first}")


LINK_STATE = {True: "held: ", False: "NOT held: ", None: ""}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    unknown = [n for n in args.claims if n not in CLAIMS]
    if unknown:
        print(f"reproduce.py: no claim named {', '.join(map(repr, unknown))} (claims: {', '.join(CLAIMS)})",
              file=sys.stderr)
        return 2
    if args.cpu_quota is not None:
        if os.environ.get(QUOTA_ENV) != f"{args.cpu_quota:g}":  # start the run under the quota
            return under_quota(args.cpu_quota, sys.argv[1:] if argv is None else argv)
        why = quota_here(args.cpu_quota)
        if why:
            print(f"reproduce.py: {why}", file=sys.stderr)
            return 2
        print(f"reproduce.py: under a CPU quota of {args.cpu_quota:g}% (this process's cgroups allow "
              f"{provenance.cpu_quota():g} of a core's time per second)", file=sys.stderr)
    chosen = [CLAIMS[n] for n in dict.fromkeys(args.claims)]
    if args.committed_only:
        for i, claim in enumerate(chosen or CLAIMS.values()):
            if i:
                print()
            print_committed(claim)
        return 0
    if not chosen:
        list_claims(args.switch)
        return 0
    scratch = (args.out.resolve() if args.out else fresh_scratch())
    if provenance.committed(scratch):
        print(f"reproduce.py: --out {args.out}: a re-run never writes into benchmarks/results/ (the committed "
              "figures)", file=sys.stderr)
        return 2
    refusal = switch_refusal(chosen, args.switch, running=not args.dry_run)
    if refusal:
        print(f"reproduce.py: {refusal}", file=sys.stderr)
        return 2
    if args.dry_run:
        dry_run(chosen, scratch, args.switch)
        return 0
    for claim in chosen:
        why = missing(claim)
        if why:
            print(f"reproduce.py: {claim.name} cannot run here: {'; '.join(why)}", file=sys.stderr)
            return 2
    scratch.mkdir(parents=True, exist_ok=True)
    refused = refuse(chosen, scratch / "calibrate", args.recalibrate, args.force, args.switch)
    if len(refused) == len(chosen):
        print(f"reproduce.py: nothing run: this machine holds less than the link rate of {', '.join(refused)}")
        return 2
    return run([c for c in chosen if c.name not in refused], scratch, refused, args.switch)


if __name__ == "__main__":
    sys.exit(main())
