#ifndef NATSWITCH_NEXT_STEP_TWIN_P4
#define NATSWITCH_NEXT_STEP_TWIN_P4

// p4src/tna/next_step_tna.p4's table in its Tofino 2 form (one pass), on v1model's
// multicast group and egress port.
control NextStep(inout tna_headers_t hdr, inout ig_meta_t meta, inout standard_metadata_t sm) {

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
#if PASSES > 1
    // p4src/tna/next_step_tna.p4's walk: decided here, in the first pass, and carried.
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
    action up() { walk_out(MSG_CONTRIB, OUT_UCAST, (bit<16>)meta.parent_port); }
    action answer() { walk_out(MSG_RESULT, OUT_UCAST, (bit<16>)sm.ingress_port); }
    action multicast() { walk_out(MSG_RESULT, OUT_MCAST, meta.grp); }
#else
    action out_mcast(bit<8> msg_type, bit<16> grp, bit<8> recompress) {
        result_header(msg_type);
        sm.mcast_grp = grp;
        hdr.bridge.recompress = (bit<2>)recompress;
        hdr.bridge.is_agg = 1;
        hdr.bridge.seed = meta.seed;
    }
    action out_ucast(bit<8> msg_type, bit<9> port, bit<8> recompress) {
        result_header(msg_type);
        sm.egress_spec = port;
        hdr.bridge.recompress = (bit<2>)recompress;
        hdr.bridge.is_agg = 1;
        hdr.bridge.seed = meta.seed;
    }
    // recompress: 1 re-compress the sums to CNAT8 (egress), 2 narrow the lanes to SUM8.
    action up(bit<8> recompress) { out_ucast(MSG_CONTRIB, meta.parent_port, recompress); }
    action answer(bit<8> recompress) { out_ucast(MSG_RESULT, sm.ingress_port, recompress); }
    action multicast(bit<8> recompress) { out_mcast(MSG_RESULT, meta.grp, recompress); }
#endif
    action absorbed() { mark_to_drop(sm); }
    action down() {
        sm.mcast_grp = meta.grp;
        hdr.bridge.is_agg = 1;
    }

    table next_step {
        key = {
            meta.pass2: exact;
            meta.down: exact;
            meta.live: exact;
            meta.remaining: ternary;
            (bit<1>)meta.is_root: ternary @name("meta.is_root");  // (no bool in a ternary match)
            meta.bm_seen: ternary;
            meta.result_enc: ternary;
        }
        actions = {
#if PASSES > 1
            walk_on;
#endif
            up; answer; multicast; absorbed; down; NoAction;
        }
        const entries = {
#if PASSES > 1
            (false, true, false, _, _, _, _): down();
            (false, false, true, 0, 0, _, _): up();
            (false, false, true, 0, 1, 0, _): multicast();
            (false, false, true, 0, 1, _, _): answer();
            (false, false, true, _, _, 0, _): walk_on();
            (false, false, true, _, _, _, _): absorbed();
#else
            (false, true, false, _, _, _, _): down();
            (false, false, true, 0, 0, _, ENC_CNAT8): up(1);
            (false, false, true, 0, 0, _, ENC_SUM8): up(2);
            (false, false, true, 0, 0, _, _): up(0);
            (false, false, true, 0, 1, 0, ENC_CNAT8): multicast(1);
            (false, false, true, 0, 1, 0, ENC_SUM8): multicast(2);
            (false, false, true, 0, 1, 0, _): multicast(0);
            (false, false, true, 0, 1, _, ENC_CNAT8): answer(1);
            (false, false, true, 0, 1, _, ENC_SUM8): answer(2);
            (false, false, true, 0, 1, _, _): answer(0);
            (false, false, true, _, _, _, _): absorbed();
#endif
        }
        default_action = NoAction();
        size = 16;
    }
    apply { next_step.apply(); }
}

#endif
