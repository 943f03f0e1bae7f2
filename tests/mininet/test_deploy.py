"""The deployment guide's commands (docs/deploy.md) in Mininet: two machines of ranks and a switch on a third,
standalone workers and multi-node torchrun, as a cluster runs them; and two experiments at once."""

from __future__ import annotations

import pytest

try:
    from hina.mininet import deploy
except ImportError:  # Mininet (Debian package) absent: the `mininet` marker skips every test here
    deploy = None

pytestmark = [pytest.mark.mininet, pytest.mark.slow]


def test_standalone_workers_two_machines_of_four_ranks_and_the_switch_on_a_third_are_exact():
    """The guide's `python -m hina.emulator --listen` on a server and `hina worker` four times on each of two
    machines, every rank at a UDP port of its own: every rank's sum is numpy's, bit for bit."""
    with deploy.Cluster(ranks=4, bw=100.0, log=lambda m: None) as cluster:
        result = cluster.standalone(length=200_000, density=0.02)
    assert result["workers"] == 8 and result["exact"], result["failures"]


@pytest.mark.torch
def test_multi_node_torchrun_through_the_switch_keeps_every_rank_identical():
    """`torchrun --nnodes 2 --nproc-per-node 4` on each machine with examples/ddp_torchrun.py: the parameters are
    identical on all 8 ranks after every step (the script checks by digest, through gloo), with the hina hook
    and with gloo's own allreduce, whose losses are hina's to float32 rounding (the same data and start).  First,
    as the guide's check has it, a small standalone job on the same switch: its workers leave it when they are
    done, so the switch holds no job after it, and each training job is given slots of its own."""
    with deploy.Cluster(ranks=4, bw=100.0, log=lambda m: None) as cluster:
        check = cluster.standalone(length=20_000, density=0.02)
        assert check["exact"] and cluster.jobs() == []
        hina = cluster.torchrun("hina", steps=3, job_id=21, extra=["--rows", "20000"])
        gloo = cluster.torchrun("gloo", steps=3, job_id=22, extra=["--rows", "20000"])
    for run in (hina, gloo):
        assert run["ok"] and run["steps"] == 3 and run["identical_every_step"], run["failures"]
    assert hina["losses"] == pytest.approx(gloo["losses"], rel=1e-5)
    assert all(b and b > 0 for b in hina["bytes_per_step"])
