"""The emulator in-process: the pipeline wired to queues instead of sockets.

For tests and simulations that want the real switch logic without ports:
`attach()` returns a port object with the host transport interface
(`send(frame)`, `recv(timeout)`); frames a port sends enter the pipeline with
the port's name as their source, and RESULTs land in the destination ports'
queues.  Workers run in threads.  A slow pipe (`ImpairmentConfig.pipe_rate`) queues
the frames between the impairments as on UDP; a port's `recv` wakes the switch
when the next one's turn comes.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Hashable

from .impair import Impairment, ImpairmentConfig
from .pipeline import Pipeline
from .slow_pipe import SlowPipe


class InProcessPort:
    """One attached endpoint; quacks like `host.transport.UdpTransport`."""

    def __init__(self, switch: InProcessSwitch, name: Hashable):
        self.switch = switch
        self.name = name
        self.queue: queue.SimpleQueue[bytes] = queue.SimpleQueue()

    def send(self, frame: bytes) -> None:
        self.switch.deliver(bytes(frame), self.name)

    def recv(self, timeout: float) -> bytes | None:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            timer = self.switch.next_timer()
            now = time.monotonic()
            wait = min(deadline, timer) - now if timer is not None else deadline - now
            try:
                return self.queue.get(timeout=max(0.0, wait))
            except queue.Empty:
                pass
            now = time.monotonic()
            self.switch.poll(now)
            if now >= deadline and self.queue.empty():
                return None

    def close(self) -> None:
        self.switch.detach(self.name)


class InProcessSwitch:
    """The emulator in one process, for tests and simulations: `attach(name)` gives a port with a transport's
    interface (`send`, `recv`) for a worker thread, frames go through `pipeline` and `impair` as on UDP, and
    RESULTs land in their members' ports' queues.  Jobs: `pipeline.add_job` with the ports' names as sources."""

    def __init__(self, pipeline: Pipeline | None = None, impair: ImpairmentConfig | None = None):
        self.pipeline = pipeline or Pipeline()
        cfg = impair or ImpairmentConfig()
        self.impair_in = Impairment(cfg, stream=1)
        self.impair_out = Impairment(cfg, stream=2)
        self.slow_pipe = SlowPipe(cfg.pipe_rate, cfg.pipe_queue) if cfg.pipe_rate else None
        self._waiting: collections.deque[tuple[bytes, Hashable]] = collections.deque()
        self.ports: dict[Hashable, InProcessPort] = {}
        self._lock = threading.Lock()

    def attach(self, name: Hashable) -> InProcessPort:
        with self._lock:
            if name in self.ports:
                raise ValueError(f"a port named {name!r} is already attached")
            port = self.ports[name] = InProcessPort(self, name)
            return port

    def detach(self, name: Hashable) -> None:
        with self._lock:
            self.ports.pop(name, None)

    def deliver(self, frame: bytes, source: Hashable) -> None:
        with self._lock:
            now = time.monotonic()
            for f, src in self.impair_in.apply((frame, source), source, now):
                self._to_rules(f, src, now)

    def poll(self, now: float) -> None:
        with self._lock:
            for f, src in self.impair_in.due(now):
                self._to_rules(f, src, now)
            self._serve_queue(now)
            for f, dest in self.impair_out.due(now):
                self._enqueue(f, dest)

    def next_timer(self) -> float | None:
        timers = [t for t in (self.impair_in.next_timer(), self.impair_out.next_timer(),
                              self.slow_pipe and self.slow_pipe.next_timer()) if t is not None]
        return min(timers) if timers else None

    def _to_rules(self, frame: bytes, source: Hashable, now: float) -> None:
        """A frame past the inbound impairment: through the rules now, or into the slow pipe's queue."""
        if self.slow_pipe is None:
            return self._process(frame, source, now)
        if self.slow_pipe.arrive(now, 1):
            self._waiting.append((frame, source))
        self._serve_queue(now)

    def _serve_queue(self, now: float) -> None:
        if self.slow_pipe is not None:
            for _ in range(self.slow_pipe.take(now)):
                self._process(*self._waiting.popleft(), now)

    def _process(self, frame: bytes, source: Hashable, now: float) -> None:
        emit = self.pipeline.update(frame, source)
        if emit is None:
            return
        for dest in emit.dests:
            for f, d in self.impair_out.apply((emit.frame, dest), dest, now):
                self._enqueue(f, d)

    def _enqueue(self, frame: bytes, dest: Hashable) -> None:
        port = self.ports.get(dest)
        if port is not None:
            port.queue.put(frame)
