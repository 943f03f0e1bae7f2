"""The emulator on raw Ethernet interfaces (Mininet): AF_PACKET sockets around a `FrameSwitch`.

Port numbers map to interface names (`{1: "hsw-eth1", ...}`); every frame
read from an interface enters `FrameSwitch.process` with its port, and every
output is written to its egress interface.  Frames this process sends are
not read back (PACKET_IGNORE_OUTGOING, and the packet type as a backstop).
Configured like BMv2, from a `Topology` (at start or through the control
port's `configure`).  Frames are received into one preallocated buffer and
parsed as a view of it.  With `pipes` P > 1, each interface gets P sockets
in a PACKET_FANOUT group whose BPF program hands a hina frame to pipe
slot mod P and anything else to pipe 0 (`pipes.py`).
"""

from __future__ import annotations

import socket

from .frames import FrameSwitch
from .impair import ImpairmentConfig
from .pipes import join_fanout
from .server import SwitchServer, set_buffers
from .topology import Topology

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
_BATCH = 256
_MAX_FRAME = 65536


class RawSwitch(SwitchServer):
    def __init__(self, interfaces: dict[int, str], topology: Topology | None = None, *,
                 control: tuple[str, int] = ("127.0.0.1", 0), impair: ImpairmentConfig | None = None,
                 stats_every: float = 0.0, stats_stream=None, pipes: int = 1):
        self.frames = FrameSwitch(topology)
        self.frames.pipeline.reuse_buffers = True  # each output is sent (or copied) before the next frame
        super().__init__(self.frames.pipeline, control=control, impair=impair, stats_every=stats_every,
                         stats_stream=stats_stream, pipes=pipes)
        self.interfaces = dict(interfaces)
        self._pipe_socks = [[] for _ in range(pipes)]
        self._rx = bytearray(_MAX_FRAME)
        self._ignoring_outgoing = True  # the kernel keeps our own frames from us: no address per frame needed
        try:
            for port, ifname in self.interfaces.items():
                group = []
                for pipe in range(pipes):
                    # protocol 0 until bound: an ETH_P_ALL socket hears every interface (loopback
                    # included) until bind narrows it, and what it heard would pass for this port's
                    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                    self._pipe_socks[pipe].append((sock, port))
                    group.append(sock)
                    set_buffers(sock)
                    try:
                        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                    except OSError:  # kernels before 4.20: the packet type check in _drain does it
                        self._ignoring_outgoing = False
                    sock.bind((ifname, ETH_P_ALL))
                if pipes > 1 and not join_fanout(group, pipes):
                    self._ignoring_outgoing = False
        except OSError:
            self.close()
            raise
        self._enter_pipe(0)
        self._start_pipes()

    def _enter_pipe(self, index: int) -> None:
        self._socks = {port: sock for sock, port in self._pipe_socks[index]}

    def _configure(self):
        return self.pipe_set.configure if self.pipe_set is not None else self.frames.configure

    def counters(self) -> dict:
        if self.pipe_set is not None:
            return self.pipe_set.counters()
        return {**self.frames.counters(), **self.impairment_counters()}

    def _drain(self, sock: socket.socket, port: int) -> None:
        buf = self._rx
        view = memoryview(buf)
        ingress, copy = self._ingress, self._impaired  # an impairment may hold a frame back: it gets a copy
        if self._ignoring_outgoing:
            recv = sock.recv_into
            for _ in range(_BATCH):
                try:
                    n = recv(buf, 0, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    return
                except OSError:
                    return  # interface going away: Mininet is tearing down
                ingress(bytes(view[:n]) if copy else view[:n], port)
            return
        recvfrom = sock.recvfrom_into
        for _ in range(_BATCH):
            try:
                n, addr = recvfrom(buf, 0, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                return
            if addr[2] != PACKET_OUTGOING:
                ingress(bytes(view[:n]) if copy else view[:n], port)

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
