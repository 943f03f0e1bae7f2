"""A P4Runtime client per switch: what `Bmv2Target` needs of P4Runtime, and nothing global.

p4runtime-shell keeps one client and one P4Info in module globals
(`p4runtime_sh.shell.client`), so a second switch's setup took over the
first's session and every later table write went to whichever switch
connected last; and it calls `sys.exit` when a server is not up yet.  A
tree has several BMv2 switches under one controller, so each `Bmv2Target`
holds one of these instead: its own channel and stream, its own
arbitration (primary with election id (0, 1)), and errors as
`ControlError`s naming the switch.

    client = P4RuntimeClient("127.0.0.1:50051", timeout=20)   # waits for the server
    info = P4Info.load(Path("p4/build/hina.p4info.txtpb"))
    client.set_pipeline(info, Path("p4/build/hina.json"))
    client.write([info.table_entry("jobs", {"hdr.hina.job_id": "1"}, "set_job", {...}),
                  info.multicast_group(3, [(1, 1), (2, 2), (4, 3)])])   # (port, replica id)
    client.read_counter(info, "drops")                       # {index: packets}
    client.close()

Values are strings as `p4_entries` writes them: decimal integers, MAC
addresses (aa:bb:cc:dd:ee:ff) and IPv4 addresses, encoded in P4Runtime's
canonical form (big-endian, no leading zero bytes).  Only exact matches:
the program has no other kind.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import queue
import threading
from pathlib import Path

import grpc
from google.protobuf import text_format

from .client import ControlError
from .p4rt_proto import P4RuntimeStub, p4info, p4runtime

ELECTION_ID = (0, 1)  # (high, low): the only controller, so the primary


def encode(value: str | int, bitwidth: int) -> bytes:
    """`value` (decimal, MAC or IPv4 text, or an int) as a canonical P4Runtime bytestring of at most
    `bitwidth` bits; a value that does not fit is a ValueError naming it."""
    if isinstance(value, int):
        number = value
    elif value.count(":") == 5:
        number = int(value.replace(":", ""), 16)
    elif value.count(".") == 3:
        number = int(ipaddress.IPv4Address(value))
    else:
        number = int(value, 0)
    if number < 0 or number >= 1 << bitwidth:
        raise ValueError(f"{value!r} does not fit in {bitwidth} bits")
    return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")


@dataclasses.dataclass
class P4Info:
    """A compiled program's P4Info, with lookups by name: the full name or its last components
    (`jobs` for `HinaIngress.jobs`), which must be unique."""

    message: object  # p4info.P4Info

    @classmethod
    def load(cls, path: Path) -> P4Info:
        info = p4info.P4Info()
        text_format.Parse(Path(path).read_text(), info)
        return cls(info)

    def find(self, kind: str, short: str):
        """The P4Info object of `kind` (tables, actions, counters, registers) named `short`."""
        found = [o for o in getattr(self.message, kind)
                 if o.preamble.name == short or o.preamble.name.endswith("." + short)]
        if len(found) != 1:
            raise ControlError(f"P4Info has {len(found)} {kind} named *{short}: "
                               f"{[o.preamble.name for o in found]}")
        return found[0]

    def names(self, kind: str) -> list[str]:
        return [o.preamble.name for o in getattr(self.message, kind)]

    def table_entry(self, table: str, match: dict[str, str], action: str,
                    params: dict[str, str]) -> object:
        t, a = self.find("tables", table), self.find("actions", action)
        entity = p4runtime.Entity()
        entry = entity.table_entry
        entry.table_id = t.preamble.id
        fields = {f.name: f for f in t.match_fields}
        for name, value in match.items():
            if name not in fields:
                raise ControlError(f"table {t.preamble.name} has no match field {name}")
            f = fields[name]
            m = entry.match.add()
            m.field_id = f.id
            m.exact.value = encode(value, f.bitwidth)
        entry.action.action.action_id = a.preamble.id
        declared = {p.name: p for p in a.params}
        for name, value in params.items():
            if name not in declared:
                raise ControlError(f"action {a.preamble.name} has no parameter {name}")
            p = entry.action.action.params.add()
            p.param_id = declared[name].id
            p.value = encode(value, declared[name].bitwidth)
        return entity

    @staticmethod
    def multicast_group(group: int, replicas) -> object:
        """A multicast group of (egress port, instance) replicas: the instance is the replica id the
        egress sees (`egress_rid`)."""
        entity = p4runtime.Entity()
        mg = entity.packet_replication_engine_entry.multicast_group_entry
        mg.multicast_group_id = group
        for port, instance in replicas:
            r = mg.replicas.add()
            r.egress_port = port
            r.instance = instance
        return entity


class P4RuntimeClient:
    """One switch's P4Runtime session: a channel, a stream holding arbitration, requests on it."""

    def __init__(self, grpc_addr: str, *, device_id: int = 0, timeout: float = 10.0):
        """Waits up to `timeout` seconds for the server to accept the channel and make us primary."""
        self.addr, self.device_id = grpc_addr, device_id
        self.channel = grpc.insecure_channel(grpc_addr)
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            self.channel.close()
            raise ControlError(f"no P4Runtime server at {grpc_addr} within {timeout:g} s") from None
        self.stub = P4RuntimeStub(self.channel)
        self._out: queue.Queue = queue.Queue()
        self._arbitration: queue.Queue = queue.Queue()
        self._stream = self.stub.StreamChannel(iter(self._out.get, None))
        self._reader = threading.Thread(target=self._read_stream, daemon=True, name=f"p4rt {grpc_addr}")
        self._reader.start()
        req = p4runtime.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.high, req.arbitration.election_id.low = ELECTION_ID
        self._out.put(req)
        try:
            reply = self._arbitration.get(timeout=timeout)
        except queue.Empty:
            reply = None
        if reply is None or reply.arbitration.status.code != 0:
            self.close()
            why = "no answer" if reply is None else reply.arbitration.status.message or "not primary"
            raise ControlError(f"P4Runtime arbitration with {grpc_addr} failed: {why}")

    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                if msg.HasField("arbitration"):
                    self._arbitration.put(msg)
        except grpc.RpcError:
            pass  # the stream ends with the channel (close) or the switch
        self._arbitration.put(None)

    def _election(self, req) -> None:
        req.device_id = self.device_id
        req.election_id.high, req.election_id.low = ELECTION_ID

    def _call(self, what: str, method, req):
        try:
            return method(req)
        except grpc.RpcError as exc:
            detail = exc.details() if hasattr(exc, "details") else str(exc)
            raise ControlError(f"P4Runtime {what} at {self.addr} failed: {detail}") from None

    def set_pipeline(self, info: P4Info, device_config: Path) -> None:
        """Push the program: its P4Info and BMv2's compiled JSON."""
        req = p4runtime.SetForwardingPipelineConfigRequest()
        self._election(req)
        req.action = p4runtime.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        req.config.p4info.CopyFrom(info.message)
        req.config.p4_device_config = Path(device_config).read_bytes()
        self._call("SetForwardingPipelineConfig", self.stub.SetForwardingPipelineConfig, req)

    def write(self, entities: list, what: str = "Write", *, modify: bool = False) -> None:
        """INSERT each entity (with `modify`, MODIFY it: a table's default entry), in one request."""
        req = p4runtime.WriteRequest()
        self._election(req)
        for entity in entities:
            update = req.updates.add()
            update.type = p4runtime.Update.MODIFY if modify else p4runtime.Update.INSERT
            update.entity.CopyFrom(entity)
        self._call(what, self.stub.Write, req)

    def read_counter(self, info: P4Info, name: str) -> dict[int, int]:
        """Packets counted at every index of an indirect counter."""
        req = p4runtime.ReadRequest()
        req.device_id = self.device_id
        req.entities.add().counter_entry.counter_id = info.find("counters", name).preamble.id
        counts: dict[int, int] = {}
        try:
            for reply in self.stub.Read(req):
                for entity in reply.entities:
                    c = entity.counter_entry
                    counts[c.index.index] = c.data.packet_count
        except grpc.RpcError as exc:
            raise ControlError(f"P4Runtime Read of counter {name} at {self.addr} failed: {exc.details()}") from None
        return counts

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()
        self._reader.join(timeout=5)


__all__ = ["P4Info", "P4RuntimeClient", "encode"]
