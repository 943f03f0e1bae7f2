"""The emulator on raw Ethernet interfaces (Mininet): AF_PACKET sockets around a `FrameSwitch`.

Port numbers map to interface names (`{1: "hsw-eth1", ...}`); every frame
read from an interface enters `FrameSwitch.process` with its port, and every
output is written to its egress interface.  Frames this process sends are
not read back (PACKET_IGNORE_OUTGOING, and the packet type as a backstop).
Configured like BMv2, from a `Topology` (at start or through the control
port's `configure`).
"""

from __future__ import annotations

import socket

from .frames import FrameSwitch
from .impair import ImpairmentConfig
from .server import SwitchServer, set_buffers
from .topology import Topology

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
_BATCH = 256


class RawSwitch(SwitchServer):
    def __init__(self, interfaces: dict[int, str], topology: Topology | None = None, *,
                 control: tuple[str, int] = ("127.0.0.1", 0), impair: ImpairmentConfig | None = None,
                 stats_every: float = 0.0, stats_stream=None):
        self.frames = FrameSwitch(topology)
        super().__init__(self.frames.pipeline, control=control, impair=impair, stats_every=stats_every,
                         stats_stream=stats_stream)
        self.interfaces = dict(interfaces)
        self._socks: dict[int, socket.socket] = {}
        try:
            for port, ifname in self.interfaces.items():
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                self._socks[port] = sock
                set_buffers(sock)
                try:
                    sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                except OSError:
                    pass  # kernels before 4.20: the packet type check below does it
                sock.bind((ifname, 0))
        except OSError:
            for sock in self._socks.values():
                sock.close()
            self._control.close()
            raise

    def _data_sockets(self):
        return [(sock, port) for port, sock in self._socks.items()]

    def _configure(self):
        return self.frames.configure

    def counters(self) -> dict:
        return {**self.frames.counters(), **self.impairment_counters()}

    def _drain(self, sock: socket.socket, port: int) -> None:
        for _ in range(_BATCH):
            try:
                frame, addr = sock.recvfrom(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                return  # interface going away: Mininet is tearing down
            if addr[2] != PACKET_OUTGOING:
                self._ingress(frame, port)

    def _process(self, frame: bytes, port: int):
        return self.frames.process(port, frame)

    def _send(self, frame: bytes, port: int) -> None:
        sock = self._socks.get(port)
        if sock is None:
            self.tx_errors += 1
            return
        try:
            sock.send(frame)
        except OSError:
            self.tx_errors += 1  # e.g. frame larger than the interface's MTU
