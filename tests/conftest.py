"""Shared pytest configuration: make the repository root importable and set hypothesis profiles."""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=400)
settings.load_profile(os.environ.get("HINA_HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def make_switch():
    """UDP emulators on loopback, each in a thread: make_switch(pipes=1, batch=None, **impairments)
    (batch None: recvmmsg/sendmmsg where available; False: one system call per packet); stopped after the test."""
    from switch_emulator import ImpairmentConfig, Pipeline, UdpSwitch

    switches = []

    def make(pipes: int = 1, batch: bool | None = None, **impair):
        sw = UdpSwitch(Pipeline(), pipes=pipes, impair=ImpairmentConfig(**impair) if impair else None, batch=batch)
        sw.start_thread()
        switches.append(sw)
        return sw

    yield make
    for sw in switches:
        sw.stop()
        sw.close()
