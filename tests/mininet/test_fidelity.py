"""The fidelity verdict (mininet/fidelity.py) from synthetic samples, the counters it reads on this machine,
and a Mininet run (root + Mininet) at 100 Mbit/s that it judges network-bound."""

import socket
import subprocess
import sys

import numpy as np
import pytest

from hina.mininet import fidelity, heterogeneity  # (no Mininet needed)
from hina.mininet.fidelity import Link, Sample, judge

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
    names = {11: "hina.emulator on root (pid 11)", 12: "hina worker on hw1 (pid 12)"}
    v = judge(samples([0.5] * 20, {11: 0.99, 12: 0.3}), [UP], names, 2)
    assert v["verdict"] == "CPU-bound: hina.emulator on root (pid 11) at 99% of a core", v
    assert v["cpu"]["hina worker on hw1 (pid 12)"] == pytest.approx(0.3)


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
    from hina.mininet import hina_net
except ImportError:  # Mininet (Debian package) absent: the `mininet` marker skips these tests
    hina_net = None


@pytest.mark.mininet
@pytest.mark.slow
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
    assert any(name.startswith("hina.emulator") for name in fid["cpu"]), fid["cpu"]
    assert any(name.startswith("hina worker on hw2") for name in fid["cpu"]), fid["cpu"]


# --- heterogeneity flags (mininet/heterogeneity.py) --------------------------------------------------------

def test_straggler_specs_give_seeded_delays():
    one = heterogeneity.Straggler.parse("rank3:+50%")
    assert one.delays(4, 1000.0, np.random.default_rng(0)).tolist() == [0.0, 0.0, 0.0, 0.5]
    assert heterogeneity.Straggler.parse("rank1:+200ms").delays(3, 0.0, None).tolist() == [0.0, 0.2, 0.0]
    a = heterogeneity.straggler_delays("lognormal:0.5", 8, 100.0, seed=7, rounds=3)
    assert a == heterogeneity.straggler_delays("lognormal:0.5", 8, 100.0, seed=7, rounds=3)  # fixed seed
    assert a[0] != a[1] and all(min(r) == 0.0 and max(r) > 0 for r in a)  # the quickest starts at once
    u = heterogeneity.straggler_delays("uniform:50%", 4, 1000.0, seed=1, rounds=2)
    assert all(0 <= d <= 0.5 for r in u for d in r)


@pytest.mark.parametrize("text,message", [
    ("rank3+50%", "straggler must be one of rankR:+P%, rankR:+Nms, lognormal:SIGMA or uniform:P%, got 'rank3+50%'"),
    ("lognormal:x", "straggler must be one of"),
])
def test_a_bad_straggler_is_named(text, message):
    with pytest.raises(ValueError, match=message.replace("+", r"\+").replace("(", r"\(")):
        heterogeneity.Straggler.parse(text)


def test_straggler_checks_rank_and_compute():
    with pytest.raises(ValueError, match="rank 4 is not one of the 4 workers"):
        heterogeneity.Straggler.parse("rank4:+10ms").check(4, 0.0)
    with pytest.raises(ValueError, match="give --compute MS > 0"):
        heterogeneity.Straggler.parse("rank1:+50%").check(4, 0.0)


def test_link_overrides_and_flows():
    assert heterogeneity.per_rank_links("1=50,3=20", "3=5", 4) == {1: {"bw": 50.0}, 3: {"bw": 20.0, "delay": "5.0ms"}}
    with pytest.raises(ValueError, match="host_bw 4=50: needs a rank below 4"):
        heterogeneity.per_rank_links("4=50", None, 4)
    with pytest.raises(ValueError, match="host_bw must be RANK=VALUE"):
        heterogeneity.per_rank_links("1:50", None, 4)
    assert heterogeneity.Flow.parse("1>0@50") == heterogeneity.Flow(1, 0, 50.0)
    with pytest.raises(ValueError, match="cross must be SRC>DST"):
        heterogeneity.Flow.parse("1>1")
    with pytest.raises(ValueError, match="ranks must be below the 2 workers"):
        heterogeneity.flows(["2>0"], 2)


@pytest.mark.mininet
@pytest.mark.slow
def test_a_straggler_makes_the_others_wait_and_cross_traffic_flows():
    """Rank 1 starts 1 s late: the round lasts at least that long, rank 0 waited most of it (less what a
    loaded machine took to wake it); an
    iperf3 flow 1>0 carried bytes through the emulator while the aggregation ran, and is judged."""
    cfg = hina_net.ExperimentConfig(workers=2, bw=100.0, length=200_000, density=1.0, modes=("dense",),
                                    ping=False, deadline=60.0, straggler="rank1:+1000ms", cross=("1>0@20",))
    results = hina_net.Experiment(cfg, log=lambda m: None).run()
    (run,) = results["runs"]
    assert run["exact"], run
    w0, w1 = run["workers"]
    assert (w0["delay"], w1["delay"]) == (0.0, 1.0)
    assert run["seconds"] >= 1.0 + w1["seconds"] - 1e-6 and w1["waited"] == 0.0
    assert w0["waited"] >= 0.5, run["workers"]  # rank 0 sat on its slots until rank 1 began
    (flow,) = results["cross"]
    assert flow["bytes"] > 1e6, flow  # iperf3's own count: > 0.4 s at 20 Mbit/s
    assert any(name.startswith("iperf3 on hw2") for name in run["fidelity"]["cpu"]), run["fidelity"]["cpu"]
