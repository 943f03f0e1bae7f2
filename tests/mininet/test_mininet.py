"""Mininet experiments (root + Mininet): a 3-host star through the emulator, ping, exact under 2% loss."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

try:
    from hina.mininet import hina_net
except ImportError:  # Mininet (Debian package) absent: the `mininet` marker skips every test here
    hina_net = None

pytestmark = [pytest.mark.mininet, pytest.mark.slow]


RUN = "tmn"  # these tests' run id: their leftovers are looked for under it, another run's left alone


def leftovers(run: str = RUN) -> list[str]:
    """What run `run` left behind: its switch's links, its emulator, its host shells."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    procs = subprocess.run(["pgrep", "-af", f"hina.emulator.*{run}hsw-eth|mininet:{run}hw"], capture_output=True,
                           text=True)
    return [line for line in links.splitlines() if f"{run}hsw-eth" in line] + procs.stdout.splitlines()


def experiment(**kw):
    cfg = hina_net.ExperimentConfig(**{"workers": 3, "bw": 100.0, "length": 60_000, "density": 0.05,
                                       "loss": 2.0, "deadline": 30.0, **kw})
    return hina_net.Experiment(cfg, log=lambda m: None, run_id=RUN).run()


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


def test_the_emulator_with_pipes_spreads_the_slots_and_stays_exact_under_loss():
    """`--pipes 2`: each interface's frames are fanned out to two data-plane processes by slot; both
    pipes forwarded UPDATEs and completed slots, and every worker's sum is exact."""
    results = experiment(modes=("dense",), pipes=2, ping=False, mtu=1500)  # ~170 chunks per worker
    (run,) = results["runs"]
    assert run["exact"] and all(r["exact"] and not r["errors"] for r in run["rounds"]), run
    pipes = results["counters"]["pipes"]
    assert len(pipes) == 2, pipes
    assert all(p["frames"] > 200 and p["jobs"]["1"]["results"] > 50 for p in pipes), pipes
    assert not leftovers()


@pytest.mark.parametrize("switch", ["emulator", pytest.param("bmv2", marks=pytest.mark.bmv2)])
def test_two_hosts_with_two_ranks_each_every_rank_its_own_result(switch, request):
    """Four workers on two hosts, two ranks a host at UDP ports of their own: the switch knows each rank by its
    address and sends each its own replica; every mode exact under loss, on the emulator and on BMv2 (K = 32)."""
    if switch == "bmv2":
        request.getfixturevalue("p4_build")
    results = experiment(workers=4, ranks_per_host=2, switch=switch, modes=("auto", "dense"), ping=False,
                         mtu=9000 if switch == "emulator" else 172, length=40_000 if switch == "bmv2" else 60_000)
    assert [r["exact"] for r in results["runs"]] == [True, True], results["runs"]
    assert results["config"]["ranks_per_host"] == 2
    if switch == "emulator":
        jobs = results["counters"]["jobs"][1]
        assert jobs["results"] > 0 and not results["counters"]["drops"].get("unauthorized")
    assert not leftovers()


@pytest.mark.parametrize("flags,message", [
    (["--switch", "bmv2", "--pipes", "2"], "pipes must be 1 with BMv2 (one process; pipes are the emulator's), got 2"),
    (["--pipes", "0"], "argument --pipes: must be an integer from 1 to 64 (processes), got '0'"),
    (["--workers", "0"], "workers must be between 1 and 32, got 0"),
    (["--workers", "4", "--ranks-per-host", "3"], "ranks_per_host must divide the workers (4), got 3"),
    (["--loss", "150"], "loss must be a percentage within [0, 100], got 150.0"),
    (["--loss", "-1"], "loss must be a percentage within [0, 100], got -1.0"),
    (["--delay", "-1"], "delay must be a finite number of ms >= 0, got -1.0"),
    (["--bw", "-5"], "bw must be a positive number of Mbit/s (0 on the command line: unshaped), got -5.0"),
    (["--mtu", "50"], "mtu must be 68..65535 (Linux's least, IPv4's most), got 50"),
    (["--density", "2"], "density must be within [0, 1], got 2.0"),
    (["--rounds", "0"], "rounds must be at least 1, got 0"),
    (["--deadline", "0"], "deadline must be a positive number of seconds, got 0.0"),
    (["--workload", "nosuch"], "unknown workload 'nosuch': one of ncf, lstm, bert_base, vgg19, deeplight"),
    (["--length", "0"], "length must be a positive integer, got 0"),
    (["--slots", "0"], "job 1: slots [0, 0) must lie within [0, 32768)"),
    (["--workers", "x"], "argument --workers: invalid int value: 'x'"),
])
def test_a_bad_flag_is_one_line_naming_the_value_and_status_2_before_any_network(flags, message):
    out = subprocess.run([sys.executable, str(Path(hina_net.__file__).with_name("run.py")), *flags],
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr.splitlines()) == (2, [f"mininet/run.py: {message}"]), out.stderr
    assert not leftovers()


def test_switch_bench_runs_each_switch_and_says_why_bmv2_is_missing(tmp_path):
    """benchmarks/switch_bench.py: one star per switch (the emulator at P = 1 and 2, the XDP switch where it
    loads, BMv2 and its -O3 build where installed), rows exact, ratios against each only where it ran, and the
    switch's CPU per frame: the XDP switch's its programs' run time, which no process shows."""
    bench = Path(hina_net.__file__).resolve().parent.parent / "benchmarks" / "switch_bench.py"
    out = subprocess.run([sys.executable, str(bench), "--pipes", "1", "2", "--rounds", "2", "--modes", "dense",
                          "--length", "20000", "--mtu", "1500", "--loss", "0", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "switch_bench.json").read_text())
    rows = report["rows"]
    assert [(r["switch"], r["pipes"], r["mode"]) for r in rows if r["switch"] == "emulator"] == [
        ("emulator", 1, "dense"), ("emulator", 2, "dense")]
    assert all(r["exact"] and len(r["rounds"]) == 2 and r["best"] <= r["median"] for r in rows), rows
    for switch, build, key, missing, label in (("bmv2", "default", "bmv2", "bmv2_missing", "BMv2"),
                                               ("bmv2", "fast", "fast", "fast_bmv2_missing", "BMv2 -O3"),
                                               ("xdp", None, "xdp", "xdp_missing", "The XDP switch")):
        other = [r for r in rows if r["switch"] == switch and r["build"] == build]
        if report[missing]:
            assert not other and all(r[f"{key}_over_best"] is None for r in rows)
            assert f"{label} not measured: {report[missing]}" in (tmp_path / "switch_bench.md").read_text()
        else:
            assert len(other) == 1 and all(r[f"{key}_over_best"] == other[0]["best"] / r["best"]
                                           for r in rows if r["switch"] == "emulator")
    # every switch's CPU is accounted (a process's in clock ticks, the XDP programs' in nanoseconds)
    assert all(r["switch_us_per_frame"] is not None for r in rows if r["switch"] == "emulator"), rows
    assert all(r["switch_us_per_frame"] > 0 for r in rows if r["switch"] == "xdp"), rows
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


def test_standalone_workers_on_the_hosts_then_a_rerun_refused_until_reset(monkeypatch, tmp_path):
    """`hina worker --switch IP:PORT` on each Mininet host against the switch's data plane alone (as with
    BMv2): exact; the same workers again find the first run's slot copies and every one refuses at once
    (status 2, naming the earlier run); after the controller resets the job they are exact again."""
    import numpy as np

    from hina import codec
    from hina.host.synthetic import synthetic_gradient

    n, length, density = 3, 60_000, 0.05
    grads = [synthetic_gradient(length, density, seed=1, rank=r) for r in range(n)]
    want = codec.simulate_allreduce(grads).sum.astype(grads[0].dtype)  # `hina worker --out` writes the input's dtype

    def standalone(self, mode, topology):
        runs = []
        for attempt in ("first", "again", "after_reset"):
            if attempt == "after_reset":
                self.switch.target.reset_job(1)
            outs = [tmp_path / f"{attempt}{r}.npy" for r in range(n)]
            procs = [h.popen([sys.executable, "-m", "hina", "worker", "--switch", f"{hina_net.SWITCH_IP}:20033",
                              "--bind", "0.0.0.0:20033",  # the job names its members by port: 0x4E41
                              "--rank", str(r), "--workers", str(n), "--length", str(length), "--density",
                              str(density), "--seed", "1", "--deadline", "10", "--out", str(outs[r])],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for r, h in enumerate(self._hosts())]
            done = [(p.wait(60), p.stderr.read()) for p in procs]
            runs.append({"attempt": attempt, "status": [s for s, _ in done], "stderr": [e for _, e in done],
                         "sums": [np.load(o) if o.exists() else None for o in outs]})
        return runs

    monkeypatch.setattr(hina_net.Experiment, "_aggregate", standalone)
    first, again, after = experiment(loss=0.0, ping=False, length=length, density=density)["runs"][0]
    assert first["status"] == [0] * n, first["stderr"]
    assert all(np.array_equal(s, want) for s in first["sums"])
    assert again["status"] == [2] * n, again["stderr"]  # every worker told (StaleSwitchState), none timing out
    assert any("earlier run" in e for e in again["stderr"]), again["stderr"]
    assert all(s is None or np.array_equal(s, want) for s in again["sums"])  # never a wrong sum
    assert after["status"] == [0] * n, after["stderr"]
    assert all(np.array_equal(s, want) for s in after["sums"])
    assert not leftovers()


def test_two_experiments_at_once_on_one_machine_both_exact_each_cleaning_up_its_own(tmp_path):
    """Two `mininet/run.py` runs started together, a star and a leaf/spine tree: each names its switches, hosts
    and links with its own run id, neither's start or clean-up touches the other's, both are exact."""
    run_py = Path(hina_net.__file__).resolve().parent / "run.py"
    common = ["--mode", "both", "--bw", "100", "--length", "100000", "--density", "0.02", "--out", str(tmp_path)]
    procs = [subprocess.Popen([sys.executable, str(run_py), "--workers", "3", "--run-id", "tma", "--name", "a",
                               *common], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
             subprocess.Popen([sys.executable, str(run_py), "--topology", "leafspine:2,1,2", "--run-id", "tmb",
                               "--name", "b", *common], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    for name, run in (("a", "tma"), ("b", "tmb")):
        result = json.loads((tmp_path / f"{name}.json").read_text())
        assert result["run_id"] == run and all(r["exact"] for r in result["runs"])
        assert not leftovers(run)
