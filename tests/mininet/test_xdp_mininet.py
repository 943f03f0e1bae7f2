"""Mininet stars through the XDP switch (root, Mininet, clang and libbpf): `mininet/run.py --switch xdp`, the
rules in the kernel on the switch's veths, every worker's sum exact."""

import subprocess
import sys
from pathlib import Path

import pytest

from hina.emulator.xdp.build import cannot_load

try:
    from hina.mininet import hina_net
except ImportError:  # Mininet (Debian package) absent: the `mininet` marker skips every test here
    hina_net = None

pytestmark = [pytest.mark.mininet, pytest.mark.slow,
              pytest.mark.skipif(cannot_load() is not None, reason=f"the XDP switch: {cannot_load()}")]
RUN = "txd"  # these tests' run id


def experiment(**kw):
    cfg = hina_net.ExperimentConfig(**{"workers": 4, "switch": "xdp", "mtu": 3506, "bw": 100.0, "length": 60_000,
                                       "density": 0.05, "deadline": 30.0, "ping": False, **kw})
    return hina_net.Experiment(cfg, log=lambda m: None, run_id=RUN).run()


def test_a_star_through_the_xdp_switch_is_exact_under_loss():
    """Four workers, auto and dense, 2% loss on the links: every round exact; the switch's counters are the
    kernel's (RESULTs sent, the programs' runs counted by bpf_stats_enabled)."""
    results = experiment(modes=("auto", "dense"), loss=2.0, rounds=2, ping=True)
    assert results["ping"]["received"] >= 3  # ARP and ICMP through the MAC table in XDP
    assert [r["exact"] for r in results["runs"]] == [True, True], results["runs"]
    counters = results["counters"]
    assert counters["jobs"][1]["results"] > 100 and counters["forwarded"] > 0
    assert counters["profile"]["xdp_ingress_runs"] >= counters["frames"] > 0
    assert counters["profile"]["xdp_egress_runs"] > 0 and counters["unsent"] == 0
    assert all(r["switch_profile"]["xdp_ingress_s"] > 0 for r in results["runs"][1]["rounds"])


def test_ranks_sharing_a_host_each_get_their_own_replica():
    """Two ranks a host: the job's group holds the port twice, and the egress program addresses each copy to
    its rank's UDP port (the broadcast's per-CPU numbering)."""
    results = experiment(ranks_per_host=2, modes=("dense",))
    assert results["runs"][0]["exact"], results["runs"]
    assert not results["counters"]["drops"].get("unauthorized")


def test_a_frame_larger_than_the_program_takes_is_refused_before_any_network():
    out = subprocess.run([sys.executable, str(Path(hina_net.__file__).with_name("run.py")), "--switch", "xdp",
                          "--mtu", "9000"], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr.splitlines()) == (2, [
        "mininet/run.py: mtu 9000: the XDP switch takes frames of an MTU up to 3506 (the kernel broadcasts no "
        "larger frame); give --mtu 3506 or less"]), out.stderr
