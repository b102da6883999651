// Conformance: registers (read, write, read-modify-write, out-of-range index),
// counters, hash algorithms with base and max, IPv4-style csum16 checksum
// verify/update and a checksum over the payload.
#include <core.p4>
#include <v1model.p4>

header cmd_t { bit<8> op; bit<8> idx; bit<32> val; }
header ip_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id;
    bit<3> flags; bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum;
    bit<32> src; bit<32> dst;
}
header l4_t { bit<16> sport; bit<16> dport; bit<16> len; bit<16> csum; }
header res_t {
    bit<32> reg; bit<16> crc16; bit<32> crc32; bit<16> csum16; bit<16> xor16;
    bit<32> ident; bit<16> ranged; bit<8> ckerr; bit<8> pad;
}

struct headers_t { cmd_t cmd; ip_t ip; l4_t l4; res_t res; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.cmd);
        pkt.extract(h.ip);
        transition select(h.ip.proto) {
            17: parse_l4;
            default: accept;
        }
    }
    state parse_l4 { pkt.extract(h.l4); transition accept; }
}

control VC(inout headers_t h, inout meta_t m) {
    apply {
        verify_checksum(h.ip.isValid() && h.ip.ihl == 5,
            { h.ip.version, h.ip.ihl, h.ip.tos, h.ip.len, h.ip.id, h.ip.flags, h.ip.frag,
              h.ip.ttl, h.ip.proto, h.ip.src, h.ip.dst },
            h.ip.csum, HashAlgorithm.csum16);
    }
}

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<32>>(8) regs;
    counter(8, CounterType.packets_and_bytes) ctr;

    action do_reg() {
        bit<32> cur;
        regs.read(cur, (bit<32>)h.cmd.idx);
        // extern calls cannot be conditional inside a BMv2 action
        regs.write((bit<32>)h.cmd.idx, h.cmd.op == 1 ? h.cmd.val
                                       : (h.cmd.op == 2 ? cur + h.cmd.val : cur));
        h.res.reg = cur;
    }
    apply {
        h.res.setValid();
        h.res.reg = 0xffffffff;
        do_reg();
        ctr.count((bit<32>)h.cmd.idx);
        hash(h.res.crc16, HashAlgorithm.crc16, 16w0, { h.cmd.val, h.ip.src }, 17w65536);
        hash(h.res.crc32, HashAlgorithm.crc32, 32w0, { h.cmd.val, h.ip.dst, h.cmd.idx },
             33w4294967296);
        hash(h.res.csum16, HashAlgorithm.csum16, 16w0, { h.ip.src, h.ip.dst }, 17w65536);
        hash(h.res.xor16, HashAlgorithm.xor16, 16w0, { h.ip.src, h.cmd.val }, 17w65536);
        hash(h.res.ident, HashAlgorithm.identity, 32w0, { h.cmd.val }, 33w4294967296);
        hash(h.res.ranged, HashAlgorithm.crc32, 16w100, { h.ip.src, h.ip.dst }, 32w1000);
        h.res.ckerr = (bit<8>)sm.checksum_error;
        if (h.cmd.op == 3) { h.ip.ttl = h.ip.ttl - 1; }
        sm.egress_spec = 5;
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t h, inout meta_t m) {
    apply {
        update_checksum(h.ip.isValid() && h.ip.ihl == 5,
            { h.ip.version, h.ip.ihl, h.ip.tos, h.ip.len, h.ip.id, h.ip.flags, h.ip.frag,
              h.ip.ttl, h.ip.proto, h.ip.src, h.ip.dst },
            h.ip.csum, HashAlgorithm.csum16);
        update_checksum_with_payload(h.l4.isValid() && h.cmd.op == 4,
            { h.ip.src, h.ip.dst, 8w0, h.ip.proto, h.l4.len, h.l4.sport, h.l4.dport, h.l4.len },
            h.l4.csum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t h) {
    apply { pkt.emit(h.res); pkt.emit(h.cmd); pkt.emit(h.ip); pkt.emit(h.l4); }
}

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
