"""Runs packet test vectors on BMv2 (`simple_switch_grpc`) over veth pairs, configured by the controller.

Needs p4c and simple_switch_grpc on PATH and root; `tests/test_vectors.py`
skips otherwise.  Each case gets a fresh switch (fresh registers): veth
pairs hs<p>/ht<p> per host port p, the switch on the hs ends, the test
sending and capturing on the ht ends with AF_PACKET sockets.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from pathlib import Path

from switch_emulator.controller import P4_BUILD, Bmv2Target
from switch_emulator.topology import Topology
from veth import veth_pairs

ROOT = Path(__file__).resolve().parent.parent
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SETTLE = 0.4  # seconds to wait for BMv2's output after each frame


class Bmv2Harness:
    def __init__(self, grpc_port: int = 50151, thrift_port: int = 9190):
        self.grpc_port, self.thrift_port = grpc_port, thrift_port

    @classmethod
    def build(cls) -> "Bmv2Harness":
        proc = subprocess.run(["make", "-C", str(ROOT), "p4"], capture_output=True, text=True)
        if proc.returncode != 0 or not (P4_BUILD / "hina.json").exists():
            raise RuntimeError(f"make p4 failed:\n{proc.stdout}\n{proc.stderr}")
        return cls()

    def close(self) -> None:
        pass

    def run_case(self, case: dict) -> tuple[list[tuple[int, bytes]], dict[str, int]]:
        topo = Topology.from_config(case["topology"])
        ports = [h.port for h in topo.hosts]
        with veth_pairs([(f"hs{p}", f"ht{p}") for p in ports]):
            cmd = ["simple_switch_grpc", "--device-id", "0", "--thrift-port", str(self.thrift_port), "--no-p4"]
            for p in ports:
                cmd += ["-i", f"{p}@hs{p}"]
            cmd += ["--", "--grpc-server-addr", f"127.0.0.1:{self.grpc_port}"]
            switch = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            socks = {}
            target = None
            try:
                _wait_for_port(self.grpc_port, switch)
                target = Bmv2Target(f"127.0.0.1:{self.grpc_port}", thrift_port=self.thrift_port)
                target.configure(topo)
                for p in ports:
                    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                    s.bind((f"ht{p}", 0))
                    s.setblocking(False)
                    socks[p] = s
                _drain(socks)
                out: list[tuple[int, bytes]] = []
                for pkt in case["packets"]:
                    socks[pkt["port"]].send(bytes.fromhex(pkt["frame"]))
                    time.sleep(SETTLE)
                    out += _drain(socks)
                return out, target.counters()["drops"]
            finally:
                for s in socks.values():
                    s.close()
                if target is not None:
                    with contextlib.suppress(Exception):
                        target.close()
                switch.terminate()
                switch.wait(10)


def _drain(socks: dict[int, socket.socket]) -> list[tuple[int, bytes]]:
    got = []
    for port, s in socks.items():
        while True:
            try:
                data, addr = s.recvfrom(65536)
            except BlockingIOError:
                break
            if addr[2] != PACKET_OUTGOING:
                got.append((port, data))
    return got


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"simple_switch_grpc exited: {proc.stderr.read()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.2)
    raise RuntimeError(f"simple_switch_grpc did not open its gRPC port {port} within {timeout} s")
