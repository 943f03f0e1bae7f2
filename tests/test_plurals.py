"""Counts printed outside the `hina` command line take their noun's number from the one helper too
(`hina.cliargs.plural`): a library's refusal, `hina switch status`, the controller's full switch."""

import numpy as np
import pytest

from hina.cliargs import plural


def test_plural():
    assert [plural(n, "slot") for n in (0, 1, 2, 1234)] == ["0 slots", "1 slot", "2 slots", "1,234 slots"]


def test_the_codecs_shape_refusal_says_one_element():
    from hina.codec.simulate import check_gradients

    with pytest.raises(ValueError) as refused:
        check_gradients([np.ones(1, np.float32), np.ones(2, np.float32)])
    assert "worker 0 (1,) (1 element), worker 1 (2,) (2 elements)" in str(refused.value)


def test_switch_status_says_one_job():
    from hina.control.switch_cli import format_status

    assert format_status({"target": "bmv2", "jobs": 1}, "10.0.0.3:9559") == "BMv2 at 10.0.0.3:9559: 1 job"
    text = format_status({"pipes": 1, "alive": 1, "uptime_s": 3.0, "lease_s": 0, "slot_space": 64,
                          "slot_policy": "equal", "waiting": [3], "leases": {1: None}}, "127.0.0.1:20034")
    assert "1 pipe (1 alive)" in text and "; waiting: job 3" in text and "\n1 job: 1 (no lease)" in text, text


def test_a_full_bmv2_switch_says_one_slot():
    from hina.control.config import JobConfig
    from hina.control.controller import Bmv2Target
    from hina.control.ledger import Placement

    class Full(Bmv2Target):  # a switch whose one slot job 1 holds; no device is reached
        def __init__(self):
            pass

        def jobs(self):
            return [{"job_id": 1, "slot_base": 0, "slots": 1, "workers": 2}]

    with pytest.raises(Exception) as refused:
        Full().place(JobConfig(job_id=2, workers=2, words=32, slot_base=0, slots=1), Placement(1), space=1)
    assert "job 2: no free range of 1 slot among the switch's 1" in str(refused.value), refused.value
