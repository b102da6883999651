// Table keys whose P4Info and BMv2 JSON disagree in width, which BMv2 accepts:
// an error-typed key (no bitwidth in the P4Info, 32 bits in the JSON) and keys
// masked by an expression (the P4Info has the field's width, the JSON a mask).
#include <core.p4>
#include <v1model.p4>

error { BadOp }

header ctl_t {
    bit<8>  op;
    bit<48> addr;
    bit<8>  flags;
    bit<8>  res;
}

struct headers_t {
    ctl_t ctl;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ctl);
        verify(hdr.ctl.op != 0xff, error.BadOp);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    action mark(bit<8> v) {
        hdr.ctl.res = hdr.ctl.res | v;
    }

    table by_error {
        key = { std.parser_error: exact; }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }
    table by_masked {
        key = {
            hdr.ctl.addr & 48w0x01ffffffffff: exact @name("addr_low");
            hdr.ctl.flags & 8w0xf0: ternary @name("flags_high");
        }
        actions = { mark; NoAction; }
        default_action = NoAction();
    }

    apply {
        std.egress_spec = 2;
        by_error.apply();
        by_masked.apply();
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
