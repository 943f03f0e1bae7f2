"""The Tofino tables of docs/tofino.md, from what Intel's open-source Tofino back end of p4c reports.

    python tools/tofino_report.py                 # render docs/tofino.md's tables from benchmarks/results/tofino.json
    python tools/tofino_report.py --check         # exit 1 if docs/tofino.md differs from what the JSON renders
    python tools/tofino_report.py --measure       # compile every row (needs the compiler): the JSON, then the page
    python tools/tofino_report.py --summary DIR   # one compiled program's resources (what `make tofino` prints)

`--measure` compiles p4/tna/hina.p4 for Tofino 1 and 2 at several K (how many words fit a pass), a
dense-only variant (what OR and MAX cost), the BMv2 program p4/hina.p4 for both chips on v1model (what
the back end refuses, and why) and SwitchML's TNA program (a reference point, from a `fetch`ed copy:
--switchml), each into hina-results/tofino/ (or --out), and keeps per row the compiler's verdict and the
resources its logs report (stages, SRAM, TCAM, PHV, hash units, stateful ALUs per stage).  The
throughput columns are arithmetic on the frame format, stated with the formula on the page, and so is the
recirculation table (on an assumed recirculation capacity, RECIRC_PORT_GBPS), its arithmetic written under it.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "tofino.md"
RESULT = ROOT / "benchmarks" / "results" / "tofino.json"
PROGRAM = ROOT / "p4" / "tna" / "hina.p4"
V1MODEL = ROOT / "p4" / "hina.p4"
DEFAULT_COMPILER = "/opt/p4c-tofino/bin/p4c"
MARKER = re.compile(r"(<!-- tofino: ([a-z0-9-]+) -->\n)(.*?)(<!-- end tofino -->)", re.S)

# What a frame costs on an Ethernet link besides its bytes: FCS 4, preamble and start delimiter 8,
# inter-frame gap 12 (IEEE 802.3).
ETHERNET_EXTRA = 4 + 8 + 12
# Each chip's pipe (Tofino 1: 12 MAU stages, Tofino 2: 20), four stateful ALUs a stage.
CHIPS = {"tofino": {"arch": "tna", "stages": 12, "name": "Tofino 1"},
         "tofino2": {"arch": "t2na", "stages": 20, "name": "Tofino 2"}}


# -- the compiler --------------------------------------------------------------------------------------

@functools.cache
def compiler() -> str | None:
    """The Tofino compiler driver: $P4C_TOFINO, else /opt/p4c-tofino/bin/p4c, if `--version` runs; else None."""
    for candidate in (os.environ.get("P4C_TOFINO"), DEFAULT_COMPILER):
        if not candidate or not (Path(candidate).exists() or shutil.which(candidate)):
            continue
        try:
            run = subprocess.run([candidate, "--version"], capture_output=True, text=True, timeout=60, env=_env())
        except (OSError, subprocess.SubprocessError):
            continue
        if run.returncode == 0:
            return candidate
    return None


def _env() -> dict[str, str]:
    """The compiler's libraries (libz3) live beside it in /opt/p4c-tofino/lib."""
    env = dict(os.environ)
    lib = str(Path(os.environ.get("P4C_TOFINO") or DEFAULT_COMPILER).resolve().parent.parent / "lib")
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def version() -> str | None:
    p4c = compiler()
    if p4c is None:
        return None
    run = subprocess.run([p4c, "--version"], capture_output=True, text=True, timeout=60, env=_env())
    found = re.search(r"\d+\.\d+\.\d+(\.\d+)?(\s*\(SHA: \w+[^)]*\))?", run.stdout + run.stderr)
    return found.group(0) if found else (run.stdout + run.stderr).strip().splitlines()[0]


def command(target: str, out: Path, program: Path, *, arch: str | None = None, defines=(), p4runtime=True) -> list[str]:
    """The compile command of one row (the page prints it)."""
    arch = arch or CHIPS[target]["arch"]
    cmd = [compiler() or DEFAULT_COMPILER, "--target", target, "--arch", arch, "--std", "p4-16", "-g",
           "--create-graphs", "-o", str(out)]
    if p4runtime:
        cmd += ["--bf-rt-schema", str(out / "bfrt.json"), "--p4runtime-files", str(out / "hina.p4info.txtpb"),
                "--p4runtime-force-std-externs"]
    return cmd + [f"-D{d}" for d in defines] + [str(program)]


def compile_program(target: str, out: Path, program: Path, **kw) -> dict:
    """Compile; the verdict, the compiler's error lines and (if it compiled) the resource summary."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cmd = command(target, out, program, **kw)
    run = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=3600)
    text = run.stdout + run.stderr
    (out / "compile.log").write_text(text)
    row = {"command": " ".join(_shown(c) for c in cmd), "ok": run.returncode == 0,
           "errors": [line for line in text.splitlines() if "error:" in line.lower()][:12]}
    placed = re.search(r"supports up to (\d+) stages, using (\d+)", text)
    if placed:  # compiled, but placed in more stages than the chip has
        row["stages_needed"] = int(placed.group(2))
    if row["ok"]:
        row.update(summarize(out, target))
    return row


def _shown(arg: str) -> str:
    """A command's argument as the page shows it: paths relative to the checkout."""
    path = Path(arg)
    if arg.startswith("/") and ROOT in path.resolve().parents:
        return str(path.resolve().relative_to(ROOT))
    return arg


# -- what the compiler reports ------------------------------------------------------------------------

def summarize(out: Path, target: str) -> dict:
    """Resources of one compiled program, from the logs bf-p4c writes under `out` (pipe/logs/resources.json,
    pipe/logs/metrics.json)."""
    resources = _load_first(out, "resources.json")
    metrics = _load_first(out, "metrics.json")
    summary: dict = {}
    if resources is not None:
        mau = resources.get("resources", resources).get("mau", {})
        stages = mau.get("mau_stages", [])
        summary["stages_available"] = mau.get("nStages", CHIPS[target]["stages"])
        salus, srams, tcams, hashes, gateways, tables = [], [], [], [], [], []
        used_stages = set()
        # what the device has, as the compiler describes it: SRAM and TCAM blocks (rows x columns a stage,
        # times the chip's stages: the report lists only the stages the program uses)
        first = stages[0] if stages else {}
        for unit, key in (("srams", "rams"), ("tcams", "tcams")):
            per_stage = first.get(key, {}).get("nRows", 0) * first.get(key, {}).get("nColumns", 0)
            summary[f"{unit}_available"] = per_stage * summary["stages_available"] or None
        for st in stages:
            n = st.get("stage_number", len(salus))
            meters = st.get("meter_alus", {}).get("meters", [])
            salus.append(sum(1 for m in meters if m.get("usages")))
            srams.append(sum(1 for r in st.get("rams", {}).get("srams", []) if r.get("usages")))
            tcams.append(sum(1 for r in st.get("tcams", {}).get("tcams", []) if r.get("usages")))
            units = st.get("hash_distribution_units", {}).get("units", [])
            hashes.append(sum(1 for u in units if u.get("usages")))
            gateways.append(sum(1 for g in st.get("gateways", {}).get("gateways", []) if g.get("usages")))
            ids = st.get("logical_tables", {}).get("ids", [])
            tables.append(len(ids))
            if ids or meters and any(m.get("usages") for m in meters):
                used_stages.add(n)
        summary["stage_tables"] = [_stage_tables(st) for st in stages]
        summary.update(salus_per_stage=salus, srams_per_stage=srams, tcams_per_stage=tcams,
                       hash_units_per_stage=hashes, gateways_per_stage=gateways, tables_per_stage=tables,
                       stages_used=len(used_stages), salus=sum(salus), srams=sum(srams), tcams=sum(tcams),
                       salu_users=_salu_users(stages))
    if metrics is not None:
        # PHV: bits and containers occupied in every class (Tofino 1: normal and tagalong; Tofino 2: normal,
        # mocha and dark), and the containers the device has (phv.json's container groups)
        classes = [t for kind in metrics.get("phv", {}).values() for t in kind]
        summary["phv_bits"] = sum(t.get("bits_occupied", 0) for t in classes)
        summary["phv_containers"] = sum(t.get("containers_occupied", 0) for t in classes)
        phv = _load_first(out, "phv.json")
        groups = (phv or {}).get("resources", [])
        summary["phv_containers_available"] = sum(g.get("num_containers", 0) for g in groups
                                                  if g.get("group_type") == "mau") or None
        m = metrics.get("mau", {})
        for key in ("srams", "tcams", "map_rams", "logical_tables"):
            if key in m:
                summary[f"total_{key}"] = m[key]
        latency = {x.get("gress"): x.get("cycles") for x in m.get("latency", [])}
        if latency:
            summary["latency_cycles"] = latency
    return summary


def _stage_tables(stage: dict) -> list[str]:
    """The P4 tables a stage holds, by their short names (`egress.` before an egress table's); the tables the
    compiler made of plain assignments (tbl_*) are counted as `+N`."""
    names, made = [], 0
    for t in stage.get("logical_tables", {}).get("ids", []):
        name = str(t.get("table_name", ""))
        if name.startswith(("tbl_", "cond-")) or "." not in name:
            made += 1
            continue
        parts = name.split(".")
        names.append(("egress." if "egress" in parts[0].lower() else "") + parts[-1])
    return names + ([f"+{made}"] if made else [])


def _salu_users(stages: list[dict]) -> dict[str, list[int]]:
    """Per stage, which registers (by their last name component) its stateful ALUs serve."""
    users: dict[str, set[int]] = {}
    for st in stages:
        for m in st.get("meter_alus", {}).get("meters", []):
            for u in m.get("usages", []):
                name = str(u.get("used_by", "?")).split(".")[-1]
                users.setdefault(name, set()).add(st.get("stage_number", 0))
    return {k: sorted(v) for k, v in sorted(users.items())}


def _load_first(out: Path, name: str) -> dict | None:
    found = sorted(out.rglob(name))
    return json.loads(found[0].read_text()) if found else None


# -- throughput ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Frame:
    """One aggregation frame on an Ethernet link."""

    payload: int  # bytes of words
    overhead: int  # Ethernet, IPv4, UDP and the protocol's header

    @property
    def wire(self) -> int:
        return self.overhead + self.payload + ETHERNET_EXTRA

    @property
    def share(self) -> float:
        return self.payload / self.wire

    def goodput(self, gbps: float) -> float:
        """Gbit/s of words one port carries at line rate."""
        return gbps * self.share

    def mpps(self, gbps: float) -> float:
        return gbps * 1e3 / (8 * self.wire)


def hina_frame(words: int) -> Frame:
    from hina.wire.headers import FRAME_OVERHEAD, HEADER_BYTES

    return Frame(payload=4 * words, overhead=FRAME_OVERHEAD + HEADER_BYTES)


# The second passes a chunk takes through the recirculation port (p4/tna/configuration.p4's pass_t), by
# where the switch is in the job's tree: the frame that completes a copy goes round once (PASS_COMPLETE);
# below a parent, the total coming down goes round once more to be stored (PASS_TOTAL).  A resend
# (PASS_RESEND) adds one, only where a RESULT was lost.
SECOND_PASSES = {"root (a star's switch, a spine)": 1, "leaf (below a spine)": 2}
# What a frame carries round the loop besides itself: p4/tna/headers.p4's bridge_t (32 bits).
BRIDGE_BYTES = 4
# Recirculation capacity taken as one 100 Gbit/s port per pipe: an assumption (Intel's figures for the
# dedicated recirculation port are not public); a front-panel port in loopback (-DHINA_RECIRC_PORT) adds its
# own rate.
RECIRC_PORT_GBPS = 100


# -- rendering ----------------------------------------------------------------------------------------

def render(text: str, data: dict) -> str:
    def block(m: re.Match) -> str:
        name = m.group(2)
        if name not in TABLES:
            raise ValueError(f"docs/tofino.md: unknown table {name!r} (known: {', '.join(sorted(TABLES))})")
        return m.group(1) + TABLES[name](data) + m.group(4)
    return MARKER.sub(block, text)


def _rows(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(c) for c in r) + " |" for r in rows)]


def _source(data: dict) -> str:
    from hina.provenance import source_line

    return source_line(RESULT.name, data)


def resources_table(data: dict) -> str:
    rows = []
    for row in data["rows"]:
        if row.get("kind") not in ("hina", "switchml") or not row.get("ok"):
            continue
        chip = CHIPS[row["target"]]
        rows.append([row["label"], chip["name"], row["words"], f"{row['stages_used']} / {row['stages_available']}",
                     _of(row["srams"], row.get("srams_available")), _of(row["tcams"], row.get("tcams_available")),
                     _of(row["phv_containers"], row.get("phv_containers_available")), row["phv_bits"],
                     sum(row["hash_units_per_stage"]),
                     " ".join(str(n) for n in row["salus_per_stage"][:row['stages_available']]),
                     row["salus"]])
    lines = _rows(["program", "chip", "K", "stages", "SRAM blocks", "TCAM blocks", "PHV containers", "PHV bits",
                   "hash units", "stateful ALUs per stage", "SALUs"], rows)
    return "\n".join([*lines, "", _source(data)]) + "\n"


def _of(used, available) -> str:
    return f"{used} / {available}" if available else str(used)


def words_table(data: dict) -> str:
    """hina's program at each K: whether it fits, and in how many stages."""
    rows = []
    for row in data["rows"]:
        if row.get("kind") != "hina" or "HINA_ADD_ONLY" in row.get("defines", []):
            continue
        chip = CHIPS[row["target"]]
        used = row["stages_used"] if row.get("ok") else row.get("stages_needed", "-")
        verdict = "fits" if row.get("ok") else ("too many stages" if "stages_needed" in row else
                                                f"refused: `{_short(row['errors'][0]) if row['errors'] else '?'}`")
        salus = row.get("salus", "")
        rows.append([chip["name"], row["words"], row["words"] // 2, verdict, f"{used} / {chip['stages']}", salus])
    lines = _rows(["chip", "K (words a frame)", "value SALUs (K/2)", "compiled", "stages", "SALUs in all"], rows)
    return "\n".join([*lines, "", _source(data)]) + "\n"


def verdicts_table(data: dict) -> str:
    rows = []
    for row in data["rows"]:
        if row.get("kind") == "hina":
            continue
        first = next(iter(row.get("errors", [])), "")
        rows.append([row["label"], CHIPS[row["target"]]["name"], row.get("arch", CHIPS[row["target"]]["arch"]),
                     "compiles" if row["ok"] else "refused",
                     "" if row["ok"] else f"`{_short(first)}`"])
    lines = _rows(["program", "chip", "architecture", "verdict", "the compiler's first error"], rows)
    return "\n".join([*lines, "", _source(data)]) + "\n"


def _short(line: str) -> str:
    line = re.sub(r"^.*?/(p4/|dev_root/)", r"\1", line.strip())
    return (line[:150] + "...") if len(line) > 150 else line


def throughput_table(data: dict) -> str:
    rows = []
    for label, frame in (("hina, K = 32 (Tofino 1's one pass)", hina_frame(32)), ("hina, K = 64", hina_frame(64)),
                         ("hina, K = 80 (Tofino 2's one pass)", hina_frame(80)),
                         ("SwitchML, 256 B", Frame(256, data["switchml_overhead"])),
                         ("SwitchML, 1024 B", Frame(1024, data["switchml_overhead"]))):
        rows.append([label, frame.wire, f"{100 * frame.share:.1f}%", f"{frame.mpps(100):.1f}",
                     f"{frame.goodput(100):.1f}", f"{frame.mpps(400):.1f}", f"{frame.goodput(400):.1f}"])
    return "\n".join(_rows(["frame", "bytes on the wire", "payload share", "Mpps at 100G",
                            "Gbit/s of words at 100G", "Mpps at 400G", "Gbit/s of words at 400G"], rows)) + "\n"


def recirculation_table(data: dict) -> str:
    """The recirculation one job needs with its workers at line rate: a chunk a worker frame time (each chunk
    is one frame from every worker), each chunk's second passes, each a frame and the bridge header round the
    loop; then the arithmetic for K = 32, and what the assumed capacity leaves of line rate."""
    rows, need = [], {}
    for words in (32, 64, 80):
        frame = hina_frame(words)
        loop = Frame(frame.payload, frame.overhead + BRIDGE_BYTES)
        for gbps in (100, 400):
            for switch, passes in SECOND_PASSES.items():
                mpps = passes * frame.mpps(gbps)
                need[words, gbps, passes] = loop_gbps = mpps * 8 * loop.wire / 1e3
                rows.append([f"hina, K = {words}", f"{gbps}G", switch, f"{frame.mpps(gbps):.1f}", passes,
                             f"{mpps:.1f}", loop.wire, f"{loop_gbps:.1f}", f"{loop_gbps / RECIRC_PORT_GBPS:.2f}"])
    lines = _rows(["frame", "workers' links", "switch", "M chunks a second", "second passes a chunk",
                   "recirculation Mpps", "bytes round the loop", "recirculation Gbit/s",
                   f"{RECIRC_PORT_GBPS}G recirculation ports"], rows)
    frame, cap = hina_frame(32), RECIRC_PORT_GBPS
    chunks, loop = frame.mpps(100), frame.wire + BRIDGE_BYTES
    root, leaf = need[32, 100, 1], need[32, 100, 2]
    arithmetic = (
        f"At K = 32 on 100G links: 100 Gbit/s / (8 × {frame.wire} bytes) = {chunks:.1f} M chunks a second, so "
        f"{chunks:.1f} Mpps of recirculation at the root and 2 × {chunks:.1f} = {2 * chunks:.1f} Mpps at a leaf; "
        f"round the loop a frame is {BRIDGE_BYTES} + {frame.wire} = {loop} bytes, so {chunks:.1f} M × 8 × {loop} "
        f"bytes = {root:.1f} Gbit/s at the root, {root / cap:.2f} of a {cap} Gbit/s recirculation port, and "
        f"{leaf:.1f} Gbit/s at a leaf. On one such port the recirculation, not the front-panel ports, bounds the "
        f"job: at {cap} / {root:.1f} = {cap / root:.0%} of line rate at the root and {cap} / {leaf:.1f} = "
        f"{cap / leaf:.0%} at a leaf; on 400G links at {cap / need[32, 400, 1]:.0%} and "
        f"{cap / need[32, 400, 2]:.0%}.")
    return "\n".join([*lines, "", arithmetic]) + "\n"


def _collapsed(names: list[str]) -> str:
    counts = collections.Counter(names)  # (in the order first seen)
    return ", ".join(f"`{n}`" + (f" x{c}" if c > 1 else "") if not n.startswith("+") else n
                     for n, c in counts.items()) or "-"


def stages_table(data: dict) -> str:
    """Stage by stage, the tables and stateful ALUs of hina's program and of its ADD-only variant (Tofino 1)."""
    def row_of(label: str) -> dict | None:
        return next((r for r in data["rows"] if r.get("kind") == "hina" and r["target"] == "tofino"
                     and r["label"] == label and r.get("ok")), None)

    full, dense = row_of("p4/tna/hina.p4"), row_of("p4/tna/hina.p4, ADD only")
    if full is None:
        return "(p4/tna/hina.p4 did not compile for Tofino 1)\n"
    rows = []
    for i in range(full["stages_available"]):
        cells = [i]
        for r in (full, dense):
            if r is None:
                cells += ["", ""]
                continue
            tables = r["stage_tables"][i] if i < len(r["stage_tables"]) else []
            salus = r["salus_per_stage"][i] if i < len(r["salus_per_stage"]) else 0
            cells += [_collapsed(tables), salus]
        rows.append(cells)
    lines = _rows(["stage", "p4/tna/hina.p4: tables", "SALUs", "ADD only: tables", "SALUs"], rows)
    return "\n".join([*lines, "", "`+N`: N tables the compiler made of plain assignments.", "",
                      _source(data)]) + "\n"


TABLES = {"verdicts": verdicts_table, "resources": resources_table, "throughput": throughput_table,
          "recirculation": recirculation_table, "stages": stages_table, "words": words_table}


# -- measuring ----------------------------------------------------------------------------------------

def rows_to_measure(switchml: Path | None) -> list[dict]:
    rows = []
    for target in CHIPS:
        rows.append({"label": "p4/hina.p4 (BMv2's)", "kind": "v1model", "target": target, "arch": "v1model",
                     "program": V1MODEL, "words": 32})
    for target, ks in (("tofino", (32, 48, 64)), ("tofino2", (32, 64, 80, 96, 128))):
        for k in ks:
            rows.append({"label": "p4/tna/hina.p4" if k == 32 else f"p4/tna/hina.p4, K = {k}", "kind": "hina",
                         "target": target, "program": PROGRAM, "words": k, "defines": [f"HINA_WORDS={k}"]})
        rows.append({"label": "p4/tna/hina.p4, ADD only", "kind": "hina", "target": target, "program": PROGRAM,
                     "words": 32, "defines": ["HINA_ADD_ONLY"]})
    if switchml is not None:
        rows.append({"label": "SwitchML dev_root/p4/switchml.p4", "kind": "switchml", "target": "tofino",
                     "program": switchml, "words": 64})
    return rows


def measure(out: Path, switchml: Path | None) -> dict:
    if compiler() is None:
        raise SystemExit(f"no Tofino compiler: set P4C_TOFINO or build {DEFAULT_COMPILER} "
                         f"(tools/p4-toolchain.sh --tofino)")
    rows = []
    for spec in rows_to_measure(switchml):
        name = re.sub(r"[^a-z0-9]+", "-", f"{spec['kind']}-{spec['target']}-{spec['words']}-"
                                           f"{'-'.join(spec.get('defines', []))}".lower()).strip("-")
        print(f"compiling {spec['label']} for {spec['target']} ...", flush=True)
        result = compile_program(spec["target"], out / name, spec["program"], arch=spec.get("arch"),
                                 defines=spec.get("defines", ()), p4runtime=spec["kind"] == "hina")
        print(f"  {'compiles' if result['ok'] else 'refused'}", flush=True)
        rows.append({k: (str(v.relative_to(ROOT)) if isinstance(v, Path) and ROOT in v.parents else
                         str(v) if isinstance(v, Path) else v) for k, v in spec.items()} | result)
    return {"compiler": version(), "rows": rows, "switchml_overhead": SWITCHML_OVERHEAD}


# SwitchML's UDP frame besides its payload: Ethernet 14, IPv4 20, UDP 8, its 8-byte header (msg_type,
# size, job, tsi, pool index: dev_root/p4/headers.p4's switchml_h) and two 8-bit exponents (exponents_h).
SWITCHML_OVERHEAD = 14 + 20 + 8 + 8 + 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="exit 1 if docs/tofino.md is not what the JSON renders")
    what.add_argument("--measure", action="store_true", help="compile every row (needs the Tofino compiler), "
                      "write benchmarks/results/tofino.json, render the page")
    what.add_argument("--summary", type=Path, metavar="DIR", help="print one compiled program's resources")
    parser.add_argument("--switchml", type=Path, help="SwitchML's dev_root/p4/switchml.p4 (a checked-out copy), "
                        "for --measure")
    parser.add_argument("--out", type=Path, default=None, help="where --measure compiles (default: "
                        "hina-results/tofino/ in the current directory)")
    args = parser.parse_args(argv)
    if args.summary is not None:
        target = "tofino2" if "tofino2" in str(args.summary) else "tofino"
        print(json.dumps(summarize(args.summary, target), indent=1))
        return 0
    if args.measure:
        from hina.provenance import write_result

        data = measure(args.out or Path("hina-results") / "tofino", args.switchml)
        write_result(RESULT, data, "python tools/tofino_report.py --measure" +
                     (f" --switchml {args.switchml}" if args.switchml else ""),
                     p4={"p4c (Tofino back end)": data["compiler"] or "not installed"})
    text = PAGE.read_text()
    if not RESULT.exists():
        filled = [m.group(2) for m in MARKER.finditer(text) if m.group(3).strip()]
        if filled:
            print(f"docs/tofino.md shows the tables {', '.join(filled)} but {RESULT.relative_to(ROOT)} is missing: "
                  "python tools/tofino_report.py --measure (needs the Tofino compiler)", file=sys.stderr)
            return 1
        print(f"no {RESULT.relative_to(ROOT)} yet (python tools/tofino_report.py --measure, needs the Tofino "
              "compiler): docs/tofino.md's tables are empty, as they should be", file=sys.stderr)
        return 0
    data = json.loads(RESULT.read_text())
    new = render(text, data)
    if args.check:
        if new != text:
            print("docs/tofino.md differs from what benchmarks/results/tofino.json renders: "
                  "run python tools/tofino_report.py", file=sys.stderr)
            return 1
        return 0
    if new != text:
        PAGE.write_text(new)
        print("rewrote docs/tofino.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
