"""Segmentation offload (`hina.wire.offload`) on the emulator's raw path: a host's super-frame cut into the
datagrams it stands for (`unwrap`), each member's replicas gathered into super-frames the kernel cuts the same
way (`gather`), and the worker's ring coalesced into UDP_SEGMENT messages (`coalesce`).
The kernel's cut is modelled here as the kernel does it (the UDP payload in gso_size pieces, each behind the
super-frame's headers with its own lengths); the Mininet runs check the kernel's own."""

from __future__ import annotations

import struct

import numpy as np

from hina.wire import offload
from hina.wire.frames import HINA_AT, IPV4_AT, UDP_AT, encapsulate, ipv4_checksum
from hina.wire.headers import UDP_PORT
from hina.wire.offload import VNET, VNET_F_NEEDS_CSUM, VNET_GSO_NONE, VNET_GSO_UDP_L4, VNET_HDR_BYTES
from hina.wire.sockio import SLL_IFINDEX_AT, SOCKADDR_LL_BYTES

MAC_A, MAC_S = bytes.fromhex("020000000001"), bytes.fromhex("02000000aaaa")
IP_A, IP_S = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 254])


def hina_frame(payload: bytes, ident: int = 7, dst_mac: bytes = MAC_S, dst_ip: bytes = IP_S, dport: int = UDP_PORT):
    return encapsulate(payload, src_mac=MAC_A, dst_mac=dst_mac, src_ip=IP_A, dst_ip=dst_ip, sport=UDP_PORT,
                       dport=dport, ident=ident)


def kernel_cut(super_frame: bytes, segment: int) -> list[bytes]:
    """What the kernel makes of a UDP super-frame: its payload in `segment`-byte pieces, each behind the
    headers with its own IPv4 total length, identification (+1 each) and checksum and UDP length."""
    head, payload = super_frame[:HINA_AT], super_frame[HINA_AT:]
    ident = struct.unpack_from("!H", head, IPV4_AT + 4)[0]
    out = []
    for k, at in enumerate(range(0, len(payload), segment)):
        piece = payload[at : at + segment]
        h = bytearray(head)
        struct.pack_into("!HH", h, IPV4_AT + 2, 28 + len(piece), (ident + k) & 0xFFFF)
        struct.pack_into("!H", h, IPV4_AT + 10, 0)
        struct.pack_into("!H", h, IPV4_AT + 10, ipv4_checksum(bytes(h[IPV4_AT:UDP_AT])))
        struct.pack_into("!H", h, UDP_AT + 4, 8 + len(piece))
        out.append(bytes(h) + piece)
    return out


def received(frames: list[tuple[bytes, bytes]], stride: int = 65536):
    """A recvmmsg batch as the raw backend's buffers hold it: (virtio_net_hdr, frame) per entry."""
    rx = np.zeros(stride * len(frames), np.uint8)
    lengths = np.zeros(2 * len(frames), np.uint32)[::2]
    names = np.zeros((len(frames), SOCKADDR_LL_BYTES), np.uint8)
    for i, (vnet, frame) in enumerate(frames):
        data = vnet + frame
        rx[i * stride : i * stride + len(data)] = np.frombuffer(data, np.uint8)
        lengths[i] = len(data)
        names[i, 0] = i + 1  # tells the entries apart
    return rx, stride, lengths, names


def unwrap_all(frames, capacity=64, out_stride=9216):
    rx, stride, lengths, names = received(frames)
    out = np.zeros(capacity * out_stride, np.uint8)
    out_lengths = np.zeros(2 * capacity, np.uint32)[::2]
    out_names = np.zeros((capacity, SOCKADDR_LL_BYTES), np.uint8)
    origin = np.zeros(capacity, np.int64)
    passed = np.zeros(len(frames), np.int64)
    got, origins, passes, entry = [], [], [], 0
    while entry < len(frames):
        entry, k, p = offload.unwrap(rx, stride, lengths, names, entry, len(frames), out, out_stride, out_lengths,
                                     out_names, origin, capacity, passed)
        got += [bytes(out[j * out_stride : j * out_stride + int(out_lengths[j])]) for j in range(k)]
        origins += [int(origin[j]) for j in range(k)]
        passes += [int(passed[j]) for j in range(p)]
        assert all(out_names[j, 0] == origin[j] + 1 for j in range(k))  # each its entry's name
    return got, origins, passes


def test_a_super_frame_is_cut_into_the_datagrams_it_stands_for():
    segment = 16 + 4 * 100
    payloads = [bytes([k]) * segment for k in range(3)] + [b"\x09" * (16 + 4 * 7)]  # the last one shorter
    whole = hina_frame(b"".join(payloads))
    vnet = VNET.pack(VNET_F_NEEDS_CSUM, VNET_GSO_UDP_L4, HINA_AT, segment, UDP_AT, 6)
    plain = hina_frame(b"\x05" * 40, ident=99)
    got, origins, passed = unwrap_all([(vnet, whole), (VNET.pack(0, VNET_GSO_NONE, 0, 0, 0, 0), plain)])
    assert got == kernel_cut(whole, segment) + [plain] and origins == [0, 0, 0, 0, 1] and passed == []
    for frame in got:  # each a datagram the P4 parser takes: its IPv4 checksum complete
        assert ipv4_checksum(frame[IPV4_AT:UDP_AT]) == struct.unpack_from("!H", frame, IPV4_AT + 10)[0]


def test_what_is_not_hina_keeps_its_header_for_the_slow_path():
    arp = MAC_S + MAC_A + b"\x08\x06" + bytes(28)
    other_udp = hina_frame(b"x" * 100, dport=9999)
    gso_other = VNET.pack(VNET_F_NEEDS_CSUM, VNET_GSO_UDP_L4, HINA_AT, 40, UDP_AT, 6)
    got, _, passed = unwrap_all([(bytes(VNET_HDR_BYTES), arp), (gso_other, other_udp),
                                 (bytes(VNET_HDR_BYTES), hina_frame(b"y" * 60))])
    assert passed == [0, 1] and len(got) == 1


def test_a_batch_larger_than_the_room_is_unwrapped_in_calls_that_each_end_at_an_entry():
    segment = 16 + 4 * 10
    whole = hina_frame(bytes(segment * 5))
    vnet = VNET.pack(VNET_F_NEEDS_CSUM, VNET_GSO_UDP_L4, HINA_AT, segment, UDP_AT, 6)
    got, origins, _ = unwrap_all([(vnet, whole)] * 3, capacity=6)  # 15 datagrams, 6 at a time: 5 + 5 + 5
    assert got == kernel_cut(whole, segment) * 3 and origins == [0] * 5 + [1] * 5 + [2] * 5


def ring(frames: list[tuple[bytes, int]]):
    """A transmit ring as raw_batch leaves it: each frame at its offset, its interface's sockaddr_ll."""
    size = sum(len(f) for f, _ in frames)
    tx = np.zeros(size, np.uint8)
    names = np.zeros((len(frames), SOCKADDR_LL_BYTES), np.uint8)
    iov = np.zeros(2 * len(frames), np.uint64)
    at = 0
    base = 1 << 20  # addresses as a sendmmsg ring holds them: a base and the offset
    for i, (frame, port) in enumerate(frames):
        tx[at : at + len(frame)] = np.frombuffer(frame, np.uint8)
        names[i, SLL_IFINDEX_AT] = port
        iov[2 * i], iov[2 * i + 1] = base + at, len(frame)
        at += len(frame)
    return tx, names, iov, base


def gather_all(frames, limit=64):
    tx, names, iov, base = ring(frames)
    out = np.zeros(len(tx) + VNET_HDR_BYTES * len(frames), np.uint8)
    out_names = np.zeros((len(frames), SOCKADDR_LL_BYTES), np.uint8)
    out_iov = np.zeros(2 * len(frames), np.uint64)
    k = offload.gather(tx, names, iov, base, len(frames), out, out_names, out_iov, 7, limit,
                       np.zeros(len(frames), np.bool_))
    messages = []
    for j in range(k):
        at, length = int(out_iov[2 * j]) - 7, int(out_iov[2 * j + 1])
        data = bytes(out[at : at + length])
        port = int(out_names[j, SLL_IFINDEX_AT])
        messages.append((VNET.unpack(data[:VNET_HDR_BYTES]), data[VNET_HDR_BYTES:], port))
    return messages


def masked(frame: bytes) -> bytes:
    """A frame without what the kernel sets anew in each datagram it cuts: IPv4 identification and checksum,
    UDP checksum (completed from the pseudo-header's sum)."""
    f = bytearray(frame)
    f[IPV4_AT + 4 : IPV4_AT + 6] = f[IPV4_AT + 10 : IPV4_AT + 12] = f[UDP_AT + 6 : UDP_AT + 8] = b"\0\0"
    return bytes(f)


def cut(message) -> list[bytes]:
    (flags, gso_type, hdr_len, segment, start, offset), frame, _ = message
    if gso_type == VNET_GSO_NONE:
        return [frame]
    assert (flags, gso_type, hdr_len, start, offset) == (VNET_F_NEEDS_CSUM, VNET_GSO_UDP_L4, HINA_AT, UDP_AT, 6)
    return kernel_cut(frame, segment)


def test_each_members_replicas_go_as_one_super_frame_that_cuts_back_into_them_in_order():
    big = 16 + 4 * 300
    member = {1: (bytes.fromhex("020000000001"), bytes([10, 0, 0, 1])),
              2: (bytes.fromhex("020000000002"), bytes([10, 0, 0, 2]))}
    frames = []
    for chunk in range(4):  # raw_batch's order: every member's replica of a chunk, chunk after chunk
        for port, (mac, ip) in member.items():
            words = bytes([chunk]) * (big if chunk < 3 else 16 + 4 * 9)  # the last chunk shorter
            frames.append((hina_frame(words, ident=0, dst_mac=mac, dst_ip=ip), port))
    messages = gather_all(frames)
    assert len(messages) == 2 and [m[2] for m in messages] == [1, 2]
    for port in (1, 2):
        (message,) = [m for m in messages if m[2] == port]
        assert message[0][3] == big  # gso_size: the run's datagram payload
        mine = [f for f, p in frames if p == port]
        assert [masked(c) for c in cut(message)] == [masked(f) for f in mine]
        assert [struct.unpack_from("!H", c, IPV4_AT + 4)[0] for c in cut(message)] == list(range(len(mine)))
        # the partial UDP checksum: the pseudo-header's sum, which the kernel completes per datagram
        frame = message[1]
        src, dst = frame[IPV4_AT + 12 : IPV4_AT + 16], frame[IPV4_AT + 16 : IPV4_AT + 20]
        total = 17 + len(frame) - UDP_AT + sum(struct.unpack("!4H", src + dst))
        while total >> 16:
            total = (total & 0xFFFF) + (total >> 16)
        assert struct.unpack_from("!H", frame, UDP_AT + 6)[0] == total


def test_a_larger_frame_ends_a_run_and_small_frames_go_alone():
    big, bigger = 16 + 4 * 300, 16 + 4 * 400
    frames = [(hina_frame(b"a" * big), 1), (hina_frame(b"b" * bigger), 1), (hina_frame(b"c" * bigger), 1),
              (hina_frame(b"d" * 40), 1), (hina_frame(b"e" * 40), 1)]
    messages = gather_all(frames)
    # a run starts at a frame large enough to be worth gathering (the first alone: the next is larger), and
    # a shorter frame ends it as its last; what is left goes alone
    assert [(m[0][1], m[0][3]) for m in messages] == [(VNET_GSO_NONE, 0), (VNET_GSO_UDP_L4, bigger),
                                                      (VNET_GSO_NONE, 0)]
    assert [masked(c) for m in messages for c in cut(m)] == [masked(f) for f, _ in frames]
    assert len(gather_all(frames[1:3], limit=1)) == 2  # at most `limit` frames a super-frame


def test_the_worker_ring_coalesces_into_runs_of_full_frames():
    segment = 100
    lengths = [100, 100, 100, 40, 100, 100, 100, 100, 100]
    iov = np.zeros(2 * len(lengths), np.uint64)
    at = 5000
    for i, n in enumerate(lengths):
        iov[2 * i], iov[2 * i + 1] = at, n
        at += segment  # a ring's slots: each frame at its own stride
    runs = offload.coalesce(iov, len(lengths), segment, 4)  # at most 4 frames a message
    # frames 0-3 (the fourth shorter: it ends its run), 4-7, then 8 alone
    assert [(int(iov[2 * r]) - 5000, int(iov[2 * r + 1])) for r in range(runs)] == [(0, 340), (400, 400), (800, 100)]
