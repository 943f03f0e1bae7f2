"""The sockets of the fast path: many datagrams per system call, and what the kernel is asked for.

A bare Python receive-and-send pays two system calls and two Python socket
calls per packet; on loopback they cost more than the switch's own work
(sendto alone, parsing its address tuple each time, is about 4 us).  A
`BatchSocket` receives up to `entries` datagrams with one `recvmmsg` into
fixed buffers, and sends what a compiled caller put in its transmit ring
with one `sendmmsg`: a multicast RESULT is written once and named once per
member.  Every buffer, iovec and message header is allocated once; the
per-packet work is writing into them, which the switch
(`hina.emulator.batch`) and the worker (`hina.host.sendplane`) do in
compiled code.  With `offload_segments` a ring of back-to-back frames goes
as UDP_SEGMENT messages (`hina.wire.offload.coalesce`).

Also here: the socket addresses a ring carries per message, declared as
the headers are (`SOCKADDR_IN`, `SOCKADDR_LL` and their offsets), the
socket options the backends set (UDP segmentation offload, packet sockets'
virtio_net_hdrs and outgoing frames) and socket buffers.

Linux only (glibc or musl with recvmmsg); `available()` says whether this
process can use it, and the backends fall back to one call per packet
where it cannot.  The switch's data sockets are blocking and are read with
MSG_DONTWAIT, as the per-packet path reads them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import random
import select
import socket
import struct
import sys

import numpy as np

from . import offload
from .headers import IPV4_HEADER_BYTES, UDP_HEADER_BYTES, field_offsets

MSG_DONTWAIT = socket.MSG_DONTWAIT

# The socket addresses a ring names per message, (name, bits) in order: struct sockaddr_in (family in the
# host's order, port and address in the network's) and struct sockaddr_ll (an AF_PACKET socket's: the
# interface a frame came in on or goes out of, and the packet's type).
SOCKADDR_IN: tuple[tuple[str, int], ...] = (("family", 16), ("port", 16), ("addr", 32), ("zero", 64))
SOCKADDR_LL: tuple[tuple[str, int], ...] = (("family", 16), ("protocol", 16), ("ifindex", 32), ("hatype", 16),
                                            ("pkttype", 8), ("halen", 8), ("addr", 64))
SOCKADDR_IN_BYTES = sum(bits for _, bits in SOCKADDR_IN) // 8
SOCKADDR_LL_BYTES = sum(bits for _, bits in SOCKADDR_LL) // 8
SIN_PORT_AT, SIN_ADDR_AT = field_offsets(SOCKADDR_IN)["port"], field_offsets(SOCKADDR_IN)["addr"]
SLL_IFINDEX_AT, SLL_PKTTYPE_AT = field_offsets(SOCKADDR_LL)["ifindex"], field_offsets(SOCKADDR_LL)["pkttype"]
PACKET_OUTGOING = socket.PACKET_OUTGOING  # sockaddr_ll's packet type of a frame this host sent

# socket options Python does not name (<linux/udp.h>, <linux/in.h>, <linux/if_packet.h>, <linux/if_ether.h>)
UDP_SEGMENT = 103  # UDP segmentation offload, since Linux 4.18
IP_MTU = 14  # a connected socket's path MTU
SOL_PACKET = 263
PACKET_VNET_HDR = 15  # frames read and written after a struct virtio_net_hdr (`offload.VNET_HDR`)
PACKET_IGNORE_OUTGOING = 23  # a packet socket does not read back what this host sends (Linux 4.20)
ETH_P_ALL = 0x0003  # every protocol
ETH_P_IP = 0x0800  # IPv4


def sockaddr_in(host: str, port: int) -> bytes:
    """struct sockaddr_in for (host, port), host a dotted IPv4 address."""
    addr = socket.inet_pton(socket.AF_INET, host)
    name = bytearray(SOCKADDR_IN_BYTES)
    name[:SIN_PORT_AT] = int(socket.AF_INET).to_bytes(SIN_PORT_AT, sys.byteorder)
    name[SIN_PORT_AT:SIN_ADDR_AT] = port.to_bytes(SIN_ADDR_AT - SIN_PORT_AT, "big")
    name[SIN_ADDR_AT : SIN_ADDR_AT + len(addr)] = addr
    return bytes(name)


def sockaddr_ll(ifname: str, protocol: int = ETH_P_IP) -> bytes:
    """struct sockaddr_ll that sends out of interface `ifname` (the frame carries its own Ethernet header)."""
    return struct.pack("=HHiHBB8x", socket.AF_PACKET, socket.htons(protocol), socket.if_nametoindex(ifname), 0, 0,
                       0)


assert len(sockaddr_in("0.0.0.0", 0)) == SOCKADDR_IN_BYTES and struct.calcsize("=HHiHBB8x") == SOCKADDR_LL_BYTES


def path_mtu(sock: socket.socket) -> int:
    """The route's MTU toward where a connected socket sends (the kernel's; 0 where it does not say)."""
    try:
        return sock.getsockopt(socket.IPPROTO_IP, IP_MTU)
    except OSError:
        return 0


def vnet_headers(sock: socket.socket) -> None:
    """Have a packet socket read and write every frame after a virtio_net_hdr (`hina.wire.offload`)."""
    sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.c_void_p),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _Msghdr), ("len", ctypes.c_uint32)]


_MMSG = ctypes.sizeof(_Mmsghdr)
_IOV = ctypes.sizeof(_Iovec)
assert _IOV == 16, "struct iovec is a pointer and a size_t"
_LEN_AT = _Mmsghdr.len.offset
_libc = None


def _load():
    global _libc
    if _libc is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            recv, send = libc.recvmmsg, libc.sendmmsg
        except (OSError, AttributeError):
            _libc = False
        else:
            recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
            send.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
            recv.restype = send.restype = ctypes.c_int
            _libc = (recv, send)
    return _libc


def available() -> bool:
    """Whether recvmmsg/sendmmsg can be called here (Linux with a libc that has them)."""
    return bool(_load())


def _address(buffer: bytearray) -> int:
    if not buffer:
        return 0
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))


class BatchSocket:
    """Batched receive and send on one socket, on buffers a compiled caller reads and fills.

    Receive: `recv()` fills entries 0..n-1 and returns n (0: nothing waiting); entry i's datagram
    is `rx_array[i * entry_bytes:]`, `rx_lengths[i]` bytes long, and its sender's address is the
    row `rx_names_array[i]` of `name_bytes` bytes (`SOCKADDR_IN_BYTES`: a UDP socket's;
    `SOCKADDR_LL_BYTES`: an AF_PACKET socket's).  Send: the caller writes frames into `tx_array`
    (at address `tx_address` + their offset), message m's destination address into the row
    `tx_names_array[m]` and its (address, length) into `tx_iov[2 m : 2 m + 2]`, then calls
    `send(count)`, which returns how many messages the kernel refused (each is skipped).
    `name_bytes` 0: no addresses either way (a connected socket: a worker's to its switch).
    """

    def __init__(self, sock: socket.socket, *, entries: int = 64, entry_bytes: int = 65536,
                 tx_messages: int = 1024, tx_bytes: int = 4 << 20, name_bytes: int = SOCKADDR_IN_BYTES):
        if not available():
            raise OSError("recvmmsg/sendmmsg are not available in this process")
        self._recvmmsg, self._sendmmsg = _load()
        self.sock, self.fd = sock, sock.fileno()
        self.entries, self.entry_bytes = entries, entry_bytes
        self.tx_capacity = tx_messages
        # receive side: per entry a sockaddr slot and a frame buffer, each message pointing at its own
        self._rx, self._rx_names = bytearray(entries * entry_bytes), bytearray(entries * name_bytes)
        self._rx_iov = (_Iovec * entries)()
        self._rx_msgs = bytearray(entries * _MMSG)
        msgs = (_Mmsghdr * entries).from_buffer(self._rx_msgs)
        rx_at, names_at = _address(self._rx), _address(self._rx_names)
        for i in range(entries):
            self._rx_iov[i].base, self._rx_iov[i].len = rx_at + i * entry_bytes, entry_bytes
            msgs[i].hdr.iov, msgs[i].hdr.iovlen = ctypes.addressof(self._rx_iov[i]), 1
            if name_bytes:
                msgs[i].hdr.name, msgs[i].hdr.namelen = names_at + i * name_bytes, name_bytes
        self._rx_at = ctypes.addressof(msgs)
        # transmit side: a byte ring for frames, and per message a sockaddr slot and an iovec
        self._tx, self._tx_names = bytearray(tx_bytes), bytearray(tx_messages * name_bytes)
        self._tx_iov = bytearray(tx_messages * _IOV)
        self._tx_msgs = bytearray(tx_messages * _MMSG)
        msgs = (_Mmsghdr * tx_messages).from_buffer(self._tx_msgs)
        iov_at, names_at = _address(self._tx_iov), _address(self._tx_names)
        for i in range(tx_messages):
            msgs[i].hdr.iov, msgs[i].hdr.iovlen = iov_at + i * _IOV, 1
            if name_bytes:
                msgs[i].hdr.name, msgs[i].hdr.namelen = names_at + i * name_bytes, name_bytes
        self._tx_msgs_at = ctypes.addressof(msgs)
        # the same memory as arrays, for the compiled caller
        self.rx_array = np.frombuffer(self._rx, np.uint8)
        self.rx_names_array = np.frombuffer(self._rx_names, np.uint8).reshape(entries, name_bytes)
        self.rx_lengths = np.frombuffer(self._rx_msgs, dtype=np.uint32)[_LEN_AT // 4 :: _MMSG // 4]
        self.tx_array = np.frombuffer(self._tx, np.uint8)
        self.tx_names_array = np.frombuffer(self._tx_names, np.uint8).reshape(tx_messages, name_bytes)
        self.tx_iov = np.frombuffer(self._tx_iov, np.uint64)
        self.tx_address = _address(self._tx)
        # messages sent and refused, datagrams received; recvmmsg calls (`receives`) and sendmmsg calls (`sends`)
        self.sent = self.failed = self.received = self.receives = self.sends = 0
        self.segment = 0  # with UDP_SEGMENT on the socket: the bytes of every datagram a message holds but its last
        self.segments = 0  # the most datagrams one such message holds
        self.refused = 0  # receives that found ICMP port unreachable: nothing listens where the socket sends

    def recv(self, fd: int | None = None) -> int:
        """Receive what is waiting, up to `entries` datagrams, without blocking; return how many.

        `fd`: another socket to receive from into the same buffers (the raw switch reads every
        interface into one set, one at a time); by default this one's."""
        while True:
            n = self._recvmmsg(self.fd if fd is None else fd, self._rx_at, self.entries, MSG_DONTWAIT, None)
            if n >= 0:
                self.receives += 1
                self.received += n
                return n
            err = ctypes.get_errno()
            if err == errno.EINTR:
                continue
            if err == errno.ECONNREFUSED:  # a connected socket's earlier send met a closed port; it is cleared
                self.refused += 1
                return 0
            if err in (errno.EAGAIN, errno.EWOULDBLOCK):
                return 0
            raise OSError(err, f"recvmmsg: {errno.errorcode.get(err, err)}")

    def offload_segments(self, segment: int) -> bool:
        """From now on send the ring's back-to-back frames of `segment` bytes (a shorter one ends a run) as
        few UDP_SEGMENT messages, each cut into its datagrams by the kernel as it leaves, instead of one pass
        through the socket, UDP, IP and the queue per frame.  Only where the route's MTU holds a datagram
        of `segment` bytes (the kernel refuses a message whose datagrams it would have to fragment) and the
        kernel has UDP segmentation offload; returns whether it does.  A connected UDP socket only."""
        if segment + IPV4_HEADER_BYTES + UDP_HEADER_BYTES > path_mtu(self.sock):
            return False
        try:
            self.sock.setsockopt(socket.SOL_UDP, UDP_SEGMENT, segment)
        except OSError:  # a kernel without UDP GSO: one datagram a message, as before
            return False
        offload.warm()
        self.segment, self.segments = segment, offload.segments_limit(segment)
        return True

    def send(self, count: int, coalesced: bool = False) -> int:
        """Send messages 0..count-1; return how many the kernel refused (each is skipped, the rest go).
        With `segment` set, the messages are first merged into UDP_SEGMENT messages (`tx_iov` rewritten),
        unless the caller has merged them already (`coalesced`: the worker's compiled step does)."""
        if self.segment and not coalesced:
            count = offload.coalesce(self.tx_iov, count, self.segment, self.segments)
        i = failed = 0
        while i < count:
            r = self._sendmmsg(self.fd, self._tx_msgs_at + i * _MMSG, count - i, 0)
            self.sends += 1
            if r > 0:
                i += r
                continue
            err = ctypes.get_errno() if r < 0 else 0
            if err == errno.EINTR:
                continue
            if err in (errno.EAGAIN, errno.EWOULDBLOCK) and select.select((), (self.fd,), (), 1.0)[1]:
                continue  # a non-blocking socket's send buffer was full (a shaped link's queue): room again
            failed += 1  # e.g. a worker gone (its port refuses), a frame past the MTU: skip it
            i += 1
        self.sent += count - failed
        self.failed += failed
        return failed


SOCKET_BUFFER = 8 << 20  # bytes; bursts of a whole window from every worker must fit


def set_buffers(sock: socket.socket, size: int = SOCKET_BUFFER) -> int:
    """Ask for `size`-byte socket buffers, past rmem_max when root; return what the kernel granted."""
    for opt_force, opt in ((getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF),
                           (getattr(socket, "SO_SNDBUFFORCE", None), socket.SO_SNDBUF)):
        try:
            if opt_force is None:
                raise PermissionError
            sock.setsockopt(socket.SOL_SOCKET, opt_force, size)
        except PermissionError:
            sock.setsockopt(socket.SOL_SOCKET, opt, size)
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


EPHEMERAL_PORTS = "/proc/sys/net/ipv4/ip_local_port_range"  # the range the kernel picks local ports from


def free_tcp_ports(n: int = 1, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct TCP ports nothing holds now, for servers another process starts on them (BMv2's gRPC
    and Thrift, torch's rendezvous). Taken below the kernel's ephemeral range: a port bind(0) hands out lies
    in that range, where any connection opened before the server binds may take it as its local port."""
    try:
        with open(EPHEMERAL_PORTS) as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    ports: list[int] = []
    below = range(min(max(1024, low // 2), low), low)
    for port in random.SystemRandom().sample(below, min(512, len(below))):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        ports.append(port)
        if len(ports) == n:
            return ports
    raise OSError(errno.EADDRINUSE, f"fewer than {n} free TCP ports below {low} on {host}")
