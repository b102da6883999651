// Conformance: headers with a varbit field in a header stack and in a header union stack,
// filled by extract(stack.next, length); a varbit field, a header and a stack compared
// with == (BMv2 compares a varbit field's value, whatever its length), copied into a
// local stack, pushed and popped. BMv2 reads an invalid header's fields as a packet that
// used its header storage before left them: fields are compared only where valid.
#include <core.p4>
#include <v1model.p4>

header ctl_t { bit<8> n0; bit<8> n1; bit<8> n2; bit<8> count; bit<8> op; }
header opt_t { bit<8> kind; varbit<32> v; }
header short_t { bit<8> tag; bit<8> x; }
header_union item_t { opt_t o; short_t s; }
header res_t { bit<8> same; bit<8> err; }

struct headers_t { res_t res; ctl_t ctl; opt_t h; opt_t[2] a; item_t[2] items; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.ctl);
        pkt.extract(h.h, (bit<32>) h.ctl.n0 * 8);
        transition select(h.ctl.count) {
            0: accept;
            default: first;
        }
    }
    state first {
        pkt.extract(h.a.next, (bit<32>) h.ctl.n1 * 8);
        transition select(h.ctl.count) {
            1: accept;
            default: second;
        }
    }
    state second {
        pkt.extract(h.a.next, (bit<32>) h.ctl.n2 * 8);
        transition select(h.ctl.count) {
            2: accept;
            3: third;
            default: items;
        }
    }
    state third {
        pkt.extract(h.a.next, 8);
        transition accept;
    }
    state items {
        transition select(pkt.lookahead<bit<8>>()) {
            0: accept;
            1: item_short;
            default: item_opt;
        }
    }
    state item_short {
        pkt.extract(h.items.next.s);
        transition items;
    }
    state item_opt {
        pkt.extract(h.items.next.o, (bit<32>) h.ctl.n2 * 8);
        transition items;
    }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.res.setValid();
        h.res.same = 0;
        if (h.h.isValid() && h.a[0].isValid() && h.h.v == h.a[0].v) {
            h.res.same = h.res.same | 1;
        }
        if (h.h == h.a[0]) {
            h.res.same = h.res.same | 2;
        }
        opt_t[2] tmp;
        tmp[0] = h.h;
        tmp[1] = h.a[0];
        if (tmp == h.a) {
            h.res.same = h.res.same | 4;
        }
        if (h.items[0].o.isValid()) {
            h.res.same = h.res.same | 8;
        }
        if (h.items[1].o.isValid()) {
            h.res.same = h.res.same | 16;
        }
        h.res.err = 3;
        if (sm.parser_error == error.NoError) {
            h.res.err = 0;
        } else if (sm.parser_error == error.StackOutOfBounds) {
            h.res.err = 1;
        } else if (sm.parser_error == error.HeaderTooShort) {
            h.res.err = 2;
        }
        if (h.ctl.op == 1) {
            h.a.push_front(1);
            h.a[0] = h.h;
        } else if (h.ctl.op == 2) {
            h.a.pop_front(1);
        } else if (h.ctl.op == 3) {
            h.a[1] = tmp[0];
            h.h.setInvalid();
        }
    }
}

control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) {
    apply {
        pkt.emit(h.res);
        pkt.emit(h.ctl);
        pkt.emit(h.h);
        pkt.emit(h.a);
        pkt.emit(h.items);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
