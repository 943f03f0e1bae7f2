"""The XDP switch's ingress program per frame, without a network: nanoseconds per UPDATE by BPF_PROG_TEST_RUN.

    sudo .venv/bin/python benchmarks/xdp_bench.py [--workers 8] [--words K] [--slots 1024]

Every slot takes one UPDATE from each worker, in rank order, on one CPU: the first arrivals and those after it
that the copy absorbs, and the last, which completes the copy and leaves as the RESULT.  Each run's time is the
kernel's own (the test run's `duration`, the program alone), reported as medians and means of each kind.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import sys

import numpy as np

from hina.cliargs import OneLineParser, between
from hina.emulator.xdp.layout import MAX_WORDS


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="xdp_bench.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=between(2, 32), default=8)
    ap.add_argument("--words", type=between(1, MAX_WORDS), default=MAX_WORDS,
                    help=f"K per frame (default and at most the program's {MAX_WORDS})")
    ap.add_argument("--slots", type=between(1, 4096), default=1024)
    args = ap.parse_args(argv)
    from hina.emulator.xdp.build import cannot_load

    why = cannot_load()
    if why is not None:
        print(f"xdp_bench.py: the XDP switch: {why}", file=sys.stderr)
        return 2
    from hina.control.config import JobConfig, Member
    from hina.control.topology import Host, Topology
    from hina.emulator import fuzz
    from hina.emulator.xdp import libbpf
    from hina.emulator.xdp.tables import Program
    from hina.emulator.xdp.testrun import XdpFrameSwitch
    from hina.wire.headers import pack_header

    w, k = args.workers, args.words
    members = tuple(Member(r, 1, ("10.0.0.1", 40000 + r)) for r in range(w))
    topology = Topology(fuzz.SWITCH_MAC, fuzz.SWITCH_IP, (Host(1, "02:00:00:00:00:01", "10.0.0.1"),),
                        (JobConfig(1, w, k, 0, args.slots, members),))
    program = Program(slots=max(4096, args.slots))
    switch = XdpFrameSwitch(topology, program=program)
    switch._on_port(1)
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    rng = np.random.default_rng(1)

    def update(rank: int, slot: int) -> bytes:
        words = rng.integers(-2**20, 2**20, k).astype(">i4").tobytes()
        hina = pack_header(0, 0, 1, rank, 0, slot, slot * k, k, 5) + words
        frame = bytearray(fuzz.wrap(1, hina))
        frame[34:36] = (40000 + rank).to_bytes(2, "big")  # the member's UDP source port
        return bytes(frame)

    out = ctypes.create_string_buffer(16384)

    def run(frame: bytes) -> int:
        data = ctypes.create_string_buffer(frame, len(frame))
        ctx = libbpf.XdpMd(data=0, data_end=len(frame), ingress_ifindex=switch.loopback)
        opts = libbpf.TestRunOpts(sz=ctypes.sizeof(libbpf.TestRunOpts), data_in=ctypes.addressof(data),
                                  data_out=ctypes.addressof(out), data_size_in=len(frame), data_size_out=len(out),
                                  ctx_in=ctypes.addressof(ctx), ctx_size_in=ctypes.sizeof(ctx), repeat=1)
        libbpf._check(libbpf.lib().bpf_prog_test_run_opts(program.ingress, ctypes.byref(opts)), "BPF_PROG_TEST_RUN")
        return opts.duration

    frames = [[update(r, s) for r in range(w)] for s in range(args.slots)]
    absorbed, completing = [], []
    for slot in frames:
        for rank, frame in enumerate(slot):
            (completing if rank == w - 1 else absorbed).append(run(frame))
    switch.close()
    result = {"workers": w, "words": k, "slots": args.slots,
              "absorbed_ns": {"median": statistics.median(absorbed), "mean": statistics.mean(absorbed)},
              "completing_ns": {"median": statistics.median(completing), "mean": statistics.mean(completing)},
              "verified_instructions": libbpf.prog_info(program.ingress).verified_insns}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
