#ifndef NATSWITCH_NEXT_STEP_TNA_P4
#define NATSWITCH_NEXT_STEP_TNA_P4

// What becomes of an aggregation packet after the slot: one table (as SwitchML's next
// step selector), not a tree of conditions, so that it shares stages with the sums.
control NextStep(inout tna_headers_t hdr, inout ig_meta_t meta, in PortId_t in_port,
                 inout ingress_intrinsic_metadata_for_deparser_t dprsr,
                 inout ingress_intrinsic_metadata_for_tm_t tm) {

    // The result's header: exponent, workers summed, lengths of a FIXED32 payload (the
    // egress shortens them when it re-compresses).
    action result_header(bit<8> msg_type) {
        hdr.agg.msg_type = msg_type;
        hdr.agg.exp = meta.exp;
        hdr.agg.count = meta.workers;
        hdr.agg.flags = 0;
        hdr.udp.length = UDP_LEN_FIXED32;
        hdr.udp.checksum = 0;
        hdr.ipv4.total_len = UDP_LEN_FIXED32 + 20;
        hdr.ipv4.ttl = 64;
    }
#ifdef LO_LANE_PASS
    // Tofino 1: a second pass reads the first lanes; it goes out as recorded here.
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
    // The walk (passes_tna.p4): every pass of the packet sums its segment; where the
    // result goes is decided here, in the first, and carried.
    action walk(bit<2> dest, bit<16> to) {
        hdr.walk.setValid();
        hdr.walk.ridx = meta.ridx;
        hdr.walk.seg = 0;
        hdr.walk.harvest = 0;
        hdr.walk.dest = dest;
        hdr.walk.to = to;
        hdr.walk.seed = meta.seed;
    }
    action walk_out(bit<8> msg_type, bit<2> dest, bit<16> to) {
        result_header(msg_type);
        walk(dest, to);
    }
    action walk_on() { walk(OUT_NONE, 0); }
#else
    action out_mcast(bit<8> msg_type, bit<16> grp, bit<8> recompress) {
        result_header(msg_type);
        tm.mcast_grp_a = grp;
        hdr.bridge.recompress = (bit<2>)recompress;
        hdr.bridge.is_agg = 1;
        hdr.bridge.seed = meta.seed;
    }
    action out_ucast(bit<8> msg_type, PortId_t port, bit<8> recompress) {
        result_header(msg_type);
        tm.ucast_egress_port = port;
        hdr.bridge.recompress = (bit<2>)recompress;
        hdr.bridge.is_agg = 1;
        hdr.bridge.seed = meta.seed;
    }
#endif
    // recompress: 1 re-compress the sums to CNAT8 (egress), 2 narrow the lanes to SUM8.
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

    table next_step {
        key = {
            meta.pass2: exact;
            meta.down: exact;
            meta.live: exact;
            meta.remaining: ternary;
            meta.is_root: ternary;
            meta.bm_seen: ternary;
            meta.result_enc: ternary;
#ifdef LO_LANE_PASS
            hdr.recirc.grp: ternary;
#endif
        }
        actions = {
#ifdef LO_LANE_PASS
            second_pass_mcast; second_pass_ucast;
#endif
#if PASSES > 1
            walk_on;
#endif
            up; answer; multicast; absorbed; down; NoAction;
        }
        const entries = {
#if PASSES > 1
            // Results and partial sums are CNAT8 (the admit table refuses other jobs); a
            // new contribution walks on to add its other segments, a duplicate of a use
            // still open has nothing to add.
            (false, true, false, _, _, _, _): down();
            (false, false, true, 0, false, _, _): up();
            (false, false, true, 0, true, 0, _): multicast();
            (false, false, true, 0, true, _, _): answer();
            (false, false, true, _, _, 0, _): walk_on();
            (false, false, true, _, _, _, _): absorbed();
#else
#ifdef LO_LANE_PASS
            (true, false, false, _, _, _, _, 0): second_pass_ucast();
            (true, false, false, _, _, _, _, _): second_pass_mcast();
            (false, true, false, _, _, _, _, _): down();
            (false, false, true, 0, false, _, ENC_CNAT8, _): up(1);
            (false, false, true, 0, false, _, ENC_SUM8, _): up(2);
            (false, false, true, 0, false, _, _, _): up(0);
            (false, false, true, 0, true, 0, ENC_CNAT8, _): multicast(1);
            (false, false, true, 0, true, 0, ENC_SUM8, _): multicast(2);
            (false, false, true, 0, true, 0, _, _): multicast(0);
            (false, false, true, 0, true, _, ENC_CNAT8, _): answer(1);
            (false, false, true, 0, true, _, ENC_SUM8, _): answer(2);
            (false, false, true, 0, true, _, _, _): answer(0);
            (false, false, true, _, _, _, _, _): absorbed();
#else
            (false, true, false, _, _, _, _): down();
            (false, false, true, 0, false, _, ENC_CNAT8): up(1);
            (false, false, true, 0, false, _, ENC_SUM8): up(2);
            (false, false, true, 0, false, _, _): up(0);
            (false, false, true, 0, true, 0, ENC_CNAT8): multicast(1);
            (false, false, true, 0, true, 0, ENC_SUM8): multicast(2);
            (false, false, true, 0, true, 0, _): multicast(0);
            (false, false, true, 0, true, _, ENC_CNAT8): answer(1);
            (false, false, true, 0, true, _, ENC_SUM8): answer(2);
            (false, false, true, 0, true, _, _): answer(0);
            (false, false, true, _, _, _, _): absorbed();
#endif
#endif
        }
        default_action = NoAction();
        size = 16;
    }
    apply { next_step.apply(); }
}

#endif
