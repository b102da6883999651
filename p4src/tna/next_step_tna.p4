#ifndef NATSWITCH_NEXT_STEP_TNA_P4
#define NATSWITCH_NEXT_STEP_TNA_P4

// Tofino 1: a second pass reads the first lanes; it goes out as recorded in the first
// (go_out), by the recirculation header's group or port.
#ifdef LO_LANE_PASS
#define NEXT_LO_KEY hdr.recirc.grp: ternary;
#define NEXT_LO_ACTIONS second_pass_mcast; second_pass_ucast;
#define NEXT_LO_ENTRIES \
            (true, false, false, _, _, _, _, 0): second_pass_ucast(); \
            (true, false, false, _, _, _, _, _): second_pass_mcast(); \
            (false, true, false, _, _, _, _, _): down(); \
            (false, false, true, 0, false, _, ENC_CNAT8, _): up(1); \
            (false, false, true, 0, false, _, ENC_SUM8, _): up(2); \
            (false, false, true, 0, false, _, _, _): up(0); \
            (false, false, true, 0, true, 0, ENC_CNAT8, _): multicast(1); \
            (false, false, true, 0, true, 0, ENC_SUM8, _): multicast(2); \
            (false, false, true, 0, true, 0, _, _): multicast(0); \
            (false, false, true, 0, true, _, ENC_CNAT8, _): answer(1); \
            (false, false, true, 0, true, _, ENC_SUM8, _): answer(2); \
            (false, false, true, 0, true, _, _, _): answer(0); \
            (false, false, true, _, _, _, _, _): absorbed();
#endif
#include "next_step_shared_tna.p4"

// What becomes of an aggregation packet after the slot (next_step_shared_tna.p4), on
// Tofino's traffic manager.
control NextStep(inout tna_headers_t hdr, inout ig_meta_t meta, in PortId_t in_port,
                 inout ingress_intrinsic_metadata_for_deparser_t dprsr,
                 inout ingress_intrinsic_metadata_for_tm_t tm) {

    NEXT_RESULT_HEADER
#ifdef LO_LANE_PASS
    action go_out(bit<8> msg_type, bit<16> grp, PortId_t port, bit<8> recompress) {
        result_header(msg_type);
        hdr.recirc.setValid();
        hdr.recirc.ridx = meta.ridx;
        hdr.recirc.grp = grp;
        hdr.recirc.port = (bit<16>)port;
        hdr.recirc.recompress = (bit<2>)recompress;
        hdr.recirc.to_recirc = 0;
        hdr.recirc.is_agg = 1;
        hdr.recirc.flags_pad = 0;
        hdr.recirc.pad = 0;
        hdr.recirc.seed = meta.seed;
        hdr.bridge.to_recirc = 1;
        tm.ucast_egress_port = RECIRC_PORT;
    }
    action second_pass_mcast() {
        tm.mcast_grp_a = hdr.recirc.grp;
        hdr.bridge.recompress = hdr.recirc.recompress;
        hdr.bridge.to_recirc = hdr.recirc.to_recirc;
        hdr.bridge.is_agg = hdr.recirc.is_agg;
        hdr.bridge.pad = hdr.recirc.flags_pad;
        hdr.bridge.seed = hdr.recirc.seed;
        hdr.recirc.setInvalid();
    }
    action second_pass_ucast() {
        tm.ucast_egress_port = (PortId_t)hdr.recirc.port;
        hdr.bridge.recompress = hdr.recirc.recompress;
        hdr.bridge.to_recirc = hdr.recirc.to_recirc;
        hdr.bridge.is_agg = hdr.recirc.is_agg;
        hdr.bridge.pad = hdr.recirc.flags_pad;
        hdr.bridge.seed = hdr.recirc.seed;
        hdr.recirc.setInvalid();
    }
#elif PASSES > 1
    NEXT_WALK_ACTIONS
#else
    action out_mcast(bit<8> msg_type, bit<16> grp, bit<8> recompress) {
        result_header(msg_type);
        tm.mcast_grp_a = grp;
        NEXT_BRIDGE_OUT
    }
    action out_ucast(bit<8> msg_type, PortId_t port, bit<8> recompress) {
        result_header(msg_type);
        tm.ucast_egress_port = port;
        NEXT_BRIDGE_OUT
    }
#endif
#if PASSES > 1
    action up() { walk_out(MSG_CONTRIB, OUT_UCAST, (bit<16>)meta.parent_port); }
    action answer() { walk_out(MSG_RESULT, OUT_UCAST, (bit<16>)in_port); }
    action multicast() { walk_out(MSG_RESULT, OUT_MCAST, meta.grp); }
#else
    action up(bit<8> recompress) {
#ifdef LO_LANE_PASS
        go_out(MSG_CONTRIB, 0, (PortId_t)meta.parent_port, recompress);
#else
        out_ucast(MSG_CONTRIB, (PortId_t)meta.parent_port, recompress);
#endif
    }
    action answer(bit<8> recompress) {
#ifdef LO_LANE_PASS
        go_out(MSG_RESULT, 0, in_port, recompress);
#else
        out_ucast(MSG_RESULT, in_port, recompress);
#endif
    }
    action multicast(bit<8> recompress) {
#ifdef LO_LANE_PASS
        go_out(MSG_RESULT, meta.grp, 0, recompress);
#else
        out_mcast(MSG_RESULT, meta.grp, recompress);
#endif
    }
#endif
    action absorbed() { dprsr.drop_ctl = 1; }
    action down() {
        tm.mcast_grp_a = meta.grp;
        hdr.bridge.is_agg = 1;
    }

    NEXT_STEP_TABLE
    apply { next_step.apply(); }
}

#endif
