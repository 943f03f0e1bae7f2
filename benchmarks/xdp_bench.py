"""The XDP switch's ingress program per frame, without a network: nanoseconds per UPDATE by BPF_PROG_TEST_RUN.

    sudo .venv/bin/python benchmarks/xdp_bench.py [--workers 8] [--words K] [--slots 1024]

Every slot takes one UPDATE from each worker, in rank order, on one CPU: the first arrivals and those after it
that the copy absorbs, and the last, which completes the copy and leaves as the RESULT.  Each run's time is the
kernel's own (the test run's `duration`, the program alone), reported as medians and means of each kind.
"""

from __future__ import annotations

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
    from hina.wire.frames import encapsulate, ip_bytes, mac_bytes
    from hina.wire.headers import UDP_PORT, pack_header

    w, k = args.workers, args.words
    host = Host(1, "02:00:00:00:00:01", "10.0.0.1")
    members = tuple(Member(r, 1, (host.ip, 40000 + r)) for r in range(w))
    topology = Topology(fuzz.SWITCH_MAC, fuzz.SWITCH_IP, (host,), (JobConfig(1, w, k, 0, args.slots, members),))
    program = Program(slots=max(4096, args.slots))
    switch = XdpFrameSwitch(topology, program=program)
    switch.on_port(1)
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    rng = np.random.default_rng(1)

    def update(rank: int, slot: int) -> bytes:
        words = rng.integers(-2**20, 2**20, k).astype(">i4").tobytes()
        hina = pack_header(0, 0, 1, rank, 0, slot, slot * k, k, 5) + words
        return encapsulate(hina, src_mac=mac_bytes(host.mac), dst_mac=mac_bytes(fuzz.SWITCH_MAC),
                           src_ip=ip_bytes(host.ip), dst_ip=ip_bytes(fuzz.SWITCH_IP), sport=40000 + rank,
                           dport=UDP_PORT, ident=1)

    def run(frame: bytes) -> int:
        return libbpf.prog_test_run(program.ingress, frame, ingress_ifindex=switch.loopback).duration

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
