// The control-plane face of p4src/agg.p4, without its data plane: the same
// tables, actions, parameters and counters under the same P4Runtime names, in
// a program small enough that a softswitch loads it in a moment. The
// controller's tests program running softswitch processes with it;
// test_ctl_names.py checks that p4src/build exposes the same names and widths.
#include <core.p4>
#include <v1model.p4>

header ethernet_h { bit<48> dst_addr; bit<48> src_addr; bit<16> ether_type; }
header ipv4_h {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len;
    bit<16> identification; bit<3> flags; bit<13> frag_offset; bit<8> ttl;
    bit<8> protocol; bit<16> hdr_checksum; bit<32> src_addr; bit<32> dst_addr;
}
header agg_h { bit<16> job_id; }
struct headers_t { ethernet_h eth; ipv4_h ipv4; agg_h agg; }
struct metadata_t { bit<8> drop_reason; bit<16> grp; bit<9> parent_port; bit<5> child; }

parser P(packet_in pkt, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.ether_type) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control Forwarding(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    action route(bit<48> smac, bit<48> dmac, bit<9> port) {
        hdr.eth.src_addr = smac;
        hdr.eth.dst_addr = dmac;
        sm.egress_spec = port;
    }
    action no_route() { meta.drop_reason = 7; }
    table routes {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { route; @defaultonly no_route; }
        default_action = no_route();
        size = 4096;
    }
    apply { routes.apply(); }
}

control Aggregation(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    counter(16, CounterType.packets) events;
    action unknown_job() { meta.drop_reason = 1; }
    action job_root(bit<16> base, bit<16> num_slots, bit<8> num_children,
                    bit<16> mcast_grp, bit<8> result_enc, bit<8> max_exp, bit<16> session,
                    bit<32> round_key) {
        meta.grp = mcast_grp + base + num_slots + (bit<16>)num_children + (bit<16>)result_enc
                   + (bit<16>)max_exp + session + (bit<16>)round_key;
    }
    action job_child(bit<16> base, bit<16> num_slots, bit<8> num_children,
                     bit<16> mcast_grp, bit<9> parent_port, bit<8> partial_enc,
                     bit<8> max_exp, bit<16> session, bit<32> round_key) {
        meta.grp = mcast_grp + base + num_slots + (bit<16>)num_children + (bit<16>)partial_enc
                   + (bit<16>)max_exp + session + (bit<16>)round_key;
        meta.parent_port = parent_port;
    }
    action job_sparse_root(bit<16> base, bit<16> num_slots, bit<8> num_children,
                           bit<16> mcast_grp, bit<8> result_enc, bit<8> max_exp,
                           bit<16> session, bit<32> round_key) {
        meta.grp = mcast_grp + base + num_slots + (bit<16>)num_children + (bit<16>)result_enc
                   + (bit<16>)max_exp + session + (bit<16>)round_key + 1;
    }
    table jobs {
        key = { hdr.agg.job_id: exact; }
        actions = { job_root; job_child; job_sparse_root; @defaultonly unknown_job; }
        default_action = unknown_job();
        size = 64;
    }
    action set_child(bit<5> index, bit<8> weight, bit<32> max_mag) {
        meta.child = index + (bit<5>)weight + (bit<5>)max_mag;
    }
    action foreign_port() { meta.drop_reason = 2; }
    table children {
        key = { hdr.agg.job_id: exact; sm.ingress_port: exact; }
        actions = { set_child; @defaultonly foreign_port; }
        default_action = foreign_port();
        size = 2048;
    }
    apply {
        if (jobs.apply().hit) {
            children.apply();
            events.count(0);
        }
    }
}

control ResultAddressing(inout headers_t hdr, in standard_metadata_t sm) {
    action to_host(bit<48> smac, bit<48> dmac, bit<32> sip, bit<32> dip) {
        hdr.eth.src_addr = smac;
        hdr.eth.dst_addr = dmac;
        hdr.ipv4.src_addr = sip;
        hdr.ipv4.dst_addr = dip;
    }
    table hosts {
        key = { sm.egress_port: exact; }
        actions = { to_host; NoAction; }
        default_action = NoAction();
        size = 512;
    }
    apply { hosts.apply(); }
}

control Impairment(inout metadata_t meta, in standard_metadata_t sm) {
    action drop_with(bit<32> threshold) {
        bit<32> r;
        random(r, 32w0, 32w65535);
        if (r < threshold) { meta.drop_reason = 9; }
    }
    table loss {
        key = { sm.egress_port: exact; }
        actions = { drop_with; NoAction; }
        default_action = NoAction();
        size = 512;
    }
    apply { loss.apply(); }
}

control NatIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    counter(512, CounterType.packets_and_bytes) port_rx;
    counter(32, CounterType.packets_and_bytes) drops;
    Forwarding() fwd;
    Aggregation() agg;
    apply {
        port_rx.count((bit<32>)sm.ingress_port);
        if (hdr.agg.isValid()) { agg.apply(hdr, meta, sm); }
        else if (hdr.ipv4.isValid()) { fwd.apply(hdr, meta, sm); }
        if (meta.drop_reason != 0) {
            drops.count((bit<32>)meta.drop_reason);
            mark_to_drop(sm);
        }
    }
}

control NatEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    counter(512, CounterType.packets_and_bytes) port_tx;
    counter(32, CounterType.packets_and_bytes) drops;
    ResultAddressing() addr;
    Impairment() impair;
    apply {
        impair.apply(meta, sm);
        if (meta.drop_reason == 9) {
            drops.count(9);
            mark_to_drop(sm);
        } else {
            addr.apply(hdr, sm);
            port_tx.count((bit<32>)sm.egress_port);
        }
    }
}

control NoChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }

V1Switch(P(), NoChecksum(), NatIngress(), NatEgress(), NoChecksum(), D()) main;
