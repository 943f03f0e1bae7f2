"""p4testgen's tests of both P4 programs (tests/testgen/, written by tools/testgen.py): the BMv2 program's
on simple_switch_grpc through hina's own P4Runtime client, the TNA program's on its model, and the stored
tests against what p4testgen generates with the same seed.  What a generated test is, and how each target
runs it: tests/testgen_harness.py.  A test a target fails is a discrepancy between p4testgen's reading of
the program and the target's: docs/p4.md and docs/tofino.md list each one found and what changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import testgen  # tools/, on the path by tests/conftest.py
import testgen_harness as harness

BMV2_TESTS = harness.stored("bmv2")["tests"]
TOFINO_TESTS = harness.stored("tofino")["tests"]
EMULATOR_TESTS = [t for t in BMV2_TESTS if harness.emulator_topology(t) is not None]


def params(tests: list[dict], target: str) -> list:
    """pytest's parameters for `tests`, or one skipped with the reason where none are stored."""
    if tests:
        return [pytest.param(t, id=t["name"]) for t in tests]
    program = testgen.TARGETS[target]["program"]
    why = f"no p4testgen tests of {program} stored (python tools/testgen.py --target {target})"
    return [pytest.param(None, id="none", marks=pytest.mark.skip(reason=why))]


# -- the stored tests are p4testgen's ------------------------------------------------------------------

def test_the_harness_reads_the_tests_tools_testgen_writes():
    assert harness.STORED == testgen.TESTS


@pytest.mark.slow
@pytest.mark.parametrize("target", [pytest.param("bmv2", marks=pytest.mark.testgen),
                                    pytest.param("tofino", marks=pytest.mark.testgen_tofino)])
def test_the_stored_tests_are_what_p4testgen_generates(target):
    """tests/testgen/<target>.json is what tools/testgen.py writes now: the same tests for the same seed."""
    fresh = testgen.generate(target)
    assert testgen.comparable(harness.stored(target)) == testgen.comparable(fresh), "run python tools/testgen.py"


@pytest.mark.testgen_tofino
def test_p4testgen_reads_the_header_after_the_egress_intrinsic_metadata():
    """tools/p4testgen-tofino.patch's first mend: a program whose egress parser extracts a bridge header after
    the intrinsic metadata, and keys a table on egress_rid (so the compiler keeps that field), passes every
    frame on unchanged where the bridge says what ingress wrote; p4testgen built without the mend prepends an
    intrinsic header 15 bits short and expects the frame dropped."""
    program = Path(__file__).with_name("p4testgen_egress_rid.p4")
    tests = testgen.generate("tofino", max_tests=10, program=str(program.relative_to(testgen.ROOT)))["tests"]
    assert tests
    for test in tests:
        assert test["expected"] == [{"port": 5, "frame": test["packet"]["frame"]}], test


def test_the_stored_tests_say_how_they_were_made():
    for target in testgen.TARGETS:
        data = harness.stored(target)
        if not data["tests"]:
            continue
        assert data["seed"] == testgen.SEED and data["max_tests"] == testgen.most_tests(target)
        assert data["program"] == testgen.TARGETS[target]["program"]
        assert len(data["tests"]) <= data["max_tests"] and all(t["packet"] for t in data["tests"])


STF_BMV2 = '''# p4testgen seed: 1
# Table HinaIngress.job_config.jobs
add "HinaIngress.job_config.jobs" "hdr.hina.job_id":0x0009 "HinaIngress.job_config.set_job"("workers":0x03,"grp":0x1)
setdefault "HinaIngress.forwarding.mac_forward" "HinaIngress.forwarding.forward"("port":0x002)

packet 0 0200000000FE 0200
expect 2 02000000**FE****$
'''
STF_TOFINO = '''add Ingress.parents hdr.hina.job_id:0x0001 hdr.hina.slot:0x0002 Ingress.set_parent(port:0x044)
packet 68 00440000
'''


def test_the_stf_reader_reads_both_back_ends_tests(tmp_path):
    """p4testgen's STF as its bmv2 target writes it (names quoted) and its tofino target (not): entries, a
    default action, the frame sent, the frame expected with its don't-care nibbles (none: dropped)."""
    (tmp_path / "hina_1.stf").write_text(STF_BMV2)
    (tmp_path / "hina_2.stf").write_text(STF_TOFINO)
    bmv2, tofino = testgen.read_stf(tmp_path / "hina_1.stf"), testgen.read_stf(tmp_path / "hina_2.stf")
    assert bmv2["entries"] == [{"table": "HinaIngress.job_config.jobs", "priority": None,
                                "match": {"hdr.hina.job_id": "0x0009"}, "action": "HinaIngress.job_config.set_job",
                                "params": {"workers": "0x03", "grp": "0x1"}}]
    assert bmv2["defaults"] == [{"table": "HinaIngress.forwarding.mac_forward",
                                 "action": "HinaIngress.forwarding.forward", "params": {"port": "0x002"}}]
    assert bmv2["packet"] == {"port": 0, "frame": "0200000000fe0200"}
    assert bmv2["expected"] == [{"port": 2, "frame": "0200000000fe0000", "mask": "ffffffff00ff0000"}]
    assert tofino["entries"][0]["match"] == {"hdr.hina.job_id": "0x0001", "hdr.hina.slot": "0x0002"}
    assert tofino["entries"][0]["params"] == {"port": "0x044"} and tofino["expected"] == []
    assert harness.mismatch(bmv2, [(2, bytes.fromhex("0200000000fe1234"))]) is None
    assert harness.mismatch(bmv2, [(2, bytes.fromhex("0200000100fe1234"))]) is not None  # a cared-for nibble
    assert harness.mismatch(bmv2, [(3, bytes.fromhex("0200000000fe1234"))]) is not None  # another port
    assert harness.mismatch(tofino, []) is None and harness.mismatch(tofino, [(1, b"\0")]) is not None


# -- the targets pass them -------------------------------------------------------------------------

@pytest.mark.parametrize("test", params(TOFINO_TESTS, "tofino"))
def test_the_tna_model_passes_p4testgens_test(test):
    """The model sends what p4testgen expects of the TNA program, and counts the drops p4testgen's trace of
    the path counts."""
    out, _, drops = harness.run_on_model(test)
    assert harness.mismatch(test, out) is None, f"{test['name']}: {harness.mismatch(test, out)}"
    assert drops == test["counted"]


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("test", params(BMV2_TESTS, "bmv2"))
def test_bmv2_passes_p4testgens_test(p4_build, test):
    """BMv2 sends what p4testgen expects, and counts the drops p4testgen's trace of the path counts."""
    out, drops = harness.run_on_bmv2(test)
    assert harness.mismatch(test, out) is None, f"{test['name']}: {harness.mismatch(test, out)}"
    assert drops == test["counted"]


def test_the_emulator_takes_the_tests_of_frames_that_meet_no_job():
    """The tests the emulator runs are those whose frame meets no job (its configuration is a topology's:
    tests that configure a job, a worker or a parent have none), and they reach each check before the job
    table (a drop reason each) and MAC forwarding."""
    assert 0 < len(EMULATOR_TESTS) < len(BMV2_TESTS)
    assert not any(e["table"].endswith((".workers", ".parents", ".hosts")) or e["action"].endswith("set_job")
                   for t in EMULATOR_TESTS for e in t["entries"])
    reasons = set().union(*(t["counted"] for t in EMULATOR_TESTS))
    assert reasons == {"truncated", "bad_checksum", "bad_msg_type", "bad_op", "unknown_job", "no_route"}
    assert any(t["expected"] for t in EMULATOR_TESTS)  # forwarded


@pytest.mark.parametrize("test", params(EMULATOR_TESTS, "bmv2"))
def test_the_emulator_passes_p4testgens_test(test):
    """The emulator on raw frames (FrameSwitch, as the raw backend runs it) sends what p4testgen expects of
    the BMv2 program, and counts the same drops, for every test whose configuration a topology can say."""
    out, drops = harness.run_on_emulator(test)
    assert harness.mismatch(test, out) is None, f"{test['name']}: {harness.mismatch(test, out)}"
    assert drops == test["counted"]


def test_the_pages_show_what_the_testgen_results_render():
    """docs/p4.md's and docs/tofino.md's testgen blocks are what tools/testgen.py --render draws from the
    stored tests and benchmarks/results/testgen.json."""
    assert testgen.render_pages(check=True) == 0, "run python tools/testgen.py --render"
