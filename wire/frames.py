"""Frames as hosts put them on the wire: Ethernet / IPv4 (no options) / UDP around a hina frame.

The offsets of the outer headers, the IPv4 header checksum, and the
encapsulation a host applies; `hina.wire.headers` declares what follows
the UDP header.  The emulator's raw-frame path (`hina.emulator.frames`),
the raw transport and the packet vectors all build and parse frames with
these.
"""

from __future__ import annotations

import ipaddress
import struct

from .headers import ETH_HEADER_BYTES, IPV4_HEADER_BYTES, UDP_HEADER_BYTES

ETH = ETH_HEADER_BYTES
IP_END = ETH + IPV4_HEADER_BYTES
UDP_END = IP_END + UDP_HEADER_BYTES
_IPV4_WORDS = struct.Struct("!10H")

# A packet socket with PACKET_VNET_HDR reads (and writes) each frame after a struct virtio_net_hdr (host byte
# order): flags, gso_type, hdr_len, gso_size, csum_start, csum_offset.  A frame a host's stack left whole for the
# device to cut (segmentation offload) arrives as one "super-frame": gso_type UDP_L4, and gso_size the bytes of
# every UDP payload it stands for but the last.
VNET_HDR_BYTES = 10
VNET = struct.Struct("=BBHHHH")
VNET_AT_FLAGS, VNET_AT_GSO_TYPE, VNET_AT_HDR_LEN, VNET_AT_GSO_SIZE, VNET_AT_CSUM_START, VNET_AT_CSUM_OFFSET = (
    0, 1, 2, 4, 6, 8)
VNET_F_NEEDS_CSUM = 1  # the transport checksum is partial: csum_start/csum_offset say where to complete it
VNET_GSO_NONE, VNET_GSO_UDP_L4 = 0, 5


def mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
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


def ipv4_checksum(header: bytes | bytearray | memoryview, at: int = 0) -> int:
    """The ones' complement sum of the 20-byte IPv4 header at `at`, its checksum field taken as zero."""
    words = _IPV4_WORDS.unpack_from(header, at)
    total = sum(words) - words[5]
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def encapsulate(payload: bytes, *, src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes,
                sport: int, dport: int, ident: int = 0, dont_fragment: bool = False,
                udp_len: int | None = None) -> bytes:
    """`payload` in Ethernet / IPv4 (no options, TTL 64, checksum set) / UDP (checksum 0), as a host sends it.

    Addresses are already packed (`topology.mac_bytes`, `ip_bytes`); `udp_len`
    overrides the UDP length field (for frames that lie about it).
    """
    ip = bytearray(struct.pack("!BBHHHBBH", 0x45, 0, 28 + len(payload), ident, 0x4000 if dont_fragment else 0,
                               64, 17, 0) + src_ip + dst_ip)
    ip[10:12] = ipv4_checksum(bytes(ip)).to_bytes(2, "big")
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload) if udp_len is None else udp_len, 0)
    return dst_mac + src_mac + b"\x08\x00" + bytes(ip) + udp + payload
