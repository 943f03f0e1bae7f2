"""One slot driven from several CPUs at once stays exact on the XDP switch: processes pinned to different CPUs run
the program (BPF_PROG_TEST_RUN, which runs it on the caller's CPU) on the UPDATEs of the same slots at the same
time, as a veth's frames are processed on their senders' CPUs."""

import ctypes
import multiprocessing
import os

import numpy as np
import pytest

from hina.control.config import JobConfig, Member
from hina.control.topology import Host, Topology
from hina.emulator import fuzz
from hina.emulator.xdp import build
from hina.emulator.xdp.layout import Meta, MetaKind
from hina.emulator.xdp.libbpf import prog_test_run
from hina.wire.headers import pack_header

pytestmark = pytest.mark.skipif(build.cannot_load() is not None, reason=f"the XDP switch: {build.cannot_load()}")

WORKERS, WORDS, SLOTS = 32, 865, 256


def topology() -> Topology:
    """32 ranks behind port 1, each at UDP port 40000 + rank: every frame arrives on the same port."""
    hosts = (Host(1, "02:00:00:00:00:01", "10.0.0.1"),)
    members = tuple(Member(w, 1, ("10.0.0.1", 40000 + w)) for w in range(WORKERS))
    return Topology(fuzz.SWITCH_MAC, fuzz.SWITCH_IP, hosts, (JobConfig(1, WORKERS, WORDS, 0, SLOTS, members),))


def update(worker: int, slot: int, words: np.ndarray) -> bytes:
    hina = pack_header(0, 0, 1, worker, 0, slot, slot * WORDS, WORDS, 5) + words.astype(">i4").tobytes()
    frame = bytearray(fuzz.wrap(1, hina))
    frame[34:36] = (40000 + worker).to_bytes(2, "big")
    return bytes(frame)


def test_one_slot_from_several_cpus_sums_exactly(xdp_program, tmp_path):
    """Each of two processes, pinned to CPUs of their own, sends 16 of the 32 workers' UPDATEs into every slot,
    the two starting each slot together: every slot completes once, its RESULT is the exact sum, no frame is
    lost or counted twice (the slot's lock; without it, two CPUs adding into one copy lose words and
    arrivals).  Processes, not threads: threads would take turns at Python's lock between their test runs."""
    from hina.emulator.xdp.testrun import XdpFrameSwitch

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    sw = XdpFrameSwitch(topology(), program=xdp_program)
    sw.on_port(1)
    rng = np.random.default_rng(7)
    inputs = rng.integers(-(2**31), 2**31, size=(WORKERS, WORDS), dtype=np.int64)
    frames = [[update(w, s, inputs[w] + s) for s in range(SLOTS)] for w in range(WORKERS)]
    together = multiprocessing.get_context("fork").Barrier(2)

    def drive(half: int, out) -> None:
        os.sched_setaffinity(0, {cpus[half]})
        for s in range(SLOTS):
            together.wait()  # both CPUs into the same slot at the same moment
            for w in range(half * 16, half * 16 + 16):
                frame = prog_test_run(xdp_program.ingress, frames[w][s], ingress_ifindex=sw.loopback).frame
                if Meta.from_buffer_copy(frame).kind == MetaKind.GROUP:
                    out.write(s.to_bytes(2, "big") + frame[ctypes.sizeof(Meta):][58:58 + 4 * WORDS])

    pids = []
    for half in (0, 1):
        pid = os.fork()
        if pid == 0:  # the child: its half of the frames, its RESULTs into its file
            status = 1
            try:
                with open(tmp_path / f"results-{half}", "wb") as out:
                    drive(half, out)
                status = 0
            finally:
                os._exit(status)
        pids.append(pid)
    assert [os.waitpid(pid, 0)[1] for pid in pids] == [0, 0]
    record = 2 + 4 * WORDS
    done = []
    for half in (0, 1):
        data = (tmp_path / f"results-{half}").read_bytes()
        done += [(int.from_bytes(data[i : i + 2], "big"), half, data[i + 2 : i + record])
                 for i in range(0, len(data), record)]
    assert sorted(s for s, _, _ in done) == list(range(SLOTS))  # each slot completed exactly once
    for s, _, words in done:
        want = ((inputs + s).sum(axis=0) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        assert np.array_equal(np.frombuffer(words, ">i4"), want), f"slot {s}"
    counters = sw.counters()
    assert counters["jobs"][1]["updates"] == WORKERS * SLOTS and counters["drops"] == {}
    assert {half for _, half, _ in done} == {0, 1}  # both CPUs completed slots: their frames met in the slots
    sw.close()
