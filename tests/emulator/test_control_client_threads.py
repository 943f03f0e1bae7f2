"""One ControlClient shared by threads (as docs/worker.md's example shares it): every request gets its own reply."""

import threading

from hina.control import ControlClient
from hina.control.config import JobConfig, Member
from hina.emulator import Pipeline, UdpSwitch

JOB = JobConfig(job_id=1, workers=2, words=32, slot_base=0, slots=4)


def test_one_client_shared_by_threads_gets_each_its_own_reply():
    """docs/worker.md's workers join from threads through one ControlClient: two threads waiting on its socket
    took each other's replies, dropped them as not theirs, and both ran out of tries now and then."""
    switch = UdpSwitch(Pipeline())
    switch.start_thread()
    failures = []
    try:
        with ControlClient(switch.control_address, timeout=1.0, retries=1) as shared:
            def ask_many(rank: int) -> None:
                for _ in range(25):
                    try:
                        shared.join(JOB, Member(rank % 2, ("127.0.0.1", 41000 + rank)))
                    except Exception as exc:  # noqa: BLE001 - every one is the test's failure
                        failures.append(exc)
            threads = [threading.Thread(target=ask_many, args=(rank,)) for rank in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        switch.stop()
        switch.close()
    assert not failures, failures[:3]
