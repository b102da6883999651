#ifndef NATSWITCH_FORWARDING_TWIN_P4
#define NATSWITCH_FORWARDING_TWIN_P4

#include "../tna/forwarding_shared_tna.p4"

// p4src/tna/forwarding_shared_tna.p4's tables on v1model's metadata: the controller's
// entries for NatIngress.fwd.routes and NatEgress.addr.hosts fit both.
control Forwarding(inout tna_headers_t hdr, inout ig_meta_t meta, inout standard_metadata_t sm) {
    FORWARDING_ROUTES(bit<9>, sm.egress_spec)
}

control ResultAddressing(inout tna_headers_t hdr, in standard_metadata_t sm) {
    ADDRESSING_HOSTS(sm.egress_port)
}

#endif
