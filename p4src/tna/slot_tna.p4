#ifndef NATSWITCH_SLOT_TNA_P4
#define NATSWITCH_SLOT_TNA_P4

// The slot algorithm with shadow copies, on Tofino's terms: each register is touched by
// one RegisterAction per pass, so a use is checked against its own version only
// (docs/PROTOCOL.md "Tofino profile"). Per (slot, version), index ridx:
//   use        the chunk of the use the version holds; the control plane sets it to the
//              chunk two uses before the first (slot - 2N, slot - N) when it installs a
//              job or moves it to a new session, so a first packet opens a use as any
//              next use does
//   bitmap     children seen in the use
//   remaining  children still to come (0: complete)
//   max_exp    the largest exponent piggybacked
// The checks are folded into tables, not chains of conditions, so that the sums can
// start in the fourth stage: jobs and children (stage 0), admit and use (1), bitmap (2).
control SlotState(inout tna_headers_t hdr, inout ig_meta_t meta, in PortId_t port) {
    Register<bit<32>, bit<16>>(SLOT_REGS) use;
    Register<bit<32>, bit<16>>(SLOT_REGS) bitmap;
    Register<bit<8>, bit<16>>(SLOT_REGS) remaining;
    Register<bit<8>, bit<16>>(SLOT_REGS) max_exp;

    // The version's next use opens when the packet names it; the old chunk says which.
    RegisterAction<bit<32>, bit<16>, bit<32>>(use) use_step = {
        void apply(inout bit<32> v, out bit<32> rv) {
            rv = v;
            if (v == meta.c2n) { v = hdr.agg.chunk; }
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(bitmap) bm_open = {
        void apply(inout bit<32> v) { v = meta.child_bit; }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(bitmap) bm_join = {
        void apply(inout bit<32> v, out bit<32> rv) {
            rv = v & meta.child_bit;
            v = v | meta.child_bit;
        }
    };
    RegisterAction<bit<8>, bit<16>, bit<8>>(remaining) rem_open = {
        void apply(inout bit<8> v, out bit<8> rv) { v = meta.children - 1; rv = v; }
    };
    RegisterAction<bit<8>, bit<16>, bit<8>>(remaining) rem_count = {
        void apply(inout bit<8> v, out bit<8> rv) { v = v - 1; rv = v; }
    };
    RegisterAction<bit<8>, bit<16>, bit<8>>(remaining) rem_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };
    RegisterAction<bit<8>, bit<16>, bit<8>>(max_exp) exp_open = {
        void apply(inout bit<8> v, out bit<8> rv) { v = hdr.agg.exp; rv = v; }
    };
    // A duplicate carries the exponent its first copy did: max is idempotent.
    RegisterAction<bit<8>, bit<16>, bit<8>>(max_exp) exp_max = {
        void apply(inout bit<8> v, out bit<8> rv) { v = max(v, hdr.agg.exp); rv = v; }
    };

    // One entry per (job, version): base is the job's region plus POOL_SIZE for version 1;
    // back2 is -2 * num_slots (mod 2^32); slot_room is 0x8000 - num_slots (bit 15 of
    // slot + slot_room: the slot is too large); exp_room is 254 - max_exp (exp + exp_room,
    // saturating, reaches 255 only for an exponent above the job's bound).
    action job_root(bit<16> base, bit<32> back2, bit<16> slot_room, bit<8> exp_room,
                    bit<8> num_children, bit<16> mcast_grp, bit<8> result_enc,
                    bit<16> session, bit<8> workers, bit<32> seed) {
        meta.job_ok = true;
        meta.ridx = base + hdr.agg.slot;
        meta.c2n = hdr.agg.chunk + back2;
        meta.slot_chk = hdr.agg.slot + slot_room;
        meta.exp_chk = hdr.agg.exp |+| exp_room;
        meta.sess_x = hdr.agg.session ^ session;
        meta.is_root = true;
        meta.children = num_children;
        meta.grp = mcast_grp;
        meta.result_enc = result_enc;
        meta.workers = workers;
        meta.seed = seed;
    }
    action job_child(bit<16> base, bit<32> back2, bit<16> slot_room, bit<8> exp_room,
                     bit<8> num_children, bit<16> mcast_grp, bit<9> parent_port,
                     bit<8> partial_enc, bit<16> session, bit<8> workers, bit<32> seed) {
        meta.job_ok = true;
        meta.ridx = base + hdr.agg.slot;
        meta.c2n = hdr.agg.chunk + back2;
        meta.slot_chk = hdr.agg.slot + slot_room;
        meta.exp_chk = hdr.agg.exp |+| exp_room;
        meta.sess_x = hdr.agg.session ^ session;
        meta.is_root = false;
        meta.children = num_children;
        meta.grp = mcast_grp;
        meta.parent_port = parent_port;
        meta.result_enc = partial_enc;
        meta.workers = workers;
        meta.seed = seed;
    }
    // A version above 1 finds no entry either: told apart from an unknown job below.
    table jobs {
        key = { hdr.agg.job_id: exact; hdr.agg.version: exact; }
        actions = { job_root; job_child; NoAction; }
        default_action = NoAction();
        size = 2 * MAX_JOBS;
    }

    // Identity comes from the port (DESIGN contract 5).
    action set_child(bit<32> child_bit) {
        meta.child_ok = true;
        meta.child_bit = child_bit;
    }
    table children {
        key = { hdr.agg.job_id: exact; port: exact; }
        actions = { set_child; NoAction; }
        default_action = NoAction();
        size = MAX_CHILD_ENTRIES;
    }

    action drop(bit<8> reason) { meta.drop_reason = reason; }
    action result_in() { meta.result_in = true; }
    action admit() {
        meta.admitted = true;
        meta.use_old = use_step.execute(meta.ridx);
    }
    // The v1model program's checks in its order, as one ternary match whose admitting
    // entry runs the use register.
    table admit_contrib {
        key = {
            meta.ipv4_bad: ternary;
            meta.enc_bad: ternary;
            meta.len_ok: ternary;
            meta.job_ok: ternary;
            hdr.agg.msg_type: ternary;
            meta.child_ok: ternary;
            meta.sess_x: ternary;
            meta.exp_chk: ternary;
            meta.slot_chk: ternary;
            meta.lanes: ternary;
            meta.result_enc: ternary;
        }
        actions = { drop; result_in; admit; }
        const entries = {
            (true, _, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_CHECKSUM);
            (_, true, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_ENCODING);
            (_, _, false, _, _, _, _, _, _, _, _): drop(DROP_BAD_LENGTH);
            (_, _, _, false, _, _, _, _, _, _, _): drop(DROP_UNKNOWN_JOB);
            // UQ4/SUM8 lanes for jobs whose results are SUM8, and only for them
            (_, _, _, _, _, _, _, _, _, false, ENC_SUM8): drop(DROP_BAD_ENCODING);
            (_, _, _, _, _, _, _, _, _, true, ENC_FIXED32): drop(DROP_BAD_ENCODING);
            (_, _, _, _, _, _, _, _, _, true, ENC_CNAT8): drop(DROP_BAD_ENCODING);
#if PASSES > 1
            // the walk re-compresses every result and partial sum to CNAT8
            (_, _, _, _, _, _, _, _, _, _, ENC_FIXED32): drop(DROP_BAD_ENCODING);
#endif
            (_, _, _, _, MSG_RESULT, _, _, _, _, _, _): result_in();
            (_, _, _, _, MSG_CONTRIB, false, _, _, _, _, _): drop(DROP_FOREIGN_PORT);
            (_, _, _, _, MSG_CONTRIB, _, 0, 0xff, _, _, _): drop(DROP_BAD_EXP);
            (_, _, _, _, MSG_CONTRIB, _, 0, _, 0x8000 &&& 0x8000, _, _): drop(DROP_BAD_SLOT);
            (_, _, _, _, MSG_CONTRIB, _, 0, _, _, _, _): admit();
            (_, _, _, _, MSG_CONTRIB, _, _, _, _, _, _): drop(DROP_WRONG_SESSION);
            (_, _, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_TYPE);
        }
        size = 16;
    }

    action open_use() {
        bm_open.execute(meta.ridx);
        meta.first = true;
        meta.live = true;
    }
    action join_use() {
        meta.bm_seen = bm_join.execute(meta.ridx);
        meta.live = true;
    }
    action other_use() { meta.use_d = hdr.agg.chunk - meta.use_old; }

    action open_count() { meta.remaining = rem_open.execute(meta.ridx); }
    action count() { meta.remaining = rem_count.execute(meta.ridx); }
    action read_count() { meta.remaining = rem_read.execute(meta.ridx); }
    @stage(3) table count_child {
        key = { meta.live: exact; meta.first: exact; meta.bm_seen: ternary; }
        actions = { open_count; count; read_count; NoAction; }
        const entries = {
            (true, true, _): open_count();
            (true, false, 0): count();
            (true, false, _): read_count();
        }
        default_action = NoAction();
        size = 4;
    }
    action open_exp() { meta.exp = exp_open.execute(meta.ridx); }
    action max_exp_() { meta.exp = exp_max.execute(meta.ridx); }
    @stage(3) table exponent {
        key = { meta.live: exact; meta.first: exact; }
        actions = { open_exp; max_exp_; NoAction; }
        const entries = {
            (true, true): open_exp();
            (true, false): max_exp_();
        }
        default_action = NoAction();
        size = 4;
    }

    apply {
        jobs.apply();
        children.apply();
        admit_contrib.apply();
        if (meta.admitted) {
            if (meta.use_old == meta.c2n) {
                open_use();
            } else if (meta.use_old == hdr.agg.chunk) {
                join_use();
            } else {
                other_use();
            }
        }
        count_child.apply();
        exponent.apply();
        // Drop reasons off the sums' path.
        if (meta.admitted && !meta.live) {
            if (meta.use_d[31:31] == 1) {
                meta.drop_reason = DROP_STALE;      // older than the use the version holds
            } else {
                meta.drop_reason = DROP_EARLY;      // a use no correct sender can have sent yet
            }
        } else if (meta.drop_reason == DROP_UNKNOWN_JOB && hdr.agg.version > 1) {
            meta.drop_reason = DROP_BAD_VERSION;
        } else if (meta.result_in) {
            // A result comes down from the parent only, in the job's session.
            if (meta.is_root || port != meta.parent_port) {
                meta.drop_reason = DROP_BAD_RESULT_PORT;
            } else if (meta.sess_x != 0) {
                meta.drop_reason = DROP_WRONG_SESSION;
            } else {
                meta.down = true;
            }
        }
    }
}

#endif
