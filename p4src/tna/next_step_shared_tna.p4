#ifndef NATSWITCH_NEXT_STEP_SHARED_TNA_P4
#define NATSWITCH_NEXT_STEP_SHARED_TNA_P4

// What becomes of an aggregation packet after the slot, written once for the TNA program
// (next_step_tna.p4) and its v1model twin (p4src/twin/next_step_twin.p4): the result's
// header, the walk's actions and the next_step table. Tofino 1's second pass for the
// lanes (LO_LANE_PASS) is the TNA program's alone: next_step_tna.p4 defines its key,
// actions and entries (NEXT_LO_KEY, NEXT_LO_ACTIONS, NEXT_LO_ENTRIES) before it includes
// this file.
#ifndef NEXT_LO_KEY
#define NEXT_LO_KEY
#define NEXT_LO_ACTIONS
#endif

// The result's header: exponent, workers summed, lengths of a FIXED32 payload (the
// egress shortens them when it re-compresses).
#define NEXT_RESULT_HEADER \
    action result_header(bit<8> msg_type) { \
        hdr.agg.msg_type = msg_type; \
        hdr.agg.exp = meta.exp; \
        hdr.agg.count = meta.workers; \
        hdr.agg.flags = 0; \
        hdr.udp.length = UDP_LEN_FIXED32; \
        hdr.udp.checksum = 0; \
        hdr.ipv4.total_len = UDP_LEN_FIXED32 + 20; \
        hdr.ipv4.ttl = 64; \
    }

// The walk (passes_tna.p4): every pass of the packet sums its segment; where the result
// goes is decided here, in the first, and carried.
#define NEXT_WALK_ACTIONS \
    action walk(bit<2> dest, bit<16> to) { \
        hdr.walk.setValid(); \
        hdr.walk.ridx = meta.ridx; \
        hdr.walk.seg = 0; \
        hdr.walk.harvest = 0; \
        hdr.walk.dest = dest; \
        hdr.walk.to = to; \
        hdr.walk.seed = meta.seed; \
    } \
    action walk_out(bit<8> msg_type, bit<2> dest, bit<16> to) { \
        result_header(msg_type); \
        walk(dest, to); \
    } \
    action walk_on() { walk(OUT_NONE, 0); }

// A result or partial sum of one pass: what the egress is to do with its sums
// (recompress: 1 re-compress them to CNAT8, 2 narrow the lanes to SUM8).
#define NEXT_BRIDGE_OUT \
        hdr.bridge.recompress = (bit<2>)recompress; \
        hdr.bridge.is_agg = 1; \
        hdr.bridge.seed = meta.seed;

// Results and partial sums of the walk are CNAT8 (the admit table refuses other jobs); a
// new contribution walks on to add its other segments, a duplicate of a use still open
// has nothing to add.
#if PASSES > 1
#define NEXT_WALK_ACTION walk_on;
#define NEXT_ENTRIES \
            (false, true, false, _, _, _, _): down(); \
            (false, false, true, 0, FLAG_F, _, _): up(); \
            (false, false, true, 0, FLAG_T, 0, _): multicast(); \
            (false, false, true, 0, FLAG_T, _, _): answer(); \
            (false, false, true, _, _, 0, _): walk_on(); \
            (false, false, true, _, _, _, _): absorbed();
#elif defined(LO_LANE_PASS)
#define NEXT_WALK_ACTION
#define NEXT_ENTRIES NEXT_LO_ENTRIES
#else
#define NEXT_WALK_ACTION
#define NEXT_ENTRIES \
            (false, true, false, _, _, _, _): down(); \
            (false, false, true, 0, FLAG_F, _, ENC_CNAT8): up(1); \
            (false, false, true, 0, FLAG_F, _, ENC_SUM8): up(2); \
            (false, false, true, 0, FLAG_F, _, _): up(0); \
            (false, false, true, 0, FLAG_T, 0, ENC_CNAT8): multicast(1); \
            (false, false, true, 0, FLAG_T, 0, ENC_SUM8): multicast(2); \
            (false, false, true, 0, FLAG_T, 0, _): multicast(0); \
            (false, false, true, 0, FLAG_T, _, ENC_CNAT8): answer(1); \
            (false, false, true, 0, FLAG_T, _, ENC_SUM8): answer(2); \
            (false, false, true, 0, FLAG_T, _, _): answer(0); \
            (false, false, true, _, _, _, _): absorbed();
#endif

// One table (as SwitchML's next step selector), not a tree of conditions, so that it
// shares stages with the sums.
#define NEXT_STEP_TABLE \
    table next_step { \
        key = { \
            meta.pass2: exact; \
            meta.down: exact; \
            meta.live: exact; \
            meta.remaining: ternary; \
            FLAG_KEY(meta.is_root); \
            meta.bm_seen: ternary; \
            meta.result_enc: ternary; \
            NEXT_LO_KEY \
        } \
        actions = { \
            NEXT_LO_ACTIONS \
            NEXT_WALK_ACTION \
            up; answer; multicast; absorbed; down; NoAction; \
        } \
        const entries = { \
            NEXT_ENTRIES \
        } \
        default_action = NoAction(); \
        size = 16; \
    }

#endif
