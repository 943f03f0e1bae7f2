"""Kernels are compiled once per machine: one process compiles a group while the others wait, a stamp
says what they were compiled from, a process after `hina compile` compiles nothing, and a stale cache is
cleared when a module whose constants the kernels compile in changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hina import kernels

# A process that reports how many of hina's kernels numba compiled in it (a cache load is not a compile).
COUNTING = textwrap.dedent("""
    import json, sys
    from numba.core import event

    compiled = []

    class Count(event.Listener):
        def on_start(self, ev):
            if ev.data["dispatcher"].py_func.__module__.startswith("hina."):
                compiled.append(ev.data["dispatcher"].py_func.__qualname__)
        def on_end(self, ev):
            pass

    event.register("numba:compile", Count())
    exec(sys.argv[1])
    print(json.dumps(compiled))
""")


def counting(code: str, cache: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    return subprocess.Popen([sys.executable, "-c", COUNTING, code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def compiled_in(proc: subprocess.Popen) -> tuple[list[str], str]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def test_a_second_process_waits_for_the_first_ones_compile_and_compiles_nothing(tmp_path):
    code = "import hina.codec.bitmap"
    first = counting(code, tmp_path)
    deadline = time.monotonic() + 60
    while not any("process" in p.read_text() for p in tmp_path.rglob("hina-codec-bitmap.lock")):
        assert first.poll() is None and time.monotonic() < deadline, "the first process never took the lock"
        time.sleep(0.01)
    second = counting(code, tmp_path)  # starts while the first compiles
    (compiled_first, err1), (compiled_second, err2) = compiled_in(first), compiled_in(second)
    assert compiled_first and "compiling the codec's bitmap kernels" in err1
    assert compiled_second == [], compiled_second  # it loaded what the first compiled
    assert f"waiting for process {first.pid}, which is compiling the codec's bitmap kernels" in err2
    assert any(tmp_path.rglob("hina-codec-bitmap.*.ready"))


@pytest.mark.slow
def test_after_hina_compile_the_demo_path_compiles_nothing(tmp_path):
    """Every kernel the switch and the workers run (every mode, loss recovery, the batched and the
    per-frame paths) is compiled by `hina compile`: a fresh process only loads them."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-m", "hina", "compile"], env=env, check=True, capture_output=True, timeout=600)
    code = textwrap.dedent("""
        import threading
        import numpy as np, hina
        from hina.host.agent import load_kernels
        load_kernels()
        rng = np.random.default_rng(0)
        n = 1 << 16
        grads = [np.where(rng.random(n) < 0.01, rng.standard_normal(n), 0).astype(dt)
                 for dt in (np.float32, np.float32)]
        switch = hina.UdpSwitch(hina.Pipeline(), impair=hina.ImpairmentConfig(drop=0.02, dup=0.01, seed=1))
        switch.start_thread()
        for job_id, mode in enumerate(("dense", "blocks", "aligned", "sketch", "auto"), start=1):
            job = hina.JobSpec(job_id=job_id, slot_base=64 * job_id)
            ports = [hina.UdpTransport(switch.data_address) for _ in grads]
            switch.pipeline.add_job(job.switch_config(2, [hina.Member(w, p.address) for w, p in enumerate(ports)]))
            params = hina.CodecParams(length=n, workers=2, mode=mode)
            sums = [None, None]
            def work(w):
                sums[w] = hina.Worker(ports[w], job, w).aggregate(params, grads[w])
            threads = [threading.Thread(target=work, args=(w,)) for w in range(2)]
            [t.start() for t in threads]; [t.join() for t in threads]
            assert sums[0] is not None and np.array_equal(sums[0].fixed, sums[1].fixed), mode
            [p.close() for p in ports]
        switch.stop(); switch.close()
        for dt in (np.float64, np.int32):  # the codec's other dtypes
            hina.simulate_allreduce([g.astype(dt) * (1000 if dt == np.int32 else 1) for g in grads])
    """)
    compiled, err = compiled_in(counting(code, tmp_path))
    assert compiled == [], f"compiled at run time, after hina compile: {compiled}"


def test_a_stamp_for_other_sources_clears_the_groups_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    where = kernels.stamp("codec-bitmap").parent
    where.mkdir(parents=True)
    stale = [where / "bitmap._scan-54.py311.nbi", where / "bitmap._scan-54.py311.1.nbc",
             where / "hina-codec-bitmap.0123456789abcdef.ready"]
    other = where / "values._gather-91.py311.nbi"  # another group's: kept
    for path in [*stale, other]:
        path.write_text("x")
    h = kernels.hold("codec-bitmap", quiet=True)
    assert h.compiling
    assert not any(p.exists() for p in stale) and other.exists()
    h.finish()
    facts = json.loads(kernels.stamp("codec-bitmap").read_text())
    assert facts["bitmap.py"] == kernels.fingerprint("codec-bitmap")["bitmap.py"] and facts["numba"]
    again = kernels.hold("codec-bitmap", quiet=True)  # stamped: load, no lock taken
    assert not again.compiling
    again.finish()


def test_the_fingerprint_covers_the_constants_the_kernels_compile_in():
    facts = kernels.fingerprint("sender")
    assert {"sendplane.py", "wire/headers.py", "numba", "python", "cpu"} <= set(facts)
    assert "codec/bitmap.py" in kernels.fingerprint("codec-values")  # values inlines bitmap's helpers


def test_a_failed_compile_writes_no_stamp(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernels, "_ready", set())  # as in a fresh process

    def broken():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        kernels.ensure("switch", broken, quiet=True)
    assert not kernels.stamp("switch").exists()
    assert "switch" not in kernels._ready


def test_a_second_thread_waits_for_the_first_ones_compile(monkeypatch):
    """The emulator and its workers in one process (docs/worker.md's example): two workers made at once in two
    threads, on a machine whose sender kernels are not compiled.  The second must not return from `warm` (and
    start its limits) while the first still compiles them, and the group is ensured once."""
    from hina.host import window

    compiles, done = [], []

    def ensure(group, load, build=None, **kw):  # a compile that takes a while, and a transfer inside it
        compiles.append(group)
        time.sleep(0.3)
        window.warm()  # `_drive`'s own transfer warms again: re-entered, not waited on
        done.append(time.monotonic())

    monkeypatch.setattr(window, "_warm", False)  # as in a fresh process
    monkeypatch.setattr(window.kernels, "ensure", ensure)
    returned = []

    def worker():
        window.warm()
        returned.append(time.monotonic())

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)  # the second starts while the first compiles
    for thread in threads:
        thread.join(5)
    assert compiles == ["sender"] and len(returned) == 2, (compiles, returned)
    assert min(returned) >= done[0], "a thread went on while the kernels were still compiling"


def test_python_m_hina_kernels_refuses_an_unknown_group():
    done = subprocess.run([sys.executable, "-m", "hina.kernels", "nosuch"], capture_output=True, text=True)
    assert done.returncode == 2 and "nosuch" in done.stderr and "codec-bitmap" in done.stderr
