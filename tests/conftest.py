"""What every test shares: import paths, markers and the skips they stand for, hypothesis profiles, fixtures.

Markers (register here, apply in the test modules):

- `root`: needs root (network namespaces, veth pairs, raw sockets, Mininet); skipped otherwise.
- `mininet`: needs Debian's Mininet too; skipped, with the reason, where it is missing.
- `bmv2`: needs p4c and simple_switch_grpc (`make p4` and the P4 toolchain); skipped otherwise.
- `torch`: needs PyTorch (the `torch` extra); skipped otherwise.
- `tofino`: needs Intel's open-source Tofino back end of p4c (`tools/p4-toolchain.sh --tofino`); skipped otherwise.
- `testgen`, `testgen_tofino`: need p4testgen for BMv2 (/usr/local/bin/p4testgen) or for Tofino
  (/opt/p4c-tofino/bin/p4testgen), built by `tools/p4-toolchain.sh --testgen` (with `--tofino` for the
  latter); skipped otherwise.
- `slow`: many seconds, a fleet of processes or real sockets at length; `make test-fast` leaves these out.

This is the one place that edits `sys.path`: the tests' own helpers (`helpers`,
`make_vectors`, `p4_source`, `testgen_harness`, `tna_model`, `veth`, `veth_harness`, in this
folder) and the documentation tooling in `tools/` are imported by name.  Everything else is the installed
`hina` package.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
for path in (TESTS, ROOT / "tools"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

settings.register_profile(
    "default", deadline=None, max_examples=40,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=400)
settings.load_profile(os.environ.get("HINA_HYPOTHESIS_PROFILE", "default"))

MARKERS = {
    "root": "needs root (namespaces, veth pairs, raw sockets)",
    "mininet": "needs Debian's Mininet (and root)",
    "bmv2": "needs p4c and simple_switch_grpc",
    "torch": "needs PyTorch (the torch extra)",
    "tofino": "needs /opt/p4c-tofino/bin/p4c (tools/p4-toolchain.sh --tofino)",
    "testgen": "needs p4testgen for BMv2, /usr/local/bin/p4testgen (tools/p4-toolchain.sh --testgen)",
    "testgen_tofino": "needs p4testgen for Tofino, /opt/p4c-tofino/bin/p4testgen "
                      "(tools/p4-toolchain.sh --tofino --testgen)",
    "slow": "takes many seconds or a fleet of processes; make test-fast leaves it out",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


@functools.cache
def missing(marker: str) -> str | None:
    """Why tests with `marker` cannot run on this machine, or None."""
    if marker in ("root", "mininet") and os.geteuid() != 0:
        return "needs root"
    if marker == "mininet":
        try:
            from hina.mininet import hina_net  # imports Debian's package, linked into the venv by make install
        except ImportError as exc:
            return str(exc)
        return hina_net.missing_requirements()
    if marker == "bmv2":
        tools = [t for t in ("p4c", "simple_switch_grpc") if shutil.which(t) is None]
        if tools:
            return f"{' and '.join(tools)} not on PATH (build the P4 toolchain: tools/p4-toolchain.sh, docs/p4.md)"
    if marker == "tofino":
        import tofino_report  # tools/

        if tofino_report.compiler() is None:
            return "needs /opt/p4c-tofino/bin/p4c (tools/p4-toolchain.sh --tofino)"
    if marker in ("testgen", "testgen_tofino"):
        import testgen  # tools/

        target = "bmv2" if marker == "testgen" else "tofino"
        p4testgen = testgen.binary(target)
        if p4testgen is None:
            return f"no p4testgen at {testgen.TARGETS[target]['binary']} ({testgen.TARGETS[target]['build']})"
        return testgen.unfixed(target, p4testgen)
    if marker == "torch":
        try:
            import torch  # noqa: F401
        except ImportError:
            return "PyTorch is not installed (pip install -e '.[torch]')"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in ("root", "mininet", "bmv2", "torch", "tofino", "testgen", "testgen_tofino"):
        if item.get_closest_marker(marker) is not None:
            why = missing(marker)
            if why is not None:
                pytest.skip(f"{marker}: {why}")


@pytest.fixture(scope="session")
def p4_build() -> Path:
    """p4/build/ with the P4 program compiled for BMv2 (`make p4`), once per session (`bmv2` tests)."""
    from hina.control.controller import P4_BUILD

    proc = subprocess.run(["make", "-C", str(ROOT), "p4"], capture_output=True, text=True)
    if proc.returncode != 0 or not (P4_BUILD / "hina.json").exists():
        raise RuntimeError(f"make p4 failed:\n{proc.stdout}\n{proc.stderr}")
    return P4_BUILD


@pytest.fixture
def make_switch():
    """UDP emulators on loopback, each in a thread: make_switch(pipes=1, batch=None, **impairments)
    (batch None: recvmmsg/sendmmsg where available; False: one system call per packet); stopped after the test."""
    from hina.emulator import ImpairmentConfig, Pipeline, UdpSwitch

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


@pytest.fixture(scope="session")
def xdp_program():
    """The XDP switch's program, loaded once per session (the verifier takes a second or two) and shared:
    each `XdpFrameSwitch(..., program=xdp_program)` empties it first.  Skipped, with the reason, where this
    process cannot build or load it (clang, libbpf, root)."""
    from hina.emulator.xdp.build import cannot_load

    why = cannot_load()
    if why is not None:
        pytest.skip(f"the XDP switch: {why}")
    from hina.emulator.xdp.tables import Program

    program = Program(slots=4096)
    yield program
    program.close()
