"""The XDP switch on a switch's interfaces: the program attached to each port, the emulator's control port.

`XdpSwitch` loads the program (`tables.XdpDataPlane`), attaches `hina_ingress` to every interface in
native (driver) mode, and serves the same control port as the raw emulator (`SwitchServer`: jobs,
joins, the ledger, leases, tokens and tenants, `configure` with a `Topology`), with no data socket:
frames never reach this process.  Its counters are the program's (summed over the CPUs), and its
`profile` the kernel's run-time statistics of the two programs (`bpf_stats_enabled`, held on while
it runs): the switch's CPU, which no process shows, since XDP runs in the receiving CPU's softirq.

A veth whose switch end runs the program needs its other end to take redirected frames: XDP_REDIRECT
into a veth delivers only where the peer has NAPI (an XDP program, or GRO on: `ethtool -K PEER gro
on`); `mininet/hina_net.py` and the tests turn GRO on in the hosts.
"""

from __future__ import annotations

import errno
import os
import socket

from hina.control.ledger import DEFAULT_SPACE
from hina.control.topology import Topology
from hina.emulator.server import SwitchServer

from .layout import XDP_MTU
from .libbpf import BpfError, enable_stats, prog_info, xdp_attach, xdp_detach
from .tables import XdpDataPlane


class XdpSwitch(SwitchServer):
    """hina_xdp on `interfaces` (port -> interface name), configured through the control port."""

    def __init__(self, interfaces: dict[int, str], topology: Topology | None = None, *,
                 control: tuple[str, int] = ("127.0.0.1", 0), stats_every: float = 0.0, stats_stream=None,
                 slots: int = DEFAULT_SPACE, dataplane: XdpDataPlane | None = None):
        """dataplane: one made already, instead of one on `interfaces` (the tests: an `XdpFrameSwitch`, whose
        frames are test runs)."""
        indexes = {}
        for port, name in interfaces.items():
            try:
                indexes[port] = socket.if_nametoindex(name)
            except OSError:
                raise ValueError(f"--raw {port}={name}: no interface {name!r} here") from None
        self.dataplane = dataplane or XdpDataPlane(indexes, slots=slots, topology=topology)
        self.interfaces = dict(interfaces)
        self._attached: list[int] = []
        self._stats_fd = -1
        try:
            super().__init__(self.dataplane.pipeline, control=control, impair=None, stats_every=stats_every,
                             stats_stream=stats_stream)
            self._pipe_socks = [[]]  # no data sockets: the kernel runs the rules
            self._stats_fd = enable_stats()
            for port, name in interfaces.items():
                self._attach(indexes[port], name)
        except BaseException:
            self.close()
            raise

    def _attach(self, ifindex: int, name: str) -> None:
        try:
            xdp_attach(ifindex, self.dataplane.program.ingress)
        except BpfError as exc:
            hint = (f": a veth takes an XDP program without multi-buffer support only while its peer's MTU is at "
                    f"most {XDP_MTU}") if exc.errno == errno.ERANGE else ""
            raise BpfError(exc.errno, f"interface {name}: the kernel refused the XDP program "
                                      f"({os.strerror(exc.errno)}){hint}") from None
        self._attached.append(ifindex)

    def _configure(self):
        return self.dataplane.configure

    def counters(self) -> dict:
        return {**self.dataplane.counters(), **self.impairment_counters(), "profile": self.profile_counters()}

    def profile_counters(self) -> dict:
        """The kernel's account of the programs (seconds and runs: the ingress rules per frame, the egress
        rewrite per copy) and this process's own CPU time (the control port's)."""
        cpu = os.times()
        out = {"cpu_user": cpu.user, "cpu_system": cpu.system}
        program = self.dataplane.program
        for part, fd in (("xdp_ingress", program.ingress), ("xdp_egress", program.egress)):
            info = prog_info(fd)
            out[f"{part}_s"] = info.run_time_ns / 1e9
            out[f"{part}_runs"] = info.run_cnt
        return out

    def info(self) -> dict:
        return {**super().info(), "xdp": {name: self.profile_counters()[name]
                                          for name in ("xdp_ingress_s", "xdp_ingress_runs", "xdp_egress_s",
                                                       "xdp_egress_runs")},
                "interfaces": self.interfaces}

    def close(self) -> None:
        for ifindex in self._attached:
            try:
                xdp_detach(ifindex)
            except BpfError:  # the interface went first (Mininet tearing down)
                pass
        self._attached = []
        if getattr(self, "_control", None) is not None:
            super().close()
        if self._stats_fd >= 0:
            os.close(self._stats_fd)
            self._stats_fd = -1
        self.dataplane.close()
