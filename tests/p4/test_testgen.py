"""p4testgen's tests of both P4 programs (tests/testgen/, written by tools/testgen.py): the BMv2 program's
on simple_switch_grpc through hina's own P4Runtime client, the TNA program's on its model, and the stored
tests against what p4testgen generates with the same seed.  What a generated test is, and how each target
runs it: tests/testgen_harness.py.  A test a target fails is a discrepancy between p4testgen's reading of
the program and the target's: docs/p4.md and docs/tofino.md list each one found and what changed.
"""

from __future__ import annotations

import pytest
import testgen  # tools/, on the path by tests/conftest.py
import testgen_harness as harness

BMV2_TESTS = harness.stored("bmv2")["tests"]
TOFINO_TESTS = harness.stored("tofino")["tests"]


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


def test_the_stored_tests_say_how_they_were_made():
    for target in testgen.TARGETS:
        data = harness.stored(target)
        if not data["tests"]:
            continue
        assert data["seed"] == testgen.SEED and data["max_tests"] == testgen.MAX_TESTS
        assert data["program"] == testgen.TARGETS[target]["program"]
        assert len(data["tests"]) <= data["max_tests"] and all(t["packet"] for t in data["tests"])


# -- the targets pass them -------------------------------------------------------------------------

@pytest.mark.parametrize("test", TOFINO_TESTS, ids=[t["name"] for t in TOFINO_TESTS])
def test_the_tna_model_passes_p4testgens_test(test):
    out, _ = harness.run_on_model(test)
    assert harness.mismatch(test, out) is None, f"{test['name']}: {harness.mismatch(test, out)}"


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("test", BMV2_TESTS, ids=[t["name"] for t in BMV2_TESTS])
def test_bmv2_passes_p4testgens_test(p4_build, test):
    out = harness.run_on_bmv2(test)
    assert harness.mismatch(test, out) is None, f"{test['name']}: {harness.mismatch(test, out)}"
