"""The XDP switch's program against the emulator, without a network (BPF_PROG_TEST_RUN): its header is the
wire format's, hostile frames (fuzz, floods, overflow) are dropped and counted as the emulator counts them and
never leave a wrong word, and the jobs it cannot hold are refused in one line."""

import json
import random
import re
import runpy
import struct
from pathlib import Path

import numpy as np
import pytest
from helpers import copy_taken_again_case

from hina.control.config import JobConfig, Member
from hina.control.topology import Host, Topology
from hina.emulator import fuzz
from hina.emulator.frames import FrameSwitch
from hina.emulator.xdp import build, layout
from hina.wire import headers
from hina.wire.headers import UDP_PORT, Drop, pack_header

needs_xdp = pytest.mark.skipif(build.cannot_load() is not None, reason=f"the XDP switch: {build.cannot_load()}")


def test_the_generated_header_is_the_wire_declaration():
    """Every offset and code the program compiles in is hina.wire.headers' (and its structs are checked by
    _Static_asserts at compile time against the ctypes layouts the control plane writes)."""
    defines = dict(re.findall(r"#define (\w+) (\w+)", layout.c_header()))
    value = {k: int(v.removesuffix("ULL"), 0) for k, v in defines.items()}
    assert value["HINA_UDP_PORT"] == UDP_PORT and value["HINA_HEADER_BYTES"] == headers.HEADER_BYTES
    for name, at in headers.FIELD_AT.items():
        if name not in ("version", "slot"):
            assert value[f"AT_{name.upper()}"] == at
    assert value["AT_POOL_INDEX"] == headers.AT_POOL_INDEX
    assert {d.name: int(d) for d in Drop} == {k[5:]: v for k, v in value.items() if k.startswith("DROP_")
                                              and k != "DROP_REASONS"}
    assert value["MAX_WORDS"] == headers.max_words(layout.XDP_MTU) == 865
    assert "_Static_assert(__builtin_offsetof(struct hina_job, auth) == 40" in layout.c_header()


def test_the_program_reads_the_header_by_its_declared_offsets():
    """No `hina + 6`: the C source names every hina header field by the generated AT_* offsets."""
    text = build.SOURCE.read_text()
    assert not re.findall(r"hina(?:\[| \+ )\d", text)
    assert "AT_POOL_INDEX" in text and "AT_PHASE" in text and "#include \"hina_xdp.h\"" in text


def test_build_says_why_it_is_skipped(monkeypatch, capsys):
    build.missing.cache_clear()
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    assert build.main([]) == 0
    assert "was not built: clang is not installed" in capsys.readouterr().out
    build.missing.cache_clear()


@needs_xdp
def test_a_changed_constant_compiles_a_new_object(monkeypatch):
    path = build.compiled()
    monkeypatch.setattr(layout, "MAX_PORTS", layout.MAX_PORTS + 1)
    assert build.target() != path


@needs_xdp
def test_the_verifier_walks_the_ingress_program_in_half_its_limit(xdp_program):
    """The kernel's verifier walks every path of the ingress program, each loop over K words once per path
    that reaches it, and refuses a program past 1,000,000 instructions: a rule written as one more such loop
    costs tens of thousands (a PENDING's zeros as a loop cost 250,000; by one helper call, 35,000).  Half
    the limit leaves room for the rules to come."""
    from hina.emulator.xdp.libbpf import prog_info

    assert prog_info(xdp_program.ingress).verified_insns < 500_000


def _switch(program, topology):
    from hina.emulator.xdp.testrun import XdpFrameSwitch

    return XdpFrameSwitch(topology, program=program)


def _state(st, copies: int, words: int) -> tuple:
    return (st.bitmap.tolist(), st.counter.tolist(), st.offset.tolist(), st.phase.tolist(), st.total.tolist(),
            st.copies["pending"].tolist(), st.values.reshape(copies, words).tolist())


def _xdp_state(sw, cfg: JobConfig) -> tuple:
    """A job's copies on the XDP switch, in the emulator's registers' order (copy 2 x slot + version)."""
    slots = [sw.program.slot(cfg.slot_base + s) for s in range(cfg.slots)]
    copies = [(s.copies[v], list(s.words[v])[: cfg.words]) for s in slots for v in (0, 1)]
    return ([c.bitmap for c, _ in copies], [c.counter for c, _ in copies], [c.offset for c, _ in copies],
            [c.phase for c, _ in copies], [c.total for c, _ in copies], [c.pending for c, _ in copies],
            [[int(np.uint32(w).view(np.int32)) for w in ws] for _, ws in copies])


@needs_xdp
def test_fuzzed_frames_are_treated_as_the_emulator_treats_them(xdp_program):
    """20,000 random and mutated frames (hina.emulator.fuzz) through both: the same frames out, frame by
    frame; the same drops, by reason, per job and in total; the same words, bitmaps and counters in every
    copy; the idle job untouched."""
    emulator, xdp = FrameSwitch(fuzz.topology()), _switch(xdp_program, fuzz.topology())
    rng = random.Random(51)
    before = fuzz.victim_state(emulator)
    sent = 0
    for i in range(20_000):
        port, frame = fuzz.mutant(rng)
        if len(frame) < 14:  # shorter than an Ethernet header: no driver hands it to XDP
            continue
        want = sorted((p, bytes(f)) for p, f in emulator.process(port, frame))
        got = sorted(xdp.process(port, frame))
        assert got == want, f"frame {i} on port {port}: {frame.hex()}"
        sent += len(got)
    assert sent > 100  # the fuzzer's valid frames completed copies
    counters = emulator.counters()
    mine = xdp.counters()
    assert mine["drops"] == counters["drops"] and mine["frames"] == counters["frames"]
    assert {"truncated", "bad_length", "bad_checksum", "unauthorized", "bad_slot", "bad_count"} <= mine["drops"].keys()
    for job_id, st in emulator.pipeline.jobs.items():
        assert mine["jobs"][job_id] == counters["jobs"][job_id]
        assert _xdp_state(xdp, st.cfg) == _state(st, st.copies_count, st.cfg.words), f"job {job_id}"
    assert fuzz.victim_state(emulator) == before
    xdp.close()


def _words_frame(port: int, words, *, job=1, worker=0, slot=0, op=0, k=None, sport=None, count=None) -> bytes:
    k = len(words) if k is None else k
    hina = pack_header(0, op, job, worker, 0, slot, 0, k if count is None else count, 7) + struct.pack(f"!{k}i", *words)
    return fuzz.wrap(port, hina) if sport is None else _from_udp_port(port, hina, sport)


def _from_udp_port(port: int, hina: bytes, sport: int) -> bytes:
    frame = bytearray(fuzz.wrap(port, hina))
    frame[34:36] = sport.to_bytes(2, "big")  # the UDP source port (no UDP checksum: it stays valid)
    return bytes(frame)


def _star(workers: int, words: int, slots: int = 8) -> Topology:
    """`workers` ranks behind port 1, each at UDP port 40000 + rank (their own replica each)."""
    hosts = (Host(1, "02:00:00:00:00:01", "10.0.0.1"), Host(2, "02:00:00:00:00:02", "10.0.0.2"))
    members = tuple(Member(w, 1, ("10.0.0.1", 40000 + w)) for w in range(workers))
    return Topology(fuzz.SWITCH_MAC, fuzz.SWITCH_IP, hosts, (JobConfig(1, workers, words, 0, slots, members),))


@needs_xdp
@pytest.mark.parametrize("op,fill,want", [(0, 2**31 - 1, "wraps"), (2, -(2**31), "signed"), (1, -1, "every bit")])
def test_overflow_at_the_largest_job(xdp_program, op, fill, want):
    """32 workers of K = 865 words (the largest frame the program takes): ADD wraps modulo 2^32, MAX compares
    signed, OR keeps every bit, as numpy computes them; one RESULT per worker, nothing else."""
    k = layout.MAX_WORDS
    sw = _switch(xdp_program, _star(32, k))
    rng = np.random.default_rng(op)
    inputs = rng.integers(-(2**31), 2**31, size=(32, k), dtype=np.int64)
    inputs[:, :4] = fill
    out = []
    for w in range(32):
        out += sw.process(1, _words_frame(1, inputs[w].tolist(), worker=w, op=op, sport=40000 + w))
    if op == 0:
        expect = (inputs.sum(axis=0) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    elif op == 1:
        expect = np.bitwise_or.reduce(inputs.astype(np.int32), axis=0)
    else:
        expect = inputs.max(axis=0).astype(np.int32)
    assert sorted(f[36:38] for _, f in out) == sorted((40000 + w).to_bytes(2, "big") for w in range(32))  # each rank's
    for _, frame in out:
        assert np.array_equal(np.frombuffer(frame[58:58 + 4 * k], ">i4"), expect), want
    assert sw.counters()["drops"] == {}
    sw.close()


@needs_xdp
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 7, 862, 863, 864])
def test_every_word_of_any_k_is_combined(xdp_program, k):
    """The program combines words four at a time and the last K mod 4 one at a time: each remainder, with
    every operator, gives numpy's answer in every word, the last ones too."""
    rng = np.random.default_rng(k)
    inputs = rng.integers(-(2**31), 2**31, size=(3, k), dtype=np.int64)
    expects = [(inputs.sum(axis=0) & 0xFFFFFFFF).astype(np.uint32).view(np.int32),
               np.bitwise_or.reduce(inputs.astype(np.int32), axis=0), inputs.max(axis=0).astype(np.int32)]
    for op, expect in enumerate(expects):
        sw = _switch(xdp_program, _star(3, k))
        out = []
        for w in range(3):
            out += sw.process(1, _words_frame(1, inputs[w].tolist(), worker=w, op=op, sport=40000 + w))
        assert len(out) == 3
        for _, frame in out:
            assert np.frombuffer(frame[58:58 + 4 * k], ">i4").tolist() == expect.tolist(), f"op {op}"
        sw.close()


@needs_xdp
def test_the_program_s_benchmark_times_both_kinds_of_arrival(capsys):
    """benchmarks/xdp_bench.py, small: a duration for the absorbed arrivals and the completing ones, both the
    kernel's (positive), and the verifier's count of the program it timed."""
    bench = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "xdp_bench.py"))
    assert bench["main"](["--workers", "3", "--words", "7", "--slots", "4"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["absorbed_ns"]["median"] > 0 and result["completing_ns"]["median"] > 0
    assert result["verified_instructions"] > 100_000


@needs_xdp
def test_a_flood_of_valid_looking_updates_changes_nothing(xdp_program):
    """Two jobs aggregate while job 1's slots are flooded with UPDATEs from a stranger and from job 2's worker:
    both jobs' RESULTs exact, every flood frame counted unauthorized against job 1."""
    sw = _switch(xdp_program, fuzz.topology())
    victim, active = fuzz.VICTIM, fuzz.ACTIVE
    flood = 0
    results = []
    for chunk in range(8):
        for port, worker in ((5, chunk % 2), (3, 0), (4, 1)):  # a stranger, then job 3's workers, aimed at job 7
            sw.process(port, _words_frame(port, [9] * fuzz.K, job=victim, worker=worker, slot=chunk))
            flood += 1
        for port, job, base in ((1, victim, 0), (3, active, 8)):  # each job's workers: ports 1, 2 and 3, 4
            for w in range(2):
                results += sw.process(port + w, _words_frame(port + w, [chunk + 10 * w] * fuzz.K, job=job, worker=w,
                                                             slot=base + chunk))
    assert len(results) == 8 * 4  # each chunk of each job to both its workers
    sums = sorted(int(np.frombuffer(frame[58:62], ">i4")[0]) for _, frame in results)
    assert sums == sorted(2 * chunk + 10 for chunk in range(8) for _ in range(4))  # chunk + (chunk + 10), 4 copies
    for _, frame in results:
        words = np.frombuffer(frame[58:58 + 4 * fuzz.K], ">i4")
        assert (words == words[0]).all()
    counters = sw.counters()
    assert counters["drops"] == {"unauthorized": flood}
    assert counters["jobs"][victim]["drops"] == {"unauthorized": flood} and counters["jobs"][active]["drops"] == {}
    sw.close()


@needs_xdp
def test_a_copy_taken_again_tells_every_member_again(xdp_program):
    """A repeat of a copy still waiting is answered PENDING to every member the first time for the copy's chunk
    and to the sender after; the copy's next chunk (its first arrival clears the mark) tells every member
    again (helpers.copy_taken_again_case).  Frame for frame as the emulator, with the same copies and
    counters."""
    case = copy_taken_again_case()
    topology = Topology.from_config(case["topology"])
    emulator, xdp = FrameSwitch(topology), _switch(xdp_program, topology)
    for packet in case["packets"]:
        port, frame = packet["port"], bytes.fromhex(packet["frame"])
        want = sorted((p, bytes(f)) for p, f in emulator.process(port, frame))
        assert sorted(xdp.process(port, frame)) == want, f"{frame.hex()} on port {port}"
    st = emulator.pipeline.jobs[1]
    assert _xdp_state(xdp, st.cfg) == _state(st, st.copies_count, st.cfg.words)
    assert xdp.counters()["jobs"][1] == emulator.counters()["jobs"][1]
    assert xdp.counters()["jobs"][1]["pending"] == 3
    xdp.close()


@needs_xdp
def test_jobs_the_program_cannot_hold_are_refused_in_one_line(xdp_program):
    sw = _switch(xdp_program, None)
    too_long = JobConfig(1, 2, layout.MAX_WORDS + 1, 0, 8)
    with pytest.raises(ValueError, match=r"866 words per packet, but the XDP switch takes at most 865") as exc:
        sw.pipeline.add_job(too_long)
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match=r"lie outside the XDP switch's \[0, 4096\)"):
        sw.pipeline.add_job(JobConfig(2, 2, 32, 4090, 8))
    with pytest.raises(ValueError, match="serves workers behind its ports"):
        sw.pipeline.add_job(JobConfig(3, 2, 32, 0, 8, (Member(0, ("127.0.0.1", 9000)),)))
    assert not sw.pipeline.jobs
    sw.close()


@needs_xdp
def test_reset_and_rejoin_empty_the_copies_under_their_locks(xdp_program):
    """reset_job empties every copy of the job; a worker's join empties what an earlier run left (a copy holding
    its bit), keeping the copies of workers that joined before it, as the emulator does."""
    sw = _switch(xdp_program, fuzz.topology())
    sw.process(1, _words_frame(1, [5] * fuzz.K, job=fuzz.VICTIM, worker=0, slot=0))
    sw.process(2, _words_frame(2, [6] * fuzz.K, job=fuzz.VICTIM, worker=1, slot=1))
    assert [sw.program.slot(s).copies[0].bitmap for s in (0, 1)] == [1, 2]
    job = sw.pipeline.jobs[fuzz.VICTIM]
    assert job.clear_leftovers(0) == 1  # slot 0's copy holds worker 0's bit: another run's
    assert [sw.program.slot(s).copies[0].bitmap for s in (0, 1)] == [0, 2]
    sw.pipeline.reset_job(fuzz.VICTIM)
    slot = sw.program.slot(1)
    assert slot.copies[0].bitmap == slot.copies[0].counter == 0 and not any(slot.words[0])
    sw.close()


def _ones_complement(data: bytes) -> int:
    """RFC 1071's sum of 16-bit big-endian words, folded (not complemented)."""
    data += b"\0" * (len(data) % 2)
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def _segment(proto: int, payload: bytes, check: str) -> bytes:
    """A TCP or UDP segment from host 1 to host 2 of fuzz.topology(), in Ethernet / IPv4, its transport checksum
    "partial" (the pseudo-header's sum, as a host's stack leaves it for its device), "complete", "wrong" or (UDP)
    "none"."""
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    header = (struct.pack("!HHIIBBHHH", 40000, 5001, 1, 0, 5 << 4, 0x18, 512, 0, 0) if proto == 6 else
              struct.pack("!HHHH", 40000, 5001, 8 + len(payload), 0))
    segment = bytearray(header + payload)
    at = 16 if proto == 6 else 6
    pseudo = _ones_complement(src + dst + struct.pack("!BBH", 0, proto, len(segment)))
    value = {"partial": pseudo, "none": 0, "wrong": pseudo ^ 0x5A5A,
             "complete": (~_ones_complement(src + dst + struct.pack("!BBH", 0, proto, len(segment)) + bytes(segment))
                          & 0xFFFF) or (0xFFFF if proto == 17 else 0)}[check]
    segment[at : at + 2] = struct.pack("!H", value)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(segment), 7, 0x4000, 64, proto, 0, src, dst))
    ip[10:12] = struct.pack("!H", ~_ones_complement(bytes(ip)) & 0xFFFF)
    return bytes.fromhex("020000000002" "020000000001" "0800") + bytes(ip) + bytes(segment)


@needs_xdp
@pytest.mark.parametrize("proto", [6, 17], ids=["tcp", "udp"])
def test_a_partial_transport_checksum_is_completed_where_the_frame_is_forwarded(xdp_program, proto):
    """A host's stack leaves a TCP or UDP checksum partial for its device; the redirect that forwards the frame
    drops the mark that says so, so the switch completes it: every length, up to a page-sized frame's, leaves
    host 1 for host 2 with the checksum over its segment and every other byte as it came; a complete checksum,
    a wrong one and UDP's "none" leave as they came."""
    sw = _switch(xdp_program, fuzz.topology())
    rng = random.Random(proto)
    for size in (0, 1, 2, 3, 5, 235, 236, 237, 255, 256, 257, 511, 512, 513, 1000, 1459, 3000, 3446):
        payload = bytes(rng.randrange(256) for _ in range(size))
        partial, complete = _segment(proto, payload, "partial"), _segment(proto, payload, "complete")
        assert partial != complete
        assert sw.process(1, partial) == [(2, complete)], size
        assert sw.process(1, complete) == [(2, complete)], size
        for check in ("wrong", "none") if proto == 17 else ("wrong",):
            frame = _segment(proto, payload, check)
            assert sw.process(1, frame) == [(2, frame)], (size, check)
