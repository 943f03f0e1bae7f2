"""The model's tests against changes to the P4 source: tests/tna_model.py runs p4/tna/*.p4 itself
(tests/p4_source.py), so a change to the source must change what it does, and some model test must see it.

Each mutation is text replaced in a copy of p4/tna/ (each replacement must match exactly once: reworded
source breaks this test loudly instead of leaving a mutation unmade); a representative set of the model's
tests in tests/p4/test_tofino.py then runs on the copy, in a pytest of its own (HINA_TNA_P4 names the
copy), and at least one must fail.  The unmutated copy passes the same set, so a failure is the mutation's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TNA = ROOT / "p4" / "tna"
TOFINO = "tests/p4/test_tofino.py::"
MODEL_TESTS = [
    TOFINO + "test_the_tna_model_passes_every_vector",
    TOFINO + "test_the_tna_model_tells_every_member_again_when_a_copy_is_taken_again",
    TOFINO + "test_the_models_parser_and_deparser_are_parser_p4s",
    TOFINO + "test_a_chunk_takes_the_second_passes_the_recirculation_table_counts",
    TOFINO + "test_a_child_gone_to_the_other_copy_is_stale_in_the_copy_sent_up",
    *(TOFINO + f"test_the_model_is_the_emulator_frame_for_frame_under_loss_and_duplication[{op}-{seed}]"
      for op in ("ADD", "OR", "MAX") for seed in (1, 2)),
    TOFINO + "test_the_model_is_the_emulator_frame_for_frame_in_trees[0.1-OR-4leaf-2spine]",
]

# name -> (file, text, replacement), each made in the copy
MUTATIONS = {
    "OR hands back the low half": [
        ("value_processor.p4", "value.hi = value.hi | hi;\n            rv = value.hi;",
         "value.hi = value.hi | hi;\n            rv = value.lo;")],
    "the second pass's reads swapped in value_ops": [
        ("value_processor.p4", "VALUE_READ_HI: do_or();", "VALUE_READ_HI: do_max();"),
        ("value_processor.p4", "VALUE_READ_LO: do_max();", "VALUE_READ_LO: do_or();")],
    "the second pass's reads swapped in value_plan": [
        ("slot_rules.p4", "(PASS_COMPLETE, 0, _, _, _, _, _, _): read_hi();",
         "(PASS_COMPLETE, 0, _, _, _, _, _, _): read_lo();"),
        ("slot_rules.p4", "(PASS_COMPLETE, 1, _, _, _, _, _, _): read_lo();",
         "(PASS_COMPLETE, 1, _, _, _, _, _, _): read_hi();")],
    "an arrival in copy 0 leaves the sender's bit in copy 1": [
        ("arrival_bitmap.p4", "            value.copy1 = value.copy1 & ~meta.bitmap_arg;\n", "")],
    "an arrival in copy 1 leaves the sender's bit in copy 0": [
        ("arrival_bitmap.p4", "            value.copy0 = value.copy0 & ~meta.bitmap_arg;\n", "")],
    "parse_lo and parse_hi extract each other's half (words 0-15 and 16-31 exchanged)": [
        ("parser.p4", "packet.extract(hdr.lo);\n        transition parse_hi;",
         "packet.extract(hdr.hi);\n        transition parse_hi;"),
        ("parser.p4", "packet.extract(hdr.hi);\n        transition accept;",
         "packet.extract(hdr.lo);\n        transition accept;")],
    "a 24-byte UDP length in the class short of a header": [
        ("frame_checks.p4", "0 .. HINA_MIN_UDP_LENGTH - 1: length_is(0);\n            HINA_MIN_UDP_LENGTH ..",
         "0 .. HINA_MIN_UDP_LENGTH: length_is(0);\n            HINA_MIN_UDP_LENGTH + 1 ..")],
    "a duplicate of an open copy dropped silently, never answered PENDING": [
        ("slot_rules.p4", "(PASS_NONE, _, _, MSG_UPDATE, _, STATE_OPEN, _, _, _, _, _, _, 0): "
         "result_down(FLAG_PENDING, DROP_DUPLICATE);",
         "(PASS_NONE, _, _, MSG_UPDATE, _, STATE_OPEN, _, _, _, _, _, _, _): drop_as(DROP_DUPLICATE);")],
    "every PENDING to every member (the copy never marks that its members heard one)": [
        ("pending.p4", "rv = value;\n            value = 1;", "rv = value;\n            value = 0;")],
    "a first arrival leaves the copy's PENDING mark (its next chunk's first PENDING to the sender alone)": [
        ("pending.p4", "(PASS_NONE, MSG_UPDATE, _, STATE_FREE, 1, _, _, _, _): clear_pending();",
         "(PASS_NONE, MSG_UPDATE, _, STATE_FREE, 1, _, _, _, _): NoAction();")],
    "every repeat of a copy sent up sends the partial up again (no countdown)": [
        ("pending.p4", "value = meta.children;", "value = 0;")],
    "the parent's PENDING leaves the countdown (the next repeat is answered PENDING, not sent up)": [
        ("pending.p4", "clear.execute(meta.copy);\n        HINA_PENDING_WORDS", "HINA_PENDING_WORDS")],
    "a repeat answered PENDING runs the value stages (its answer carries the copy's words, not its bitmap)": [
        ("hina.p4", "if (meta.told == 1) {", "if (meta.told == 2) {")],
    "a completion marks both copies DONE": [
        ("copy_state.p4", "(PASS_COMPLETE, MSG_UPDATE, 0): arg(0x0003);",
         "(PASS_COMPLETE, MSG_UPDATE, 0): arg(0x0303);"),
        ("copy_state.p4", "(PASS_COMPLETE, MSG_UPDATE, 1): arg(0x0300);",
         "(PASS_COMPLETE, MSG_UPDATE, 1): arg(0x0303);")],
}


def mutated(folder: Path, edits: list[tuple[str, str, str]]) -> Path:
    """A copy of p4/tna/ in `folder` with `edits` made."""
    copy = folder / "tna"
    shutil.copytree(TNA, copy, ignore=shutil.ignore_patterns("build"))
    for file, text, replacement in edits:
        source = (copy / file).read_text()
        assert source.count(text) == 1, f"p4/tna/{file} has {text!r} {source.count(text)} times, not once"
        (copy / file).write_text(source.replace(text, replacement))
    return copy


def failing_model_tests(p4: Path) -> list[str]:
    """The model tests (MODEL_TESTS) that fail with the model running the P4 source in `p4`."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", *MODEL_TESTS],
                          cwd=ROOT, env=os.environ | {"HINA_TNA_P4": str(p4)}, capture_output=True, text=True,
                          timeout=600)
    # 0: every test passed, 1: some failed; anything else (a test id not found, a crash) is this test's error
    assert proc.returncode in (0, 1), f"pytest exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return re.findall(r"^FAILED (\S+)", proc.stdout, re.M)


@pytest.mark.slow
def test_the_model_tests_pass_on_an_unmutated_copy(tmp_path):
    assert failing_model_tests(mutated(tmp_path, [])) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_model_test_fails_on_each_mutation_of_the_p4_source(tmp_path, name):
    assert failing_model_tests(mutated(tmp_path, MUTATIONS[name])), f"every model test passes where {name}"
