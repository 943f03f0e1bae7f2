"""Packet test vectors (tests/vectors/): the emulator's raw-frame path must pass every case; so must BMv2.

A case the two disagree on is a bug in one of them, never a reason to
loosen a vector.
"""

import functools
import json

import make_vectors
import pytest
import veth_harness
from helpers import VECTOR_CASES as CASES
from helpers import check_case as check
from helpers import child_gone_stale_case, copy_taken_again_case
from helpers import load_case as load

from hina.control.topology import Topology
from hina.emulator.frames import FrameSwitch


def test_vectors_on_disk_match_their_generator():
    built = {c["name"]: c for c in make_vectors.build_cases()}
    on_disk = {p.stem: load(p) for p in CASES}
    assert on_disk.keys() == built.keys()
    for name, case in built.items():
        assert json.loads(json.dumps(case)) == on_disk[name], f"{name}: run python tests/make_vectors.py"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_emulator_passes(path):
    case = load(path)
    sw = FrameSwitch(Topology.from_config(case["topology"]))
    out = []
    for pkt in case["packets"]:
        out += sw.process(pkt["port"], bytes.fromhex(pkt["frame"]))
    check(case, out, sw.counters()["drops"])


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("pipes,batch", [(1, True), (4, True), (1, False)], ids=["P1", "P4", "P1-per-frame"])
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_emulator_raw_backend_over_veths_passes(path, pipes, batch):
    """The same cases through `python -m hina.emulator --raw --pipes P`, configured by the controller
    (with P = 4 each frame reaches pipe slot % 4 through PACKET_FANOUT; non-hina frames pipe 0): in
    recvmmsg batches through the compiled parser and egress (`batch.raw_batch`), and with
    --no-batch frame by frame through `FrameSwitch`.  tests/emulator/test_pipes.py runs the UDP-level cases
    through P = 1 and 4 UDP switches."""
    case = load(path)
    start = functools.partial(veth_harness.start_emulator, pipes=pipes, batch=batch)
    check(case, *veth_harness.run_case(case, start, settle=0.05))


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bmv2_passes(p4_build, path):
    case = load(path)
    check(case, *veth_harness.run_case(case, veth_harness.start_bmv2, settle=0.3))


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
def test_bmv2_tells_every_member_again_when_a_copy_is_taken_again(p4_build):
    """A copy's PENDING mark is cleared by its next chunk's first arrival (no vector reaches it: it takes a
    copy completed, the other copy completed and the first taken again)."""
    case = copy_taken_again_case()
    check(case, *veth_harness.run_case(case, veth_harness.start_bmv2, settle=0.3))


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("version", [0, 1])
def test_bmv2_finds_a_child_gone_to_the_other_copy_stale_in_the_copy_sent_up(p4_build, version):
    """A leaf's copy sent up with no total yet, and a child that has moved to the other copy sends its late
    UPDATE there: STALE, nothing up again (helpers.child_gone_stale_case; no vector reaches it)."""
    case = child_gone_stale_case(version)
    check(case, *veth_harness.run_case(case, veth_harness.start_bmv2, settle=0.3))
