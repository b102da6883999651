#ifndef NATSWITCH_SLOT_TWIN_P4
#define NATSWITCH_SLOT_TWIN_P4

// p4src/tna/slot_tna.p4 on v1model registers: the same registers per (slot, version),
// the same tables and entries, each register read and written once per packet as a
// RegisterAction would. One addition: BMv2's P4Runtime server writes no registers, so
// the control plane's write of `use` when it installs a job or moves its session (the
// chunk two uses before the version's first) is applied to a cell when the job's new
// session first touches it: `use_written` holds the job and session of the write a cell
// has had, and the job's entry the value written and its tag.
control SlotState(inout tna_headers_t hdr, inout ig_meta_t meta, in bit<9> port) {
    register<bit<32>>(SLOT_REGS) use;
    register<bit<32>>(SLOT_REGS) bitmap;
    register<bit<8>>(SLOT_REGS) remaining;
    register<bit<8>>(SLOT_REGS) max_exp;
    register<bit<32>>(SLOT_REGS) use_written;

    bit<32> use_init;       // the control plane's value of the cell: slot + first_back
    bit<32> use_tag;        // job << 16 | session

    // As slot_tna.p4's; first_back is the twin's: the chunk two uses before the version's
    // first, less the slot (-2 * num_slots for version 0, -num_slots for version 1).
    action job_root(bit<16> base, bit<32> back2, bit<16> slot_room, bit<8> exp_room,
                    bit<8> num_children, bit<16> mcast_grp, bit<8> result_enc,
                    bit<16> session, bit<8> workers, bit<32> seed, bit<32> first_back) {
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
        use_init = (bit<32>)hdr.agg.slot + first_back;
        use_tag = hdr.agg.job_id ++ session;
    }
    action job_child(bit<16> base, bit<32> back2, bit<16> slot_room, bit<8> exp_room,
                     bit<8> num_children, bit<16> mcast_grp, bit<9> parent_port,
                     bit<8> partial_enc, bit<16> session, bit<8> workers, bit<32> seed,
                     bit<32> first_back) {
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
        use_init = (bit<32>)hdr.agg.slot + first_back;
        use_tag = hdr.agg.job_id ++ session;
    }
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
    action admit() { meta.admitted = true; }
    // (BMv2 takes no bool in a ternary match: the flags as bits, true as 1)
    table admit_contrib {
        key = {
            (bit<1>)meta.ipv4_bad: ternary @name("meta.ipv4_bad");
            (bit<1>)meta.enc_bad: ternary @name("meta.enc_bad");
            (bit<1>)meta.len_ok: ternary @name("meta.len_ok");
            (bit<1>)meta.job_ok: ternary @name("meta.job_ok");
            hdr.agg.msg_type: ternary;
            (bit<1>)meta.child_ok: ternary @name("meta.child_ok");
            meta.sess_x: ternary;
            meta.exp_chk: ternary;
            meta.slot_chk: ternary;
            (bit<1>)meta.lanes: ternary @name("meta.lanes");
            meta.result_enc: ternary;
        }
        actions = { drop; result_in; admit; }
        const entries = {
            (1, _, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_CHECKSUM);
            (_, 1, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_ENCODING);
            (_, _, 0, _, _, _, _, _, _, _, _): drop(DROP_BAD_LENGTH);
            (_, _, _, 0, _, _, _, _, _, _, _): drop(DROP_UNKNOWN_JOB);
            // UQ4/SUM8 lanes for jobs whose results are SUM8, and only for them
            (_, _, _, _, _, _, _, _, _, 0, ENC_SUM8): drop(DROP_BAD_ENCODING);
            (_, _, _, _, _, _, _, _, _, 1, ENC_FIXED32): drop(DROP_BAD_ENCODING);
            (_, _, _, _, _, _, _, _, _, 1, ENC_CNAT8): drop(DROP_BAD_ENCODING);
#if PASSES > 1
            (_, _, _, _, _, _, _, _, _, _, ENC_FIXED32): drop(DROP_BAD_ENCODING);
#endif
            (_, _, _, _, MSG_RESULT, _, _, _, _, _, _): result_in();
            (_, _, _, _, MSG_CONTRIB, 0, _, _, _, _, _): drop(DROP_FOREIGN_PORT);
            (_, _, _, _, MSG_CONTRIB, _, 0, 0xff, _, _, _): drop(DROP_BAD_EXP);
            (_, _, _, _, MSG_CONTRIB, _, 0, _, 0x8000 &&& 0x8000, _, _): drop(DROP_BAD_SLOT);
            (_, _, _, _, MSG_CONTRIB, _, 0, _, _, _, _): admit();
            (_, _, _, _, MSG_CONTRIB, _, _, _, _, _, _): drop(DROP_WRONG_SESSION);
            (_, _, _, _, _, _, _, _, _, _, _): drop(DROP_BAD_TYPE);
        }
        size = 16;
    }

    action open_count() {
        meta.remaining = meta.children - 1;
        remaining.write((bit<32>)meta.ridx, meta.remaining);
    }
    action count() {
        remaining.read(meta.remaining, (bit<32>)meta.ridx);
        meta.remaining = meta.remaining - 1;
        remaining.write((bit<32>)meta.ridx, meta.remaining);
    }
    action read_count() { remaining.read(meta.remaining, (bit<32>)meta.ridx); }
    table count_child {
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
    action open_exp() {
        meta.exp = hdr.agg.exp;
        max_exp.write((bit<32>)meta.ridx, meta.exp);
    }
    // A duplicate carries the exponent its first copy did: max is idempotent.
    action max_exp_() {
        max_exp.read(meta.exp, (bit<32>)meta.ridx);
        meta.exp = meta.exp > hdr.agg.exp ? meta.exp : hdr.agg.exp;
        max_exp.write((bit<32>)meta.ridx, meta.exp);
    }
    table exponent {
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
        use_init = 0;
        use_tag = 0;
        jobs.apply();
        children.apply();
        admit_contrib.apply();
        if (meta.admitted) {
            bit<32> idx = (bit<32>)meta.ridx;
            bit<32> tag;
            use_written.read(tag, idx);
            // use_step: the version's next use opens when the packet names it.
            use.read(meta.use_old, idx);
            if (tag != use_tag) {
                meta.use_old = use_init;
                use_written.write(idx, use_tag);
            }
            if (meta.use_old == meta.c2n) {
                use.write(idx, hdr.agg.chunk);
                bitmap.write(idx, meta.child_bit);
                meta.first = true;
                meta.live = true;
            } else {
                use.write(idx, meta.use_old);
                if (meta.use_old == hdr.agg.chunk) {
                    bit<32> bm;
                    bitmap.read(bm, idx);
                    meta.bm_seen = bm & meta.child_bit;
                    bitmap.write(idx, bm | meta.child_bit);
                    meta.live = true;
                } else {
                    meta.use_d = hdr.agg.chunk - meta.use_old;
                }
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
