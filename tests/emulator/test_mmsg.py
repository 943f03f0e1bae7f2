"""Batched datagram I/O (recvmmsg/sendmmsg, `hina.wire.sockio`) and the switch's compiled batch paths
(`hina.emulator.batch`)."""

import dataclasses
import socket

import numpy as np
import pytest

from hina.control import JobConfig, Member
from hina.emulator import Pipeline
from hina.emulator import batch as bt
from hina.emulator import registers as reg
from hina.wire import sockio
from hina.wire.frames import ETH_DST_AT, IP_CHECKSUM_AT, IP_DST_AT, IPV4_AT, MAC_BYTES, U16
from hina.wire.headers import HEADER_BYTES, MAX_WORKERS, Drop, pack_header, unpack_header
from hina.wire.sockio import (
    PACKET_OUTGOING,
    SIN_ADDR_AT,
    SIN_PORT_AT,
    SLL_IFINDEX_AT,
    SLL_PKTTYPE_AT,
    SOCKADDR_LL_BYTES,
)

pytestmark = [pytest.mark.skipif(not sockio.available(), reason="recvmmsg/sendmmsg need Linux's libc"),
              pytest.mark.slow]


def udp_socket():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


def drain(sock, timeout=0.5):
    sock.settimeout(timeout)
    got = []
    try:
        while True:
            got.append(sock.recv(65536))
    except TimeoutError:
        return got


def test_one_recv_takes_many_datagrams_with_their_senders():
    rx, senders = udp_socket(), [udp_socket() for _ in range(3)]
    io = sockio.BatchSocket(rx, entries=64, entry_bytes=2048)
    sent = [(i % 3, bytes([i]) * (1 + i)) for i in range(100)]
    for who, data in sent:
        senders[who].sendto(data, rx.getsockname())
    got = []
    while len(got) < 100:
        n = io.recv()
        assert n > 0
        for i, length in enumerate(io.rx_lengths[:n].tolist()):
            port = int.from_bytes(io.rx_names_array[i, SIN_PORT_AT:SIN_ADDR_AT].tobytes(), "big")
            got.append((port, io.rx_array[i * io.entry_bytes : i * io.entry_bytes + length].tobytes()))
    assert io.recv() == 0  # nothing left, and no blocking
    assert io.receives == 2 and io.received == 100  # 64 + 36: two system calls
    assert got == [(senders[who].getsockname()[1], data) for who, data in sent]
    for s in senders + [rx]:
        s.close()


def test_a_refused_message_is_skipped_counted_and_the_rest_go():
    tx, rx = udp_socket(), udp_socket()
    io = sockio.BatchSocket(tx, entries=4, entry_bytes=2048, tx_bytes=1 << 18)
    name = np.frombuffer(sockio.sockaddr_in(*rx.getsockname()), np.uint8)
    # the second is longer than any UDP datagram (EMSGSIZE); None: the previous frame, one more message
    messages = [b"first", bytes(70_000), b"third", None]
    at = 0
    for m, frame in enumerate(messages):
        if frame is not None:
            io.tx_array[at : at + len(frame)] = np.frombuffer(frame, np.uint8)
            start, size, at = at, len(frame), at + len(frame)
        io.tx_names_array[m] = name
        io.tx_iov[2 * m : 2 * m + 2] = (io.tx_address + start, size)
    assert io.send(4) == 1
    assert drain(rx) == [b"first", b"third", b"third"]
    assert (io.sent, io.failed) == (3, 1)
    tx.close()
    rx.close()


def test_a_ring_of_back_to_back_frames_goes_as_one_segmentation_offload_message():
    """With `offload_segments`, `send` merges the ring's frames (all `segment` bytes but a shorter last) into
    one UDP_SEGMENT message, which the kernel cuts into the datagrams the receiver gets, in order."""
    rx, tx = udp_socket(), udp_socket()
    tx.connect(rx.getsockname())
    segment = 1000
    io = sockio.BatchSocket(tx, entries=4, entry_bytes=2048, tx_messages=8, tx_bytes=8 * segment, name_bytes=0)
    assert not io.offload_segments(65536)  # larger than loopback's MTU allows a datagram: not asked for
    if not io.offload_segments(segment):
        pytest.skip("this kernel has no UDP segmentation offload")
    frames = [bytes([k]) * segment for k in range(4)] + [b"\x09" * 300]
    for m, frame in enumerate(frames):
        io.tx_array[m * segment : m * segment + len(frame)] = np.frombuffer(frame, np.uint8)
        io.tx_iov[2 * m : 2 * m + 2] = (io.tx_address + m * segment, len(frame))
    assert io.send(len(frames)) == 0
    assert io.sent == 1  # one message: the kernel cut it
    assert drain(rx) == frames
    tx.close()
    rx.close()


def update_frame(worker, slot, words):
    return pack_header(0, 0, 1, worker, 0, slot, slot * len(words), len(words), 0) + \
        np.asarray(words, dtype=">i4").tobytes()


def test_udp_batch_stops_before_the_ring_is_full_and_resumes_exactly():
    """A ring with room for one multicast at a time: the kernel hands back after each RESULT, the
    caller sends and calls again, and every RESULT goes out once, to both members, with the sum."""
    switch, a, b = udp_socket(), udp_socket(), udp_socket()
    p = Pipeline()
    p.add_job(JobConfig(1, 2, 8, 0, 16, (Member(0, a.getsockname()), Member(1, b.getsockname()))))
    rng = np.random.default_rng(3)
    grads = rng.integers(-(2**31), 2**31, size=(2, 12, 8))
    for slot in range(12):
        a.sendto(update_frame(0, slot, grads[0, slot]), switch.getsockname())
        b.sendto(update_frame(1, slot, grads[1, slot]), switch.getsockname())
    io = sockio.BatchSocket(switch, entries=64, entry_bytes=2048, tx_messages=MAX_WORKERS + 1)
    n = io.recv()
    assert n == 24
    done, calls = 0, 0
    while done < n:
        done, messages, used = bt.udp_batch(*p.kernel_args, io.rx_array, io.entry_bytes, io.rx_lengths,
                                            io.rx_names_array, done, n, io.tx_array, io.tx_names_array, io.tx_iov,
                                            io.tx_address, io.tx_capacity)
        calls += 1
        assert messages in (0, 2) and used == (messages // 2) * (HEADER_BYTES + 4 * 8)  # one frame per multicast
        assert io.send(messages) == 0
    assert calls >= 12
    want = (grads[0] + grads[1]).astype(np.int64)
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)
    for member in (a, b):
        results = drain(member)
        assert len(results) == 12
        for frame in results:
            slot = unpack_header(frame)[5]
            assert np.array_equal(np.frombuffer(frame, ">i4", offset=HEADER_BYTES), want[slot])
    assert p.counters()["jobs"][1]["results"] == 12 and p.frames == 24
    for s in (switch, a, b):
        s.close()


def test_a_member_named_by_hostname_is_matched_frame_by_frame_only():
    """Sources are ids: a dotted IPv4 member gets the id the batch path computes from the wire;
    anything else (a name, an in-process port) gets one of its own, matched by the per-frame path."""
    p = Pipeline()
    assert p.source_id(("10.0.0.1", 5000)) == reg.udp_source_id("10.0.0.1", 5000) == (10 << 40 | 1 << 16 | 5000)
    assert p.source_id(3) == reg.port_source_id(3)
    named = p.source_id(("switch-host", 5000))
    assert named >= reg.OTHER_IDS and p.source_id(("switch-host", 5000)) == named
    p.add_job(JobConfig(1, 1, 2, 0, 1, (Member(0, ("switch-host", 5000)),)))
    emit = p.update(update_frame(0, 0, [5, -6]), ("switch-host", 5000))
    assert emit.dests == (("switch-host", 5000),)
    assert np.frombuffer(emit.frame, ">i4", offset=HEADER_BYTES).tolist() == [5, -6]


def test_raw_batch_parses_rewrites_each_copy_and_leaves_other_frames_to_the_caller():
    """The compiled raw path agrees with `FrameSwitch` frame for frame: a completed slot's RESULT goes to
    each member's port with that port's addresses and a correct IPv4 checksum, the bytes after the
    hina frame ride along; a port without an interface is counted, not sent; ARP is punted; a bad
    checksum is dropped and counted; with the packet type check, frames this host sent are skipped."""
    from hina.control.topology import Host, Topology
    from hina.emulator.frames import FrameSwitch
    from hina.wire.frames import encapsulate, ip_bytes, ipv4_checksum, mac_bytes

    words = 4
    hosts = tuple(Host(p, f"02:00:00:00:00:0{p}", f"10.0.0.{p}") for p in (1, 2, 3))
    job = JobConfig(7, 3, words, 0, 4, tuple(Member(w, w + 1) for w in range(3)))
    topo = Topology("02:00:00:00:00:fe", "10.0.0.254", hosts, (job,))
    batched, reference = FrameSwitch(topo), FrameSwitch(topo)

    def frame(port, worker, slot, trailer=b""):
        payload = pack_header(0, 0, 7, worker, 0, slot, slot * words, words, 0) + \
            np.arange(words, dtype=">i4").tobytes() + trailer
        h = hosts[port - 1]
        f = bytearray(encapsulate(payload, src_mac=mac_bytes(h.mac), dst_mac=mac_bytes(topo.switch_mac),
                                  src_ip=ip_bytes(h.ip), dst_ip=ip_bytes(topo.switch_ip), sport=5000, dport=0x4E41,
                                  udp_len=8 + HEADER_BYTES + 4 * words))
        return f

    bad = frame(1, 0, 2)
    bad[IP_CHECKSUM_AT] ^= 0xFF
    arp = b"\xff" * 6 + mac_bytes(hosts[0].mac) + b"\x08\x06" + bytes(28)
    frames = [(1, frame(1, 0, 1)), (2, frame(2, 1, 1)), (3, frame(3, 2, 1, trailer=b"tail")), (1, bad), (1, arp),
              (2, frame(2, 1, 3))]
    stride = 256
    rx = np.zeros(stride * len(frames), np.uint8)
    lengths = np.zeros(2 * len(frames), np.uint32)[::2]
    names = np.zeros((len(frames), SOCKADDR_LL_BYTES), np.uint8)
    for i, (_, f) in enumerate(frames):
        rx[i * stride : i * stride + len(f)] = np.frombuffer(bytes(f), np.uint8)
        lengths[i] = len(f)
    names[5, SLL_PKTTYPE_AT] = PACKET_OUTGOING  # the last frame: one this host sent
    host_table = batched.hosts_bytes  # what RawSwitch hands the kernel
    port_names = np.zeros((4, SOCKADDR_LL_BYTES), np.uint8)
    port_names[1, 0] = port_names[3, 0] = 17  # port 2 has no interface
    port_names[1, SLL_IFINDEX_AT], port_names[3, SLL_IFINDEX_AT] = 11, 13
    punt = np.zeros(len(frames), np.int64)
    tx = np.zeros(1 << 16, np.uint8)
    tx_names = np.zeros((64, SOCKADDR_LL_BYTES), np.uint8)
    tx_iov = np.zeros(128, np.uint64)
    p = batched.pipeline
    messages = punted = unsent = 0
    for i, (port, _) in enumerate(frames):  # each frame's own port, as each interface is read
        at = messages * 256  # each call's outputs at their own place in one ring
        _, m, _, k, u = bt.raw_batch(*p.kernel_args, rx, stride, lengths, names, True, i, i + 1, port, host_table,
                                     port_names, punt[punted:], tx[at:], tx_names[messages:], tx_iov[2 * messages:],
                                     at, 64)
        messages, punted, unsent = messages + m, punted + k, unsent + u
    assert (messages, unsent, punted) == (2, 1, 1) and punt[0] == 4
    for port, f in frames[:3]:
        outs = reference.process(port, bytes(f))
    want = {port: bytes(out) for port, out in outs}
    assert set(want) == {1, 2, 3}
    for m, port in enumerate((1, 3)):  # in worker order, port 2 skipped
        at, size = int(tx_iov[2 * m]), int(tx_iov[2 * m + 1])
        got = tx[at : at + size].tobytes()
        assert tx_names[m, SLL_IFINDEX_AT] == {1: 11, 3: 13}[port]
        assert got == want[port] and got.endswith(b"tail")
        assert got[ETH_DST_AT : ETH_DST_AT + MAC_BYTES] == mac_bytes(hosts[port - 1].mac)
        assert ipv4_checksum(got, IPV4_AT) == U16.unpack_from(got, IP_CHECKSUM_AT)[0]
    assert p.drops == {Drop.BAD_CHECKSUM: 1} and p.frames == 4  # 3 UPDATEs and the bad one; the sent one skipped
    assert p.jobs[7].results == 1


def test_workers_behind_one_port_get_one_copy_there_at_the_broadcast_address():
    """Aggregation at a spine over plain leaves: four workers behind each of two ports.  The RESULT goes
    once to each port (the plain switch floods it to its hosts), not once per worker, addressed to the
    broadcast MAC and IP; the compiled path and `FrameSwitch` agree, and so do the P4 groups."""
    from hina.control.controller import p4_entries
    from hina.control.topology import BROADCAST_MAC, Host, Topology
    from hina.emulator.frames import FrameSwitch
    from hina.wire.frames import encapsulate, ip_bytes, mac_bytes

    words, workers = 4, 8
    hosts = tuple(Host(p, BROADCAST_MAC, "255.255.255.255") for p in (1, 2))
    job = JobConfig(7, workers, words, 0, 4, tuple(Member(w, 1 + w // 4) for w in range(workers)))
    topo = Topology("02:00:00:00:00:fe", "10.0.0.254", hosts, (job,))
    assert topo.groups()[7 + 2] == (1, 2)
    p4_job = dataclasses.replace(job, words=32)  # the P4 program's K
    assert [port for port, _ in p4_entries(dataclasses.replace(topo, jobs=(p4_job,)))[1][7 + 2]] == [1, 2]
    batched, reference = FrameSwitch(topo), FrameSwitch(topo)

    def frame(worker):
        payload = pack_header(0, 0, 7, worker, 0, 1, words, words, 0) + np.arange(words, dtype=">i4").tobytes()
        return encapsulate(payload, src_mac=mac_bytes(f"02:00:00:00:01:0{worker + 1}"),
                           dst_mac=mac_bytes(topo.switch_mac), src_ip=ip_bytes(f"10.0.0.{worker + 1}"),
                           dst_ip=ip_bytes(topo.switch_ip), sport=0x4E41, dport=0x4E41)

    for w in range(workers):
        outs = reference.process(1 + w // 4, frame(w))
    assert sorted(port for port, _ in outs) == [1, 2]
    assert all(bytes(out[ETH_DST_AT : ETH_DST_AT + MAC_BYTES]) == b"\xff" * MAC_BYTES
               and bytes(out[IP_DST_AT : IP_DST_AT + 4]) == b"\xff" * 4 for _, out in outs)
    stride = 128
    rx = np.zeros(stride * workers, np.uint8)
    lengths = np.zeros(2 * workers, np.uint32)[::2]
    for w in range(workers):
        f = frame(w)
        rx[w * stride : w * stride + len(f)] = np.frombuffer(f, np.uint8)
        lengths[w] = len(f)
    port_names = np.zeros((3, SOCKADDR_LL_BYTES), np.uint8)
    port_names[1, 0] = port_names[2, 0] = 17
    port_names[1, SLL_IFINDEX_AT], port_names[2, SLL_IFINDEX_AT] = 11, 12
    tx, tx_names = np.zeros(1 << 14, np.uint8), np.zeros((64, SOCKADDR_LL_BYTES), np.uint8)
    tx_iov = np.zeros(128, np.uint64)
    punt = np.zeros(workers, np.int64)
    rx_names = np.zeros((workers, SOCKADDR_LL_BYTES), np.uint8)
    p = batched.pipeline
    messages = 0
    for w in range(workers):
        _, m, _, _, _ = bt.raw_batch(*p.kernel_args, rx, stride, lengths, rx_names, False, w, w + 1, 1 + w // 4,
                                     batched.hosts_bytes, port_names, punt, tx, tx_names, tx_iov, 0, 64)
        messages += m
    assert messages == 2  # one per port, not one per worker
    want = {port: bytes(out) for port, out in outs}
    for m, port in enumerate((1, 2)):
        at, size = int(tx_iov[2 * m]), int(tx_iov[2 * m + 1])
        assert tx[at : at + size].tobytes() == want[port] and tx_names[m, SLL_IFINDEX_AT] == 10 + port
