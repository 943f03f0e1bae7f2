"""The hina wire format, declared once: the fast struct path and the scapy layer.

Mirrors `p4/headers.p4` bit for bit (DESIGN.md section 2).  Frames are
Ethernet / IPv4 / UDP (destination port 0x4E41) / hina header / K payload
words; in loopback mode the emulator is a UDP server and a frame starts at
the hina header.  All fields are in network byte order:

    msg_type:8 op:8 job_id:16 worker_id:8 flags:8 version:1 slot:15
    offset:32 count:16 phase:16                         (16 bytes)

followed by K signed 32-bit words, of which the first `count` are valid.
`version` and `slot` together are the 16-bit pool_index.  The scapy layer
for the same header is in `scapy_hina.py` (kept apart: scapy is slow to
import and the data path does not need it).
"""

from __future__ import annotations

import dataclasses
import enum
import struct

UDP_PORT = 0x4E41  # "NA"
HEADER_BYTES = 16
WORD_BYTES = 4
MAX_WORKERS = 32
MAX_SLOTS = 1 << 15
VERSION_BIT = 0x8000
ETH_HEADER_BYTES = 14
IPV4_HEADER_BYTES = 20
UDP_HEADER_BYTES = 8

_HEADER = struct.Struct("!BBHBBHIHH")
assert _HEADER.size == HEADER_BYTES


class MsgType(enum.IntEnum):
    UPDATE = 0  # worker to switch
    RESULT = 1  # switch to worker


class Flags(enum.IntFlag):
    RESEND = 0x01  # a RESULT unicast again to a worker that asked twice
    STALE_RUN = 0x02  # refused: the slot copy holds another run's chunk (the job needs a reset)


def max_words(mtu: int = 9000) -> int:
    """The largest K whose UDP/IPv4 packet fits `mtu` bytes (9000: jumbo frames -> 2239)."""
    return (mtu - IPV4_HEADER_BYTES - UDP_HEADER_BYTES - HEADER_BYTES) // WORD_BYTES


@dataclasses.dataclass(frozen=True)
class HinaHeader:
    """One decoded hina header (the fast path: `struct`, no scapy)."""

    msg_type: int
    op: int
    job_id: int
    worker_id: int
    flags: int
    pool_index: int
    offset: int
    count: int
    phase: int

    @property
    def slot(self) -> int:
        return self.pool_index & (VERSION_BIT - 1)

    @property
    def version(self) -> int:
        return self.pool_index >> 15

    def pack(self) -> bytes:
        return pack_header(self.msg_type, self.op, self.job_id, self.worker_id, self.flags,
                           self.pool_index, self.offset, self.count, self.phase)

    @classmethod
    def unpack(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> "HinaHeader":
        return cls(*_HEADER.unpack_from(data, offset))


def pack_header(msg_type: int, op: int, job_id: int, worker_id: int, flags: int,
                pool_index: int, offset: int, count: int, phase: int) -> bytes:
    return _HEADER.pack(msg_type, op, job_id, worker_id, flags, pool_index, offset, count, phase)


# pack_header_into(buf, at, msg_type, op, job_id, worker_id, flags, pool_index, offset, count, phase):
# the struct method itself, since the switch calls it once per RESULT
pack_header_into = _HEADER.pack_into


unpack_header = _HEADER.unpack_from
