"""hina's worker agents: run the codec's phases through a switch, retransmit, reassemble.

`Worker.aggregate(params, grad)` is the entry point; `PhaseTransfer` is the
sans-I/O slot window it drives; `UdpTransport` reaches a switch over UDP;
`hina demo` (`host.demo`) runs the main job on loopback; `SwitchAllreduce` and
`switch_allreduce_hook` (`host.ddp`, loaded on first use: it needs the torch
extra) train PyTorch DDP models through the switch.
"""

import importlib

# Where each public name lives: loaded on first use (PEP 562), so that `hina --help`, the command line's
# flag parsing and a script that needs only `JobSpec` load neither numba nor the compiled kernels.
_EXPORTS = {
    "agent": ("Worker",),
    "congestion": ("CongestionWindow", "Pacer"),
    "congestion_settings": ("CongestionSettings",),
    "job": ("JobSpec",),
    "synthetic": ("synthetic_gradient",),
    "transport": ("UdpTransport",),
    "window": ("AggregationTimeout", "PhaseTransfer", "RttEstimator", "SlotPool", "StaleSwitchState"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)

_DDP = ("BucketError", "SwitchAllreduce", "switch_allreduce_hook")  # host.ddp imports torch: only when asked


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in _DDP:
        try:
            from hina.host import ddp
        except ImportError as exc:
            raise ImportError(f"host.{name} needs PyTorch: pip install -e '.[torch]' ({exc})") from exc
        return getattr(ddp, name)
    raise AttributeError(f"module 'host' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE) | set(_DDP))
