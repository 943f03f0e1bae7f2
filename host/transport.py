"""How a worker's frames reach the switch: a UDP socket to the switch's data port.

A transport has `send(frame)`, `recv(timeout) -> frame | None` and
`close()`; `hina.emulator.inproc.InProcessPort` has the same shape for
in-process runs.  `UdpTransport` also offers `batcher`: `Worker` then
moves whole batches with `recvmmsg` / `sendmmsg`, with UDP segmentation
offload where asked (the socket fast path, `hina.wire.sockio`).  The UDP
socket is connected to the switch, so the kernel drops datagrams from
anyone else before they reach the worker.  `RawTransport` builds and
parses the frames itself (`hina.wire.frames`).
"""

from __future__ import annotations

import select
import socket
import time

from hina.wire import sockio
from hina.wire.frames import ETH_DST_AT, HINA_AT, MAC_BYTES, UDP_AT, encapsulate, ip_bytes, mac_bytes, udp_of
from hina.wire.headers import UDP_PORT
from hina.wire.sockio import ETH_P_IP, set_buffers


class UdpTransport:
    """A worker's UDP socket to a switch's data port (`switch`: host, port), bound to `bind` (default a port
    of the kernel's choice on loopback) and connected, so that only the switch's datagrams reach it.  The
    switch must authorize `address` (a join through the control port does).  `send`, `recv(timeout)` and
    `batcher` (recvmmsg/sendmmsg batches, which `Worker` uses) are the transport interface."""

    def __init__(self, switch: tuple[str, int], *, bind: tuple[str, int] = ("127.0.0.1", 0),
                 segment_offload: bool = False):
        """segment_offload: send a batch's back-to-back frames as one buffer the kernel cuts into datagrams
        (UDP_SEGMENT; `batcher`), where the kernel has it: for a switch that takes them whole, the emulator
        with one pipe (set it before `Worker` calls `batcher`; a switch with pipes steers each datagram by
        its slot, and BMv2 reads frames as the link carries them)."""
        self.segment_offload = segment_offload
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.buffer_bytes = set_buffers(self._sock)
        self._sock.bind(bind)
        self._sock.connect(switch)
        self._sock.setblocking(False)  # recv tries first and waits only when nothing is there
        self.refused = self.received = 0  # ICMP port unreachable seen (nothing listens at `switch`), frames in

    @property
    def address(self) -> tuple[str, int]:
        """Where this worker's UPDATEs come from: what the switch must authorize."""
        return self._sock.getsockname()

    def batcher(self, frame_bytes: int, frames: int):
        """Batched I/O on this socket for `Worker`: a `BatchSocket` that receives up to 64 frames of at
        most `frame_bytes` per `recvmmsg` and sends up to `frames` with one `sendmmsg`; None where
        recvmmsg is unavailable."""
        if not sockio.available():
            return None
        # (no receive offload, UDP_GRO: a run of the switch's super-frame handed over whole measured slower here,
        # with resends, than the kernel cutting it for the socket; docs/budget.md)
        io = sockio.BatchSocket(self._sock, entries=64, entry_bytes=frame_bytes, tx_messages=frames,
                                tx_bytes=frames * frame_bytes, name_bytes=0)
        if self.segment_offload:  # every frame of the ring is frame_bytes long: UDP_SEGMENT where the path allows
            io.offload_segments(frame_bytes)
        return io

    def send(self, frame: bytes) -> None:
        try:
            self._sock.send(frame)
        except BlockingIOError:  # the send buffer is full (a shaped link's queue): wait for room, as blocking would
            select.select((), (self._sock,), (), 1.0)
            try:
                self._sock.send(frame)
            except (BlockingIOError, ConnectionRefusedError):
                pass  # a lost packet: retransmission handles it
        except ConnectionRefusedError:
            pass  # the switch is not listening (yet): a lost packet, retransmission handles it

    def recv(self, timeout: float) -> bytes | None:
        """The next frame, waiting at most `timeout` seconds; None if none came.  One system call
        when a frame is waiting (a socket timeout would cost a poll and a mode switch each time)."""
        for wait in (False, True):
            try:
                frame = self._sock.recv(65536)
                self.received += 1
                return frame
            except BlockingIOError:
                if wait or timeout <= 0 or not select.select((self._sock,), (), (), timeout)[0]:
                    return None
            except ConnectionRefusedError:
                self.refused += 1
                return None  # ICMP port unreachable from an earlier send
        return None

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> UdpTransport:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RawTransport:
    """hina over raw Ethernet frames on one interface (AF_PACKET, root): for hosts without an IP route.

    Builds Ethernet / IPv4 / UDP (from UDP port `port`, 0x4E41 by default, to the switch's 0x4E41, UDP
    checksum 0) itself and reads back only UDP frames to that port addressed to its MAC.
    """

    def __init__(self, ifname: str, *, src_mac: str, src_ip: str, switch_mac: str, switch_ip: str,
                 port: int = UDP_PORT):
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
        set_buffers(self._sock)
        self._sock.bind((ifname, 0))
        self._mac = mac_bytes(src_mac)
        self._addresses = dict(src_mac=self._mac, dst_mac=mac_bytes(switch_mac), src_ip=ip_bytes(src_ip),
                               dst_ip=ip_bytes(switch_ip), sport=port, dport=UDP_PORT)
        self._port = port
        self.address = (src_ip, port)
        self._ident = 0

    def send(self, frame: bytes) -> None:
        self._ident = (self._ident + 1) & 0xFFFF
        try:
            self._sock.send(encapsulate(frame, ident=self._ident, dont_fragment=True, **self._addresses))
        except OSError:
            pass  # a lost packet: retransmission handles it

    def recv(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            left = deadline - time.monotonic()
            self._sock.settimeout(max(0.0, left))
            try:
                data = self._sock.recv(65536)
            except (TimeoutError, BlockingIOError):
                return None
            udp = udp_of(data)  # (destination port, length) of IPv4 without options / UDP
            if udp is not None and udp[0] == self._port and data[ETH_DST_AT : ETH_DST_AT + MAC_BYTES] == self._mac:
                return data[HINA_AT : UDP_AT + udp[1]]
            if left <= 0:
                return None

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> RawTransport:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_transport(switch_ip: str, *, ifname: str | None = None, src_mac: str | None = None,
                   src_ip: str | None = None, switch_mac: str | None = None, kind: str = "auto",
                   bind_ip: str = "0.0.0.0", port: int = UDP_PORT, offload: bool = False):
    """A transport to a switch at `switch_ip`: UDP when this host has a route to it, else raw frames.
    offload: UDP's segmentation and receive offload (`UdpTransport`'s `segment_offload`).

    Both send from UDP port `port` and take RESULTs there: 0x4E41 for a worker the switch knows by
    its port alone, a port of its own for one of several ranks on the host; raw needs the
    interface, this host's MAC and IP and the switch's MAC.  `bind_ip`
    255.255.255.255: the switch answers at the broadcast address (several
    workers behind one of its ports, a plain switch between), which a socket
    bound to any address does not take once connected (connecting sets its
    local address to this host's).
    """
    if kind not in ("auto", "udp", "raw"):
        raise ValueError(f"transport must be auto, udp or raw, got {kind!r}")
    if kind in ("auto", "udp"):
        try:
            return UdpTransport((switch_ip, UDP_PORT), bind=(bind_ip, port), segment_offload=offload)
        except OSError as exc:
            if kind == "udp":
                raise
            reason = exc
    else:
        reason = None
    missing = [n for n, v in (("ifname", ifname), ("src_mac", src_mac), ("src_ip", src_ip),
                              ("switch_mac", switch_mac)) if v is None]
    if missing:
        raise ValueError(f"raw transport needs {', '.join(missing)}" + (f" (UDP failed: {reason})" if reason else ""))
    return RawTransport(ifname, src_mac=src_mac, src_ip=src_ip, switch_mac=switch_mac, switch_ip=switch_ip, port=port)
