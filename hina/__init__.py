"""hina: homomorphic in-network aggregation for distributed deep learning.

Each worker encodes its gradient into rounds of 32-bit words that a switch
which only ADDs, ORs and MAXes can sum; every worker decodes the exact sum,
bit for bit what a dense integer aggregation gives, at a fraction of the
bytes when the gradients are sparse.

The codec, with numpy standing in for the switch::

    import numpy as np, hina
    grads = [np.where(np.random.rand(1 << 20) < 0.01, np.random.randn(1 << 20), 0).astype(np.float32)
             for _ in range(4)]
    result = hina.simulate_allreduce(grads)          # every round, every worker, numpy as the switch
    result.sums[0]                                   # the exact sum, as every worker decodes it

Workers through a switch (the emulator in-process here; `UdpSwitch`, BMv2 or
a P4 switch on a network the same way)::

    switch = hina.UdpSwitch(hina.Pipeline()); switch.start_thread()
    worker = hina.Worker(hina.UdpTransport(switch.address), hina.JobSpec(job_id=1, workers=4), rank=0)
    total = worker.aggregate(grads[0])

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

The names below load their subpackage on first use, so `import hina` is
cheap and the codec never loads the network stack (or torch) it does not use.
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
    "hina.control": ("ControlClient", "ControlError", "JobConfig", "Member", "Topology", "Fabric"),
    "hina.wire": ("UDP_PORT", "HinaHeader", "Drop", "max_words"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
_SUBPACKAGES = ("codec", "wire", "control", "emulator", "host", "baselines", "sim", "mininet", "benchmarks")

__all__ = sorted(_WHERE)


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
