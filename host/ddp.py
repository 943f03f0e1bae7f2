"""Train through the switch: a PyTorch DDP communication hook that sums every gradient bucket with hina.

    hook = SwitchAllreduce.connect(switch, rank, world_size, control=control)   # one per process, kept
    model = DistributedDataParallel(model)                   # torch.distributed (gloo) set up as usual
    model.register_comm_hook(hook, switch_allreduce_hook)
    ...
    loss.backward()                                          # every bucket went through the switch
    report = hook.pop_step()                                 # bytes, encodings, encode/network/decode seconds

`torch.distributed` still serves what DDP itself needs (the parameter broadcast
at start, the bucket order after the first step); every gradient bucket is
aggregated by hina's `Worker` (auto mode by default, its retransmission and
deadline).  The hook returns at once and hands the bucket to one
communication thread per process, which aggregates buckets in the order DDP
launches them (the same order on every rank) while backward goes on
computing the next ones; buckets do not overlap each other, because one
Worker's slots carry one transfer at a time.  Every rank decodes the same
fixed-point sum and divides it by the world size identically, so every rank
holds the same bits.

Where a bucket lives decides where it is encoded, with nothing to set: a
CUDA bucket is encoded and decoded on its GPU by the codec's torch kernels
(`codec.torch_kernels`, the same words as the numba codec's in every
round), so only the encoded words cross to host memory for the sender
and only the aggregates' words come back; the average is written into
the bucket in place on the GPU.  A CPU bucket takes the numba codec on
its memory, as numpy.  Both paths round the average to the bucket's
dtype identically (float16 once from float64, as numpy does).

Joining at a control port, the switch chooses the job's slots (`JobSpec`'s
slot_base None; `hina.control.ledger`), and `close` leaves the job, so the
last rank's leaving frees them.  `register` does the connecting and the
registering, and with `fallback` a job the switch has no slots for
(`SwitchFull` on any rank) keeps DDP's own allreduce over the process group:
the gradients are then summed on the hosts, as ATP falls back to its
parameter server.

A bucket the codec refuses (NaN or Inf) or that does not complete
by the deadline fails its Future with `BucketError` naming the bucket, so
`loss.backward()` raises in the training script; the hook then refuses
every later bucket at once (the job's slots are mid-transfer on the other
ranks; only new hooks that join the job again start clean).

This module imports torch; `import host` does not (`host.SwitchAllreduce` loads it on first use).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any

import numpy as np
import torch

from hina import codec
from hina.codec.torch_kernels import to_float16

from .agent import Worker
from .congestion_settings import CongestionSettings
from .job import JobSpec
from .window import AggregationTimeout, StaleSwitchState

__all__ = ["BucketError", "SwitchAllreduce", "register", "switch_allreduce_hook"]

# bucket dtypes the codec takes as they are; bfloat16 goes through a float32 copy (exact: a widening)
_NUMPY_DTYPES = {torch.float16: "float16", torch.float32: "float32", torch.float64: "float64"}


def _on_device(tensor: torch.Tensor) -> bool:
    """Is this bucket encoded where it lives, by the torch kernels?  CUDA buckets are; CPU buckets take
    the numba codec (tests route CPU buckets through the device path by replacing this function)."""
    return tensor.is_cuda


class BucketError(RuntimeError):
    """A gradient bucket that did not go through the switch; the message names the bucket and why."""


class SwitchAllreduce:
    """The hook's state: one `Worker` for the whole training run, a communication thread, the reports.

    mode, group, link_gbps: the codec's (`codec.CodecParams`); "dense" is the SwitchML-style baseline.
    """

    def __init__(self, worker: Worker, world_size: int, *, mode: str = "auto", group: int = 0,
                 link_gbps: float = 10.0, transport_owned: bool = False):
        if not 1 <= world_size <= 32:
            raise ValueError(f"world_size must be 1..32, got {world_size}")
        codec.CodecParams(length=1, workers=world_size, mode=mode, group=group, link_gbps=link_gbps)  # refuse here
        self.worker = worker
        self.world_size = world_size
        self.mode, self.group, self.link_gbps = mode, group, link_gbps
        self._transport_owned = transport_owned
        self._params: dict[tuple[int, str], codec.CodecParams] = {}
        self._buffers: dict[int, dict[str, Any]] = {}  # per bucket index: the int32 sum, a float32 copy, a stream
        self._queue: queue.Queue = queue.Queue()
        self._step = 0
        self._current: list[dict[str, Any]] = []
        self._steps: list[dict[str, Any]] = []  # finished steps, not yet popped
        self._failed: str | None = None
        self._lock = threading.Lock()
        self.leave_at: tuple[tuple[str, int], Any] | None = None  # (control port, token file): `close` leaves
        self._thread = threading.Thread(target=self._run, name=f"hina-ddp-{worker.worker_id}", daemon=True)
        self._thread.start()

    @classmethod
    def connect(cls, switch: tuple[str, int], rank: int, world_size: int, *, control: tuple[str, int] | None = None,
                job: JobSpec = JobSpec(), deadline: float = 10.0, transport=None, bind: tuple[str, int] | None = None,
                congestion: CongestionSettings = CongestionSettings(), token_file=None,
                **codec_options) -> SwitchAllreduce:
        """A UDP worker for `rank` (or the given transport: `hina.host.transport.open_transport` for raw frames).

        control: the emulator's control port; joining there authorizes this rank's address and UDP port
        and clears what an earlier run of the job left.  bind: the address and UDP port this rank sends
        from and takes its RESULTs at (default: a port of its own, the kernel's choice, so that the ranks
        of a machine do not collide); without `control` (BMv2, a P4 switch) the job installed on the
        switch must list this rank at that address, so give it.  congestion: the congestion window's and
        pacer's settings (`Worker`; `CongestionSettings(fair=False)`: the delay rule alone, for comparison,
        `pace_mbps`: this rank's link rate, to pace at).  job: its slot_base None
        (the default) lets the switch at `control` choose the range (`SwitchFull` where it has none, or a wait
        in line with when_full "wait"); token_file: the switch's or its owner's token (default $HINA_TOKEN).
        """
        from hina.control.client import ControlClient
        from hina.control.config import Member

        from .transport import UdpTransport

        owned = transport is None
        if owned:
            bind = bind or (("127.0.0.1", 0) if switch[0].startswith("127.") else ("0.0.0.0", 0))
            transport = UdpTransport(switch, bind=bind)
        try:
            pipes, path = 1, None
            if control is not None:
                with ControlClient(control, token_file=token_file) as ctl:
                    pipes = ctl.join(job.switch_config(world_size), Member(rank, transport.address),
                                     place=job.placement(), deadline=max(deadline, 600.0))
                    job, path = job.granted(ctl.granted), ctl.round_trip
                if owned:  # the emulator answered the join: with one pipe it takes a batch of frames as one buffer
                    transport.segment_offload = pipes == 1
            worker = Worker(transport, job, rank, deadline=deadline, pipes=pipes, congestion=congestion, path_rtt=path)
            # the codec's kernels loaded now, not in the first step's first bucket (the hello waits for that
            # bucket: the ranks need not connect together)
            worker.prepare(codec.CodecParams(length=1 << 12, workers=world_size), hello=False)
            hook = cls(worker, world_size, transport_owned=owned, **codec_options)
        except BaseException:
            if owned:
                transport.close()
            raise
        if control is not None:
            hook.leave_at = (control, token_file)
        return hook

    # -- the hook side: called by DDP for each bucket, in bucket order --------------------------------------

    def submit(self, bucket) -> torch.futures.Future:
        """Queue one `torch.distributed.GradBucket`; its Future will hold the bucket's average."""
        fut: torch.futures.Future = torch.futures.Future()
        tensor, index, last = bucket.buffer(), bucket.index(), bucket.is_last()
        item = {"step": self._step, "index": index, "last": last, "tensor": tensor, "future": fut,
                "submitted": time.perf_counter(), "event": None}
        if tensor.is_cuda:  # the point on the stream that produced the bucket after which it holds the gradient
            item["event"] = torch.cuda.Event()
            item["event"].record()
        if last:
            self._step += 1
        self._queue.put(item)
        # DDP reads the Future's value in C++, where set_exception's value would be an object that is no
        # tensor ("Unable to cast ..."); a callback that raises it marks the returned Future as failed
        return fut.then(_value)

    # -- the communication thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            fut = item["future"]
            try:
                if self._failed is not None:
                    raise BucketError(f"{self._name(item)}: not sent, an earlier bucket failed ({self._failed})")
                report = self._aggregate(item)
            except BaseException as exc:  # every failure reaches the training script through the Future
                err = exc if isinstance(exc, BucketError) else BucketError(self._explain(item, exc))
                if self._failed is None:
                    self._failed = str(err)
                report = {"index": item["index"], "error": str(err)}
                self._record(item, report)
                fut.set_exception(err)
            else:
                self._record(item, report)
                fut.set_result(item["tensor"])

    def _aggregate(self, item: dict[str, Any]) -> dict[str, Any]:
        tensor = item["tensor"]
        n = tensor.numel()
        on_device = _on_device(tensor)
        bufs = self._bucket_buffers(item["index"], tensor, on_device)
        start = time.perf_counter()
        before = self.worker.stats.copy()
        if on_device:
            result, average = self._aggregate_on_device(item, bufs)
        else:
            result, average = self._aggregate_on_host(item, bufs)
        stats = self.worker.stats - before
        network = sum(self.worker.phase_seconds.values())
        return {"index": item["index"], "elements": n, "dtype": str(tensor.dtype).replace("torch.", ""),
                "path": "device" if on_device else "host",
                "encoding": result.encoding, "group": result.group, "rounds": result.rounds,
                "bytes": int(sum(result.bytes_sent.values())), "wire_bytes": int(stats["bytes"]),
                "retransmissions": int(stats["retransmissions"]),
                "encode": result.seconds["encode"], "network": network,
                "decode": result.seconds["decode"] + average,
                "seconds": time.perf_counter() - start, "queued": start - item["submitted"],
                "submitted": item["submitted"], "done": time.perf_counter()}

    def _aggregate_on_host(self, item: dict[str, Any], bufs: dict[str, Any]):
        """The numba codec on the bucket's memory (a CPU tensor) as numpy; the average written in place."""
        tensor = item["tensor"]
        work = tensor if tensor.dtype in _NUMPY_DTYPES else bufs["wide"]  # bfloat16: a float32 copy
        if work is not tensor:
            work.copy_(tensor)
        grad = work.detach().numpy().reshape(-1)
        params = self._codec_params(tensor.numel(), _NUMPY_DTYPES[work.dtype])
        result = self.worker.aggregate(params, grad, out=bufs["fixed"])
        t0 = time.perf_counter()
        # the average, the same bits on every rank: S * (2**-s / N) in float64 (IEEE: the same product
        # everywhere; exact for N a power of two), rounded once to the bucket's dtype, in one pass
        np.multiply(result.fixed, np.float64(2.0 ** -result.shift / self.world_size), out=grad, casting="unsafe")
        if work is not tensor:
            tensor.copy_(work)
        return result, time.perf_counter() - t0

    def _aggregate_on_device(self, item: dict[str, Any], bufs: dict[str, Any]):
        """The torch codec where the bucket lives: only words cross to the host; the average written in place.

        On CUDA the work runs on the bucket's own side stream, after the point where backward finished
        the bucket, and is complete before the Future says so.
        """
        tensor = item["tensor"]
        stream = bufs.get("stream")
        context = (torch.cuda.device(tensor.device), torch.cuda.stream(stream)) if stream is not None else ()
        with contextlib.ExitStack() as stack:
            for ctx in context:
                stack.enter_context(ctx)
            if item["event"] is not None:
                stream.wait_event(item["event"])
            flat = tensor.detach().view(-1)
            grad = flat if flat.dtype in _NUMPY_DTYPES else flat.to(torch.float32)  # bfloat16: exact widening
            params = self._codec_params(flat.numel(), _NUMPY_DTYPES[grad.dtype])
            result = self.worker.aggregate(params, grad, out=bufs["fixed"])
            t0 = time.perf_counter()
            # the host path's arithmetic: S * (2**-s / N) in float64, rounded once to the bucket's dtype
            # (float16 through to_float16: torch's own cast would round twice); bfloat16 via float32, as there
            average = result.fixed.to(torch.float64) * (2.0 ** -result.shift / self.world_size)
            if flat.dtype == torch.float16:
                average = to_float16(average)
            elif flat.dtype == torch.bfloat16:
                average = average.to(torch.float32)
            flat.copy_(average)
            if stream is not None:
                stream.synchronize()
        return result, time.perf_counter() - t0

    def _bucket_buffers(self, index: int, tensor: torch.Tensor, on_device: bool) -> dict[str, Any]:
        """Buffers reused step after step (DDP rebuilds its buckets once, after the first step)."""
        n, dtype, device = tensor.numel(), tensor.dtype, tensor.device
        bufs = self._buffers.get(index)
        shape = (n, dtype, device, on_device)
        if bufs is None or (bufs["n"], bufs["dtype"], bufs["device"], bufs["on_device"]) != shape:
            bufs = {"n": n, "dtype": dtype, "device": device, "on_device": on_device}
            if on_device:  # the sum stays where the bucket is
                bufs["fixed"] = torch.empty(n, dtype=torch.int32, device=device)
                if tensor.is_cuda:
                    bufs["stream"] = torch.cuda.Stream(device=device)
            else:
                bufs["fixed"] = np.empty(n, dtype=np.int32)
                if dtype not in _NUMPY_DTYPES:
                    bufs["wide"] = torch.empty(n, dtype=torch.float32)
            self._buffers[index] = bufs
        return bufs

    def _codec_params(self, n: int, dtype: str) -> codec.CodecParams:
        params = self._params.get((n, dtype))
        if params is None:
            params = self._params[(n, dtype)] = codec.CodecParams(
                length=n, workers=self.world_size, dtype=dtype, mode=self.mode, group=self.group,
                link_gbps=self.link_gbps)
        return params

    def _name(self, item: dict[str, Any]) -> str:
        t = item["tensor"]
        dtype = str(t.dtype).replace("torch.", "")
        return f"bucket {item['index']} (step {item['step']}, {t.numel():,} {dtype} elements)"

    def _explain(self, item: dict[str, Any], exc: BaseException) -> str:
        if isinstance(exc, ValueError):
            why = f"refused before sending: {exc}"
        elif isinstance(exc, AggregationTimeout):
            why = f"no sum by the deadline ({self.worker.deadline:g} s), did another rank fail? {exc}"
        elif isinstance(exc, StaleSwitchState):
            why = str(exc)
        else:
            why = f"{type(exc).__name__}: {exc}"
        return f"rank {self.worker.worker_id}: {self._name(item)}: {why}"

    # -- reports ----------------------------------------------------------------------------------------

    def _record(self, item: dict[str, Any], report: dict[str, Any]) -> None:
        with self._lock:
            self._current.append(report)
            if item["last"]:
                buckets, self._current = self._current, []
                self._steps.append(_step_report(item["step"], buckets))

    def pop_step(self) -> dict[str, Any] | None:
        """The oldest finished step's report (after `backward()` returned), or None.

        Keys: step, buckets (one dict each: index, elements, dtype, path ("device": the torch codec where
        the bucket lives, a CUDA bucket; "host": the numba codec on a CPU bucket), encoding, group, rounds, bytes
        (codec payload), wire_bytes (hina headers and retransmissions included), retransmissions,
        encode, network, decode, seconds, queued, and perf_counter times submitted and done), their
        totals bytes, wire_bytes, retransmissions, encode, network, decode, span (first bucket
        submitted to last done: the time the step's gradients spent in communication, overlapping
        backward), encodings (per bucket) and errors.
        """
        with self._lock:
            return self._steps.pop(0) if self._steps else None

    def close(self) -> None:
        """Stop the communication thread (after the last step), leave the job where it joined at a control
        port (the last rank's leaving frees its slots), and close the transport if it made it."""
        self._queue.put(None)
        self._thread.join(timeout=5)
        if self.leave_at is not None:
            from hina.control.client import ControlClient, ControlError

            control, token_file = self.leave_at
            self.leave_at = None
            try:
                with ControlClient(control, token_file=token_file, retries=2) as ctl:
                    ctl.leave(self.worker.job.job_id, self.worker.worker_id)
            except (ControlError, OSError, ValueError):
                pass  # the switch's lease frees the slots
        if self._transport_owned:
            self.worker.transport.close()

    def __enter__(self) -> SwitchAllreduce:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _step_report(step: int, buckets: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [b for b in buckets if "error" not in b]
    total = {key: sum(b[key] for b in ok) for key in ("bytes", "wire_bytes", "retransmissions")}
    seconds = {key: sum(b[key] for b in ok) for key in ("encode", "network", "decode")}
    span = max(b["done"] for b in ok) - min(b["submitted"] for b in ok) if ok else 0.0
    return {"step": step, **total, **seconds, "span": span, "encodings": [b.get("encoding", "error") for b in buckets],
            "errors": [b["error"] for b in buckets if "error" in b], "buckets": buckets}


def _value(fut: torch.futures.Future):
    return fut.value()  # raises the bucket's error, if it has one


def register(model, switch: tuple[str, int], *, control: tuple[str, int] | None = None, fallback: bool = False,
             log=print, **connect_options) -> SwitchAllreduce | None:
    """Connect this rank (`SwitchAllreduce.connect`, rank and world size from torch.distributed) and register
    the hook on the DDP `model`; the hook, which the caller closes at the end.

    fallback: where the switch has no slots for the job (`SwitchFull`, on this rank or any other: the ranks
    agree through the process group), register nothing and return None: DDP's own allreduce over the
    process group (gloo's ring) sums the gradients on the hosts; the ranks that joined leave again.  `log`
    gets the one line saying so."""
    import torch.distributed as dist

    from hina.control.client import SwitchFull

    rank, world = dist.get_rank(), dist.get_world_size()
    hook, why = None, None
    try:
        hook = SwitchAllreduce.connect(switch, rank, world, control=control, **connect_options)
    except SwitchFull as exc:
        if not fallback:
            raise
        why = str(exc)
    joined = torch.tensor([0 if hook is None else 1], dtype=torch.int32)
    if fallback:
        dist.all_reduce(joined, op=dist.ReduceOp.MIN)
    if joined.item() == 0:
        if hook is not None:
            hook.close()
        if rank == 0 or why:
            log(f"rank {rank}: no slots on the switch for this job ({why or 'another rank was refused'}); "
                f"gradients are summed on the hosts by the process group's allreduce")
        return None
    model.register_comm_hook(hook, switch_allreduce_hook)
    return hook


def switch_allreduce_hook(state, bucket):  # no annotations: DDP checks them against its own, unpostponed
    """The DDP communication hook: `model.register_comm_hook(state, switch_allreduce_hook)`.

    state: a `SwitchAllreduce`; bucket: a `torch.distributed.GradBucket`; returns a
    `torch.futures.Future[torch.Tensor]` holding the bucket's average over the ranks.
    """
    return state.submit(bucket)
