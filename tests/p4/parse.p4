// Conformance: parser select (values, masks, tuples, default), lookahead,
// advance, verify with a program error, PacketTooShort, parser_error in ingress.
#include <core.p4>
#include <v1model.p4>

error { BadVersion }

header res_t { bit<8> perr; bit<8> path; bit<8> la; bit<8> cksum_err; }
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header a_t { bit<4> ver; bit<4> kind; bit<8> len; }
header b_t { bit<16> x; }
header c_t { bit<32> y; }

struct headers_t { res_t res; eth_t eth; a_t a; b_t b; c_t c; }
struct meta_t { bit<8> path; bit<8> la; }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.etype) {
            0x0800 &&& 0xff00: by_mask;
            0x1234: parse_a;
            0x4321: parse_a;
            default: accept;
        }
    }
    state by_mask { m.path = 1; transition accept; }
    state parse_a {
        pkt.extract(h.a);
        verify(h.a.ver == 4, error.BadVersion);
        transition select(h.a.ver, h.a.kind) {
            (4, 1): parse_b;
            (4, 2): parse_c;
            (4, 3): look;
            (4, 8 &&& 8): parse_b;
            default: accept;
        }
    }
    state parse_b { pkt.extract(h.b); m.path = m.path + 2; transition accept; }
    state parse_c { pkt.extract(h.c); m.path = m.path + 3; transition accept; }
    state look {
        m.la = pkt.lookahead<bit<8>>();
        transition select(pkt.lookahead<bit<16>>()) {
            0xabcd: parse_b;
            default: skip;
        }
    }
    state skip { pkt.advance(16); m.path = 10; transition parse_c; }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        h.res.setValid();
        h.res.path = m.path;
        h.res.la = m.la;
        h.res.cksum_err = (bit<8>)sm.checksum_error;
        if (sm.parser_error == error.NoError) { h.res.perr = 0; }
        else if (sm.parser_error == error.PacketTooShort) { h.res.perr = 1; }
        else if (sm.parser_error == error.BadVersion) { h.res.perr = 2; }
        else if (sm.parser_error == error.NoMatch) { h.res.perr = 3; }
        else { h.res.perr = 9; }
        sm.egress_spec = 2;
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) {
    apply { pkt.emit(h.res); pkt.emit(h.eth); pkt.emit(h.a); pkt.emit(h.b); pkt.emit(h.c); }
}

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
