"""hina's worker agents: run the codec's phases through a switch, retransmit, reassemble.

`Worker.aggregate(params, grad)` is the entry point; `PhaseTransfer` is the
sans-I/O slot window it drives; `UdpTransport` reaches a switch over UDP;
`hina demo` (`host.demo`) runs the main job on loopback.
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
