"""Mininet experiments (root + Mininet): a 3-host star through the emulator, ping, exact under 2% loss."""

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "mininet"))
try:
    import hina_net
except ImportError:  # Mininet (Debian package) absent: `mininet` is then our own folder
    hina_net = None

SKIP_REASON = ("Mininet is not installed (Debian package mininet)" if hina_net is None
               else hina_net.missing_requirements())

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=f"Mininet experiments: {SKIP_REASON}")


def leftovers():
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    procs = subprocess.run(["pgrep", "-af", "switch_emulator.*hsw-eth|mininet:hw"], capture_output=True, text=True)
    return [line for line in links.splitlines() if "hsw-eth" in line] + procs.stdout.splitlines()


def experiment(**kw):
    cfg = hina_net.ExperimentConfig(**{"workers": 3, "bw": 100.0, "length": 60_000, "density": 0.05,
                                       "loss": 2.0, "deadline": 30.0, **kw})
    return hina_net.Experiment(cfg, log=lambda m: None).run()


@pytest.mark.parametrize("mode", ["auto", "dense"])
def test_star_through_the_emulator_ping_works_and_results_are_exact_under_loss(mode):
    results = experiment(modes=(mode,), rounds=2)
    assert results["ping"]["received"] >= 3, results["ping"]  # 5 pings over two lossy links
    (run,) = results["runs"]
    assert run["mode"] == mode and run["exact"], run
    assert run["encoding"] in ("dense", "blocks", "aligned", "sketch") and run["group"] >= 0, run
    assert mode != "dense" or run["encoding"] == "dense", run
    assert all(r["exact"] and not r["errors"] for r in run["rounds"])
    if mode == "dense":  # thousands of packets: the loss was real (auto's few dozen may all get through)
        assert sum(r["retransmissions"] for r in run["rounds"]) > 0
    assert results["counters"]["jobs"][1]["results"] > 0
    assert not leftovers()


def test_a_failed_run_still_cleans_up(monkeypatch):
    def boom(self, mode, topology):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(hina_net.Experiment, "_aggregate", boom)
    with pytest.raises(RuntimeError, match="injected failure"):
        experiment(loss=0.0)
    assert not leftovers()


def test_transport_is_udp_by_default_and_raw_frames_work_too():
    auto = experiment(loss=0.0, ping=False)
    assert auto["runs"][0]["transports"] == ["UdpTransport"]
    raw = experiment(loss=0.0, ping=False, transport="raw")
    assert raw["runs"][0]["transports"] == ["RawTransport"] and raw["runs"][0]["exact"]
