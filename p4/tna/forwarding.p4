/* hina on Tofino: everything that is not hina (ARP, ping, iperf) is forwarded on its destination MAC,
 * the broadcast address to a flood multicast group; and in egress, the addresses of every frame the
 * switch emits.  Tables, actions and keys are p4/forwarding.p4's (the egress intrinsic metadata is
 * named `standard_metadata`, so the keys are the same on both targets). */
#ifndef _HINA_TNA_FORWARDING_P4_
#define _HINA_TNA_FORWARDING_P4_

#include "headers.p4"

control Forwarding(inout headers_t hdr, inout metadata_t meta,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    action forward(bit<9> port) {
        ig_tm_md.ucast_egress_port = port;
    }
    action flood(bit<16> group) {
        ig_tm_md.mcast_grp_a = group;
        hdr.bridge.is_flood = 1;
    }
    action no_route() {
        meta.drop_reason = DROP_NO_ROUTE;
    }
    table mac_forward {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; flood; no_route; }
        default_action = no_route();
        size = 1024;
    }
    apply {
        mac_forward.apply();
    }
}

/* Per egress port (`hosts`): the switch's own address as the source and the port's host (or neighbour
 * switch) as the destination, at UDP port 0x4E41.  Per replica id (`replicas`): the member's MAC, IPv4
 * address and UDP port.  A RESULT unicast back to its sender (`to_sender`) goes to where its UPDATE
 * came from. */
control EgressRewrite(inout headers_t hdr, in egress_intrinsic_metadata_t standard_metadata) {
    bit<48> sender_mac;
    bit<32> sender_ip;
    bit<16> sender_port;

    action rewrite(bit<48> switch_mac, bit<32> switch_ip, bit<48> host_mac, bit<32> host_ip) {
        hdr.ethernet.src_addr = switch_mac;
        hdr.ethernet.dst_addr = host_mac;
        hdr.ipv4.src_addr = switch_ip;
        hdr.ipv4.dst_addr = host_ip;
        hdr.udp.src_port = HINA_PORT;
        hdr.udp.dst_port = HINA_PORT;
        hdr.udp.checksum = 0;   /* optional over IPv4; the payload changed */
    }
    table hosts {
        key = { standard_metadata.egress_port: exact; }
        actions = { rewrite; NoAction; }
        default_action = NoAction();
        size = 512;
    }
    action to_member(bit<48> host_mac, bit<32> host_ip, bit<16> host_port) {
        hdr.ethernet.dst_addr = host_mac;
        hdr.ipv4.dst_addr = host_ip;
        hdr.udp.dst_port = host_port;
    }
    table replicas {
        key = { standard_metadata.egress_rid: exact; }
        actions = { to_member; NoAction; }
        default_action = NoAction();
        size = 8192;
    }
    action back_to_sender() {
        hdr.ethernet.dst_addr = sender_mac;
        hdr.ipv4.dst_addr = sender_ip;
        hdr.udp.dst_port = sender_port;
    }
    apply {
        sender_mac = hdr.ethernet.src_addr;
        sender_ip = hdr.ipv4.src_addr;
        sender_port = hdr.udp.src_port;
        hosts.apply();
        if (standard_metadata.egress_rid != 0) {
            replicas.apply();
        } else if (hdr.bridge.to_sender == 1) {
            back_to_sender();
        }
    }
}

#endif
