#ifndef NATSWITCH_AGGREGATION_P4
#define NATSWITCH_AGGREGATION_P4

#include "codec.p4"
#include "integrity.p4"

// SwitchML's slot algorithm with shadow copies, for integer-encoded
// contributions; docs/PROTOCOL.md states it. Every read-modify-write of a
// register happens inside one action, which BMv2 executes atomically.
control Aggregation(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    counter(16, CounterType.packets) events;

    register<bit<32>>(SLOT_REGS) bitmap;     // children seen, per (slot, version)
    register<bit<8>>(SLOT_REGS) count;       // children seen, per (slot, version)
    register<bit<8>>(SLOT_REGS) max_exp;     // max exponent piggybacked
    register<bit<8>>(SLOT_REGS) workers;     // workers summed (the children's weights)
    register<bit<32>>(SLOT_REGS) use;        // chunk index of the use the version holds
    register<bit<16>>(POOL_SIZE) session;    // newest session that touched the slot; 0: never
    ACC_REGISTERS

    VerifyUdp() integrity;
    DecodeCnat() decode;
    Recompress() recompress;

    action unknown_job() { meta.drop_reason = DROP_UNKNOWN_JOB; }
    // max_exp: the largest exponent a contribution of the job may carry (docs/PROTOCOL.md).
    action job_root(bit<16> base, bit<16> num_slots, bit<8> num_children,
                    bit<16> mcast_grp, bit<8> result_enc, bit<8> max_exp) {
        meta.is_root = true;
        meta.base = base;
        meta.num_slots = num_slots;
        meta.children = num_children;
        meta.grp = mcast_grp;
        meta.result_enc = result_enc;
        meta.max_exp = max_exp;
    }
    // partial_enc: the partial sums sent up, FIXED32 (exact) or re-compressed to
    // CNAT8 (one byte per element on every link, unbiased but no longer exact).
    action job_child(bit<16> base, bit<16> num_slots, bit<8> num_children,
                     bit<16> mcast_grp, bit<9> parent_port, bit<8> partial_enc,
                     bit<8> max_exp) {
        meta.is_root = false;
        meta.base = base;
        meta.num_slots = num_slots;
        meta.children = num_children;
        meta.grp = mcast_grp;
        meta.parent_port = parent_port;
        meta.result_enc = partial_enc;
        meta.max_exp = max_exp;
    }
    table jobs {
        key = { hdr.agg.job_id: exact; }
        actions = { job_root; job_child; @defaultonly unknown_job; }
        default_action = unknown_job();
        size = MAX_JOBS;
    }

    // Identity and weight come from the port (DESIGN contract 5): the weight is 1 for a
    // worker, the subtree's worker count for a child switch; the packet's count is ignored.
    action set_child(bit<5> index, bit<8> weight) {
        meta.child_bit = ((bit<32>)1) << index;
        meta.weight = weight;
    }
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

    // Sessions and uses are ordered by serial-number arithmetic (RFC 1982): x is newer
    // than y when 0 < x - y < half the space. A newer session resets the slot (both
    // versions); an older one is STALE. Per version, the chunk index of the use it holds:
    // a newer chunk starts the next use of the version (its bitmap and count restart), an
    // older one is a replay, STALE. A version never used in the session takes any chunk.
    action update_slot() {
        bit<16> last;
        session.read(last, meta.region);
        bit<16> ds = hdr.agg.session - last;
        bool new_session = last == 0 || (ds != 0 && ds < 0x8000);
        bool stale_session = !new_session && ds != 0;
        bit<32> bv0; bit<32> bo0; bit<8> cv0; bit<8> co0; bit<8> ev0; bit<8> wv0; bit<32> uv0;
        bitmap.read(bv0, meta.ridx);
        bitmap.read(bo0, meta.ridx_other);
        count.read(cv0, meta.ridx);
        count.read(co0, meta.ridx_other);
        max_exp.read(ev0, meta.ridx);
        workers.read(wv0, meta.ridx);
        use.read(uv0, meta.ridx);
        bit<32> bv = bv0; bit<32> bo = bo0; bit<8> cv = cv0; bit<8> co = co0; bit<8> ev = ev0; bit<8> wv = wv0; bit<32> uv = uv0;
        bit<16> sv = last;
        if (new_session) { bv = 0; bo = 0; cv = 0; co = 0; sv = hdr.agg.session; }
        bit<32> du = hdr.agg.chunk - uv;
        bool next_use = bv == 0 || (du != 0 && du < 0x80000000);
        bool stale_use = !next_use && du != 0;
        if (next_use) { bv = 0; cv = 0; uv = hdr.agg.chunk; }
        meta.stale = stale_session || stale_use;
        meta.seen = (bv & meta.child_bit) != 0;
        meta.first = !meta.seen && cv == 0;
        bit<8> cn = cv + 1;
        if (meta.seen) { cn = cv; }
        meta.complete = cn == meta.children;
        if (meta.first) {
            ev = hdr.agg.exp;
            wv = meta.weight;
        } else if (!meta.seen) {
            if (hdr.agg.exp > ev) { ev = hdr.agg.exp; }
            wv = wv + meta.weight;
        }
        bv = bv | meta.child_bit;
        if (meta.stale) {
            // Nothing changes: every register is written back as read.
            bv = bv0; bo = bo0; cn = cv0; co = co0; ev = ev0; wv = wv0; uv = uv0; sv = last;
        }
        session.write(meta.region, sv);
        bitmap.write(meta.ridx, bv);
        bitmap.write(meta.ridx_other, bo);
        count.write(meta.ridx, cn);
        count.write(meta.ridx_other, co);
        max_exp.write(meta.ridx, ev);
        workers.write(meta.ridx, wv);
        use.write(meta.ridx, uv);
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

    // The UDP checksum is filled in on the way out (NatComputeChecksum).
    action set_lengths() {
        bit<16> udp_len = hdr.cnat.isValid() ? UDP_LEN_CNAT8 : UDP_LEN_FIXED32;
        hdr.udp.length = udp_len;
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
        integrity.apply(hdr, meta);
        if (meta.drop_reason != DROP_NONE) { return; }
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
        if (hdr.agg.exp > meta.max_exp) {
            meta.drop_reason = DROP_BAD_EXP;
            return;
        }
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
        if (meta.stale) {
            meta.drop_reason = DROP_STALE;
            return;
        }
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
