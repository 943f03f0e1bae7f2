"""p4testgen's tests for hina's two P4 programs: generated with a fixed seed, kept as data, and their coverage.

    python tools/testgen.py                      # every target whose p4testgen is installed
    python tools/testgen.py --target bmv2        # p4/hina.p4 (v1model) only; --target tofino: p4/tna/hina.p4
    python tools/testgen.py --check              # exit 1 if tests/testgen/ is not what p4testgen generates
    python tools/testgen.py --render [--check]   # docs/p4.md's and docs/tofino.md's blocks from the results

p4testgen (p4c's test generator, `backends/p4tools/modules/testgen`) explores a program's paths
symbolically and writes, for each path it takes, an input frame, the table entries the path needs and the
frame (with a don't-care mask) or the drop the program's semantics demand.  This runs it on each program
with a fixed seed, a stated number of tests and statement and table-entry coverage tracked (TARGETS,
SEED, MAX_TESTS), reads the STF tests it writes into tests/testgen/<target>.json (what the tests run:
tests/p4/test_testgen.py, on simple_switch_grpc through hina's P4Runtime client and on the TNA program's
model), with the coverage p4testgen reports: the statements and constant entries its tests reach of
those it counts, and which it does not reach, by file and line.  `--render` draws the pages' blocks
(`<!-- testgen: bmv2 -->`, `<!-- testgen: tofino -->`) from those and from benchmarks/results/testgen.json
(tests/testgen_report.py: how many the targets pass, and what they and the packet vectors reach).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hina.wire.headers import Drop

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "testgen"
PATCH = ROOT / "tools" / "p4testgen-tofino.patch"  # what tools/p4-toolchain.sh mends in p4testgen's Tofino target
SEED = 1
MAX_TESTS = 400
# which path p4testgen takes next: the branch that reaches statements no test reached yet (the default, depth
# first, spends its tests on the first branches it meets); it stops at the target's most tests (MAX_TESTS
# unless it says), at every node covered, or when no path is left
SEARCH = ["--path-selection", "GREEDY_STATEMENT_SEARCH", "--stop-metric", "MAX_NODE_COVERAGE"]
# what p4testgen counts as covered: statements (assignments, calls: extracts, emits, table applies) and
# the constant entries of tables
COVERAGE = ("STATEMENTS", "TABLE_ENTRIES")
# frames of an Ethernet header at least (a veth pair sends nothing shorter) and at most what an MTU of 1500
# carries, in bits
SIZES = ["--packet-size-range", f"{8 * 14}:{8 * 1514}"]
TARGETS = {
    # BMv2's tests cross veth pairs; ports 0-510 (511 is BMv2's drop port)
    "bmv2": {"program": "p4/hina.p4", "binary": "/usr/local/bin/p4testgen", "build": "tools/p4-toolchain.sh --testgen",
             "args": ["--target", "bmv2", "--arch", "v1model"], "options": [*SIZES, "--port-ranges", "0:510"]},
    # tna.p4 refuses to parse without the define (p4c-barefoot sets it); pipe 0's 72 ports, the recirculation
    # port among them; 40 tests, the greedy search's first (past them, the path it tries next leaves Z3 on
    # one query for minutes: docs/tofino.md)
    "tofino": {"program": "p4/tna/hina.p4", "binary": "/opt/p4c-tofino/bin/p4testgen",
               "build": "tools/p4-toolchain.sh --tofino --testgen", "args": ["--target", "tofino", "--arch", "tna"],
               "options": ["-D__TARGET_TOFINO__=1", *SIZES, "--port-ranges", "0:71"], "max_tests": 40},
}


# -- p4testgen ---------------------------------------------------------------------------------------

def binary(target: str) -> str | None:
    """The target's p4testgen ($P4TESTGEN_BMV2 / $P4TESTGEN_TOFINO, else TARGETS' path), if it runs for
    the target (p4testgen refuses even --version without a target and an architecture)."""
    candidate = os.environ.get(f"P4TESTGEN_{target.upper()}") or TARGETS[target]["binary"]
    if not (Path(candidate).exists() or shutil.which(candidate)):
        return None
    try:
        run = subprocess.run([candidate, *TARGETS[target]["args"], "--version"], capture_output=True, text=True,
                             timeout=60, env=_env(candidate))
    except (OSError, subprocess.SubprocessError):
        return None
    return candidate if run.returncode == 0 else None


def unfixed(target: str, p4testgen: str) -> str | None:
    """Why the Tofino target's p4testgen will not do (built without tools/p4testgen-tofino.patch, which
    tools/p4-toolchain.sh applies to its tree and marks beside it by the patch's digest), or None."""
    if target != "tofino":
        return None
    digest = hashlib.sha256(PATCH.read_bytes()).hexdigest()[:12]
    stamp = Path(p4testgen).resolve().parent.parent / "share" / "p4c" / "p4testgen-patch"
    if stamp.exists() and stamp.read_text().strip() == digest:
        return None
    return (f"{p4testgen} was not built with {PATCH.relative_to(ROOT)} as it is now "
            f"({TARGETS[target]['build']} rebuilds it)")


def _env(p4testgen: str) -> dict[str, str]:
    """The Tofino build's libraries (libz3) live beside its binaries, in ../lib."""
    env = dict(os.environ)
    lib = str(Path(p4testgen).resolve().parent.parent / "lib")
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def version(p4testgen: str, target: str) -> str:
    """p4testgen's version, else that of the p4c built beside it from the same tree (a p4testgen built
    outside a git checkout says `Version <null>`)."""
    said = _version([p4testgen, *TARGETS[target]["args"], "--version"], p4testgen)
    if said is None:
        said = _version([str(Path(p4testgen).resolve().parent / "p4c"), "--version"], p4testgen)
        said = said and f"of p4c {said}"
    return said or "unknown"


def _version(cmd: list[str], p4testgen: str) -> str | None:
    """The version number (and SHA) a --version command prints, or None."""
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=_env(p4testgen))
    except OSError:
        return None
    found = re.search(r"\d+\.\d+\.\d+(?:\.\d+)?(?: \(SHA: \w+)?", run.stdout + run.stderr)
    return found and found.group(0) + (")" if "SHA" in found.group(0) else "")


def command(target: str, p4testgen: str, out: Path, seed: int, max_tests: int, program: str | None = None) -> list[str]:
    spec = TARGETS[target]
    coverage = [arg for item in COVERAGE for arg in ("--track-coverage", item)]
    return [p4testgen, *spec["args"], "--std", "p4-16", "--test-backend", "STF", "--seed", str(seed),
            "--max-tests", str(max_tests), *SEARCH, *spec["options"], *coverage, "--print-coverage",
            "--out-dir", str(out), "--test-name", "hina", program or spec["program"]]


def most_tests(target: str) -> int:
    """The most tests p4testgen writes of the target's program."""
    return TARGETS[target].get("max_tests", MAX_TESTS)


def generate(target: str, seed: int = SEED, max_tests: int | None = None, program: str | None = None) -> dict:
    """Run the target's p4testgen into a scratch folder (at most `max_tests`, else the target's most) on its
    program (or `program`, with the target's options); its tests and coverage, as tests/testgen/ keeps them."""
    max_tests = max_tests or most_tests(target)
    p4testgen = binary(target)
    if p4testgen is None:
        raise RuntimeError(f"no p4testgen for {target} at {TARGETS[target]['binary']}")
    if why := unfixed(target, p4testgen):
        raise RuntimeError(why)
    with tempfile.TemporaryDirectory(prefix=f"testgen-{target}-") as scratch:
        cmd = command(target, p4testgen, Path(scratch), seed, max_tests, program)
        start = time.monotonic()
        run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=_env(p4testgen))
        seconds = time.monotonic() - start
        if run.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {run.returncode}:\n{run.stderr[-4000:]}")
        tests = [read_stf(path) for path in sorted(Path(scratch).glob("*.stf"), key=_test_number)]
    return {"target": target, "program": TARGETS[target]["program"], "p4testgen": version(p4testgen, target),
            "command": command(target, "p4testgen", Path("DIR"), seed, max_tests),
            "seed": seed, "max_tests": max_tests, "coverage": coverage(run.stdout + run.stderr),
            "seconds": round(seconds, 1), "tests": tests}  # seconds: printed, never stored (comparable)


def _test_number(path: Path) -> int:
    found = re.search(r"_(\d+)\.stf$", path.name)
    return int(found.group(1)) if found else 0


# -- reading STF ---------------------------------------------------------------------------------------

# add TABLE [PRIORITY] KEY:VALUE ... ACTION(PARAM:VALUE,...); names quoted (bmv2) or not (tofino)
_ADD = re.compile(r'add\s+"?([^"\s]+)"?\s+(?:(\d+)\s+)?(.*?)\s*"?([\w.$]+)"?\((.*)\)\s*$')
_DEFAULT = re.compile(r'setdefault\s+"?([^"\s]+)"?\s+"?([\w.$]+)"?\((.*)\)\s*$')
_PAIR = re.compile(r'"?([^"\s:,]+(?:\[\d+:\d+\])?)"?\s*:\s*([^\s,]+)')


# p4testgen's trace of the path, in the test's comments: the drop reason the program computes, and each count
# of its `drops` counter (the BMv2 program's: the reason computed last, or a constant index)
_REASON = re.compile(r"# \[AssignmentStatement\]: meta\.drop_reason = .*\| Computed: meta\.drop_reason = (\d+);")
_COUNT = re.compile(r"# \[MethodCall\]: \S*drops\.count\((.*)\);")


def read_stf(path: Path) -> dict:
    """One STF test: its table entries and default actions, the frame it sends (port, hex), what it
    expects out (port, hex, and where some nibbles are don't-care a mask hex with 0 there; none expected:
    the frame is dropped), and the drops its path counts by reason (`counted`, from p4testgen's trace:
    STF itself checks no counter)."""
    test = {"name": path.stem, "entries": [], "defaults": [], "packet": None, "expected": [], "counted": {}}
    reason = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if m := _REASON.match(line):
            reason = int(m[1])
        elif m := _COUNT.match(line):
            _count(test, path, reason if "meta.drop_reason" in m[1] else m[1])
        if not line or line.startswith("#"):
            continue
        if m := _ADD.match(line):
            test["entries"].append({"table": m[1], "priority": int(m[2]) if m[2] else None,
                                    "match": dict(_PAIR.findall(m[3])), "action": m[4],
                                    "params": dict(_PAIR.findall(m[5]))})
        elif m := _DEFAULT.match(line):
            test["defaults"].append({"table": m[1], "action": m[2], "params": dict(_PAIR.findall(m[3]))})
        elif m := re.fullmatch(r"packet\s+(\d+)\s+([0-9A-Fa-f\s]+)", line):
            test["packet"] = {"port": int(m[1]), "frame": re.sub(r"\s", "", m[2]).lower()}
        elif m := re.fullmatch(r"expect\s+(\d+)(?:\s+([0-9A-Fa-f*\s]+?))?\s*\$?", line):
            test["expected"].append({"port": int(m[1]), **_masked(re.sub(r"\s", "", m[2] or ""))})
        else:
            raise ValueError(f"{path.name}: cannot read {line!r}")
    if test["packet"] is None:
        raise ValueError(f"{path.name}: no packet")
    return test


def _count(test: dict, path: Path, index: int | str | None) -> None:
    """One count of the `drops` counter at `index` (the trace's text of a constant one) in test["counted"]."""
    if isinstance(index, str):
        index = int(index) if index.isdigit() else None
    if index is None:
        raise ValueError(f"{path.name}: cannot tell which drop reason its trace counts")
    name = Drop(index).name.lower()
    test["counted"][name] = test["counted"].get(name, 0) + 1


def _masked(pattern: str) -> dict[str, str]:
    """An expected frame with `*` nibbles: the frame (0 where don't-care) and, where it has any, its mask."""
    frame = {"frame": pattern.replace("*", "0").lower()}
    return frame | ({"mask": "".join("0" if c == "*" else "f" for c in pattern)} if "*" in pattern else {})


# -- coverage ------------------------------------------------------------------------------------------

def coverage(log: str) -> dict:
    """What p4testgen's log says its tests cover: the nodes (statements and constant entries) covered of
    those it counts, after the last test, and the nodes not covered (file, line, the node)."""
    counts = re.findall(r"Nodes covered: [\d.e+-]+ \((\d+)/(\d+)\)", log)
    covered, total = (int(n) for n in counts[-1]) if counts else (0, 0)
    blocks = log.split("Not covered program nodes:")
    uncovered = []
    if len(blocks) > 1:
        for line in blocks[-1].splitlines()[1:]:
            m = re.match(r"\s+(\S+?)\\(\d+): (.*)", line)  # "\tp4/hina.p4\113: meta.is_result = 1;"
            if m is None:
                break
            uncovered.append([_relative(m[1]), int(m[2]), m[3].strip()])
    return {"covered": covered, "total": total, "uncovered": sorted(uncovered)}


def _relative(file: str) -> str:
    """A source file p4testgen names (from the repository's root, where it runs), from the root."""
    path = (ROOT / file).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else file


# -- the pages -----------------------------------------------------------------------------------------

RESULT = ROOT / "benchmarks" / "results" / "testgen.json"  # tests/testgen_report.py's, committed
PAGES = {"bmv2": ROOT / "docs" / "p4.md", "tofino": ROOT / "docs" / "tofino.md"}
MARKER = re.compile(r"(<!-- testgen: ([a-z0-9-]+) -->\n)(.*?)(<!-- end testgen -->)", re.S)
KIND_NAMES = {"statement": "statements", "branch": "branches (each way)", "transition": "parser transitions",
              "table": "table hits and misses", "entry": "constant entries"}


def render(text: str, target: str, result: dict, tests: dict) -> str:
    """`text` (a page) with its `<!-- testgen: TARGET -->` block drawn from tests/testgen_report.py's
    `result` and the stored `tests`."""
    def block(m: re.Match) -> str:
        if m[2] != target:
            return m[0]
        return m[1] + summary(target, result.get(target), tests) + m[4]
    return MARKER.sub(block, text)


def summary(target: str, part: dict | None, tests: dict) -> str:
    """What the page shows of one program: the generated tests, their pass count, and the coverage table
    with what only one set of tests reaches; with no generated tests stored, what the vectors reach."""
    if part is None:
        return f"(not measured yet: python tools/testgen.py --target {target}, then tests/testgen_report.py)\n"
    reached = part["reached"]
    if tests.get("tests"):
        cov = tests["coverage"]
        head = (f"p4testgen {tests['p4testgen']}, seed {tests['seed']}, at most {tests['max_tests']} tests: "
                f"**{part['tests']} tests**, reaching {cov['covered']} of the {cov['total']} statements and "
                f"constant entries it counts; **{part['passed']} of {part['tests']} pass** on {part['on']}"
                + _emulator(part.get("emulator")) + ".")
        rows = (("coverable", "in the program"), ("vectors", "by the packet vectors"),
                ("generated", "by p4testgen's tests"), ("together", "by both"))
        lists = (("only_vectors", "Only the packet vectors reach"),
                 ("only_generated", "Only p4testgen's tests reach"), ("neither", "Neither reaches"))
    else:
        head = (f"No p4testgen test of {TARGETS[target]['program']} is stored yet (python tools/testgen.py "
                f"--target {target}, where {TARGETS[target]['build']} installed it); what the packet vectors "
                f"reach of it on {part['on']}:")
        rows = (("coverable", "in the program"), ("vectors", "by the packet vectors"))
        lists = (("neither", "The packet vectors do not reach"),)
    lines = [head, "", "| reached on " + part["on"] + " | "
             + " | ".join(KIND_NAMES[k] for k in reached["coverable"]) + " |",
             "|---|" + "---|" * len(reached["coverable"])]
    for row, label in rows:
        lines.append(f"| {label} | " + " | ".join(str(reached[row][k]) for k in reached["coverable"]) + " |")
    for key, label in lists:
        items = reached[key]
        lines += ["", f"{label}: " + ("nothing." if not items else "")]
        lines += [f"- {line}" for line in _items(target, items)]
    source = json.loads(RESULT.read_text())["meta"] if RESULT.exists() else {}
    lines += ["", f"<sub>`{source.get('command', 'tests/testgen_report.py')}`, {source.get('date', '')[:10]}, "
              f"commit {source.get('commit')}</sub>", ""]
    return "\n".join(lines)


def _emulator(part: dict | None) -> str:
    """What the page says of the emulator's run of the BMv2 program's tests (none: nothing)."""
    if not part:
        return ""
    return (f", and the emulator **{part['passed']} of the {part['tests']}** whose configuration is MAC "
            "forwarding alone (the frames out and the drops counted)")


def _items(target: str, items: list[list]) -> list[str]:
    """The reached items as the page lists them: one line each, but a table's constant entries (BMv2's, by
    their place in the table) on one line."""
    entries: dict[str, list[int]] = {}
    lines = []
    for item in items:
        if item[0] == "entry" and not item[1].endswith(".p4"):
            entries.setdefault(item[1], []).append(item[2])
        else:
            lines.append(_item(target, item))
    for table, places in entries.items():
        lines.append(f"`{table}`: constant entries {', '.join(map(str, sorted(places)))} (from 0)")
    return lines


def _item(target: str, item: list) -> str:
    """One reached item as the page names it: the file and line, the way taken, the source there; a parser
    transition (from state to state, accept or the error) and a table's hit or miss by their names."""
    if item[0] == "transition":
        return f"parser state `{item[1]}` to `{item[2]}`"
    if item[0] == "table":
        return f"`{item[1]}` {item[2]}"
    kind, file, line, *way = item
    lines = _source_lines(str(Path(TARGETS[target]["program"]).parent / file))
    text = lines[line - 1].strip() if line <= len(lines) else ""
    taken = f" ({way[0] if not isinstance(way[0], bool) else 'taken' if way[0] else 'not taken'})" if way else ""
    return f"`{file}:{line}` {kind}{taken}: `{text}`"


@functools.cache
def _stored_result() -> dict:
    """The committed results, read once for every source file quoted from them."""
    return json.loads(RESULT.read_text()) if RESULT.exists() else {}


@functools.cache
def _source_lines(path: str) -> list[str]:
    """The lines of P4 source `path` as they were at the commit the results were made from (their line
    numbers are that source's; a later change to the program moves them): the copy the results keep
    (`sources`), else read with git at that commit, else the file as it is."""
    result = _stored_result()
    if path in result.get("sources", {}):
        return result["sources"][path].splitlines()
    commit = result.get("meta", {}).get("commit") or ""
    if re.fullmatch(r"[0-9a-f]{7,40}", commit):
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"], capture_output=True,
                               text=True)
        if shown.returncode == 0:
            return shown.stdout.splitlines()
    file = ROOT / path
    return file.read_text().splitlines() if file.exists() else []


def render_pages(check: bool) -> int:
    """Draw (or with `check`, compare) every page's blocks; 1 where a page differs from what it would be."""
    result = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    differs = False
    for target, page in PAGES.items():
        tests = json.loads(stored(target).read_text()) if stored(target).exists() else {}
        text = page.read_text()
        new = render(text, target, result, tests)
        if new != text and check:
            print(f"testgen: {page.relative_to(ROOT)} differs from what {RESULT.relative_to(ROOT)} renders "
                  "(python tools/testgen.py --render)")
            differs = True
        elif new != text:
            page.write_text(new)
    return 1 if differs else 0


# -- the command line -----------------------------------------------------------------------------------

def stored(target: str) -> Path:
    return TESTS / f"{target}.json"


def comparable(data: dict) -> dict:
    """What must be the same when p4testgen runs again: all but how long it took."""
    return {k: v for k, v in data.items() if k != "seconds"}


def difference(old: dict, new: dict) -> str:
    """Where two runs' results first differ: a key, or the first test that is not the same."""
    keys = [k for k in sorted(comparable(old).keys() | comparable(new).keys()) if old.get(k) != new.get(k)]
    if keys != ["tests"]:
        return "differs in " + ", ".join(keys)
    pairs = zip(old["tests"], new["tests"])
    first = next((a["name"] for a, b in pairs if a != b), None)
    return f"{len(old['tests'])} tests stored, {len(new['tests'])} generated, first differing: {first}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=[*TARGETS, "all"], default="all")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--max-tests", type=int, help="the most tests (default: each target's own)")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--render", action="store_true", help="the pages' blocks, not the tests")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.render:
        return render_pages(args.check)
    if args.max_tests is not None and args.max_tests <= 0:
        print(f"testgen: --max-tests must be positive, not {args.max_tests}", file=sys.stderr)
        return 2
    targets = list(TARGETS) if args.target == "all" else [args.target]
    found = {t: binary(t) for t in targets}
    ran = [t for t in targets if found[t] is not None and unfixed(t, found[t]) is None]
    for target in sorted(set(targets) - set(ran)):
        print("testgen: " + (unfixed(target, found[target]) if found[target] else
                             f"no p4testgen for {target} at {TARGETS[target]['binary']} ({TARGETS[target]['build']})"))
    different = False
    for target in ran:
        data = generate(target, args.seed, args.max_tests)
        cov = data["coverage"]
        print(f"{target}: {len(data['tests'])} tests of {data['program']} in {data['seconds']} s, "
              f"{cov['covered']}/{cov['total']} nodes covered")
        if args.check:
            old = json.loads(stored(target).read_text()) if stored(target).exists() else {}
            if comparable(old) != comparable(data):
                print(f"testgen: {stored(target).relative_to(ROOT)} is not what p4testgen generates now "
                      f"({difference(old, data)}; run tools/testgen.py)")
                different = True
        else:
            TESTS.mkdir(parents=True, exist_ok=True)
            stored(target).write_text(json.dumps(comparable(data), indent=1) + "\n")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
