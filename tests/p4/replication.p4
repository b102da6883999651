// Conformance: simple_switch packet paths: unicast, multicast with egress_rid,
// clone I2E/E2E, resubmit and recirculate preserving field lists, truncate,
// exit, mark_to_drop in ingress and egress, egress_spec = 511, log_msg,
// packet_length after setValid/setInvalid, instance_type, priority.
#include <core.p4>
#include <v1model.p4>

header cmd_t { bit<8> op; bit<8> arg; bit<16> grp; }
header extra_t { bit<32> x; }
header info_t {
    bit<32> itype; bit<16> rid; bit<16> eport; bit<32> plen;
    bit<16> iport; bit<8> passes; bit<8> fl;
}

struct headers_t { info_t info; cmd_t cmd; extra_t extra; }
struct meta_t {
    @field_list(1) bit<8> passes;
    @field_list(2) bit<8> fl;
    bit<8> scratch;
}

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.cmd); transition accept; }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        bit<8> op = h.cmd.op;
        sm.egress_spec = 1;
        if (op == 2) {
            sm.mcast_grp = h.cmd.grp;
        } else if (op == 3) {
            clone(CloneType.I2E, (bit<32>)h.cmd.arg);
        } else if (op == 4) {
            if (sm.instance_type == 0) {
                m.passes = 1;
                resubmit_preserving_field_list(1);
            } else {
                m.passes = m.passes + 1;
                sm.egress_spec = 2;
            }
        } else if (op == 5) {
            if (sm.instance_type == 4) { sm.egress_spec = 3; }
        } else if (op == 6) {
            truncate((bit<32>)h.cmd.arg);
        } else if (op == 7) {
            exit;
        } else if (op == 10) {
            mark_to_drop(sm);
        } else if (op == 11) {
            log_msg("op {} arg {}", { h.cmd.op, h.cmd.arg });
        } else if (op == 12) {
            sm.mcast_grp = h.cmd.grp;
            mark_to_drop(sm);
        } else if (op == 13) {
            sm.egress_spec = 511;
        } else if (op == 14) {
            h.extra.setValid();
            h.extra.x = 0x01020304;
        } else if (op == 15) {
            h.cmd.setInvalid();
        } else if (op == 16) {
            sm.priority = 1;
        }
        if (op == 7) { sm.egress_spec = 2; }
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        // unicast resets instance_type to NORMAL, so the preserved fl tells
        // a recirculated packet apart
        if (h.cmd.isValid() && h.cmd.op == 5 && m.fl == 0) {
            m.fl = 0x5a;
            recirculate_preserving_field_list(2);
        } else {
            if (h.cmd.isValid() && h.cmd.op == 8) {
                mark_to_drop(sm);
            }
            if (h.cmd.isValid() && h.cmd.op == 9 && sm.instance_type == 0) {
                clone(CloneType.E2E, (bit<32>)h.cmd.arg);
            }
            h.info.setValid();
            h.info.itype = sm.instance_type;
            h.info.rid = sm.egress_rid;
            h.info.eport = (bit<16>)sm.egress_port;
            h.info.plen = sm.packet_length;
            h.info.iport = (bit<16>)sm.ingress_port;
            h.info.passes = m.passes;
            h.info.fl = m.fl;
        }
    }
}

control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) {
    apply { pkt.emit(h.info); pkt.emit(h.cmd); pkt.emit(h.extra); }
}

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
