"""What each switch target asks of the links around it in a Mininet experiment, importable without Mininet.

`mininet/run.py` and `benchmarks/compare.py` name a calibrated rate by the links' MTU before any network
exists, and `hina_net` and `topo` build the links: all take the MTU from `default_mtu` here.  The
targets themselves are `hina.control.fabric.TARGETS` (emulator, bmv2, xdp).
"""

from __future__ import annotations

from hina.emulator.xdp.layout import XDP_MTU

JUMBO_MTU = 9000  # the links' MTU unless a target asks for less: the emulator's K fills one such frame


def default_mtu(*targets: str | None) -> int:
    """The links' MTU unless one is given: jumbo frames, or where the XDP switch is one of the experiment's
    switches the largest frame it takes (a veth runs its program only up to that MTU)."""
    return XDP_MTU if "xdp" in targets else JUMBO_MTU


def take_redirects(node, ifname: str) -> None:
    """Let `ifname` on `node` (a Mininet node), the far end of a link whose other end runs the XDP switch, take
    the frames the program redirects to it: a veth delivers an XDP_REDIRECTed frame only where its peer has
    NAPI (an XDP program, or GRO on)."""
    node.cmd(f"ethtool -K {ifname} gro on >/dev/null 2>&1")


if __name__ == "__main__":
    import sys

    from hina.cliargs import library_only

    sys.exit(library_only(__doc__, "mininet/run.py"))
