"""`mininet/run.py --cleanup ID`: a crashed run's leftovers go (what ran on its hosts included), another
run's beside it stay."""

from __future__ import annotations

import subprocess
import time

import pytest

try:
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.nodelib import LinuxBridge

    from hina.mininet import hina_net
except ImportError:  # Mininet (Debian package) absent: the `mininet` marker skips every test here
    hina_net = None

pytestmark = [pytest.mark.mininet, pytest.mark.root]


def _star(run: str) -> Mininet:
    names = hina_net.Names(run)
    net = Mininet(topo=hina_net.StarTopo(workers=2, names=names), switch=LinuxBridge, controller=None)
    net.start()
    return net


def _links(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines()
            if line.split(":")[1].strip().startswith(prefix)]


def test_cleanup_of_a_crashed_run_ends_its_hosts_processes_and_links_and_spares_another_run():
    setLogLevel("critical")
    crashed, other = hina_net.new_run_id(), hina_net.new_run_id()
    nets = {run: _star(run) for run in (crashed, other)}
    try:
        # a worker on each host, in a session of its own as Mininet's popen makes it
        sleepers = {run: [h.popen(["sleep", "300"]) for h in net.hosts] for run, net in nets.items()}
        shells = [h.shell for h in nets[crashed].hosts]  # the host shells: Popen objects of this process
        hina_net.cleanup(crashed)  # the crashed run is never stopped: only its id is known
        deadline = time.monotonic() + 5
        while any(p.poll() is None for p in (*sleepers[crashed], *shells)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(p.poll() is not None for p in sleepers[crashed]), "a crashed run's worker survived its cleanup"
        assert all(p.poll() is not None for p in shells), "a crashed run's host shell survived its cleanup"
        assert not [n for n in _links(f"{crashed}{hina_net.SWITCH}") if "-eth" in n]
        assert all(p.poll() is None for p in sleepers[other]), "the cleanup touched another run's processes"
        assert len([n for n in _links(f"{other}{hina_net.SWITCH}") if "-eth" in n]) == 2
        assert nets[other].hosts[0].cmd("echo alive").strip() == "alive"
    finally:
        for p in (p for group in sleepers.values() for p in group):
            p.kill()
        nets[other].stop()
        subprocess.run(["ip", "link", "del", f"{crashed}{hina_net.SWITCH}"], capture_output=True)  # its bridge
