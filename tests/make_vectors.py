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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from switch_emulator.headers import UDP_PORT, pack_header  # noqa: E402

VECTORS = Path(__file__).resolve().parent / "vectors"
K = 32
SWITCH_MAC, SWITCH_IP = "02:00:00:00:00:fe", "10.0.0.254"
ADD, OR, MAX = 0, 1, 2
RESEND, STALE_RUN = 1, 2


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


def words_bytes(words, k=K):
    words = list(words) + [0] * (k - len(words))
    return b"".join((w & 0xFFFFFFFF).to_bytes(4, "big") for w in words)


def hina(words, *, msg_type=0, op=ADD, job=1, worker=0, flags=0, slot=0, version=0, offset=0,
         count=K, phase=3, k=K):
    return pack_header(msg_type, op, job, worker, flags, (version << 15) | slot, offset, count, phase) + \
        words_bytes(words, k)


def frame(port, payload, *, ip_id=7, udp_len=None, chksum=None):
    """A frame as the host on `port` sends it to the switch."""
    pkt = (Ether(src=host_mac(port), dst=SWITCH_MAC) /
           IP(src=host_ip(port), dst=SWITCH_IP, id=ip_id, ttl=64, chksum=chksum) /
           UDP(sport=40000 + port, dport=UDP_PORT, len=udp_len) / Raw(payload))
    return raw(pkt)


def update(port, words, **kw):
    return frame(port, hina(words, **kw), ip_id=kw.get("offset", 0) + port)


def result(to_port, sent_frame, words, *, flags=0):
    """What leaves `to_port` when `sent_frame` (an UPDATE) completes its copy (or asks again)."""
    pkt = Ether(sent_frame)
    udp_len = pkt[UDP].len
    payload = sent_frame[42 : 42 + udp_len - 8]  # the hina frame
    trailer = sent_frame[42 + udp_len - 8 :]  # past the UDP length: rides along
    out_hina = bytes([1]) + payload[1:5] + bytes([flags]) + payload[6:16] + words_bytes(words)
    out = (Ether(src=SWITCH_MAC, dst=host_mac(to_port)) /
           IP(src=SWITCH_IP, dst=host_ip(to_port), id=pkt[IP].id, ttl=pkt[IP].ttl, len=pkt[IP].len, chksum=None) /
           UDP(sport=UDP_PORT, dport=UDP_PORT, len=pkt[UDP].len, chksum=0) / Raw(out_hina))
    return raw(out) + trailer


def refused(port, sent_frame):
    """An UPDATE refused back to its sender (flag STALE_RUN): its own header and words as a RESULT."""
    hina_frame = sent_frame[42:]
    words = [int.from_bytes(hina_frame[16 + 4 * i : 20 + 4 * i], "big", signed=True) for i in range(K)]
    return port, result(port, sent_frame, words, flags=STALE_RUN)


def multicast(sent_frame, words, job=1):
    return [(p, result(p, sent_frame, words)) for p in JOB_PORTS[job]]


def case(name, description, packets, expected, drops=None):
    return {"name": name, "description": description, "topology": TOPOLOGY,
            "packets": [{"port": p, "frame": f.hex()} for p, f in packets],
            "expected": [{"port": p, "frame": f.hex()} for p, f in expected],
            "expected_drops": drops or {}}


def build_cases() -> list[dict]:
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

    a, b, c = update(1, [1], worker=0), update(2, [10], worker=1), update(3, [100], worker=2)
    cases.append(case("duplicate_before_completion", "a repeated UPDATE of an incomplete copy is dropped and "
                      "counted once", [(1, a), (1, a), (2, b), (3, c)], multicast(c, [111]), {"duplicate": 1}))

    cases.append(case("duplicate_after_completion", "a repeated UPDATE of a complete copy is answered by "
                      "unicast with the RESEND flag", [(1, a), (2, b), (3, c), (2, b)],
                      multicast(c, [111]) + [(2, result(2, b, [111], flags=RESEND))]))

    nxt0 = update(1, [7], worker=0, version=1, offset=4 * K)
    nxt1 = update(2, [7], worker=1, version=1, offset=4 * K)
    cases.append(case("resend_after_others_moved_on", "workers 0 and 1 moved to the other copy; worker 2 lost "
                      "its RESULT and still gets it", [(1, a), (2, b), (3, c), (1, nxt0), (2, nxt1), (3, c)],
                      multicast(c, [111]) + [(3, result(3, c, [111], flags=RESEND))]))

    late = update(1, [1], worker=0)
    cases.append(case("stale_after_leaving", "a late UPDATE from a worker that already left a complete copy "
                      "is stale", [(1, a), (2, b), (3, c), (1, nxt0), (1, late)], multicast(c, [111]),
                      {"stale": 1}))

    off = update(2, [1], worker=1, offset=K)
    cases.append(case("stale_offset", "an offset that disagrees with a non-empty copy is another run's chunk: "
                      "refused back to the sender, flagged STALE_RUN", [(1, a), (2, off)], [refused(2, off)],
                      {"stale_run": 1}))

    # A job restarted against a switch nobody reset: fresh workers start at slot copy 0 with phase tag 0.
    fresh0 = update(1, [9], worker=0, phase=0)
    cases.append(case("restart_meets_a_complete_copy", "worker 0 restarted: its bit is still set in a copy "
                      "completed by the earlier run (phase tag 3), so the switch refuses it instead of re-sending "
                      "the old RESULT", [(1, a), (2, b), (3, c), (1, fresh0)],
                      multicast(c, [111]) + [refused(1, fresh0)], {"stale_run": 1}))
    fresh1 = update(2, [9], worker=1, phase=0)
    cases.append(case("restart_meets_a_partial_copy", "the earlier run crashed with worker 0's chunk in the copy; "
                      "a restarted worker 1 (phase tag 0) is refused, never added to the old words",
                      [(1, a), (2, fresh1)], [refused(2, fresh1)], {"stale_run": 1}))


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
    cases.append(case("truncated_hina_header", "10 bytes after the UDP header",
                      [(1, frame(1, b"\0" * 10))], [], {"truncated": 1}))
    cases.append(case("truncated_payload", "a header and 20 of the 32 words",
                      [(1, frame(1, hina([1], k=20)))], [], {"truncated": 1}))
    good = hina([1], worker=0)
    cases.append(case("bad_length", "UDP length claims 8 more bytes than a hina frame has",
                      [(1, frame(1, good + b"\0" * 8))], [], {"bad_length": 1}))
    trailing = frame(1, good + b"\xab" * 6, udp_len=8 + len(good))
    cases.append(case("trailing_bytes_ride_along", "bytes past the UDP length are not hina: the frame is "
                      "accepted and they leave with the RESULT unchanged",
                      [(2, b), (3, c), (1, trailing)],
                      [(p, result(p, trailing, [111])) for p in JOB_PORTS[1]]))
    cases.append(case("bad_checksum", "IPv4 header checksum wrong",
                      [(1, frame(1, good, chksum=0x1234))], [], {"bad_checksum": 1}))

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
