"""The emulator as a UDP server on loopback: receive, process, transmit.

A datagram is a hina frame (header + K words; the kernel does
Ethernet/IP/UDP) and a member is a (host, port) address.  The data socket
is drained in batches so a burst costs one select call.  On Linux
(`batch`, the default where `sockio.available()`) one `recvmmsg` receives up
to 64 datagrams into fixed buffers, the compiled rules run over the whole
batch (`batch.udp_batch`) and write the RESULTs into a transmit ring,
and one `sendmmsg` sends it (`hina.wire.sockio`): three calls per batch instead of
two system calls and the rules' Python per packet.  Elsewhere, or with
`batch=False`, each datagram is received into one preallocated buffer,
goes through `Pipeline.update` and its RESULT is sent from the pipeline's
reused buffer, one call each.  Either way no bytes object is made per
packet.  With `pipes` P > 1, P sockets share the port and the kernel
hands each datagram to pipe slot mod P (`pipes.py`).  With a slow pipe
(`ImpairmentConfig.pipe_rate`) the batched path copies each batch it keeps
into a ring laid out as the receive buffers are (`slow_pipe.FrameRing`),
and runs the compiled rules on the ring's oldest entries when their turn
comes.
"""

from __future__ import annotations

import json
import socket
import sys
import time

import numpy as np

from hina.wire import sockio
from hina.wire.sockio import SOCKET_BUFFER, set_buffers

from .batch import udp_batch, warm
from .impair import ImpairmentConfig
from .pipeline import Pipeline
from .pipes import reuseport_group
from .server import SwitchServer
from .slow_pipe import FrameRing

__all__ = ["SOCKET_BUFFER", "UdpSwitch", "announce", "set_buffers"]
_BATCH = 256
_MAX_DATAGRAM = 65536


class UdpSwitch(SwitchServer):
    """Serve a pipeline on a UDP data port and a UDP control port; with `pipes` P, in P processes.

    The switch owns `pipeline` from here on (it builds RESULTs in reused buffers).  With
    P > 1, `pipeline` becomes a `pipes.Pipes`: the same control methods, applied to every pipe.
    """

    def __init__(self, pipeline: Pipeline | None = None, *, data: tuple[str, int] = ("127.0.0.1", 0),
                 control: tuple[str, int] = ("127.0.0.1", 0), impair: ImpairmentConfig | None = None,
                 stats_every: float = 0.0, stats_stream=None, pipes: int = 1,
                 batch: bool | None = None):
        pipeline = pipeline or Pipeline()
        pipeline.reuse_buffers = True  # every RESULT is sent (or copied, when impaired) before the next update
        super().__init__(pipeline, control=control, impair=impair, stats_every=stats_every,
                         stats_stream=stats_stream, pipes=pipes)
        self._rx = bytearray(_MAX_DATAGRAM)
        self.batch = sockio.available() if batch is None else bool(batch and sockio.available())
        if self.batch:
            warm(batch=True)  # compiled before the first datagram waits on it
        self._batches: dict[socket.socket, sockio.BatchSocket] = {}  # per data socket, made where it is served
        self._ring: FrameRing | None = None  # the slow pipe's queue on the batched path, made where it is served
        self._names: dict[tuple[str, int], np.ndarray | None] = {}  # each destination's sockaddr_in (`_sockaddr`)
        try:
            if pipes == 1:
                self._data = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self._pipe_socks = [[(self._data, None)]]
                self.buffer_bytes = set_buffers(self._data)
                self._data.bind(data)
            else:
                granted = []
                socks = reuseport_group(data, pipes, lambda s: granted.append(set_buffers(s)))
                self._pipe_socks = [[(s, None)] for s in socks]
                self._data, self.buffer_bytes = socks[0], granted[0]
        except OSError:
            self.close()
            raise
        self._start_pipes()

    @property
    def data_address(self) -> tuple[str, int]:
        return self._data.getsockname()

    def _enter_pipe(self, index: int) -> None:
        self._data = self._pipe_socks[index][0][0]

    def _drain(self, sock: socket.socket, tag) -> None:
        if self._impaired or (self.slow_pipe is not None and not self.batch):
            return self._drain_impaired(sock)
        if self.batch:
            return self._drain_batched(sock)
        buf = self._rx
        view = memoryview(buf)
        recv, send, update = sock.recvfrom_into, sock.sendto, self.pipeline.update
        for _ in range(_BATCH):
            try:
                n, source = recv(buf, 0, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                continue  # an ICMP error surfacing on the socket; nothing to process
            emit = update(view[:n], source)
            if emit is not None:
                frame = emit.frame
                for dest in emit.dests:
                    try:
                        send(frame, dest)
                    except OSError:
                        self.tx_errors += 1  # e.g. a worker gone: its port refuses; the others carry on

    def _batch_socket(self, sock: socket.socket) -> sockio.BatchSocket:
        """The receive buffers and transmit ring of a data socket, made in the process that serves it (a
        pipe's, after the fork)."""
        io = self._batches.get(sock)
        if io is None:
            io = self._batches[sock] = sockio.BatchSocket(sock, entry_bytes=_MAX_DATAGRAM)
        return io

    def _drain_batched(self, sock: socket.socket) -> None:
        io = self._batch_socket(sock)
        clock, spent = self.clock, self.profile
        for _ in range(_BATCH // io.entries):
            t = clock()
            try:
                n = io.recv()
            except OSError:
                continue  # an ICMP error surfacing on the socket; nothing to process
            t1 = clock()
            spent["recv"] += t1 - t
            if self.slow_pipe is None:
                self._rules(io, io.rx_array, io.entry_bytes, io.rx_lengths, io.rx_names_array, 0, n, t1)
            else:
                self._queue_batch(io, n)
            spent["received"] += n
            spent["receives"] += n > 0
            if n < io.entries:
                return

    def _rules(self, io: sockio.BatchSocket, rx, stride: int, lengths, names, start: int, n: int, t1: float) -> None:
        """The compiled rules over entries start..n-1 of `rx`; what they emit sent from `io`'s ring."""
        p, clock, spent = self.pipeline, self.clock, self.profile
        done = start
        while done < n:
            done, messages, _ = udp_batch(*p.kernel_args, rx, stride, lengths, names, done, n, io.tx_array,
                                          io.tx_names_array, io.tx_iov, io.tx_address, io.tx_capacity)
            t2 = clock()
            spent["rules"] += t2 - t1
            self._sent(io, messages)
            t1 = clock()
            spent["send"] += t1 - t2

    def _queue_batch(self, io: sockio.BatchSocket, n: int) -> None:
        """A received batch into the slow pipe's ring, as much of it as the queue takes; then its turns."""
        if self._ring is None:
            self._ring = FrameRing(self.slow_pipe.queue + io.entries, io.rx_names_array.shape[1])
        now = time.monotonic()
        self._serve_queue(now)  # first the turns that came: what waits now is what the newcomers queue behind
        kept = self.slow_pipe.arrive(now, n)
        self._ring.push(io.rx_array, io.entry_bytes, io.rx_lengths, io.rx_names_array, kept)
        self._serve_queue(now)

    def _serve_queue(self, now: float) -> None:
        if self._ring is None:  # nothing came on the batched path: the per-packet path's queue, if any
            return super()._serve_queue(now)
        k = self.slow_pipe.take(now)
        if k:
            io, ring = self._batch_socket(self._data), self._ring
            for start, end in ring.pop(k):
                self._rules(io, ring.rx, ring.stride, ring.lengths, ring.names, start, end, self.clock())

    def _drain_impaired(self, sock: socket.socket) -> None:
        recv, ingress = sock.recvfrom, self._ingress
        for _ in range(_BATCH):
            try:
                frame, source = recv(_MAX_DATAGRAM, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                continue
            ingress(frame, source)

    def _process(self, frame: bytes, source):
        emit = self.pipeline.update(frame, source)
        return [] if emit is None else [(dest, emit.frame) for dest in emit.dests]

    def _send(self, frame: bytes, dest: tuple[str, int]) -> None:
        try:
            self._data.sendto(frame, dest)
        except OSError:
            self.tx_errors += 1  # e.g. a worker gone: its port refuses; the others carry on

    def _send_all(self, frames: list[tuple[bytes, tuple[str, int]]]) -> None:
        """The impaired path's outputs with one sendmmsg where the socket batches; a member named by a host
        name, which has no sockaddr_in here, by a sendto of its own."""
        if not self.batch:
            return super()._send_all(frames)
        self._send_ring(self._batch_socket(self._data), frames, self._sockaddr)

    def _sockaddr(self, dest: tuple[str, int]) -> np.ndarray | None:
        """dest's sockaddr_in (kept), or None where its host is not a dotted IPv4 address."""
        name = self._names.get(dest, False)
        if name is False:
            try:
                name = np.frombuffer(sockio.sockaddr_in(*dest), np.uint8)
            except (OSError, TypeError, ValueError):
                name = None
            self._names[dest] = name
        return name


def announce(switch: SwitchServer, stream=sys.stdout, **extra) -> None:
    """Print the bound addresses as one JSON line, so a parent process can find the switch."""
    info = {"control": list(switch.control_address), **extra}
    if isinstance(switch, UdpSwitch):
        info.update(data=list(switch.data_address), socket_buffer=switch.buffer_bytes)
    info["pipes"] = switch.pipes
    print(json.dumps(info), file=stream, flush=True)
