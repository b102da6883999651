#ifndef NATSWITCH_PARSER_TNA_P4
#define NATSWITCH_PARSER_TNA_P4

// The IPv4 header checksum is verified by the parser's Checksum extern.
#define PARSE_IPV4_CHECK \
        ipv4_csum.add(hdr.ipv4); \
        meta.ipv4_bad = ipv4_csum.verify();
#include "parser_shared_tna.p4"

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
    PARSE_WALK_STATES(meta)
#endif
    state parse_recirc {
        pkt.extract(hdr.recirc);
        transition parse_eth;
    }
    PARSE_AGG_STATES
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
#ifdef WITH_LANES
            2: parse_fixed;
#endif
            default: accept;
        }
    }
#if defined(CNAT8_RESULTS) || defined(WITH_LANES)
    state parse_fixed {
        pkt.extract(hdr.fixed);
        transition accept;
    }
#endif
}

#endif
