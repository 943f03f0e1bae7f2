"""The fidelity verdict (mininet/fidelity.py) from synthetic samples, the counters it reads on this machine,
and a Mininet run (root + Mininet) at 100 Mbit/s that it judges network-bound."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "mininet"))
import fidelity  # noqa: E402  (no Mininet needed)
from fidelity import Link, Sample, judge  # noqa: E402

MBPS = 100.0
BPS = MBPS * 1e6 / 8  # bytes per second at line rate
UP = Link("hw1", "hsw", "hsw-eth1", MBPS)
DOWN_ONLY = Link("hw2", "hsw", "hsw-eth2", MBPS)


def samples(rates, cpu_rates=None, machine=0.5, dt=0.05, cpus=2, links=(UP,)):
    """Samples every dt seconds: rates[k] is the k-th interval's share of line rate on each link's rx
    direction; cpu_rates maps pid -> share of a core; machine: share of all cores busy."""
    cpu_rates = cpu_rates or {}
    out, rx, cpu, busy, total = [], 0.0, dict.fromkeys(cpu_rates, 0.0), 0.0, 0.0
    for k in range(len(rates) + 1):
        out.append(Sample(k * dt, {link.ifname: (int(rx), 0) for link in links}, dict(cpu), (busy, total)))
        if k < len(rates):
            rx += rates[k] * BPS * dt
            cpu = {p: cpu[p] + r * dt for p, r in cpu_rates.items()}
            busy += machine * cpus * dt
            total += cpus * dt
    return out


def test_a_link_at_line_rate_through_the_run_is_network_bound():
    v = judge(samples([0.4] + [0.98] * 38 + [0.3]), [UP], {}, 2)
    assert v["verdict"] == "network-bound" and v["bound"] == "network", v
    assert v["busiest"]["link"] == "hw1->hsw"
    assert v["busiest"]["while_sending"] == pytest.approx(0.98)  # the partial first and last intervals trimmed
    assert v["busiest"]["sending_share"] == pytest.approx(1.0)


def test_the_rule_is_90_percent_while_sending():
    assert judge(samples([0.91] * 20), [UP], {}, 2)["bound"] == "network"
    below = judge(samples([0.85] * 20), [UP], {}, 2)
    assert below["bound"] == "neither" and "at 85% of 100 Mbit/s" in below["verdict"], below


def test_idle_gaps_do_not_count_against_the_link_but_a_mostly_idle_window_is_not_network_bound():
    # full while sending, idle 30% of the window (encode/decode between phases): still network-bound
    v = judge(samples([0.97] * 14 + [0.0] * 6), [UP], {}, 2)
    assert v["bound"] == "network" and v["busiest"]["sending_share"] == pytest.approx(0.7)
    # full in a short burst, idle most of the window: the link did not set the time
    v = judge(samples([0.97] * 4 + [0.0] * 16), [UP], {}, 2)
    assert v["bound"] == "neither", v
    assert "sent 20% of it at 97%" in v["verdict"], v


def test_a_process_at_a_full_core_is_named():
    names = {11: "switch_emulator on root (pid 11)", 12: "host.cli worker on hw1 (pid 12)"}
    v = judge(samples([0.5] * 20, {11: 0.99, 12: 0.3}), [UP], names, 2)
    assert v["verdict"] == "CPU-bound: switch_emulator on root (pid 11) at 99% of a core", v
    assert v["cpu"]["host.cli worker on hw1 (pid 12)"] == pytest.approx(0.3)


def test_network_bound_wins_over_a_busy_process():
    v = judge(samples([0.95] * 20, {11: 0.99}), [UP], {11: "switch"}, 2)
    assert v["verdict"] == "network-bound"


def test_a_saturated_machine_without_a_full_core_process_is_cpu_bound_on_the_machine():
    v = judge(samples([0.5] * 20, {11: 0.6, 12: 0.6}, machine=0.97), [UP], {11: "a", 12: "b"}, 2)
    assert v["verdict"] == "CPU-bound: the machine, 1.94 of 2 cores busy", v


def test_neither_says_where_the_time_went():
    v = judge(samples([0.3] * 20, {11: 0.4}, machine=0.3), [UP], {11: "switch"}, 2)
    assert v["bound"] == "neither"
    assert "at line rate would take 30% of the window" in v["verdict"], v
    assert "busiest process switch at 40% of a core" in v["verdict"]
    assert "machine 0.60 of 2 cores" in v["verdict"]


def test_the_busiest_link_is_the_one_needing_most_line_time():
    slow = Link("hw2", "hsw", "hsw-eth2", 10.0)  # a tenth of the rate: its bytes need 10x the time
    s = [Sample(k * 0.05, {"hsw-eth1": (int(k * 0.5 * BPS * 0.05), 0),
                           "hsw-eth2": (int(k * 0.95 * BPS / 10 * 0.05), 0)}, {}, (0.0, k * 0.1))
         for k in range(21)]
    v = judge(s, [UP, slow], {}, 2)
    assert v["busiest"]["link"] == "hw2->hsw" and v["verdict"] == "network-bound", v
    assert {f["link"] for f in v["links"]} == {"hw1->hsw", "hsw->hw1", "hw2->hsw", "hsw->hw2"}


def test_an_unshaped_link_is_never_network_bound():
    v = judge(samples([1.0] * 20, links=(Link("hw1", "hsw", "hsw-eth1", None),)),
              [Link("hw1", "hsw", "hsw-eth1", None)], {}, 2)
    assert v["bound"] == "neither" and "links unshaped" in v["verdict"]


def test_too_few_samples_is_unknown():
    assert judge(samples([])[:1], [UP], {}, 2)["bound"] == "unknown"


def test_summary_of_rounds():
    net = {"verdict": "network-bound", "bound": "network"}
    cpu = {"verdict": "CPU-bound: switch at 99% of a core", "bound": "cpu"}
    assert fidelity.summary([net, net]) == "network-bound"
    assert fidelity.summary([net, cpu, net]) == "network-bound (2 of 3); CPU-bound: switch at 99% of a core (1 of 3)"


def test_the_monitor_reads_this_machines_counters_and_names_its_children():
    """Real counters: loopback's bytes move under UDP datagrams, a busy child's CPU time grows and is named."""
    lo = Link("lo", "lo", "lo", None)
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 0.3: pass"])
    try:
        with fidelity.Monitor([lo], period=0.02) as mon:
            a = mon.mark()
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                for _ in range(100):
                    s.sendto(bytes(1000), ("127.0.0.1", 9))  # discard port: the bytes cross lo either way
            child.wait(10)
            b = mon.mark()
        v = mon.judge_window(a.t, b.t)
    finally:
        child.kill()
    assert b.links["lo"][0] - a.links["lo"][0] >= 100_000, (a.links, b.links)
    busy = {k: x for k, x in v["cpu"].items() if k.startswith("python -c on root")}
    assert busy and max(busy.values()) * v["seconds"] >= 0.25, (v["cpu"], v["seconds"])  # its 0.3 s of CPU
    assert v["samples"] >= 10 and b.machine[0] > a.machine[0]


# --- Mininet (root + Mininet) -------------------------------------------------------------------------------

try:
    import hina_net
except ImportError:
    hina_net = None
SKIP = ("Mininet is not installed (Debian package mininet)" if hina_net is None
        else hina_net.missing_requirements())


@pytest.mark.skipif(SKIP is not None, reason=f"Mininet experiment: {SKIP}")
def test_a_dense_run_at_100_mbits_is_judged_network_bound_and_its_counters_moved():
    cfg = hina_net.ExperimentConfig(workers=2, bw=100.0, length=1_500_000, density=1.0, modes=("dense",),
                                    ping=False, deadline=60.0, rounds=2)
    results = hina_net.Experiment(cfg, log=lambda m: None).run()
    (run,) = results["runs"]
    assert run["exact"], run
    fid = run["fidelity"]  # the best round's (the one whose seconds are reported)
    assert fid["verdict"] == "network-bound", fid
    assert all("fidelity" in r for r in run["rounds"]) and run["fidelity_rounds"]
    moved = {f["link"]: f["bytes"] for f in fid["links"]}
    # every worker sent its 6 MB up and got the sum back: counters moved in both directions of both links
    assert all(moved[f"hw{i}->hsw"] > 5e6 and moved[f"hsw->hw{i}"] > 5e6 for i in (1, 2)), moved
    assert any(name.startswith("switch_emulator") for name in fid["cpu"]), fid["cpu"]
    assert any(name.startswith("host.cli worker on hw2") for name in fid["cpu"]), fid["cpu"]
