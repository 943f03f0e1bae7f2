"""Reading and deleting table entries over a `P4RuntimeClient` session, and the P4Info a switch runs.

What `Bmv2Target.jobs` and `Bmv2Target.remove_job` need beyond `p4rt`'s
writes: a wildcard Read of one table (with each entry's direct counter and
time since its last hit, where the table has them), DELETE updates, and
GetForwardingPipelineConfig, so that a switch can be listed from a machine
without the compiled program.

    info = fetch_p4info(client)                              # the P4Info the switch runs
    for entry in read_table(client, info, "jobs"):           # {"match": {...}, "action", "params", ...}
        ...
    delete(client, [entity, ...], what="removing job 1")
"""

from __future__ import annotations

from typing import Any

import grpc

from .client import ControlError
from .p4rt import P4Info, P4RuntimeClient
from .p4rt_proto import p4runtime


def _number(value: bytes) -> int:
    return int.from_bytes(value, "big") if value else 0


def fetch_p4info(client: P4RuntimeClient) -> P4Info:
    """The P4Info of the program the switch runs (GetForwardingPipelineConfig, P4INFO_AND_COOKIE)."""
    req = p4runtime.GetForwardingPipelineConfigRequest()
    req.device_id = client.device_id
    req.response_type = p4runtime.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE
    reply = client._call("GetForwardingPipelineConfig", client.stub.GetForwardingPipelineConfig, req)
    if not reply.config.p4info.tables:
        raise ControlError(f"the switch at {client.addr} runs no P4 program yet (configure it first)")
    return P4Info(reply.config.p4info)


def _direct_counter(info: P4Info, table) -> bool:
    ids = {c.preamble.id for c in info.message.direct_counters}
    return any(r in ids for r in table.direct_resource_ids)


def read_table(client: P4RuntimeClient, info: P4Info, table: str) -> list[dict[str, Any]]:
    """Every entry of `table`: {"match": {field: int}, "action": name, "params": {name: int}, "entity": the
    Entity (for a DELETE)}, with "packets"/"bytes" where the table has a direct counter and "idle_s"
    (seconds since the entry last matched a packet) where it supports idle timeouts."""
    t = info.find("tables", table)
    fields = {f.id: f.name for f in t.match_fields}
    actions = {a.preamble.id: a for a in info.message.actions}
    req = p4runtime.ReadRequest()
    req.device_id = client.device_id
    want = req.entities.add().table_entry
    want.table_id = t.preamble.id
    counted = _direct_counter(info, t)
    timed = t.idle_timeout_behavior != 0  # NOTIFY_CONTROL: the switch keeps each entry's last hit
    if counted:
        want.counter_data.SetInParent()
    if timed:
        want.time_since_last_hit.SetInParent()
    out = []
    try:
        for reply in client.stub.Read(req):
            for entity in reply.entities:
                e = entity.table_entry
                action = actions.get(e.action.action.action_id)
                params = {p.id: p.name for p in action.params} if action is not None else {}
                row: dict[str, Any] = {
                    "match": {fields.get(m.field_id, str(m.field_id)): _number(m.exact.value) for m in e.match},
                    "action": action.preamble.name.rsplit(".", 1)[-1] if action is not None else None,
                    "params": {params.get(p.param_id, str(p.param_id)): _number(p.value)
                               for p in e.action.action.params},
                    "entity": entity,
                }
                if counted:
                    row["packets"], row["bytes"] = e.counter_data.packet_count, e.counter_data.byte_count
                if timed and e.HasField("time_since_last_hit"):
                    row["idle_s"] = e.time_since_last_hit.elapsed_ns / 1e9
                out.append(row)
    except grpc.RpcError as exc:
        raise ControlError(f"P4Runtime Read of table {t.preamble.name} at {client.addr} failed: "
                           f"{exc.details()}") from None
    return out


def delete(client: P4RuntimeClient, entities: list, what: str) -> None:
    """DELETE each entity (table entries as read, multicast groups by id), in one request."""
    if not entities:
        return
    req = p4runtime.WriteRequest()
    client._election(req)
    for entity in entities:
        update = req.updates.add()
        update.type = p4runtime.Update.DELETE
        update.entity.CopyFrom(entity)
        e = update.entity.table_entry
        if update.entity.HasField("table_entry"):  # a DELETE names the entry by its key alone
            e.ClearField("counter_data")
            e.ClearField("time_since_last_hit")
    client._call(what, client.stub.Write, req)


def read_groups(client: P4RuntimeClient) -> dict[int, list[tuple[int, int]]]:
    """Every multicast group on the switch: {group id: [(egress port, instance), ...]}."""
    req = p4runtime.ReadRequest()
    req.device_id = client.device_id
    req.entities.add().packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0  # all
    groups: dict[int, list[tuple[int, int]]] = {}
    try:
        for reply in client.stub.Read(req):
            for entity in reply.entities:
                mg = entity.packet_replication_engine_entry.multicast_group_entry
                groups[mg.multicast_group_id] = [(r.egress_port, r.instance) for r in mg.replicas]
    except grpc.RpcError as exc:
        raise ControlError(f"P4Runtime Read of the multicast groups at {client.addr} failed: {exc.details()}") from None
    return groups


def multicast_group(group: int):
    """The Entity naming multicast group `group` (for a DELETE)."""
    entity = p4runtime.Entity()
    entity.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = group
    return entity


__all__ = ["delete", "fetch_p4info", "multicast_group", "read_groups", "read_table"]
