#ifndef NATSWITCH_INTEGRITY_P4
#define NATSWITCH_INTEGRITY_P4

// The UDP checksum of an aggregation packet, over the pseudo-header, the UDP and AGG
// headers and the payload, must add up (docs/PROTOCOL.md "Integrity"): the ones'
// complement sum of everything, checksum field included, is 0xffff, so csum16 of it is 0.
// A checksum of 0 is not "none" here: it is verified like any other value.
#define UDP_PSEUDO hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length
#define UDP_FIELDS hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length
#define IPV4_FIELDS hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, \
    hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, \
    hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr

// In the verify stage, so that the payload headers are summed where they are: a hash in
// an action would have p4c copy each (ELEMS fields) into a temporary first. The sum,
// checksum included, is checked against a zero (meta.zero16, never written), not the
// checksum field itself, to keep the rule above.
control VerifyUdpChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.agg.isValid() && !hdr.block.isValid() && hdr.fixed.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.fixed },
            meta.zero16, HashAlgorithm.csum16);
        verify_checksum(hdr.agg.isValid() && !hdr.block.isValid() && !hdr.fixed.isValid()
                        && hdr.cnat.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.cnat },
            meta.zero16, HashAlgorithm.csum16);
#ifdef FOUR_BIT
        verify_checksum(hdr.agg.isValid() && !hdr.block.isValid() && !hdr.fixed.isValid()
                        && !hdr.cnat.isValid() && hdr.nib.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.nib },
            meta.zero16, HashAlgorithm.csum16);
        verify_checksum(hdr.agg.isValid() && !hdr.block.isValid() && hdr.uq.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.uq },
            meta.zero16, HashAlgorithm.csum16);
        verify_checksum(hdr.agg.isValid() && !hdr.block.isValid() && hdr.sum.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.sum },
            meta.zero16, HashAlgorithm.csum16);
        verify_checksum(hdr.agg.isValid() && !hdr.block.isValid() && !hdr.fixed.isValid()
                        && !hdr.cnat.isValid() && !hdr.nib.isValid() && !hdr.uq.isValid()
                        && !hdr.sum.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg },
            meta.zero16, HashAlgorithm.csum16);
#else
        verify_checksum(hdr.agg.isValid() && !hdr.block.isValid() && !hdr.fixed.isValid()
                        && !hdr.cnat.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg },
            meta.zero16, HashAlgorithm.csum16);
#endif
        // Sparse packets: the block header, then a payload, padding or nothing.
        verify_checksum(hdr.block.isValid() && hdr.fixed.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.block, hdr.fixed },
            meta.zero16, HashAlgorithm.csum16);
        verify_checksum(hdr.block.isValid() && !hdr.fixed.isValid() && hdr.cnat.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.block, hdr.cnat },
            meta.zero16, HashAlgorithm.csum16);
        verify_checksum(hdr.block.isValid() && !hdr.fixed.isValid() && !hdr.cnat.isValid()
                        && hdr.pad.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.block, hdr.pad },
            meta.zero16, HashAlgorithm.csum16);
        verify_checksum(hdr.block.isValid() && !hdr.fixed.isValid() && !hdr.cnat.isValid()
                        && !hdr.pad.isValid(),
            { UDP_PSEUDO, UDP_FIELDS, hdr.udp.checksum, hdr.agg, hdr.block },
            meta.zero16, HashAlgorithm.csum16);
    }
}

// v1model has one checksum-error bit for the IPv4 header's and the UDP checksums: the
// (small) IPv4 one is recomputed, as its verify_checksum did, to tell them apart.
control ChecksumError(inout headers_t hdr, inout metadata_t meta) {
    apply {
        bit<16> c;
        hash(c, HashAlgorithm.csum16, 16w0, { IPV4_FIELDS }, 32w65536);
        if (hdr.ipv4.isValid() && c != hdr.ipv4.hdr_checksum) {
            meta.drop_reason = DROP_BAD_CHECKSUM;
        } else {
            meta.udp_bad = true;
        }
    }
}

// Where aggregation packets are checked: after their parse and lengths, before their job.
control VerifyUdp(inout headers_t hdr, inout metadata_t meta) {
    apply {
        if (meta.udp_bad) { meta.drop_reason = DROP_BAD_UDP_CHECKSUM; }
    }
}

#endif
