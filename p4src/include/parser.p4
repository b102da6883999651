#ifndef NATSWITCH_PARSER_P4
#define NATSWITCH_PARSER_P4

parser NatParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t sm) {
    state start {
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
        // Set before extracting, so a truncated packet is still known as ours.
        meta.is_agg = true;
        pkt.extract(hdr.agg);
        transition select(hdr.agg.msg_type, hdr.agg.encoding) {
            (MSG_SPARSE_CONTRIB, _): parse_block;
            (MSG_SPARSE_RESULT, _): parse_block;
            (_, ENC_FIXED32): parse_fixed;
            (_, ENC_CNAT8): parse_cnat;
#ifdef FOUR_BIT
            (_, ENC_NAT4): parse_nib;
            LANE_PARSE_SELECT       // one a lane encoding (protocol/encodings.py
                                    // `lanes`), gen_elements.py
#endif
            default: bad_encoding;
        }
    }
    state parse_block {
        pkt.extract(hdr.block);
        transition select(hdr.agg.flags, hdr.agg.encoding) {
            (FLAG_EMPTY &&& FLAG_EMPTY, ENC_FIXED32): parse_empty;
            (FLAG_EMPTY &&& FLAG_EMPTY, ENC_CNAT8): parse_empty;
            (_, ENC_FIXED32): parse_fixed;
            (_, ENC_CNAT8): parse_cnat;
            default: bad_encoding;
        }
    }
    state parse_empty {
        // No payload, or padding whose length the UDP header announces.
        transition select(hdr.udp.length) {
            UDP_LEN_EMPTY_PADDED: parse_pad;
            default: accept;
        }
    }
    state parse_pad {
        pkt.extract(hdr.pad);
        transition accept;
    }
    state parse_fixed {
        pkt.extract(hdr.fixed);
        transition accept;
    }
    state parse_cnat {
        pkt.extract(hdr.cnat);
        transition accept;
    }
#ifdef FOUR_BIT
    state parse_nib {
        pkt.extract(hdr.nib);
        transition accept;
    }
    // The lane encodings' states (protocol/encodings.py `lanes`), one a lane encoding in
    // wire-number order, each extracting its header and accepting (gen_elements.py
    // LANE_PARSE_STATES): parse_uq for the 4-bit integers, parse_sum for the byte sums.
    // Their names and headers are the program's of old, which the JSON, softswitch and
    // the tests know; a new lane encoding takes a header of its bits' layout
    // (gen_elements.py LAYOUTS).
    //
    LANE_PARSE_STATES
#endif
    state bad_encoding {
        verify(false, error.BadEncoding);
        transition accept;
    }
}

#endif
