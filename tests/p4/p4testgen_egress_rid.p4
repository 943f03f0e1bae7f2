/* p4testgen's Tofino target reading a header after the egress intrinsic metadata (tests/p4/test_testgen.py).
 * Ingress makes a bridge header (its in port, a tag) and sends every frame to port 5; egress extracts the
 * intrinsic metadata, whose egress_rid a table keys on (so the compiler keeps that field), then the bridge
 * header, and drops the frame unless the bridge says what ingress wrote.  Every test p4testgen writes of it should
 * expect the frame out of port 5 as it came in. */
#include <core.p4>
#include <tna.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header bridge_t { bit<7> pad; bit<9> port; bit<16> tag; }
struct headers_t { bridge_t bridge; ethernet_t ethernet; }
struct meta_t {}

parser IngressParser(packet_in pkt, out headers_t hdr, out meta_t meta, out ingress_intrinsic_metadata_t ig) {
    state start {
        pkt.extract(ig);
        pkt.advance(PORT_METADATA_SIZE);
        pkt.extract(hdr.ethernet);
        hdr.bridge.setValid();
        hdr.bridge.pad = 0;
        hdr.bridge.port = ig.ingress_port;
        hdr.bridge.tag = 0xABCD;
        transition accept;
    }
}

control Ingress(inout headers_t hdr, inout meta_t meta, in ingress_intrinsic_metadata_t ig,
                in ingress_intrinsic_metadata_from_parser_t prsr, inout ingress_intrinsic_metadata_for_deparser_t dprsr,
                inout ingress_intrinsic_metadata_for_tm_t tm) {
    apply { tm.ucast_egress_port = 5; }
}

control IngressDeparser(packet_out pkt, inout headers_t hdr, in meta_t meta,
                        in ingress_intrinsic_metadata_for_deparser_t dprsr) {
    apply { pkt.emit(hdr.bridge); pkt.emit(hdr.ethernet); }
}

parser EgressParser(packet_in pkt, out headers_t hdr, out meta_t meta, out egress_intrinsic_metadata_t eg) {
    state start { pkt.extract(eg); pkt.extract(hdr.bridge); transition accept; }
}

control Egress(inout headers_t hdr, inout meta_t meta, in egress_intrinsic_metadata_t eg,
               in egress_intrinsic_metadata_from_parser_t prsr, inout egress_intrinsic_metadata_for_deparser_t dprsr,
               inout egress_intrinsic_metadata_for_output_port_t oport) {
    table replicas {  /* (as hina's egress keys a table on the replica id: the compiler keeps the field) */
        key = { eg.egress_rid: exact; }
        actions = { NoAction; }
        default_action = NoAction();
    }
    apply {
        replicas.apply();
        if (hdr.bridge.tag != 0xABCD || hdr.bridge.pad != 0) {
            dprsr.drop_ctl = 1;
        }
    }
}

control EgressDeparser(packet_out pkt, inout headers_t hdr, in meta_t meta,
                       in egress_intrinsic_metadata_for_deparser_t dprsr) {
    apply { }
}

Pipeline(IngressParser(), Ingress(), IngressDeparser(), EgressParser(), Egress(), EgressDeparser()) pipe;
Switch(pipe) main;
