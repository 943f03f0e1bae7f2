"""The command lines: `hina demo`, `hina roundtrip`, `python -m hina.emulator`."""

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hina.control import ControlClient, JobConfig

pytestmark = pytest.mark.slow

DEMO_KEYS = {"exact", "mode", "encoding", "group", "workers", "length", "density", "bytes_per_worker",
             "dense_bytes_per_worker", "seconds", "first_seconds", "round_seconds", "goodput_gbps", "retransmissions",
             "switch_drops"}


ROOT = Path(__file__).resolve().parents[2]


def run(*args, timeout=300):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_demo_json_is_exact_with_loss():
    out = run("-m", "hina", "demo", "--workers", "3", "--length", "200000", "--density", "0.02",
              "--drop", "0.02", "--words", "256", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert DEMO_KEYS <= summary.keys()
    assert summary["exact"] is True and summary["workers"] == 3 and summary["mode"] == "auto"
    assert summary["encoding"] in ("aligned", "sketch", "blocks")  # 2% of 200,000: never dense
    assert summary["retransmissions"] > 0
    assert 0 < summary["bytes_per_worker"] < summary["dense_bytes_per_worker"]


def test_demo_dense_mode_prints_a_summary():
    out = run("-m", "hina", "demo", "--workers", "2", "--length", "50000", "--mode", "dense")
    assert out.returncode == 0, out.stderr
    assert "exact:            yes" in out.stdout and "ran dense" in out.stdout


def test_demo_repeated_rounds_report_the_steady_state():
    out = run("-m", "hina", "demo", "--workers", "2", "--length", "50000", "--rounds", "3", "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["exact"] is True and len(s["round_seconds"]) == 3
    assert s["first_seconds"] == s["round_seconds"][0] and s["seconds"] == min(s["round_seconds"][1:])


def test_demo_refuses_bad_parameters():
    out = run("-m", "hina", "demo", "--workers", "40")
    assert out.returncode == 2 and "workers must be between 1 and 32" in out.stderr
    out = run("-m", "hina", "demo", "--group", "3")
    assert out.returncode == 2 and "group must be 0 (chosen per tensor) or a power of two" in out.stderr


def test_roundtrip_on_npy_files(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for w in range(3):
        g = np.where(rng.random(200_000) < 0.01, rng.standard_normal(200_000), 0).astype(np.float32)
        paths.append(str(tmp_path / f"g{w}.npy"))
        np.save(paths[-1], g)
    out = run("-m", "hina", "roundtrip", *paths, "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["exact"] is True and s["workers"] == 3 and s["bytes_per_worker"]["total"] < 4 * 200_000 / 4
    assert s["encoding"] != "dense"
    dense = json.loads(run("-m", "hina", "roundtrip", *paths, "--json", "--mode", "dense").stdout)
    assert dense["exact"] is True and dense["encoding"] == "dense" and "dense" in dense["bytes_per_worker"]
    bad = run("-m", "hina", "roundtrip", paths[0], str(tmp_path / "missing.npy"))
    assert bad.returncode == 2 and "missing.npy" in bad.stderr


def test_switch_emulator_cli_with_flags_and_control():
    proc = subprocess.Popen([sys.executable, "-m", "hina.emulator", "--job", "4:2:32:0:8",
                             "--member", "4:0:127.0.0.1:6000", "--member", "4:1:127.0.0.1:6001", "--drop", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        with ControlClient(tuple(ready["control"])) as ctl:
            counters = ctl.counters()
            assert counters["jobs"] == {4: {"updates": 0, "results": 0, "resends": 0, "pending": 0, "drops": {}}}
            ctl.add_job(JobConfig(5, 1, 16, 8, 4))
            assert 5 in ctl.counters()["jobs"]
            try:
                ctl.add_job(JobConfig(6, 1, 16, 0, 4))
            except RuntimeError as exc:
                assert "overlap" in str(exc)
            else:
                raise AssertionError("overlapping slots were accepted")
            ctl.shutdown()
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_switch_emulator_cli_rejects_a_bad_member():
    out = run("-m", "hina.emulator", "--member", "4:0:127.0.0.1:6000")
    assert out.returncode == 2 and "names job 4" in out.stderr


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("args,message", [
    (["-m", "hina", "demo", "--drop", "1.5"], "drop must be within [0, 1], got 1.5"),
    (["-m", "hina", "demo", "--dup", "-0.1"], "dup must be within [0, 1], got -0.1"),
    (["-m", "hina", "demo", "--reorder", "2"], "reorder must be within [0, 1], got 2"),
    (["-m", "hina", "demo", "--deadline", "0"], "deadline must be a positive number of seconds, got 0"),
    (["-m", "hina", "demo", "--deadline", "-1"], "deadline must be a positive number of seconds, got -1"),
    (["-m", "hina", "demo", "--workload", "gpt5"], "invalid choice: 'gpt5'"),
    (["-m", "hina", "demo", "--pipe-rate", "-1"], "pipe_rate must be a finite number of packets per second >= 0"),
    (["-m", "hina", "demo", "--pipe-queue", "0"], "pipe_queue must be 1..16384 packets, got 0"),
    (["-m", "hina", "worker", "--switch", "127.0.0.1:9", "--workers", "2", "--rank", "-1"],
     "hina worker: --rank must be 0..1, got -1"),
    (["-m", "hina", "worker", "--switch", "127.0.0.1:9", "--workers", "2", "--rank", "0", "--rounds", "0"],
     "hina worker: --rounds must be at least 1, got 0"),
    (["-m", "hina", "worker", "--spec", "/nonexistent/spec.json", "--rank", "0"],
     "hina worker: --spec /nonexistent/spec.json: [Errno 2] No such file or directory"),
    (["-m", "hina.emulator", "--job", "1:40:2239:0:64"], "--job 1:40:2239:0:64: job 1: workers must be 1..32, got 40"),
    (["-m", "hina.emulator", "--job", "1:4:99999:0:64"], "words per packet must be 1..16372, got 99999"),
    (["-m", "hina.emulator", "--job", "1:4:x:0:64"], "WORDS must be a non-negative integer, got 'x'"),
    (["-m", "hina.emulator", "--job", "1:4:32:0:8", "--job", "1:2:32:8:8"], "--job 1 is given twice"),
    (["-m", "hina.emulator", "--job", "1:4:32:0:8", "--member", "1:0:nohost.invalid:7000"],
     "cannot resolve host 'nohost.invalid'"),
    (["-m", "hina.emulator", "--job", "1:4:32:0:8", "--member", "1:0:127.0.0.1:99999"],
     "port must be 0..65535, got '99999'"),
    (["-m", "hina.emulator", "--stats", "-1"], "must be a finite number >= 0, got -1"),
    (["-m", "hina.emulator", "--delay", "-5"], "argument --delay: must be a finite number >= 0, got -5"),
    (["-m", "hina.emulator", "--drop", "1.5"], "a probability must be within [0, 1], got 1.5"),
    (["-m", "hina.emulator", "--pipes", "65"],
     "argument --pipes: must be an integer from 1 to 64 (processes), got '65'"),
    (["-m", "hina.emulator", "--pipe-rate", "inf"], "argument --pipe-rate: must be a finite number, got inf"),
    (["-m", "hina.emulator", "--pipe-queue", "0"],
     "argument --pipe-queue: must be an integer from 1 to 16384 (packets), got '0'"),
    (["-m", "hina.emulator", "--xdp", "--raw", "1=lo", "--pipe-rate", "100"], "no slow pipe"),
    # the benchmarks: refused as the flag is read, before a run or a result file is touched
    (["benchmarks/soak.py", "--seconds", "-1"], "soak.py: argument --seconds: must be a finite number > 0, got -1"),
    (["benchmarks/soak.py", "--drop", "2"], "soak.py: argument --drop: a probability must be within [0, 1], got 2"),
    (["benchmarks/emulator_bench.py", "--pipes", "1", "0"], "argument --pipes: must be an integer from 1 to 64"),
    (["benchmarks/emulator_bench.py", "--densities", "0.1", "nan"],
     "argument --densities: must be a finite number, got nan"),
    (["benchmarks/codec_bench.py", "--workers", "0"], "argument --workers: must be an integer from 1 to 32, got '0'"),
    (["benchmarks/codec_bench.py", "--preset-scale", "3"], "argument --preset-scale: must be in (0, 1], got 3"),
    (["benchmarks/fuzz_bench.py", "--frames", "-5"], "fuzz_bench.py: argument --frames: must be at least 1, got '-5'"),
    (["benchmarks/reliability_bench.py", "--words", "x"], "argument --words: expected an integer, got 'x'"),
    (["benchmarks/loss_model.py", "--rounds", "0"], "loss_model.py: argument --rounds: must be at least 1, got '0'"),
    (["benchmarks/sender_bench.py", "--words", "32", "0"], "argument --words: must be an integer from 1 to 16372"),
    (["benchmarks/compare.py", "--workers", "0"], "compare.py: --workers must be at least 1, got 0"),
    (["benchmarks/switch_bench.py", "--mtu", "50"],
     "switch_bench.py: argument --mtu: must be an integer from 68 to 65535"),
])
def test_bad_input_is_one_line_with_status_2(args, message):
    results = sorted((p, p.stat().st_mtime_ns) for p in (ROOT / "benchmarks" / "results").iterdir())
    out = run(*args)
    assert results == sorted((p, p.stat().st_mtime_ns) for p in (ROOT / "benchmarks" / "results").iterdir())
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.parametrize("config,message", [
    ("[1, 2, 3]", "expected a JSON object"),
    ('{"jobs": [{"job_id": 1, "workers": 2, "slots": 4}]}', "job 1 lacks 'words'"),
    ('{"jobz": []}', "unknown key(s) 'jobz'"),
    ('{"jobs": [{"job_id": 1, "workers": 2, "words": 32, "slots": 4}, '
     '{"job_id": 1, "workers": 2, "words": 32, "slots": 4, "slot_base": 4}]}', "job 1 is defined twice"),
    ('{"jobs": [{"job_id": 1, "workers": "two", "words": 32, "slots": 4}]}', "workers must be an integer, got \"two\""),
    ('{"impair": {"dorp": 0.1}}', "'impair' must be an object with keys among"),
    ('{"impair": {"pipe_queue": 0}}', "pipe_queue must be 1..16384 packets, got 0"),
    ("{not json", "not JSON"),
])
def test_bad_config_files_are_refused_in_one_line(tmp_path, config, message):
    path = write(tmp_path, "cfg.json", config)
    out = run("-m", "hina.emulator", "--config", path)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert path in out.stderr


def test_roundtrip_names_a_file_that_is_not_an_array(tmp_path):
    good = str(tmp_path / "a.npy")
    np.save(good, np.ones(10, dtype=np.float32))
    text = write(tmp_path, "text.npy", "this is not numpy")
    out = run("-m", "hina", "roundtrip", good, text)
    assert out.returncode == 2 and f"{text}: not a .npy array" in out.stderr and "Traceback" not in out.stderr


def test_control_requests_with_bad_fields_get_clear_errors():
    from hina.control.client import ControlError
    from hina.emulator import Pipeline, UdpSwitch

    sw = UdpSwitch(Pipeline())
    sw.start_thread()
    try:
        with ControlClient(sw.control_address) as ctl:
            with pytest.raises(ControlError, match="remove_job: no job 99 on this switch"):
                ctl.remove_job(99)
            with pytest.raises(ControlError, match=r"add_job: 'job' must be a JSON object, got \[1, 2\]"):
                ctl.request("add_job", job=[1, 2])
            with pytest.raises(ControlError, match="reset_job: 'job_id' must be an integer"):
                ctl.request("reset_job", job_id="1")
            with pytest.raises(ControlError, match="remove_job: missing field 'job_id'"):
                ctl.request("remove_job")
            ctl.ping()  # still serving
    finally:
        sw.stop()
        sw.close()


def test_every_flag_has_help_with_its_default():
    import argparse

    from hina.cliargs import DefaultsFormatter
    from hina.emulator.__main__ import build_parser as switch_parser
    from hina.host.cli import build_parser

    hina = build_parser()
    subparsers = next(a for a in hina._actions if isinstance(a, argparse._SubParsersAction)).choices
    parsers = [subparsers["demo"], subparsers["roundtrip"], subparsers["worker"], switch_parser()]
    for parser in parsers:
        rendered = " ".join(parser.format_help().split())
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            assert action.help, (parser.prog, action.option_strings)
            if action.default in (None, False) or action.required:
                continue  # nothing to state: a switch, an optional input, or a required value
            if parser.formatter_class is not DefaultsFormatter:
                assert "default" in action.help, (parser.prog, action.option_strings)
        assert "default" in rendered
    demo_help = " ".join(subparsers["demo"].format_help().split())
    assert "lstm" in demo_help and "deeplight" in demo_help  # --workload lists the presets
    assert "(default: 4)" in demo_help  # --workers


def test_standalone_workers_against_a_running_emulator(tmp_path):
    """`hina worker --switch --control` joins a job on an emulator started with no jobs; the sums are exact,
    every rank's window on the fair-share rules (the default)."""
    from helpers import dense_fixed_sum, sparse_gradients

    from hina import codec

    grads = sparse_gradients(np.random.default_rng(40), 3, 30_011, 0.02)
    paths = []
    for w, g in enumerate(grads):
        paths.append(str(tmp_path / f"g{w}.npy"))
        np.save(paths[-1], g)
    proc = subprocess.Popen([sys.executable, "-m", "hina.emulator"], stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        data, control = (f"{h}:{p}" for h, p in (ready["data"], ready["control"]))
        workers = [subprocess.Popen([sys.executable, "-m", "hina", "worker", "--switch", data, "--control",
                                     control, "--rank", str(w), "--workers", "3", "--input", paths[w], "--out",
                                     str(tmp_path / f"sum{w}.npy"), "--words", "256", "--json"]
                                    + (["--out-dtype", "float64"] if w == 2 else []),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for w in range(3)]
        outs = [p.communicate(timeout=120) for p in workers]
        for p, (_stdout, stderr) in zip(workers, outs):
            assert p.returncode == 0, stderr
        shift = json.loads(outs[0][0])["rounds"][-1]["shift"]
        assert [json.loads(out)["window"]["settings"]["fair"] for out, _ in outs] == [True, True, True]
        want = codec.dequantize(dense_fixed_sum(grads, shift), shift)
        for w in range(3):  # the inputs' dtype by default (the exact sum rounded once), float64 on request
            got = np.load(tmp_path / f"sum{w}.npy")
            assert got.dtype == (np.float64 if w == 2 else grads[0].dtype), (w, got.dtype)
            assert np.array_equal(got, want if w == 2 else want.astype(grads[0].dtype))
        with ControlClient(tuple(ready["control"])) as ctl:
            counters = ctl.counters()
            assert counters["frames"] > 0  # the job went through the switch
            assert counters["jobs"] == {} and ctl.jobs() == []  # each worker left: the job and its slots are gone
            ctl.shutdown()
    finally:
        proc.kill()
        proc.wait()


def test_standalone_worker_refuses_a_job_of_another_shape(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "hina.emulator", "--job", "1:4:32:0:8"], stdout=subprocess.PIPE,
                            text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        out = run("-m", "hina", "worker", "--switch", "{}:{}".format(*ready["data"]), "--control",
                  "{}:{}".format(*ready["control"]), "--rank", "0", "--workers", "3", "--length", "1000")
        assert out.returncode == 2 and "job 1 differs from the one on the switch: workers 4 on the switch, 3 asked" \
            in out.stderr
    finally:
        proc.kill()
        proc.wait()


def test_demo_with_two_pipes_is_exact():
    out = run("-m", "hina", "demo", "--workers", "3", "--length", "50000", "--pipes", "2", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["exact"] is True


def test_demo_refuses_zero_pipes():
    out = run("-m", "hina", "demo", "--pipes", "0")
    assert out.returncode == 2 and out.stderr.strip() == "hina demo: pipes must be 1..64, got 0"


def _inputs(tmp_path) -> dict[str, str]:
    paths = {"npz2": tmp_path / "two.npz", "scalar": tmp_path / "scalar.npy", "objects": tmp_path / "objects.npy",
             "one": tmp_path / "one.npz"}
    np.savez(paths["npz2"], a=np.zeros(8, np.float32), b=np.zeros(8, np.float32))
    np.savez(paths["one"], g=np.zeros(8, np.float32))
    np.save(paths["scalar"], np.float32(3.0))
    np.save(paths["objects"], np.array([{}], dtype=object), allow_pickle=True)
    return {k: str(v) for k, v in paths.items()}


@pytest.mark.parametrize("case,message", [
    ("npz2", "an .npz archive of 2 arrays (a, b); a worker takes one gradient"),
    ("scalar", "a 0-d array (a scalar); a gradient has at least one dimension"),
    ("objects", "not a .npy array or .npz archive of arrays"),
    ("out", "--out {tmp}/missing/sum.npy: no folder {tmp}/missing"),
    ("host", "--switch nosuchhost.invalid:20033: cannot resolve 'nosuchhost.invalid'"),
])
def test_worker_input_errors_are_one_line_before_the_job(tmp_path, case, message):
    """Each refused before anything is sent: the bad --input, an --out folder that is missing (not after the
    job), a switch host that does not resolve (not blamed on the bind address)."""
    paths = _inputs(tmp_path)
    switch = "nosuchhost.invalid:20033" if case == "host" else "127.0.0.1:9"
    args = ["-m", "hina", "worker", "--switch", switch, "--rank", "0", "--workers", "2"]
    if case == "out":
        args += ["--out", str(tmp_path / "missing" / "sum.npy")]
    elif case != "host":
        args += ["--input", paths[case]]
    out = run(*args)
    assert out.returncode == 2, out.stderr
    assert message.format(tmp=tmp_path) in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_a_worker_sending_to_a_closed_port_says_so_long_before_its_deadline(tmp_path):
    """A wrong data port answers with ICMP port unreachable: the worker ends on that, not at its deadline
    (300 s here, past this test's limit)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    paths = _inputs(tmp_path)
    out = run("-m", "hina", "worker", "--switch", f"127.0.0.1:{port}", "--rank", "0", "--workers", "2",
              "--input", paths["one"], "--deadline", "300", timeout=120)
    assert out.returncode == 1, out.stderr
    assert "nothing listens where this worker sends" in out.stderr and "Traceback" not in out.stderr


def test_a_second_worker_with_a_held_rank_is_told_it_took_the_rank_over(tmp_path):
    from hina.control.config import Member
    from hina.host.job import JobSpec

    proc = subprocess.Popen([sys.executable, "-m", "hina.emulator"], stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        control = tuple(ready["control"])
        job = JobSpec(job_id=1).switch_config(2)
        with ControlClient(control) as ctl:
            ctl.join(job, Member(0, ("127.0.0.1", 40001)))
            assert ctl.replaced is None
            ctl.join(job, Member(0, ("127.0.0.1", 40001)))  # the same worker again: nothing taken over
            assert ctl.replaced is None
            ctl.join(job, Member(0, ("127.0.0.1", 40002)))
            assert ctl.replaced == Member(0, ("127.0.0.1", 40001))
        out = run("-m", "hina", "worker", "--switch", "{}:{}".format(*ready["data"]), "--control",
                  "{}:{}".format(*control), "--rank", "0", "--workers", "2", "--length", "1000", "--deadline", "1")
        assert "rank 0 of job 1 was held from 127.0.0.1:40002; this worker took it over" in out.stderr, out.stderr
    finally:
        proc.kill()
        proc.wait()


def _running_demo(workers: int) -> tuple[subprocess.Popen, int]:
    """`hina demo` in a session of its own, once its workers are prepared (rounds to run for hours): the
    process and its switch's control port."""
    proc = subprocess.Popen([sys.executable, "-m", "hina", "demo", "--workers", str(workers), "--length", "100000",
                             "--rounds", "100000"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    control = None
    for line in proc.stderr:  # up and running: the switch, then the rounds
        if line.startswith("switch emulator on"):
            control = int(line.split("(control ")[1].split(")")[0])
        if "workers prepared" in line:
            break
    assert control is not None
    return proc, control


def _nothing_left_of(proc: subprocess.Popen, control: int, within: float = 10.0) -> None:
    """No process of the demo's session is left (its switch, its workers, multiprocessing's helpers), and its
    switch's control port is closed."""
    import time

    deadline = time.monotonic() + within
    while True:
        left = subprocess.run(["pgrep", "-s", str(proc.pid)], capture_output=True, text=True).stdout.split()
        if not left:
            break
        assert time.monotonic() < deadline, "left running: " + "; ".join(
            subprocess.run(["ps", "-o", "pid=,args=", "-p", ",".join(left)], capture_output=True,
                           text=True).stdout.splitlines())
        time.sleep(0.2)
    with pytest.raises(Exception):  # noqa: B017 - the ControlClient says the port is closed
        with ControlClient(("127.0.0.1", control), timeout=0.5, retries=1) as ctl:
            ctl.ping()


def test_sigterm_ends_the_demo_at_once_with_its_switch_and_workers():
    """All four workers are stopped at once (each one in turn, 5 s apart, took 20 s), the demo says so, and it
    ends as a process killed by SIGTERM does."""
    import os
    import signal

    proc, control = _running_demo(4)
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        assert proc.returncode == -signal.SIGTERM
        err = proc.stderr.read()
        assert "hina demo: stopped by SIGTERM; its switch and 4 workers are stopped" in err, err
        assert "Traceback" not in err, err
        _nothing_left_of(proc, control)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_demos_switch_and_workers_die_with_it_when_it_is_killed():
    """SIGKILL (a scheduler's last word) runs no cleanup: the switch and the workers end because their parent
    did, and nothing of the demo is left running."""
    import os
    import signal

    proc, control = _running_demo(2)
    try:
        os.kill(proc.pid, signal.SIGKILL)  # the demo alone, not its process group
        proc.wait(timeout=15)
        _nothing_left_of(proc, control)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the demo's session, if the test failed with it running
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
