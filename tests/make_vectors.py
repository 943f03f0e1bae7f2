"""Writes tests/vectors/*.json: packet test vectors that the emulator and the P4 program must both pass.

Each case is self-contained data: the topology the switch is configured
with, the frames sent in (ingress port, hex), the frames expected out
(egress port, hex; compared as a multiset, since replicas may leave in any
order) and the drop counters expected to move.  Expected frames are built
here from first principles with scapy (the sums are written out by hand),
never by running the emulator, so a vector states what the switch must do.

    python tests/make_vectors.py          # rewrite the files
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw, raw

from hina.wire.headers import HEADER_BYTES, OTHER_SUBTREE, UDP_HEADER_BYTES, UDP_PORT, pack_header

VECTORS = Path(__file__).resolve().parent / "vectors"
K = 32
SWITCH_MAC, SWITCH_IP = "02:00:00:00:00:fe", "10.0.0.254"
ADD, OR, MAX = 0, 1, 2
RESEND, STALE_RUN, PENDING = 1, 2, 4


def host_mac(port):
    return f"02:00:00:00:00:{port:02x}"


def host_ip(port):
    return f"10.0.0.{port}"


TOPOLOGY = {
    "switch": {"mac": SWITCH_MAC, "ip": SWITCH_IP},
    "hosts": [{"port": p, "mac": host_mac(p), "ip": host_ip(p)} for p in (1, 2, 3, 4)],
    "jobs": [
        {"job_id": 1, "workers": 3, "words": K, "slot_base": 0, "slots": 4,
         "members": [{"worker_id": 0, "port": 1}, {"worker_id": 1, "port": 2}, {"worker_id": 2, "port": 3}]},
        {"job_id": 2, "workers": 2, "words": K, "slot_base": 4, "slots": 4,
         "members": [{"worker_id": 0, "port": 4}, {"worker_id": 1, "port": 1}]},
    ],
}
JOB_PORTS = {1: [1, 2, 3], 2: [4, 1]}
# One job of a single worker (port 3): every UPDATE completes its copy.
SOLO_TOPOLOGY = {
    "switch": {"mac": SWITCH_MAC, "ip": SWITCH_IP},
    "hosts": [{"port": p, "mac": host_mac(p), "ip": host_ip(p)} for p in (1, 2, 3)],
    "jobs": [{"job_id": 3, "workers": 1, "words": K, "slot_base": 8, "slots": 2,
              "members": [{"worker_id": 0, "port": 3}]}],
}

# Trees (docs/design.md, "Aggregation trees"): the switch under test is a leaf holding workers 0 and 1 (ports 1, 2) of a
# job of 4; its spines are on ports 5 (even slots) and 6 (odd slots), where it is member 0.  Port 3 is
# a host of no job.  A spine's vector (SPINE_TOPOLOGY) has two leaves on ports 1 and 2.
TREE_TOPOLOGY = {
    "switch": {"mac": SWITCH_MAC, "ip": SWITCH_IP},
    "hosts": [{"port": p, "mac": host_mac(p), "ip": host_ip(p)} for p in (1, 2, 3)]
    + [{"port": p, "mac": host_mac(p), "ip": host_ip(p), "switch": True} for p in (5, 6)],
    "jobs": [
        {"job_id": 1, "workers": 4, "words": K, "slot_base": 0, "slots": 4, "mask": 0b0011,
         "members": [{"worker_id": 0, "port": 1}, {"worker_id": 1, "port": 2}],
         "parents": [{"worker_id": 0, "port": 5}, {"worker_id": 0, "port": 6}]},
    ],
}
TREE_CHILDREN = [1, 2]
# A leaf with one child (worker 0 on port 1) of a job of 4, under the same spines.
LONE_LEAF_TOPOLOGY = {**TREE_TOPOLOGY, "jobs": [{**TREE_TOPOLOGY["jobs"][0], "mask": 0b0001,
                                                 "members": [{"worker_id": 0, "port": 1}]}]}
# Ranks that share a host: workers 0 and 1 on the host of port 1 (UDP ports 40001 and 40011), worker 2 on
# port 2's; each names its address, so each gets its own replica of every RESULT.
RANKS = {0: (1, 40001), 1: (1, 40011), 2: (2, 40002)}
RANKS_TOPOLOGY = {
    "switch": {"mac": SWITCH_MAC, "ip": SWITCH_IP},
    "hosts": [{"port": p, "mac": host_mac(p), "ip": host_ip(p)} for p in (1, 2, 3)],
    "jobs": [
        {"job_id": 1, "workers": 3, "words": K, "slot_base": 0, "slots": 4,
         "members": [{"worker_id": w, "port": p, "ip": host_ip(p), "udp_port": u} for w, (p, u) in RANKS.items()]},
    ],
}
SPINE_TOPOLOGY = {
    "switch": {"mac": SWITCH_MAC, "ip": SWITCH_IP},
    "hosts": [{"port": p, "mac": host_mac(p), "ip": host_ip(p)} for p in (1, 2)],
    "jobs": [
        {"job_id": 1, "workers": 2, "words": K, "slot_base": 0, "slots": 4,
         "members": [{"worker_id": 0, "port": 1}, {"worker_id": 1, "port": 2}]},
    ],
}


def words_bytes(words, k=K):
    words = list(words) + [0] * (k - len(words))
    return b"".join((w & 0xFFFFFFFF).to_bytes(4, "big") for w in words)


def hina(words, *, msg_type=0, op=ADD, job=1, worker=0, flags=0, slot=0, version=0, offset=0,
         count=K, phase=3, k=K):
    return pack_header(msg_type, op, job, worker, flags, (version << 15) | slot, offset, count, phase) + \
        words_bytes(words, k)


def frame(port, payload, *, ip_id=7, udp_len=None, chksum=None, sport=None):
    """A frame as the host on `port` sends it to the switch (from UDP port 40000 + port by default)."""
    pkt = (Ether(src=host_mac(port), dst=SWITCH_MAC) /
           IP(src=host_ip(port), dst=SWITCH_IP, id=ip_id, ttl=64, chksum=chksum) /
           UDP(sport=40000 + port if sport is None else sport, dport=UDP_PORT, len=udp_len) / Raw(payload))
    return raw(pkt)


def update(port, words, sport=None, **kw):
    return frame(port, hina(words, **kw), ip_id=kw.get("offset", 0) + port, sport=sport)


def result(to_port, sent_frame, words, *, flags=0, msg_type=1, worker=None, to=None, back=False):
    """What leaves `to_port` when `sent_frame` (an UPDATE) completes its copy (or asks again); with
    msg_type 0 and `worker` the member id, what a leaf sends up when it completes its copy.  Addressed to
    the port's host at UDP port 0x4E41; `to` (MAC, IPv4, UDP port): to a member that named its address;
    `back`: to where `sent_frame` came from (a RESULT unicast back to its sender)."""
    pkt = Ether(sent_frame)
    udp_len = pkt[UDP].len
    payload = sent_frame[42 : 42 + udp_len - 8]  # the hina frame
    trailer = sent_frame[42 + udp_len - 8 :]  # past the UDP length: rides along
    worker_byte = payload[4:5] if worker is None else bytes([worker])
    out_hina = bytes([msg_type]) + payload[1:4] + worker_byte + bytes([flags]) + payload[6:16] + words_bytes(words)
    mac, ip, port = to or ((pkt[Ether].src, pkt[IP].src, pkt[UDP].sport) if back
                           else (host_mac(to_port), host_ip(to_port), UDP_PORT))
    out = (Ether(src=SWITCH_MAC, dst=mac) /
           IP(src=SWITCH_IP, dst=ip, id=pkt[IP].id, ttl=pkt[IP].ttl, len=pkt[IP].len, chksum=None) /
           UDP(sport=UDP_PORT, dport=port, len=pkt[UDP].len, chksum=0) / Raw(out_hina))
    return raw(out) + trailer


def refused(sent_frame, ports):
    """An UPDATE refused (flag STALE_RUN): its own header and words as a RESULT, to every member's port."""
    hina_frame = sent_frame[42:]
    words = [int.from_bytes(hina_frame[16 + 4 * i : 20 + 4 * i], "big", signed=True) for i in range(K)]
    return [(port, result(port, sent_frame, words, flags=STALE_RUN)) for port in ports]


def multicast(sent_frame, words, job=1):
    return [(p, result(p, sent_frame, words)) for p in JOB_PORTS[job]]


def case(name, description, packets, expected, drops=None, topology=TOPOLOGY):
    return {"name": name, "description": description, "topology": topology,
            "packets": [{"port": p, "frame": f.hex()} for p, f in packets],
            "expected": [{"port": p, "frame": f.hex()} for p, f in expected],
            "expected_drops": drops or {}}


def build_cases() -> list[dict]:
    """Every case, the single switch's first, then a tree's."""
    return (combine_cases() + repeat_cases() + stale_run_cases() + slot_cases() + refusal_cases()
            + forwarding_cases() + tree_cases())


def job1_updates():
    """Job 1's three workers' UPDATEs of slot 0's copy 0, one word each: their sum is 111."""
    return update(1, [1], worker=0), update(2, [10], worker=1), update(3, [100], worker=2)


def combine_cases() -> list[dict]:
    """A copy filled by its workers, combined by each op, its RESULT multicast to them."""
    cases = []
    w0 = update(1, [1, 2, 3], worker=0)
    cases.append(case("first_arrival", "one UPDATE into an empty copy: written, nothing leaves",
                      [(1, w0)], []))

    a = update(1, [2**31 - 1, -(2**31), 5, 1], worker=0)
    b = update(2, [1, -1, -7, 1], worker=1)
    c = update(3, [0, 0, 2, 1], worker=2)
    cases.append(case("add_combine_multicast", "ADD over three workers wraps like int32; the third completes "
                      "the copy and the RESULT goes to every member, rewritten per egress port",
                      [(1, a), (2, b), (3, c)], multicast(c, [-(2**31), 2**31 - 1, 0, 3])))

    a = update(1, [0b0101, -(2**31), 0], op=OR, worker=0)
    b = update(2, [0b0011, 1, 0], op=OR, worker=1)
    c = update(3, [0b1000, 0, 0], op=OR, worker=2)
    cases.append(case("or_combine", "bitwise OR", [(1, a), (2, b), (3, c)],
                      multicast(c, [0b1111, -(2**31) + 1, 0])))

    a = update(1, [-5, 3, -(2**31), 0], op=MAX, worker=0)
    b = update(2, [-7, -3, 2**31 - 1, 0], op=MAX, worker=1)
    c = update(3, [-6, -4, 0, -1], op=MAX, worker=2)
    cases.append(case("max_combine_signed", "MAX compares signed 32-bit words", [(1, a), (2, b), (3, c)],
                      multicast(c, [-5, 3, 2**31 - 1, 0])))
    return cases


def repeat_cases() -> list[dict]:
    """An UPDATE sent again: to a copy still waiting (PENDING), to a complete one (RESEND), after its sender
    moved on."""
    cases = []
    a, b, c = job1_updates()
    cases.append(case("duplicate_before_completion", "a repeated UPDATE of an incomplete copy is dropped, counted "
                      "once, and answered PENDING to every member with the copy's arrival bitmap (word 0): the "
                      "counted stop resending, the missing learn it", [(1, a), (1, a), (2, b), (3, c)],
                      [(p, result(p, a, [0b001], flags=PENDING)) for p in JOB_PORTS[1]] + multicast(c, [111]),
                      {"duplicate": 1}))
    cases.append(case("duplicate_again_before_completion", "a second repeat of a copy still waiting is answered "
                      "PENDING to its sender alone: every member heard the first, and no repeat costs more "
                      "downstream than the copy's RESULT", [(1, a), (1, a), (2, b), (2, b), (3, c)],
                      [(p, result(p, a, [0b001], flags=PENDING)) for p in JOB_PORTS[1]]
                      + [(2, result(2, b, [0b011], flags=PENDING))] + multicast(c, [111]), {"duplicate": 2}))

    cases.append(case("duplicate_after_completion", "a repeated UPDATE of a complete copy is answered by "
                      "unicast with the RESEND flag", [(1, a), (2, b), (3, c), (2, b)],
                      multicast(c, [111]) + [(2, result(2, b, [111], flags=RESEND))]))

    nxt0 = update(1, [7], worker=0, version=1, offset=4 * K)
    nxt1 = update(2, [7], worker=1, version=1, offset=4 * K)
    cases.append(case("resend_after_others_moved_on", "workers 0 and 1 moved to the other copy; worker 2 lost "
                      "its RESULT and still gets it", [(1, a), (2, b), (3, c), (1, nxt0), (2, nxt1), (3, c)],
                      multicast(c, [111]) + [(3, result(3, c, [111], flags=RESEND))]))

    late = update(1, [1], worker=0)
    cases.append(case("late_after_leaving_answered", "a late UPDATE from a worker that already left a complete "
                      "copy is answered from the copy, as a duplicate (its sender ignores it; a restarted run's "
                      "hello learns it met an earlier run), the copy untouched",
                      [(1, a), (2, b), (3, c), (1, nxt0), (1, late)],
                      multicast(c, [111]) + [(1, result(1, late, [111], flags=RESEND))]))
    return cases


def stale_run_cases() -> list[dict]:
    """Another run's chunk in a copy: refused, flagged STALE_RUN, to every member."""
    cases = []
    a, b, c = job1_updates()
    off = update(2, [1], worker=1, offset=K)
    cases.append(case("stale_offset", "an offset that disagrees with a non-empty copy is another run's chunk: "
                      "refused, flagged STALE_RUN, to every member: the run cannot finish once one worker "
                      "stops", [(1, a), (2, off)], refused(off, JOB_PORTS[1]), {"stale_run": 1}))
    # A job restarted against a switch nobody reset: fresh workers start at slot copy 0 with phase tag 0.
    fresh0 = update(1, [9], worker=0, phase=0)
    cases.append(case("restart_meets_a_complete_copy", "worker 0 restarted: its bit is still set in a copy "
                      "completed by the earlier run (phase tag 3), so the switch refuses it instead of re-sending "
                      "the old RESULT", [(1, a), (2, b), (3, c), (1, fresh0)],
                      multicast(c, [111]) + refused(fresh0, JOB_PORTS[1]), {"stale_run": 1}))
    fresh1 = update(2, [9], worker=1, phase=0)
    cases.append(case("restart_meets_a_partial_copy", "the earlier run crashed with worker 0's chunk in the copy; "
                      "a restarted worker 1 (phase tag 0) is refused, never added to the old words",
                      [(1, a), (2, fresh1)], refused(fresh1, JOB_PORTS[1]), {"stale_run": 1}))
    return cases


def slot_cases() -> list[dict]:
    """Slots used again, side by side and alone: a slot's copies alternating, two jobs, a job of one worker."""
    cases = []
    a, b, c = job1_updates()
    packets, expected = [], []
    for use in range(4):
        version, offset = use % 2, (use * 4 + 1) * K  # slot 1 carries chunks 1, 5, 9, 13 with W = 4
        us = [update(p, [use + 1, 10 * p], worker=p - 1, slot=1, version=version, offset=offset) for p in (1, 2, 3)]
        packets += [(1, us[0]), (2, us[1]), (3, us[2])]
        expected += multicast(us[2], [3 * (use + 1), 60])
    cases.append(case("copy_flip_and_slot_reuse", "one slot used four times alternating copies: each use starts "
                      "fresh", packets, expected))

    j2a = update(4, [5], job=2, worker=0, slot=4)
    j2b = update(1, [6], job=2, worker=1, slot=4)
    cases.append(case("two_jobs", "two jobs aggregate side by side on their own slots and groups",
                      [(1, a), (4, j2a), (2, b), (1, j2b), (3, c)],
                      multicast(j2b, [11], job=2) + multicast(c, [111])))

    solo = update(3, [5, -6], job=3, worker=0, slot=8)
    cases.append(case("single_worker_job", "a job of one worker: its UPDATE completes the copy it takes, and the "
                      "RESULT goes back to it at once", [(3, solo)], [(3, result(3, solo, [5, -6]))],
                      topology=SOLO_TOPOLOGY))
    return cases


def refusal_cases() -> list[dict]:
    """What the switch drops and counts: an unknown job, a worker out of place, a bad field, length or
    checksum; and bytes past the UDP length, which it carries along."""
    cases = []
    _, b, c = job1_updates()
    cases.append(case("unknown_job", "no job 9 is configured", [(1, update(1, [1], job=9))], [],
                      {"unknown_job": 1}))
    cases.append(case("unauthorized_worker", "job 1's worker 0 must come from port 1, not 4",
                      [(4, update(4, [1], worker=0))], [], {"unauthorized": 1}))
    cases.append(case("worker_of_other_job", "job 2's worker 1 (port 1) may not speak as job 1's worker 1",
                      [(1, update(1, [1], worker=1))], [], {"unauthorized": 1}))
    cases.append(case("slot_out_of_range", "slot 4 belongs to job 2, not job 1",
                      [(1, update(1, [1], slot=4))], [], {"bad_slot": 1}))
    cases.append(case("bad_worker", "worker_id 3 in a job of 3 workers", [(1, update(1, [1], worker=3))], [],
                      {"bad_worker": 1}))
    cases.append(case("bad_count", "count 33 > K", [(1, update(1, [1], count=K + 1))], [], {"bad_count": 1}))
    cases.append(case("bad_msg_type", "a RESULT sent to the switch", [(1, update(1, [1], msg_type=1))], [],
                      {"bad_msg_type": 1}))
    cases.append(case("bad_op", "op 3 is not ADD, OR or MAX", [(1, update(1, [1], op=3))], [], {"bad_op": 1}))
    cases.append(case("unknown_msg_type", "msg_type 2 is neither UPDATE nor RESULT",
                      [(1, update(1, [1], msg_type=2))], [], {"bad_msg_type": 1}))
    cases.append(case("result_of_an_unknown_job", "a RESULT of a job this switch does not hold is a message it "
                      "never takes (BAD_MSG_TYPE), not an unknown job", [(1, update(1, [1], msg_type=1, job=9))], [],
                      {"bad_msg_type": 1}))
    cases.append(case("worker_id_past_127", "worker_id 200 in a job of 3 workers (the Tofino program tells "
                      "worker_id >= 128 apart by its top bit)", [(1, update(1, [1], worker=200))], [],
                      {"bad_worker": 1}))
    cases.append(case("slot_below_the_jobs_range", "slot 1 is below job 2's slots (4 to 7)",
                      [(4, update(4, [1], job=2, worker=0, slot=1))], [], {"bad_slot": 1}))
    cases.append(case("truncated_hina_header", "10 bytes after the UDP header",
                      [(1, frame(1, b"\0" * 10))], [], {"truncated": 1}))
    cases.append(case("truncated_payload", "a header and 20 of the 32 words",
                      [(1, frame(1, hina([1], k=20)))], [], {"truncated": 1}))
    good = hina([1], worker=0)
    cases.append(case("bad_length", "UDP length claims 8 more bytes than a hina frame has",
                      [(1, frame(1, good + b"\0" * 8))], [], {"bad_length": 1}))
    cases += length_cases(good)
    trailing = frame(1, good + b"\xab" * 6, udp_len=8 + len(good))
    cases.append(case("trailing_bytes_ride_along", "bytes past the UDP length are not hina: the frame is "
                      "accepted and they leave with the RESULT unchanged",
                      [(2, b), (3, c), (1, trailing)],
                      [(p, result(p, trailing, [111])) for p in JOB_PORTS[1]]))
    cases.append(case("bad_checksum", "IPv4 header checksum wrong",
                      [(1, frame(1, good, chksum=0x1234))], [], {"bad_checksum": 1}))
    return cases


def forwarding_cases() -> list[dict]:
    """Frames that are not hina: forwarded as a plain switch would, or dropped with no route."""
    cases = []
    ping = raw(Ether(src=host_mac(1), dst=host_mac(2)) / IP(src=host_ip(1), dst=host_ip(2)) / ICMP())
    other_udp = raw(Ether(src=host_mac(3), dst=host_mac(4)) / IP(src=host_ip(3), dst=host_ip(4)) /
                    UDP(sport=5000, dport=5001) / Raw(b"not hina"))
    cases.append(case("non_hina_unicast", "ping and other UDP are forwarded on their destination MAC, unchanged",
                      [(1, ping), (3, other_udp)], [(2, ping), (4, other_udp)]))
    arp = raw(Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff") / ARP(hwsrc=host_mac(1), psrc=host_ip(1),
                                                                    pdst=host_ip(2)))
    cases.append(case("broadcast_flood", "a broadcast (ARP) goes to every port but its own",
                      [(1, arp)], [(2, arp), (3, arp), (4, arp)]))
    stranger = raw(Ether(src=host_mac(1), dst="02:00:00:00:00:99") / IP() / ICMP())
    cases.append(case("no_route", "an unknown destination MAC is dropped", [(1, stranger)], [], {"no_route": 1}))
    return cases


def length_cases(good: bytes) -> list[dict]:
    """The UDP length's classes, each at its edges: short of a hina header (0 .. 23), short of the words
    (24 .. 151), exact (152: every accepted frame) and past the words (153 ..).  Each class is told apart
    by the checks it comes before or after: short of a header is TRUNCATED before the job is looked up,
    short of the words only after (an unknown job's frame is UNKNOWN_JOB), past the words BAD_LENGTH."""
    udp_length, unknown = UDP_HEADER_BYTES + len(good), hina([1], job=9)
    return [
        case("length_short_of_a_header", "UDP lengths 0 and 23 claim less than a hina header (the frames hold "
             "all of one, and K words): TRUNCATED, before the job (9, unknown) is looked up",
             [(1, frame(1, unknown, udp_len=0)),
              (1, frame(1, unknown, udp_len=UDP_HEADER_BYTES + HEADER_BYTES - 1))], [], {"truncated": 2}),
        case("length_header_only_of_an_unknown_job", "UDP length 24, a header and no words, of an unknown job: "
             "the length is short of the words, a class checked after the job, so UNKNOWN_JOB",
             [(1, frame(1, unknown[:HEADER_BYTES]))], [], {"unknown_job": 1}),
        case("length_short_of_the_words", "UDP lengths 24 (a header and no words) and 151 (one byte short of "
             "K words, the frame holding all of them) of job 1: TRUNCATED",
             [(1, frame(1, good[:HEADER_BYTES])), (1, frame(1, good, udp_len=udp_length - 1))], [],
             {"truncated": 2}),
        case("length_past_the_words", "UDP lengths 153 and 65535 claim more than a hina frame (the frame holds "
             "one byte past its K words): BAD_LENGTH",
             [(1, frame(1, good + b"\0", udp_len=udp_length + 1)), (1, frame(1, good + b"\0", udp_len=0xFFFF))],
             [], {"bad_length": 2}),
    ]


def tree_cases() -> list[dict]:
    """The switch as a leaf (TREE_TOPOLOGY) or a spine (SPINE_TOPOLOGY) of an aggregation tree, then ranks
    sharing a host."""
    return leaf_cases() + leaf_repeat_cases() + two_tier_cases() + rank_cases()


def leaf_cases_into(cases: list[dict]):
    """`leaf_case(name, description, packets, expected, drops)`: a case on TREE_TOPOLOGY, added to `cases`."""
    def leaf_case(name, description, packets, expected, drops=None):
        cases.append(case(name, description, packets, expected, drops, topology=TREE_TOPOLOGY))
    return leaf_case


def down(sent, words, flags=0, worker=None):
    """The parent's RESULT multicast to the leaf's children; `worker`, the worker_id it goes down with."""
    return [(p, result(p, sent, words, flags=flags, worker=worker)) for p in TREE_CHILDREN]


def total_down(sent, words, flags=0, worker=OTHER_SUBTREE):
    """The parent's total multicast to the leaf's children, naming the worker whose UPDATE completed the job's
    copy: OTHER_SUBTREE where the parent's total names another member than this leaf's (0)."""
    return down(sent, words, flags, worker)


def leaf_updates():
    """The leaf's two children's UPDATEs of slot 0, the partial they sum to (wrapping like int32) and the
    UPDATE that carries it up to the slot's parent (port 5)."""
    a = update(1, [2**31 - 1, 5, -3], worker=0)
    b = update(2, [1, 6, -4], worker=1)
    partial = [-(2**31), 11, -7]
    return a, b, partial, result(5, b, partial, msg_type=0, worker=0)


def spine_total():
    """The spine's RESULT for slot 0 as the leaf gets it on port 5, and its words."""
    total = [7, 7, 7, 2**31 - 1]
    return frame(5, hina(total, msg_type=1, worker=1)), total


def leaf_cases() -> list[dict]:
    """On a leaf: a copy goes up when its children complete it (to its slot's parent, for each op and copy,
    at once for a leaf of one child), and the parent's total comes down (as it came: RESEND flagged)."""
    cases = []
    leaf_case = leaf_cases_into(cases)
    a, b, _, up = leaf_updates()
    leaf_case("tree_complete_forward_up", "on a leaf, the copy its two children complete goes up as ONE UPDATE "
              "to the slot's parent (port 5 for slot 0): the leaf's member id as worker_id, the combined words; "
              "nothing goes down", [(1, a), (2, b)], [(5, up)])

    from_spine, total = spine_total()
    leaf_case("tree_result_from_parent_multicast_down", "the parent's RESULT for a copy sent up is stored and "
              "multicast to the children", [(1, a), (2, b), (5, from_spine)],
              [(5, up)] + total_down(from_spine, total))

    named = frame(5, hina(total, msg_type=1, worker=0))  # member 0, this leaf, completed the spine's copy
    leaf_case("tree_total_names_the_worker_that_completed_it", "the parent's total names this leaf (its member "
              "id, 0) as the one whose partial completed the parent's copy: it goes down naming the child whose "
              "UPDATE completed this leaf's copy (worker 1), so that child knows its own UPDATE completed the "
              "job's", [(1, a), (2, b), (5, named)], [(5, up)] + total_down(named, total, worker=1))

    resent_down = frame(5, hina(total, msg_type=1, worker=1, flags=RESEND))
    leaf_case("tree_resent_total_goes_down_flagged", "a total the parent sent as a RESEND (it answers a partial "
              "sent up again) goes down flagged RESEND: it answers a repeat, and a worker takes no round trip "
              "from it", [(1, a), (2, b), (5, resent_down)], [(5, up)] + total_down(resent_down, total, flags=RESEND))

    a1 = update(1, [1], worker=0, slot=1)
    b1 = update(2, [2], worker=1, slot=1)
    leaf_case("tree_slots_spread_over_spines", "slot 1 goes up to the odd slots' spine (port 6)",
              [(1, a1), (2, b1)], [(6, result(6, b1, [3], msg_type=0, worker=0))])

    a_or, b_or = update(1, [0b0101, -(2**31)], op=OR, worker=0), update(2, [0b0011, 1], op=OR, worker=1)
    leaf_case("tree_or_complete_forward_up", "OR on a leaf: the copy its two children complete goes up as one "
              "UPDATE of the ORed words", [(1, a_or), (2, b_or)],
              [(5, result(5, b_or, [0b0111, -(2**31) + 1], msg_type=0, worker=0))])

    a1v, b1v = update(1, [4], worker=0, version=1, offset=4 * K), update(2, [5], worker=1, version=1, offset=4 * K)
    total1 = frame(5, hina([90, -1], msg_type=1, worker=1, version=1, offset=4 * K))
    leaf_case("tree_result_from_parent_into_copy_1", "the parent's total for copy 1 of slot 0 (the slot's second "
              "use) is stored there and multicast down", [(1, a1v), (2, b1v), (5, total1)],
              [(5, result(5, b1v, [9], msg_type=0, worker=0))] + total_down(total1, [90, -1]))

    lone = update(1, [3, 4], worker=0, slot=1)
    cases.append(case("tree_leaf_of_one_child", "a leaf with one child below it: its first UPDATE completes the "
                      "copy, which goes up at once to the slot's parent (port 6 for slot 1)", [(1, lone)],
                      [(6, result(6, lone, [3, 4], msg_type=0, worker=0))], topology=LONE_LEAF_TOPOLOGY))
    return cases


def leaf_repeat_cases() -> list[dict]:
    """On a leaf: a child's UPDATE again (PENDING while the copy waits, up again once it went up, the total
    back once it came down), the parent's PENDING, and RESULTs that do not belong (another port's, late,
    early, a second)."""
    cases = []
    leaf_case = leaf_cases_into(cases)
    a, b, partial, up = leaf_updates()
    from_spine, total = spine_total()
    leaf_case("tree_duplicate_of_an_open_copy_pending", "a child repeats its UPDATE of a copy still waiting for "
              "the other child: dropped, and every child hears PENDING with the leaf's bitmap",
              [(1, a), (1, a)], down(a, [0b01], flags=PENDING), {"duplicate": 1})

    counted_up = frame(5, hina([0b01], msg_type=1, worker=1, flags=PENDING))  # the spine counted member 0: this leaf
    leaf_case("tree_pending_from_the_parent_goes_down", "the parent holds this leaf's partial and waits for "
              "another leaf (PENDING, its bitmap naming member 0): every child here is counted, and hears it "
              "with the leaf's own bitmap", [(1, a), (2, b), (5, counted_up)],
              [(5, up)] + down(counted_up, [0b11], flags=PENDING))

    lacking_up = frame(5, hina([0b10], msg_type=1, worker=1, flags=PENDING))  # the spine lacks member 0
    leaf_case("tree_pending_from_the_parent_lacking_this_leaf", "the parent's PENDING names another leaf but "
              "not this one: its partial was lost on the way up, and goes up again at once, nothing down",
              [(1, a), (2, b), (5, lacking_up)],
              [(5, up), (5, result(5, lacking_up, partial, msg_type=0, worker=0))])

    leaf_case("tree_duplicate_after_forwarding_resent_up", "a child repeats its UPDATE after the copy went up "
              "but before the total came down (the UPDATE up or the RESULT down was lost): the partial goes up "
              "again", [(1, a), (2, b), (1, a)], [(5, up), (5, result(5, a, partial, msg_type=0, worker=0))])

    a_up, b_up = (result(5, x, partial, msg_type=0, worker=0) for x in (a, b))
    leaf_case("tree_repeats_after_forwarding_one_up_per_round", "children repeat their UPDATEs after the copy "
              "went up, no total yet: the first repeat sends the partial up again, the next (children - 1 = 1) "
              "is answered PENDING back to its sender alone with the leaf's bitmap, the one after goes up again",
              [(1, a), (2, b), (1, a), (2, b), (1, a)],
              [(5, up), (5, a_up), (2, result(2, b, [0b11], flags=PENDING)), (5, a_up)], {"duplicate": 1})

    leaf_case("tree_parent_pending_lets_the_next_repeat_up", "after a repeat sent the partial up again, the "
              "parent's PENDING counting this leaf goes down, and the next repeat (another child's) goes up "
              "again at once: the parent answered the last one",
              [(1, a), (2, b), (1, a), (5, counted_up), (2, b)],
              [(5, up), (5, a_up)] + down(counted_up, [0b11], flags=PENDING) + [(5, b_up)])

    leaf_case("tree_duplicate_after_result_unicast", "a child repeats its UPDATE after the total came down: "
              "the stored total goes back to it alone (RESEND), nothing goes up",
              [(1, a), (2, b), (5, from_spine), (2, b)],
              [(5, up)] + total_down(from_spine, total) + [(2, result(2, b, total, flags=RESEND))])

    from_other_spine = frame(6, hina(total, msg_type=1, worker=1))  # port 6 is slot 1's parent, not slot 0's
    from_host = frame(3, hina(total, msg_type=1, worker=1))
    leaf_case("tree_result_from_non_parent_dropped", "a RESULT from a port that is not the slot's parent (the "
              "other spine, a host) is dropped and counted; the parent's still lands",
              [(1, a), (2, b), (6, from_other_spine), (3, from_host), (5, from_spine)],
              [(5, up)] + total_down(from_spine, total), {"not_parent": 2})

    late = frame(5, hina(total, msg_type=1, worker=1, offset=8 * K))
    leaf_case("tree_late_result_stale", "a RESULT for another chunk than the copy sent up (late, the copy moved "
              "on) is stale: never written into the copy", [(1, a), (2, b), (5, late)], [(5, up)], {"stale": 1})

    leaf_case("tree_result_for_an_open_copy_stale", "the parent's RESULT for the chunk of a copy still open "
              "(one child arrived, nothing went up) is stale: never written into the copy", [(1, a), (5, from_spine)],
              [], {"stale": 1})

    leaf_case("tree_result_for_an_empty_copy_stale", "a RESULT from the slot's parent for a copy nothing arrived "
              "in (a total this leaf never asked for) is stale", [(6, frame(6, hina(total, msg_type=1, worker=1,
                                                                                   slot=1)))], [], {"stale": 1})

    leaf_case("tree_second_result_duplicate", "a second RESULT for a copy holding the total (it answers a "
              "partial sent up again) is dropped as a duplicate", [(1, a), (2, b), (5, from_spine), (5, from_spine)],
              [(5, up)] + total_down(from_spine, total), {"duplicate": 1})
    return cases


def two_tier_cases() -> list[dict]:
    """STALE_RUN and the run salt through two tiers: a restarted job (new run salt 0 in the offsets) whose
    leaves were emptied by the workers' joins, under a spine that still holds the earlier run's partial
    (salt 0x5A17 added to its offset).  The spine refuses the leaf's partial; the leaf passes the refusal
    to every child.  And what stays below a leaf: a broadcast, a refusal on the leaf itself."""
    cases = []
    leaf_case = leaf_cases_into(cases)
    a, b, partial, up = leaf_updates()
    old_run = update(2, [9], worker=1, offset=0x5A17)
    leaf_up = hina(partial, worker=0)  # the leaf's partial, as the spine gets it from leaf 0 on port 1
    new_run = frame(1, leaf_up, ip_id=1)
    cases.append(case("tree_spine_refuses_another_runs_partial", "on a spine, a leaf's partial whose offset "
                      "(another run salt) disagrees with a copy holding the earlier run's partial is refused, "
                      "flagged STALE_RUN, to every leaf", [(2, old_run), (1, new_run)],
                      refused(new_run, [1, 2]), {"stale_run": 1}, topology=SPINE_TOPOLOGY))
    again_up = frame(1, leaf_up, ip_id=2)
    cases.append(case("tree_spine_pending_to_every_leaf", "on a spine, a leaf's partial sent up again to a copy "
                      "still waiting for the other leaf is dropped and answered PENDING to every leaf",
                      [(1, new_run), (1, again_up)],
                      [(p, result(p, again_up, [0b01], flags=PENDING)) for p in (1, 2)], {"duplicate": 1},
                      topology=SPINE_TOPOLOGY))
    refusal = frame(5, bytes([1]) + leaf_up[1:5] + bytes([STALE_RUN]) + leaf_up[6:])  # the spine's, relayed
    leaf_case("tree_stale_run_passes_down", "the spine's refusal reaches the leaf from the slot's parent: "
              "multicast to every child as it came (flag STALE_RUN, the partial's words), counted, nothing "
              "stored", [(1, a), (2, b), (5, refusal)], [(5, up)] + down(refusal, partial, flags=STALE_RUN),
              {"stale_run": 1})
    leaf_case("tree_stale_run_passes_down_to_any_copy", "the spine's refusal (of the other leaf's partial) "
              "reaches this leaf, whose copy never went up: relayed to every child all the same",
              [(1, a), (5, refusal)], down(refusal, partial, flags=STALE_RUN), {"stale_run": 1})
    fresh = update(2, [1], worker=1, offset=0x5A17)
    arp = raw(Ether(src=host_mac(1), dst="ff:ff:ff:ff:ff:ff") / ARP(hwsrc=host_mac(1), psrc=host_ip(1),
                                                                    pdst=host_ip(2)))
    leaf_case("tree_broadcast_stays_below", "a broadcast (ARP) on a leaf goes to its hosts only, never up to "
              "the spines: between switches it would loop", [(1, arp)], [(2, arp), (3, arp)])
    leaf_case("tree_stale_run_on_the_leaf", "a restarted child meets the earlier run's partial on the leaf "
              "itself (another salt in the offset): refused there, nothing goes up", [(1, a), (2, fresh)],
              refused(fresh, TREE_CHILDREN), {"stale_run": 1})
    return cases


def rank(w, words, **kw):
    """Worker `w`'s UPDATE from its rank's host port and UDP port (RANKS)."""
    port, udp = RANKS[w]
    return port, update(port, words, sport=udp, worker=w, **kw)


def to_ranks(sent, words, flags=0):
    """A RESULT to every rank, each at its own UDP port."""
    return [(p, result(p, sent, words, flags=flags, to=(host_mac(p), host_ip(p), u))) for p, u in RANKS.values()]


def rank_cases() -> list[dict]:
    """Several ranks per host: a replica per rank, addressed to its own UDP port; a frame from a port and
    address that is no member's is dropped and counted."""
    cases = []
    r0, r1, r2 = rank(0, [1]), rank(1, [10]), rank(2, [100])
    cases.append(case("ranks_share_a_host", "workers 0 and 1 run on one host (port 1, UDP ports 40001 and "
                      "40011): the RESULT leaves port 1 twice, once to each rank's UDP port, and port 2 once",
                      [r0, r1, r2], to_ranks(r2[1], [111]), topology=RANKS_TOPOLOGY))
    stranger = (1, update(1, [5], sport=40021, worker=0))
    swapped = (1, update(1, [5], sport=40011, worker=0))
    cases.append(case("rank_from_another_udp_port", "an UPDATE from the right host and port but a UDP port that "
                      "is not its worker's (another process, or another rank's port) is unauthorized",
                      [stranger, swapped, r0, r1, r2], to_ranks(r2[1], [111]), {"unauthorized": 2},
                      topology=RANKS_TOPOLOGY))
    cases.append(case("rank_resend_goes_back_to_its_port", "a rank that lost its RESULT asks again: the copy is "
                      "complete, so the stored RESULT goes back to that rank's UDP port alone",
                      [r0, r1, r2, r1], to_ranks(r2[1], [111]) + [(1, result(1, r1[1], [111], flags=RESEND,
                                                                                 back=True))],
                      topology=RANKS_TOPOLOGY))
    old = rank(1, [9], offset=0x5A17)
    new = rank(0, [1])
    cases.append(case("rank_refusal_reaches_every_rank", "a rank restarted into a copy holding another run's "
                      "chunk is refused (STALE_RUN) to every rank, each at its own UDP port",
                      [old, new], to_ranks(new[1], [1], flags=STALE_RUN), {"stale_run": 1},
                      topology=RANKS_TOPOLOGY))
    return cases


def main() -> int:
    VECTORS.mkdir(exist_ok=True)
    cases = build_cases()
    for old in VECTORS.glob("*.json"):
        old.unlink()
    for c in cases:
        (VECTORS / f"{c['name']}.json").write_text(json.dumps(c, indent=1) + "\n")
    print(f"wrote {len(cases)} cases to {VECTORS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
