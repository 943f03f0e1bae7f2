"""Segmentation offload: many datagrams through the host's stack as one buffer, compiled.

A host's stack pays per packet (the socket, UDP, IP, the queue, the
device), so Linux lets a sender hand it one buffer of back-to-back
datagrams that the device, or the kernel just before it, cuts apart: UDP
segmentation offload (GSO), asked for per socket with UDP_SEGMENT, every
datagram `segment` bytes but the last.  Three places in hina use it, all
here:

- `coalesce`: a worker's `sendmmsg` ring of back-to-back frames merged
  into UDP_SEGMENT messages (`hina.wire.sockio.BatchSocket.send`).
- `unwrap`: a packet socket that reads each frame after a virtio_net_hdr
  (PACKET_VNET_HDR) gets a super-frame as the host's stack left it, one
  UDP datagram's headers over the payloads of many; `unwrap` cuts it into
  the frames the wire would carry, before the switch's rules see them.
- `gather`: the other way, the replicas a switch sends in a batch merged
  into super-frames, one per run of frames to one destination, which the
  kernel cuts where a link does not carry them whole.

The virtio_net_hdr is declared here (`VNET_HDR`, its offsets `VNET_*_AT`);
the frames' fields are `hina.wire.frames`'s.  The kernels are their own
group (`hina.kernels`, "offload"): `warm()` has them compiled, or loaded,
before a caller's first batch.
"""

from __future__ import annotations

import struct

import numpy as np
from numba import njit

from hina import kernels

from .compiled import get16, get16_le, is_hina, pseudo_header_sum, put16, put16_le, set_ipv4_checksum
from .frames import (
    ETH_DST_AT,
    HINA_AT,
    IP_DST_AT,
    IP_ID_AT,
    IP_TOTAL_LEN_AT,
    IPV4_AT,
    MAC_BYTES,
    UDP_AT,
    UDP_CHECKSUM_AT,
    UDP_DPORT_AT,
    UDP_LEN_AT,
)
from .headers import IPV4, MAX_FRAME_BYTES, UDP_HEADER_BYTES, field_offsets

# A packet socket with PACKET_VNET_HDR reads (and writes) each frame after a struct virtio_net_hdr (host byte
# order): (name, bits), in order.  A frame a host's stack left whole for the device to cut arrives as one
# "super-frame": gso_type UDP_L4, and gso_size the bytes of every UDP payload it stands for but the last.
VNET_HDR: tuple[tuple[str, int], ...] = (("flags", 8), ("gso_type", 8), ("hdr_len", 16), ("gso_size", 16),
                                         ("csum_start", 16), ("csum_offset", 16))
VNET_HDR_BYTES = sum(bits for _, bits in VNET_HDR) // 8
VNET = struct.Struct("=" + "".join({8: "B", 16: "H"}[bits] for _, bits in VNET_HDR))
_VNET = field_offsets(VNET_HDR)
VNET_FLAGS_AT, VNET_GSO_TYPE_AT, VNET_HDR_LEN_AT = _VNET["flags"], _VNET["gso_type"], _VNET["hdr_len"]
VNET_GSO_SIZE_AT, VNET_CSUM_START_AT, VNET_CSUM_OFFSET_AT = _VNET["gso_size"], _VNET["csum_start"], \
    _VNET["csum_offset"]
VNET_F_NEEDS_CSUM = 1  # the transport checksum is partial: csum_start/csum_offset say where to complete it
VNET_GSO_NONE, VNET_GSO_UDP_L4 = 0, 5

# The kernel takes at most this many segments a message (UDP_MAX_SEGMENTS), and a message's payload fits one
# UDP datagram's length field (MAX_FRAME_BYTES): what a coalesced message or a gathered super-frame holds.
MAX_SEGMENTS = 64
GATHER_LEAST = 1024  # bytes of UDP payload a replica needs to be gathered: smaller ones gain little, cost latency
_DST_IP_BYTES = dict(IPV4)["dst_addr"] // 8


@njit(cache=True)
def coalesce(iov, m, segment, limit):
    """Merge messages 0..m-1 of a sendmmsg ring (`iov`: (address, length) per message) into runs of up to
    `limit` adjacent frames, every one of a run but its last exactly `segment` bytes; return the runs' count
    (the merged messages now fill `iov[0 : 2 runs]`).  A frame shorter than `segment` ends its run."""
    runs = 0
    i = 0
    while i < m:
        address, length = iov[2 * i], iov[2 * i + 1]
        k = 1
        while (i + k < m and k < limit and length == segment * k and iov[2 * (i + k)] == address + length):
            length += iov[2 * (i + k) + 1]
            k += 1
        iov[2 * runs], iov[2 * runs + 1] = address, length
        runs += 1
        i += k
    return runs


def segments_limit(segment: int) -> int:
    """The most `segment`-byte datagrams one UDP_SEGMENT message may hold."""
    return min(MAX_SEGMENTS, MAX_FRAME_BYTES // segment)


@njit(cache=True, inline="always")
def _set_lengths(b, at, payload):
    """The IPv4 total length and UDP length of the frame at b[at:] for a UDP payload of `payload` bytes."""
    put16(b, at + IP_TOTAL_LEN_AT, HINA_AT - IPV4_AT + payload)
    put16(b, at + UDP_LEN_AT, UDP_HEADER_BYTES + payload)


@njit(cache=True)
def unwrap(rx, stride, lengths, rx_names, start, n, out, out_stride, out_lengths, out_names, origin, capacity,
           passed):
    """Frames read after a virtio_net_hdr (PACKET_VNET_HDR: entry i is rx[i * stride:], lengths[i] bytes with the
    header, its address rx_names[i]) from entries start..n-1, made what the wire would carry, into `out` (frame k
    at out[k * out_stride:], out_lengths[k] bytes, its address out_names[k], origin[k] the entry it came from): a
    hina super-frame (`compiled.is_hina`, gso_type UDP_L4: the sender's stack left its datagrams whole) is cut
    into its datagrams, each with its own IPv4 and UDP lengths, IPv4 identification and checksum and the
    super-frame's headers otherwise; any other hina frame is copied as it is.  Every other frame (ARP, other
    traffic, a frame longer than `out_stride`) keeps its header for the caller: its entry index goes into
    `passed`.

    Returns (next entry, frames out, entries passed); it stops before an entry whose frames would not fit."""
    k = 0
    p = 0
    for i in range(start, n):
        base = i * stride
        at = base + VNET_HDR_BYTES
        length = np.int64(lengths[i]) - VNET_HDR_BYTES
        hina = is_hina(rx, at, length)
        segment = get16_le(rx, base + VNET_GSO_SIZE_AT)
        if hina and rx[base + VNET_GSO_TYPE_AT] == VNET_GSO_UDP_L4 and segment > 0 and length > HINA_AT + segment:
            payload = length - HINA_AT
            pieces = (payload + segment - 1) // segment
            if HINA_AT + segment > out_stride or pieces > capacity:  # it could never fit: the caller's
                passed[p] = i
                p += 1
                continue
            if k + pieces > capacity:
                return i, k, p
            ident = get16(rx, at + IP_ID_AT)
            for piece in range(pieces):
                size = min(segment, payload - piece * segment)
                o = k * out_stride
                out[o : o + HINA_AT] = rx[at : at + HINA_AT]
                source = at + HINA_AT + piece * segment
                out[o + HINA_AT : o + HINA_AT + size] = rx[source : source + size]
                _set_lengths(out, o, size)
                put16(out, o + IP_ID_AT, (ident + piece) & 0xFFFF)
                set_ipv4_checksum(out, o + IPV4_AT)
                out_lengths[k] = HINA_AT + size
                out_names[k] = rx_names[i]
                origin[k] = i
                k += 1
        elif hina and length <= out_stride:
            if k + 1 > capacity:
                return i, k, p
            o = k * out_stride
            out[o : o + length] = rx[at : at + length]
            out_lengths[k] = length
            out_names[k] = rx_names[i]
            origin[k] = i
            k += 1
        else:
            passed[p] = i
            p += 1
    return n, k, p


@njit(cache=True, inline="always")
def _same_flow(tx, a, names, i, b, j):
    """Whether frames at tx[a:] and tx[b:] (messages i and j) go out of the same interface to the same
    destination: MAC, IPv4 address, UDP port."""
    for x in range(names.shape[1]):
        if names[i, x] != names[j, x]:
            return False
    for x in range(MAC_BYTES):
        if tx[a + ETH_DST_AT + x] != tx[b + ETH_DST_AT + x]:
            return False
    for x in range(_DST_IP_BYTES):
        if tx[a + IP_DST_AT + x] != tx[b + IP_DST_AT + x]:
            return False
    return get16(tx, a + UDP_DPORT_AT) == get16(tx, b + UDP_DPORT_AT)


@njit(cache=True, inline="always")
def _only_datagram(tx, at, payload):
    """Whether the frame at tx[at:] is its UDP datagram and nothing after it (its UDP length says so)."""
    return get16(tx, at + UDP_LEN_AT) == UDP_HEADER_BYTES + payload


@njit(cache=True)
def _run(tx, tx_names, tx_iov, tx_at, i, m, payload, limit, taken, out, payloads):
    """The frames after message i that join its run (one destination, in the ring's order, each of i's UDP
    payload size but the last, which may be shorter; at most `limit`): their UDP payloads put after i's, whose
    starts at out[payloads:], each frame marked taken.  Returns (the run's frames, its payload bytes)."""
    a = np.int64(tx_iov[2 * i]) - tx_at
    total = payload
    pieces = 1
    if payload < GATHER_LEAST or not _only_datagram(tx, a, payload):
        return pieces, total
    for j in range(i + 1, m):
        if pieces == limit or total + payload > MAX_FRAME_BYTES:
            break
        if taken[j]:
            continue
        b = np.int64(tx_iov[2 * j]) - tx_at
        if not _same_flow(tx, a, tx_names, i, b, j):
            continue
        more = np.int64(tx_iov[2 * j + 1]) - HINA_AT
        if more > payload or more <= 0 or not _only_datagram(tx, b, more):
            break  # a larger frame to this destination (or one with bytes after its datagram): in order
        out[payloads + total : payloads + total + more] = tx[b + HINA_AT : b + HINA_AT + more]
        taken[j] = True
        total += more
        pieces += 1
        if more < payload:
            break  # the shorter frame ends the run
    return pieces, total


@njit(cache=True, inline="always")
def _ask_segmentation(out, o, payload, total):
    """The virtio_net_hdr at out[o:] and the headers after it, for a super-frame of `total` bytes of UDP
    payload in `payload`-byte datagrams: segmentation (UDP_L4) and the UDP checksum asked of the kernel, the
    lengths for the whole run, the IPv4 checksum, and the partial UDP checksum the kernel completes per
    datagram (the pseudo-header's sum)."""
    h = o + VNET_HDR_BYTES
    out[o + VNET_FLAGS_AT] = VNET_F_NEEDS_CSUM
    out[o + VNET_GSO_TYPE_AT] = VNET_GSO_UDP_L4
    put16_le(out, o + VNET_HDR_LEN_AT, HINA_AT)
    put16_le(out, o + VNET_GSO_SIZE_AT, payload)
    put16_le(out, o + VNET_CSUM_START_AT, UDP_AT)  # the UDP header, and in it its checksum field
    put16_le(out, o + VNET_CSUM_OFFSET_AT, UDP_CHECKSUM_AT - UDP_AT)
    _set_lengths(out, h, total)
    set_ipv4_checksum(out, h + IPV4_AT)
    put16(out, h + UDP_CHECKSUM_AT, pseudo_header_sum(out, h + IPV4_AT, UDP_HEADER_BYTES + total))


@njit(cache=True)
def gather(tx, tx_names, tx_iov, tx_at, m, out, out_names, out_iov, out_at, limit, taken):
    """The replicas of a transmit ring (messages 0..m-1: frames at tx_iov's addresses less `tx_at`, their
    interfaces' addresses tx_names[i]) as super-frames for a packet socket with virtio_net_hdrs: each run of
    frames to one destination (interface, MAC, IPv4 address, UDP port), in the ring's order, of one size but
    its last (a shorter one ends it), at most `limit` of them, becomes one message: a virtio_net_hdr asking
    for segmentation (UDP_L4, the run's UDP payload size) and the checksums, the first frame's headers sized
    for the whole run, and every frame's UDP payload back to back; a run of one is its frame after a header
    that asks nothing.  The kernel cuts a super-frame into the frames it stands for where the link does not
    carry it whole.  Returns the messages written to out (at address `out_at` + offset, out_iov and out_names
    as a sendmmsg ring's); `taken` is scratch, m flags."""
    for i in range(m):
        taken[i] = False
    k = 0
    used = 0
    for i in range(m):
        if taken[i]:
            continue
        taken[i] = True
        a = np.int64(tx_iov[2 * i]) - tx_at
        size = np.int64(tx_iov[2 * i + 1])
        o = used
        h = o + VNET_HDR_BYTES  # the first frame's headers, for the whole run
        out[h : h + size] = tx[a : a + size]
        payload = size - HINA_AT
        pieces, total = _run(tx, tx_names, tx_iov, tx_at, i, m, payload, limit, taken, out, h + HINA_AT)
        out[o : h] = 0
        if pieces > 1:
            _ask_segmentation(out, o, payload, total)
        length = VNET_HDR_BYTES + HINA_AT + total
        out_names[k] = tx_names[i]
        out_iov[2 * k] = out_at + o
        out_iov[2 * k + 1] = length
        k += 1
        used += length
    return k


_warm = False


def warm() -> None:
    """Compile (or load from the disk cache) the offload kernels now, not when the first batch is waiting:
    once per process, and once per machine (`hina.kernels`)."""
    global _warm
    if not _warm:
        kernels.ensure("offload", _drive)
        _warm = True


def compile_kernels() -> None:
    """Every offload kernel, compiled on this machine (`hina compile`)."""
    warm()


def _drive() -> None:
    """Each kernel once, on the arrays its callers pass (names as rows; lengths strided, as the mmsghdr
    lengths are), so that each is compiled for one signature."""
    iov = np.zeros(4, np.uint64)
    coalesce(iov, 2, 8, 2)
    frames = np.zeros(64, np.uint8)
    names = np.zeros((1, 20), np.uint8)
    lengths = np.zeros(4, np.uint32)[::2]
    gather(frames, names, np.zeros(2, np.uint64), 0, 0, frames, names, np.zeros(2, np.uint64), 0, 1,
           np.zeros(1, np.bool_))
    unwrap(frames, 64, lengths, names, 0, 1, np.zeros(64, np.uint8), 64, lengths, names, np.zeros(1, np.int64), 1,
           np.zeros(1, np.int64))
