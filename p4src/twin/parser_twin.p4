#ifndef NATSWITCH_PARSER_TWIN_P4
#define NATSWITCH_PARSER_TWIN_P4

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
    state parse_walk {
        pkt.extract(hdr.walk);
        m.ig.walking = true;
        m.ig.ridx = hdr.walk.ridx;
        transition select(hdr.walk.harvest) {
            0: parse_eth;
            default: parse_harvest;
        }
    }
    // Harvesting: the codes already read back stay unparsed behind the headers.
    state parse_harvest {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.agg);
        transition accept;
    }
#else
        transition parse_eth;
    }
#endif
    state parse_eth {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        // Options and fragments are routed, never aggregated.
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, PROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            AGG_UDP_PORT: parse_agg;
            default: accept;
        }
    }
    state parse_agg {
        pkt.extract(hdr.agg);
        // Any other encoding leaves no payload header valid: BAD_ENCODING.
        transition select(hdr.agg.encoding) {
            ENC_FIXED32: parse_fixed;
            ENC_CNAT8: parse_cnat;
            ENC_UQ4: parse_uq4;
            ENC_SUM8: parse_sum8;
            default: accept;
        }
    }
    state parse_fixed {
        pkt.extract(hdr.fixed);
        transition accept;
    }
    state parse_cnat {
        pkt.extract(hdr.cnat);
        transition accept;
    }
    state parse_uq4 {
        pkt.extract(hdr.uq4);
        transition accept;
    }
    state parse_sum8 {
        pkt.extract(hdr.sum8);
        transition accept;
    }
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
