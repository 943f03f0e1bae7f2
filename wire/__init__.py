"""The wire: what workers, switches and the controller agree on, and how frames cross between them.

`headers` declares the hina header once (fields, byte offsets, message
types, flags, drop reasons, frame sizes); `frames` the Ethernet / IPv4 /
UDP around it; `scapy_layer` is the same header for scapy, `lua` writes the
Wireshark dissector; `mmsg` moves many datagrams per system call.
"""

from .headers import (
                      FIELDS,
                      HEADER_BYTES,
                      MAX_SLOTS,
                      MAX_WORKERS,
                      UDP_PORT,
                      VERSION_BIT,
                      WORD_BYTES,
                      Drop,
                      Flags,
                      HinaHeader,
                      MsgType,
                      Op,
                      max_words,
                      pack_header,
                      unpack_header,
)

__all__ = ["FIELDS", "HEADER_BYTES", "MAX_SLOTS", "MAX_WORKERS", "UDP_PORT", "VERSION_BIT", "WORD_BYTES", "Drop",
           "Flags", "HinaHeader", "MsgType", "Op", "max_words", "pack_header", "unpack_header"]
