#ifndef NATSWITCH_NEXT_STEP_TWIN_P4
#define NATSWITCH_NEXT_STEP_TWIN_P4

#include "../tna/next_step_shared_tna.p4"

// p4src/tna/next_step_shared_tna.p4's table in its Tofino 2 form (one pass), on v1model's
// multicast group and egress port.
control NextStep(inout tna_headers_t hdr, inout ig_meta_t meta, inout standard_metadata_t sm) {

    NEXT_RESULT_HEADER
#if PASSES > 1
    NEXT_WALK_ACTIONS
    action up() { walk_out(MSG_CONTRIB, OUT_UCAST, (bit<16>)meta.parent_port); }
    action answer() { walk_out(MSG_RESULT, OUT_UCAST, (bit<16>)sm.ingress_port); }
    action multicast() { walk_out(MSG_RESULT, OUT_MCAST, meta.grp); }
#else
    action out_mcast(bit<8> msg_type, bit<16> grp, bit<8> recompress) {
        result_header(msg_type);
        sm.mcast_grp = grp;
        NEXT_BRIDGE_OUT
    }
    action out_ucast(bit<8> msg_type, bit<9> port, bit<8> recompress) {
        result_header(msg_type);
        sm.egress_spec = port;
        NEXT_BRIDGE_OUT
    }
    action up(bit<8> recompress) { out_ucast(MSG_CONTRIB, meta.parent_port, recompress); }
    action answer(bit<8> recompress) { out_ucast(MSG_RESULT, sm.ingress_port, recompress); }
    action multicast(bit<8> recompress) { out_mcast(MSG_RESULT, meta.grp, recompress); }
#endif
    action absorbed() { mark_to_drop(sm); }
    action down() {
        sm.mcast_grp = meta.grp;
        hdr.bridge.is_agg = 1;
    }

    NEXT_STEP_TABLE
    apply { next_step.apply(); }
}

#endif
