"""PyTorch DDP through the switch: 2 ranks on loopback, every bucket through the emulator.

Properties: after every step every rank holds bit-identical parameters; the
loss follows gloo's run on the same seeds within what fixed-point rounding
explains; a rank whose bucket holds NaN refuses before sending and every
rank's backward raises an error naming the bucket within the deadline; and
`import host` works without torch.
"""

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hina.wire.sockio import free_tcp_ports

pytestmark = [pytest.mark.torch, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def torch():
    import torch  # the `torch` marker skips this module where PyTorch is missing

    return torch


@pytest.fixture(scope="module")
def train_ddp(torch):
    from hina.benchmarks import train_ddp

    return train_ddp


@pytest.fixture
def switch():
    from hina.emulator import Pipeline, UdpSwitch

    sw = UdpSwitch(Pipeline())
    sw.start_thread()
    yield sw
    sw.stop()
    sw.close()


def two_rank_run(train_ddp, switch, **kw):
    cfg = train_ddp.RunConfig(workers=2, switch=switch.data_address, control=switch.control_address, **kw)
    return train_ddp.run(cfg, timeout=240)


# Loss of the hina run against gloo's.  Both start from the same parameters and batches, so step 0's
# loss is the same bits.  After that the averages differ by rounding only: hina's fixed point keeps
# 30 - ceil(log2 N) bits below each bucket's largest element (error <= 2^-(s+1) per rank and element)
# and gloo sums in float32 (24 bits); a few SGD steps of lr 0.1 move the loss by far less than 1e-4 of
# it (measured: 0 to 4 float32 ulps of the loss).
LOSS_RTOL = 1e-4


@pytest.mark.parametrize("model", ["ncf", "lstm"])
def test_two_ranks_identical_parameters_and_loss_follows_gloo(train_ddp, switch, model):
    kw = dict(model=model, steps=3, scale=0.01, bucket_mb=0.05)
    gloo = two_rank_run(train_ddp, switch, backend="gloo", job_id=1, **kw)
    # a slow link in auto's cost model: at these small sizes the sparse buckets then go aligned, not dense
    hina = two_rank_run(train_ddp, switch, backend="hina", job_id=2, link_gbps=0.1, **kw)
    assert not gloo["errors"] and not hina["errors"], gloo["errors"] + hina["errors"]
    for step in range(3):
        digests = {ranks[step]["digest"] for ranks in hina["ranks"]}
        assert len(digests) == 1, f"step {step}: ranks hold different parameters"
        rec = hina["ranks"][0][step]
        assert len(rec["encodings"]) == len(rec["buckets"]) >= 1
        assert "aligned" in rec["encodings"] and set(rec["encodings"]) <= {"dense", "aligned"}, rec["encodings"]
        assert rec["bytes"] > 0 and rec["wire_bytes"] >= rec["bytes"]
        assert min(rec["encode"], rec["network"], rec["decode"]) >= 0
    for g, h in zip(gloo["ranks"], hina["ranks"]):
        assert h[0]["loss"] == g[0]["loss"]  # nothing aggregated yet: same bits
        for step in range(3):
            assert abs(h[step]["loss"] - g[step]["loss"]) <= LOSS_RTOL * abs(g[step]["loss"]), step
    if model == "lstm":  # after DDP's bucket rebuild at step 1: several buckets, in the same order everywhere
        assert len(hina["ranks"][0][2]["buckets"]) > 1
    # the parameters did move: a hook that returned the local gradient would differ across ranks
    assert hina["ranks"][0][1]["digest"] != hina["ranks"][0][0]["digest"]


def test_nan_bucket_refused_and_every_rank_raises_naming_it(train_ddp, switch):
    deadline = 2.0
    start = time.monotonic()
    res = two_rank_run(train_ddp, switch, backend="hina", model="ncf", steps=3, scale=0.01, job_id=4,
                       deadline=deadline, nan_at=(1, 1))
    elapsed = time.monotonic() - start
    assert all(r is None for r in res["ranks"])
    bad, other = res["errors"][1], res["errors"][0]
    assert "BucketError: rank 1: bucket 0 (step 1" in bad and "refused before sending" in bad, bad
    assert "non-finite" in bad, bad
    assert "rank 0: bucket 0 (step 1" in other and f"no sum by the deadline ({deadline:g} s)" in other, other
    assert elapsed < 60  # process start-up and torch's import included; never a hang
    assert switch.pipeline.frames > 0  # step 0 went through (its ranks left the job: its counters went with it)


class Bucket:
    """What DDP hands a communication hook (torch.distributed.GradBucket), for hooks driven by hand."""

    def __init__(self, tensor, index, last):
        self._t, self._i, self._last = tensor, index, last

    def buffer(self):
        return self._t

    def index(self):
        return self._i

    def is_last(self):
        return self._last


def test_hook_averages_buckets_of_each_dtype(torch, switch):
    """One rank, fake buckets: float32/float64 in place, bfloat16 through float32; reports per step."""
    from hina.host import JobSpec
    from hina.host.ddp import SwitchAllreduce, switch_allreduce_hook

    rng = np.random.default_rng(0)
    with SwitchAllreduce.connect(switch.data_address, 0, 1, control=switch.control_address,
                                 job=JobSpec(job_id=5, words=64, slots=8), deadline=5.0) as state:
        for step in range(2):
            values = [torch.from_numpy(rng.standard_normal(n)).to(dtype)
                      for n, dtype in ((1000, torch.float32), (300, torch.float64), (500, torch.bfloat16))]
            buckets = [v.clone() for v in values]
            futures = [switch_allreduce_hook(state, Bucket(b, i, i == 2)) for i, b in enumerate(buckets)]
            for fut, bucket, value in zip(futures, buckets, values):
                assert fut.wait().data_ptr() == bucket.data_ptr()  # averaged in place
                # one rank: the average is the value, to the codec's fixed point (30 bits of the peak)
                tol = value.abs().max().item() * 2.0**-29
                if value.dtype == torch.bfloat16:  # rounded back to bfloat16's 8 bits
                    tol += value.abs().max().item() * 2.0**-8
                assert torch.allclose(bucket.double(), value.double(), rtol=0, atol=tol)
            report = state.pop_step()
            assert report["step"] == step and len(report["buckets"]) == 3 and not report["errors"]
            assert [b["elements"] for b in report["buckets"]] == [1000, 300, 500]
            assert report["bytes"] > 0 and report["span"] > 0
        assert state.pop_step() is None


def test_import_host_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import host, codec, switch_emulator\n"
            "try:\n    host.SwitchAllreduce\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "host.SwitchAllreduce needs PyTorch" in out.stdout


def _three_ranks(torch, switch, job_id, slot_base, buckets_per_rank):
    """Three hooks in one process, one job: every rank's buckets through the switch; each rank's reports."""
    from hina.host import CongestionSettings, JobSpec
    from hina.host.ddp import SwitchAllreduce, switch_allreduce_hook

    job = JobSpec(job_id=job_id, words=64, slot_base=slot_base, slots=8)
    # rank 2 on the window's fair-share rules: the sum does not depend on the window
    states = [SwitchAllreduce.connect(switch.data_address, rank, 3, control=switch.control_address, job=job,
                                      deadline=10.0, link_gbps=0.1,
                                      congestion=CongestionSettings(fair=rank == 2))
              for rank in range(3)]
    assert [s.worker.window.fair for s in states] == [False, False, True]
    try:
        futures = [[switch_allreduce_hook(state, Bucket(b, i, i == len(buckets) - 1)) for i, b in enumerate(buckets)]
                   for state, buckets in zip(states, buckets_per_rank)]
        for rank in futures:
            for fut in rank:
                fut.wait()
        return [state.pop_step() for state in states]
    finally:
        for state in states:
            state.close()


@pytest.mark.parametrize("device_ranks", [(0, 1, 2), (1,)], ids=["all-device", "mixed"])
def test_device_path_averages_to_the_host_path_s_bits(torch, switch, monkeypatch, device_ranks):
    """The hook's device path (the torch codec where the bucket lives: CUDA buckets; here CPU buckets routed
    through it) leaves every bucket with the bits the host path (numba) leaves: float16 rounded once, bfloat16
    through float32, 3 ranks so 1/N is inexact.  Mixed: rank 1 on the device path, the others on the host's."""
    import hina.host.ddp

    rng = np.random.default_rng(3)
    sizes = ((200_000, torch.float16), (3000, torch.float32), (1000, torch.float64), (2000, torch.bfloat16),
             (50_000, torch.float32))
    values = []
    for r in range(3):
        rank = []
        for n, dtype in sizes:
            if dtype == torch.float16:  # dense: one large value and two small ones at every element
                v = rng.uniform(-1000, 1000, n) * (1.0 if r == 0 else 10.0 ** rng.uniform(-8, -3, n))
            else:
                v = np.where(rng.random(n) < 0.05, rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n), 0.0)
            rank.append(torch.from_numpy(v).to(dtype))
        values.append(rank)
    # the float16 averages include some where rounding through float32 (torch's cast) differs from rounding
    # once (numpy's): the device path must round them as the host path does
    from hina import codec

    halves = codec.simulate_allreduce([rank[0].numpy() for rank in values], mode="dense")
    average = halves.fixed.astype(np.float64) * (2.0 ** -halves.shift / 3)
    assert (torch.from_numpy(average).to(torch.float16).numpy() != average.astype(np.float16)).any()
    host_buckets = [[v.clone() for v in rank] for rank in values]
    host_reports = _three_ranks(torch, switch, 11, 0, host_buckets)
    assert all(b["path"] == "host" for r in host_reports for b in r["buckets"])

    device_buckets = [[v.clone() for v in rank] for rank in values]
    on_device = {b.data_ptr() for rank in device_ranks for b in device_buckets[rank]}
    monkeypatch.setattr(hina.host.ddp, "_on_device", lambda t: t.data_ptr() in on_device)
    reports = _three_ranks(torch, switch, 12, 8, device_buckets)
    for rank, report in enumerate(reports):
        assert not report["errors"]
        assert [b["path"] for b in report["buckets"]] == ["device" if rank in device_ranks else "host"] * len(sizes)
        assert report["encodings"] == host_reports[rank]["encodings"]
        assert [b["bytes"] for b in report["buckets"]] == [b["bytes"] for b in host_reports[rank]["buckets"]]
    assert "aligned" in reports[0]["encodings"]  # an index round ran on the device path, not only dense
    def bits(t):
        return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])

    for rank in range(3):
        for i, (h, d) in enumerate(zip(host_buckets[rank], device_buckets[rank])):
            assert torch.equal(bits(h), bits(d)), f"rank {rank}, bucket {i} ({h.dtype})"
    for i in range(len(sizes)):  # every rank holds the same average
        assert all(torch.equal(device_buckets[r][i], device_buckets[0][i]) for r in range(3))
        assert not torch.equal(device_buckets[0][i], values[0][i])  # averaged, not left as it was


def _ddp_example(switch, tmp_path, *extra: str) -> tuple[list[subprocess.CompletedProcess], list[dict]]:
    """examples/ddp_torchrun.py as two ranks on loopback (torchrun's environment set by hand)."""
    import json
    import os

    (port,), out = free_tcp_ports(), tmp_path / "steps.json"
    procs = []
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        cmd = [sys.executable, str(ROOT / "examples" / "ddp_torchrun.py"), "--switch",
               "{}:{}".format(*switch.data_address), "--control", "{}:{}".format(*switch.control_address),
               "--steps", "3", "--rows", "2000", "--job-id", "5", *extra, *(["--out", str(out)] if rank == 0 else [])]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    done = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=240)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return done, json.loads(out.read_text()) if out.exists() else []


def test_a_job_the_switch_has_no_slots_for_trains_on_the_hosts_only_where_allowed(switch, tmp_path):
    """The switch's slots are all held: without --host-fallback every rank fails at once with the switch's
    refusal; with it the ranks agree to keep DDP's own allreduce and train on the hosts, every rank holding the
    same parameters after every step, and no job of theirs is left on the switch."""
    from hina.control import ControlClient, JobConfig, Member, Placement

    switch.set_slots(64, "request")
    with ControlClient(switch.control_address) as ctl:
        ctl.join(JobConfig(9, 2, 32, 0, 64), Member(0, ("127.0.0.1", 7000)), place=Placement(64))
    refused, lines = _ddp_example(switch, tmp_path)
    assert [p.returncode for p in refused] == [2, 2] and not lines
    assert all("join refused by the switch: join: job 5 asks for 64 slots" in p.stderr for p in refused)
    fell_back, lines = _ddp_example(switch, tmp_path, "--host-fallback")
    assert [p.returncode for p in fell_back] == [0, 0], [p.stderr[-2000:] for p in fell_back]
    assert "gradients are summed on the hosts" in fell_back[0].stderr
    assert len(lines) == 3 and all(x["identical"] and x["through"] == "hosts" for x in lines)
    with ControlClient(switch.control_address) as ctl:
        assert [j["job_id"] for j in ctl.jobs()] == [9]
