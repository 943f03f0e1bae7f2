"""The Tofino program (p4/tna/): the packet vectors on its model, the model
frame for frame against the emulator under loss, duplication and reordering (a star and trees), and
where Intel's open-source Tofino back end is installed, the compiled program's BF-Runtime and P4Runtime
names against the controller's entries.

No Tofino software model (tofino-model) runs here (docs/tofino.md says what blocks it), so the packet
vectors run on `tna_model` (tests/tna_model.py), which runs p4/tna/*.p4's controls from the source
(tests/p4_source.py); tests/p4/test_tna_mutations.py runs these tests on mutated copies of the source.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import make_vectors
import numpy as np
import pytest
import tna_model
from helpers import check_case, child_gone_stale_case, copy_taken_again_case

from hina.control import JobConfig, Member
from hina.control.controller import p4_entries
from hina.control.topology import Topology
from hina.emulator import Pipeline
from hina.host.congestion import CongestionWindow
from hina.host.congestion_settings import CongestionSettings
from hina.sim.netsim import VirtualNetwork, expected, run_transfers
from hina.wire.headers import FIELD_AT, HEADER_BYTES, VERSION_BIT, Drop, MsgType, Op

ROOT = Path(__file__).resolve().parents[2]
TNA = ROOT / "p4" / "tna"
VECTORS = sorted((ROOT / "tests" / "vectors").glob("*.json"))


# (the TNA program's header and codes are held to the declaration with BMv2's: tests/wire/test_declared_once.py)

# -- the packet vectors on the model ---------------------------------------------------------------

@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_the_tna_model_passes_every_vector(path):
    case = json.loads(path.read_text())
    out, drops = tna_model.run(case["topology"], [(p["port"], bytes.fromhex(p["frame"])) for p in case["packets"]])
    got = Counter((int(port), bytes(frame)) for port, frame in out)
    want = Counter((e["port"], bytes.fromhex(e["frame"])) for e in case["expected"])
    assert got == want, (f"missing {[(p, f.hex()) for p, f in (want - got).elements()]}\n"
                         f"unexpected {[(p, f.hex()) for p, f in (got - want).elements()]}")
    assert drops == case["expected_drops"]


def test_the_tna_model_tells_every_member_again_when_a_copy_is_taken_again():
    """The copy's `pending` is cleared by its next chunk's first arrival (helpers.copy_taken_again_case: no
    vector reaches it)."""
    case = copy_taken_again_case()
    out, drops = tna_model.run(case["topology"], [(p["port"], bytes.fromhex(p["frame"])) for p in case["packets"]])
    check_case(case, out, drops)


def test_the_models_parser_and_deparser_are_parser_p4s():
    """The model parses and deparses by p4/tna/parser.p4 itself: every vector's frame comes out of the
    ingress parser and deparser as it went in, behind the bridge header the parser made (the port, the rest
    0), and in a frame that holds a hina header and K words, word i is lo.w<i> and word K/2 + i hi.w<i>
    (a value register pairs them: swapped halves would leave every sum in the wrong words)."""
    model = tna_model.TnaModel(Topology.from_config(make_vectors.TOPOLOGY))
    k, half, at = make_vectors.K, make_vectors.K // 2, 42 + HEADER_BYTES
    frames = 0
    for path in VECTORS:
        for packet in json.loads(path.read_text())["packets"]:
            port, frame = packet["port"], bytes.fromhex(packet["frame"])
            hdr, meta, _, read = model.parse(port, frame)
            bridge = bytes(model.program.new("bridge_t", ingress_port=port))
            emitted = model.deparse(hdr, meta, model.program.new("ingress_intrinsic_metadata_for_deparser_t"))
            assert emitted + read.rest() == bridge + frame, path.stem
            if hdr.hi.valid:
                words = [int.from_bytes(frame[at + 4 * i:at + 4 * i + 4], "big") for i in range(k)]
                assert [hdr.lo[f"w{i:02d}"] for i in range(half)] == words[:half], path.stem
                assert [hdr.hi[f"w{i:02d}"] for i in range(half)] == words[half:], path.stem
                frames += 1
    assert frames > 50


@pytest.mark.parametrize("vector, switch", [("add_combine_multicast", "root"),
                                            ("tree_result_from_parent_multicast_down", "leaf")])
def test_a_chunk_takes_the_second_passes_the_recirculation_table_counts(vector, switch):
    """A root's chunk goes round the recirculation port once (the UPDATE that completes the copy: the second
    pass reads the high halves), a leaf's twice (and the spine's total, stored): what docs/tofino.md's
    recirculation table counts (tools/tofino_report.py), each time with the bridge header."""
    import tofino_report

    case = json.loads((ROOT / "tests" / "vectors" / f"{vector}.json").read_text())
    model = tna_model.TnaModel(Topology.from_config(case["topology"]))
    for p in case["packets"]:
        model.process(p["port"], bytes.fromhex(p["frame"]))
    passes = next(n for label, n in tofino_report.SECOND_PASSES.items() if label.startswith(switch))
    assert model.passes == len(case["packets"]) + passes
    assert tofino_report.BRIDGE_BYTES == model.program.layout("bridge_t")[1]


@pytest.mark.parametrize("version", [0, 1])
def test_a_child_gone_to_the_other_copy_is_stale_in_the_copy_sent_up(version):
    """On a leaf, an arrival clears the sender's bit in the slot's other copy (arrival_bitmap.p4), so a late
    UPDATE into a copy that went up with no total yet, from a child that has since arrived in the other
    copy, is STALE and nothing goes up again (the verdict), on the model as on the emulator
    (helpers.child_gone_stale_case: no vector comes to this)."""
    case = child_gone_stale_case(version)
    out, drops = tna_model.run(case["topology"], [(p["port"], bytes.fromhex(p["frame"])) for p in case["packets"]])
    check_case(case, out, drops)


# -- frame for frame against the emulator, driven by the real workers ------------------------------

class Tee:
    """The emulator's Pipeline and the model side by side: every frame goes to both, and both must emit
    the same frame to the same destinations (the network goes on with the emulator's)."""

    def __init__(self, emulator: Pipeline, model: tna_model.ModelPipeline):
        self.emulator, self.model, self.frames = emulator, model, 0
        self.emptied = 0  # RESULTs that met an emptied copy: DUPLICATE in the emulator, STALE in the model

    def update(self, frame, source):
        before = self._drops()
        a, b = self.emulator.update(frame, source), self.model.update(frame, source)
        self.frames += 1
        assert (a is None) == (b is None), f"frame {self.frames} from {source}: emulator {a}, model {b}"
        if a is not None:
            assert sorted(a.dests) == sorted(b.dests) and bytes(a.frame) == bytes(b.frame), f"frame {self.frames}"
        else:
            self._note_emptied(frame, before)
        return a

    def _drops(self) -> tuple[Counter, Counter]:
        return (Counter({Drop(k).name.lower(): v for k, v in self.emulator.drops.items() if v}),
                Counter(self.model.model.counters()["drops"]))

    def _note_emptied(self, frame, before) -> None:
        """The one place the two count a drop differently (p4/tna/copy_state.p4 says why): a parent's RESULT
        that comes after every child left its copy for the slot's other one, which the model has marked FREE
        and the emulator keeps complete.  Counted here only where the emulator's copy is in fact empty."""
        emu, mod = self._drops()
        if (emu - before[0], mod - before[1]) != (Counter(duplicate=1), Counter(stale=1)):
            return
        assert frame[FIELD_AT["msg_type"]] == MsgType.RESULT, f"frame {self.frames}: an UPDATE counted apart"
        job = self.emulator.jobs[int.from_bytes(frame[FIELD_AT["job_id"]:FIELD_AT["job_id"] + 2], "big")]
        pool = int.from_bytes(frame[FIELD_AT["version"]:FIELD_AT["version"] + 2], "big")
        local = 2 * (pool % VERSION_BIT - job.cfg.slot_base) + pool // VERSION_BIT
        assert job.bitmap[local] == 0, f"frame {self.frames}: counted apart, but its copy holds arrivals"
        self.emptied += 1

    def same_drops(self) -> bool:
        emu, mod = self._drops()
        return emu - Counter(duplicate=self.emptied) == mod - Counter(stale=self.emptied)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("op", list(Op), ids=[o.name for o in Op])
def test_the_model_is_the_emulator_frame_for_frame_under_loss_and_duplication(seed, op):
    rng = np.random.default_rng(seed)
    workers, slots, drop = 1 + seed % 5, 1 + seed % 4, (0.0, 0.05, 0.2)[seed % 3]
    emulator = Pipeline()
    emulator.add_job(JobConfig(5, workers, 32, 3, slots, tuple(Member(w, ("w", w)) for w in range(workers))))
    tee = Tee(emulator, tna_model.star(5, workers, 3, slots))
    length = int(rng.integers(1, 400))
    payloads = [rng.integers(-(2**31), 2**31, size=length).astype(np.int32) for _ in range(workers)]
    results, _, _ = run_transfers(tee, payloads, op, job_id=5, words=32, slot_base=3, slots=slots, rng=rng,
                                  drop=drop, dup=drop, rounds=3,
                                  windows=[CongestionWindow(slots, CongestionSettings(fair=False, initial=1))
                                           for _ in range(workers)] if seed % 2 else None)
    want = expected(op, payloads)
    assert all(np.array_equal(results[w][r], want) for w in range(workers) for r in range(3))
    assert tee.same_drops()


class TreeNetwork(VirtualNetwork):
    """A leaf/spine tree of Tees (tests/emulator/test_tree.py's wiring): worker w under leaf w // per_leaf."""

    def __init__(self, leaves, spines, per_leaf, rng, **kw):
        super().__init__(leaves[0], rng, **kw)
        self.leaves, self.spines, self.per_leaf = leaves, spines, per_leaf

    def _at_switch(self, worker, frame):
        self._at(("leaf", worker // self.per_leaf), frame, ("w", worker))

    def _at(self, node, frame, source):
        emit = (self.leaves if node[0] == "leaf" else self.spines)[node[1]].update(frame, source)
        for dest in emit.dests if emit is not None else ():
            if dest[0] == "w":
                self._schedule(("down", dest), lambda d=dest, f=emit.frame: self.on_result(d[1], f))
            else:
                self._schedule((node, dest), lambda d=dest, f=emit.frame, n=node: self._at(d, f, n))


@pytest.mark.parametrize("shape", [(4, 2, 1), (8, 2, 2), (7, 3, 1)], ids=["2leaf-1spine", "4leaf-2spine", "uneven"])
@pytest.mark.parametrize("op", list(Op), ids=[o.name for o in Op])
@pytest.mark.parametrize("drop", [0.0, 0.1])
def test_the_model_is_the_emulator_frame_for_frame_in_trees(shape, op, drop):
    workers, per_leaf, spines = shape
    model_leaves, model_spines = tna_model.tree(5, workers, per_leaf, spines, 2, 6)
    leaves, tops = [], []
    for i, model in enumerate(model_leaves):
        children = range(i * per_leaf, min(workers, (i + 1) * per_leaf))
        p = Pipeline()
        p.add_job(JobConfig(5, workers, 32, 2, 6, tuple(Member(w, ("w", w)) for w in children),
                            mask=sum(1 << w for w in children), parents=tuple(Member(i, ("spine", s))
                                                                              for s in range(spines))))
        leaves.append(Tee(p, model))
    for model in model_spines:
        p = Pipeline()
        p.add_job(JobConfig(5, len(leaves), 32, 2, 6, tuple(Member(i, ("leaf", i)) for i in range(len(leaves)))))
        tops.append(Tee(p, model))
    rng = np.random.default_rng(workers + int(op) + int(drop * 10))
    payloads = [rng.integers(-(2**31), 2**31, size=300).astype(np.int32) for _ in range(workers)]
    net = TreeNetwork(leaves, tops, per_leaf, np.random.default_rng(1), drop=drop, dup=drop)
    results, _, _ = run_transfers(leaves[0], payloads, op, job_id=5, words=32, slot_base=2, slots=6, rng=None,
                                  net=net, rounds=3)
    want = expected(op, payloads)
    assert all(np.array_equal(results[w][r], want) for w in range(workers) for r in range(3))
    assert all(t.same_drops() for t in leaves + tops)


# -- the compiled program (needs Intel's open-source Tofino back end) -----------------------------

def compiler() -> str | None:
    import tofino_report  # tools/, on the path by tests/conftest.py

    return tofino_report.compiler()


@pytest.fixture(scope="session")
def tofino_build() -> Path:
    """p4/tna/build/ with both targets compiled (`make tofino`), once per session."""
    proc = subprocess.run(["make", "-C", str(ROOT), "tofino"], capture_output=True, text=True, timeout=3600)
    build = TNA / "build"
    if proc.returncode != 0 or not (build / "tofino" / "bfrt.json").exists():
        raise RuntimeError(f"make tofino failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return build


def controller_entries():
    """Every entry the controller writes for the vectors' topologies: stars, ranks sharing a host, trees."""
    topologies = {json.dumps(json.loads(p.read_text())["topology"], sort_keys=True) for p in VECTORS}
    for text in sorted(topologies):
        yield from p4_entries(Topology.from_config(json.loads(text)))[0]


def bfrt_tables(path: Path) -> dict[str, dict]:
    return {t["name"]: t for t in json.loads(path.read_text())["tables"]}


def find(tables: dict[str, dict], short: str) -> dict:
    found = [t for name, t in tables.items() if name == short or name.endswith("." + short)]
    assert len(found) == 1, f"{short}: {[t['name'] for t in found] or 'no such table'}"
    return found[0]


@pytest.mark.tofino
@pytest.mark.slow
@pytest.mark.parametrize("target", ["tofino", "tofino2"])
def test_the_compiled_program_has_every_table_action_key_and_parameter_the_controller_writes(tofino_build, target):
    tables = bfrt_tables(tofino_build / target / "bfrt.json")
    checked = set()
    for e in controller_entries():
        table = find(tables, e.table)
        keys = {k["name"] for k in table["key"]}
        assert set(e.match) == keys, f"{e.table}: controller keys {sorted(e.match)}, program {sorted(keys)}"
        actions = {a["name"].rsplit(".", 1)[-1]: a for a in table.get("action_specs", [])}
        assert e.action in actions, f"{e.table}: no action {e.action} (has {sorted(actions)})"
        params = {d["name"] for d in actions[e.action].get("data", [])}
        assert set(e.params) == params, f"{e.table}.{e.action}: {sorted(e.params)} vs {sorted(params)}"
        checked.add((e.table, e.action))
    assert {t for t, _ in checked} == {"jobs", "parents", "workers", "worker_addresses", "mac_forward", "hosts",
                                        "replicas"}
    counter = find(tables, "drops")
    assert counter["table_type"] == "Counter" and counter["size"] >= len(Drop) + 1


@pytest.mark.tofino
@pytest.mark.slow
@pytest.mark.parametrize("target", ["tofino", "tofino2"])
def test_the_slot_registers_a_reset_clears_are_in_the_compiled_program(tofino_build, target):
    """reset_job on BMv2 zeroes `bitmap`, `arrivals` and `totals` per copy; on Tofino the same state is
    `bitmap` and `copy_state` per slot (the counter and the total flag became copy_state's states)."""
    tables = bfrt_tables(tofino_build / target / "bfrt.json")
    for name, size in (("bitmap", 4096), ("copy_state", 4096), ("run_tags", 8192)):
        register = find(tables, name)
        assert register["table_type"] == "Register" and register["size"] == size, name


@pytest.mark.tofino
@pytest.mark.slow
@pytest.mark.parametrize("target", ["tofino", "tofino2"])
def test_the_p4info_names_the_controllers_tables(tofino_build, target):
    """The P4Runtime view (what control/p4rt.py reads) has the same tables and actions."""
    from hina.control.p4rt import P4Info

    info = P4Info.load(tofino_build / target / "hina.p4info.txtpb")
    for e in controller_entries():
        info.table_entry(e.table, e.match, e.action, e.params)  # raises ControlError on a name or width it lacks
    info.find("counters", "drops")


@pytest.mark.tofino
@pytest.mark.slow
@pytest.mark.parametrize("target", ["tofino", "tofino2"])
@pytest.mark.parametrize("file, table", [("frame_checks.p4", "checks"), ("slot_rules.p4", "verdict")])
def test_the_compiled_checks_and_verdict_are_the_entries_the_model_runs(tofino_build, target, file, table):
    """The two deciding tables, as the model reads them from the P4 source (tna_model.const_entries), are,
    in the compiled program (context.json's static entries), the same entries in the same priority order:
    every key's value and mask, the action and its arguments."""
    context = json.loads((tofino_build / target / "pipe" / "context.json").read_text())
    compiled = find({t["name"]: t for t in context["tables"]}, table)
    actions = {a["handle"]: a["name"].rsplit(".", 1)[-1] for a in compiled["actions"]}
    entries, default = tna_model.const_entries(file, table)
    widths = [k["bit_width"] for k in sorted(compiled["match_key_fields"], key=lambda k: k["position"])]
    static = sorted(compiled["static_entries"], key=lambda e: e["priority"])
    assert len(static) == len(entries)
    for i, (got, want) in enumerate(zip(static, entries, strict=True)):
        keys = [(int(k["value"], 16), int(k["mask"], 16)) for k in got["match_key_fields_values"]]
        assert len(keys) == len(want.keys) == len(widths), f"entry {i}"
        for (value, mask), (want_value, want_mask), width in zip(keys, want.keys, widths, strict=True):
            # within the key's width: a slice's exact value comes with its whole field's mask (0xff for
            # worker_id[7:7]), its value the slice's
            full = (1 << width) - 1
            value, mask = value & full, mask & full
            if want_mask is None:  # every bit of the key
                assert (value, mask) == (want_value, full), f"entry {i}: {got}"
            else:
                assert (value & mask, mask) == (want_value & want_mask, want_mask), f"entry {i}: {got}"
        assert actions[got["action_handle"]] == want.action, f"entry {i}"
        assert tuple(int(p["value"], 16) for p in got.get("action_parameters_values", [])) == want.args, f"entry {i}"
    assert actions[compiled["default_action_handle"]] == default[0]


def test_the_tofino_marker_says_what_it_needs():
    import conftest

    assert "tofino" in conftest.MARKERS
    if compiler() is None:
        assert conftest.missing("tofino") == "needs /opt/p4c-tofino/bin/p4c (tools/p4-toolchain.sh --tofino)"
    else:
        assert shutil.which(compiler()) or Path(compiler()).exists()


def test_the_tofino_page_shows_what_the_compilers_report_says():
    """docs/tofino.md's generated tables are what benchmarks/results/tofino.json renders (no compiler needed)."""
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "tofino_report.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
