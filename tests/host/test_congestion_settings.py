"""The congestion room's one settings object: each flag of `hina worker`, `hina demo` and mininet/run.py
reaching the settings the sender runs with, the spec that carries them to an experiment's workers, and bad
settings refused in one line."""

import dataclasses
import json
import math
import subprocess
import sys

import pytest

from hina.host import cli, congestion_settings
from hina.host.congestion_settings import CONTEST, CONTEST_FAIR, CongestionSettings, from_flags

# each flag, what it sets: (argv, field, value)
FLAGS = [
    (["--pace", "100"], "pace_mbps", 100.0),
    (["--pace-gain", "1.5"], "pace_gain", 1.5),
    (["--initial-window", "4"], "initial", 4),
    (["--min-window", "3"], "minimum", 3),
    (["--queue-delay", "2.5"], "queue_delay", 2.5e-3),
    (["--delay-rule"], "fair", False),
]


def test_the_table_above_holds_every_congestion_flag():
    """A flag added to the settings' own table is tried by the tests below only once it is in FLAGS."""
    declared = {flag for flag, *_ in congestion_settings._FLAGS} | {"--delay-rule"}
    assert {argv[0] for argv, _, _ in FLAGS} == declared


@pytest.mark.parametrize("argv,name,value", FLAGS)
@pytest.mark.parametrize("command", [["worker", "--rank", "0"], ["demo"]])
def test_each_flag_sets_its_setting_and_no_other(command, argv, name, value):
    args = cli.build_parser().parse_args(command + argv)
    assert from_flags(args) == dataclasses.replace(CongestionSettings(), **{name: value})


def test_without_flags_the_settings_are_the_defaults_and_a_spec_s_settings_stand_where_no_flag_is_given():
    plain = cli.build_parser().parse_args(["worker", "--rank", "0"])
    assert from_flags(plain) == CongestionSettings()
    spec = CongestionSettings(fair=False, pace_mbps=50.0)  # what mininet/hina_net.py's spec says
    flagged = cli.build_parser().parse_args(["worker", "--rank", "0", "--pace", "80"])
    assert from_flags(plain, spec) == spec
    assert from_flags(flagged, spec) == CongestionSettings(fair=False, pace_mbps=80.0)  # the flag wins


@pytest.mark.parametrize("argv,name,value", FLAGS)
def test_each_flag_reaches_the_worker_s_window_and_pacer(argv, name, value):
    """`hina worker --pace 100` gives a window whose pacer holds that rate, and so on for each flag: the
    settings the worker's window runs with, in the record the compiled sender reads."""
    from hina.host.agent import Worker
    from hina.host.job import JobSpec

    args = cli.build_parser().parse_args(["worker", "--rank", "0", *argv])
    worker = Worker(object(), JobSpec(slots=64), 0, congestion=from_flags(args))
    window = worker.window
    seen = {"pace_mbps": window.pacer.rate_mbps, "pace_gain": window.pacer.gain, "initial": window.chunks,
            "minimum": window.minimum, "queue_delay": window.queue_delay, "fair": window.fair}
    assert seen[name] == value
    assert window.contest == (CONTEST_FAIR if window.fair else CONTEST)
    assert worker.rtt.state["rto_srtt"][0] == (0.5 if window.fair else 0.0)  # the fair-share estimator with them


def test_the_demo_s_workers_take_the_demo_s_flags():
    args = cli.build_parser().parse_args(["demo", "--pace", "300", "--delay-rule"])
    assert cli.demo_config(args).congestion == CongestionSettings(fair=False, pace_mbps=300.0)


@pytest.mark.parametrize("argv,message", [
    (["--pace", "0"], "argument --pace: must be a finite number > 0, got 0"),
    (["--pace", "fast"], "argument --pace: expected a number, got 'fast'"),
    (["--initial-window", "0"], "argument --initial-window: must be at least 1 (chunks), got '0'"),
    (["--queue-delay", "-1"], "argument --queue-delay: must be a finite number >= 0, got -1"),
])
def test_a_bad_flag_is_one_line_with_status_2(argv, message):
    out = subprocess.run([sys.executable, "-m", "hina", "worker", "--rank", "0", *argv], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.strip() == f"hina worker: {message}"


@pytest.mark.parametrize("change,message", [
    ({"pace_mbps": -5.0}, "congestion setting pace_mbps must be a positive number of Mbit/s, or None (unpaced), "
                          "got -5.0"),
    ({"pace_mbps": math.inf}, "congestion setting pace_mbps must be"),
    ({"initial": 0}, "congestion setting initial must be a whole number of chunks >= 1, got 0"),
    ({"minimum": 2.5}, "congestion setting minimum must be a whole number of chunks >= 1, got 2.5"),
    ({"fair": "yes"}, "congestion setting fair must be true or false, got 'yes'"),
    ({"contest": 0.0}, "congestion setting contest must be a positive number of windows"),
    ({"pace_gain": 0.0}, "congestion setting pace_gain must be a positive, finite number, got 0.0"),
    ({"queue_delay": math.nan}, "congestion setting queue_delay must be a finite number of seconds >= 0"),
])
def test_a_bad_setting_is_refused_naming_it(change, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        CongestionSettings(**change)


def test_settings_round_trip_through_a_spec_s_json():
    settings = CongestionSettings(fair=False, initial=4, contest=math.inf, pace_mbps=250.0, pace_quantum=1e-3)
    assert CongestionSettings.from_config(json.loads(json.dumps(settings.to_config()))) == settings
    with pytest.raises(ValueError, match="^unknown congestion settings 'pace'$"):
        CongestionSettings.from_config({"pace": 100})


def test_a_spec_s_bad_congestion_settings_are_refused_before_anything_starts(tmp_path):
    """`hina worker --spec` reads each host's settings from the spec (mininet/hina_net.py writes them): a
    setting it does not know is one line naming it, exit 2, before a transport opens."""
    spec = {"params": {"length": 100, "workers": 1}, "job": {"job_id": 1}, "density": 0.1, "seed": 0,
            "switch": {"ip": "10.0.0.100", "mac": "00:00:00:00:00:64"},
            "hosts": [{"ip": "10.0.0.1", "congestion": {"pace": 100}}]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    out = subprocess.run([sys.executable, "-m", "hina", "worker", "--spec", str(path), "--rank", "0"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == f"hina worker: --spec {path}: unknown congestion settings 'pace'"


def test_an_experiment_paces_each_rank_at_its_own_link_and_keeps_the_rest_of_its_settings():
    pytest.importorskip("mininet.net", reason="Debian's mininet (apt-get install mininet)")
    from hina.mininet.hina_net import ExperimentConfig

    cfg = ExperimentConfig(workers=4, bw=100.0, host_bw="1=40", congestion=CongestionSettings(fair=False))
    assert [cfg.congestion_for(r) for r in range(3)] == [
        CongestionSettings(fair=False, pace_mbps=100.0), CongestionSettings(fair=False, pace_mbps=40.0),
        CongestionSettings(fair=False, pace_mbps=100.0)]
    assert dataclasses.replace(cfg, pace=False).congestion_for(1) == CongestionSettings(fair=False)
    assert dataclasses.replace(cfg, bw=None).congestion_for(1).pace_mbps is None  # unshaped links: unpaced
    given = dataclasses.replace(cfg, congestion=CongestionSettings(pace_mbps=30.0))
    assert given.congestion_for(1).pace_mbps == 30.0  # a rate of the experiment's own is every rank's


def test_mininet_run_s_flags_set_the_experiment_s_congestion_settings():
    pytest.importorskip("mininet.net", reason="Debian's mininet (apt-get install mininet)")
    from hina.mininet import run

    args = run.build_parser().parse_args(["--bw", "100", "--delay-rule", "--initial-window", "8"])
    cfg, _ = run.configure(args)
    assert cfg.congestion == CongestionSettings(fair=False, initial=8) and cfg.pace
    assert cfg.congestion_for(0).pace_mbps == 100.0  # without --pace: each worker at its own link's rate
    cfg, _ = run.configure(run.build_parser().parse_args(["--bw", "100", "--pace", "60"]))
    assert cfg.congestion_for(0).pace_mbps == 60.0  # not --pace-gain, which --pace would abbreviate
    with pytest.raises(ValueError, match="^pace is off but the congestion settings pace at 60 Mbit/s: choose one"):
        run.configure(run.build_parser().parse_args(["--bw", "100", "--pace", "60", "--no-pace"]))


@pytest.mark.slow
def test_a_standalone_worker_runs_with_the_settings_its_flags_give(tmp_path):
    """`hina worker --switch --control` with every congestion flag against the emulator: the sum is exact
    and its summary's window says the settings it ran with."""
    import numpy as np
    from helpers import dense_fixed_sum, sparse_gradients

    from hina import codec
    from hina.control import ControlClient

    (grad,) = sparse_gradients(np.random.default_rng(5), 1, 20_000, 0.05)
    np.save(tmp_path / "g.npy", grad)
    proc = subprocess.Popen([sys.executable, "-m", "hina.emulator"], stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        data, control = (f"{h}:{p}" for h, p in (ready["data"], ready["control"]))
        flags = [f for argv, _, _ in FLAGS for f in argv]
        out = subprocess.run([sys.executable, "-m", "hina", "worker", "--switch", data, "--control", control,
                              "--rank", "0", "--workers", "1", "--input", str(tmp_path / "g.npy"), "--out",
                              str(tmp_path / "sum.npy"), "--out-dtype", "float64", "--json", *flags],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        summary = json.loads(out.stdout)
        want = CongestionSettings(**{name: value for _, name, value in FLAGS})
        assert summary["window"]["settings"] == want.to_config()
        shift = summary["rounds"][-1]["shift"]
        assert np.array_equal(np.load(tmp_path / "sum.npy"), codec.dequantize(dense_fixed_sum([grad], shift), shift))
        with ControlClient(tuple(ready["control"])) as ctl:
            ctl.shutdown()
    finally:
        proc.kill()
        proc.wait()
