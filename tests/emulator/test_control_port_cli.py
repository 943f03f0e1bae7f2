"""A switch that runs for weeks, from its command lines: `hina switch`, `--lease`, `--token-file`, the refusals.

Standalone processes: `python -m hina.emulator` and `hina worker` / `hina switch`, as a user runs them.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import dense_fixed_sum, sparse_gradients

from hina import codec
from hina.control import ControlClient, JobConfig, Member
from hina.control.auth import ENV, REFUSED

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def env(**extra: str | None) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != ENV}
    out.update({k: v for k, v in extra.items() if v is not None})
    return out


def hina(*args: str, environ: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hina", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=environ or env())


class Emulator:
    """`python -m hina.emulator ARGS` in the background; its addresses, its stderr once stopped."""

    def __init__(self, *args: str, environ: dict | None = None, command: list[str] | None = None):
        self.proc = subprocess.Popen((command or [sys.executable, "-m", "hina.emulator"]) + list(args),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                     env=environ or env())
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the emulator did not start: {self.proc.stderr.read()}")
        ready = json.loads(line)
        self.control, self.data = tuple(ready["control"]), tuple(ready["data"])
        self.control_text, self.data_text = "{}:{}".format(*self.control), "{}:{}".format(*self.data)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@pytest.fixture
def emulator():
    started: list[Emulator] = []

    def start(*args: str, **kw) -> Emulator:
        started.append(Emulator(*args, **kw))
        return started[-1]

    yield start
    for e in started:
        e.stop()


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_hina_switch_lists_removes_resets_and_reports_as_a_table_and_as_json(emulator):
    sw = emulator("--job", "1:2:32:0:8", "--member", "1:0:127.0.0.1:7000", "--lease", "300")
    with ControlClient(sw.control) as ctl:
        ctl.join(JobConfig(2, 3, 64, 8, 16), Member(2, ("127.0.0.1", 7002)))
    table = hina("switch", "jobs", "--control", sw.control_text)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["JOB", "STATE", "MEMBERS", "SLOTS", "UPDATES", "RESULTS", "RESENDS", "DROPS", "LAST",
                                "FRAME", "LEASE", "ORIGIN", "OWNER"]
    assert lines[1].split()[:9] == ["1", "idle", "1", "of", "2", "0+8", "0", "0", "0"]
    assert lines[1].split()[-4:] == ["pinned", "command", "line", "-"]  # from the command line: no lease ends it
    assert re.match(r"2\s+idle\s+1 of 3\s+8\+16\s+0\s+0\s+0\s+0\s+never\s+5 min left\s+join\s+-$", lines[2]), lines[2]
    assert "job 1 members: 0=127.0.0.1:7000" in lines and "job 2 members: 2=127.0.0.1:7002" in lines

    listing = json.loads(hina("switch", "jobs", "--control", sw.control_text, "--json").stdout)
    assert listing["switch"] == sw.control_text
    jobs = {j["job_id"]: j for j in listing["jobs"]}
    assert set(jobs) == {1, 2} and jobs[2]["members"] == [{"worker_id": 2, "address": ["127.0.0.1", 7002]}]
    assert jobs[2]["counters"] == {"updates": 0, "results": 0, "resends": 0, "pending": 0, "drops": {}}
    assert {"state", "idle_s", "frame_s", "refused_s", "age_s", "origin", "pinned", "lease_left_s", "owner"} <= set(
        jobs[2])
    assert jobs[1]["lease_left_s"] is None and 290 < jobs[2]["lease_left_s"] <= 300

    status = hina("switch", "status", "--control", sw.control_text)
    assert status.returncode == 0 and status.stdout.startswith(f"switch at {sw.control_text}: up ")
    assert "1 pipe (1 alive), lease 5 min, token not required" in status.stdout
    assert "2 jobs: 1 (pinned), 2 (5 min left)" in status.stdout, status.stdout
    status = json.loads(hina("switch", "status", "--control", sw.control_text, "--json").stdout)["status"]
    assert status["pipes"] == 1 and status["lease_s"] == 300 and status["leases"]["1"] is None

    reset = hina("switch", "reset", "2", "--control", sw.control_text)
    assert reset.returncode == 0 and reset.stdout.strip() == f"emptied job 2's slots on {sw.control_text}"
    removed = hina("switch", "remove", "2", "--control", sw.control_text, "--json")
    assert removed.returncode == 0 and json.loads(removed.stdout) == {"switch": sw.control_text, "removed": 2}
    again = hina("switch", "remove", "2", "--control", sw.control_text)
    assert again.returncode == 1
    assert one_line(again.stderr) == ("hina switch: remove_job refused by the switch: remove_job: no job 2 on "
                                      "this switch")
    assert [j["job_id"] for j in json.loads(hina("switch", "jobs", "--control", sw.control_text,
                                                 "--json").stdout)["jobs"]] == [1]


def test_a_closed_control_port_is_refused_at_once_not_after_seven_seconds():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    start = time.monotonic()
    out = hina("switch", "jobs", "--control", f"127.0.0.1:{port}")
    assert out.returncode == 1
    assert one_line(out.stderr) == f"hina switch: jobs refused: nothing listens on the control port 127.0.0.1:{port}"
    assert time.monotonic() - start < 5  # the interpreter's start; the request itself fails at once


def test_a_token_from_the_environment_or_a_file_guards_every_change(emulator, tmp_path):
    token = tmp_path / "hina.token"
    token.write_text("0123456789abcdef0123456789abcdef\n")
    sw = emulator("--token-file", str(token))
    refused = hina("switch", "remove", "1", "--control", sw.control_text)
    assert refused.returncode == 1 and one_line(refused.stderr) == (
        f"hina switch: remove_job refused by the switch: {REFUSED}")
    assert hina("switch", "jobs", "--control", sw.control_text).returncode == 0  # reads stay open
    worker = hina("worker", "--switch", sw.data_text, "--control", sw.control_text, "--rank", "0", "--workers", "2",
                  "--length", "1000")
    assert worker.returncode == 2 and REFUSED in one_line(worker.stderr)
    with ControlClient(sw.control, token_file=token) as ctl:
        ctl.add_job(JobConfig(1, 2, 32, 0, 8))
    wrong = hina("switch", "remove", "1", "--control", sw.control_text, environ=env(**{ENV: "not-the-token"}))
    assert wrong.returncode == 1 and REFUSED in wrong.stderr
    by_env = hina("switch", "reset", "1", "--control", sw.control_text,
                  environ=env(**{ENV: "0123456789abcdef0123456789abcdef"}))
    assert by_env.returncode == 0, by_env.stderr
    by_file = hina("switch", "remove", "1", "--control", sw.control_text, "--token-file", str(token))
    assert by_file.returncode == 0, by_file.stderr
    status = json.loads(hina("switch", "status", "--control", sw.control_text, "--json").stdout)["status"]
    assert status["token"] is True and status["jobs"] == 0
    # the switch's token from the environment instead of a file
    sw2 = emulator(environ=env(**{ENV: "another"}))
    assert hina("switch", "remove", "1", "--control", sw2.control_text).returncode == 1
    missing = subprocess.run([sys.executable, "-m", "hina.emulator", "--token-file", str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=60, env=env())
    assert missing.returncode == 2 and "--token-file" in one_line(missing.stderr)


def test_a_refused_join_is_one_line_naming_the_command_that_fixes_it(emulator):
    sw = emulator()
    with ControlClient(sw.control) as ctl:
        ctl.join(JobConfig(1, 2, 2239, 0, 64), Member(0, ("127.0.0.1", 7000)))
    out = hina("worker", "--switch", sw.data_text, "--control", sw.control_text, "--rank", "0", "--workers", "3",
               "--length", "1000")
    assert out.returncode == 2
    assert one_line(out.stderr).endswith(
        "job 1 differs from the one on the switch: workers 2 on the switch, 3 asked "
        f"(remove it: hina switch remove 1 --control {sw.control_text})")
    fix = hina(*"switch remove 1 --control".split(), sw.control_text)
    assert fix.returncode == 0, fix.stderr


def write_gradients(tmp_path: Path, n: int, length: int, seed: int) -> tuple[list[np.ndarray], list[str]]:
    grads = sparse_gradients(np.random.default_rng(seed), n, length, 0.02)
    paths = []
    for w, g in enumerate(grads):
        paths.append(str(tmp_path / f"g{seed}-{w}.npy"))
        np.save(paths[-1], g)
    return grads, paths


def test_a_lease_frees_the_slots_of_workers_that_stopped_and_a_new_shape_then_runs_exact(emulator, tmp_path):
    """Today's complaint: a job re-run with another worker count was refused forever.  Now the first
    run's workers die without leaving the job (one never came, one is killed), the lease removes the job,
    and a run with three workers on the same job id and slots joins and sums exactly."""
    sw = emulator("--lease", "1.5")
    first = subprocess.Popen([sys.executable, "-m", "hina", "worker", "--switch", sw.data_text, "--control",
                              sw.control_text, "--rank", "0", "--workers", "2", "--length", "5000", "--words", "64",
                              "--deadline", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env())
    start = time.monotonic()
    while not json.loads(hina("switch", "jobs", "--control", sw.control_text, "--json").stdout)["jobs"]:
        assert time.monotonic() - start < 60, "the worker did not join"
        time.sleep(0.2)
    first.kill()  # it never leaves: only the lease frees its slots
    first.communicate()
    start = time.monotonic()
    while json.loads(hina("switch", "jobs", "--control", sw.control_text, "--json").stdout)["jobs"]:
        assert time.monotonic() - start < 10, "the lease did not end"
        time.sleep(0.3)
    grads, paths = write_gradients(tmp_path, 3, 30_011, 4)
    workers = [subprocess.Popen([sys.executable, "-m", "hina", "worker", "--switch", sw.data_text, "--control",
                                 sw.control_text, "--rank", str(w), "--workers", "3", "--input", paths[w], "--out",
                                 str(tmp_path / f"sum{w}.npy"), "--out-dtype", "float64", "--words", "64", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env())
               for w in range(3)]
    outs = [p.communicate(timeout=120) for p in workers]
    assert all(p.returncode == 0 for p in workers), [err for _, err in outs]
    shift = json.loads(outs[0][0])["rounds"][-1]["shift"]
    want = codec.dequantize(dense_fixed_sum(grads, shift), shift)
    for w in range(3):
        assert np.array_equal(np.load(tmp_path / f"sum{w}.npy"), want)
    err = sw.stop()
    removed = [line for line in err.splitlines() if "removed" in line]
    assert len(removed) == 1 and re.fullmatch(
        r"hina.emulator: job 1 removed: none of its members heard for \d+ s \(lease 1.5 s\); slots \[0, 64\) "
        r"are free", removed[0]), err


def free_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_workers(sw: Emulator, ports: list[int], ranks, length: int, deadline: float = 3.0) -> dict[int, tuple]:
    """`hina worker` for each of `ranks`, sending from its member port; (exit status, stderr) per rank."""
    procs = {w: subprocess.Popen([sys.executable, "-m", "hina", "worker", "--switch", sw.data_text, "--rank", str(w),
                                  "--workers", str(len(ports)), "--bind", f"127.0.0.1:{ports[w]}", "--words", "32",
                                  "--slots", "64", "--length", str(length), "--deadline", str(deadline)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env())
             for w in ranks}
    return {w: (p.wait(timeout=120), p.communicate()[1]) for w, p in procs.items()}


def refused(outcome: tuple) -> bool:
    """Told StaleSwitchState (exit status 2, the earlier run's state named), not timed out."""
    code, err = outcome
    return code == 2 and "earlier run" in err and "got no RESULT" not in err


def test_every_worker_of_a_run_on_a_switch_without_a_control_port_gets_the_refusal(emulator):
    """A job installed with --job/--member (no join to clear an earlier run's slots): two runs of all
    four workers, one with a worker missing, one more, then one with a new gradient length.  Every run
    after the first meets an earlier run's state; each of its workers must be told so (StaleSwitchState),
    none left to time out in the hello while the others were refused."""
    ports = free_ports(4)
    members = [arg for w, p in enumerate(ports) for arg in ("--member", f"1:{w}:127.0.0.1:{p}")]
    sw = emulator("--job", "1:4:32:0:64", *members)
    runs = [(range(4), 20_000), (range(4), 20_000), (range(3), 20_000), (range(4), 20_000), (range(4), 30_000)]
    outcomes = [run_workers(sw, ports, ranks, length) for ranks, length in runs]
    first = outcomes[0]
    assert all(code == 0 for code, _ in first.values()), first  # a fresh switch: exact
    for outcome in outcomes[1:]:  # a worker timed out in the hello while the others were refused?
        if any(refused(o) for o in outcome.values()) and len(outcome) == 4:
            hung = {w: err.strip().splitlines()[-1] for w, (code, err) in outcome.items()
                    if not refused((code, err)) and "phase 'hello'" in err}
            assert not hung, f"refused on some workers, timed out in the hello on {hung}"
    assert all(refused(o) for o in outcomes[-1].values()), outcomes[-1]


def test_hina_worker_runs_on_the_slots_the_switch_gives_and_answers_a_full_switch_as_told(emulator, tmp_path):
    """A job placed by the switch sums exactly and its workers' leaving frees its slots; beside a job that holds
    64 of the switch's 96 slots, a job asking for 64 is refused in one line, runs on the 32 left, or waits in
    line until its deadline, as its --when-full says."""
    from hina.control import Placement

    sw = emulator("--slot-space", "96", "--slot-policy", "request")
    grads, paths = write_gradients(tmp_path, 2, 20_000, 7)

    def job(*flags: str) -> list[tuple[int, str, str]]:
        procs = [subprocess.Popen([sys.executable, "-m", "hina", "worker", "--switch", sw.data_text, "--control",
                                   sw.control_text, "--rank", str(w), "--workers", "2", "--input", paths[w], "--out",
                                   str(tmp_path / f"sum{w}.npy"), "--out-dtype", "float64", "--job-id", "3", "--json",
                                   *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                  env=env()) for w in range(2)]
        return [(p.wait(120), *p.communicate()) for p in procs]

    def exact(outs) -> bool:
        shift = json.loads(outs[0][1])["rounds"][-1]["shift"]
        want = codec.dequantize(dense_fixed_sum(grads, shift), shift)
        return all(np.array_equal(np.load(tmp_path / f"sum{w}.npy"), want) for w in range(2))

    def jobs() -> list[int]:
        return [j["job_id"] for j in json.loads(hina("switch", "jobs", "--control", sw.control_text,
                                                     "--json").stdout)["jobs"]]

    alone = job()
    assert [rc for rc, _, _ in alone] == [0, 0], [err for _, _, err in alone]
    assert json.loads(alone[0][1])["job"] == {"job_id": 3, "slot_base": 0, "slots": 64} and exact(alone)
    assert jobs() == []  # both workers left: its slots are free
    with ControlClient(sw.control) as ctl:
        ctl.join(JobConfig(9, 2, 2239, 0, 64), Member(0, ("127.0.0.1", 7000)), place=Placement(64))
    refused = job()
    assert [rc for rc, _, _ in refused] == [2, 2]
    line = one_line(refused[0][2])
    assert line.startswith("hina worker: could not join job 3 at ") and "job 3 asks for 64 slots and the switch " \
        "has 32 of its 96 free, in runs of at most 32; held: job 9 [0, 64) (2 workers)" in line
    fewer = job("--when-full", "fewer", "--min-slots", "16")
    assert [rc for rc, _, _ in fewer] == [0, 0], [err for _, _, err in fewer]
    assert json.loads(fewer[0][1])["job"] == {"job_id": 3, "slot_base": 64, "slots": 32} and exact(fewer)
    assert "hina worker: job 3 runs on 32 of the 64 slots it asked for ([64, 96): the switch is full)" in fewer[0][2]
    waited = job("--when-full", "wait", "--deadline", "1")
    assert [rc for rc, _, _ in waited] == [2, 2]
    assert "hina worker: job 3 waits for slots on the switch: number 1 in line" in waited[0][2]
    assert "waited 1 s for slots and is still number 1 in line" in waited[0][2].strip().splitlines()[-1]
    assert jobs() == [9]
