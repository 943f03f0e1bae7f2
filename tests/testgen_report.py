"""How many of p4testgen's tests each target passes, and what of each P4 program they and the packet vectors
reach: the JSON docs/p4.md and docs/tofino.md show (tools/testgen.py --render).

    python tests/testgen_report.py                           # the TNA program, on its model
    sudo .venv/bin/python tests/testgen_report.py --bmv2     # and the BMv2 program, on simple_switch_grpc
    ... --out benchmarks/results/testgen.json                # the committed figures (default: hina-results/)

Both sets of tests are counted the same way, on one executor per program, by file and line of its source:
on the TNA program's model, the statements, both ways of each if and select, and the constant entries of
p4/tna/ it runs, of all it could (p4_source's `covered` and `coverable`); on BMv2, the primitives, both
ways of each condition, the parser's transitions (and where a frame too short stops it), each table's hit
and miss and each constant entry its trace log names, of all the compiled program holds
(p4/build/hina.json).  What only one set reaches is listed, for the pages to say why.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

import helpers
import p4_source
import testgen_harness as harness

from hina.provenance import command_line, default_out, out_help, out_path, p4_versions, write_result

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "vectors"
KINDS = ("statement", "branch", "transition", "table", "entry")


def vectors() -> list[dict]:
    """The hand-written cases: the packet vectors, and the cases run beside them (helpers.beside_vectors)."""
    return [json.loads(p.read_text()) for p in sorted(VECTORS.glob("*.json"))] + helpers.beside_vectors()


def compare(coverable: set[tuple], by_vectors: set[tuple], by_generated: set[tuple]) -> dict:
    """Counts per kind of what each set reaches of `coverable`, and the items only one of them reaches."""
    def counts(items: set[tuple]) -> dict[str, int]:
        kinds = collections.Counter(item[0] for item in items & coverable)
        return {kind: kinds[kind] for kind in KINDS if any(i[0] == kind for i in coverable)}

    return {"coverable": counts(coverable), "vectors": counts(by_vectors), "generated": counts(by_generated),
            "together": counts(by_vectors | by_generated),
            "only_vectors": sorted((by_vectors - by_generated) & coverable, key=str),
            "only_generated": sorted((by_generated - by_vectors) & coverable, key=str),
            "neither": sorted(coverable - by_vectors - by_generated, key=str)}


def tofino() -> dict:
    """The TNA program's generated tests on its model, and what they and the vectors reach of it."""
    data, failed, reached = harness.stored("tofino"), [], set()
    for test in data["tests"]:
        out, covered, drops = harness.run_on_model(test)
        reached |= covered
        if harness.mismatch(test, out) is not None or drops != test["counted"]:
            failed.append(test["name"])
    return {"program": "p4/tna/hina.p4", "tests": len(data["tests"]), "p4testgen": data.get("coverage"),
            "passed": len(data["tests"]) - len(failed), "failed": failed, "on": "the model",
            "reached": compare(p4_source.program().coverable(), harness.vectors_on_model(vectors()), reached)}


def bmv2() -> dict:
    """The BMv2 program's generated tests on simple_switch_grpc, and what they and the vectors reach of it
    (root; after `make p4`)."""
    import veth_harness

    from hina.control.controller import P4_BUILD

    data, failed = harness.stored("bmv2"), []
    with tempfile.TemporaryDirectory(prefix="testgen-bmv2-") as scratch:
        by_generated, by_vectors = set(), set()
        for i, test in enumerate(data["tests"]):
            log = Path(scratch) / f"test{i}"
            out, drops = harness.run_on_bmv2(test, log=log)
            by_generated |= _logged(log)
            if harness.mismatch(test, out) is not None or drops != test["counted"]:
                failed.append(test["name"])
        for i, case in enumerate(vectors()):
            log = Path(scratch) / f"vector{i}"
            veth_harness.run_case(case, lambda ports, log=log: veth_harness.start_bmv2(ports, log=log), settle=0.3)
            by_vectors |= _logged(log)
    return {"program": "p4/hina.p4", "tests": len(data["tests"]), "p4testgen": data.get("coverage"),
            "passed": len(data["tests"]) - len(failed), "failed": failed, "on": "simple_switch_grpc",
            "emulator": emulator(data["tests"]),
            "reached": compare(bmv2_coverable(P4_BUILD / "hina.json"), by_vectors, by_generated)}


def emulator(tests: list[dict]) -> dict:
    """The BMv2 program's generated tests the emulator takes (testgen_harness.emulator_topology), and how many
    it passes: the frames out and the drops counted."""
    taken = [t for t in tests if harness.emulator_topology(t) is not None]
    failed = []
    for test in taken:
        out, drops = harness.run_on_emulator(test)
        if harness.mismatch(test, out) is not None or drops != test["counted"]:
            failed.append(test["name"])
    return {"tests": len(taken), "passed": len(taken) - len(failed), "failed": failed}


def _logged(log: Path) -> set[tuple]:
    """What a BMv2 trace log says ran (BMv2 may add .txt to the name it is given)."""
    found = [p for p in (log, log.with_name(log.name + ".txt")) if p.exists()]
    if not found:
        raise RuntimeError(f"simple_switch_grpc wrote no log at {log}")
    return harness.bmv2_reached(found[0].read_text(errors="replace"))


def bmv2_coverable(compiled: Path) -> set[tuple]:
    """What a BMv2 trace log may show of the compiled program (testgen_harness.bmv2_reached's items): every
    primitive and both ways of every condition by file and line, every parser state's transitions and its
    extracts' PacketTooShort, a hit and a miss of each of the program's tables, and each constant entry."""
    program = json.loads(compiled.read_text())
    found = set()
    for action in program["actions"]:
        for primitive in action["primitives"]:
            if "source_info" in primitive:
                found.add(("statement", Path(primitive["source_info"]["filename"]).name,
                           primitive["source_info"]["line"]))
    for parser in program["parsers"]:
        for state in parser["parse_states"]:
            found |= {("transition", state["name"], t["next_state"] or "accept") for t in state["transitions"]}
            if any(op["op"] == "extract" for op in state["parser_ops"]):
                found.add(("transition", state["name"], "PacketTooShort"))
    for pipeline in program["pipelines"]:
        for condition in pipeline["conditionals"]:
            if "source_info" in condition:
                at = (Path(condition["source_info"]["filename"]).name, condition["source_info"]["line"])
                found |= {("branch", *at, True), ("branch", *at, False)}
        for table in pipeline["tables"]:
            if not table["name"].startswith("tbl_"):  # the compiler's, one per action called outside a table
                found |= {("table", table["name"], "hit"), ("table", table["name"], "miss")}
                found |= {("entry", table["name"], i) for i in range(len(table.get("entries", ())))}
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bmv2", action="store_true", help="also the BMv2 program on simple_switch_grpc (root)")
    parser.add_argument("--out", type=out_path, default=default_out("testgen.json"), help=out_help("testgen.json"))
    args = parser.parse_args(argv)
    result = {"tofino": tofino()}
    if args.bmv2:
        result["bmv2"] = bmv2()
    for target, part in result.items():
        reached = part["reached"]
        print(f"{target}: {part['passed']}/{part['tests']} generated tests pass on {part['on']}; reached of "
              f"{reached['coverable']}: vectors {reached['vectors']}, generated {reached['generated']}, "
              f"together {reached['together']}")
    # the programs' source as it is now, which the results' file and line numbers name (tools/testgen.py
    # quotes it from here, whatever the program becomes later)
    result["sources"] = {str(f.relative_to(ROOT)): f.read_text() for f in sorted((ROOT / "p4").rglob("*.p4"))}
    write_result(args.out, result, command_line("tests/testgen_report.py", argv), **p4_versions())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
