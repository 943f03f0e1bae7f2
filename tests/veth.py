"""veth pairs for tests that need real interfaces (root only): created, then always removed."""

from __future__ import annotations

import contextlib
import os
import subprocess


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def can_make_veths() -> str | None:
    """None if this process can create veth pairs, else the reason it cannot."""
    if os.geteuid() != 0:
        return "needs root to create veth pairs"
    if subprocess.run(["which", "ip"], capture_output=True).returncode != 0:
        return "iproute2 (`ip`) is not installed"
    return None


@contextlib.contextmanager
def veth_pairs(names: list[tuple[str, str]]):
    """Create each (a, b) pair, up, IPv6 off (no router solicitations); delete them on exit."""
    made = []
    try:
        for a, b in names:
            subprocess.run(["ip", "link", "del", a], capture_output=True)  # leftovers of a crashed run
            ip("link", "add", a, "type", "veth", "peer", "name", b)
            made.append(a)
            for end in (a, b):
                with contextlib.suppress(OSError):
                    with open(f"/proc/sys/net/ipv6/conf/{end}/disable_ipv6", "w") as f:
                        f.write("1")
                ip("link", "set", end, "up")
        yield
    finally:
        for a in made:
            subprocess.run(["ip", "link", "del", a], capture_output=True)
