"""The emulator on raw Ethernet interfaces (Mininet): AF_PACKET sockets around a `FrameSwitch`.

Port numbers map to interface names (`{1: "hsw-eth1", ...}`); every frame
read from an interface enters `FrameSwitch.process` with its port, and every
output is written to its egress interface.  Frames this process sends are
not read back (PACKET_IGNORE_OUTGOING, and the packet type as a backstop).
Configured like BMv2, from a `Topology` (at start or through the control
port's `configure`).  With `pipes` P > 1, each interface gets P sockets in a
PACKET_FANOUT group whose BPF program hands a hina frame to pipe slot mod P
and anything else to pipe 0 (`pipes.py`).

On Linux (`batch`, the default where `mmsg.available()`) an interface's
frames are read up to 64 per `recvmmsg` into one set of buffers, and the
parser, the rules and the egress rewrite run over the whole batch in
compiled code (`dataplane.raw_batch`), which writes every RESULT copy, one
per member port, into a transmit ring; one `sendmmsg` on an unbound packet
socket sends the ring, each message naming its interface.  Frames that are
not hina (ARP, anything else) go through `FrameSwitch.process` as before.
With `batch=False` or impairments, every frame goes through
`FrameSwitch.process` and each output is its own send, from one
preallocated receive buffer.
"""

from __future__ import annotations

import socket
import struct

import numpy as np

from hina.control.topology import Topology
from hina.wire import mmsg
from hina.wire.mmsg import set_buffers

from .dataplane import SOCKADDR_LL, raw_batch, warm
from .frames import FrameSwitch
from .impair import ImpairmentConfig
from .pipes import join_fanout
from .server import SwitchServer

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
PACKET_OUTGOING = 4
_BATCH = 256
_MAX_FRAME = 65536


class RawSwitch(SwitchServer):
    def __init__(self, interfaces: dict[int, str], topology: Topology | None = None, *,
                 control: tuple[str, int] = ("127.0.0.1", 0), impair: ImpairmentConfig | None = None,
                 stats_every: float = 0.0, stats_stream=None, pipes: int = 1, batch: bool | None = None):
        self.frames = FrameSwitch(topology)
        self.frames.pipeline.reuse_buffers = True  # each output is sent (or copied) before the next frame
        super().__init__(self.frames.pipeline, control=control, impair=impair, stats_every=stats_every,
                         stats_stream=stats_stream, pipes=pipes)
        self.interfaces = dict(interfaces)
        self._pipe_socks = [[] for _ in range(pipes)]
        self._rx = bytearray(_MAX_FRAME)
        self._ignoring_outgoing = True  # the kernel keeps our own frames from us: no address per frame needed
        self.batch = mmsg.available() if batch is None else bool(batch and mmsg.available())
        if self.batch:
            warm(raw=True)  # compiled before the first frame waits on it
        self._io: mmsg.BatchSocket | None = None  # made where the frames are served (a pipe: after the fork)
        self._tx_sock: socket.socket | None = None
        self._punt = np.zeros(64, np.int64)
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
        if self.batch and not self._impaired:
            return self._drain_batched(sock, port)
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

    def _batch_io(self) -> mmsg.BatchSocket:
        """The receive buffers and transmit ring of this process, and the unbound packet socket
        that sends the ring (made on first use, after a pipe's fork)."""
        if self._io is None:
            self._tx_sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: hears nothing
            set_buffers(self._tx_sock)
            self._io = mmsg.BatchSocket(self._tx_sock, entries=len(self._punt), entry_bytes=_MAX_FRAME,
                                        name_bytes=SOCKADDR_LL)
            ports = max(self.interfaces, default=0) + 1
            self._port_names = np.zeros((ports, SOCKADDR_LL), np.uint8)
            for port, ifname in self.interfaces.items():
                # struct sockaddr_ll: family, protocol (IPv4, network order), interface index; the
                # frame carries its own Ethernet header
                name = struct.pack("=HHiHBB8x", socket.AF_PACKET, socket.htons(0x0800),
                                   socket.if_nametoindex(ifname), 0, 0, 0)
                self._port_names[port] = np.frombuffer(name, np.uint8)
        return self._io

    def _drain_batched(self, sock: socket.socket, port: int) -> None:
        io = self._batch_io()
        p, fd, punt, rx = self.frames.pipeline, sock.fileno(), self._punt, io.rx_array
        rewrite, check_outgoing = self.frames.rewrite_table, not self._ignoring_outgoing
        for _ in range(_BATCH // io.entries):
            try:
                n = io.recv(fd)
            except OSError:
                return  # interface going away: Mininet is tearing down
            done = 0
            while done < n:  # the ring holds at least one entry's outputs: each call gets past one
                done, messages, _, punted, unsent = raw_batch(
                    p.job_index, p.meta, p.auth, p.copies, p.values, p.counts, p.names, rx, io.entry_bytes,
                    io.rx_lengths,
                    io.rx_names_array, check_outgoing, done, n, port, rewrite, self._port_names, punt,
                    io.tx_array, io.tx_names_array, io.tx_iov, io.tx_address, io.tx_capacity)
                if messages:
                    self.tx_errors += io.send(messages)
                self.tx_errors += unsent
                for k in range(punted):  # not hina: the MAC table, frame by frame
                    at = int(punt[k]) * io.entry_bytes
                    frame = bytes(rx[at : at + int(io.rx_lengths[punt[k]])])
                    for dest, out in self.frames.process(port, frame):
                        self._send(out, dest)
            if n < io.entries:
                return

    def close(self) -> None:
        super().close()
        if self._tx_sock is not None:
            self._tx_sock.close()

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
