"""Helpers shared by the test modules: synthetic gradients, the dense reference sum, the packet vectors' check."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from hina import codec
from hina.codec import bitmap

SUPPORTS = ("independent", "identical", "overlapping", "disjoint")


def sparse_gradients(rng: np.random.Generator, workers: int, length: int, density: float, *,
                     support: str = "independent", dtype=np.float32, cancel: bool = False,
                     magnitudes: tuple[float, float] = (1.0, 1.0)) -> list[np.ndarray]:
    """One gradient per worker with about `density` non-zeros each.

    support: "independent" (each worker draws its own mask), "identical"
    (one mask for all), "overlapping" (half shared, half own), "disjoint"
    (workers own separate slices of a random permutation).  cancel=True
    makes worker 2k+1 hold exactly -(worker 2k) where both exist.
    magnitudes=(lo, hi) draws |values| log-uniformly between lo and hi.
    """
    k = int(round(density * length))
    shared = rng.choice(length, size=k, replace=False)
    perm = rng.permutation(length)
    grads = []
    for w in range(workers):
        if support == "identical":
            idx = shared
        elif support == "overlapping":
            own = rng.choice(length, size=k - k // 2, replace=False)
            idx = np.union1d(shared[: k // 2], own)
        elif support == "disjoint":
            per = length // workers
            idx = perm[w * per : w * per + min(k, per)]
        else:
            idx = rng.choice(length, size=k, replace=False)
        g = np.zeros(length, dtype=dtype)
        if np.dtype(dtype) == np.int32:
            bound = (2**31 - 1) // workers  # larger could overflow the sum: refused by the scale phase
            g[idx] = rng.integers(-bound, bound + 1, size=idx.size, dtype=np.int64)
        else:
            lo, hi = np.log10(magnitudes[0]), np.log10(magnitudes[1])
            mags = 10.0 ** rng.uniform(lo, hi, size=idx.size)
            g[idx] = (mags * rng.choice([-1.0, 1.0], size=idx.size)).astype(dtype)
        grads.append(g)
    if cancel:
        for w in range(0, workers - 1, 2):
            grads[w + 1] = (-grads[w]).astype(dtype)
    return grads


def dense_fixed_sum(grads: list[np.ndarray], shift: int | None) -> np.ndarray:
    """The SwitchML-style reference: sum of the quantized arrays with int32 wrap-around."""
    total = np.zeros(grads[0].shape, dtype=np.int64)
    for g in grads:
        total += codec.quantize(g, shift)
    return total.astype(np.int32)  # wraps like the switch


def assert_exact(result: codec.AllreduceResult, grads: list[np.ndarray]) -> None:
    """fixed equals the dense sum of quantized arrays bit for bit, on every worker."""
    expected = dense_fixed_sum(grads, result.shift)
    for w, r in enumerate(result.workers):
        assert r.fixed.dtype == np.int32
        mismatch = np.flatnonzero(r.fixed.reshape(-1) != expected.reshape(-1))
        assert mismatch.size == 0, (
            f"worker {w}: {mismatch.size} elements differ, first at {mismatch[:5]}: "
            f"{r.fixed.reshape(-1)[mismatch[:5]]} != {expected.reshape(-1)[mismatch[:5]]}"
        )


def run_threads(workers, params, grads) -> list:
    """Every worker aggregates its gradient in its own thread; each result, or the exception it raised."""
    import threading

    results: list = [None] * len(workers)

    def run(w):
        try:
            results[w] = workers[w].aggregate(params, grads[w])
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            results[w] = exc

    threads = [threading.Thread(target=run, args=(w,)) for w in range(len(workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def aggregate_over_udp(switch, spec, params, grads, *, deadline=20.0):
    """Register one UDP worker per gradient with a running UdpSwitch, aggregate in threads.

    Returns (results, workers); an exception in any worker is re-raised.
    """
    from hina.control import Member
    from hina.host import UdpTransport, Worker

    transports = [UdpTransport(switch.data_address) for _ in grads]
    switch.pipeline.add_job(spec.switch_config(len(grads), [Member(w, t.address) for w, t in enumerate(transports)]))
    workers = [Worker(t, spec, w, deadline=deadline) for w, t in enumerate(transports)]
    results = run_threads(workers, params, grads)
    for t in transports:
        t.close()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results, workers


def union_mask(grads: list[np.ndarray]) -> np.ndarray:
    """The support union U as a flat bool mask: elements where any worker's g != 0 (before quantizing;
    -0.0 is zero)."""
    return np.any(np.stack([np.asarray(g).reshape(-1) != 0 for g in grads]), axis=0)


def drive(sessions: list) -> tuple[list, list[np.ndarray], list[tuple[tuple[str, codec.Op], ...]]]:
    """Run WorkerSessions to the end with numpy as the switch (each segment with its own op).

    Returns (results, the aggregate of every round, each round's (segment name, op) pairs).
    """
    aggregates, rounds = [], []
    while not sessions[0].done:
        phases = [s.next_phase() for s in sessions]
        rounds.append(tuple((seg.name, seg.op) for seg in phases[0].segments))
        aggregate = codec.aggregate_round(phases)
        aggregates.append(aggregate)
        for s in sessions:
            s.receive(aggregate)
    return [s.result() for s in sessions], aggregates, rounds


# -- the codec's cases, shared by the numba and torch tests ------------------------------------------
LANES = 1024
GROUP_SIZES = tuple(1 << k for k in range(11))
# every mode, and the index's one- and two-level forms where a mode has an index
MODE_GROUPS = [("auto", 0), ("dense", 0), ("blocks", 0), ("aligned", 1), ("aligned", 16), ("aligned", 0),
               ("sketch", 1), ("sketch", 4), ("sketch", 0)]
EACH_MODE = pytest.mark.parametrize("mode,group", MODE_GROUPS, ids=[f"{m}-{g}" for m, g in MODE_GROUPS])


@st.composite
def codec_jobs(draw):
    workers = draw(st.integers(1, 32))
    length = draw(st.one_of(st.integers(1, 3000), st.integers(1, 30_000)))
    density = draw(st.one_of(st.sampled_from([0.0, 0.001, 0.01, 0.05, 0.2, 0.5, 1.0]), st.floats(0, 1)))
    support = draw(st.sampled_from(SUPPORTS))
    dtype = draw(st.sampled_from([np.float16, np.float32, np.float64, np.int32]))
    cancel = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    mode = draw(st.sampled_from(codec.MODES))
    group = draw(st.sampled_from([0, 1, 2, 8, 256]))
    lanes = draw(st.sampled_from([LANES, 64, 7]))
    return workers, length, density, support, dtype, cancel, seed, mode, group, lanes


def random_bitmap(rng, length, density):
    """A bitmap with clustered and scattered bits, its last element set half the time."""
    mask = rng.random(length) < density
    if length > 64:
        start = int(rng.integers(0, length - 64))
        mask[start : start + int(rng.integers(1, 64))] = True
    if rng.random() < 0.5:
        mask[-1] = True
    return mask, bitmap.from_positions(np.flatnonzero(mask), length)


# -- the host baselines --------------------------------------------------------------------------------
def torch_missing() -> str | None:
    """Why the baselines cannot run here (torch with gloo), or None."""
    from hina.baselines import comm

    try:
        comm.require_torch()
    except ImportError as exc:
        return str(exc)
    return None


def assert_baseline_exact(run: dict) -> None:
    """A baseline run is lossless, its ranks agree and every round is within float32 rounding of numpy's sum."""
    assert not run["lossy"], run["mode"]
    assert run["identical"], f"{run['mode']}: ranks disagree"
    for r in run["rounds"]:
        c = r["check"]
        assert c["within_bound"] and c["max_diff_over_bound"] <= 1.0, (run["mode"], c)
        assert c["rel_l2_error"] < 1e-6, (run["mode"], c)
    assert run["exact"]


VECTORS = Path(__file__).resolve().parent / "vectors"
VECTOR_CASES = sorted(VECTORS.glob("*.json"))  # the packet vectors (tests/make_vectors.py writes them)


def load_case(path: Path) -> dict:
    return json.loads(path.read_text())


def copy_taken_again_case() -> dict:
    """A case beside the vectors, as a vector is laid out, its frames out the emulator's: job 1's three
    workers fill copy 0 (worker 0 asks twice: PENDING to every member), then copy 1 (each arrival clears its
    bit in copy 0), then worker 0 takes copy 0 again for the next chunk and asks twice more: the first
    PENDING of that chunk goes to every member again (the first arrival cleared the copy's mark), the
    second to worker 0 alone.  `fanout` is how many frames each frame in made, checked here."""
    import make_vectors

    from hina.control.topology import Topology
    from hina.emulator.frames import FrameSwitch

    def update(worker, version, offset):
        return 1 + worker, make_vectors.update(1 + worker, [worker + 1], worker=worker, version=version,
                                               offset=offset)
    k = make_vectors.K
    packets = [update(0, 0, 0), update(0, 0, 0), update(1, 0, 0), update(2, 0, 0)]
    packets += [update(w, 1, 4 * k) for w in range(3)]
    packets += [update(0, 0, 8 * k)] * 3
    emulator = FrameSwitch(Topology.from_config(make_vectors.TOPOLOGY))
    expected, fanout = [], []
    for port, frame in packets:
        out = emulator.process(port, frame)
        expected += [{"port": p, "frame": bytes(f).hex()} for p, f in out]
        fanout.append(len(out))
    assert fanout == [0, 3, 0, 3, 0, 0, 3, 0, 3, 1], fanout
    drops = {name: n for name, n in emulator.counters()["drops"].items() if n}
    assert drops == {"duplicate": 3}
    return {"name": "copy_taken_again", "topology": make_vectors.TOPOLOGY, "fanout": fanout,
            "packets": [{"port": p, "frame": f.hex()} for p, f in packets], "expected": expected,
            "expected_drops": drops}


def child_gone_stale_case(version: int) -> dict:
    """A case beside the vectors, laid out as one, its frames out the emulator's: on a leaf, both children
    complete copy `version` of slot 0, which goes up with no total yet (with version 1, copy 0's total
    came down first); child 0 arrives in the other copy (its bit there cleared, set in the other), then
    its UPDATE for the copy sent up comes late: STALE, and nothing goes up again.  No vector comes to
    this: a child moves on when the total comes down, and then the copy holds the total."""
    import make_vectors

    from hina.control.topology import Topology
    from hina.emulator.frames import FrameSwitch

    k = make_vectors.K

    def update(port, copy, offset):  # child port - 1 on the leaf's port `port`, slot 0
        return port, make_vectors.update(port, [port], worker=port - 1, version=copy, offset=offset)

    packets = [update(1, 0, 0), update(2, 0, 0)]  # copy 0 complete: up
    if version == 1:  # its total down; copy 1 complete: up (copy 0 free)
        packets += [(5, make_vectors.frame(5, make_vectors.hina([7], msg_type=1, worker=1))),
                    update(1, 1, 4 * k), update(2, 1, 4 * k)]
    late = packets[-2]
    packets += [update(1, 1 - version, 8 * k), late]  # child 0 in the other copy, then its late UPDATE
    emulator = FrameSwitch(Topology.from_config(make_vectors.TREE_TOPOLOGY))
    expected = [{"port": p, "frame": bytes(f).hex()} for port, frame in packets
                for p, f in emulator.process(port, frame)]
    drops = {name: n for name, n in emulator.counters()["drops"].items() if n}
    assert drops == {"stale": 1} and [e["port"] for e in expected].count(5) == 1 + version  # each copy up once
    return {"name": f"child_gone_stale_in_copy_{version}", "topology": make_vectors.TREE_TOPOLOGY,
            "packets": [{"port": p, "frame": f.hex()} for p, f in packets], "expected": expected,
            "expected_drops": drops}


def beside_vectors() -> list[dict]:
    """The cases beside the vectors (each run where the vectors run: the emulator, BMv2, the TNA model)."""
    return [copy_taken_again_case(), child_gone_stale_case(0), child_gone_stale_case(1)]


def _multiset(pairs) -> Counter:
    return Counter((int(p), bytes.fromhex(f) if isinstance(f, str) else bytes(f)) for p, f in pairs)


def check_case(case: dict, out, drops: dict) -> None:
    """A switch passed a packet vector: the frames it sent (egress port, frame), as a multiset, and the drop
    counters that moved are the case's."""
    got = _multiset(out)
    want = _multiset((e["port"], e["frame"]) for e in case["expected"])
    missing, extra = want - got, got - want
    assert got == want, (f"missing {[(p, f.hex()) for p, f in missing.elements()]}\n"
                         f"unexpected {[(p, f.hex()) for p, f in extra.elements()]}")
    assert {k: v for k, v in drops.items() if v} == case["expected_drops"]


class FakeMachine:
    """mininet/run.py's `experiment` for calibrate()'s search, without Mininet: a machine on which dense
    aggregation is network-bound up to `holds` Mbit/s per link and CPU-bound above; `tried`, the rates asked."""

    def __init__(self, holds: float):
        self.holds, self.tried = holds, []

    def __call__(self, cfg, log=None, run_id=None) -> FakeMachine:  # as an Experiment is made
        self.tried.append(cfg.bw)
        return self

    def run(self) -> dict:
        bound = "network" if self.tried[-1] <= self.holds else "cpu"
        fidelity = {"bound": bound, "verdict": "network-bound" if bound == "network" else
                    "CPU-bound: the machine, 2.00 of 2 cores busy"}
        return {"runs": [{"exact": True, "seconds": 1.0, "line_rate_seconds": 1.0, "fidelity": fidelity,
                          "rounds": [{"fidelity": fidelity}]}]}


def tree_modes(results: dict):
    """Each mode's run through a tree, checked exact, with the job's counters of this mode alone on each switch
    that keeps them (a switch's counters add up over the modes; BMv2 counts its drops only and is left out)."""
    before: dict = {}
    for run in results["runs"]:
        assert run["exact"] and all(r["exact"] and not r["errors"] for r in run["rounds"]), run
        jobs = {name: c["jobs"][1] for name, c in run["switches"].items() if "jobs" in c}
        yield run, {name: {k: c.get(k, 0) - before.get(name, {}).get(k, 0)
                           for k in ("results", "sent_up", "resent_up", "resends", "pending")}
                    for name, c in jobs.items()}
        before = jobs


def worker_bytes(results: dict, run: dict, uplink: str) -> float:
    """The bytes each worker on an uplink's lower switch sent on its own link in one mode's run, on average and
    per round (as the uplinks' bytes are); every worker's where no host hangs on that switch (a higher tier)."""
    child = uplink.split("-")[0]
    hosts = results["topology"]["fabric"]["hosts"]
    ranks = [r for r, h in enumerate(hosts) if h["switch"] == child] or range(len(hosts))
    sent = [w["wire_bytes"] for rnd in run["rounds"] for w in rnd["workers"] if w["rank"] in ranks]
    return sum(sent) / len(sent)


def again(mode: dict, uplink: str) -> tuple[float, float]:
    """How many times over an uplink ("child-parent") carried its chunks in one mode, by the switches'
    counters: up, the child's partials and those it sent up again (once per child of its own that resent
    one, design.md); down, the parent's totals and its answers to a repeated partial: the total again
    (RESEND) or, where its copy still waits for another child, PENDING (a frame of the job's size, to every
    child the first time). A switch without counters (BMv2) counts as sending nothing again."""
    child, parent = uplink.split("-")
    up = 1 + mode[child]["resent_up"] / mode[child]["sent_up"] if child in mode else 1.0
    down = 1 + (mode[parent]["resends"] + mode[parent]["pending"]) / mode[parent]["results"] if parent in mode \
        else 1.0
    return up, down


def uplinks_carry_one_worker_each(results: dict, run: dict, mode: dict) -> None:
    """Leaf aggregation: each uplink carries about one worker's bytes each way, not its rack's, and more only as
    the switches' counters say it went again (`again`)."""
    for k, v in run["uplinks"].items():
        up, down = again(mode, k)
        worker = worker_bytes(results, run, k)
        assert 0 < v["up"] < 1.5 * up * worker, (run["mode"], k, v, worker, mode)
        assert 0 < v["down"] < 1.5 * down * worker, (run["mode"], k, v, worker, mode)
