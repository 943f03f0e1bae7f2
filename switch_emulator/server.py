"""What every emulator I/O backend shares: the select loop, control port, impairments, stats.

A backend (`udp.UdpSwitch`, `raw.RawSwitch`) registers its data sockets,
drains them into `_ingress(frame, source)`, says how to turn a frame into
outputs (`_process`) and how to send one (`_send`); this class does the
rest in one thread: impairments on both directions, the JSON control port
(`control.handle`), periodic counters on stderr with `stats_every`.
"""

from __future__ import annotations

import json
import selectors
import socket
import sys
import threading
import time
from collections.abc import Hashable

from .control import handle
from .impair import Impairment, ImpairmentConfig
from .pipeline import Pipeline

SOCKET_BUFFER = 8 << 20  # bytes; bursts of a whole window from every worker must fit


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


class SwitchServer:
    def __init__(self, pipeline: Pipeline, *, control: tuple[str, int], impair: ImpairmentConfig | None,
                 stats_every: float, stats_stream):
        self.pipeline = pipeline
        self._control = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._control.bind(control)
        cfg = impair or ImpairmentConfig()
        self.impair_in = Impairment(cfg, stream=1)
        self.impair_out = Impairment(cfg, stream=2)
        self._impaired = cfg.active
        self._stop = threading.Event()
        self.tx_errors = 0
        self._stats_every, self._stats_stream = stats_every, stats_stream or sys.stderr

    # -- for backends ----------------------------------------------------------
    def _data_sockets(self) -> list[tuple[socket.socket, Hashable]]:
        raise NotImplementedError

    def _drain(self, sock: socket.socket, tag: Hashable) -> None:
        raise NotImplementedError

    def _process(self, frame: bytes, source: Hashable) -> list[tuple[Hashable, bytes]]:
        raise NotImplementedError

    def _send(self, frame: bytes, dest: Hashable) -> None:
        raise NotImplementedError

    def _configure(self):  # a callable installing a Topology, or None
        return None

    def counters(self) -> dict:
        return {**self.pipeline.counters(), **self.impairment_counters()}

    # -- shared ----------------------------------------------------------------
    @property
    def control_address(self) -> tuple[str, int]:
        return self._control.getsockname()

    def impairment_counters(self) -> dict:
        return {"impair_in": dict(self.impair_in.stats), "impair_out": dict(self.impair_out.stats),
                "tx_errors": self.tx_errors}

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        """Stop serving and close the sockets, after the serving thread (if any) has let go of them."""
        self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        for sock, _ in self._data_sockets():
            sock.close()
        self._control.close()

    def start_thread(self) -> threading.Thread:
        """Serve in a daemon thread (tests, in-process demos); `stop()` or `close()` ends it."""
        self._thread = threading.Thread(target=self.serve_forever, name="hina-switch", daemon=True)
        self._thread.start()
        return self._thread

    def _ingress(self, frame: bytes, source: Hashable) -> None:
        if not self._impaired:  # the fast path: no impairment bookkeeping per packet
            for dest, out in self._process(frame, source):
                self._send(out, dest)
            return
        now = time.monotonic()
        for f, src in self.impair_in.apply((frame, source), source, now):
            self._impaired_process(f, src, now)

    def _impaired_process(self, frame: bytes, source: Hashable, now: float) -> None:
        for dest, out in self._process(frame, source):
            for f, d in self.impair_out.apply((out, dest), dest, now):
                self._send(f, d)

    def serve_forever(self) -> None:
        sel = selectors.DefaultSelector()
        for sock, tag in self._data_sockets():
            sel.register(sock, selectors.EVENT_READ, ("data", tag))
        sel.register(self._control, selectors.EVENT_READ, ("control", None))
        next_stats = time.monotonic() + self._stats_every if self._stats_every > 0 else None
        try:
            while not self._stop.is_set():
                timers = [t for t in (self.impair_in.next_timer(), self.impair_out.next_timer(), next_stats)
                          if t is not None]
                timeout = max(0.0, min(timers) - time.monotonic()) if timers else 0.2
                for key, _ in sel.select(timeout):
                    kind, tag = key.data
                    if kind == "data":
                        self._drain(key.fileobj, tag)
                    else:
                        self._serve_control()
                now = time.monotonic()
                for frame, source in self.impair_in.due(now):
                    self._impaired_process(frame, source, now)
                for frame, dest in self.impair_out.due(now):
                    self._send(frame, dest)
                if next_stats is not None and now >= next_stats:
                    next_stats = now + self._stats_every
                    print(json.dumps(self.counters()), file=self._stats_stream, flush=True)
        finally:
            sel.close()

    def _serve_control(self) -> None:
        try:
            request, peer = self._control.recvfrom(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        extra = {k: v for k, v in self.counters().items() if k not in ("frames", "drops", "jobs")}
        reply, shutdown = handle(self.pipeline, request, extra=extra, configure=self._configure())
        try:
            self._control.sendto(json.dumps(reply).encode(), peer)
        except OSError:
            pass
        if shutdown:
            self._stop.set()
