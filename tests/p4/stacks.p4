// Conformance: header stacks: parser loop with next/last, StackOutOfBounds,
// push_front/pop_front, setValid/setInvalid on elements, runtime indices.
#include <core.p4>
#include <v1model.p4>

header ctl_t { bit<8> op; bit<8> idx; bit<8> perr; bit<8> depth; }
header elem_t { bit<7> v; bit<1> bos; }

struct headers_t { ctl_t ctl; elem_t[4] s; }
struct meta_t { bit<8> n; }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.ctl);
        transition select(h.ctl.op) {
            0: accept;
            default: elems;
        }
    }
    state elems {
        pkt.extract(h.s.next);
        m.n = m.n + 1;
        transition select(h.s.last.bos) {
            1: accept;
            default: elems;
        }
    }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action push() {
        h.s.push_front(1);
        h.s[0].setValid();
        h.s[0].v = 0x55;
        h.s[0].bos = 0;
    }
    action pop() { h.s.pop_front(1); }
    action push2() { h.s.push_front(2); }
    action pop3() { h.s.pop_front(3); }
    action mark() { h.s[h.ctl.idx].v = 0x7f; }
    action drop_last() { h.s[3].setInvalid(); }
    apply {
        if (sm.parser_error == error.StackOutOfBounds) { h.ctl.perr = 4; }
        else if (sm.parser_error == error.PacketTooShort) { h.ctl.perr = 1; }
        if (h.ctl.op == 1) { push(); }
        else if (h.ctl.op == 2) { pop(); }
        else if (h.ctl.op == 3) { push2(); }
        else if (h.ctl.op == 4) { pop3(); }
        else if (h.ctl.op == 5) { if (h.ctl.idx < 4) { mark(); } }
        else if (h.ctl.op == 6) { drop_last(); }
        h.ctl.depth = m.n;
        sm.egress_spec = 1;
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) {
    apply { pkt.emit(h.ctl); pkt.emit(h.s); }
}

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
