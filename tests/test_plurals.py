"""Counts printed outside the `hina` command line take their noun's number from the one helper too
(`hina.cliargs.plural`): a library's refusal, `hina switch status`, the controller's full switch, a Mininet
run's lines and the ns-3 runner's."""

import argparse
import ast
import re
from pathlib import Path

import numpy as np
import pytest

from hina.cliargs import plural

ROOT = Path(__file__).resolve().parent.parent
# the modules that print a run's counts to a reader, and the nouns they count
RUN_REPORTERS = ["mininet/hina_net.py", "mininet/run.py", "sim/ns3sim.py"]
COUNTED = ("retransmissions", "probes", "tail probes", "timeouts", "elements", "workers", "chunks", "jobs", "slots",
           "pipes", "hosts", "payloads", "ranks", "frames", "rounds", "drops")


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


def counts_written_by_hand(source: str) -> list[str]:
    """Every `{n} nouns` in an f-string of `source` whose noun is COUNTED: "1 retransmissions" waiting to be
    printed (a count through `plural` is a call, not followed by its noun)."""
    noun = re.compile(rf"^ ({'|'.join(COUNTED)})\b")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            for value, text in zip(node.values, node.values[1:]):
                said = (isinstance(value, ast.FormattedValue) and isinstance(text, ast.Constant)
                        and isinstance(text.value, str) and noun.match(text.value))
                if said:
                    found.append(f"{node.lineno}: {{{ast.unparse(value.value)}}} {said.group(1)}")
    return found


@pytest.mark.parametrize("path", RUN_REPORTERS)
def test_a_runs_counts_take_their_nouns_number_from_the_helper(path):
    found = counts_written_by_hand((ROOT / path).read_text())
    assert not found, f"{path}: counts written before a plural noun (use hina.cliargs.plural): {found}"


def test_the_check_finds_a_count_before_a_plural_noun():
    source = ('n = 1\nline = f"{n} retransmissions ({n} tail probes)"\nok = f"{plural(n, \'worker\')}, {n:,} of"\n'
              'rate = f"{n} Mbit/s, {n} ms"\n')
    assert counts_written_by_hand(source) == ["2: {n} retransmissions", "2: {n} tail probes"]


def test_a_mininet_run_reports_one_retransmission(capsys):
    from hina.mininet.run import report

    run = {"mode": "dense", "exact": True, "encoding": "dense", "group": 0, "seconds": 1.5, "line_rate_seconds": 1.2,
           "wire_bytes_per_worker": 1e6, "retransmissions": 1, "fidelity": {"verdict": "network-bound"}}
    report({"runs": [run], "counters": {"pipes": [{"frames": 10}]}}, argparse.Namespace(pipes=1))
    out = capsys.readouterr().out
    assert "1,000,000 B/worker on the wire, 1 retransmission; network-bound" in out, out
    assert "switch: 1 pipe, frames per pipe [10]" in out, out


def test_a_mininet_rounds_line_says_one_retransmission_and_one_tail_probe():
    hina_net = pytest.importorskip("hina.mininet.hina_net", reason="Mininet (Debian's package) is not installed")
    summary = {"exact": True, "errors": [], "seconds": 0.25, "encoding": "dense", "group": 0,
               "wire_bytes_per_worker": 2048.0, "retransmissions": 1, "probes": 1, "timeouts": 0}
    assert hina_net.round_line("dense", 0, summary) == ("[dense] round 1: exact=True 0.250 s, ran dense (index group "
                                                        "0), 2,048 B/worker, 1 retransmission (1 tail probe, 0 on a "
                                                        "timeout)")


def test_ns3_refuses_one_job_too_large_in_the_singular():
    from hina.control import Fabric
    from hina.sim.ns3sim import SimJob, simulate_jobs
    from hina.wire.headers import MAX_SLOTS

    with pytest.raises(ValueError) as refused:
        simulate_jobs(Fabric.star(2, rate=100.0), [SimJob([(64,)])], slots=MAX_SLOTS + 1)
    assert str(refused.value) == f"1 job x {MAX_SLOTS + 1:,} slots: {MAX_SLOTS + 1:,} slots, more than a switch's " \
                                 f"{MAX_SLOTS:,}", refused.value
