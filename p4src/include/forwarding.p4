#ifndef NATSWITCH_FORWARDING_P4
#define NATSWITCH_FORWARDING_P4

// Plain IPv4 routing for everything that is not aggregated (ping, iperf, ...).
control Forwarding(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    action route(bit<48> smac, bit<48> dmac, bit<9> port) {
        hdr.eth.src_addr = smac;
        hdr.eth.dst_addr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        sm.egress_spec = port;
    }
    action no_route() {
        meta.drop_reason = DROP_NO_ROUTE;
    }
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

#endif
