/* hina: header and metadata declarations.
 * The hina header is wire/headers.py's declaration (FIELDS) bit for bit:
 * tests/wire/test_declared_once.py checks it field by field; `version` and `slot` together are the pool index of docs/design.md. */
#ifndef _HINA_HEADERS_P4_
#define _HINA_HEADERS_P4_

#include "configuration.p4"

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8> IPPROTO_UDP = 17;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

header hina_t {
    bit<8>  msg_type;
    bit<8>  op;
    bit<16> job_id;
    bit<8>  worker_id;
    bit<8>  flags;
    bit<1>  version;
    bit<15> slot;
    bit<32> offset;
    bit<16> count;
    bit<16> phase;
}

header hina_payload_t {
    bit<32> w00; bit<32> w01; bit<32> w02; bit<32> w03;
    bit<32> w04; bit<32> w05; bit<32> w06; bit<32> w07;
    bit<32> w08; bit<32> w09; bit<32> w10; bit<32> w11;
    bit<32> w12; bit<32> w13; bit<32> w14; bit<32> w15;
    bit<32> w16; bit<32> w17; bit<32> w18; bit<32> w19;
    bit<32> w20; bit<32> w21; bit<32> w22; bit<32> w23;
    bit<32> w24; bit<32> w25; bit<32> w26; bit<32> w27;
    bit<32> w28; bit<32> w29; bit<32> w30; bit<32> w31;
}

struct metadata_t {
    /* from job_config */
    bit<8>  workers;
    bit<32> full_mask;      /* the children's bits */
    bit<8>  children;       /* arrivals that complete a copy */
    bit<16> group;
    bit<16> slot_base;
    bit<16> slot_count;
    bit<8>  parents;        /* 0: this switch is the job's root */
    /* from tree_parent (trees) */
    bit<1>  has_parent;
    bit<9>  parent_port;
    bit<8>  member;         /* this switch's member id in the parent's job */
    /* from worker_auth */
    bit<32> worker_bit;
    /* from the arrival bitmap */
    verdict_t verdict;
    bit<1>  first;          /* first arrival in an empty copy: write, do not combine */
    bit<32> copy;           /* register index of the slot copy: slot * 2 + version */
    bit<32> bitmap;         /* the copy's arrival bitmap: a PENDING answer's word 0 */
    /* ingress decisions carried to egress */
    drop_reason_t drop_reason;
    bit<1>  is_result;      /* the switch emits a frame (a RESULT, or an UPDATE up): rewrite addresses per egress port */
    bit<1>  to_sender;      /* a RESULT unicast back: addressed to where its UPDATE came from */
    bit<1>  by_address;     /* the sender was authorized by its address and UDP port (worker_addresses) */
    bit<1>  is_flood;       /* a broadcast: never back out of its ingress port */
}

struct headers_t {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    udp_t          udp;
    hina_t         hina;
    hina_payload_t payload;
}

#endif
