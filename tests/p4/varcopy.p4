// varbit values moved around: through a local varbit (assign_VL), by copying a
// whole header, and into a checksum computed over a varbit options field.
#include <core.p4>
#include <v1model.p4>

header size_t {
    bit<8> size;  // bits of each of a and b
    bit<8> words; // 32-bit words of opt.options
}

header var_t {
    varbit<32> v;
}

header opt_t {
    bit<8>      ttl;
    bit<8>      proto;
    bit<16>     csum;
    bit<32>     src;
    varbit<128> options;
}

struct headers_t {
    size_t sz;
    var_t  a;
    var_t  b;
    var_t  c;
    opt_t  opt;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.sz);
        pkt.extract(hdr.a, (bit<32>) hdr.sz.size);
        pkt.extract(hdr.b, (bit<32>) hdr.sz.size);
        pkt.extract(hdr.opt, (bit<32>) hdr.sz.words * 32);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.opt.isValid(),
                        { hdr.opt.ttl, hdr.opt.proto, hdr.opt.src, hdr.opt.options },
                        hdr.opt.csum, HashAlgorithm.csum16);
    }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    varbit<32> t;

    apply {
        std.egress_spec = 2;
        if (std.checksum_error == 1) {
            hdr.sz.words = 0xee;
        }
        t = hdr.a.v;
        hdr.a.v = hdr.b.v;
        hdr.b.v = t;
        hdr.c = hdr.a;
        if (hdr.opt.isValid()) {
            hdr.opt.ttl = hdr.opt.ttl - 1;
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply { }
}

control CC(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.opt.isValid(),
                        { hdr.opt.ttl, hdr.opt.proto, hdr.opt.src, hdr.opt.options },
                        hdr.opt.csum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.sz);
        pkt.emit(hdr.a);
        pkt.emit(hdr.b);
        pkt.emit(hdr.c);
        pkt.emit(hdr.opt);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
