"""How a worker's frames reach the switch: a UDP socket to the switch's data port.

A transport has `send(frame)`, `recv(timeout) -> frame | None` and
`close()`; `switch_emulator.inproc.InProcessPort` has the same shape for
in-process runs.  The UDP socket is connected to the switch, so the kernel
drops datagrams from anyone else before they reach the worker.
"""

from __future__ import annotations

import socket

from switch_emulator.udp import set_buffers


class UdpTransport:
    def __init__(self, switch: tuple[str, int], *, bind: tuple[str, int] = ("127.0.0.1", 0)):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.buffer_bytes = set_buffers(self._sock)
        self._sock.bind(bind)
        self._sock.connect(switch)
        self._timeout = None

    @property
    def address(self) -> tuple[str, int]:
        """Where this worker's UPDATEs come from: what the switch must authorize."""
        return self._sock.getsockname()

    def send(self, frame: bytes) -> None:
        try:
            self._sock.send(frame)
        except ConnectionRefusedError:
            pass  # the switch is not listening (yet): a lost packet, retransmission handles it

    def recv(self, timeout: float) -> bytes | None:
        timeout = max(0.0, timeout)
        if timeout != self._timeout:
            self._sock.settimeout(timeout)
            self._timeout = timeout
        try:
            return self._sock.recv(65536)
        except (socket.timeout, BlockingIOError):
            return None
        except ConnectionRefusedError:
            return None  # ICMP port unreachable from an earlier send

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "UdpTransport":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
