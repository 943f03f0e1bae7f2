"""The wire: what workers, switches and the controller agree on, and how frames cross between them.

`headers` declares the hina header once (fields, byte offsets, message
types, flags, drop reasons, frame sizes), and the Ethernet / IPv4 / UDP
headers around it; `scapy_layer` is the same header for scapy, `lua`
writes the Wireshark dissector.

The socket fast path, the one room both the worker and the switch build
on: `frames` (raw frames: where each field sits, framing and parsing for
Python), `compiled` (the loads, stores and checksums every numba kernel
uses), `offload` (segmentation offload: super-frames cut, gathered,
coalesced) and `sockio` (many datagrams per system call, the socket
addresses and options).
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
