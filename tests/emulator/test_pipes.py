"""Pipes: the data plane as P processes, each packet steered to pipe slot mod P by the kernel.

What must hold for any P: the kernel's BPF program sees what we think it
sees (the UDP payload for SO_REUSEPORT, the Ethernet frame for
PACKET_FANOUT), a slot's packets always reach pipe slot % P, aggregations
stay bit-exact with and without impairments, control operations reach
every pipe, and a pipe that dies is reported, never silently lost.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import make_vectors
import numpy as np
import pytest
from helpers import aggregate_over_udp, dense_fixed_sum, sparse_gradients
from veth import veth_pairs

from hina import codec
from hina.control import ControlClient, ControlError, JobConfig, Member
from hina.control.topology import Topology
from hina.emulator import UdpSwitch
from hina.emulator.pipes import join_fanout, reuseport_group
from hina.host import JobSpec
from hina.wire import sockio
from hina.wire.frames import encapsulate, ip_bytes, ipv4_checksum, mac_bytes
from hina.wire.headers import UDP_PORT, Flags, HinaHeader, pack_header

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
K = 4


def update(job: int, worker: int, slot: int, *, version: int = 0, words: int = K, value: int = 1) -> bytes:
    return pack_header(0, 0, job, worker, 0, (version << 15) | slot, slot * words, words, 0) + \
        value.to_bytes(4, "big", signed=True) * words


def drain(sock: socket.socket, settle: float = 0.3) -> list[bytes]:
    got = []
    sock.settimeout(settle)
    while True:
        try:
            got.append(sock.recv(65536))
        except (TimeoutError, BlockingIOError):
            return got


def wait_for(predicate, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


def check_exact(results, grads):
    want = dense_fixed_sum(grads, results[0].shift)
    for w, r in enumerate(results):
        assert np.array_equal(r.fixed, want), f"worker {w}"


# -- the kernel's side -------------------------------------------------------------
@pytest.mark.parametrize("pipes", [2, 3, 4])
def test_reuseport_program_reads_the_slot_from_the_start_of_the_udp_payload(pipes):
    """On this kernel a SO_ATTACH_REUSEPORT_CBPF program sees the datagram from the UDP payload on:
    bytes 6-7 are the hina pool_index, so socket i gets exactly the slots s with s % P == i."""
    socks = reuseport_group(("127.0.0.1", 0), pipes, lambda s: None)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        where = socks[0].getsockname()
        assert all(s.getsockname() == where for s in socks)
        sent = [(slot, version) for slot in (0, 1, 2, 3, 5, 7, 11, 300, 32767) for version in (0, 1)]
        for slot, version in sent:
            tx.sendto(update(1, 0, slot, version=version), where)
        tx.sendto(b"\x00\x01", where)  # too short to hold a slot: the program ends, pipe 0
        for i, sock in enumerate(socks):
            got = drain(sock, 0.1)
            slots = sorted((int.from_bytes(g[6:8], "big") & 0x7FFF, g[6] >> 7) for g in got if len(g) > 2)
            assert slots == sorted(s for s in sent if s[0] % pipes == i), f"socket {i}"
            assert sum(len(g) == 2 for g in got) == (i == 0)
    finally:
        tx.close()
        for s in socks:
            s.close()


# -- UDP switch with pipes ---------------------------------------------------------------
def test_slot_lands_in_pipe_slot_mod_p(make_switch):
    sw = make_switch(4)
    tx = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
    for t in tx:
        t.bind(("127.0.0.1", 0))
    sw.pipeline.add_job(JobConfig(1, 2, K, 0, 64, tuple(Member(w, t.getsockname()) for w, t in enumerate(tx))))
    per_pipe = [0] * 4
    for slot in (5, 13, 6, 63, 63, 40):  # 63 twice: the second is a duplicate, dropped in the same pipe (PENDING)
        tx[0].sendto(update(1, 0, slot), sw.data_address)
        per_pipe[slot % 4] += 1
    counters = wait_for(lambda: (c := sw.pipeline.counters())["frames"] == 6 and c)
    assert counters, sw.pipeline.counters()
    assert [p["frames"] for p in counters["pipes"]] == per_pipe == [1, 2, 1, 2]
    assert counters["pipes"][3]["drops"] == {"duplicate": 1}
    assert counters["drops"] == {"duplicate": 1} and counters["jobs"][1]["updates"] == 5
    # the second worker completes slot 13 in pipe 1, and only there
    tx[1].sendto(update(1, 1, 13, value=2), sw.data_address)
    for t in tx:
        got = drain(t)
        pending = [f for f in got if HinaHeader.unpack(f).flags == Flags.PENDING]  # slot 63's repeat, to both
        assert len(pending) == 1 and HinaHeader.unpack(pending[0]).slot == 63
        got = [f for f in got if f not in pending]
        assert len(got) == 1 and got[0][16:] == (3).to_bytes(4, "big") * K
    counters = sw.pipeline.counters()
    assert [p["jobs"][str(1)]["results"] for p in counters["pipes"]] == [0, 1, 0, 0]
    for t in tx:
        t.close()


@pytest.mark.parametrize("pipes,batch", [(1, None), (1, False), (4, None)])
def test_aggregation_is_bit_exact_and_spread_over_the_pipes(make_switch, pipes, batch):
    sw = make_switch(pipes, batch)
    grads = sparse_gradients(np.random.default_rng(pipes), 4, 40_009, 0.05)
    params = codec.CodecParams(length=40_009, workers=4, mode="auto")
    results, _ = aggregate_over_udp(sw, JobSpec(job_id=3, words=128, slots=16), params, grads)
    check_exact(results, grads)
    counters = sw.counters()
    if pipes > 1:
        frames = [p["frames"] for p in counters["pipes"]]
        assert sum(f > 0 for f in frames) == pipes, frames
        assert sum(frames) == counters["frames"]


def test_impairments_with_pipes_stay_exact_and_are_counted(make_switch):
    sw = make_switch(4, drop=0.03, dup=0.02, reorder=0.02, seed=11)
    grads = sparse_gradients(np.random.default_rng(3), 3, 30_011, 0.05)
    params = codec.CodecParams(length=30_011, workers=3)
    results, workers = aggregate_over_udp(sw, JobSpec(job_id=4, words=128, slots=8), params, grads)
    check_exact(results, grads)
    counters = sw.counters()
    assert counters["impair_in"]["dropped"] + counters["impair_out"]["dropped"] > 0
    assert sum(w.stats["retransmissions"] for w in workers) > 0
    # each pipe draws from its own seed (seed + pipe index): their fates differ
    fates = [json.dumps(p["impair_in"], sort_keys=True) for p in counters["pipes"]]
    assert len(set(fates)) > 1
    assert sw.impairment_counters()["impair_in"] == counters["impair_in"]


def test_control_operations_reach_every_pipe(make_switch):
    sw = make_switch(3)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind(("127.0.0.1", 0))
    with ControlClient(sw.control_address) as ctl:
        ctl.add_job(JobConfig(7, 2, K, 0, 9, (Member(0, tx.getsockname()),)))
        for slot in range(9):
            tx.sendto(update(7, 0, slot), sw.data_address)
        assert wait_for(lambda: ctl.counters()["jobs"][7]["updates"] == 9)
        ctl.reset_job(7)  # every pipe's copies emptied: the same UPDATEs are first arrivals again
        for slot in range(9):
            tx.sendto(update(7, 0, slot), sw.data_address)
        assert wait_for(lambda: ctl.counters()["jobs"][7]["updates"] == 18)
        assert ctl.counters()["drops"] == {}
        # a joining worker learns the pipes: its loss detection compares chunks within a pipe
        assert ctl.join(JobConfig(7, 2, K, 0, 9), Member(1, ("127.0.0.1", 9))) == 3
        with pytest.raises(ControlError, match="overlap"):  # refused alike by every pipe
            ctl.add_job(JobConfig(8, 2, K, 4, 4))
        ctl.remove_job(7)
        assert ctl.counters()["jobs"] == {}
        assert all(p["jobs"] == {} for p in ctl.counters()["pipes"])
        assert ctl.status()["alive"] == 3
    tx.close()


def test_a_killed_pipe_is_reported(make_switch):
    sw = make_switch(4)
    with ControlClient(sw.control_address) as ctl:
        ctl.ping()
        victim = sw.pipe_set.procs[2].pid
        os.kill(victim, signal.SIGKILL)
        status = wait_for(lambda: (s := ctl.status())["down"] and s)
        assert status["alive"] == 3
        assert status["down"] == [f"pipe 2 of 4 (pid {victim}) is down: killed by signal SIGKILL"]
        for call in (ctl.ping, lambda: ctl.reset_job(1), lambda: ctl.add_job(JobConfig(1, 2, K, 0, 4))):
            with pytest.raises(ControlError, match=f"pipe 2 of 4 \\(pid {victim}\\) is down"):
                call()
        counters = ctl.counters()  # still answered, for diagnosis, and says which pipe is gone
        assert [p["alive"] for p in counters["pipes"]] == [True, True, False, True]
        assert counters["pipes_down"] == status["down"]


def test_cli_pipes_reports_a_dead_pipe_on_stderr():
    proc = subprocess.Popen([sys.executable, "-m", "hina.emulator", "--pipes", "3"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        info = json.loads(proc.stdout.readline())
        assert info["pipes"] == 3
        with ControlClient(tuple(info["control"])) as ctl:
            pids = ctl.status()["pids"]
            assert len(pids) == 3 and proc.pid not in pids
            os.kill(pids[1], signal.SIGKILL)
            assert wait_for(lambda: ctl.status()["down"])
            ctl.shutdown()
        proc.wait(10)
        assert proc.returncode == 0
        assert f"hina.emulator: pipe 1 of 3 (pid {pids[1]}) is down: killed by signal SIGKILL" in proc.stderr.read()
        for pid in (pids[0], pids[2]):  # the other pipes went with the switch
            assert wait_for(lambda: not Path(f"/proc/{pid}").exists() or
                            Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z")
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("value", ["0", "-1", "x", "2.5", "65"])
def test_cli_refuses_bad_pipes_in_one_line(value):
    proc = subprocess.run([sys.executable, "-m", "hina.emulator", f"--pipes={value}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--pipes: " in proc.stderr and repr(value) in proc.stderr


def test_bad_pipes_argument_is_refused_by_the_class():
    with pytest.raises(ValueError, match="pipes must be a positive integer, got 0"):
        UdpSwitch(pipes=0)


# -- the packet vectors' UDP-level cases through P pipes ---------------------------------
def _udp_level(case) -> bool:
    """A case every frame of which is a well-formed hina datagram (what a UDP socket can carry), each port one
    worker's: the others test the Ethernet/IPv4 parser, which the kernel does in UDP mode, or ranks that
    share a port at UDP ports of their own (the raw-frame path's members by address)."""
    if any("udp_port" in m for job in case["topology"]["jobs"] for m in job["members"]):
        return False
    for pkt in case["packets"]:
        f = bytes.fromhex(pkt["frame"])
        if not (len(f) >= 42 + 16 and f[12:14] == b"\x08\x00" and f[14] == 0x45 and f[23] == 17
                and int.from_bytes(f[36:38], "big") == UDP_PORT and int.from_bytes(f[38:40], "big") == len(f) - 34
                and ipv4_checksum(f, 14) == int.from_bytes(f[24:26], "big")):
            return False
    return True


UDP_CASES = [c for c in make_vectors.build_cases() if _udp_level(c)]


@pytest.mark.parametrize("pipes,batch", [(1, None), (1, False), (4, None)],
                         ids=["P1-batched", "P1-per-packet", "P4-batched"])
@pytest.mark.parametrize("case", UDP_CASES, ids=[c["name"] for c in UDP_CASES])
def test_udp_level_vectors_pass(make_switch, pipes, batch, case):
    """The hina payloads of the vectors, sent from one UDP socket per port; the RESULT payloads and
    drop counters must be the vector's, whichever pipes the slots land in, with recvmmsg/sendmmsg
    batches (a burst of the case's datagrams in one call) and with one system call per packet."""
    topo = Topology.from_config(case["topology"])
    socks = {}
    for h in topo.hosts:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        socks[h.port] = s
    sw = make_switch(pipes, batch)
    assert sw.batch == (batch is None and sockio.available())
    for job in topo.jobs:  # ports become the sockets' addresses, a tree's parents' too
        members = tuple(Member(m.worker_id, socks[m.source].getsockname()) for m in job.members)
        parents = tuple(Member(m.worker_id, socks[m.source].getsockname()) for m in job.parents)
        sw.pipeline.add_job(dataclasses.replace(job, members=members, parents=parents))
    for pkt in case["packets"]:  # loopback enqueues at send: the order per slot is the send order
        socks[pkt["port"]].sendto(bytes.fromhex(pkt["frame"])[42:], sw.data_address)
    assert wait_for(lambda: sw.counters()["frames"] == len(case["packets"]))
    got = sorted((port, frame) for port, s in socks.items() for frame in drain(s, 0.15))
    want = sorted((e["port"], bytes.fromhex(e["frame"])[42:]) for e in case["expected"])
    assert got == want
    assert {k: v for k, v in sw.counters()["drops"].items() if v} == case["expected_drops"]
    for s in socks.values():
        s.close()


def test_some_vectors_are_udp_level():
    assert len(UDP_CASES) >= 10


# -- raw frames: PACKET_FANOUT ------------------------------------------------------------
@pytest.mark.root
def test_fanout_program_sees_a_received_frame_from_its_ip_header():
    """Why `frame_program` loads through SKF_LL_OFF: on this kernel a PACKET_FANOUT_CBPF program runs
    on a received frame with its data at the IPv4 header, past the Ethernet header.  Program: socket
    (byte 0 & 1); byte 0 is 0x45 at the IPv4 header (socket 1), 0x02 at our destination MAC (socket 0)."""
    with veth_pairs([("hpf0", "hqf0")]):
        socks = []
        try:
            for _ in range(2):
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
                s.bind(("hpf0", 0))
                socks.append(s)
            join_fanout(socks, 2, [(0x30, 0, 0, 0), (0x54, 0, 0, 1), (0x16, 0, 0, 0)])  # ldb [0]; and #1; ret a
            with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as tx:
                tx.bind(("hqf0", 0))
                tx.send(encapsulate(b"x" * 16, src_mac=b"\x02" * 6, dst_mac=b"\x02\0\0\0\0\x01",
                                    src_ip=bytes(4), dst_ip=bytes(4), sport=1, dport=UDP_PORT))
            got = [[f for f in drain(s, 0.2) if f.endswith(b"x" * 16)] for s in socks]
            assert [len(g) for g in got] == [0, 1]
            assert got[1][0][0] == 0x02  # the socket itself still reads the whole frame
        finally:
            for s in socks:
                s.close()


@pytest.mark.root
def test_fanout_steers_raw_frames_by_slot_and_forwards_the_rest():
    from hina.emulator.raw import RawSwitch

    topo = Topology.from_config(make_vectors.TOPOLOGY)
    ports = [h.port for h in topo.hosts]
    with veth_pairs([(f"hp{p}", f"hq{p}") for p in ports]):
        sw = RawSwitch({p: f"hp{p}" for p in ports}, topo, pipes=4)
        sw.start_thread()
        taps = {}
        try:
            for p in ports:
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
                s.bind((f"hq{p}", 0))
                taps[p] = s
            hosts = {h.port: h for h in topo.hosts}

            def frame(port, payload):
                h = hosts[port]
                return encapsulate(payload, src_mac=mac_bytes(h.mac), dst_mac=mac_bytes(topo.switch_mac),
                                   src_ip=ip_bytes(h.ip), dst_ip=ip_bytes(topo.switch_ip), sport=40000 + port,
                                   dport=UDP_PORT)

            # job 2 (slots 4..7, workers on ports 4 and 1): complete slots 5 and 6; one lone UPDATE to slot 7
            sent = [(4, 2, 0, 5), (1, 2, 1, 5), (4, 2, 0, 6), (1, 2, 1, 6), (4, 2, 0, 7)]
            for port, job, worker, slot in sent:
                taps[port].send(frame(port, update(job, worker, slot, words=32, value=worker + 1)))
            # a non-hina frame (an ARP-like broadcast) must still be flooded, by pipe 0
            taps[2].send(b"\xff" * 6 + mac_bytes(hosts[2].mac) + b"\x08\x06" + bytes(28))
            counters = wait_for(lambda: (c := sw.counters())["frames"] >= 5 and c["forwarded"] >= 1 and c)
            assert counters, sw.counters()
            assert [p["frames"] for p in counters["pipes"]] == [0, 2, 2, 1]
            assert [p["forwarded"] for p in counters["pipes"]] == [1, 0, 0, 0]
            time.sleep(0.2)
            results = {p: [f for f in drain(taps[p], 0.2) if f[:6] == mac_bytes(hosts[p].mac) and len(f) > 60]
                       for p in (1, 4)}
            for p in (1, 4):
                sums = sorted(int.from_bytes(f[42 + 6 : 42 + 8], "big") for f in results[p])
                assert sums == [5, 6], p
                assert all(f[42 + 16 :] == (3).to_bytes(4, "big") * 32 for f in results[p])
            flooded = [f for f in drain(taps[3], 0.1) if f[12:14] == b"\x08\x06"]
            assert len(flooded) == 1
        finally:
            for s in taps.values():
                s.close()
            sw.close()


def test_a_named_port_held_by_another_pipes_switch_is_refused(make_switch):
    """SO_REUSEPORT would let a second switch join the first one's group: it must fail to bind instead."""
    sw = make_switch(2)
    with pytest.raises(OSError, match="in use"):
        UdpSwitch(pipes=2, data=sw.data_address)
