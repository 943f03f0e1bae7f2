"""Runs p4testgen's tests (tests/testgen/, written by tools/testgen.py) on a target, and tells what of a P4
program a run reached: tests/p4/test_testgen.py's and tests/testgen_report.py's.

A generated test is one frame in (a port, its bytes) after the table entries and default actions p4testgen
chose for the path it took, the frames it expects out (a port, bytes and a don't-care mask; none: the frame
is dropped) and the drops its path counts (`counted`, from p4testgen's trace).  Each runs on a fresh switch:
empty registers, no table entries but its own, no multicast group (p4testgen does not model multicast: it
expects a frame sent to a group to be dropped, and a switch with no such group drops it).

- the TNA program's, on its model (`run_on_model`): one pass, a frame sent to the recirculation port
  leaving there as p4testgen expects it (the bridge header first);
- the BMv2 program's, on simple_switch_grpc over veth pairs (root; `run_on_bmv2`), its entries written
  through hina's own P4Runtime client (INSERT, and MODIFY of a table's default entry), its drop counter
  read back;
- the BMv2 program's whose configuration a topology can say (`emulator_topology`: MAC forwarding only), on
  the emulator's raw-frame switch (`run_on_emulator`).

What a run reached, by file and line of the program's source: on the model, p4_source's `covered`
(statements, both ways of each if and select, constant entries); on BMv2, its trace log's primitives and
conditions (`bmv2_reached`).
"""

from __future__ import annotations

import functools
import json
import re
import types
from pathlib import Path

import tna_model
import veth_harness

from hina.control.controller import Bmv2Target

STORED = Path(__file__).resolve().parent / "testgen"


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
            return (f"expected out of port {expected['port']}: {expected['frame']} (mask {expected.get('mask')}); "
                    f"got {[(p, f.hex()) for p, f in out]}")
        left.pop(found)
    return f"unexpected {[(p, f.hex()) for p, f in left]}" if left else None


def _matches(expected: dict, port: int, frame: bytes) -> bool:
    """`frame` out of `port` is the expected one: its port and length, and every byte under the mask (a frame
    p4testgen expects of an odd number of nibbles, not whole bytes, no frame matches)."""
    if len(expected["frame"]) % 2:
        return False
    want = bytes.fromhex(expected["frame"])
    mask = bytes.fromhex(expected["mask"]) if "mask" in expected else b"\xff" * len(want)
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


def run_on_model(test: dict) -> tuple[list[tuple[int, bytes]], set[tuple], dict[str, int]]:
    """The frames the model sends for `test`, what of p4/tna/ it ran, and the drops it counted by reason."""
    model = model_for(test)
    out = model.process(test["packet"]["port"], bytes.fromhex(test["packet"]["frame"]))
    return out, model.pipe.covered, model.counters()["drops"]


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


# -- the emulator -------------------------------------------------------------------------------------

def emulator_topology(test: dict):
    """The test's configuration as a `Topology` the emulator (FrameSwitch) takes, or None where it has none.

    The emulator is configured by a topology, never by table entries: its job rows, worker bits, parents,
    groups and rewrites follow from a topology's jobs and hosts, and p4testgen's entries name any values (a
    worker_bit no worker id has, a full mask of 0, a MAC that floods, a `jobs` entry whose action is
    NoAction: a hit, so a known job of 0 workers).  What a topology says: a `mac_forward` entry to a port
    (a host there with that MAC) and one that says no route (a MAC it lacks).  So the tests whose frame
    meets no job: the parser's cases, the checks before the job table, MAC forwarding."""
    from hina.control.fabric import MAX_PORT
    from hina.control.topology import Topology

    if test["defaults"] or not all(_emulator_takes(e, MAX_PORT) for e in test["entries"]):
        return None
    hosts = [{"port": int(e["params"]["port"], 0), "mac": _mac(e["match"]["hdr.ethernet.dst_addr"]),
              "ip": f"10.2.{i >> 8}.{i & 0xFF}"}
             for i, e in enumerate(test["entries"]) if _short(e["action"]) == "forward"]
    return Topology.from_config({"switch": {"mac": "02:00:00:00:02:fe", "ip": "10.2.255.254"},
                                 "hosts": hosts, "jobs": []})


def _emulator_takes(entry: dict, max_port: int) -> bool:
    """Whether a topology says what `entry` does.  Not a flood (a topology floods the broadcast MAC alone,
    to its hosts; p4testgen's group is nobody's, or 0: no multicast, the frame leaves by port 0), nor a
    forward to BMv2's drop port (no host is there; BMv2 drops it uncounted, the emulator as NO_ROUTE)."""
    table, action = _short(entry["table"]), _short(entry["action"])
    if (table, action) == ("mac_forward", "forward"):
        return int(entry["params"]["port"], 0) <= max_port
    return (table, action) == ("mac_forward", "no_route")


def _mac(value: str) -> str:
    """A p4testgen MAC (0x69E0D9125950) as text (69:e0:d9:12:59:50)."""
    return ":".join(f"{b:02x}" for b in int(value, 0).to_bytes(6, "big"))


def run_on_emulator(test: dict) -> tuple[list[tuple[int, bytes]], dict[str, int]]:
    """The frames a fresh emulator (FrameSwitch) sends for `test`, and its drop counters that moved; only for
    a test emulator_topology takes."""
    from hina.emulator.frames import FrameSwitch

    switch = FrameSwitch(emulator_topology(test))
    out = switch.process(test["packet"]["port"], bytes.fromhex(test["packet"]["frame"]))
    return [(port, bytes(frame)) for port, frame in out], {r: n for r, n in switch.counters()["drops"].items() if n}


# -- BMv2 ----------------------------------------------------------------------------------------------

class GeneratedTarget(Bmv2Target):
    """simple_switch_grpc (the program pushed) configured with a generated test's table entries and default
    actions instead of a topology's, over hina's P4Runtime client; its drop counters are Bmv2Target's."""

    def __init__(self, test: dict, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.test = test

    def configure(self, _topology) -> None:
        for e in self.test["entries"]:
            self._client.write([self._info.table_entry(e["table"], e["match"], e["action"], e["params"])],
                               what=f"inserting into {e['table']}")
        for d in self.test["defaults"]:
            entity = self._info.table_entry(d["table"], {}, d["action"], d["params"])
            entity.table_entry.is_default_action = True
            self._client.write([entity], what=f"setting the default action of {d['table']}", modify=True)


def _as_case(test: dict) -> dict:
    """The generated test as veth_harness.run_case replays a vector: a host on every port it names."""
    ports = sorted({test["packet"]["port"], *(e["port"] for e in test["expected"])})
    hosts = [{"port": p, "mac": f"02:00:00:00:01:{p & 0xFF:02x}", "ip": f"10.1.{p >> 8}.{p & 0xFF}"} for p in ports]
    return {"topology": {"switch": {"mac": "02:00:00:00:01:fe", "ip": "10.1.255.254"}, "hosts": hosts, "jobs": []},
            "packets": [test["packet"]]}


def run_on_bmv2(test: dict, log: Path | None = None) -> tuple[list[tuple[int, bytes]], dict[str, int]]:
    """Every frame a fresh simple_switch_grpc sends for `test`, and its drop counters that moved (with `log`:
    its trace log there)."""
    target = functools.partial(GeneratedTarget, test)
    start = functools.partial(veth_harness.start_bmv2, log=log, target=target)
    out, drops = veth_harness.run_case(_as_case(test), start, settle=0.3)
    return out, {reason: n for reason, n in drops.items() if n}


_TRACED = re.compile(r"(\S+\.p4)\((\d+)\) (?:Primitive|Condition \".*\" \(\w+\) is (true|false))")
_PARSED = re.compile(r"Parser '\w+' entering state '(\w+)'|Parser '\w+': (end)|Exception while parsing: (\w+)")
_LOOKED_UP = re.compile(r"Table '([\w.]+)': (?:hit with handle (\d+)|(miss))")


def bmv2_reached(log: str) -> set[tuple]:
    """What a BMv2 trace log says ran: ("statement", file, line) per primitive, ("branch", file, line, taken)
    per condition (file: the P4 file's name); ("transition", state, next) per parser state left, for
    `accept` or the error that stopped the parser there (PacketTooShort); ("table", table, "hit" or "miss")
    per lookup of a table of the program's (not the compiler's tbl_*), and ("entry", table, handle) for
    the entry it hit (a constant entry's handle is its place in the table's `const entries`)."""
    reached, state = set(), None
    for line in log.splitlines():
        if m := _TRACED.search(line):
            file, at = Path(m[1]).name, int(m[2])
            reached.add(("statement", file, at) if m[3] is None else ("branch", file, at, m[3] == "true"))
        elif m := _PARSED.search(line):
            if state is not None:
                reached.add(("transition", state, m[1] or ("accept" if m[2] else m[3])))
            state = m[1]
        elif (m := _LOOKED_UP.search(line)) and not m[1].startswith("tbl_"):
            reached.add(("table", m[1], "miss" if m[3] else "hit"))
            if m[2] is not None:
                reached.add(("entry", m[1], int(m[2])))
    return reached
