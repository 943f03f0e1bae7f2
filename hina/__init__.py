"""hina: homomorphic in-network aggregation for distributed deep learning.

Each worker encodes its gradient into rounds of 32-bit words that a switch
which only ADDs, ORs and MAXes can sum; every worker decodes the exact sum,
bit for bit what a dense integer aggregation gives, at a fraction of the
bytes when the gradients are sparse.

The codec alone, numpy standing in for the switch::

    >>> import numpy as np, hina
    >>> rng = np.random.default_rng(0)
    >>> grads = [np.where(rng.random(1 << 18) < 0.01, rng.standard_normal(1 << 18), 0).astype(np.float32)
    ...          for _ in range(4)]
    >>> result = hina.simulate_allreduce(grads)   # every round, every worker
    >>> result.encoding, result.bytes_per_worker["total"], 4 * (1 << 18)   # what ran, bytes sent, dense bytes
    ('aligned', 74248, 1048576)

Four workers through the switch emulator on loopback, each in a thread (on a
cluster: one process per worker against `python -m hina.emulator`, BMv2 or a
P4 switch, the same way)::

    >>> import threading
    >>> switch = hina.UdpSwitch(hina.Pipeline()); _ = switch.start_thread()
    >>> job = hina.JobSpec(job_id=1)
    >>> ports = [hina.UdpTransport(switch.data_address) for _ in grads]
    >>> switch.pipeline.add_job(job.switch_config(4, [hina.Member(w, t.address) for w, t in enumerate(ports)]))
    >>> params = hina.CodecParams(length=1 << 18, workers=4)
    >>> sums = [None] * 4
    >>> def work(w): sums[w] = hina.Worker(ports[w], job, w).aggregate(params, grads[w])
    >>> threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    >>> for t in threads: t.start()
    >>> for t in threads: t.join()
    >>> all(np.array_equal(s.fixed, result.fixed) for s in sums)   # bit for bit the codec's sum
    True
    >>> switch.stop(); switch.close()

Where things are (each a subpackage with its own docstring):

- `hina.codec`: the encodings (dense, blocks, aligned, sketch), `auto`, the compiled kernels
- `hina.wire`: the header declared once, frames, the scapy layer
- `hina.control`: jobs, topologies and fabrics, the control client, the BMv2 controller
- `hina.emulator`: the switch's data plane in Python, and its I/O backends
- `hina.host`: the worker, the `hina` command line, the PyTorch DDP hook
- `hina.baselines`: host-based allreduces (ring, SparCML, Ok-Topk, Zen)
- `hina.sim`: the sender and switch rules on a virtual clock
- `hina.mininet`: topology experiments (needs Mininet and root)
- `hina.benchmarks`: the measurement scripts

The names at the top, each loaded with its subpackage on first use (so
`import hina` is cheap and the codec never loads the network stack, or
torch, it does not use); `help(hina.NAME)` for any of them; a star import
gives them all but the two that need torch:

- the codec: `simulate_allreduce` (every round, numpy as the switch),
  `CodecParams` (length, workers, mode, ...), `MODES`, `Op`,
  `WorkerSession` and `WorkerResult` (one worker's side), `AllreduceResult`
- the worker: `Worker` (aggregate through a switch), `JobSpec` (job id, K,
  slots), `UdpTransport`, `synthetic_gradient`, `AggregationTimeout`,
  `StaleSwitchState`; with torch: `SwitchAllreduce`, `switch_allreduce_hook`
- the switch emulator: `Pipeline` (the data plane), `UdpSwitch`,
  `InProcessSwitch`, `FrameSwitch`, `ImpairmentConfig`
- the control plane: `ControlClient`, `ControlError`, `SwitchFull` (a join
  the switch had no slots for), `JobConfig`, `Member`, `Topology`, `Fabric`
- the wire: `UDP_PORT`, `HinaHeader`, `Drop`, `max_words`
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# Where each public name lives (PEP 562: loaded on first use).
_EXPORTS = {
    "hina.codec": ("CodecParams", "MODES", "AllreduceResult", "WorkerSession", "WorkerResult", "Op",
                   "simulate_allreduce"),
    "hina.host": ("Worker", "JobSpec", "UdpTransport", "AggregationTimeout", "StaleSwitchState",
                  "synthetic_gradient", "SwitchAllreduce", "switch_allreduce_hook"),
    "hina.emulator": ("Pipeline", "UdpSwitch", "InProcessSwitch", "FrameSwitch", "ImpairmentConfig"),
    "hina.control": ("ControlClient", "ControlError", "SwitchFull", "JobConfig", "Member", "Topology", "Fabric"),
    "hina.wire": ("UDP_PORT", "HinaHeader", "Drop", "max_words"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
_SUBPACKAGES = ("codec", "wire", "control", "emulator", "host", "baselines", "sim", "mininet", "benchmarks")
_NEEDS_TORCH = ("SwitchAllreduce", "switch_allreduce_hook")  # named on request, never by a star import

# what `from hina import *` gives: the names above that import without the torch extra
__all__ = sorted(set(_WHERE) - set(_NEEDS_TORCH))


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'hina' has no attribute {name!r}")
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE) | set(_SUBPACKAGES))
