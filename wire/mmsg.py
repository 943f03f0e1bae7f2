"""Many datagrams per system call: `recvmmsg` and `sendmmsg` on one socket, through ctypes.

A bare Python receive-and-send pays two system calls and two Python socket
calls per packet; on loopback they cost more than the switch's own work
(sendto alone, parsing its address tuple each time, is about 4 us).  A
`BatchSocket` receives up to `entries` datagrams with one `recvmmsg` into
fixed buffers, and sends what the switch put in its transmit ring with one
`sendmmsg`: a multicast RESULT is written once and named once per member.
Every buffer, iovec and message header is allocated once; the per-packet
work is writing into them, which the UDP switch does in compiled code
(`dataplane.udp_batch`).

Linux only (glibc or musl with recvmmsg); `available()` says whether this
process can use it, and the backends fall back to one call per packet
where it cannot.  The switch's data sockets are blocking and are read with
MSG_DONTWAIT, as the per-packet path reads them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import select
import socket

import numpy as np

MSG_DONTWAIT = socket.MSG_DONTWAIT
SOCKADDR_IN = 16  # bytes of a struct sockaddr_in


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
    """Batched receive and send on one UDP socket, on buffers a compiled caller reads and fills.

    Receive: `recv()` fills entries 0..n-1 and returns n (0: nothing waiting); entry i's datagram
    is `rx_array[i * entry_bytes:]`, `rx_lengths[i]` bytes long, and its sender's address is
    `rx_names_array[b i : b i + b]`, b = `name_bytes` (16: a sockaddr_in; 20: an AF_PACKET
    socket's sockaddr_ll).  Send: the caller writes frames into `tx_array` (at address
    `tx_address` + their offset), message m's destination address into `tx_names_array[b m:]`
    and its (address, length) into `tx_iov[2 m : 2 m + 2]`, then calls
    `send(count)`, which returns how many messages the kernel refused (each is skipped).
    `name_bytes` 0: no addresses either way (a connected socket: a worker's to its switch).
    """

    def __init__(self, sock: socket.socket, *, entries: int = 64, entry_bytes: int = 65536,
                 tx_messages: int = 1024, tx_bytes: int = 4 << 20, name_bytes: int = SOCKADDR_IN):
        if not available():
            raise OSError("recvmmsg/sendmmsg are not available in this process")
        self._recvmmsg, self._sendmmsg = _load()
        self.fd = sock.fileno()
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
        self.rx_names_array = np.frombuffer(self._rx_names, np.uint8)
        self.rx_lengths = np.frombuffer(self._rx_msgs, dtype=np.uint32)[_LEN_AT // 4 :: _MMSG // 4]
        self.tx_array = np.frombuffer(self._tx, np.uint8)
        self.tx_names_array = np.frombuffer(self._tx_names, np.uint8)
        self.tx_iov = np.frombuffer(self._tx_iov, np.uint64)
        self.tx_address = _address(self._tx)
        self.sent = self.failed = self.received = self.receives = 0
        self.segment = 0  # with UDP_SEGMENT on the socket: the bytes of every datagram a message holds but its last
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

    def send(self, count: int) -> int:
        """Send messages 0..count-1; return how many the kernel refused (each is skipped, the rest go)."""
        i = failed = 0
        while i < count:
            r = self._sendmmsg(self.fd, self._tx_msgs_at + i * _MMSG, count - i, 0)
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
