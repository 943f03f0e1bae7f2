"""The wire format: fast struct path and scapy layer agree byte for byte; captures dissect."""

import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from codec.ops import Op
from switch_emulator.headers import UDP_PORT, HinaHeader, MsgType, max_words, pack_header
from switch_emulator.scapy_hina import Hina


def test_fast_path_equals_scapy_bytes():
    words = [1, -1, 2**31 - 1, -(2**31)]
    fast = pack_header(MsgType.RESULT, Op.MAX, 0x1234, 17, 1, (1 << 15) | 0x0ABC, 0xDEADBEEF, 3, 0xBEEF) + \
        np.array(words, dtype=">i4").tobytes()
    pkt = Hina(msg_type=1, op=2, job_id=0x1234, worker_id=17, flags="RESEND", version=1, slot=0x0ABC,
               offset=0xDEADBEEF, count=3, phase=0xBEEF, words=words)
    assert raw(pkt) == fast
    assert fast[:16] == bytes.fromhex("01 02 1234 11 01 8abc deadbeef 0003 beef")


def test_scapy_dissects_a_captured_frame():
    payload = pack_header(0, 1, 7, 3, 0, 5, 64, 2, 9) + np.array([5, 6], dtype=">i4").tobytes()
    frame = raw(Ether() / IP(src="10.0.0.1", dst="10.0.0.254") / UDP(sport=40000, dport=UDP_PORT) / payload)
    pkt = Ether(frame)
    h = pkt[Hina]
    assert (h.msg_type, h.op, h.job_id, h.worker_id, h.version, h.slot, h.offset, h.count, h.phase, h.words) == \
        (0, 1, 7, 3, 0, 5, 64, 2, 9, [5, 6])
    assert HinaHeader.unpack(raw(h)) == HinaHeader(0, 1, 7, 3, 0, 5, 64, 2, 9)
    assert "hina" in pkt.summary()


def test_max_words_for_a_jumbo_frame():
    assert max_words(9000) == 2239
    assert max_words(1500) == 364
