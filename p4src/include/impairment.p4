#ifndef NATSWITCH_IMPAIRMENT_P4
#define NATSWITCH_IMPAIRMENT_P4

// Per-port random loss set by the controller: these machines have no netem.
control Impairment(inout metadata_t meta, in standard_metadata_t sm) {
    action drop_with(bit<32> threshold) {
        bit<32> r;
        random(r, 32w0, 32w65535);
        meta.impaired = r < threshold;
    }
    table loss {
        key = { sm.egress_port: exact; }
        actions = { drop_with; NoAction; }
        default_action = NoAction();
        size = NUM_PORTS;
    }
    apply { loss.apply(); }
}

#endif
