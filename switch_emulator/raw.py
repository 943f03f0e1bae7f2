"""The emulator on raw Ethernet interfaces (Mininet): AF_PACKET sockets around a `FrameSwitch`.

Port numbers map to interface names (`{1: "hsw-eth1", ...}`); every frame
read from an interface enters `FrameSwitch.process` with its port, and every
output is written to its egress interface.  Frames this process sends are
not read back (PACKET_IGNORE_OUTGOING, and the packet type as a backstop).
Configured like BMv2, from a `Topology` (at start or through the control
port's `configure`).  With `pipes` P > 1, each interface gets P sockets in a
PACKET_FANOUT group whose BPF program hands a hina frame to pipe slot mod P
and anything else to pipe 0 (`pipes.py`).

On Linux (`batch`, the default where `sockio.available()`) an interface's
frames are read up to 64 per `recvmmsg` into one set of buffers, and the
parser, the rules and the egress rewrite run over the whole batch in
compiled code (`batch.raw_batch`), which writes every RESULT copy, one
per member port, into a transmit ring; one `sendmmsg` on an unbound packet
socket sends the ring, each message naming its interface.  With
segmentation offload (`offload`, the default) the sockets read and write
each frame after a virtio_net_hdr: a host's super-frame is cut into its
datagrams before the rules (`hina.wire.offload.unwrap`) and each member's
replicas leave gathered into super-frames (`hina.wire.offload.gather`).
Frames that are not hina (ARP, anything else) go through
`FrameSwitch.process` as before.
With `batch=False`, impairments or a slow pipe, every frame goes through
`FrameSwitch.process` and each output is its own send, from one
preallocated receive buffer.
"""

from __future__ import annotations

import socket
import sys

import numpy as np

from hina.control.topology import Topology
from hina.wire import sockio
from hina.wire.offload import MAX_SEGMENTS, VNET_HDR_BYTES, gather, unwrap
from hina.wire.sockio import (
    ETH_P_ALL,
    PACKET_IGNORE_OUTGOING,
    PACKET_OUTGOING,
    SOCKADDR_LL_BYTES,
    SOL_PACKET,
    set_buffers,
    sockaddr_ll,
    vnet_headers,
)

from .batch import raw_batch, warm
from .frames import FrameSwitch
from .impair import ImpairmentConfig
from .pipes import join_fanout
from .server import SwitchServer

_UNWRAPPED = 512  # frames of one unwrapping: super-frames cut into datagrams (jumbo frames: 4.7 MB)
_UNWRAPPED_BYTES = 9216  # a datagram's frame at most (MTU 9000, the Ethernet header, to 9 KiB); longer: passed
_BATCH = 256
_MAX_FRAME = 65536


class RawSwitch(SwitchServer):
    def __init__(self, interfaces: dict[int, str], topology: Topology | None = None, *,
                 control: tuple[str, int] = ("127.0.0.1", 0), impair: ImpairmentConfig | None = None,
                 stats_every: float = 0.0, stats_stream=None, pipes: int = 1, batch: bool | None = None,
                 offload: bool = True):
        self.frames = FrameSwitch(topology)
        self.frames.pipeline.reuse_buffers = True  # each output is sent (or copied) before the next frame
        super().__init__(self.frames.pipeline, control=control, impair=impair, stats_every=stats_every,
                         stats_stream=stats_stream, pipes=pipes)
        self.interfaces = dict(interfaces)
        self._pipe_socks = [[] for _ in range(pipes)]
        self._rx = bytearray(_MAX_FRAME)
        self._ignoring_outgoing = True  # the kernel keeps our own frames from us: no address per frame needed
        self.batch = sockio.available() if batch is None else bool(batch and sockio.available())
        if self.batch:
            warm(raw=True)  # compiled before the first frame waits on it
        # the batched path reads every frame after a virtio_net_hdr: a host that leaves its datagrams whole for
        # the device to cut (segmentation offload) hands a veth one super-frame, which `unwrap` cuts here
        self.vnet = self.batch and not self._holds and offload and sys.byteorder == "little"
        self._io: sockio.BatchSocket | None = None  # made where the frames are served (a pipe: after the fork)
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
                    if self.vnet:
                        vnet_headers(sock)
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
        return {**self.frames.counters(), **self.impairment_counters(), "profile": self.profile_counters()}

    def _drain(self, sock: socket.socket, port: int) -> None:
        if self.batch and not self._holds:
            return self._drain_batched(sock, port)
        buf = self._rx
        view = memoryview(buf)
        ingress, copy = self._ingress, self._holds  # an impairment or a slow pipe may hold a frame: it gets a copy
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
            _ifname, _protocol, packet_type, *_ = addr
            if packet_type != PACKET_OUTGOING:
                ingress(bytes(view[:n]) if copy else view[:n], port)

    def _batch_io(self) -> sockio.BatchSocket:
        """The receive buffers and transmit ring of this process, and the unbound packet socket
        that sends the ring (made on first use, after a pipe's fork)."""
        if self._io is None:
            self._tx_sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: hears nothing
            set_buffers(self._tx_sock)
            if self.vnet:  # the replicas go out gathered into super-frames (`offload.gather`)
                vnet_headers(self._tx_sock)
            self._io = io = sockio.BatchSocket(self._tx_sock, entries=len(self._punt), entry_bytes=_MAX_FRAME,
                                               name_bytes=SOCKADDR_LL_BYTES)
            ports = max(self.interfaces, default=0) + 1
            self._port_names = np.zeros((ports, SOCKADDR_LL_BYTES), np.uint8)  # all zero: no interface
            for port, ifname in self.interfaces.items():
                self._port_names[port] = np.frombuffer(sockaddr_ll(ifname), np.uint8)
            if self.vnet:  # where `gather` puts the replicas' super-frames, and `unwrap` a batch's datagrams
                self._gathered = sockio.BatchSocket(self._tx_sock, entries=1, entry_bytes=64,
                                                    tx_messages=io.tx_capacity,
                                                    tx_bytes=len(io.tx_array) + VNET_HDR_BYTES * io.tx_capacity,
                                                    name_bytes=SOCKADDR_LL_BYTES)
                self._taken = np.zeros(io.tx_capacity, np.bool_)
                self._wire = np.zeros(_UNWRAPPED * _UNWRAPPED_BYTES, np.uint8)
                # strided, as the mmsghdr lengths are: raw_batch is compiled for that layout alone
                self._wire_lengths = np.zeros(2 * _UNWRAPPED, np.uint32)[::2]
                self._wire_names = np.zeros((_UNWRAPPED, SOCKADDR_LL_BYTES), np.uint8)
                self._origin = np.zeros(_UNWRAPPED, np.int64)
                self._passed = np.zeros(io.entries, np.int64)
        return self._io

    def _drain_batched(self, sock: socket.socket, port: int) -> None:
        io = self._batch_io()
        fd, rx, check_outgoing = sock.fileno(), io.rx_array, not self._ignoring_outgoing
        clock, spent = self.clock, self.profile
        for _ in range(_BATCH // io.entries):
            t = clock()
            try:
                n = io.recv(fd)
            except OSError:
                return  # interface going away: Mininet is tearing down
            t1 = clock()
            spent["recv"] += t1 - t
            if not self.vnet:
                self._rules(port, rx, io.entry_bytes, io.rx_lengths, io.rx_names_array, n, check_outgoing, t1)
            else:  # the batch's hina datagrams (super-frames cut), then the rest, each with its virtio_net_hdr
                entry = 0
                while entry < n:
                    entry, k, passed = unwrap(rx, io.entry_bytes, io.rx_lengths, io.rx_names_array, entry, n,
                                              self._wire, _UNWRAPPED_BYTES, self._wire_lengths, self._wire_names,
                                              self._origin, _UNWRAPPED, self._passed)
                    t2 = clock()
                    spent["unwrap"] += t2 - t1
                    t1 = t2
                    self._rules(port, self._wire, _UNWRAPPED_BYTES, self._wire_lengths, self._wire_names, k,
                                check_outgoing, t1)
                    for j in range(passed):  # not hina: the MAC table, frame by frame, its header kept
                        at = int(self._passed[j]) * io.entry_bytes
                        raw = bytes(rx[at : at + int(io.rx_lengths[self._passed[j]])])
                        for dest, out in self.frames.process(port, raw[VNET_HDR_BYTES:]):
                            self._send(out, dest, raw[:VNET_HDR_BYTES])
            spent["received"] += n
            spent["receives"] += n > 0
            if n < io.entries:
                return

    def _rules(self, port: int, rx, stride: int, lengths, names, n: int, check_outgoing: bool, t1: float) -> None:
        """The compiled parser, rules and egress rewrite over frames 0..n-1 of `rx`, the replicas sent."""
        io, p, punt, clock, spent = self._io, self.frames.pipeline, self._punt, self.clock, self.profile
        done = 0
        while done < n:  # the ring holds at least one entry's outputs: each call gets past one
            done, messages, _, punted, unsent = raw_batch(
                *p.kernel_args, rx, stride, lengths, names, check_outgoing, done, n, port, self.frames.hosts_bytes,
                self._port_names, punt, io.tx_array, io.tx_names_array, io.tx_iov, io.tx_address, io.tx_capacity)
            t2 = clock()
            spent["rules"] += t2 - t1
            if messages and self.vnet:
                g = self._gathered
                self._sent(g, gather(io.tx_array, io.tx_names_array, io.tx_iov, io.tx_address, messages, g.tx_array,
                                     g.tx_names_array, g.tx_iov, g.tx_address, MAX_SEGMENTS, self._taken))
            else:
                self._sent(io, messages)
            t1 = clock()
            spent["send"] += t1 - t2
            self.tx_errors += unsent
            for k in range(punted):  # not hina: the MAC table, frame by frame
                at = int(punt[k]) * stride
                frame = bytes(rx[at : at + int(lengths[punt[k]])])
                for dest, out in self.frames.process(port, frame):
                    self._send(out, dest)

    def _send_all(self, frames: list[tuple[bytes, int]]) -> None:
        """The impaired path's outputs, each to its port's interface, with one sendmmsg on the unbound packet
        socket where the sockets batch (a port no interface serves: `_send` counts it)."""
        if not self.batch:
            return super()._send_all(frames)
        io = self._batch_io()
        names = self._port_names
        self._send_ring(io, frames, lambda port: names[port] if 0 <= port < len(names) and names[port, 0] else None)

    def close(self) -> None:
        super().close()
        if self._tx_sock is not None:
            self._tx_sock.close()

    def _process(self, frame: bytes, port: int):
        return self.frames.process(port, frame)

    def _send(self, frame: bytes, port: int, vnet: bytes = bytes(VNET_HDR_BYTES)) -> None:
        """One frame out of the port's socket; with virtio_net_hdrs (`self.vnet`) after `vnet` (a frame
        forwarded as it came keeps its own: a super-frame, or a partial checksum, the kernel completes)."""
        sock = self._socks.get(port)
        if sock is None:
            self.tx_errors += 1
            return
        try:
            sock.send(vnet + bytes(frame) if self.vnet else frame)
        except OSError:
            self.tx_errors += 1  # e.g. frame larger than the interface's MTU
