"""Raw frames, as hosts put them on the wire: Ethernet / IPv4 (no options) / UDP around a hina frame.

Where each header and each field sits in a frame (`IPV4_AT`, `UDP_DPORT_AT`,
`HINA_AT`, ...), taken from the declarations in `hina.wire.headers`
(`ETHERNET`, `IPV4`, `UDP`) and written as a number nowhere else; then, for
Python callers, the encapsulation a host applies, the parse `p4/parser.p4`
does and the IPv4 header checksum.  The emulator's raw-frame path
(`hina.emulator.frames`), the raw transport and the packet vectors build and
parse frames with these; the compiled kernels read and write the same
offsets with `hina.wire.compiled`'s loads and stores.  No numba here: the
control plane imports the address helpers.
"""

from __future__ import annotations

import ipaddress
import struct

from .headers import (
    ETH_HEADER_BYTES,
    ETHERNET,
    ETHERTYPE_IPV4,
    IPPROTO_UDP,
    IPV4,
    IPV4_HEADER_BYTES,
    UDP,
    UDP_HEADER_BYTES,
    field_offsets,
)

# where each header starts in a frame
IPV4_AT = ETH_HEADER_BYTES
UDP_AT = IPV4_AT + IPV4_HEADER_BYTES
HINA_AT = UDP_AT + UDP_HEADER_BYTES  # the hina header (a UDP backend's datagram starts here)


def _in_frame(fields: tuple[tuple[str, int], ...], start: int) -> dict[str, int]:
    return {name: start + at for name, at in field_offsets(fields).items()}


_ETH, _IP, _UDP = _in_frame(ETHERNET, 0), _in_frame(IPV4, IPV4_AT), _in_frame(UDP, UDP_AT)
# each field's first byte in a frame
ETH_DST_AT, ETH_SRC_AT, ETH_TYPE_AT = _ETH["dst_addr"], _ETH["src_addr"], _ETH["ether_type"]
IP_VERSION_AT = _IP["version"]  # version and IHL share a byte
IP_TOTAL_LEN_AT, IP_ID_AT, IP_FLAGS_AT = _IP["total_len"], _IP["identification"], _IP["flags"]
IP_TTL_AT, IP_PROTOCOL_AT, IP_CHECKSUM_AT = _IP["ttl"], _IP["protocol"], _IP["hdr_checksum"]
IP_SRC_AT, IP_DST_AT = _IP["src_addr"], _IP["dst_addr"]
UDP_SPORT_AT, UDP_DPORT_AT, UDP_LEN_AT, UDP_CHECKSUM_AT = _UDP["src_port"], _UDP["dst_port"], _UDP["len"], \
    _UDP["checksum"]
# the sizes of an address and a port
MAC_BYTES = dict(ETHERNET)["dst_addr"] // 8
IP_BYTES = dict(IPV4)["dst_addr"] // 8
PORT_BYTES = dict(UDP)["dst_port"] // 8

IPV4_NO_OPTIONS = 4 << 4 | IPV4_HEADER_BYTES // 4  # the version and IHL byte the P4 parser takes: 0x45
IP_DONT_FRAGMENT = 1 << (dict(IPV4)["frag_offset"] + 1)  # in the 16 bits of flags and fragment offset
TTL = 64

# what the parser looks at, in one unpack: ethertype, IPv4 version+IHL, protocol, UDP destination port and length
_PARSED = ((ETH_TYPE_AT, "H"), (IP_VERSION_AT, "B"), (IP_PROTOCOL_AT, "B"), (UDP_DPORT_AT, "H"), (UDP_LEN_AT, "H"))


def _layout(fields: tuple[tuple[int, str], ...]) -> struct.Struct:
    """A big-endian struct reading `fields` ((offset, struct code), in order) from a frame's start."""
    fmt, at = "!", 0
    for offset, code in fields:
        fmt += f"{offset - at}x" * (offset > at) + code
        at = offset + struct.calcsize("!" + code)
    return struct.Struct(fmt)


_PARSE = _layout(_PARSED)
U16 = struct.Struct("!H")  # a 16-bit field, for Python callers: `U16.unpack_from(frame, at)`, `U16.pack_into`
_IPV4_WORDS = struct.Struct(f"!{IPV4_HEADER_BYTES // 2}H")
_CHECKSUM_WORD = (IP_CHECKSUM_AT - IPV4_AT) // 2


def mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != MAC_BYTES:
        raise ValueError(f"not a MAC address: {mac!r}")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise ValueError(f"not a MAC address: {mac!r}") from None


def ip_bytes(ip: str) -> bytes:
    try:
        return ipaddress.IPv4Address(ip).packed
    except ValueError:
        raise ValueError(f"not an IPv4 address: {ip!r}") from None


def udp_of(frame: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """(UDP destination port, UDP length) of an Ethernet / IPv4 without options / UDP frame, as the P4
    parser takes it; None for anything else (too short for the headers, another EtherType or protocol,
    IPv4 options).  Hina is UDP to `UDP_PORT`; its hina frame claims the UDP length less the UDP header."""
    if len(frame) < HINA_AT:
        return None
    ethertype, version_ihl, protocol, dport, udp_length = _PARSE.unpack_from(frame)
    if ethertype != ETHERTYPE_IPV4 or version_ihl != IPV4_NO_OPTIONS or protocol != IPPROTO_UDP:
        return None
    return dport, udp_length


def ipv4_checksum(header: bytes | bytearray | memoryview, at: int = 0) -> int:
    """The ones' complement sum of the IPv4 header at `at`, its checksum field taken as zero.  (The compiled
    kernels' is `hina.wire.compiled.ipv4_checksum`; a test holds the two equal.)"""
    words = _IPV4_WORDS.unpack_from(header, at)
    total = sum(words) - words[_CHECKSUM_WORD]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def encapsulate(payload: bytes, *, src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes,
                sport: int, dport: int, ident: int = 0, dont_fragment: bool = False,
                udp_len: int | None = None) -> bytes:
    """`payload` in Ethernet / IPv4 (no options, TTL 64, checksum set) / UDP (checksum 0), as a host sends it.

    Addresses are already packed (`mac_bytes`, `ip_bytes`); `udp_len` overrides the UDP length field
    (for frames that lie about it).
    """
    head = bytearray(HINA_AT)
    head[ETH_DST_AT : ETH_DST_AT + MAC_BYTES] = dst_mac
    head[ETH_SRC_AT : ETH_SRC_AT + MAC_BYTES] = src_mac
    U16.pack_into(head, ETH_TYPE_AT, ETHERTYPE_IPV4)
    head[IP_VERSION_AT] = IPV4_NO_OPTIONS
    U16.pack_into(head, IP_TOTAL_LEN_AT, HINA_AT - IPV4_AT + len(payload))
    U16.pack_into(head, IP_ID_AT, ident)
    U16.pack_into(head, IP_FLAGS_AT, IP_DONT_FRAGMENT if dont_fragment else 0)
    head[IP_TTL_AT], head[IP_PROTOCOL_AT] = TTL, IPPROTO_UDP
    head[IP_SRC_AT : IP_SRC_AT + IP_BYTES] = src_ip
    head[IP_DST_AT : IP_DST_AT + IP_BYTES] = dst_ip
    U16.pack_into(head, IP_CHECKSUM_AT, ipv4_checksum(head, IPV4_AT))
    U16.pack_into(head, UDP_SPORT_AT, sport)
    U16.pack_into(head, UDP_DPORT_AT, dport)
    U16.pack_into(head, UDP_LEN_AT, UDP_HEADER_BYTES + len(payload) if udp_len is None else udp_len)
    return bytes(head) + payload
