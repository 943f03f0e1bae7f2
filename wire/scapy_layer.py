"""The hina header as a scapy layer, for dissecting captures and building golden frames.

Built from `hina.wire.headers.FIELDS`, so it has the header's fields, widths
and codes by construction; bound to UDP port 0x4E41 in both directions, so
`Ether(raw_bytes)` and `rdpcap` dissect hina traffic.  `words` holds the
`count` valid words; the K - count words after them (a frame is always K
words long) are the layer's padding, not words.  Kept apart from the struct
fast path: scapy is slow to import and the data path does not need it.

    >>> from hina.wire.scapy_layer import Hina
    >>> Hina(bytes(Hina(job_id=7, count=2, words=[5, -1]))).words
    [5, -1]
"""

from __future__ import annotations

from scapy.fields import (
    BitField,
    ByteEnumField,
    ByteField,
    FieldListField,
    FlagsField,
    IntField,
    ShortField,
    SignedIntField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from hina.wire.headers import FIELDS, HEADER_BYTES, MAX_FRAME_BYTES, UDP_PORT, WORD_BYTES, Flags, MsgType, Op

MAX_WORDS = (MAX_FRAME_BYTES - HEADER_BYTES) // WORD_BYTES  # the largest K a datagram holds


def _flag_names() -> list[str]:
    """FlagsField's names, bit 0 first: the named flags, and `bitN` for the bits no flag uses."""
    return [Flags(1 << bit).name if any(f.value == 1 << bit for f in Flags) else f"bit{bit}" for bit in range(8)]


def _field(name: str, bits: int):
    if name == "msg_type":
        return ByteEnumField(name, 0, {m.value: m.name for m in MsgType})
    if name == "op":
        return ByteEnumField(name, 0, {o.value: o.name for o in Op})
    if name == "flags":
        return FlagsField(name, 0, bits, _flag_names())
    if bits % 8:
        return BitField(name, 0, bits)
    return {8: ByteField, 16: ShortField, 32: IntField}[bits](name, 0)


class Hina(Packet):
    name = "hina"
    fields_desc = [
        *(_field(name, bits) for name, bits in FIELDS),
        # the `count` valid words (a frame built from a list carries all of it: set `count` to match)
        FieldListField("words", [], SignedIntField("word", 0), max_count=MAX_WORDS,
                       count_from=lambda pkt: pkt.count),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s  # the words past `count`: padding, shown as such

    def mysummary(self) -> str:
        return self.sprintf("hina %msg_type% %op% job=%job_id% w=%worker_id% slot=%slot%/v%version% "
                            "off=%offset% n=%count%")


bind_layers(UDP, Hina, dport=UDP_PORT)
bind_layers(UDP, Hina, sport=UDP_PORT)
