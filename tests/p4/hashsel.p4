// Conformance: hash() with a max known only at run time, ECMP style. A keyless table's
// default action (its base and max written by the control plane) hashes IPv4 addresses,
// the protocol and TCP ports, the TCP header invalid for other protocols, into a 14-bit
// select that an exact table then matches; hash() called directly with a max taken from
// the packet (0 there means 1), a 64-bit max and a base that wraps past 2^64; random()
// with a bound from the packet. BMv2 reads an invalid header's fields as a packet that
// used its header storage before left them: the cases without TCP come first, while every
// field is still 0.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id;
    bit<3> flags; bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum;
    bit<32> src; bit<32> dst;
}
header tcp_t {
    bit<16> sport; bit<16> dport; bit<32> seq; bit<32> ack;
    bit<4> off; bit<4> res; bit<8> flags; bit<16> window; bit<16> csum; bit<16> urg;
}
header res_t { bit<16> sel; bit<32> by_id; bit<64> wide; bit<8> in_range; bit<8> pad; }

struct headers_t { res_t res; ethernet_t eth; ipv4_t ipv4; tcp_t tcp; }
struct meta_t { bit<14> sel; bit<32> r; }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.etype) {
            0x0800: ipv4;
            default: accept;
        }
    }
    state ipv4 {
        pkt.extract(h.ipv4);
        transition select(h.ipv4.proto) {
            6: tcp;
            default: accept;
        }
    }
    state tcp {
        pkt.extract(h.tcp);
        transition accept;
    }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action set_select(bit<16> base, bit<32> count) {
        hash(m.sel, HashAlgorithm.crc16, base,
             { h.ipv4.src, h.ipv4.dst, h.ipv4.proto, h.tcp.sport, h.tcp.dport }, count);
    }
    action to_port(bit<9> port) { sm.egress_spec = port; }
    table pick {
        actions = { set_select; }
        default_action = set_select(0, 1);
    }
    table nhop {
        key = { m.sel: exact; }
        actions = { to_port; drop; }
        const entries = {
            5: to_port(2);
            6: to_port(3);
            7: to_port(4);
        }
        default_action = drop();
    }
    apply {
        if (!h.ipv4.isValid()) {
            drop();
            return;
        }
        pick.apply();
        h.res.setValid();
        h.res.sel = (bit<16>) m.sel;
        hash(h.res.by_id, HashAlgorithm.crc32, 32w7, { h.ipv4.src, h.tcp.dport },
             (bit<32>) h.ipv4.id);
        hash(h.res.wide, HashAlgorithm.crc32, 64w0xfffffffffffffff0, { h.ipv4.dst, h.ipv4.ttl },
             h.ipv4.src ++ h.ipv4.dst);
        random(m.r, 32w0, (bit<32>) h.ipv4.ttl);
        h.res.in_range = m.r <= (bit<32>) h.ipv4.ttl ? 8w1 : 8w0;
        nhop.apply();
    }
}

control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }

control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) {
    apply {
        pkt.emit(h.res);
        pkt.emit(h.eth);
        pkt.emit(h.ipv4);
        pkt.emit(h.tcp);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
