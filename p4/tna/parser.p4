/* hina on Tofino: parsers and deparsers.
 * Ethernet / IPv4 (no options) / UDP to port 0x4E41 / hina / K words, as p4/parser.p4.  A frame that
 * comes back on the recirculation port carries the bridge header first (its second pass).  A frame too
 * short for a header stops the parser with that header invalid; ingress reads parser_err (so the frame
 * is not dropped before ingress counts it) and names the drop.  Egress parses only what it rewrites. */
#ifndef _HINA_TNA_PARSER_P4_
#define _HINA_TNA_PARSER_P4_

#include "headers.p4"

parser HinaIngressParser(packet_in packet,
                         out headers_t hdr,
                         out metadata_t meta,
                         out ingress_intrinsic_metadata_t standard_metadata) {
    Checksum() ipv4_checksum;

    state start {
        packet.extract(standard_metadata);
        packet.advance(PORT_METADATA_SIZE);
        meta.checksum_error = false;
        meta.to_hina = false;
        transition select(standard_metadata.ingress_port[6:0]) {
            HINA_RECIRC_PORT: parse_bridge;   /* a second pass (only this program sends to that port) */
            default: new_bridge;
        }
    }
    state new_bridge {
        /* a frame from a port: its first pass.  The bridge header is made here, not by an action: an
         * action that writes constants may copy a field only to the same place in a container, and the
         * port's place in the intrinsic metadata is not the bridge header's */
        hdr.bridge.setValid();
        hdr.bridge._pad0 = 0;
        hdr.bridge.ingress_port = standard_metadata.ingress_port;
        hdr.bridge.pass = PASS_NONE;
        hdr.bridge.is_result = 0;
        hdr.bridge.to_sender = 0;
        hdr.bridge.by_address = 0;
        hdr.bridge.is_flood = 0;
        hdr.bridge.to_parent = 0;
        hdr.bridge.read_lo = 0;
        hdr.bridge._pad1 = 0;
        transition parse_ethernet;
    }
    state parse_bridge {
        packet.extract(hdr.bridge);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        ipv4_checksum.add(hdr.ipv4);
        meta.checksum_error = ipv4_checksum.verify();
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (4, 5, IPPROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            HINA_PORT: parse_hina;
            default: accept;
        }
    }
    state parse_hina {
        meta.to_hina = true;  /* before the extract: a frame too short for it is still hina's to drop */
        packet.extract(hdr.hina);
        transition parse_lo;
    }
    state parse_lo {
        packet.extract(hdr.lo);
        transition parse_hi;
    }
    state parse_hi {
        packet.extract(hdr.hi);
        transition accept;
    }
}

/* Everything goes out as it came (bytes past the parsed headers ride along), the bridge header first:
 * egress takes it off, and a frame bound for its second pass (egress bypassed) carries it round. */
control HinaIngressDeparser(packet_out packet, inout headers_t hdr, in metadata_t meta,
                            in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
        packet.emit(hdr.bridge);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.hina);
        packet.emit(hdr.lo);
        packet.emit(hdr.hi);
    }
}

parser HinaEgressParser(packet_in packet,
                        out headers_t hdr,
                        out metadata_t meta,
                        out egress_intrinsic_metadata_t standard_metadata) {
    state start {
        packet.extract(standard_metadata);
        packet.extract(hdr.bridge);
        transition select(hdr.bridge.is_result) {
            1: parse_ethernet;    /* addresses to rewrite */
            default: accept;      /* forwarded as it came */
        }
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        packet.extract(hdr.ipv4);
        packet.extract(hdr.udp);
        transition accept;
    }
}

/* Only frames the switch emits get new addresses, so only their IPv4 checksum is recomputed. */
control HinaEgressDeparser(packet_out packet, inout headers_t hdr, in metadata_t meta,
                           in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;
    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
                hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
        }
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
    }
}

#endif
