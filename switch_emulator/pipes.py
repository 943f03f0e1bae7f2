"""Pipes: the data plane as P processes, each owning the slots s with s mod P == its index.

A switch ASIC splits its ports among pipes; hina's emulator splits the
slots, so that all the state a packet touches (its slot's two copies) lives
in one process and no two pipes ever share a register.  The kernel steers
each packet, not Python: P sockets share one UDP port (SO_REUSEPORT) and a
classic BPF program attached with SO_ATTACH_REUSEPORT_CBPF picks socket
`slot mod P`; on raw interfaces P AF_PACKET sockets per interface form a
PACKET_FANOUT group whose PACKET_FANOUT_CBPF program does the same (frames
that are not hina go to pipe 0, which forwards them like any other pipe
would).  Sockets join their group in pipe order, so the program's return
value is the pipe index, and the parent keeps every socket open, so a dead
pipe's share is never re-steered to another pipe.

The parent keeps the control port.  `Pipes` stands in for the `Pipeline`
there: a job install, join, removal, reset or topology goes to every pipe
over a socketpair (the pipe applies it with `control.handle`, as a
one-process switch does), and counters are summed over the pipes, with
each pipe's own in `"pipes"`.  A pipe that dies is logged on stderr, shown
in the counters, and named in the error of every later control request.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import multiprocessing as mp
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from hina.control.config import JobConfig, Member
from hina.control.topology import Topology
from hina.wire.frames import ETH_TYPE_AT, HINA_AT, IP_PROTOCOL_AT, IP_VERSION_AT, IPV4_NO_OPTIONS, UDP_DPORT_AT
from hina.wire.headers import AT_POOL_INDEX, ETHERTYPE_IPV4, IPPROTO_UDP, UDP_PORT, VERSION_BIT
from hina.wire.sockio import SOL_PACKET

SO_ATTACH_REUSEPORT_CBPF = 51
PACKET_FANOUT = 18
PACKET_FANOUT_DATA = 22
PACKET_FANOUT_CBPF = 6
PACKET_FANOUT_FLAG_IGNORE_OUTGOING = 0x4000
PACKET_FANOUT_FLAG_UNIQUEID = 0x2000

SKF_LL_OFF = (1 << 32) - 0x200000  # linux/filter.h: loads at this base + k read from the link-layer header
REPLY_TIMEOUT = 5.0  # seconds a pipe may take to answer a control request

# classic BPF opcodes (linux/filter.h)
_LD_H_ABS, _LD_B_ABS, _JEQ_K, _AND_K, _MOD_K, _RET_A, _RET_K = 0x28, 0x30, 0x15, 0x54, 0x94, 0x16, 0x06


def slot_program(pipes: int, at: int = AT_POOL_INDEX) -> list[tuple[int, int, int, int]]:
    """BPF returning the slot (the pool index at `at` without its version bit) mod `pipes`: the slot's pipe.
    A packet too short to hold the field ends the program with 0 (pipe 0, whose pipeline drops it as
    truncated)."""
    return [(_LD_H_ABS, 0, 0, at), (_AND_K, 0, 0, VERSION_BIT - 1), (_MOD_K, 0, 0, pipes), (_RET_A, 0, 0, 0)]


def frame_program(pipes: int) -> list[tuple[int, int, int, int]]:
    """The same on Ethernet frames: hina (IPv4 without options, UDP to 0x4E41) by slot, anything else to pipe 0.

    Offsets count from the Ethernet header through SKF_LL_OFF: a received frame reaches the
    fanout with its data already past the link-layer header, at the IPv4 header."""
    checks = [(_LD_H_ABS, SKF_LL_OFF + ETH_TYPE_AT, ETHERTYPE_IPV4),
              (_LD_B_ABS, SKF_LL_OFF + IP_VERSION_AT, IPV4_NO_OPTIONS),
              (_LD_B_ABS, SKF_LL_OFF + IP_PROTOCOL_AT, IPPROTO_UDP), (_LD_H_ABS, SKF_LL_OFF + UDP_DPORT_AT, UDP_PORT)]
    slot = slot_program(pipes, SKF_LL_OFF + HINA_AT + AT_POOL_INDEX)
    prog = []
    for i, (load, at, want) in enumerate(checks):
        left = 2 * (len(checks) - i) - 1 + len(slot)  # instructions after this jump, up to "ret 0"
        prog += [(load, 0, 0, at), (_JEQ_K, 0, left - 1, want)]
    return prog + slot + [(_RET_K, 0, 0, 0)]


def _fprog(program: list[tuple[int, int, int, int]]) -> tuple[bytes, Any]:
    """A struct sock_fprog for setsockopt, and the instruction array it points to (keep it alive)."""
    insns = (ctypes.c_uint64 * len(program))()
    for i, (code, jt, jf, k) in enumerate(program):
        insns[i] = struct.unpack("=Q", struct.pack("=HBBI", code, jt, jf, k))[0]
    return struct.pack("@HP", len(program), ctypes.addressof(insns)), insns


def reuseport_group(address: tuple[str, int], pipes: int, setup: Callable[[socket.socket], Any]) -> list[socket.socket]:
    """`pipes` UDP sockets bound to one address (SO_REUSEPORT), steered by slot; index i serves pipe i."""
    if address[1]:  # a named port: refuse one held by anyone, even another switch's SO_REUSEPORT group
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(address)
    socks: list[socket.socket] = []
    try:
        for i in range(pipes):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(sock)
            setup(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address if i == 0 else socks[0].getsockname())
        prog, keep = _fprog(slot_program(pipes))
        socks[0].setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, prog)
        del keep
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


def join_fanout(socks: list[socket.socket], pipes: int, program: list[tuple[int, int, int, int]] | None = None) -> bool:
    """Put one interface's bound AF_PACKET sockets (in pipe order) in a fanout group steered by slot
    (by `program`, if given, whose return value is the socket index).  Returns whether the group
    ignores the frames its members send (PACKET_FANOUT_FLAG_IGNORE_OUTGOING, kernels from 4.20)."""
    # group ids are shared by the whole network namespace: the kernel picks an unused one (UNIQUEID)
    # for the first socket, and the others join that
    first, ignoring = socks[0], True
    try:
        first.setsockopt(SOL_PACKET, PACKET_FANOUT, (PACKET_FANOUT_CBPF | PACKET_FANOUT_FLAG_IGNORE_OUTGOING
                                                     | PACKET_FANOUT_FLAG_UNIQUEID) << 16)
    except OSError:  # an older kernel: the packet type check drops our own frames
        first.setsockopt(SOL_PACKET, PACKET_FANOUT, (PACKET_FANOUT_CBPF | PACKET_FANOUT_FLAG_UNIQUEID) << 16)
        ignoring = False
    setting = first.getsockopt(SOL_PACKET, PACKET_FANOUT) & ~(PACKET_FANOUT_FLAG_UNIQUEID << 16)
    for sock in socks[1:]:
        sock.setsockopt(SOL_PACKET, PACKET_FANOUT, setting)
    prog, keep = _fprog(frame_program(pipes) if program is None else program)
    socks[0].setsockopt(SOL_PACKET, PACKET_FANOUT_DATA, prog)
    del keep
    return ignoring


class PipeDown(RuntimeError):
    """A pipe process died or stopped answering; the message names it."""


def merge(total: dict, part: dict) -> dict:
    """Add counters `part` into `total`: numbers summed, objects merged key by key."""
    for key, value in part.items():
        if isinstance(value, dict):
            merge(total.setdefault(key, {}), value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value
    return total


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "not answering"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class Pipes:
    """The parent's handle on the pipe processes, with the `Pipeline`'s control interface.

    `serve(index, channel)` runs in each forked child: serve pipe `index`'s
    data sockets and answer control requests (JSON, one per message) on
    `channel` until told to stop or the parent goes away.
    """

    def __init__(self, count: int, serve: Callable[[int, socket.socket], None],
                 log: Callable[[str], None] = lambda line: print(f"hina.emulator: {line}", file=sys.stderr,
                                                                 flush=True)):
        self.count = count
        self._log = log  # told once about each pipe found dead, however it was found
        self._seq = itertools.count(1)
        self._lock = threading.RLock()  # one request at a time per channel: the serving thread and callers share them
        self._down: dict[int, str] = {}
        self.procs: list[mp.process.BaseProcess] = []
        self._channels: list[socket.socket] = []
        ctx = mp.get_context("fork")  # the children inherit the bound sockets and the installed jobs
        parent_pid = os.getpid()
        try:
            for index in range(count):
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                proc = ctx.Process(target=_pipe_main, args=(serve, index, theirs, [*self._channels, ours], parent_pid),
                                   name=f"hina-pipe-{index}", daemon=True)
                proc.start()
                theirs.close()
                self.procs.append(proc)
                self._channels.append(ours)
        except BaseException:
            self.close()
            raise

    # -- health ------------------------------------------------------------------
    @property
    def sentinels(self) -> list[int]:
        return [p.sentinel for p in self.procs]

    def describe(self, index: int) -> str:
        proc = self.procs[index]
        return f"pipe {index} of {self.count} (pid {proc.pid})"

    def notice(self, index: int) -> str | None:
        """Record and log pipe `index` as down if its process ended; the line the first time, else None."""
        proc = self.procs[index]
        if index in self._down or proc.is_alive():
            return None
        return self._mark_down(index, f"{self.describe(index)} is down: {_describe_exit(proc.exitcode)}")

    def _mark_down(self, index: int, line: str) -> str:
        self._down[index] = line
        self._log(line)
        return line

    def poll(self) -> list[str]:
        """Lines for pipes found dead since the last look."""
        return [line for i in range(self.count) if (line := self.notice(i))]

    @property
    def down(self) -> list[str]:
        self.poll()
        return [self._down[i] for i in sorted(self._down)]

    def status(self) -> dict:
        down = self.down
        return {"pipes": self.count, "alive": self.count - len(down), "down": down,
                "pids": [p.pid for p in self.procs]}

    def check(self) -> None:
        down = self.down
        if down:
            raise PipeDown(f"{'; '.join(down)}; that pipe's slots are lost until the switch restarts")

    # -- requests ------------------------------------------------------------------
    def _ask(self, index: int, request: dict) -> dict:
        with self._lock:
            return self._ask_locked(index, request)

    def _ask_locked(self, index: int, request: dict) -> dict:
        seq = next(self._seq)
        channel = self._channels[index]
        try:
            channel.send(json.dumps({**request, "seq": seq}).encode())
            deadline = time.monotonic() + REPLY_TIMEOUT
            while (left := deadline - time.monotonic()) > 0:
                channel.settimeout(left)
                raw = channel.recv(1 << 22)
                if not raw:
                    break
                reply = json.loads(raw)
                if reply.get("seq") == seq:
                    return reply
        except OSError:
            pass
        self.procs[index].join(0.2)
        if index not in self._down:
            self._mark_down(index, f"{self.describe(index)} is down: {_describe_exit(self.procs[index].exitcode)}")
        raise PipeDown(f"{self._down[index]}; that pipe's slots are lost until the switch restarts")

    def _all(self, request: dict) -> list[dict]:
        """Send `request` to every pipe; their replies, or ValueError with the first refusal."""
        with self._lock:
            self.check()
            replies = [self._ask(i, request) for i in range(self.count)]
        for i, reply in enumerate(replies):
            if not reply.get("ok"):
                raise ValueError(reply.get("error", f"pipe {i} refused"))
        return replies

    # -- the Pipeline's control interface -------------------------------------------
    def add_job(self, cfg: JobConfig) -> None:
        self._all({"op": "add_job", "job": cfg.to_config()})

    def join(self, cfg: JobConfig, member: Member) -> Member | None:
        replies = self._all({"op": "join", "job": cfg.to_config(), "member": member.to_config()})
        replaced = replies[0].get("replaced")  # every pipe holds the same members
        return Member.from_config(replaced) if replaced else None

    def leave(self, job_id: int, worker_id: int) -> bool:
        replies = self._all({"op": "leave", "job_id": job_id, "worker_id": worker_id})
        return bool(replies[0].get("removed"))  # every pipe holds the same members

    def remove_job(self, job_id: int) -> None:
        self._all({"op": "remove_job", "job_id": job_id})

    def reset_job(self, job_id: int) -> None:
        self._all({"op": "reset_job", "job_id": job_id})

    def configure(self, topology: Topology) -> None:
        self._all({"op": "configure", "topology": topology.to_config()})

    def counters(self) -> dict:
        """Every live pipe's counters summed, and each pipe's own (with its pid and health) in "pipes"."""
        with self._lock:
            return self._counters()

    def _counters(self) -> dict:
        total: dict = {"frames": 0, "drops": {}, "jobs": {}}
        per_pipe = []
        for i in range(self.count):
            entry: dict[str, Any] = {"pipe": i, "pid": self.procs[i].pid}
            if i not in self._down:
                try:
                    counters = self._ask(i, {"op": "counters"})["counters"]
                    merge(total, counters)
                    entry.update(counters)
                except PipeDown:
                    pass
            entry["alive"] = i not in self._down
            per_pipe.append(entry)
        total["jobs"] = {int(k): v for k, v in total["jobs"].items()}
        total["pipes"] = per_pipe
        total["pipes_down"] = self.down
        return total

    def close(self) -> None:
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join(2.0)
            if proc.is_alive():
                proc.kill()
                proc.join(2.0)
        for channel in self._channels:
            channel.close()


def _pipe_main(serve, index: int, channel: socket.socket, parents_ends: list[socket.socket], parent_pid: int) -> None:
    for end in parents_ends:  # so that this pipe sees EOF on its channel when the parent goes
        end.close()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C reaches the whole group: the parent stops the pipes
    try:  # die with the parent, whatever kills it (PR_SET_PDEATHSIG)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:
        os._exit(1)
    try:
        serve(index, channel)
    except Exception as exc:  # reported by the parent as this pipe's exit; say why here
        print(f"hina.emulator: pipe {index} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(1)
