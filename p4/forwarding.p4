/* hina: everything that is not hina (ARP, ping, iperf) is forwarded on its
 * destination MAC; the broadcast address maps to a flood multicast group. */
#ifndef _HINA_FORWARDING_P4_
#define _HINA_FORWARDING_P4_

#include "headers.p4"

control Forwarding(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action flood(bit<16> group) {
        standard_metadata.mcast_grp = group;
        meta.is_flood = 1;
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

/* Where a frame the switch emits goes.  Per egress port (`hosts`): the switch's own address as the source
 * and the port's host (or neighbour switch) as the destination, at UDP port 0x4E41: a partial up, and the
 * default.  Per replica id (`replicas`, each job's multicast group has a replica per member address): the
 * member's MAC, IPv4 address and UDP port, so ranks that share a host each get their RESULT.  A RESULT
 * unicast back to its sender (`meta.to_sender`) goes to where its UPDATE came from. */
control EgressRewrite(inout headers_t hdr, in metadata_t meta, in standard_metadata_t standard_metadata) {
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
    apply {
        bit<48> sender_mac = hdr.ethernet.src_addr;
        bit<32> sender_ip = hdr.ipv4.src_addr;
        bit<16> sender_port = hdr.udp.src_port;
        hosts.apply();
        if (standard_metadata.egress_rid != 0) {
            replicas.apply();
        } else if (meta.to_sender == 1) {
            hdr.ethernet.dst_addr = sender_mac;
            hdr.ipv4.dst_addr = sender_ip;
            hdr.udp.dst_port = sender_port;
        }
    }
}

#endif
