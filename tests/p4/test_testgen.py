"""p4testgen's tests of both P4 programs (tests/testgen/, written by tools/testgen.py): the BMv2 program's
on simple_switch_grpc through hina's own P4Runtime client, the TNA program's on its model, and the stored
tests against what p4testgen generates with the same seed.

A generated test is one frame in (a port, its bytes) after the table entries and default actions p4testgen
chose for the path it took, and the frame it expects out (a port, bytes and a don't-care mask) or none (the
frame is dropped).  Each starts from a fresh switch: empty registers, no table entries but its own, no
multicast group (p4testgen does not model multicast: it expects a frame sent to a group to be dropped,
and a switch with no such group drops it).  A test the target fails is a discrepancy between p4testgen's
reading of the program and the target's: docs/p4.md and docs/tofino.md list each one found and what
changed.
"""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import testgen  # tools/, on the path by tests/conftest.py
import tna_model
import veth_harness

ROOT = Path(__file__).resolve().parents[2]


def stored(target: str) -> dict:
    path = testgen.stored(target)
    return json.loads(path.read_text()) if path.exists() else {"tests": []}


BMV2_TESTS = stored("bmv2")["tests"]
TOFINO_TESTS = stored("tofino")["tests"]


def matches(expected: dict, port: int, frame: bytes) -> bool:
    """Whether `frame` out of `port` is the expected one: its port and length, and every byte under the
    mask (a 0 nibble is don't-care)."""
    want, mask = bytes.fromhex(expected["frame"]), bytes.fromhex(expected["mask"])
    return (port == expected["port"] and len(frame) == len(want)
            and all(f & m == w & m for f, w, m in zip(frame, want, mask, strict=True)))


def check(test: dict, out: list[tuple[int, bytes]]) -> None:
    """The frames a target sent for `test` are the ones it expects, each once."""
    left = list(out)
    for expected in test["expected"]:
        found = next((i for i, (port, frame) in enumerate(left) if matches(expected, port, frame)), None)
        assert found is not None, (f"{test['name']}: expected out of port {expected['port']}: {expected['frame']} "
                                   f"(mask {expected['mask']}); got {[(p, f.hex()) for p, f in out]}")
        left.pop(found)
    assert not left, f"{test['name']}: unexpected {[(p, f.hex()) for p, f in left]}"


def short(name: str) -> str:
    """A control-plane name's last component (`HinaIngress.job_config.jobs` -> `jobs`)."""
    return name.rsplit(".", 1)[-1]


# -- the stored tests are p4testgen's ------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("target", [pytest.param("bmv2", marks=pytest.mark.testgen),
                                    pytest.param("tofino", marks=pytest.mark.testgen_tofino)])
def test_the_stored_tests_are_what_p4testgen_generates(target):
    """tests/testgen/<target>.json is what tools/testgen.py writes now: the same tests for the same seed."""
    fresh = testgen.generate(target)
    assert testgen.comparable(stored(target)) == testgen.comparable(fresh), "run python tools/testgen.py"


def test_the_stored_tests_say_how_they_were_made():
    for target in testgen.TARGETS:
        data = stored(target)
        if not data["tests"]:
            continue
        assert data["seed"] == testgen.SEED and data["max_tests"] == testgen.MAX_TESTS
        assert data["program"] == testgen.TARGETS[target]["program"]
        assert len(data["tests"]) <= data["max_tests"] and all(t["packet"] for t in data["tests"])


# -- the TNA program's tests on its model ------------------------------------------------------------

def model_for(test: dict) -> tna_model.TnaModel:
    """The model with the test's entries and defaults, one pass: a frame sent to the recirculation port
    leaves there (p4testgen expects it out of that port, the bridge header first)."""
    entries = [types.SimpleNamespace(table=short(e["table"]), match=e["match"], action=short(e["action"]),
                                     params=e["params"]) for e in test["entries"]]
    defaults = {short(d["table"]): (short(d["action"]), d["params"]) for d in test["defaults"]}
    model = tna_model.TnaModel(None, entries=entries, defaults=defaults)
    model.recirculate = False
    return model


@pytest.mark.parametrize("test", TOFINO_TESTS, ids=[t["name"] for t in TOFINO_TESTS])
def test_the_tna_model_passes_p4testgens_test(test):
    model = model_for(test)
    check(test, model.process(test["packet"]["port"], bytes.fromhex(test["packet"]["frame"])))


# -- the BMv2 program's tests on simple_switch_grpc ------------------------------------------------

GRPC_PORT = 50151


class GeneratedEntries:
    """What veth_harness.run_case configures a switch through, for a generated test: its table entries
    (INSERT) and default actions (MODIFY of the default entry) over hina's P4Runtime client."""

    def __init__(self, test: dict):
        from hina.control.controller import P4_BUILD
        from hina.control.p4rt import P4Info, P4RuntimeClient

        self.test, self.info = test, P4Info.load(P4_BUILD / "hina.p4info.txtpb")
        self.client = P4RuntimeClient(f"127.0.0.1:{GRPC_PORT}", timeout=20)

    def configure(self, _topology) -> None:
        from hina.control.p4rt import ELECTION_ID
        from hina.control.p4rt_proto import p4runtime

        for e in self.test["entries"]:
            self.client.write([self.info.table_entry(e["table"], e["match"], e["action"], e["params"])],
                              what=f"inserting into {e['table']}")
        for d in self.test["defaults"]:
            entity = self.info.table_entry(d["table"], {}, d["action"], d["params"])
            entity.table_entry.is_default_action = True
            req = p4runtime.WriteRequest(device_id=self.client.device_id)
            req.election_id.high, req.election_id.low = ELECTION_ID
            update = req.updates.add()
            update.type = p4runtime.Update.MODIFY
            update.entity.CopyFrom(entity)
            self.client.stub.Write(req)

    def counters(self) -> dict:
        return {"drops": {}}  # p4testgen's tests say nothing of counters

    def close(self) -> None:
        self.client.close()


def as_case(test: dict) -> dict:
    """The generated test as veth_harness.run_case replays a vector: a host on every port it names."""
    ports = sorted({test["packet"]["port"], *(e["port"] for e in test["expected"])})
    hosts = [{"port": p, "mac": f"02:00:00:00:01:{p & 0xFF:02x}", "ip": f"10.1.{p >> 8}.{p & 0xFF}"} for p in ports]
    return {"topology": {"switch": {"mac": "02:00:00:00:01:fe", "ip": "10.1.255.254"}, "hosts": hosts, "jobs": []},
            "packets": [test["packet"]]}


def run_on_bmv2(test: dict, log: Path | None = None) -> list[tuple[int, bytes]]:
    """Every frame a fresh simple_switch_grpc sends for `test` (on veth pairs for the ports it names)."""
    def start(ports):
        proc, target = veth_harness.start_bmv2(ports, grpc_port=GRPC_PORT, log=log)  # the program pushed
        target.close()
        return proc, GeneratedEntries(test)

    return veth_harness.run_case(as_case(test), start, settle=0.3)[0]


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("test", BMV2_TESTS, ids=[t["name"] for t in BMV2_TESTS])
def test_bmv2_passes_p4testgens_test(p4_build, test):
    check(test, run_on_bmv2(test))
