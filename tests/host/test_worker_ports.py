"""`hina worker` pointed at the wrong port, or at a rank another worker holds, finds out long before its deadline
(300 s here, past every test's limit) and says which port or which worker, in one line, exit status 2."""

import contextlib
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hina.control import ControlClient

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def emulator():
    """An emulator with no jobs: (its data port, its control port) as HOST:PORT."""
    proc = subprocess.Popen([sys.executable, "-m", "hina.emulator", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        ready = json.loads(proc.stdout.readline())
        yield "{}:{}".format(*ready["data"]), "{}:{}".format(*ready["control"])
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def silent_port():
    """A UDP port where a socket is bound and never answers (no ICMP either): HOST:PORT."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{s.getsockname()[1]}"


def worker(*args: str, rank: int = 0, deadline: float = 300, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hina", "worker", "--rank", str(rank), "--workers", "2",
                           "--length", "1000", "--deadline", str(deadline), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def one_line(err: str) -> str:
    lines = [x for x in err.strip().splitlines() if x.startswith("hina worker:")]
    assert "Traceback" not in err and lines, err
    return lines[-1]


@pytest.mark.parametrize("with_control", [True, False])
def test_a_worker_sent_to_the_control_port_says_so(emulator, with_control):
    _, control = emulator
    out = worker("--switch", control, *(["--control", control] if with_control else []))
    assert out.returncode == 2, out.stderr
    assert one_line(out.stderr).startswith(f"hina worker: --switch {control}: ")
    assert "answered in JSON: that is a control port, not the switch's data port" in out.stderr, out.stderr


def test_swapped_ports_are_named_swapped(emulator):
    data, control = emulator
    out = worker("--switch", control, "--control", data)
    assert out.returncode == 2, out.stderr
    line = one_line(out.stderr)
    assert f"no reply from the switch's control port {data}" in line, line
    assert f"--switch {control} answers control requests: are --switch and --control swapped?" in line, line


def test_a_data_port_the_switch_never_hears_from_is_named_early(emulator, silent_port):
    _, control = emulator
    started = time.monotonic()
    out = worker("--switch", silent_port, "--control", control)
    assert out.returncode == 2, out.stderr
    line = one_line(out.stderr)
    assert f"--switch {silent_port}: the switch at --control {control} has counted no frame of job 1" in line, line
    assert "is not that switch's data port" in line, line
    assert time.monotonic() - started < 100  # not the 300 s deadline


def test_a_port_that_never_answers_is_named_while_waiting_and_at_the_deadline(silent_port):
    out = worker("--switch", silent_port, deadline=4)
    assert out.returncode == 1, out.stderr
    assert re.search(rf"hina worker: nothing from {silent_port} in \d+\.\d s yet: waiting for the other workers of "
                     rf"job 1 \(up to --deadline 4 s\)", out.stderr), out.stderr
    line = one_line(out.stderr)
    assert line.startswith(f"hina worker: --switch {silent_port}: job 1, worker 0: phase 'hello'"), line
    assert line.endswith("; not one datagram came back in 4 s: is it the switch's data port?"), line


def test_a_worker_whose_rank_another_takes_over_is_told_at_once(emulator, tmp_path):
    """A and B are both given rank 0: B's join takes the rank over (a restarted worker's must), A finds out
    from the control port while it waits and ends in one line naming B; B and rank 1 then sum exactly."""
    data, control = emulator
    cmd = [sys.executable, "-m", "hina", "worker", "--switch", data, "--control", control, "--workers", "2",
           "--length", "1000", "--deadline", "300", "--json"]
    a = subprocess.Popen(cmd + ["--rank", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    procs = [a]
    try:
        for line in a.stderr:  # A joined and waits for rank 1
            if "waits for its other workers" in line:
                break
        b = subprocess.Popen(cmd + ["--rank", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT)
        procs.append(b)
        a.wait(timeout=100)
        err = a.stderr.read()
        assert a.returncode == 2, err
        with ControlClient(tuple_of(control)) as ctl:
            holder = next(m for m in ctl.jobs()[0]["members"] if m["worker_id"] == 0)["address"]
        line = one_line(err)
        assert line.startswith(f"hina worker: rank 0 of job 1 is held from {holder[0]}:{holder[1]} now: another "
                               f"worker joined with --rank 0 after this one and took it over"), line
        c = subprocess.Popen(cmd + ["--rank", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT)
        procs.append(c)
        (_, b_err), (_, c_err) = (p.communicate(timeout=100) for p in (b, c))
        assert b.returncode == 0 and c.returncode == 0, b_err + c_err  # A left B's rank alone
        assert "this worker took it over" in b_err, b_err
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait()


def tuple_of(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)
