"""hina's worker agents: run the codec's phases through a switch, retransmit, reassemble.

`Worker.aggregate(params, grad)` is the entry point; `PhaseTransfer` is the
sans-I/O slot window it drives; `UdpTransport` reaches a switch over UDP;
`hina demo` (`host.demo`) runs the main job on loopback; `SwitchAllreduce` and
`switch_allreduce_hook` (`host.ddp`, loaded on first use: it needs the torch
extra) train PyTorch DDP models through the switch.
"""

from .agent import Worker
from .job import JobSpec
from .synthetic import synthetic_gradient
from .transport import UdpTransport
from .window import AggregationTimeout, CongestionWindow, PhaseTransfer, RttEstimator, SlotPool, StaleSwitchState

__all__ = [
    "AggregationTimeout",
    "CongestionWindow",
    "StaleSwitchState",
    "JobSpec",
    "PhaseTransfer",
    "RttEstimator",
    "SlotPool",
    "UdpTransport",
    "Worker",
    "synthetic_gradient",
]

_DDP = ("BucketError", "SwitchAllreduce", "switch_allreduce_hook")  # host.ddp imports torch: only when asked


def __getattr__(name: str):
    if name in _DDP:
        try:
            from hina.host import ddp
        except ImportError as exc:
            raise ImportError(f"host.{name} needs PyTorch: pip install -e '.[torch]' ({exc})") from exc
        return getattr(ddp, name)
    raise AttributeError(f"module 'host' has no attribute {name!r}")
