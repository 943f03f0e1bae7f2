"""Link rates a Mininet run can trust: --calibrate's per-machine cache (its key, the round trip), the rate a run
without --bw (compare.py without --bws) takes from it, and the warning lines where there is none or a given rate
is above it.  No Mininet needed, but for the last two tests (root + Mininet)."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FakeMachine

from hina import provenance
from hina.mininet import run

ROOT = Path(__file__).resolve().parents[2]


def found(highest, top=1000.0, workers=8) -> dict:
    """calibrate()'s result, as far as the cache reads it."""
    return {"highest_network_bound_mbps": highest, "config": {"bw": top, "workers": workers},
            "summary": f"calibrate: network-bound up to {highest} Mbit/s", "date": "2026-11-25T16:22:24+0000",
            "command": "mininet/run.py --calibrate --workers 8"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The cache in a fresh XDG_CACHE_HOME: what run.cache_path() finds for this test alone."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = run.cache_path()
    assert path == tmp_path / "xdg" / "hina" / "calibrate.json"
    return path


def test_the_key_is_this_machine_and_the_experiments_shape():
    key = run.rate_key(8)
    assert key["cpu"] == provenance.cpu_model() and key["cpus"] == os.cpu_count()
    assert key["kernel"] == platform.release() and key["cpu_quota"] == provenance.cpu_quota()
    assert key["calibration"] == run.CALIBRATE_VERSION  # a new way of calibrating is a new key
    assert (key["topology"], key["workers"], key["switch"], key["pipes"], key["mtu"]) == ("star", 8, "emulator", 1,
                                                                                           9000)
    assert key["oversubscription"] is None and key["leaves"] is None  # a star has neither
    others = [run.rate_key(4), run.rate_key(8, switch="bmv2"), run.rate_key(8, pipes=2), run.rate_key(8, mtu=1500),
              run.rate_key(8, "leafspine:2,1,4", 4.0), run.rate_key(8, "leafspine:2,1,4", 1.0),
              run.rate_key(8, "leafspine:2,1,4", 4.0, leaves="plain"), run.rate_key(8, ranks_per_host=2)]
    assert all(o != key for o in others) and len({json.dumps(o, sort_keys=True) for o in others}) == len(others)
    assert run.rate_key(8, oversubscription=4.0) == key  # a star's key ignores the trees' flags
    assert json.loads(json.dumps(key)) == key  # as the cache stores it
    assert run.key_text(run.rate_key(8, "leafspine:2,1,4", 4.0)) == "leafspine:2,1,4 (4:1), 8 workers, emulator"
    assert run.calibrate_command(run.rate_key(8, "leafspine:2,1,4", 4.0, switch="bmv2")) == (
        "sudo .venv/bin/python mininet/run.py --calibrate --topology leafspine:2,1,4 --oversubscription 4 "
        "--switch bmv2 --rounds 2")


def test_a_cpu_quota_is_another_machine(monkeypatch):
    """Under a quota the same experiment is another key, said to a reader and calibrated under that quota."""
    plain = run.rate_key(8)
    monkeypatch.setattr(provenance, "cpu_quota", lambda where=None: 1.0)
    quota = run.rate_key(8)
    assert quota != plain and {k for k in quota if quota[k] != plain[k]} == {"cpu_quota"}
    assert run.key_text(quota) == "star, 8 workers, emulator, under a CPU quota of 100%"
    assert run.calibrate_command(quota) == ("sudo .venv/bin/python tools/cpu_quota.py 100% -- .venv/bin/python "
                                            "mininet/run.py --calibrate --workers 8 --rounds 2")


@dataclasses.dataclass(frozen=True)
class Config:
    """What calibrate() reads of an experiment's configuration (hina_net.ExperimentConfig's fields)."""

    workers: int = 8
    switch: str = "emulator"
    bw: float = 400.0
    modes: tuple = ("auto",)
    length: int = 1
    density: float = 0.01
    workload: str | None = None
    ping: bool = True


@pytest.mark.parametrize(("holds", "tried", "highest", "not_at"), [
    (500.0, [400.0], 400.0, None),  # holds the top: one trial says so
    (300.0, [400.0, 100.0, 200.0, 282.8], 282.8, 400.0),  # then a quarter of it, then two bisection steps
    (50.0, [400.0, 100.0], None, 100.0)])  # not even a quarter of it: two trials
def test_the_quick_search_tries_the_top_first(holds, tried, highest, not_at):
    machine = FakeMachine(holds)
    found = run.calibrate(Config(), run.QUICK_STEPS, machine, log=lambda m: None, low=100.0, quick=True)
    assert [round(x, 1) for x in machine.tried] == tried
    assert (found["highest_network_bound_mbps"] and round(found["highest_network_bound_mbps"], 1)) == highest
    assert found["not_network_bound_mbps"] == not_at and found["quick"] is True
    assert found["searched_mbps"] == [100.0, 400.0]
    assert [t["network_bound"] for t in found["trials"]] == [x <= holds for x in machine.tried]


def test_the_full_search_tries_the_bottom_first_and_bisects():
    machine = FakeMachine(300.0)
    found = run.calibrate(Config(bw=1000.0), 2, machine, log=lambda m: None)
    assert [round(x, 1) for x in machine.tried] == [10.0, 1000.0, 100.0, 316.2]
    assert found["highest_network_bound_mbps"] == 100.0 and round(found["not_network_bound_mbps"], 1) == 316.2
    assert found["quick"] is False and found["searched_mbps"] == [run.CALIBRATE_LOW, 1000.0]


def test_the_cache_keeps_what_a_quick_search_knows(cache):
    found = run.calibrate(Config(), run.QUICK_STEPS, FakeMachine(300.0), log=lambda m: None, low=100.0, quick=True)
    found.update(load_before=[1.5, 1.0, 0.5])
    entry = run.record_calibration(found, run.rate_key(8))
    assert entry == {**entry, "quick": True, "searched_mbps": [100.0, 400.0], "not_network_bound_mbps": 400.0,
                     "faithful_mbps": 141.0, "load_before": [1.5, 1.0, 0.5]}
    assert run.cached(run.rate_key(8)) == entry
    none = run.calibrate(Config(), run.QUICK_STEPS, FakeMachine(50.0), log=lambda m: None, low=100.0, quick=True)
    run.record_calibration(none, run.rate_key(4))  # what a run is told names the bottom of the search made
    assert "found no network-bound rate down to 100 Mbit/s" in run.choose_rate(None, run.rate_key(4), [1.0]).lines[0]


def test_the_cache_round_trip_one_entry_per_key(cache):
    assert run.load_cache() == [] and run.cached(run.rate_key(8)) is None  # no file: nothing, no error
    star8, star4 = run.rate_key(8), run.rate_key(4)
    entry = run.record_calibration(found(205.4), star8, result=Path("x.json"))
    assert entry["faithful_mbps"] == 102.0 and entry["highest_network_bound_mbps"] == 205.4
    assert entry["searched_mbps"] == [run.CALIBRATE_LOW, 1000.0] and entry["result"] == str(Path("x.json").resolve())
    run.record_calibration(found(316.2), star4)
    run.record_calibration(found(177.8), star8)  # a new calibration of the same key replaces the old
    assert [e["faithful_mbps"] for e in run.load_cache()] == [158.0, 88.0]
    assert run.cached(star8)["highest_network_bound_mbps"] == 177.8
    assert run.cached(run.rate_key(8, switch="bmv2")) is None
    other = dict(star8, cpu="another CPU")  # another machine's calibration says nothing of this one
    assert run.cached(other) is None
    assert json.loads(cache.read_text())["version"] == 1
    cache.write_text("{not json")  # a broken cache is no cache
    assert run.load_cache() == [] and run.cached(star8) is None
    run.record_calibration(found(None), star8)  # not network-bound even at 10 Mbit/s: no faithful rate
    assert run.cached(star8)["faithful_mbps"] is None


def test_faithful_is_half_the_highest_network_bound_rate_in_whole_mbits():
    assert [run.faithful_rate(x) for x in (205.4, 316.2, 100.0, 10.0, 1.5, None)] == [102.0, 158.0, 50.0, 5.0, 1.0,
                                                                                        None]


def test_without_a_rate_or_a_calibration_the_default_with_one_warning_line_saying_how_to_calibrate(cache):
    rate = run.choose_rate(None, run.rate_key(8), [run.DEFAULT_BW])
    assert (rate.mbps, rate.how, rate.faithful) == ([1000.0], "default", None)
    (line,) = rate.lines
    assert line.startswith("warning: --bw not given and no calibration for star, 8 workers, emulator on this "
                           "machine: 1000 Mbit/s may be CPU-bound here")
    assert line.endswith("sudo .venv/bin/python mininet/run.py --calibrate --workers 8 --rounds 2")
    assert rate.as_json() == {"mbps": 1000.0, "how": "default", "why": rate.why, "faithful_mbps": None,
                              "key": run.rate_key(8)}


def test_without_a_rate_the_calibrated_one_is_taken_and_said(cache):
    run.record_calibration(found(205.4), run.rate_key(8))
    rate = run.choose_rate(None, run.rate_key(8), [run.DEFAULT_BW])
    assert (rate.mbps, rate.how, rate.faithful) == ([102.0], "calibrated", 102.0)
    assert "half the 205.4 Mbit/s at which dense aggregation stayed network-bound" in rate.why
    assert str(cache) in rate.why
    (line,) = rate.lines
    assert line.startswith("link rate 102 Mbit/s, calibrated for star, 8 workers, emulator: half the 205.4") and \
        line.endswith("--bw to choose another")
    # another experiment's key: still the default and its warning
    assert run.choose_rate(None, run.rate_key(4), [run.DEFAULT_BW]).how == "default"


def test_a_given_rate_is_used_warned_about_only_above_the_calibrated_one(cache):
    assert run.choose_rate([1000.0], run.rate_key(8), [run.DEFAULT_BW]).lines == []  # nothing calibrated: no word
    run.record_calibration(found(205.4), run.rate_key(8))
    fine = run.choose_rate([100.0], run.rate_key(8), [run.DEFAULT_BW])
    assert (fine.mbps, fine.how, fine.lines) == ([100.0], "explicit", [])
    above = run.choose_rate([1000.0], run.rate_key(8), [run.DEFAULT_BW])
    assert above.mbps == [1000.0] and above.how == "explicit"  # warned, never refused
    (line,) = above.lines
    assert line.startswith("warning: --bw 1000 Mbit/s is above 102 Mbit/s, the faithful rate calibrated on this "
                           "machine for star, 8 workers, emulator")
    (line,) = run.choose_rate([0.0], run.rate_key(8), [run.DEFAULT_BW]).lines  # unshaped: above any rate
    assert line.startswith("warning: --bw unshaped is above 102 Mbit/s")
    (line,) = run.choose_rate([100.0, 1000.0, 10000.0], run.rate_key(8), [1.0], flag="--bws").lines
    assert line.startswith("warning: --bws 1000 Mbit/s and 10000 Mbit/s is above 102 Mbit/s")


def test_a_calibration_that_found_no_faithful_rate_says_so(cache):
    run.record_calibration(found(None), run.rate_key(8))
    rate = run.choose_rate(None, run.rate_key(8), [run.DEFAULT_BW])
    assert rate.how == "default" and "found no network-bound rate down to 10 Mbit/s" in rate.lines[0]
    assert "CPU-bound even at 10 Mbit/s" in run.choose_rate([50.0], run.rate_key(8), [1.0]).lines[0]


def test_compare_takes_its_rates_from_the_same_cache(cache):
    from hina.benchmarks import compare

    args = compare.parse_args(["--mininet", "off"])
    assert (args.bws, args.link_rate.how) == (compare.DEFAULT_BWS, "default")
    assert args.link_rate.lines[0].startswith("warning: --bws not given and no calibration for star, 8 workers")
    run.record_calibration(found(205.4), run.rate_key(8))
    args = compare.parse_args([])
    assert (args.bws, args.link_rate.how) == ([102.0], "calibrated")
    assert args.link_rate.as_json(single=False)["mbps"] == [102.0]
    args = compare.parse_args(["--bws", "1000", "10000"])
    assert args.link_rate.how == "explicit" and args.link_rate.lines[0].startswith("warning: --bws 1000 Mbit/s and")
    assert compare.parse_args(["--workers", "4"]).link_rate.how == "default"  # 4 workers: not calibrated


def test_the_xdp_switch_has_rates_of_its_own_that_compare_finds_under_its_switch_and_mtu(cache):
    """A rate calibrated through the XDP switch (its key: the switch, MTU 3506) is the one compare.py --switch xdp
    takes; the emulator's runs keep theirs."""
    from hina.benchmarks import compare

    xdp = run.rate_key(8, switch="xdp", mtu=3506)
    assert run.calibrate_command(xdp) == f"{run.CALIBRATE_HOW} --workers 8 --switch xdp --mtu 3506 --rounds 2"
    run.record_calibration(found(1201.0), xdp)
    args = compare.parse_args(["--switch", "xdp"])
    assert (args.bws, args.link_rate.how, args.mtu) == ([600.0], "calibrated", 3506)
    assert compare.parse_args([]).link_rate.how == "default"  # the emulator's star: not calibrated


def _mininet_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    try:
        from hina.mininet import hina_net
    except ImportError as exc:
        return str(exc)
    return hina_net.missing_requirements()


def _run_py(tmp_path, *flags) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    return subprocess.run([sys.executable, str(ROOT / "mininet" / "run.py"), *flags, "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.mininet
@pytest.mark.slow
def test_calibrate_records_the_cache_and_a_run_without_bw_takes_its_rate_and_records_why(tmp_path):
    """--calibrate (a short search) writes the cache and shows a plain line per trial (stderr is a pipe); a run
    of the same experiment without --bw runs at the faithful rate and its JSON says so; a bad flag is still one
    line before any warning."""
    if _mininet_missing():
        pytest.skip(_mininet_missing())
    out = _run_py(tmp_path, "--calibrate", "--workers", "2", "--bw", "20", "--calibrate-steps", "1", "--name", "cal")
    assert out.returncode == 0, out.stderr[-2000:]
    trials = [line for line in out.stderr.splitlines() if line.startswith("calibrate: ")]
    assert trials and all(line.endswith("left]") and "/3; " in line for line in trials), out.stderr
    assert out.stderr.splitlines()[-1].startswith("[") and "calibrate: finished in" in out.stderr
    result = json.loads((tmp_path / "cal.json").read_text())
    assert result["link_rate"]["how"] == "explicit" and result["link_rate"]["mbps"] == 20.0
    cache = json.loads((tmp_path / "xdg" / "hina" / "calibrate.json").read_text())
    (entry,) = cache["entries"]
    assert entry["key"] == run.rate_key(2) and entry["highest_network_bound_mbps"] == result[
        "highest_network_bound_mbps"]
    if entry["faithful_mbps"] is None:
        pytest.skip("this machine was not network-bound even at 10 Mbit/s")
    assert f"recorded in {tmp_path / 'xdg' / 'hina' / 'calibrate.json'}" in out.stdout
    out = _run_py(tmp_path, "--workers", "2", "--mode", "dense", "--length", "20000", "--name", "r")
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"link rate {entry['faithful_mbps']:g} Mbit/s, calibrated for star, 2 workers" in out.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["link_rate"]["how"] == "calibrated" and result["link_rate"]["mbps"] == entry["faithful_mbps"]
    assert result["config"]["bw"] == entry["faithful_mbps"]
    out = _run_py(tmp_path, "--workers", "0")
    assert (out.returncode, out.stderr.splitlines()) == (2, ["mininet/run.py: workers must be between 1 and 32, "
                                                             "got 0"])
