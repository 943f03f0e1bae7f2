"""The packet vectors (tests/vectors/) on the XDP switch: through BPF_PROG_TEST_RUN frame for frame, and over
veth pairs with the program attached (root), as tests/p4/test_vectors.py runs them on the emulator and BMv2.

A case the XDP switch and the emulator disagree on is a bug in one of them, never a reason to loosen a vector.
"""

import pytest
import veth_harness
from helpers import VECTOR_CASES, check_case, load_case

from hina.control.topology import Topology
from hina.emulator.xdp.build import cannot_load

pytestmark = pytest.mark.skipif(cannot_load() is not None, reason=f"the XDP switch: {cannot_load()}")
IDS = [p.stem for p in VECTOR_CASES]


@pytest.mark.parametrize("path", VECTOR_CASES, ids=IDS)
def test_xdp_program_passes_under_test_runs(path, xdp_program):
    """The kernel runs the program on each frame (BPF_PROG_TEST_RUN), the egress rewrite on each copy."""
    from hina.emulator.xdp.testrun import XdpFrameSwitch

    case = load_case(path)
    sw = XdpFrameSwitch(Topology.from_config(case["topology"]), program=xdp_program)
    try:
        out = [sent for pkt in case["packets"] for sent in sw.process(pkt["port"], bytes.fromhex(pkt["frame"]))]
        check_case(case, out, sw.counters()["drops"])
    finally:
        sw.close()


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("path", VECTOR_CASES, ids=IDS)
def test_xdp_switch_over_veths_passes(path):
    """The same cases through `python -m hina.emulator --raw ... --xdp`: the program attached to the switch's
    veths, its RESULTs broadcast by the kernel through each job's devmap, every copy addressed by the devmap's
    egress program, configured by the controller as the emulator is."""
    check_case(load_case(path), *veth_harness.run_case(load_case(path), veth_harness.start_xdp, settle=0.05))
