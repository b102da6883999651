// natswitch: in-network aggregation of naturally compressed gradients.
// This file only wires the controls kept one per file under include/.
#include <core.p4>
#include <v1model.p4>

#include "include/sizes.p4"
#include "include/constants.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/forwarding.p4"
#include "include/aggregation.p4"
#include "include/addressing.p4"
#include "include/impairment.p4"
#include "include/deparser.p4"

control NatIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_rx;
    counter(DROP_REASONS, CounterType.packets_and_bytes) drops;
    Forwarding() fwd;
    Aggregation() agg;
    ChecksumError() cksum;

    apply {
        port_rx.count((bit<32>)sm.ingress_port);
        if (sm.checksum_error == 1) {
            cksum.apply(hdr, meta);     // BAD_CHECKSUM, or the UDP checksum's (aggregation)
        }
        if (meta.drop_reason == DROP_NONE && !meta.is_agg) {
            // A frame cut short, even inside its IPv4 header, is a length problem.
            if (sm.parser_error != error.NoError) {
                meta.drop_reason = DROP_BAD_LENGTH;
            } else if (hdr.ipv4.isValid()) {
                fwd.apply(hdr, meta, sm);
            } else {
                meta.drop_reason = DROP_NOT_IPV4;
            }
        }
        // Aggregation packets, and routed ones to be counted as FORWARDED.
        if (meta.drop_reason == DROP_NONE) {
            agg.apply(hdr, meta, sm);
        }
        if (meta.drop_reason != DROP_NONE) {
            drops.count((bit<32>)meta.drop_reason);
            if (!meta.refused) { mark_to_drop(sm); }
        }
    }
}

control NatEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_tx;
    counter(DROP_REASONS, CounterType.packets_and_bytes) drops;
    ResultAddressing() addr;
    Impairment() impair;

    apply {
        impair.apply(meta, sm);
        if (meta.impaired) {
            drops.count((bit<32>)DROP_IMPAIRMENT);
            mark_to_drop(sm);
        } else {
            if (hdr.agg.isValid()) { addr.apply(hdr, sm); }
            port_tx.count((bit<32>)sm.egress_port);
        }
    }
}

V1Switch(NatParser(), NatVerifyChecksum(), NatIngress(), NatEgress(),
         NatComputeChecksum(), NatDeparser()) main;
