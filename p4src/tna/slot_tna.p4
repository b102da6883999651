#ifndef NATSWITCH_SLOT_TNA_P4
#define NATSWITCH_SLOT_TNA_P4

#include "slot_shared_tna.p4"

// The job entries carry nothing more here (slot_shared_tna.p4).
#define SLOT_JOB_PARAMS
#define SLOT_JOB_EXTRA

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

    SLOT_JOBS
    action admit() {
        meta.admitted = true;
        meta.use_old = use_step.execute(meta.ridx);
    }
    SLOT_ADMIT_TABLE

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
    SLOT_COUNT_TABLE(@stage(3))
    action open_exp() { meta.exp = exp_open.execute(meta.ridx); }
    action max_exp_() { meta.exp = exp_max.execute(meta.ridx); }
    SLOT_EXP_TABLE(@stage(3))

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
        SLOT_VERDICT
    }
}

#endif
