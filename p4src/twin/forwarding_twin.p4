#ifndef NATSWITCH_FORWARDING_TWIN_P4
#define NATSWITCH_FORWARDING_TWIN_P4

// p4src/tna/forwarding_tna.p4's tables on v1model's metadata: the controller's entries
// for NatIngress.fwd.routes and NatEgress.addr.hosts fit both.
control Forwarding(inout tna_headers_t hdr, inout ig_meta_t meta, inout standard_metadata_t sm) {
    action route(bit<48> smac, bit<48> dmac, bit<9> port) {
        hdr.eth.src_addr = smac;
        hdr.eth.dst_addr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        sm.egress_spec = port;
    }
    action no_route() { meta.drop_reason = DROP_NO_ROUTE; }
    table routes {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { route; @defaultonly no_route; }
        default_action = no_route();
        size = MAX_ROUTES;
    }
    apply {
        if (hdr.ipv4.ttl <= 1) {
            meta.drop_reason = DROP_TTL_EXPIRED;
        } else {
            routes.apply();
        }
    }
}

control ResultAddressing(inout tna_headers_t hdr, in standard_metadata_t sm) {
    action to_host(bit<48> smac, bit<48> dmac, bit<32> sip, bit<32> dip) {
        hdr.eth.src_addr = smac;
        hdr.eth.dst_addr = dmac;
        hdr.ipv4.src_addr = sip;
        hdr.ipv4.dst_addr = dip;
    }
    table hosts {
        key = { sm.egress_port: exact; }
        actions = { to_host; NoAction; }
        default_action = NoAction();
        size = NUM_PORTS;
    }
    apply { hosts.apply(); }
}

#endif
