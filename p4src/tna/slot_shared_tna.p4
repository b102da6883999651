#ifndef NATSWITCH_SLOT_SHARED_TNA_P4
#define NATSWITCH_SLOT_SHARED_TNA_P4

// The slot's tables, written once for the TNA program (slot_tna.p4) and its v1model twin
// (p4src/twin/slot_twin.p4). Each defines before using them: SLOT_JOB_PARAMS and
// SLOT_JOB_EXTRA, what the twin's job entries carry more (first_back) and do with it
// (nothing on TNA), and the actions on the registers the tables run; FLAG_KEY, FLAG_T and
// FLAG_F (arch_tna.p4, arch_twin.p4) put a bool in a ternary match.

// One entry per (job, version): base is the job's region plus POOL_SIZE for version 1;
// back2 is -2 * num_slots (mod 2^32); slot_room is 0x8000 - num_slots (bit 15 of
// slot + slot_room: the slot is too large); exp_room is 254 - max_exp (exp + exp_room,
// saturating, reaches 255 only for an exponent above the job's bound). A version above 1
// finds no entry either: told apart from an unknown job below. Identity comes from the
// port (DESIGN contract 5).
#define SLOT_JOBS \
    action job_root(bit<16> base, bit<32> back2, bit<16> slot_room, bit<8> exp_room, \
                    bit<8> num_children, bit<16> mcast_grp, bit<8> result_enc, \
                    bit<16> session, bit<8> workers, bit<32> seed SLOT_JOB_PARAMS) { \
        meta.job_ok = true; \
        meta.ridx = base + hdr.agg.slot; \
        meta.c2n = hdr.agg.chunk + back2; \
        meta.slot_chk = hdr.agg.slot + slot_room; \
        meta.exp_chk = hdr.agg.exp |+| exp_room; \
        meta.sess_x = hdr.agg.session ^ session; \
        meta.is_root = true; \
        meta.children = num_children; \
        meta.grp = mcast_grp; \
        meta.result_enc = result_enc; \
        meta.workers = workers; \
        meta.seed = seed; \
        SLOT_JOB_EXTRA \
    } \
    action job_child(bit<16> base, bit<32> back2, bit<16> slot_room, bit<8> exp_room, \
                     bit<8> num_children, bit<16> mcast_grp, bit<9> parent_port, \
                     bit<8> partial_enc, bit<16> session, bit<8> workers, bit<32> seed \
                     SLOT_JOB_PARAMS) { \
        meta.job_ok = true; \
        meta.ridx = base + hdr.agg.slot; \
        meta.c2n = hdr.agg.chunk + back2; \
        meta.slot_chk = hdr.agg.slot + slot_room; \
        meta.exp_chk = hdr.agg.exp |+| exp_room; \
        meta.sess_x = hdr.agg.session ^ session; \
        meta.is_root = false; \
        meta.children = num_children; \
        meta.grp = mcast_grp; \
        meta.parent_port = parent_port; \
        meta.result_enc = partial_enc; \
        meta.workers = workers; \
        meta.seed = seed; \
        SLOT_JOB_EXTRA \
    } \
    table jobs { \
        key = { hdr.agg.job_id: exact; hdr.agg.version: exact; } \
        actions = { job_root; job_child; NoAction; } \
        default_action = NoAction(); \
        size = 2 * MAX_JOBS; \
    } \
    action set_child(bit<32> child_bit) { \
        meta.child_ok = true; \
        meta.child_bit = child_bit; \
    } \
    table children { \
        key = { hdr.agg.job_id: exact; port: exact; } \
        actions = { set_child; NoAction; } \
        default_action = NoAction(); \
        size = MAX_CHILD_ENTRIES; \
    } \
    action drop(bit<8> reason) { meta.drop_reason = reason; } \
    action result_in() { meta.result_in = true; }

// The walk re-compresses every result and partial sum to CNAT8.
#if PASSES > 1
#define SLOT_WALK_ENTRIES (_, _, _, _, _, _, _, _, _, _, ENC_FIXED32): drop(DROP_BAD_ENCODING);
#else
#define SLOT_WALK_ENTRIES
#endif

// The v1model program's checks in its order, as one ternary match whose admitting entry
// (admit) runs the use register. Lanes for jobs whose results are SUM8, and only for
// them.
#define SLOT_ADMIT_TABLE \
    table admit_contrib { \
        key = { \
            FLAG_KEY(meta.ipv4_bad); \
            FLAG_KEY(meta.enc_bad); \
            FLAG_KEY(meta.len_ok); \
            FLAG_KEY(meta.job_ok); \
            hdr.agg.msg_type: ternary; \
            FLAG_KEY(meta.child_ok); \
            meta.sess_x: ternary; \
            meta.exp_chk: ternary; \
            meta.slot_chk: ternary; \
            FLAG_KEY(meta.lanes); \
            meta.result_enc: ternary; \
        } \
        actions = { drop; result_in; admit; } \
        const entries = { \
            (FLAG_T, _, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_CHECKSUM); \
            (_, FLAG_T, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_ENCODING); \
            (_, _, FLAG_F, _, _, _, _, _, _, _, _): drop(DROP_BAD_LENGTH); \
            (_, _, _, FLAG_F, _, _, _, _, _, _, _): drop(DROP_UNKNOWN_JOB); \
            (_, _, _, _, _, _, _, _, _, FLAG_F, ENC_SUM8): drop(DROP_BAD_ENCODING); \
            (_, _, _, _, _, _, _, _, _, FLAG_T, ENC_FIXED32): drop(DROP_BAD_ENCODING); \
            (_, _, _, _, _, _, _, _, _, FLAG_T, ENC_CNAT8): drop(DROP_BAD_ENCODING); \
            SLOT_WALK_ENTRIES \
            (_, _, _, _, MSG_RESULT, _, _, _, _, _, _): result_in(); \
            (_, _, _, _, MSG_CONTRIB, FLAG_F, _, _, _, _, _): drop(DROP_FOREIGN_PORT); \
            (_, _, _, _, MSG_CONTRIB, _, 0, 0xff, _, _, _): drop(DROP_BAD_EXP); \
            (_, _, _, _, MSG_CONTRIB, _, 0, _, 0x8000 &&& 0x8000, _, _): drop(DROP_BAD_SLOT); \
            (_, _, _, _, MSG_CONTRIB, _, 0, _, _, _, _): admit(); \
            (_, _, _, _, MSG_CONTRIB, _, _, _, _, _, _): drop(DROP_WRONG_SESSION); \
            (_, _, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_TYPE); \
        } \
        size = 16; \
    }

// The registers' actions of a live use, by the use's first packet or a later one (AT: the
// TNA program's stage).
#define SLOT_COUNT_TABLE(AT) \
    AT table count_child { \
        key = { meta.live: exact; meta.first: exact; meta.bm_seen: ternary; } \
        actions = { open_count; count; read_count; NoAction; } \
        const entries = { \
            (true, true, _): open_count(); \
            (true, false, 0): count(); \
            (true, false, _): read_count(); \
        } \
        default_action = NoAction(); \
        size = 4; \
    }
#define SLOT_EXP_TABLE(AT) \
    AT table exponent { \
        key = { meta.live: exact; meta.first: exact; } \
        actions = { open_exp; max_exp_; NoAction; } \
        const entries = { \
            (true, true): open_exp(); \
            (true, false): max_exp_(); \
        } \
        default_action = NoAction(); \
        size = 4; \
    }

// After the use's registers: drop reasons off the sums' path. A stale packet is older than
// the use the version holds, an early one of a use no correct sender can have sent yet; a
// result comes down from the parent only, in the job's session.
#define SLOT_VERDICT \
        count_child.apply(); \
        exponent.apply(); \
        if (meta.admitted && !meta.live) { \
            if (meta.use_d[31:31] == 1) { \
                meta.drop_reason = DROP_STALE; \
            } else { \
                meta.drop_reason = DROP_EARLY; \
            } \
        } else if (meta.drop_reason == DROP_UNKNOWN_JOB && hdr.agg.version > 1) { \
            meta.drop_reason = DROP_BAD_VERSION; \
        } else if (meta.result_in) { \
            if (meta.is_root || port != meta.parent_port) { \
                meta.drop_reason = DROP_BAD_RESULT_PORT; \
            } else if (meta.sess_x != 0) { \
                meta.drop_reason = DROP_WRONG_SESSION; \
            } else { \
                meta.down = true; \
            } \
        }

#endif
