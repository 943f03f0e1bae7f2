"""The hina header as a scapy layer, for dissecting captures and building golden frames.

Field for field the same as `headers.py` and `p4/headers.p4`; bound to UDP
port 0x4E41 in both directions, so `Ether(raw_bytes)` and `rdpcap` dissect
hina traffic (`hina demo` puts its emulator on that port when it is free).
`wireshark/hina.lua` is the same header for Wireshark and tshark.
"""

from __future__ import annotations

from scapy.fields import BitField, ByteEnumField, ByteField, FieldListField, FlagsField, IntField, ShortField, SignedIntField
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from codec.ops import Op

from .config import MAX_FRAME_BYTES
from .headers import HEADER_BYTES, UDP_PORT, WORD_BYTES, MsgType

MAX_WORDS = (MAX_FRAME_BYTES - HEADER_BYTES) // WORD_BYTES  # the largest K a datagram holds


class Hina(Packet):
    name = "hina"
    fields_desc = [
        ByteEnumField("msg_type", 0, {m.value: m.name for m in MsgType}),
        ByteEnumField("op", 0, {o.value: o.name for o in Op}),
        ShortField("job_id", 0),
        ByteField("worker_id", 0),
        FlagsField("flags", 0, 8, ["RESEND", "f1", "f2", "f3", "f4", "f5", "f6", "f7"]),
        BitField("version", 0, 1),
        BitField("slot", 0, 15),
        IntField("offset", 0),
        ShortField("count", 0),
        ShortField("phase", 0),
        # every K the header allows, without raising scapy's global conf.max_list_count (100)
        FieldListField("words", [], SignedIntField("word", 0), max_count=MAX_WORDS),
    ]

    def mysummary(self) -> str:
        return self.sprintf("hina %msg_type% %op% job=%job_id% w=%worker_id% slot=%slot%/v%version% "
                            "off=%offset% n=%count%")


bind_layers(UDP, Hina, dport=UDP_PORT)
bind_layers(UDP, Hina, sport=UDP_PORT)
