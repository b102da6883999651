#ifndef NATSWITCH_FORWARDING_TNA_P4
#define NATSWITCH_FORWARDING_TNA_P4

// Plain IPv4 routing for everything that is not aggregated, as the v1model program's.
control Forwarding(inout tna_headers_t hdr, inout ig_meta_t meta,
                   inout ingress_intrinsic_metadata_for_tm_t tm) {
    action route(bit<48> smac, bit<48> dmac, PortId_t port) {
        hdr.eth.src_addr = smac;
        hdr.eth.dst_addr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        tm.ucast_egress_port = port;
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

// Aggregation packets towards a host are addressed to it, from the service address.
control ResultAddressing(inout tna_headers_t hdr, in PortId_t port) {
    action to_host(bit<48> smac, bit<48> dmac, bit<32> sip, bit<32> dip) {
        hdr.eth.src_addr = smac;
        hdr.eth.dst_addr = dmac;
        hdr.ipv4.src_addr = sip;
        hdr.ipv4.dst_addr = dip;
    }
    table hosts {
        key = { port: exact; }
        actions = { to_host; NoAction; }
        default_action = NoAction();
        size = NUM_PORTS;
    }
    apply { hosts.apply(); }
}

#endif
