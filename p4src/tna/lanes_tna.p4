#ifndef NATSWITCH_LANES_TNA_P4
#define NATSWITCH_LANES_TNA_P4

#ifdef WITH_LANES
// The lane encodings' integers (protocol/encodings.py `lanes`) are added as they are,
// never decoded (docs/PROTOCOL.md "Payload"): elements 2j and 2j + 1 go to the high and
// low 16-bit lanes of word j of the sums, so the pair registers add four elements each. A lane's sum stays below 2^16 (at
// most 32 children of at most 255), so no carry crosses into its neighbour. Plain P4:
// the v1model twin runs these controls as they are.
control SpreadLanes(inout tna_headers_t hdr) {
    apply {
        hdr.fixed.setValid();
#ifndef LANES_ONLY
        ZERO_REST
#endif
        if (LANE_FIRST_VALID) {
            LANE_FIRST_SPREAD
        } else {
            LANE_OTHER_SPREAD
        }
    }
}

// The lanes' low bytes are the SUM8 result. A lane above 255 cannot travel as SUM8: its
// high byte shows in the OR of all the words, and the packet is dropped (SUM_OVERFLOW).
control NarrowLanes(inout tna_headers_t hdr, out bool overflow) {
    apply {
        hdr.sum8.setValid();
        NARROW
        OR_TREE
        overflow = (hdr.fixed.v0 & 0xff00ff00) != 0;
        hdr.fixed.setInvalid();
        hdr.agg.encoding = ENC_SUM8;
        hdr.udp.length = UDP_LEN_SUM8;
        hdr.ipv4.total_len = UDP_LEN_SUM8 + 20;
    }
}
#endif

#endif
