"""Many datagrams per system call: `recvmmsg` and `sendmmsg` on one socket, through ctypes.

A bare Python receive-and-send pays two system calls and two Python socket
calls per packet; on loopback they cost more than the switch's own work
(sendto alone, parsing its address tuple each time, is about 4 us).  A
`BatchSocket` receives up to `entries` datagrams with one `recvmmsg` into
fixed buffers, and queues what the switch sends into a transmit ring that
one `sendmmsg` empties: a multicast RESULT is copied once and named once
per member.  Every buffer, iovec and message header is allocated once; the
per-packet work is writing into them, which the UDP switch does in compiled
code (`dataplane.udp_batch`).

Linux only (glibc or musl with recvmmsg); `available()` says whether this
process can use it, and the backends fall back to one call per packet
where it cannot.  The switch's data sockets are blocking and are read with
MSG_DONTWAIT, as the per-packet path reads them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
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
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))


class BatchSocket:
    """Batched receive and send on one datagram (UDP) or packet (AF_PACKET, bound) socket.

    Receive: `recv()` fills entries 0..n-1 and returns n (0: nothing waiting); entry i's bytes are
    `frames[i][:rx_lengths[i]]` and its sender's sockaddr is `rx_names[16 i : 16 i + 16]`.  Send:
    either `queue(frame, names, count)`, which copies `frame` into the transmit ring once and
    queues it to `count` destinations (the caller may reuse `frame` at once), then `flush()`;
    or a compiled caller fills `tx_array`, `tx_names_array` and `tx_iov` itself and calls
    `send(count)`.  Both return how many messages the kernel refused.  The same memory is
    exposed as numpy arrays (`rx_array`, `rx_lengths`, ...) for `dataplane.udp_batch`.
    """

    def __init__(self, sock: socket.socket, *, entries: int = 64, entry_bytes: int = 65536,
                 tx_messages: int = 1024, tx_bytes: int = 4 << 20, names: bool = True):
        if not available():
            raise OSError("recvmmsg/sendmmsg are not available in this process")
        self._recvmmsg, self._sendmmsg = _load()
        self.sock, self.fd = sock, sock.fileno()
        self.entries, self.entry_bytes = entries, entry_bytes
        name_bytes = SOCKADDR_IN if names else 0
        # receive side: per entry a sockaddr slot and a frame buffer, each message pointing at its own
        self.rx_names = bytearray(max(1, entries * name_bytes))
        self.rx = bytearray(entries * entry_bytes)
        self._rx_iov = (_Iovec * entries)()
        self._rx_msgs = bytearray(entries * _MMSG)
        msgs = (_Mmsghdr * entries).from_buffer(self._rx_msgs)
        rx_at, names_at = _address(self.rx), _address(self.rx_names)
        for i in range(entries):
            self._rx_iov[i].base, self._rx_iov[i].len = rx_at + i * entry_bytes, entry_bytes
            msgs[i].hdr.iov, msgs[i].hdr.iovlen = ctypes.addressof(self._rx_iov[i]), 1
            if names:
                msgs[i].hdr.name, msgs[i].hdr.namelen = names_at + i * name_bytes, name_bytes
        self._rx_at = ctypes.addressof(msgs)
        self._rx_lengths = np.frombuffer(self._rx_msgs, dtype=np.uint32)[_LEN_AT // 4 :: _MMSG // 4]
        view = memoryview(self.rx)
        self.frames = [view[i * entry_bytes : (i + 1) * entry_bytes] for i in range(entries)]
        # transmit side: a byte ring for frames, and per message a sockaddr slot and an iovec
        self._tx = bytearray(tx_bytes)
        self._tx_at = _address(self._tx)
        self._tx_names = bytearray(max(1, tx_messages * name_bytes))
        self._tx_iov = bytearray(tx_messages * _IOV)
        self._tx_msgs = bytearray(tx_messages * _MMSG)
        msgs = (_Mmsghdr * tx_messages).from_buffer(self._tx_msgs)
        iov_at, names_at = _address(self._tx_iov), _address(self._tx_names)
        for i in range(tx_messages):
            msgs[i].hdr.iov, msgs[i].hdr.iovlen = iov_at + i * _IOV, 1
            if names:
                msgs[i].hdr.name, msgs[i].hdr.namelen = names_at + i * name_bytes, name_bytes
        self._tx_msgs_at = ctypes.addressof(msgs)
        # the same memory as arrays, for a compiled caller (`dataplane.udp_batch`)
        self.rx_array = np.frombuffer(self.rx, np.uint8)
        self.rx_names_array = np.frombuffer(self.rx_names, np.uint8)
        self.rx_lengths = self._rx_lengths
        self.tx_array = np.frombuffer(self._tx, np.uint8)
        self.tx_names_array = np.frombuffer(self._tx_names, np.uint8)
        self.tx_iov = np.frombuffer(self._tx_iov, np.uint64)
        self.tx_address = self._tx_at
        self.tx_capacity = tx_messages
        self._tx_capacity, self._tx_size = tx_messages, tx_bytes
        self._queued = 0  # messages in the ring
        self._used = 0  # bytes of the ring in use
        self.sent = self.failed = self.received = self.receives = self.flushes = 0

    # -- receive ------------------------------------------------------------------
    def recv(self) -> int:
        """Receive what is waiting, up to `entries` datagrams, without blocking; return how many."""
        while True:
            n = self._recvmmsg(self.fd, self._rx_at, self.entries, MSG_DONTWAIT, None)
            if n >= 0:
                self.receives += 1
                self.received += n
                return n
            err = ctypes.get_errno()
            if err == errno.EINTR:
                continue
            if err in (errno.EAGAIN, errno.EWOULDBLOCK):
                return 0
            raise OSError(err, f"recvmmsg: {errno.errorcode.get(err, err)}")

    # -- send ---------------------------------------------------------------------
    def queue(self, frame, names: bytes, count: int = 1) -> None:
        """Queue `frame` to `count` destinations: `names` holds their sockaddrs back to back
        (`count` x 16 bytes; b"" on a bound packet socket, which has one)."""
        size = len(frame)
        m, at = self._queued, self._used
        if m + count > self._tx_capacity or at + size > self._tx_size:
            self.flush()
            m = at = 0
            if count > self._tx_capacity or size > self._tx_size:
                raise ValueError(f"{count} messages of {size} bytes exceed the transmit ring")
        self._tx[at : at + size] = frame
        self._used = at + size
        if names:
            self._tx_names[m * SOCKADDR_IN : (m + count) * SOCKADDR_IN] = names
        self.tx_iov[2 * m : 2 * (m + count) : 2] = self._tx_at + at
        self.tx_iov[2 * m + 1 : 2 * (m + count) : 2] = size
        self._queued = m + count

    def send(self, count: int) -> int:
        """Send the first `count` messages, filled in by the caller (`tx`, `tx_names`, `tx_iov`);
        return how many the kernel refused."""
        self._queued = count
        return self.flush()

    def flush(self) -> int:
        """Send every queued message; return how many the kernel refused (each is skipped, the rest go)."""
        total, i, failed = self._queued, 0, 0
        self.flushes += 1
        while i < total:
            r = self._sendmmsg(self.fd, self._tx_msgs_at + i * _MMSG, total - i, 0)
            if r > 0:
                i += r
                continue
            err = ctypes.get_errno() if r < 0 else 0
            if err == errno.EINTR:
                continue
            failed += 1  # e.g. a worker gone (its port refuses), a frame past the MTU: skip it
            i += 1
        self._queued = self._used = 0
        self.sent += total - failed
        self.failed += failed
        return failed
