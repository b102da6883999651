#ifndef NATSWITCH_PARSER_TWIN_P4
#define NATSWITCH_PARSER_TWIN_P4

// The IPv4 header checksum is verified by TwinVerifyChecksum, not in the parser.
#define PARSE_IPV4_CHECK
#include "../tna/parser_shared_tna.p4"

// The TNA ingress parser's states (p4src/tna/parser_tna.p4) without Tofino 1's
// recirculation header; the payload is parsed once, for ingress and egress alike.
#if PASSES > 1
const bit<32> PKT_INSTANCE_TYPE_RECIRC = 4;     // simple_switch's instance type
#endif

parser TwinParser(packet_in pkt, out tna_headers_t hdr, inout twin_meta_t m,
                  inout standard_metadata_t sm) {
    state start {
        // The flags the controls test before any of them writes them.
        m.ig.drop_reason = DROP_NONE;
        m.ig.ipv4_bad = false;
        m.ig.len_ok = false;
        m.ig.enc_bad = false;
        m.ig.job_ok = false;
        m.ig.child_ok = false;
        m.ig.admitted = false;
        m.ig.result_in = false;
        m.ig.live = false;
        m.ig.first = false;
        m.ig.down = false;
        m.ig.pass2 = false;
        m.ig.bm_seen = 0;
        m.ig.remaining = 0;
        m.ig.sess_x = 0xffff;
        m.ig.exp_chk = 0;
        m.ig.slot_chk = 0;
#if PASSES > 1
        m.ig.walking = false;
        // A later pass of the walk comes back recirculated, where the TNA program's comes
        // in through a loopback port (p4src/tna/parser_tna.p4).
        transition select(sm.instance_type) {
            PKT_INSTANCE_TYPE_RECIRC: parse_walk;
            default: parse_eth;
        }
    }
    PARSE_WALK_STATES(m.ig)
#else
        transition parse_eth;
    }
#endif
    PARSE_AGG_STATES
}

// The IPv4 header checksum only: the profile checks no payload (docs/PROTOCOL.md).
control TwinVerifyChecksum(inout tna_headers_t hdr, inout twin_meta_t m) {
    apply {
        verify_checksum(hdr.ipv4.isValid(), {
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
            hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr},
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

// The IPv4 header checksum is rewritten; the UDP checksum of an aggregation packet the
// switch rewrote is 0, none (next_step_twin.p4), as the TNA program's deparser leaves it.
control TwinComputeChecksum(inout tna_headers_t hdr, inout twin_meta_t m) {
    apply {
        update_checksum(hdr.ipv4.isValid(), {
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
            hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr},
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control TwinDeparser(packet_out pkt, in tna_headers_t hdr) {
    apply { pkt.emit(hdr); }
}

#endif
