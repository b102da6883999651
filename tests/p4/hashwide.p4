// Conformance: hash() into a field wider than 64 bits. BMv2 adds the base to the hash
// modulo the max in uint64, so the sum wraps at 2^64 before the field takes it.
#include <core.p4>
#include <v1model.p4>

header h_t { bit<32> a; bit<72> wrapped; bit<72> plain; bit<72> crc; }

struct headers_t { h_t h; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.h);
        transition accept;
    }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hash(h.h.wrapped, HashAlgorithm.identity, 72w0xffffffffffffffff, { h.h.a },
             72w0x100000000);
        hash(h.h.plain, HashAlgorithm.identity, 72w0x1000, { h.h.a }, 72w0x100000000);
        hash(h.h.crc, HashAlgorithm.crc32, 72w0xfffffffffffffff0, { h.h.a },
             (bit<72>) h.h.a);
    }
}

control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
