#ifndef NATSWITCH_SLOT_TWIN_P4
#define NATSWITCH_SLOT_TWIN_P4

#include "../tna/slot_shared_tna.p4"

// The job entries carry first_back more: the chunk two uses before the version's first,
// less the slot (-2 * num_slots for version 0, -num_slots for version 1).
#define SLOT_JOB_PARAMS , bit<32> first_back
#define SLOT_JOB_EXTRA \
        use_init = (bit<32>)hdr.agg.slot + first_back; \
        use_tag = hdr.agg.job_id ++ session;

// p4src/tna/slot_tna.p4 on v1model registers: the same registers per (slot, version),
// the same tables and entries (slot_shared_tna.p4), each register read and written once
// per packet as a RegisterAction would. One addition: BMv2's P4Runtime server writes no
// registers, so the control plane's write of `use` when it installs a job or moves its
// session (the chunk two uses before the version's first) is applied to a cell when the
// job's new session first touches it: `use_written` holds the job and session of the
// write a cell has had, and the job's entry the value written and its tag.
control SlotState(inout tna_headers_t hdr, inout ig_meta_t meta, in bit<9> port) {
    register<bit<32>>(SLOT_REGS) use;
    register<bit<32>>(SLOT_REGS) bitmap;
    register<bit<8>>(SLOT_REGS) remaining;
    register<bit<8>>(SLOT_REGS) max_exp;
    register<bit<32>>(SLOT_REGS) use_written;

    bit<32> use_init;       // the control plane's value of the cell: slot + first_back
    bit<32> use_tag;        // job << 16 | session

    SLOT_JOBS
    action admit() { meta.admitted = true; }
    SLOT_ADMIT_TABLE

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
    SLOT_COUNT_TABLE()
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
    SLOT_EXP_TABLE()

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
        SLOT_VERDICT
    }
}

#endif
