"""The wire format: fast struct path and scapy layer agree byte for byte; captures dissect."""

import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from hina.codec.ops import Op
from hina.wire.headers import HEADER_BYTES, UDP_PORT, HinaHeader, MsgType, max_words, pack_header
from hina.wire.scapy_layer import Hina


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


def test_scapy_dissects_frames_of_the_default_k_without_global_settings():
    from scapy.config import conf

    words = list(range(-1000, 1239))  # K = 2239, a 9000-byte jumbo frame
    payload = pack_header(1, 0, 1, 2, 0, 7, 4478, len(words), 3) + np.array(words, dtype=">i4").tobytes()
    frame = raw(Ether() / IP() / UDP(sport=UDP_PORT, dport=50000) / payload)
    limit = conf.max_list_count
    pkt = Ether(frame)
    assert pkt[Hina].words == words and pkt[Hina].offset == 4478
    assert conf.max_list_count == limit  # scapy's global settings untouched


def _capture_a_real_run():
    """Sniff the loopback while two workers aggregate through a switch on UDP port 0x4E41."""
    import os
    import time

    from helpers import aggregate_over_udp, sparse_gradients
    from scapy.sendrecv import AsyncSniffer

    from hina import codec
    from hina.emulator import Pipeline, UdpSwitch
    from hina.host import JobSpec

    if os.geteuid() != 0:
        pytest.skip("capturing on the loopback needs root")
    try:
        sw = UdpSwitch(Pipeline(), data=("127.0.0.1", UDP_PORT))
    except OSError as exc:
        pytest.skip(f"UDP port {UDP_PORT} is busy: {exc}")
    sw.start_thread()
    sniffer = AsyncSniffer(iface="lo", store=True,
                           lfilter=lambda p: UDP in p and UDP_PORT in (p[UDP].sport, p[UDP].dport))
    sniffer.start()
    time.sleep(0.5)
    try:
        grads = sparse_gradients(np.random.default_rng(3), 2, 50_000, 0.02)
        params = codec.CodecParams(length=50_000, workers=2)
        aggregate_over_udp(sw, JobSpec(job_id=5, words=2239, slots=8), params, grads)
        time.sleep(0.3)
    finally:
        packets = sniffer.stop()
        sw.stop()
        sw.close()
    return packets


@pytest.mark.root
@pytest.mark.slow
def test_a_capture_of_a_real_run_dissects(tmp_path):
    from scapy.utils import rdpcap, wrpcap

    packets = _capture_a_real_run()
    path = tmp_path / "run.pcap"
    wrpcap(str(path), packets)
    back = rdpcap(str(path))
    assert len(back) > 10
    hina = [p[Hina] for p in back if Hina in p]
    assert len(hina) == len(back)  # every frame dissects as hina, none as Raw
    assert {h.msg_type for h in hina} == {0, 1} and {h.job_id for h in hina} == {5}
    # every frame is K = max_words(9000) words long, of which `count` are dissected as words and the rest as padding (a
    # sniffer on a busy machine may miss some frames: which counts were caught varies, this does not)
    assert all(len(h.words) == h.count and len(bytes(h)) == HEADER_BYTES + 4 * max_words(9000) for h in hina)


@pytest.mark.root
@pytest.mark.slow
def test_tshark_dissects_a_capture_with_the_lua_dissector(tmp_path):
    import shutil
    import subprocess
    from pathlib import Path

    from scapy.utils import wrpcap

    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (Debian package tshark)")
    lua = Path(__file__).resolve().parents[2] / "wireshark" / "hina.lua"
    frames = [
        Ether() / IP(src="10.0.0.1", dst="10.0.0.254") / UDP(sport=40000, dport=UDP_PORT)
        / (pack_header(0, 2, 7, 3, 0, (1 << 15) | 5, 64, 2, 9) + np.array([5, -6, 0], dtype=">i4").tobytes()),
        Ether() / IP(src="10.0.0.254", dst="10.0.0.1") / UDP(sport=UDP_PORT, dport=40000)
        / (pack_header(1, 0, 7, 3, 1, 5, 2239 * 4, 3, 10) + np.arange(-1, 2238, dtype=">i4").tobytes()),
    ]
    path = tmp_path / "hina.pcap"
    wrpcap(str(path), frames)
    fields = ["hina.msg_type", "hina.op", "hina.job_id", "hina.worker_id", "hina.flags.resend", "hina.version",
              "hina.slot", "hina.offset", "hina.count", "hina.phase"]
    out = subprocess.run(["tshark", "-n", "-X", f"lua_script:{lua}", "-r", str(path), "-T", "fields",
                          "-E", "separator=,", *sum((["-e", f] for f in fields), [])],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [line.split(",") for line in out.stdout.strip().splitlines()]
    assert rows[0] == ["0", "2", "7", "3", "0", "1", "5", "64", "2", "9"]  # booleans print as 0/1
    assert rows[1] == ["1", "0", "7", "3", "1", "0", "5", str(2239 * 4), "3", "10"]
    verbose = subprocess.run(["tshark", "-n", "-X", f"lua_script:{lua}", "-r", str(path), "-V"],
                             capture_output=True, text=True, timeout=60).stdout
    assert "Message type: UPDATE (0)" in verbose and "Operation: MAX (2)" in verbose
    assert "Message type: RESULT (1)" in verbose and "Operation: ADD (0)" in verbose
    assert "Malformed" not in verbose and verbose.count("Word: ") == 2 + 3  # valid words only
