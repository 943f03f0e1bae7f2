"""The fast path's compiled building blocks: what a numba kernel needs to read and write frames.

Big-endian loads and stores (the wire's byte order), little-endian ones (a
virtio_net_hdr's, in the host's order), 32-bit words swapped between the
wire's order and the host's, the IPv4 header checksum and the UDP
pseudo-header's sum, and the P4 parser's test for a hina frame.  Defined
once, here, and imported by every kernel that handles frames: the sender's
(`hina.host.sendplane`), the switch's (`hina.emulator.controls`,
`hina.emulator.batch`) and segmentation offload (`hina.wire.offload`).
numba compiles them into each caller, so the callers' kernel groups name
this module in their stamps (`hina.kernels.GROUPS`): a change here
recompiles them.

Arrays are uint8 views of frames; `at` is a byte offset.  The loads, stores
and checksums are tiny and inlined (numba's `inline="always"`), so each
costs what it would written out in place; `swap_copy`, a loop, is called.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .frames import (
    ETH_TYPE_AT,
    HINA_AT,
    IP_BYTES,
    IP_CHECKSUM_AT,
    IP_PROTOCOL_AT,
    IP_SRC_AT,
    IP_VERSION_AT,
    IPV4_AT,
    IPV4_NO_OPTIONS,
    UDP_DPORT_AT,
)
from .headers import ETHERTYPE_IPV4, IPPROTO_UDP, IPV4_HEADER_BYTES, UDP_PORT

_CHECKSUM = IP_CHECKSUM_AT - IPV4_AT  # the checksum field within the IPv4 header
_ADDRESSES = IP_SRC_AT - IPV4_AT  # the source and destination addresses within it (the pseudo-header's)


@njit(cache=True, inline="always")
def get16(b, at):
    """The big-endian 16-bit field at b[at:]."""
    return (np.int64(b[at]) << 8) | np.int64(b[at + 1])


@njit(cache=True, inline="always")
def get32(b, at):
    """The big-endian 32-bit field at b[at:]."""
    return (get16(b, at) << 16) | get16(b, at + 2)


@njit(cache=True, inline="always")
def put16(b, at, value):
    """Store `value` as the big-endian 16-bit field at b[at:]."""
    b[at] = (value >> 8) & 0xFF
    b[at + 1] = value & 0xFF


@njit(cache=True, inline="always")
def put32(b, at, value):
    """Store `value` as the big-endian 32-bit field at b[at:]."""
    put16(b, at, (value >> 16) & 0xFFFF)
    put16(b, at + 2, value & 0xFFFF)


@njit(cache=True, inline="always")
def get16_le(b, at):
    """The little-endian 16-bit field at b[at:] (a virtio_net_hdr's: the host's order, little-endian on
    every host hina runs on)."""
    return np.int64(b[at]) | (np.int64(b[at + 1]) << 8)


@njit(cache=True, inline="always")
def put16_le(b, at, value):
    b[at] = value & 0xFF
    b[at + 1] = (value >> 8) & 0xFF


@njit(cache=True, inline="always")
def bswap(x):
    """A uint32 with its bytes reversed (one instruction): the wire's big-endian words to the host's and back."""
    return ((x & np.uint32(0xFF)) << np.uint32(24)) | ((x & np.uint32(0xFF00)) << np.uint32(8)) \
        | ((x >> np.uint32(8)) & np.uint32(0xFF00)) | (x >> np.uint32(24))


@njit(cache=True, inline="always")
def words(b, at, count):
    """The `count` 32-bit words at b[at:] as uint32, in the frame's byte order (`at` a multiple of 4)."""
    return b[at : at + 4 * count].view(np.uint32)


@njit(cache=True)
def swap_copy(dst, d, src, s, n):
    """dst[d : d + n] = src[s : s + n] with every 32-bit word's bytes reversed (n, d and s multiples of 4):
    the codec's native words into a frame, and a RESULT's words out of one, in one pass."""
    out, inp = words(dst, d, n >> 2), words(src, s, n >> 2)
    for i in range(n >> 2):
        out[i] = bswap(inp[i])


@njit(cache=True, inline="always")
def fold(total):
    """A ones' complement sum of 16-bit words folded into 16 bits (RFC 1071)."""
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


@njit(cache=True, inline="always")
def ipv4_checksum(b, at):
    """The checksum of the IPv4 header (no options) at b[at:]: the ones' complement of its words' sum, the
    checksum field taken as zero.  (`hina.wire.frames.ipv4_checksum` is the same for Python callers.)"""
    total = np.int64(0)
    for i in range(0, IPV4_HEADER_BYTES, 2):
        if i != _CHECKSUM:
            total += get16(b, at + i)
    return ~fold(total) & 0xFFFF


@njit(cache=True, inline="always")
def set_ipv4_checksum(b, at):
    """Write the checksum of the IPv4 header at b[at:] into it."""
    put16(b, at + _CHECKSUM, ipv4_checksum(b, at))


@njit(cache=True, inline="always")
def pseudo_header_sum(b, ip_at, udp_length):
    """The folded sum of the UDP pseudo-header of the IPv4 header at b[ip_at:] (its addresses, the protocol,
    `udp_length`): what a partial UDP checksum holds, which the device completes over the datagram."""
    total = np.int64(IPPROTO_UDP) + udp_length
    for i in range(0, 2 * IP_BYTES, 2):
        total += get16(b, ip_at + _ADDRESSES + i)
    return fold(total)


@njit(cache=True, inline="always")
def is_hina(b, at, length):
    """Whether the `length`-byte frame at b[at:] is hina as the P4 parser takes it: Ethernet / IPv4 without
    options / UDP to the hina port (at least up to the hina header)."""
    return (length >= HINA_AT and get16(b, at + ETH_TYPE_AT) == ETHERTYPE_IPV4
            and b[at + IP_VERSION_AT] == IPV4_NO_OPTIONS and b[at + IP_PROTOCOL_AT] == IPPROTO_UDP
            and get16(b, at + UDP_DPORT_AT) == UDP_PORT)
