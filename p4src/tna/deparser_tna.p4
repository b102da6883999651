#ifndef NATSWITCH_DEPARSER_TNA_P4
#define NATSWITCH_DEPARSER_TNA_P4

control TnaIngressDeparser(packet_out pkt, inout tna_headers_t hdr, in ig_meta_t meta,
                           in ingress_intrinsic_metadata_for_deparser_t dprsr) {
    apply { pkt.emit(hdr); }
}

// The IPv4 header checksum is rewritten; the UDP checksum of an aggregation packet the
// switch rewrote is 0, none (docs/PROTOCOL.md "Tofino profile").
control TnaEgressDeparser(packet_out pkt, inout tna_headers_t hdr, in eg_meta_t meta,
                          in egress_intrinsic_metadata_for_deparser_t dprsr) {
    Checksum() ipv4_csum;
    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.hdr_checksum = ipv4_csum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        }
        pkt.emit(hdr);
    }
}

#endif
