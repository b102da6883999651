#ifndef NATSWITCH_FORWARDING_TNA_P4
#define NATSWITCH_FORWARDING_TNA_P4

#include "forwarding_shared_tna.p4"

// forwarding_shared_tna.p4's tables on Tofino's traffic manager.
control Forwarding(inout tna_headers_t hdr, inout ig_meta_t meta,
                   inout ingress_intrinsic_metadata_for_tm_t tm) {
    FORWARDING_ROUTES(PortId_t, tm.ucast_egress_port)
}

control ResultAddressing(inout tna_headers_t hdr, in PortId_t port) {
    ADDRESSING_HOSTS(port)
}

#endif
