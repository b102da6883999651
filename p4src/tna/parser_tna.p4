#ifndef NATSWITCH_PARSER_TNA_P4
#define NATSWITCH_PARSER_TNA_P4

parser TnaIngressParser(packet_in pkt, out tna_headers_t hdr, out ig_meta_t meta,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_csum;
#if PASSES > 1
    // The ports the control plane put in loopback for the walk (passes_tna.p4): only they
    // carry a walk header, and only the switch itself sends to them.
    value_set<PortId_t>(PASSES) loop_ports;
#endif
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        // The flags the controls test before any of them writes them.
        meta.drop_reason = DROP_NONE;
        meta.ipv4_bad = false;
        meta.live = false;
        meta.first = false;
        meta.down = false;
        meta.pass2 = false;
        meta.lanes = false;
        meta.bm_seen = 0;
        meta.remaining = 0;
#if PASSES > 1
        meta.walking = false;
        transition select(ig_intr_md.ingress_port) {
            loop_ports: parse_walk;
            default: parse_eth;
        }
#else
        transition select(ig_intr_md.ingress_port) {
            RECIRC_PORT: parse_recirc;
            default: parse_eth;
        }
#endif
    }
#if PASSES > 1
    state parse_walk {
        pkt.extract(hdr.walk);
        meta.walking = true;
        meta.ridx = hdr.walk.ridx;
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
#endif
    state parse_recirc {
        pkt.extract(hdr.recirc);
        transition parse_eth;
    }
    state parse_eth {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_csum.add(hdr.ipv4);
        meta.ipv4_bad = ipv4_csum.verify();
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
#ifdef WITH_CNAT8
            ENC_CNAT8: parse_cnat;
#endif
#ifdef WITH_UQ4
            ENC_UQ4: parse_uq4;
            ENC_SUM8: parse_sum8;
#endif
            default: accept;
        }
    }
    state parse_fixed {
        pkt.extract(hdr.fixed);
        transition accept;
    }
#ifdef WITH_CNAT8
    state parse_cnat {
        pkt.extract(hdr.cnat);
        transition accept;
    }
#endif
#ifdef WITH_UQ4
    state parse_uq4 {
        pkt.extract(hdr.uq4);
        transition accept;
    }
    state parse_sum8 {
        pkt.extract(hdr.sum8);
        transition accept;
    }
#endif
}

// A packet going round again, or routed, is left as it is (its payload unparsed); an
// aggregation packet the ingress sends out is parsed up to the AGG header, and up to the
// sums when the egress re-compresses them (1: to CNAT8) or narrows them (2: to SUM8).
parser TnaEgressParser(packet_in pkt, out tna_headers_t hdr, out eg_meta_t meta,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
#if PASSES > 1
        // The walk header is in front where the packet harvests (to a loopback port) or
        // leaves at the end of its walk.
        transition select(hdr.bridge.walked, hdr.bridge.to_recirc, hdr.bridge.is_agg) {
            (0, 0, 1): parse_agg;
            (1, _, 1): parse_walk;
            default: accept;
        }
#else
        transition select(hdr.bridge.to_recirc, hdr.bridge.is_agg) {
            (0, 1): parse_agg;
            default: accept;
        }
#endif
    }
#if PASSES > 1
    state parse_walk {
        pkt.extract(hdr.walk);
        transition parse_agg;
    }
#endif
    state parse_agg {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.ipv4);
        pkt.extract(hdr.udp);
        pkt.extract(hdr.agg);
        transition select(hdr.bridge.recompress) {
#ifdef CNAT8_RESULTS
            1: parse_fixed;
#endif
#ifdef WITH_UQ4
            2: parse_fixed;
#endif
            default: accept;
        }
    }
#if defined(CNAT8_RESULTS) || defined(WITH_UQ4)
    state parse_fixed {
        pkt.extract(hdr.fixed);
        transition accept;
    }
#endif
}

#endif
