#ifndef NATSWITCH_AGGREGATION_P4
#define NATSWITCH_AGGREGATION_P4

#include "codec.p4"

// SwitchML's slot algorithm with shadow copies, for integer-encoded
// contributions; docs/PROTOCOL.md states it. Every read-modify-write of a
// register happens inside one action, which BMv2 executes atomically.
control Aggregation(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    counter(16, CounterType.packets) events;

    register<bit<32>>(SLOT_REGS) bitmap;     // children seen, per (slot, version)
    register<bit<8>>(SLOT_REGS) count;       // contributions modulo children
    register<bit<8>>(SLOT_REGS) max_exp;     // max exponent piggybacked
    register<bit<8>>(SLOT_REGS) workers;     // workers summed
    register<bit<16>>(POOL_SIZE) session;    // session that last touched the slot
    ACC_REGISTERS

    DecodeCnat() decode;
    Recompress() recompress;

    action unknown_job() { meta.drop_reason = DROP_UNKNOWN_JOB; }
    action job_root(bit<16> base, bit<16> num_slots, bit<8> num_children,
                    bit<16> mcast_grp, bit<8> result_enc) {
        meta.is_root = true;
        meta.base = base;
        meta.num_slots = num_slots;
        meta.children = num_children;
        meta.grp = mcast_grp;
        meta.result_enc = result_enc;
    }
    // partial_enc: the partial sums sent up, FIXED32 (exact) or re-compressed to
    // CNAT8 (one byte per element on every link, unbiased but no longer exact).
    action job_child(bit<16> base, bit<16> num_slots, bit<8> num_children,
                     bit<16> mcast_grp, bit<9> parent_port, bit<8> partial_enc) {
        meta.is_root = false;
        meta.base = base;
        meta.num_slots = num_slots;
        meta.children = num_children;
        meta.grp = mcast_grp;
        meta.parent_port = parent_port;
        meta.result_enc = partial_enc;
    }
    table jobs {
        key = { hdr.agg.job_id: exact; }
        actions = { job_root; job_child; @defaultonly unknown_job; }
        default_action = unknown_job();
        size = MAX_JOBS;
    }

    // Identity comes from the port (DESIGN contract 5).
    action set_child(bit<5> index) { meta.child_bit = ((bit<32>)1) << index; }
    action foreign_port() { meta.drop_reason = DROP_FOREIGN_PORT; }
    table children {
        key = { hdr.agg.job_id: exact; sm.ingress_port: exact; }
        actions = { set_child; @defaultonly foreign_port; }
        default_action = foreign_port();
        size = MAX_CHILD_ENTRIES;
    }

    action locate() {
        meta.region = (bit<32>)meta.base + (bit<32>)hdr.agg.slot;
        meta.ridx = (meta.region << 1) | (bit<32>)hdr.agg.version;
        meta.ridx_other = meta.ridx ^ 1;
    }

    action update_slot() {
        bit<16> last;
        session.read(last, meta.region);
        bool fresh = last != hdr.agg.session;
        session.write(meta.region, hdr.agg.session);
        bit<32> bv; bit<32> bo; bit<8> cv; bit<8> co; bit<8> ev; bit<8> wv;
        bitmap.read(bv, meta.ridx);
        bitmap.read(bo, meta.ridx_other);
        count.read(cv, meta.ridx);
        count.read(co, meta.ridx_other);
        max_exp.read(ev, meta.ridx);
        workers.read(wv, meta.ridx);
        if (fresh) { bv = 0; bo = 0; cv = 0; co = 0; }
        meta.seen = (bv & meta.child_bit) != 0;
        meta.first = !meta.seen && cv == 0;
        bit<8> cn = cv + 1;
        if (cn == meta.children) { cn = 0; }
        if (meta.seen) { cn = cv; }
        meta.complete = cn == 0;
        if (meta.first) {
            ev = hdr.agg.exp;
            wv = hdr.agg.count;
        } else if (!meta.seen) {
            if (hdr.agg.exp > ev) { ev = hdr.agg.exp; }
            wv = wv + hdr.agg.count;
        }
        bitmap.write(meta.ridx, bv | meta.child_bit);
        bitmap.write(meta.ridx_other, bo & ~meta.child_bit);
        count.write(meta.ridx, cn);
        count.write(meta.ridx_other, co);
        max_exp.write(meta.ridx, ev);
        workers.write(meta.ridx, wv);
        meta.exp = ev;
        meta.workers = wv;
    }

    action acc_write() { ACC_WRITE }
    action acc_add() { bit<32> acc_t; ACC_ADD }
    action acc_read() { ACC_READ }
    // Keeps the re-compressed (rounded) values, so a retransmitted result
    // re-encodes to the very codes the other children received.
    action keep_rounded() {
        DECODE_CNAT
        ACC_WRITE
        hdr.fixed.setInvalid();
    }

    action set_lengths() {
        bit<16> udp_len = hdr.cnat.isValid() ? UDP_LEN_CNAT8 : UDP_LEN_FIXED32;
        hdr.udp.length = udp_len;
        hdr.udp.checksum = 0;
        hdr.ipv4.total_len = udp_len + 20;
        hdr.ipv4.ttl = 64;
    }

    apply {
        // The events counter lives here, so plain IPv4 packets the ingress routed come
        // by to be counted (docs/PROTOCOL.md, event 7).
        if (!meta.is_agg) {
            events.count(EV_FORWARDED);
            return;
        }
        if (sm.parser_error != error.NoError) {
            meta.drop_reason = sm.parser_error == error.BadEncoding
                ? DROP_BAD_ENCODING : DROP_BAD_LENGTH;
            return;
        }
        if (hdr.udp.length != (hdr.cnat.isValid() ? UDP_LEN_CNAT8 : UDP_LEN_FIXED32)) {
            meta.drop_reason = DROP_BAD_LENGTH;
            return;
        }
        jobs.apply();
        if (meta.drop_reason != DROP_NONE) { return; }

        if (hdr.agg.msg_type == MSG_RESULT) {
            // A result comes down from the parent only.
            if (!meta.is_root && sm.ingress_port == meta.parent_port) {
                sm.mcast_grp = meta.grp;
                events.count(EV_RESULT_DOWN);
            } else {
                meta.drop_reason = DROP_BAD_RESULT_PORT;
            }
            return;
        }
        if (hdr.agg.msg_type != MSG_CONTRIB) {
            meta.drop_reason = DROP_BAD_TYPE;
            return;
        }
        children.apply();
        if (meta.drop_reason != DROP_NONE) { return; }
        if (hdr.agg.version > 1) {
            meta.drop_reason = DROP_BAD_VERSION;
            return;
        }
        locate();
        if (hdr.agg.slot >= meta.num_slots || meta.region >= POOL_SIZE) {
            meta.drop_reason = DROP_BAD_SLOT;
            return;
        }

        if (hdr.cnat.isValid()) { decode.apply(hdr); }
        update_slot();
        if (!meta.seen) {
            events.count(EV_CONTRIB);
            if (meta.first) { acc_write(); } else { acc_add(); }
        } else if (meta.complete) {
            acc_read();
        } else {
            events.count(EV_DUPLICATE);
        }
        if (!meta.complete) {
            // Absorbed into the slot (or a duplicate of an open slot).
            mark_to_drop(sm);
            return;
        }
        if (!meta.seen) { events.count(EV_COMPLETE); }

        hdr.agg.exp = meta.exp;
        hdr.agg.count = meta.workers;
        hdr.agg.flags = 0;
        if (meta.result_enc == ENC_CNAT8) {
            recompress.apply(hdr);
            keep_rounded();
        }
        if (meta.is_root) {
            hdr.agg.msg_type = MSG_RESULT;
            if (meta.seen) {
                sm.egress_spec = sm.ingress_port;
                events.count(EV_ANSWERED);
            } else {
                sm.mcast_grp = meta.grp;
                events.count(EV_RESULT_MCAST);
            }
        } else {
            // The partial sum is one contribution at the parent.
            hdr.agg.msg_type = MSG_CONTRIB;
            sm.egress_spec = meta.parent_port;
            events.count(EV_PARTIAL_UP);
        }
        set_lengths();
    }
}

#endif
