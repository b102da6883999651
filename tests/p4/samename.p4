// Actions p4c emits more than once under one name: a copy per direct call with
// different arguments, and a copy for a table, so tables must be bound to their
// actions by id. Includes exit from a copied action and a ternary table.
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
}

struct headers_t {
    ctl_t ctl;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ctl);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action set_b(bit<8> v) {
        hdr.ctl.b = v;
    }
    action out_and_exit(bit<9> port) {
        std.egress_spec = port;
        exit;
    }
    action set_c(bit<8> v) {
        hdr.ctl.c = v;
    }

    table by_op {
        key = { hdr.ctl.op: exact; }
        actions = { set_b; out_and_exit; NoAction; }
        default_action = set_b(8w0xd0);
        size = 16;
    }
    table by_a {
        key = { hdr.ctl.a: ternary; }
        actions = { set_c; NoAction; }
        default_action = NoAction();
        const entries = {
            8w0x10 &&& 8w0xf0: set_c(8w0x1f);
            8w0x01 &&& 8w0x01: set_c(8w0x0d);
            _: set_c(8w0xee);
        }
    }

    apply {
        std.egress_spec = 2;
        if (hdr.ctl.op == 5) {
            out_and_exit(3);
        }
        by_op.apply();
        if (hdr.ctl.op == 6) {
            set_b(hdr.ctl.a);
            out_and_exit(4);
        }
        if (hdr.ctl.op == 7) {
            set_c(hdr.ctl.b);
            set_b(8w0x77);
        }
        by_a.apply();
        hdr.ctl.a = 0xaa;
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control CC(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ctl);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
