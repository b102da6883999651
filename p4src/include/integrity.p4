#ifndef NATSWITCH_INTEGRITY_P4
#define NATSWITCH_INTEGRITY_P4

// The UDP checksum of an aggregation packet, over the pseudo-header, the UDP and AGG
// headers and the payload, must add up (docs/PROTOCOL.md "Integrity"): the ones'
// complement sum of everything, checksum field included, is 0xffff, so csum16 of it is 0.
// A checksum of 0 is not "none" here: it is verified like any other value.
#define UDP_PSEUDO hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length
#define UDP_FIELDS hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length
control VerifyUdp(inout headers_t hdr, inout metadata_t meta) {
    action verify_fixed() {
        bit<16> c;
        hash(c, HashAlgorithm.csum16, 16w0,
             { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.fixed }, 32w65536);
        if (c != 0) { meta.drop_reason = DROP_BAD_UDP_CHECKSUM; }
    }
    action verify_cnat() {
        bit<16> c;
        hash(c, HashAlgorithm.csum16, 16w0,
             { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.cnat }, 32w65536);
        if (c != 0) { meta.drop_reason = DROP_BAD_UDP_CHECKSUM; }
    }
    // Sparse packets: the block header, then a payload, padding or nothing.
    action verify_block_fixed() {
        bit<16> c;
        hash(c, HashAlgorithm.csum16, 16w0,
             { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.block, hdr.fixed },
             32w65536);
        if (c != 0) { meta.drop_reason = DROP_BAD_UDP_CHECKSUM; }
    }
    action verify_block_cnat() {
        bit<16> c;
        hash(c, HashAlgorithm.csum16, 16w0,
             { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.block, hdr.cnat },
             32w65536);
        if (c != 0) { meta.drop_reason = DROP_BAD_UDP_CHECKSUM; }
    }
    action verify_block_pad() {
        bit<16> c;
        hash(c, HashAlgorithm.csum16, 16w0,
             { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.block, hdr.pad },
             32w65536);
        if (c != 0) { meta.drop_reason = DROP_BAD_UDP_CHECKSUM; }
    }
    action verify_block_empty() {
        bit<16> c;
        hash(c, HashAlgorithm.csum16, 16w0,
             { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.block }, 32w65536);
        if (c != 0) { meta.drop_reason = DROP_BAD_UDP_CHECKSUM; }
    }
    apply {
        if (hdr.block.isValid()) {
            if (hdr.fixed.isValid()) {
                verify_block_fixed();
            } else if (hdr.cnat.isValid()) {
                verify_block_cnat();
            } else if (hdr.pad.isValid()) {
                verify_block_pad();
            } else {
                verify_block_empty();
            }
        } else if (hdr.fixed.isValid()) {
            verify_fixed();
        } else {
            verify_cnat();
        }
    }
}

#endif
