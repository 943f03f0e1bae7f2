"""Runs p4testgen's tests (tests/testgen/, written by tools/testgen.py) on a target, and tells what of a P4
program a run reached: tests/p4/test_testgen.py's and tests/testgen_report.py's.

A generated test is one frame in (a port, its bytes) after the table entries and default actions p4testgen
chose for the path it took, and the frames it expects out (a port, bytes and a don't-care mask; none: the
frame is dropped).  Each runs on a fresh switch: empty registers, no table entries but its own, no multicast
group (p4testgen does not model multicast: it expects a frame sent to a group to be dropped, and a switch
with no such group drops it).

- the TNA program's, on its model (`run_on_model`): one pass, a frame sent to the recirculation port
  leaving there as p4testgen expects it (the bridge header first);
- the BMv2 program's, on simple_switch_grpc over veth pairs (root; `run_on_bmv2`), its entries written
  through hina's own P4Runtime client (INSERT, and MODIFY of a table's default entry).

What a run reached, by file and line of the program's source: on the model, p4_source's `covered`
(statements, both ways of each if and select, constant entries); on BMv2, its trace log's primitives and
conditions (`bmv2_reached`).
"""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import tna_model
import veth_harness

STORED = Path(__file__).resolve().parent / "testgen"
GRPC_PORT = 50151


def stored(target: str) -> dict:
    """tests/testgen/<target>.json, or no tests where it was never generated."""
    path = STORED / f"{target}.json"
    return json.loads(path.read_text()) if path.exists() else {"tests": []}


def mismatch(test: dict, out: list[tuple[int, bytes]]) -> str | None:
    """How the frames a target sent for `test` differ from those it expects (each once), or None."""
    left = list(out)
    for expected in test["expected"]:
        found = next((i for i, (port, frame) in enumerate(left) if _matches(expected, port, frame)), None)
        if found is None:
            return (f"expected out of port {expected['port']}: {expected['frame']} (mask {expected['mask']}); "
                    f"got {[(p, f.hex()) for p, f in out]}")
        left.pop(found)
    return f"unexpected {[(p, f.hex()) for p, f in left]}" if left else None


def _matches(expected: dict, port: int, frame: bytes) -> bool:
    """`frame` out of `port` is the expected one: its port and length, and every byte under the mask."""
    want, mask = bytes.fromhex(expected["frame"]), bytes.fromhex(expected["mask"])
    return (port == expected["port"] and len(frame) == len(want)
            and all(f & m == w & m for f, w, m in zip(frame, want, mask, strict=True)))


def _short(name: str) -> str:
    """A control-plane name's last component (`HinaIngress.job_config.jobs` -> `jobs`)."""
    return name.rsplit(".", 1)[-1]


# -- the model -----------------------------------------------------------------------------------------

def model_for(test: dict) -> tna_model.TnaModel:
    """The model with the test's entries and defaults, one pass."""
    entries = [types.SimpleNamespace(table=_short(e["table"]), match=e["match"], action=_short(e["action"]),
                                     params=e["params"]) for e in test["entries"]]
    defaults = {_short(d["table"]): (_short(d["action"]), d["params"]) for d in test["defaults"]}
    model = tna_model.TnaModel(None, entries=entries, defaults=defaults)
    model.recirculate = False
    return model


def run_on_model(test: dict) -> tuple[list[tuple[int, bytes]], set[tuple]]:
    """The frames the model sends for `test`, and what of p4/tna/ it ran."""
    model = model_for(test)
    out = model.process(test["packet"]["port"], bytes.fromhex(test["packet"]["frame"]))
    return out, model.pipe.covered


def vectors_on_model(vectors: list[dict]) -> set[tuple]:
    """What of p4/tna/ the packet vectors run on the model (each on a fresh one, as tests/p4/test_tofino.py)."""
    from hina.control.topology import Topology

    reached: set[tuple] = set()
    for case in vectors:
        model = tna_model.TnaModel(Topology.from_config(case["topology"]))
        for packet in case["packets"]:
            model.process(packet["port"], bytes.fromhex(packet["frame"]))
        reached |= model.pipe.covered
    return reached


# -- BMv2 ----------------------------------------------------------------------------------------------

class GeneratedEntries:
    """What veth_harness.run_case configures a switch through, for a generated test: its table entries
    and default actions over hina's P4Runtime client."""

    def __init__(self, test: dict):
        from hina.control.controller import P4_BUILD
        from hina.control.p4rt import P4Info, P4RuntimeClient

        self.test, self.info = test, P4Info.load(P4_BUILD / "hina.p4info.txtpb")
        self.client = P4RuntimeClient(f"127.0.0.1:{GRPC_PORT}", timeout=20)

    def configure(self, _topology) -> None:
        for e in self.test["entries"]:
            self.client.write([self.info.table_entry(e["table"], e["match"], e["action"], e["params"])],
                              what=f"inserting into {e['table']}")
        for d in self.test["defaults"]:
            self._set_default(d)

    def _set_default(self, default: dict) -> None:
        """MODIFY of the table's default entry: P4RuntimeClient.write only INSERTs."""
        from hina.control.p4rt import ELECTION_ID
        from hina.control.p4rt_proto import p4runtime

        entity = self.info.table_entry(default["table"], {}, default["action"], default["params"])
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


def _as_case(test: dict) -> dict:
    """The generated test as veth_harness.run_case replays a vector: a host on every port it names."""
    ports = sorted({test["packet"]["port"], *(e["port"] for e in test["expected"])})
    hosts = [{"port": p, "mac": f"02:00:00:00:01:{p & 0xFF:02x}", "ip": f"10.1.{p >> 8}.{p & 0xFF}"} for p in ports]
    return {"topology": {"switch": {"mac": "02:00:00:00:01:fe", "ip": "10.1.255.254"}, "hosts": hosts, "jobs": []},
            "packets": [test["packet"]]}


def run_on_bmv2(test: dict, log: Path | None = None) -> list[tuple[int, bytes]]:
    """Every frame a fresh simple_switch_grpc sends for `test` (with `log`: its trace log there)."""
    def start(ports):
        proc, target = veth_harness.start_bmv2(ports, grpc_port=GRPC_PORT, log=log)  # the program pushed
        target.close()
        return proc, GeneratedEntries(test)

    return veth_harness.run_case(_as_case(test), start, settle=0.3)[0]


_TRACED = re.compile(r"(\S+\.p4)\((\d+)\) (?:Primitive|Condition \".*\" \(\w+\) is (true|false))")


def bmv2_reached(log: str) -> set[tuple]:
    """What a BMv2 trace log says ran, by file and line: ("statement", file, line) per primitive,
    ("branch", file, line, taken) per condition (file: the P4 file's name)."""
    reached = set()
    for m in _TRACED.finditer(log):
        file, line = Path(m[1]).name, int(m[2])
        reached.add(("statement", file, line) if m[3] is None else ("branch", file, line, m[3] == "true"))
    return reached
