"""Two jobs aggregate at once while a third party floods one job's slots: both exact, every flood frame counted."""

import socket
import threading
import time

import numpy as np
import pytest
from helpers import dense_fixed_sum, sparse_gradients

from hina import codec
from hina.control import Member
from hina.emulator import Pipeline, UdpSwitch
from hina.host import JobSpec, UdpTransport, Worker
from hina.wire import Drop
from hina.wire.headers import pack_header

pytestmark = pytest.mark.slow

FLOOD = 4000


def kernel_drops(port: int) -> int:
    """Datagrams the kernel dropped for a full receive buffer on this UDP port (/proc/net/udp)."""
    for line in open("/proc/net/udp").read().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port:
            return int(fields[-1])
    return 0


@pytest.mark.parametrize("flooder", ["stranger", "worker_of_the_other_job"])
def test_flood_of_valid_looking_updates_changes_nothing(flooder):
    sw = UdpSwitch(Pipeline())
    sw.start_thread()
    specs = {1: JobSpec(job_id=1, words=64, slot_base=0, slots=8), 2: JobSpec(job_id=2, words=64, slot_base=8, slots=8)}
    sizes = {1: 3, 2: 2}
    transports = {j: [UdpTransport(sw.data_address) for _ in range(n)] for j, n in sizes.items()}
    for j, spec in specs.items():
        sw.pipeline.add_job(spec.switch_config(sizes[j], [Member(w, t.address) for w, t in enumerate(transports[j])]))
    rng = np.random.default_rng(4)
    grads = {j: sparse_gradients(rng, n, 80_000, 0.05) for j, n in sizes.items()}
    results = {j: [None] * n for j, n in sizes.items()}

    def work(j, w):
        params = codec.CodecParams(length=80_000, workers=sizes[j])
        results[j][w] = Worker(transports[j][w], specs[j], w, deadline=30).aggregate(params, grads[j][w])

    if flooder == "stranger":
        flood_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        flood_sock.connect(sw.data_address)
    else:
        flood_sock = transports[2][0]._sock  # authorized for job 2 only

    def flood():
        payload = bytes(4 * 64)
        for i in range(FLOOD):  # job 1's slots, every worker_id, both copies, plausible offsets
            hdr = pack_header(0, 0, 1, i % 3, 0, ((i & 1) << 15) | (i % 8), (i // 8) * 64, 64, i & 0xFFFF)
            flood_sock.send(hdr + payload)
            if i % 200 == 199:
                time.sleep(0.002)  # paced so the switch's socket never overflows: every frame must be counted

    threads = [threading.Thread(target=flood)] + [threading.Thread(target=work, args=(j, w))
                                                   for j, n in sizes.items() for w in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and sw.pipeline.jobs[1].dropped.get(Drop.UNAUTHORIZED, 0) < FLOOD:
        time.sleep(0.05)
    sw.stop()
    for j in sizes:
        want = dense_fixed_sum(grads[j], results[j][0].shift)
        assert all(np.array_equal(r.fixed, want) for r in results[j]), f"job {j}"
    counters = sw.pipeline.counters()
    assert kernel_drops(sw.data_address[1]) == 0
    assert counters["jobs"][1]["drops"].get("unauthorized", 0) == FLOOD
    assert counters["drops"].get("unauthorized", 0) == FLOOD
    assert "unauthorized" not in counters["jobs"][2]["drops"]
    sw.close()
    for ts in transports.values():
        for t in ts:
            t.close()
    if flooder == "stranger":
        flood_sock.close()
