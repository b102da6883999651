// Conformance: a varbit field whose length in bits comes from the packet. BMv2 checks, in
// this order: a length that is not whole bytes (ParserInvalidArgument), a header past the
// packet's end (PacketTooShort), a length past the field's maximum (HeaderTooShort); the
// failed header is not extracted and the rest of the packet is payload.
#include <core.p4>
#include <v1model.p4>

header ctl_t { bit<8> bits; bit<8> err; }
header opt_t { bit<8> kind; varbit<24> data; }
header tail_t { bit<16> t; }

struct headers_t { ctl_t ctl; opt_t opt; tail_t tail; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.ctl);
        pkt.extract(h.opt, (bit<32>) h.ctl.bits);
        pkt.extract(h.tail);
        transition accept;
    }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.NoError) {
            h.ctl.err = 0;
        } else if (sm.parser_error == error.PacketTooShort) {
            h.ctl.err = 1;
        } else if (sm.parser_error == error.HeaderTooShort) {
            h.ctl.err = 4;
        } else if (sm.parser_error == error.ParserInvalidArgument) {
            h.ctl.err = 6;
        } else {
            h.ctl.err = 7;
        }
        if (h.opt.isValid()) {
            h.ctl.err = h.ctl.err | 0x10;
        }
        if (h.tail.isValid()) {
            h.ctl.err = h.ctl.err | 0x20;
        }
    }
}

control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) {
    apply {
        pkt.emit(h.ctl);
        pkt.emit(h.opt);
        pkt.emit(h.tail);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
