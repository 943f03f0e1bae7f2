"""The emulator's control port drives the XDP switch's maps: configure, join, counters, jobs, reset, remove,
refusals in one line, tokens and leases, and the kernel's run-time statistics in `counters` and `status`.
Frames go through BPF_PROG_TEST_RUN (an `XdpFrameSwitch` as the switch's data plane); no network."""

import subprocess
import sys
import time

import pytest

from hina.control import ControlClient, ControlError
from hina.control.config import JobConfig, Member
from hina.emulator import fuzz
from hina.emulator.xdp import build, layout
from hina.wire.headers import pack_header

pytestmark = pytest.mark.skipif(build.cannot_load() is not None, reason=f"the XDP switch: {build.cannot_load()}")
K = fuzz.K


@pytest.fixture
def switch(xdp_program):
    from hina.emulator.xdp.switch import XdpSwitch
    from hina.emulator.xdp.testrun import XdpFrameSwitch

    sw = XdpSwitch({}, dataplane=XdpFrameSwitch(program=xdp_program))
    sw.start_thread()
    yield sw
    sw.close()


def update(port: int, job: int, worker: int, slot: int, value: int) -> bytes:
    return fuzz.wrap(port, pack_header(0, 0, job, worker, 0, slot, 0, K, 1) + value.to_bytes(4, "big") * K)


def test_a_topology_jobs_and_counters_through_the_control_port(switch):
    with ControlClient(switch.control_address) as client:
        client.request("configure", topology=fuzz.topology().to_config())
        frames = switch.dataplane
        assert frames.process(1, update(1, fuzz.VICTIM, 0, 0, 3)) == []
        out = frames.process(2, update(2, fuzz.VICTIM, 1, 0, 4))
        assert sorted(port for port, _ in out) == [1, 2] and all(f[58:62] == (7).to_bytes(4, "big") for _, f in out)
        counters = client.counters()
        assert counters["frames"] == 2 and counters["jobs"][fuzz.VICTIM]["results"] == 1
        assert counters["profile"]["xdp_ingress_runs"] >= 2  # the kernel's statistics, while the switch runs
        listing = {job["job_id"]: job for job in client.jobs()}
        assert listing[fuzz.VICTIM]["origin"] == "configure" and listing[fuzz.VICTIM]["pinned"]
        assert listing[fuzz.VICTIM]["state"] == "active"
        assert "xdp_egress_s" in client.status()["xdp"]
        frames.process(1, update(1, fuzz.VICTIM, 0, 1, 3))
        client.reset_job(fuzz.VICTIM)
        assert frames.program.slot(1).copies[0].bitmap == 0
        client.remove_job(fuzz.VICTIM)
        assert frames.process(1, update(1, fuzz.VICTIM, 0, 2, 3)) == []
        assert client.counters()["drops"] == {"unknown_job": 1}


def test_joins_place_jobs_and_refuse_what_the_program_cannot_hold(switch):
    with ControlClient(switch.control_address) as client:
        client.request("configure", topology={**fuzz.topology().to_config(), "jobs": []})
        client.join(JobConfig(9, 2, K, 100, 8), Member(0, 1))
        client.join(JobConfig(9, 2, K, 100, 8), Member(1, 2))
        frames = switch.dataplane
        frames.process(1, update(1, 9, 0, 100, 1))
        assert len(frames.process(2, update(2, 9, 1, 100, 2))) == 2
        with pytest.raises(ControlError) as refused:
            client.join(JobConfig(10, 2, layout.MAX_WORDS + 1, 0, 8), Member(0, 3))
        assert "the XDP switch takes at most 865" in str(refused.value) and "\n" not in str(refused.value)
        assert client.leave(9, 0) is False and client.leave(9, 1) is True  # the last member's leaving removes it
        assert 9 not in switch.pipeline.jobs


def test_a_token_guards_the_maps_and_a_lease_frees_them(switch):
    switch.set_token(b"operator secret")
    with ControlClient(switch.control_address, token=None) as client:
        with pytest.raises(ControlError, match="no valid token"):
            client.add_job(JobConfig(4, 2, K, 0, 8, (Member(0, 1),)))
        assert client.counters()["frames"] == 0  # reads stay open
    with ControlClient(switch.control_address, token=b"operator secret") as client:
        client.join(JobConfig(4, 2, K, 0, 8), Member(0, 1))
        switch.set_lease(0.5)
        deadline = time.monotonic() + 5
        while 4 in switch.pipeline.jobs and time.monotonic() < deadline:
            time.sleep(0.1)
        assert 4 not in switch.pipeline.jobs  # no member heard for 0.5 s: removed, its slots free


@pytest.mark.parametrize("flags,message", [
    (["--xdp"], "--xdp runs on raw interfaces: give them with --raw PORT=IFNAME"),
    (["--raw", "1=lo", "--xdp", "--pipes", "2"],
     "--xdp runs in the kernel on every CPU a frame arrives on: no --pipes, no slow pipe and no impairments in the "
     "switch (use the links': tc netem)"),
    (["--raw", "1=nosuch0", "--xdp"], "--raw 1=nosuch0: no interface 'nosuch0' here"),
])
def test_a_bad_xdp_flag_is_one_line_and_status_2(flags, message):
    out = subprocess.run([sys.executable, "-m", "hina.emulator", *flags], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr.splitlines()) == (2, [f"hina.emulator: {message}"]), out.stderr


@pytest.mark.root
@pytest.mark.slow
def test_an_interface_whose_peer_takes_jumbo_frames_is_refused_in_one_line():
    """The kernel attaches the program to a veth only while its peer's MTU is at most 3506: the switch says so."""
    from veth import veth_pairs

    with veth_pairs([("xj0", "xj1")]):
        subprocess.run(["ip", "link", "set", "xj1", "mtu", "9000"], check=True)
        out = subprocess.run([sys.executable, "-m", "hina.emulator", "--raw", "1=xj0", "--xdp"], capture_output=True,
                             text=True, timeout=60)
    assert (out.returncode, out.stderr.splitlines()) == (2, [
        "hina.emulator: interface xj0: the kernel refused the XDP program (Numerical result out of range): a veth "
        "takes an XDP program without multi-buffer support only while its peer's MTU is at most 3506"]), out.stderr
