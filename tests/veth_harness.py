"""Replays packet test vectors on a real switch process over veth pairs (root only).

Each case gets fresh veth pairs hs<p>/ht<p> per host port p and a fresh
switch on the hs ends, configured through the controller from the case's
topology; the test sends on and captures from the ht ends with AF_PACKET.
Three switches: the emulator's raw backend (`python -m hina.emulator
--raw ...`), the same with the rules in the kernel (`--xdp`) and BMv2
(`simple_switch_grpc`, after `make p4`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from veth import veth_pairs

from hina.control import bmv2
from hina.control.controller import Bmv2Target, EmulatorTarget
from hina.control.topology import Topology

ROOT = Path(__file__).resolve().parent.parent
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def start_emulator(ports, pipes=1, batch=True, extra=()):
    proc = subprocess.Popen([sys.executable, "-m", "hina.emulator", f"--pipes={pipes}",
                             *[f"--raw={p}=hs{p}" for p in ports], *([] if batch else ["--no-batch"]), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"the emulator did not start: {proc.stderr.read()}")
    return proc, EmulatorTarget(tuple(json.loads(line)["control"]))


def start_xdp(ports):
    """The XDP switch (`python -m hina.emulator --xdp`) on the hs ends; the ht ends take its redirected frames
    (GRO on: a veth delivers XDP_REDIRECTed frames only where its peer has NAPI)."""
    for p in ports:
        subprocess.run(["ethtool", "-K", f"ht{p}", "gro", "on"], check=True, capture_output=True)
    return start_emulator(ports, extra=["--xdp"])


def start_bmv2(ports, log: Path | None = None, target=Bmv2Target):
    """simple_switch_grpc on hs<p> per port, the program pushed by `target` (a Bmv2Target, or a class made
    like one); with `log`, every step it takes (its trace log, each primitive and condition with its line in
    the P4 source) into that file."""
    output = Path(tempfile.gettempdir()) / f"hina-veth-bmv2-{os.getpid()}.log"  # each start writes it anew
    return bmv2.start_bmv2(((p, f"hs{p}") for p in ports), output, trace=log, target=target)


def run_case(case: dict, start, settle: float) -> tuple[list[tuple[int, bytes]], dict[str, int]]:
    """Send the case's frames one by one, `settle` seconds apart (frames on different ports must reach
    the switch in order); return every frame seen leaving the switch and its drop counters."""
    topo = Topology.from_config(case["topology"])
    ports = [h.port for h in topo.hosts]
    with veth_pairs([(f"hs{p}", f"ht{p}") for p in ports]):
        proc, target = start(ports)
        socks = {}
        try:
            target.configure(topo)
            for p in ports:
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                s.bind((f"ht{p}", 0))
                s.setblocking(False)
                socks[p] = s
            time.sleep(settle)
            _drain(socks)
            out: list[tuple[int, bytes]] = []
            for pkt in case["packets"]:
                socks[pkt["port"]].send(bytes.fromhex(pkt["frame"]))
                time.sleep(settle)
                out += _drain(socks)
            return out, target.counters()["drops"]
        finally:
            for s in socks.values():
                s.close()
            with contextlib.suppress(Exception):
                target.close()
            proc.terminate()
            proc.wait(10)


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
