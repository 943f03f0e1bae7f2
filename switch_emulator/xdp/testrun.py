"""The XDP switch without a network: frames through BPF_PROG_TEST_RUN, as `FrameSwitch` takes them.

`XdpFrameSwitch.process(ingress_port, frame)` runs the loaded program (`hina_ingress`) on one frame
and returns the (egress port, frame) pairs that would leave, as `hina.emulator.FrameSwitch.process`
does for the emulator: so the packet vectors, the fuzzer and the concurrency tests hold the kernel's
rules and the emulator's to the same frames.  A test run performs no redirect, so this module does
what the kernel does after one: the ingress program's XDP metadata says where the frame goes
(`layout.MetaKind`: a job's group, the sender, a port's host, a port, the flood group), and each copy
goes through the egress rewrite (`hina_egress_test`, the devmap program's code as a plain XDP
program), one run per replica in the group's order, on the CPU the ingress ran on.

Needs what loading the program needs (`build.cannot_load`): root, clang and libbpf.
"""

from __future__ import annotations

import ctypes
import os
import socket

from hina.control.ledger import DEFAULT_SPACE
from hina.control.topology import Topology

from .layout import Meta, MetaKind
from .libbpf import XDP_PASS, prog_test_run
from .tables import Program, XdpDataPlane, _bytes, _u32

META_BYTES = ctypes.sizeof(Meta)


class XdpFrameSwitch(XdpDataPlane):
    """The XDP program on frames handed to it: `process(ingress_port, frame)` -> [(egress port, frame)]."""

    def __init__(self, topology: Topology | None = None, slots: int = DEFAULT_SPACE, program: Program | None = None):
        super().__init__(interfaces=None, slots=slots, topology=topology, program=program)
        self.loopback = socket.if_nametoindex("lo")  # a test run's frames arrive on an interface that exists

    def on_port(self, port: int) -> None:
        """Frames of the next run arrive on (or, for the egress rewrite, leave by) switch port `port`."""
        self.program.maps["ports"].update(_bytes(_u32(self.loopback)), _bytes(_u32(port)))

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """What leaves the switch for `frame` arriving on `ingress_port`; the registers change as on the wire.
        The calling thread stays on one CPU for the call (the egress program numbers a broadcast's copies
        per CPU, as the kernel runs them on the CPU the frame arrived on)."""
        pinned = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {min(pinned)})
        try:
            return self._process(ingress_port, frame)
        finally:
            os.sched_setaffinity(0, pinned)

    def _process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        self.on_port(ingress_port)
        out = prog_test_run(self.program.ingress, bytes(frame), ingress_ifindex=self.loopback).frame
        meta = Meta.from_buffer_copy(out[:META_BYTES])
        kind = MetaKind(meta.kind)
        if kind == MetaKind.NONE:
            return []
        if kind == MetaKind.GROUP:
            job = self.pipeline.jobs[meta.job_id]
            ports = [port for port, _ in self.pipeline.replicas(job.cfg)]
        elif kind == MetaKind.FLOOD:
            ports = [p for p in self.flood_ports(self.topology) if p != ingress_port] if self.topology else []
        else:
            ports = [meta.port]
        sent = []
        for port in ports:
            self.on_port(port)
            run = prog_test_run(self.program.egress_test, out, meta=META_BYTES, ingress_ifindex=self.loopback)
            if run.retval == XDP_PASS:
                sent.append((port, run.frame[META_BYTES:]))
        return sent
