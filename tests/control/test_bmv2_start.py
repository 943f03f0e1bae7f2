"""Starting simple_switch_grpc on free ports: a port some other process holds, between the check and the
switch's bind, costs a restart on other ports, never a switch that stays up without its servers."""

from __future__ import annotations

import socket
import time

import pytest

from hina.control import bmv2
from hina.wire import sockio


def test_free_tcp_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    with open(sockio.EPHEMERAL_PORTS) as f:
        low = int(f.read().split()[0])
    ports = sockio.free_tcp_ports(8)
    assert len(set(ports)) == 8 and all(1024 <= p < low for p in ports)
    for p in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


@pytest.mark.bmv2
@pytest.mark.parametrize("server", ["grpc", "thrift"])
def test_a_taken_port_restarts_the_switch_on_others(server, p4_build, tmp_path, monkeypatch):
    """The first ports offered include one a listener holds: the switch comes up on the second pair,
    its P4Runtime server serving the pushed program."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        offers = []

        def offer(n):
            ports = sockio.free_tcp_ports(n)
            if not offers:
                ports[0 if server == "grpc" else 1] = taken
            offers.append(ports)
            return ports

        monkeypatch.setattr(bmv2, "free_tcp_ports", offer)
        proc, target = bmv2.start_bmv2([], tmp_path / "bmv2.log")
        try:
            assert len(offers) == 2 and taken not in offers[1]
            assert target.counters() == {"drops": {}}  # over P4Runtime (gRPC)
            assert "port" in target.cli(["show_ports"]).lower()  # over Thrift
            assert bmv2.PORT_TAKEN not in (tmp_path / "bmv2.log").read_text()
        finally:
            target.close()
            bmv2.stop_switch(proc)
        assert proc.poll() is not None


def test_a_switch_that_exits_at_once_is_reported_with_its_status_and_log(tmp_path):
    """A binary that exits (here `false`) fails the start at once, naming its exit status and its log, instead
    of waiting out the timeout."""
    log = tmp_path / "bmv2.log"
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"false exited with status 1 .*; see {log}"):
        bmv2.start_bmv2([], log, binary="false", timeout=30)
    assert time.monotonic() - start < 10
