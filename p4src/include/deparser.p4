#ifndef NATSWITCH_DEPARSER_P4
#define NATSWITCH_DEPARSER_P4

control NatVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    VerifyUdpChecksum() udp;
    apply {
        verify_checksum(hdr.ipv4.isValid(), { IPV4_FIELDS }, hdr.ipv4.hdr_checksum,
                        HashAlgorithm.csum16);
        udp.apply(hdr, meta);
    }
}

control NatComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(), { IPV4_FIELDS }, hdr.ipv4.hdr_checksum,
                        HashAlgorithm.csum16);
        // Every aggregation packet leaving carries its UDP checksum (docs/PROTOCOL.md
        // "Integrity"); the switch rewrites payloads, addresses and lengths.
        update_checksum(hdr.agg.isValid() && !hdr.block.isValid() && hdr.fixed.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.agg, hdr.fixed }, hdr.udp.checksum, HashAlgorithm.csum16);
        update_checksum(hdr.agg.isValid() && !hdr.block.isValid() && hdr.cnat.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.agg, hdr.cnat }, hdr.udp.checksum, HashAlgorithm.csum16);
#ifdef FOUR_BIT
        // Lane results and partial sums (a lane contribution never leaves as it came).
        update_checksum(hdr.agg.isValid() && !hdr.block.isValid() && hdr.sum.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.agg, hdr.sum }, hdr.udp.checksum, HashAlgorithm.csum16);
        // Refusals carry no payload (docs/PROTOCOL.md "Refusals").
        update_checksum(hdr.agg.isValid() && !hdr.block.isValid() && !hdr.fixed.isValid()
                        && !hdr.cnat.isValid() && !hdr.nib.isValid()
                        && LANE_NONE_VALID,
            { UDP_PSEUDO, UDP_FIELDS, hdr.agg }, hdr.udp.checksum, HashAlgorithm.csum16);
#else
        update_checksum(hdr.agg.isValid() && !hdr.block.isValid() && !hdr.fixed.isValid()
                        && !hdr.cnat.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.agg }, hdr.udp.checksum, HashAlgorithm.csum16);
#endif
        // Sparse results: a payload, or none (a prime's); they never carry padding.
        update_checksum(hdr.block.isValid() && hdr.fixed.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.agg, hdr.block, hdr.fixed }, hdr.udp.checksum,
            HashAlgorithm.csum16);
        update_checksum(hdr.block.isValid() && hdr.cnat.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.agg, hdr.block, hdr.cnat }, hdr.udp.checksum,
            HashAlgorithm.csum16);
        update_checksum(hdr.block.isValid() && !hdr.fixed.isValid() && !hdr.cnat.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.agg, hdr.block }, hdr.udp.checksum,
            HashAlgorithm.csum16);
    }
}

control NatDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.agg);
        pkt.emit(hdr.block);
        pkt.emit(hdr.fixed);
        pkt.emit(hdr.cnat);
#ifdef FOUR_BIT
        pkt.emit(hdr.nib);
        LANE_EMIT       // the lane encodings' headers, in wire-number order
        // (gen_elements.py)
#endif
        pkt.emit(hdr.pad);
    }
}

#endif
