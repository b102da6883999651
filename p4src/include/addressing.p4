#ifndef NATSWITCH_ADDRESSING_P4
#define NATSWITCH_ADDRESSING_P4

// Aggregation packets the switch emits towards a host are addressed to that
// host, from the service address, so the host's stack accepts them.
control ResultAddressing(inout headers_t hdr, in standard_metadata_t sm) {
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
