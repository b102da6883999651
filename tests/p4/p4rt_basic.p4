// P4Runtime server conformance program: one of each entity the server maps
// (tables of every match kind, direct and indirect counters, a register,
// multicast, clone, packet-in/packet-out controller headers).
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;
const bit<16> ETYPE_PROBE = 0x88b5;
const bit<16> ETYPE_TO_CPU = 0x88b6;

// Field widths are deliberately not byte aligned, so the server's
// serialisation of controller metadata is exercised bit by bit.
@controller_header("packet_out")
header packet_out_t {
    bit<9>  egress_port;
    bit<3>  flags;
    bit<4>  _pad;
    bit<16> tag;
}

@controller_header("packet_in")
header packet_in_t {
    bit<9>  ingress_port;
    bit<7>  _pad;
    bit<16> tag;
}

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etype;
}

// op 1: store value at idx, op 2: load idx into value, op 3: clone to session 5.
header probe_t {
    bit<8>  op;
    bit<8>  idx;
    bit<32> value;
    bit<12> vlan;
    bit<4>  flags;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    probe_t      probe;
}

struct meta_t {
    bit<16> tag;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t std) {
    state start {
        transition select(std.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etype) {
            ETYPE_PROBE: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    direct_counter(CounterType.packets_and_bytes) fwd_hits;
    counter(16, CounterType.packets_and_bytes) port_rx;
    counter(8, CounterType.packets) probe_ops;
    register<bit<32>>(16) store;

    action drop() {
        mark_to_drop(std);
    }
    action fwd(bit<9> port) {
        std.egress_spec = port;
        fwd_hits.count();
    }
    action flood(bit<16> grp) {
        std.mcast_grp = grp;
        fwd_hits.count();
    }
    action fwd_drop() {
        mark_to_drop(std);
        fwd_hits.count();
    }
    action set_tag(bit<16> tag) {
        meta.tag = tag;
    }
    action miss_tag() {
        meta.tag = 0xffff;
    }
    action mark(bit<4> flags, bit<32> value) {
        hdr.probe.flags = flags;
        hdr.probe.value = value;
    }

    table l2 {
        key = { hdr.ethernet.dst: exact; }
        actions = { fwd; flood; fwd_drop; }
        default_action = fwd_drop();
        counters = fwd_hits;
        size = 64;
    }
    table tags {
        key = { hdr.probe.value: lpm; }
        actions = { set_tag; @tableonly NoAction; @defaultonly miss_tag; }
        default_action = miss_tag();
        size = 32;
    }
    table acl {
        key = {
            hdr.ethernet.src: ternary;
            hdr.probe.vlan: range;
            hdr.probe.op: optional;
            hdr.ethernet.etype: exact;
        }
        actions = { mark; drop; NoAction; }
        default_action = NoAction();
        size = 32;
    }
    table fixed {
        key = { hdr.probe.flags: exact; }
        actions = { mark; NoAction; }
        const default_action = NoAction();
        const entries = {
            4w1: mark(4w9, 32w0x99);
            4w2: NoAction();
        }
    }

    apply {
        if (hdr.packet_out.isValid()) {
            std.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        port_rx.count((bit<32>) std.ingress_port);
        if (hdr.ethernet.etype == ETYPE_TO_CPU) {
            std.egress_spec = CPU_PORT;
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = std.ingress_port;
            hdr.packet_in._pad = 0;
            hdr.packet_in.tag = 0xbeef;
            exit;
        }
        l2.apply();
        if (hdr.probe.isValid()) {
            probe_ops.count((bit<32>) hdr.probe.op);
            tags.apply();
            acl.apply();
            fixed.apply();
            if (hdr.probe.op == 1) {
                store.write((bit<32>) hdr.probe.idx, hdr.probe.value);
            } else if (hdr.probe.op == 2) {
                store.read(hdr.probe.value, (bit<32>) hdr.probe.idx);
            } else if (hdr.probe.op == 3) {
                clone(CloneType.I2E, 32w5);
            }
            if (meta.tag != 0xffff) {
                hdr.probe.vlan = meta.tag[11:0];
            }
        }
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
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
