"""Starting BMv2: `simple_switch_grpc` with no program, on interfaces and free ports of its own, until its
P4Runtime server answers (the controller then pushes p4/hina.p4 through a `Bmv2Target`).

simple_switch_grpc does not exit when a port it binds is taken: its gRPC or Thrift server is simply not
there, and it says so in its log. So a start reads the log, and on a taken port stops the process and
starts again on other ports.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from hina.wire.sockio import free_tcp_ports

from .client import ControlError
from .controller import Bmv2Target

BINARY = "simple_switch_grpc"
PORT_TAKEN = "Address already in use"  # what its gRPC and Thrift servers log when their bind fails
START_TRIES = 3


def start_bmv2(interfaces: Iterable[tuple[int, str]], log: Path, *, binary: str = BINARY,
               trace: Path | None = None, target: Callable[..., Bmv2Target] = Bmv2Target,
               timeout: float = 60.0) -> tuple[subprocess.Popen, Bmv2Target]:
    """simple_switch_grpc on each (port number, interface name), its output into `log` (with `trace`: its
    trace log, each primitive and condition with its line in the P4 source, into that file); the process and
    the `target` (a Bmv2Target, or a class made like one) connected to it. Raises RuntimeError, naming the
    log, when it exits, stays silent `timeout` seconds, or finds its ports taken START_TRIES times."""
    interfaces = list(interfaces)
    for _ in range(START_TRIES):
        grpc_port, thrift_port = free_tcp_ports(2)
        cmd = [binary, "--device-id", "0", "--thrift-port", str(thrift_port), "--no-p4"]
        if trace is not None:
            cmd += ["--log-file", str(trace), "--log-level", "trace", "--log-flush"]
        for port, name in interfaces:
            cmd += ["-i", f"{port}@{name}"]
        cmd += ["--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"]
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        connected = _connect(proc, log, f"127.0.0.1:{grpc_port}", thrift_port, target, timeout)
        if connected is not None:
            return proc, connected
        stop_switch(proc)
    raise RuntimeError(f"{binary} found a port it binds taken {START_TRIES} times; see {log}")


def _connect(proc: subprocess.Popen, log: Path, grpc_addr: str, thrift_port: int,
             target: Callable[..., Bmv2Target], timeout: float) -> Bmv2Target | None:
    """The target once the P4Runtime server answers (each try waits up to 2 s); None where the log says a
    port was taken (Thrift's bind fails on a thread of its own, so the log is read after an answer too)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            connected = target(grpc_addr, thrift_port=thrift_port, timeout=2)
        except ControlError as exc:
            if PORT_TAKEN in _text(log):
                return None
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args[0]} exited with status {proc.returncode} ({exc}); see {log}") from None
            if time.monotonic() > deadline:
                stop_switch(proc)
                raise RuntimeError(f"{proc.args[0]} did not come up within {timeout:g} s ({exc}); see {log}") from None
            time.sleep(0.2)
            continue
        if PORT_TAKEN not in _text(log):
            return connected
        with contextlib.suppress(Exception):
            connected.close()
        return None


def _text(log: Path) -> str:
    return Path(log).read_text(errors="replace")


def stop_switch(proc: subprocess.Popen | None) -> None:
    """End a switch process: terminate, and kill if it lingers."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
