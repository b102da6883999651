// A table p4c compiles away but keeps in the P4Info: it is applied only in a branch that
// is never taken (a return before it, under a condition of constants; the table's
// action_run switched on with a default case alone), so the JSON has no such table. BMv2
// loads the pipeline; requests naming the table fail. Also an action called with an
// inout argument that it leaves as it is.
#include <core.p4>
#include <v1model.p4>

header ctl_t { bit<8> op; bit<8> res; bit<16> v; }

struct headers_t { ctl_t ctl; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.ctl);
        transition accept;
    }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action set_out(bit<8> v) { h.ctl.res = v; }
    action keep(inout bit<16> x) { }
    table never {
        key = { h.ctl.op: exact; }
        actions = { set_out; }
    }
    table live {
        key = { h.ctl.op: exact; }
        actions = { set_out; NoAction; }
        default_action = NoAction();
    }
    apply {
        bit<16> k = 16w2;
        keep(h.ctl.v);
        sm.egress_spec = 1;
        live.apply();
        if (k <= 5) {
            return;
        } else {
            switch (never.apply().action_run) {
                default: {
                    h.ctl.res = 0xff;
                }
            }
        }
        h.ctl.v = 1;
    }
}

control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.ctl); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
