"""The per-switch P4Runtime client against in-process P4Runtime servers (no BMv2 needed).

The property trees need: with two switches under one controller, every
entry reaches the switch it was written to.  p4runtime-shell kept one
global client, so the second switch's setup took the first's writes.
"""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest

from hina.control.client import ControlError
from hina.control.p4rt import P4Info, P4RuntimeClient, encode
from hina.control.p4rt_proto import add_servicer, p4info, p4runtime


def tiny_info() -> P4Info:
    """A P4Info with one table (two exact keys), one action with two parameters and one counter."""
    info = p4info.P4Info()
    t = info.tables.add()
    t.preamble.id, t.preamble.name = 33554433, "HinaIngress.jobs"
    for fid, (name, width) in enumerate((("hdr.hina.job_id", 16), ("standard_metadata.ingress_port", 9)), 1):
        f = t.match_fields.add()
        f.id, f.name, f.bitwidth, f.match_type = fid, name, width, p4info.MatchField.EXACT
    a = info.actions.add()
    a.preamble.id, a.preamble.name = 16777217, "HinaIngress.set_job"
    for pid, (name, width) in enumerate((("workers", 8), ("switch_mac", 48)), 1):
        p = a.params.add()
        p.id, p.name, p.bitwidth = pid, name, width
    c = info.counters.add()
    c.preamble.id, c.preamble.name = 302055990, "HinaIngress.drops"
    return P4Info(info)


class FakeSwitch:
    """What a P4Runtime server keeps of a controller's session: arbitration, pipeline, writes."""

    def __init__(self):
        self.arbitrations, self.pipelines, self.updates = [], [], []
        self.counter = {3: 7, 5: 0}
        self.refuse = False

    def StreamChannel(self, request_iterator, context):
        for req in request_iterator:
            if req.HasField("arbitration"):
                self.arbitrations.append(req.arbitration)
                reply = p4runtime.StreamMessageResponse()
                reply.arbitration.CopyFrom(req.arbitration)
                reply.arbitration.status.code = 0
                yield reply

    def SetForwardingPipelineConfig(self, request, context):
        self.pipelines.append(request)
        return p4runtime.SetForwardingPipelineConfigResponse()

    def Write(self, request, context):
        if self.refuse:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, "entry exists")
        self.updates.extend(request.updates)
        return p4runtime.WriteResponse()

    def Read(self, request, context):
        reply = p4runtime.ReadResponse()
        for index, packets in self.counter.items():
            e = reply.entities.add().counter_entry
            e.counter_id = request.entities[0].counter_entry.counter_id
            e.index.index, e.data.packet_count = index, packets
        yield reply


@pytest.fixture
def switches():
    """Two fake switches on their own ports, as a tree's two BMv2 processes."""
    started = []
    for _ in range(2):
        fake = FakeSwitch()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        add_servicer(fake, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        started.append((fake, server, f"127.0.0.1:{port}"))
    yield started
    for _, server, _ in started:
        server.stop(0)


def test_values_encode_canonically_and_refuse_what_does_not_fit():
    assert encode("10.0.0.1", 32) == b"\x0a\x00\x00\x01"
    assert encode("aa:bb:cc:00:00:01", 48) == bytes.fromhex("aabbcc000001")
    assert encode("0", 9) == b"\x00" and encode("511", 9) == b"\x01\xff" and encode(256, 16) == b"\x01\x00"
    with pytest.raises(ValueError, match="'512' does not fit in 9 bits"):
        encode("512", 9)


def test_a_table_entry_carries_the_p4info_ids_and_canonical_values():
    info = tiny_info()
    e = info.table_entry("jobs", {"hdr.hina.job_id": "1", "standard_metadata.ingress_port": "3"}, "set_job",
                         {"workers": "4", "switch_mac": "02:00:00:00:00:01"}).table_entry
    assert e.table_id == 33554433 and e.action.action.action_id == 16777217
    assert [(m.field_id, m.exact.value) for m in e.match] == [(1, b"\x01"), (2, b"\x03")]
    assert [(p.param_id, p.value) for p in e.action.action.params] == [(1, b"\x04"), (2, bytes.fromhex("020000000001"))]
    with pytest.raises(ControlError, match="no match field hdr.hina.slot"):
        info.table_entry("jobs", {"hdr.hina.slot": "1"}, "set_job", {})
    with pytest.raises(ControlError, match=r"0 tables named \*nope"):
        info.table_entry("nope", {}, "set_job", {})
    mg = info.multicast_group(5, [(1, 1), (2, 2), (1, 3)]).packet_replication_engine_entry.multicast_group_entry
    assert mg.multicast_group_id == 5 and [(r.egress_port, r.instance) for r in mg.replicas] == [(1, 1), (2, 2), (1, 3)]


def test_two_switches_two_sessions_every_write_reaches_its_own_switch(switches, tmp_path):
    info = tiny_info()
    config = tmp_path / "hina.json"
    config.write_bytes(b'{"program": "hina"}')
    clients = [P4RuntimeClient(addr, timeout=5) for _, _, addr in switches]
    try:
        for i, client in enumerate(clients):
            client.set_pipeline(info, config)
            client.write([info.table_entry("jobs", {"hdr.hina.job_id": str(10 + i)}, "set_job", {"workers": "2"})])
        # the first switch again, after the second connected: p4runtime-shell sent this to the second
        clients[0].write([info.multicast_group(7, [(1, 1), (2, 2)])])
        for (fake, _, _), job in zip(switches, (10, 11)):
            assert len(fake.arbitrations) == 1 and len(fake.pipelines) == 1
            assert fake.pipelines[0].config.p4_device_config == b'{"program": "hina"}'
            assert fake.pipelines[0].election_id.low == 1
            entries = [u.entity.table_entry for u in fake.updates if u.entity.HasField("table_entry")]
            assert [e.match[0].exact.value for e in entries] == [bytes([job])]
        groups = [u for u in switches[0][0].updates if u.entity.HasField("packet_replication_engine_entry")]
        assert len(groups) == 1 and not any(u.entity.HasField("packet_replication_engine_entry")
                                            for u in switches[1][0].updates)
        assert clients[1].read_counter(info, "drops") == {3: 7, 5: 0}
    finally:
        for c in clients:
            c.close()
    assert threading.active_count() < 50  # the stream readers ended with their channels


def test_a_refused_write_names_the_entry_and_no_server_is_a_one_line_error(switches):
    fake, _, addr = switches[0]
    fake.refuse = True
    info = tiny_info()
    client = P4RuntimeClient(addr, timeout=5)
    try:
        refused = r"P4Runtime inserting jobs \{.*\} at 127.0.0.1:\d+ failed: entry exists"
        with pytest.raises(ControlError, match=refused):
            client.write([info.table_entry("jobs", {"hdr.hina.job_id": "1"}, "set_job", {})],
                         what="inserting jobs {'hdr.hina.job_id': '1'}")
    finally:
        client.close()
    with pytest.raises(ControlError, match=r"no P4Runtime server at 127.0.0.1:1 within 0.3 s"):
        P4RuntimeClient("127.0.0.1:1", timeout=0.3)
