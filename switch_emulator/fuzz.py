"""Fuzzing the emulator's frame handling: random frames and mutations of valid UPDATEs.

The switch has two jobs: the *victim* (job 7, workers on ports 1 and 2)
and the *active* job (job 3, workers on ports 3 and 4).  Fuzz frames enter
on ports 3, 4 and 5 only, so nothing the victim's workers authorized ever
arrives.  A run fails if any exception escapes `FrameSwitch.process` or
`Pipeline.update`, or if the victim's state (bitmaps, counters, offsets,
values, update/result/resend counts, configuration) changes at all; only
its drop counters may move.  Mutations: every hina header field
(random and boundary values), truncation, trailing bytes, UDP and IPv4
lengths, wrong checksums, other EtherTypes, IPv4 version/IHL/protocol, bit
flips, and plain random bytes.  Used by tests/emulator/test_fuzz.py and, for long
runs, benchmarks/fuzz_bench.py.
"""

from __future__ import annotations

import dataclasses
import random
import struct
import traceback

from hina.control.config import JobConfig, Member
from hina.control.topology import Host, Topology
from hina.wire.frames import (
    ETH_TYPE_AT,
    HINA_AT,
    IP_CHECKSUM_AT,
    IP_PROTOCOL_AT,
    IP_TOTAL_LEN_AT,
    IP_VERSION_AT,
    U16,
    UDP_CHECKSUM_AT,
    encapsulate,
    ip_bytes,
    mac_bytes,
)
from hina.wire.headers import FIELD_AT, HEADER_BYTES, UDP_PORT, pack_header

from .frames import FrameSwitch

K = 32
VICTIM, ACTIVE = 7, 3
SWITCH_MAC, SWITCH_IP = "02:00:00:00:00:fe", "10.0.0.254"
FUZZ_PORTS = (3, 4, 5)
SOURCE_PORTS = 40000  # the UDP source port of the host on switch port p: this plus p
# the widths of the header's fields as `pack_header` takes them: whole bytes (version and slot share theirs,
# the pool index)
_STARTS = sorted(set(FIELD_AT.values())) + [HEADER_BYTES]
FIELD_BITS = tuple(8 * (end - start) for start, end in zip(_STARTS, _STARTS[1:]))


def topology() -> Topology:
    hosts = tuple(Host(p, f"02:00:00:00:00:{p:02x}", f"10.0.0.{p}") for p in (1, 2, 3, 4, 5))
    jobs = (JobConfig(VICTIM, 2, K, 0, 8, (Member(0, 1), Member(1, 2))),
            JobConfig(ACTIVE, 2, K, 8, 8, (Member(0, 3), Member(1, 4))))
    return Topology(SWITCH_MAC, SWITCH_IP, hosts, jobs)


def wrap(port: int, hina: bytes, *, udp_len: int | None = None) -> bytes:
    """hina bytes in Ethernet / IPv4 / UDP as the host on `port` would send them."""
    return encapsulate(hina, src_mac=mac_bytes(f"02:00:00:00:00:{port:02x}"), dst_mac=mac_bytes(SWITCH_MAC),
                       src_ip=ip_bytes(f"10.0.0.{port}"), dst_ip=ip_bytes(SWITCH_IP), sport=SOURCE_PORTS + port,
                       dport=UDP_PORT, ident=1, udp_len=udp_len)


def valid_hina(rng: random.Random, job: int) -> tuple[list[int], bytes]:
    base = 0 if job == VICTIM else 8
    fields = [0, rng.randrange(3), job, rng.randrange(2), 0, (rng.randrange(2) << 15) | (base + rng.randrange(8)),
              rng.randrange(64) * K, rng.randrange(1, K + 1), rng.randrange(1 << 16)]
    words = struct.pack(f"!{K}i", *(rng.randrange(-(2**31), 2**31) for _ in range(K)))
    return fields, words


def interesting(rng: random.Random, bits: int) -> int:
    top = (1 << bits) - 1
    return rng.choice([0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 33, top, top - 1, 1 << (bits - 1),
                       rng.randrange(top + 1), rng.randrange(top + 1)])


def mutant(rng: random.Random) -> tuple[int, bytes]:
    """One fuzz frame and the port it enters on."""
    port = rng.choice(FUZZ_PORTS)
    kind = rng.randrange(12)
    if kind == 0:  # plain random bytes
        return port, rng.randbytes(rng.randrange(0, 300))
    fields, words = valid_hina(rng, rng.choice((VICTIM, ACTIVE, ACTIVE)))
    if kind in (1, 2, 3):  # one or more header fields, random or boundary values
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(len(fields))
            fields[i] = interesting(rng, FIELD_BITS[i])
    hina = pack_header(*fields) + words
    frame = wrap(port, hina)
    if kind == 4:  # truncated anywhere
        return port, frame[: rng.randrange(len(frame))]
    if kind == 5:  # trailing bytes, with or without a matching UDP length
        extra = rng.randbytes(rng.randrange(1, 64))
        return port, (wrap(port, hina + extra) if rng.random() < 0.5 else frame + extra)
    if kind == 6:  # UDP length lies
        return port, wrap(port, hina, udp_len=rng.randrange(1 << 16))
    if kind == 7:  # IPv4 total length or checksum wrong, UDP checksum random
        f = bytearray(frame)
        which = rng.randrange(3)
        U16.pack_into(f, (IP_TOTAL_LEN_AT, IP_CHECKSUM_AT, UDP_CHECKSUM_AT)[which], rng.randrange(1 << 16))
        return port, bytes(f)
    if kind == 8:  # other EtherTypes
        f = bytearray(frame)
        U16.pack_into(f, ETH_TYPE_AT, rng.choice([0x0806, 0x86DD, 0x8100, 0x88CC,
                                                  int.from_bytes(rng.randbytes(2), "big")]))
        return port, bytes(f)
    if kind == 9:  # IPv4 version, IHL or protocol
        f = bytearray(frame)
        if rng.random() < 0.5:
            f[IP_VERSION_AT] = rng.randrange(256)
        else:
            f[IP_PROTOCOL_AT] = rng.randrange(256)
        return port, bytes(f)
    if kind == 10:  # bit flips anywhere
        f = bytearray(frame)
        for _ in range(rng.randrange(1, 9)):
            f[rng.randrange(len(f))] ^= 1 << rng.randrange(8)
        return port, bytes(f)
    return port, frame  # kinds 1-3 and 11: well-formed frames with (maybe) mutated fields


def victim_state(sw: FrameSwitch) -> tuple:
    """Everything about the victim job except its drop counters (frames aimed at it are counted there)."""
    st = sw.pipeline.jobs[VICTIM]
    return (tuple(st.bitmap), tuple(st.counter), tuple(st.offset), st.values.tobytes(),
            st.updates, st.results, st.resends, st.cfg)


@dataclasses.dataclass
class Report:
    frames: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)
    victim_changed: bool = False
    outputs: int = 0
    drops: dict = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures and not self.victim_changed


def run(frames: int, seed: int = 0, *, progress=None) -> Report:
    """Fuzz one FrameSwitch with `frames` frames: 90% Ethernet frames, 10% bare hina datagrams."""
    rng = random.Random(seed)
    sw = FrameSwitch(topology())
    before = victim_state(sw)
    report = Report()
    for i in range(frames):
        port, frame = mutant(rng)
        try:
            if i % 10 == 9:  # the UDP backends' path: hina bytes straight into the pipeline
                hina = frame[HINA_AT:] if rng.random() < 0.7 else frame
                emit = sw.pipeline.update(hina, ("10.9.9.9", SOURCE_PORTS + port))
                report.outputs += 0 if emit is None else len(emit.dests)
            else:
                report.outputs += len(sw.process(port, frame))
        except Exception:  # noqa: BLE001 - the point is to catch anything
            if len(report.failures) < 20:
                report.failures.append(f"frame {i} on port {port} ({frame.hex()}):\n{traceback.format_exc()}")
            else:
                report.failures.append(f"frame {i}")
        report.frames += 1
        if progress and (i + 1) % 100_000 == 0:
            progress(i + 1)
    report.victim_changed = victim_state(sw) != before
    report.drops = sw.counters()["drops"]
    return report
