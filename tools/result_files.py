"""What the tables and the claims read from benchmarks/results/: the files, the comparison's systems and
presets, the campaign's runs by name, and the fidelity monitor's verdicts in a result, in words.

tools/tables.py renders pages from these, and tools/reproduce.py checks its claims with them; both import
this module, and neither imports the other for it.
"""

from __future__ import annotations

import json
from pathlib import Path

import campaign

from hina.baselines import registry

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def load(name: str) -> dict:
    """A result file, by its path under benchmarks/results/."""
    return json.loads((RESULTS / name).read_text())


def verdicts_in(data) -> list[str]:
    """Every fidelity verdict a result file holds, wherever its rows keep it."""
    found, stack = [], [data]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            v = x.get("fidelity")
            if isinstance(v, dict):
                v = v.get("verdict")
            if v is None and "mbps" in x and isinstance(x.get("verdict"), str):  # a --calibrate trial
                v = x["verdict"]
            if isinstance(v, str):
                found.append(v)
            # a run's rendered table repeats its systems' verdicts: each run is counted once
            stack.extend(val for key, val in x.items() if key != "fidelity" and not (key == "table" and "systems" in x))
        elif isinstance(x, list):
            stack.extend(x)
    return found


def fidelity_line(data: dict) -> str | None:
    """For a result with Mininet runs: how many were network-bound, CPU-bound or neither, or that none was judged."""
    text = json.dumps(data.get("meta", {})) + json.dumps(data.get("command", "")) + json.dumps(data.get("env", ""))
    rows = data.get("rows") if isinstance(data.get("rows"), list) else []
    mininet = (any(w in text.lower() for w in ("mininet", "switch_bench"))
               or any("mininet" in str(r.get("env", "")).lower() for r in rows if isinstance(r, dict)))
    verdicts = verdicts_in(data)
    if not verdicts:
        return ("What set the time: not monitored (this Mininet run predates the fidelity monitor: "
                "[fidelity](fidelity.md) has the verdicts of a re-run).") if mininet else None
    kinds = {"network-bound": 0, "CPU-bound": 0, "neither": 0}
    for v in verdicts:
        key = next((k for k in kinds if v.startswith(k)), "neither")
        kinds[key] += 1
    return "What set the time (fidelity monitor, per run or round): " + ", ".join(
        f"{k} {n}" for k, n in kinds.items() if n) + "."


# -- the comparison (benchmarks/compare.py) ---------------------------------------------------------

# hina's own rows in the comparison's tables; the baselines' rows follow them (`systems`)
HINA_SYSTEMS = (("auto", "hina auto"), ("dense", "hina dense (SwitchML-style)"),
                ("blocks", "blocks (OmniReduce-style)"))
PRESETS = ("deeplight", "lstm", "ncf", "bert_base", "vgg19")


def systems() -> list[tuple[str, str]]:
    """(mode, label) of every row a comparison table may show, in order: hina's, then each baseline compare.py
    offers (hina.baselines.registry)."""
    return [*HINA_SYSTEMS, *((b.name, b.label) for b in registry.compared())]


def verdict_text(r: dict) -> str:
    """The fidelity monitor's verdict of a row, or why there is none."""
    v = r.get("verdict") or r.get("fidelity")
    if isinstance(v, dict):
        v = v.get("verdict") or v.get("text")
    return str(v) if v else "not monitored (run before the fidelity monitor)"


def short_verdict(r: dict) -> str:
    """A table cell's verdict: network, CPU: <who>, neither, or not monitored."""
    v = verdict_text(r)
    if v.startswith("network-bound"):
        return "network"
    if v.startswith("CPU-bound: "):
        who = v[len("CPU-bound: "):].split(",")[0]
        return "CPU: " + (who.split(" at ")[0] if " at " in who else who.replace("the ", ""))
    return v.split(":")[0].split(" (")[0]


# the campaign's runs (tools/campaign.py writes them under these names)
TREE_RUNS = tuple(f"trees/{name}.json" for name, _ in campaign.EXACT_TREES)
# leafspine:2,1,4 at campaign.TREE_MBPS, 4:1: hina's leaves summing their racks, then plain leaves (the spine only)
LEAVES_RUNS = {preset: (f"trees/leaves-{preset}-hina.json", f"trees/leaves-{preset}-plain.json")
               for preset, _ in campaign.LEAVES}

