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


def counted_sends(monkeypatch):
    """Every `BatchSocket.send` in this process, counted: the messages of each call (a list), and the sendmmsg
    system calls under them (`calls`)."""
    sends, calls = [], [0]
    send = sockio.BatchSocket.send

    def counting(self, count, coalesced=False):
        sends.append(count)
        raw = self._sendmmsg

        def syscall(*args):
            calls[0] += 1
            return raw(*args)

        self._sendmmsg = syscall
        try:
            return send(self, count, coalesced)
        finally:
            self._sendmmsg = raw
    monkeypatch.setattr(sockio.BatchSocket, "send", counting)
    return sends, calls


def complete_slots(switch_address, members, slots, words=8):
    """Every member's UPDATE for each slot of job 1, slot by slot: the switch completes one slot per 8 frames."""
    for slot in range(slots):
        for w, member in enumerate(members):
            member.sendto(update_frame(w, slot, np.full(words, w + slot, np.int32)), switch_address)


def check_results(members, slots, words=8):
    """Each member got each slot's RESULT once, with the sum."""
    for member in members:
        results = drain(member)
        assert sorted(unpack_header(f)[5] for f in results) == list(range(slots))
        for frame in results:
            slot = unpack_header(frame)[5]
            want = sum(w + slot for w in range(len(members)))
            assert np.frombuffer(frame, ">i4", offset=HEADER_BYTES).tolist() == [want] * words


@pytest.mark.parametrize("impaired", [False, True])
def test_a_result_goes_to_every_member_in_one_sendmmsg_with_the_batch_around_it(monkeypatch, impaired):
    """The UDP switch's replication: a batch of UPDATEs that completes RESULTs for 8 members leaves with one
    sendmmsg system call carrying every member's replica of every RESULT it completed, not a send per member
    (or per RESULT).  The impaired path (here a delay line) queues its outputs and sends them the same way,
    a turn of the loop at a time."""
    from hina.emulator import ImpairmentConfig, UdpSwitch

    members, slots = [udp_socket() for _ in range(8)], 12
    sends, calls = counted_sends(monkeypatch)
    sw = UdpSwitch(Pipeline(), impair=ImpairmentConfig(delay=0.002) if impaired else None)
    try:
        sw.pipeline.add_job(JobConfig(1, 8, 8, 0, 16, tuple(Member(w, m.getsockname()) for w, m in enumerate(members))))
        complete_slots(sw.data_address, members, slots)  # waiting in the switch's socket before it serves
        sw.start_thread()
        check_results(members, slots)
    finally:
        sw.close()
    assert sum(sends) == 8 * slots  # a replica per member per RESULT
    assert all(count % 8 == 0 for count in sends)  # a RESULT's replicas never split across calls
    assert calls[0] == len(sends) <= (slots if impaired else 2)  # 96 UPDATEs: two reads of 64 and 32
    assert sw.profile["sends"] == len(sends) and sw.profile["sent"] == 8 * slots
    if not impaired:
        assert sw.profile["receives"] == 2 and sw.profile["received"] == 8 * slots


@pytest.mark.root
@pytest.mark.parametrize("offload", [False, True])
def test_the_raw_switch_sends_every_replica_of_a_batch_with_one_sendmmsg(monkeypatch, offload):
    """The raw backend (Mininet's) on veth pairs, 4 members on 4 ports: the UPDATE read that completes 12 slots
    answers them with one sendmmsg for every member's replica, each to its own port; with segmentation offload
    each member's 12 replicas go as one super-frame (4 messages in all), which the member's side cuts back into
    the 12 RESULTs."""
    from veth import can_make_veths, ip, veth_pairs

    from hina.control.topology import Host, Topology
    from hina.emulator.raw import RawSwitch
    from hina.wire.frames import HINA_AT, encapsulate, ip_bytes, mac_bytes
    from hina.wire.headers import UDP_PORT

    if (why := can_make_veths()) is not None:
        pytest.skip(why)
    ports, slots, words = (1, 2, 3, 4), 12, 512  # a replica past GATHER_LEAST: gathered
    hosts = tuple(Host(p, f"02:00:00:00:00:0{p}", f"10.0.0.{p}") for p in ports)
    job = JobConfig(1, len(ports), words, 0, 16, tuple(Member(w, p) for w, p in enumerate(ports)))
    topo = Topology("02:00:00:00:00:fe", "10.0.0.254", hosts, (job,))
    sends, calls = counted_sends(monkeypatch)
    with veth_pairs([(f"hmp{p}", f"hmq{p}") for p in ports]):
        for p in ports:
            for end in (f"hmp{p}", f"hmq{p}"):
                ip("link", "set", end, "mtu", "9000")
        taps = {}
        sw = RawSwitch({p: f"hmp{p}" for p in ports}, topo, offload=offload)
        try:
            for p in ports:
                taps[p] = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
                taps[p].bind((f"hmq{p}", 0))
            for w, p in enumerate(ports):  # each member's UPDATEs wait in the switch's sockets before it serves
                for slot in range(slots):
                    payload = update_frame(w, slot, np.full(words, w + slot, np.int32))
                    taps[p].send(encapsulate(payload, src_mac=mac_bytes(hosts[w].mac),
                                             dst_mac=mac_bytes(topo.switch_mac), src_ip=ip_bytes(hosts[w].ip),
                                             dst_ip=ip_bytes(topo.switch_ip), sport=UDP_PORT, dport=UDP_PORT))
            sw.start_thread()
            got = {p: [f for f in drain(taps[p]) if f[:6] == mac_bytes(hosts[p - 1].mac)] for p in ports}
        finally:
            for s in taps.values():
                s.close()
            sw.close()
    assert calls[0] == len(sends) == 1  # the read that completed the slots, answered with one system call
    assert sends == [len(ports) if offload else len(ports) * slots]
    for p in ports:
        size = HEADER_BYTES + 4 * words
        payload = b"".join(f[HINA_AT:] for f in got[p])  # a super-frame is its RESULTs back to back
        assert len(got[p]) == (1 if offload else slots) and len(payload) == slots * size
        results = [payload[at : at + size] for at in range(0, len(payload), size)]
        assert [unpack_header(r)[5] for r in results] == list(range(slots))
        for slot, r in enumerate(results):
            want = sum(w + slot for w in range(len(ports)))
            assert np.frombuffer(r, ">i4", offset=HEADER_BYTES).tolist() == [want] * words
