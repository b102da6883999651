// Conformance: expression semantics and widths: wrap-around, saturation,
// signed arithmetic and shifts, casts, slices, concatenation, shifts by
// amounts at and beyond the width, division and modulo by powers of two.
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8> a; bit<8> b; bit<16> c; int<8> s; int<16> t; bit<8> sh; bit<8> pad;
}
header out_t {
    bit<8> add; bit<8> sub; bit<8> mul; bit<16> mulw;
    bit<8> sadd; bit<8> ssub; int<8> isadd; int<8> issub;
    int<8> sneg; int<8> sshr; int<16> sext; bit<8> strunc;
    bit<8> shl; bit<8> shr; bit<16> cshl; bit<32> one_shl;
    bit<8> inv; bit<8> andv; bit<8> orv; bit<8> xorv;
    bit<8> slice; bit<16> cat; bit<8> div4; bit<8> mod8;
    bit<8> flags; bit<8> tern; bit<32> wide; int<16> smul;
    bit<16> neg16; bit<8> shr_s; bit<32> mix; bit<8> pad;
}

struct headers_t { in_t i; out_t o; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.i); transition accept; }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action compute() {
        h.o.setValid();
        h.o.add = h.i.a + h.i.b;
        h.o.sub = h.i.a - h.i.b;
        h.o.mul = h.i.a * h.i.b;
        h.o.mulw = (bit<16>)h.i.a * (bit<16>)h.i.b;
        h.o.sadd = h.i.a |+| h.i.b;
        h.o.ssub = h.i.a |-| h.i.b;
        h.o.isadd = h.i.s |+| h.i.s;
        h.o.issub = h.i.s |-| 8s100;
        h.o.sneg = -h.i.s;
        h.o.sshr = h.i.s >> 2;
        h.o.sext = (int<16>)h.i.s;
        h.o.strunc = (bit<8>)(bit<16>)h.i.t;
        h.o.shl = h.i.a << h.i.sh;
        h.o.shr = h.i.a >> h.i.sh;
        h.o.cshl = h.i.c << 4;
        h.o.one_shl = ((bit<32>)1) << h.i.sh;
        h.o.inv = ~h.i.a;
        h.o.andv = h.i.a & h.i.b;
        h.o.orv = h.i.a | h.i.b;
        h.o.xorv = h.i.a ^ h.i.b;
        h.o.slice = h.i.c[11:4];
        h.o.cat = h.i.a ++ h.i.b;
        h.o.div4 = h.i.a / 4;
        h.o.mod8 = h.i.a % 8;
        h.o.flags = (bit<8>)(bit<1>)(h.i.a > h.i.b)
                  | ((bit<8>)(bit<1>)(h.i.s < 0) << 1)
                  | ((bit<8>)(bit<1>)(h.i.s <= -1) << 2)
                  | ((bit<8>)(bit<1>)(h.i.t >= -16s5) << 3)
                  | ((bit<8>)(bit<1>)(h.i.a == h.i.b || h.i.c != 0) << 4);
        h.o.tern = h.i.a > h.i.b ? h.i.a : h.i.b;
        h.o.wide = (bit<32>)h.i.c * 65537 + (bit<32>)h.i.a;
        h.o.smul = (int<16>)h.i.s * h.i.t;
        h.o.neg16 = -h.i.c;
        h.o.shr_s = (bit<8>)(h.i.s >> h.i.sh);
        h.o.mix = (((bit<32>)h.i.a << 24) | ((bit<32>)h.i.c << 4)) >> (h.i.sh & 7);
        h.o.pad = 0;
    }
    apply {
        compute();
        sm.egress_spec = 3;
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.i); pkt.emit(h.o); } }

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
