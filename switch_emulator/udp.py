"""The emulator as a UDP server on loopback: receive, process, transmit.

A few lines around the sans-I/O `Pipeline`: one data socket (a datagram is
a hina frame: header + K words, the kernel does Ethernet/IP/UDP), one
control socket (JSON, see `control.py`), optional impairments on each
direction.  One thread, one `selectors` loop; the data socket is drained
in batches so a burst costs one select call.
"""

from __future__ import annotations

import json
import selectors
import socket
import sys
import threading
import time

from .control import handle
from .impair import Impairment, ImpairmentConfig
from .pipeline import Pipeline

SOCKET_BUFFER = 8 << 20  # bytes; bursts of a whole window from every worker must fit
_BATCH = 256


def set_buffers(sock: socket.socket, size: int = SOCKET_BUFFER) -> int:
    """Ask for `size`-byte socket buffers, past rmem_max when root; return what the kernel granted."""
    for opt_force, opt in ((getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF),
                           (getattr(socket, "SO_SNDBUFFORCE", None), socket.SO_SNDBUF)):
        try:
            if opt_force is None:
                raise PermissionError
            sock.setsockopt(socket.SOL_SOCKET, opt_force, size)
        except PermissionError:
            sock.setsockopt(socket.SOL_SOCKET, opt, size)
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


class UdpSwitch:
    """Serve a pipeline on a UDP data port and a UDP control port."""

    def __init__(self, pipeline: Pipeline | None = None, *, data: tuple[str, int] = ("127.0.0.1", 0),
                 control: tuple[str, int] = ("127.0.0.1", 0), impair: ImpairmentConfig | None = None,
                 stats_every: float = 0.0, stats_stream=sys.stderr):
        self.pipeline = pipeline or Pipeline()
        self._data = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.buffer_bytes = set_buffers(self._data)
        self._data.bind(data)
        self._control = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._control.bind(control)
        cfg = impair or ImpairmentConfig()
        self.impair_in = Impairment(cfg, stream=1)
        self.impair_out = Impairment(cfg, stream=2)
        self._impaired = cfg.active
        self._stop = threading.Event()
        self.tx_errors = 0
        self._stats_every, self._stats_stream = stats_every, stats_stream

    @property
    def data_address(self) -> tuple[str, int]:
        return self._data.getsockname()

    @property
    def control_address(self) -> tuple[str, int]:
        return self._control.getsockname()

    def impairment_counters(self) -> dict:
        return {"impair_in": dict(self.impair_in.stats), "impair_out": dict(self.impair_out.stats),
                "tx_errors": self.tx_errors}

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._data.close()
        self._control.close()

    def serve_forever(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._data, selectors.EVENT_READ, "data")
        sel.register(self._control, selectors.EVENT_READ, "control")
        next_stats = time.monotonic() + self._stats_every if self._stats_every > 0 else None
        try:
            while not self._stop.is_set():
                timers = [t for t in (self.impair_in.next_timer(), self.impair_out.next_timer(), next_stats)
                          if t is not None]
                timeout = max(0.0, min(timers) - time.monotonic()) if timers else 0.2
                for key, _ in sel.select(timeout):
                    if key.data == "data":
                        self._drain()
                    else:
                        self._serve_control()
                now = time.monotonic()
                for frame, source in self.impair_in.due(now):
                    self._process(frame, source, now)
                for frame, dest in self.impair_out.due(now):
                    self._send(frame, dest)
                if next_stats is not None and now >= next_stats:
                    next_stats = now + self._stats_every
                    counters = {**self.pipeline.counters(), **self.impairment_counters()}
                    print(json.dumps(counters), file=self._stats_stream, flush=True)
        finally:
            sel.close()

    def _drain(self) -> None:
        recv = self._data.recvfrom
        for _ in range(_BATCH):
            try:
                frame, source = recv(65536, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                continue  # an ICMP error surfacing on the socket; nothing to process
            if not self._impaired:  # the fast path: no impairment bookkeeping per packet
                emit = self.pipeline.update(frame, source)
                if emit is not None:
                    for dest in emit.dests:
                        self._send(emit.frame, dest)
                continue
            now = time.monotonic()
            for f, src in self.impair_in.apply((frame, source), source, now):
                self._process(f, src, now)

    def _process(self, frame: bytes, source: tuple[str, int], now: float) -> None:
        emit = self.pipeline.update(frame, source)
        if emit is None:
            return
        for dest in emit.dests:
            for f, d in self.impair_out.apply((emit.frame, dest), dest, now):
                self._send(f, d)

    def _send(self, frame: bytes, dest: tuple[str, int]) -> None:
        try:
            self._data.sendto(frame, dest)
        except OSError:
            self.tx_errors += 1  # e.g. a worker gone: its port refuses; the others carry on

    def _serve_control(self) -> None:
        try:
            request, peer = self._control.recvfrom(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        reply, shutdown = handle(self.pipeline, request, extra=self.impairment_counters())
        try:
            self._control.sendto(json.dumps(reply).encode(), peer)
        except OSError:
            pass
        if shutdown:
            self._stop.set()

    def start_thread(self) -> threading.Thread:
        """Serve in a daemon thread (tests, in-process demos); `stop()` ends it."""
        thread = threading.Thread(target=self.serve_forever, name="hina-switch", daemon=True)
        thread.start()
        return thread


def announce(switch: UdpSwitch, stream=sys.stdout) -> None:
    """Print the bound addresses as one JSON line, so a parent process can find the switch."""
    print(json.dumps({"data": list(switch.data_address), "control": list(switch.control_address),
                      "socket_buffer": switch.buffer_bytes}), file=stream, flush=True)
