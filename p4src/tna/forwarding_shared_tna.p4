#ifndef NATSWITCH_FORWARDING_SHARED_TNA_P4
#define NATSWITCH_FORWARDING_SHARED_TNA_P4

// The routing and addressing tables, written once for the TNA program (forwarding_tna.p4)
// and its v1model twin (p4src/twin/forwarding_twin.p4): the controller's entries for
// routes and hosts fit both.

// Plain IPv4 routing for everything that is not aggregated, as the v1model program's;
// EGRESS is the architecture's egress port, PORT_TYPE its type.
#define FORWARDING_ROUTES(PORT_TYPE, EGRESS) \
    action route(bit<48> smac, bit<48> dmac, PORT_TYPE port) { \
        hdr.eth.src_addr = smac; \
        hdr.eth.dst_addr = dmac; \
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1; \
        EGRESS = port; \
    } \
    action no_route() { meta.drop_reason = DROP_NO_ROUTE; } \
    table routes { \
        key = { hdr.ipv4.dst_addr: lpm; } \
        actions = { route; @defaultonly no_route; } \
        default_action = no_route(); \
        size = MAX_ROUTES; \
    } \
    apply { \
        if (hdr.ipv4.ttl <= 1) { \
            meta.drop_reason = DROP_TTL_EXPIRED; \
        } else { \
            routes.apply(); \
        } \
    }

// Aggregation packets towards a host are addressed to it, from the service address; PORT
// is the egress port.
#define ADDRESSING_HOSTS(PORT) \
    action to_host(bit<48> smac, bit<48> dmac, bit<32> sip, bit<32> dip) { \
        hdr.eth.src_addr = smac; \
        hdr.eth.dst_addr = dmac; \
        hdr.ipv4.src_addr = sip; \
        hdr.ipv4.dst_addr = dip; \
    } \
    table hosts { \
        key = { PORT: exact; } \
        actions = { to_host; NoAction; } \
        default_action = NoAction(); \
        size = NUM_PORTS; \
    } \
    apply { hosts.apply(); }

#endif
