"""The emulator as a UDP server on loopback: receive, process, transmit.

A datagram is a hina frame (header + K words; the kernel does
Ethernet/IP/UDP) and a member is a (host, port) address.  The data socket
is drained in batches so a burst costs one select call.
"""

from __future__ import annotations

import json
import socket
import sys

from .impair import ImpairmentConfig
from .pipeline import Pipeline
from .server import SOCKET_BUFFER, SwitchServer, set_buffers

__all__ = ["SOCKET_BUFFER", "UdpSwitch", "announce", "set_buffers"]
_BATCH = 256


class UdpSwitch(SwitchServer):
    """Serve a pipeline on a UDP data port and a UDP control port."""

    def __init__(self, pipeline: Pipeline | None = None, *, data: tuple[str, int] = ("127.0.0.1", 0),
                 control: tuple[str, int] = ("127.0.0.1", 0), impair: ImpairmentConfig | None = None,
                 stats_every: float = 0.0, stats_stream=None):
        super().__init__(pipeline or Pipeline(), control=control, impair=impair, stats_every=stats_every,
                         stats_stream=stats_stream)
        self._data = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.buffer_bytes = set_buffers(self._data)
        self._data.bind(data)

    @property
    def data_address(self) -> tuple[str, int]:
        return self._data.getsockname()

    def _data_sockets(self):
        return [(self._data, None)]

    def _drain(self, sock: socket.socket, tag) -> None:
        recv, ingress = sock.recvfrom, self._ingress
        for _ in range(_BATCH):
            try:
                frame, source = recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                continue  # an ICMP error surfacing on the socket; nothing to process
            ingress(frame, source)

    def _process(self, frame: bytes, source):
        emit = self.pipeline.update(frame, source)
        return [] if emit is None else [(dest, emit.frame) for dest in emit.dests]

    def _send(self, frame: bytes, dest: tuple[str, int]) -> None:
        try:
            self._data.sendto(frame, dest)
        except OSError:
            self.tx_errors += 1  # e.g. a worker gone: its port refuses; the others carry on


def announce(switch: SwitchServer, stream=sys.stdout, **extra) -> None:
    """Print the bound addresses as one JSON line, so a parent process can find the switch."""
    info = {"control": list(switch.control_address), **extra}
    if isinstance(switch, UdpSwitch):
        info.update(data=list(switch.data_address), socket_buffer=switch.buffer_bytes)
    print(json.dumps(info), file=stream, flush=True)
