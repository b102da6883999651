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
    register<bit<16>>(POOL_SIZE) slot_session;   // the session that last took the slot; 0: none
    // Sparse jobs, per (slot, version): the use's block, the tensor's block count (the
    // bound) and the running min of the contributions' next blocks; max_exp then holds
    // the exponent of that min (docs/PROTOCOL.md "Sparse jobs").
    register<bit<32>>(SLOT_REGS) blk;
    register<bit<32>>(SLOT_REGS) bound;
    register<bit<32>>(SLOT_REGS) rmin;
    ACC_REGISTERS
#ifdef FOUR_BIT
    LANE_REGISTERS      // the lane encodings' sums, four 16-bit lanes each (gen_elements.py)
#endif

    VerifyUdp() integrity;
    DecodeCnat() decode;
    Recompress() recompress;
    RangeCheck() bounds;
#ifdef FOUR_BIT
    DecodeNat4() decode_nat4;
#endif

    action unknown_job() { meta.drop_reason = DROP_UNKNOWN_JOB; }
    // max_exp: the largest exponent a contribution of the job may carry (docs/PROTOCOL.md).
    // session: the job's current session, set by the control plane (docs/PROTOCOL.md
    // "Sessions"); a packet of any other session is dropped. round_key: this switch's key
    // for the rounding bits of the job's re-compressed sums (codec.p4 Recompress).
    action job_root(bit<16> base, bit<16> num_slots, bit<8> num_children,
                    bit<16> mcast_grp, bit<8> result_enc, bit<8> max_exp, bit<16> session,
                    bit<32> round_key) {
        meta.session = session;
        meta.round_key = round_key;
        meta.is_root = true;
        meta.sparse = false;
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
                     bit<8> max_exp, bit<16> session, bit<32> round_key) {
        meta.session = session;
        meta.round_key = round_key;
        meta.is_root = false;
        meta.sparse = false;
        meta.base = base;
        meta.num_slots = num_slots;
        meta.children = num_children;
        meta.grp = mcast_grp;
        meta.parent_port = parent_port;
        meta.result_enc = partial_enc;
        meta.max_exp = max_exp;
    }
    // A sparse (block) job: one switch, the root, so no partial sums.
    action job_sparse_root(bit<16> base, bit<16> num_slots, bit<8> num_children,
                           bit<16> mcast_grp, bit<8> result_enc, bit<8> max_exp,
                           bit<16> session, bit<32> round_key) {
        meta.session = session;
        meta.round_key = round_key;
        meta.is_root = true;
        meta.sparse = true;
        meta.base = base;
        meta.num_slots = num_slots;
        meta.children = num_children;
        meta.grp = mcast_grp;
        meta.result_enc = result_enc;
        meta.max_exp = max_exp;
    }
    table jobs {
        key = { hdr.agg.job_id: exact; }
        actions = { job_root; job_child; job_sparse_root; @defaultonly unknown_job; }
        default_action = unknown_job();
        size = MAX_JOBS;
    }

    // Identity and weight come from the port (DESIGN contract 5): the weight is 1 for a
    // worker, the subtree's worker count for a child switch; the packet's count is ignored.
    // max_mag: the largest |element| the child may send (docs/PROTOCOL.md "Bounds").
    action set_child(bit<5> index, bit<8> weight, bit<32> max_mag) {
        meta.child_bit = ((bit<32>)1) << index;
        meta.weight = weight;
        meta.max_mag = max_mag;
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

    // Which use of the slot a packet names (docs/PROTOCOL.md "Uses"). In a session, use u of
    // slot s carries the chunk number u * num_slots + s, in version u % 2. The packet names
    // the current use of its version, or the slot's next use: the one after the use the
    // other version holds, once that one is complete (a slot new to the session starts at
    // use 0, version 0). Anything else is older than the slot's newest use (STALE) or a use
    // no correct sender can have sent yet (EARLY): dropped, nothing changes.
    action classify_use(in bit<32> bv, in bit<32> uv, in bit<32> bo, in bit<32> uo,
                        in bit<8> co, out bool current, out bool next_use) {
        current = bv != 0 && hdr.agg.chunk == uv;
        if (bo != 0) {
            next_use = !current && co == meta.children
                       && hdr.agg.chunk == uo + (bit<32>)meta.num_slots;
        } else {
            next_use = bv == 0 && hdr.agg.version == 0
                       && hdr.agg.chunk == (bit<32>)hdr.agg.slot;
        }
        bit<32> newest = uv;
        if (bv == 0 || (bo != 0 && uo - uv < 0x80000000)) { newest = uo; }
        bit<32> d = hdr.agg.chunk - newest;
        bool older = (bv != 0 || bo != 0) && (d == 0 || d >= 0x80000000);
        meta.stale = !current && !next_use && older;
        meta.early = !current && !next_use && !older;
    }

    // The slot's registers for one contribution. The session was checked against the job's
    // (the control plane's); a slot last touched in another session starts afresh.
    action update_slot() {
        bit<16> last;
        slot_session.read(last, meta.region);
        bit<32> bv0; bit<32> bo0; bit<8> cv0; bit<8> co0; bit<8> ev0; bit<8> wv0; bit<32> uv0;
        bit<32> uo;
        bitmap.read(bv0, meta.ridx);
        bitmap.read(bo0, meta.ridx_other);
        count.read(cv0, meta.ridx);
        count.read(co0, meta.ridx_other);
        max_exp.read(ev0, meta.ridx);
        workers.read(wv0, meta.ridx);
        use.read(uv0, meta.ridx);
        use.read(uo, meta.ridx_other);
        bit<32> bv = bv0; bit<32> bo = bo0; bit<8> cv = cv0; bit<8> co = co0; bit<8> ev = ev0; bit<8> wv = wv0; bit<32> uv = uv0;
        bit<16> sv = last;
        if (last != hdr.agg.session) { bv = 0; bo = 0; cv = 0; co = 0; sv = hdr.agg.session; }
        bool current; bool next_use;
        classify_use(bv, uv, bo, uo, co, current, next_use);
        if (next_use) { bv = 0; cv = 0; uv = hdr.agg.chunk; }
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
        if (meta.stale || meta.early) {
            // Nothing changes: every register is written back as read.
            bv = bv0; bo = bo0; cn = cv0; co = co0; ev = ev0; wv = wv0; uv = uv0; sv = last;
        }
        slot_session.write(meta.region, sv);
        bitmap.write(meta.ridx, bv);
        bitmap.write(meta.ridx_other, bo);
        count.write(meta.ridx, cn);
        count.write(meta.ridx_other, co);
        max_exp.write(meta.ridx, ev);
        workers.write(meta.ridx, wv);
        use.write(meta.ridx, uv);
        meta.exp = ev;
        meta.workers = wv;
        meta.bad_block = false;
        meta.prime_use = false;
    }

    // A sparse use: the session and use logic of update_slot, the checks of the packet's
    // block, next and flags against the use (a violation changes nothing, as STALE does),
    // and the running min of next with its exponent (the max over the ties).
    action update_sparse() {
        bit<16> last;
        slot_session.read(last, meta.region);
        bit<32> bv0; bit<32> bo0; bit<8> cv0; bit<8> co0; bit<8> ev0; bit<8> wv0; bit<32> uv0;
        bit<32> kv0; bit<32> nv0; bit<32> mv0; bit<32> no; bit<32> mo; bit<32> uo;
        bitmap.read(bv0, meta.ridx);
        bitmap.read(bo0, meta.ridx_other);
        count.read(cv0, meta.ridx);
        count.read(co0, meta.ridx_other);
        max_exp.read(ev0, meta.ridx);
        workers.read(wv0, meta.ridx);
        use.read(uv0, meta.ridx);
        use.read(uo, meta.ridx_other);
        blk.read(kv0, meta.ridx);
        bound.read(nv0, meta.ridx);
        rmin.read(mv0, meta.ridx);
        bound.read(no, meta.ridx_other);
        rmin.read(mo, meta.ridx_other);
        bit<32> bv = bv0; bit<32> bo = bo0; bit<8> cv = cv0; bit<8> co = co0; bit<8> ev = ev0; bit<8> wv = wv0; bit<32> uv = uv0;
        bit<32> kv = kv0; bit<32> nv = nv0; bit<32> mv = mv0;
        bit<16> sv = last;
        if (last != hdr.agg.session) { bv = 0; bo = 0; cv = 0; co = 0; sv = hdr.agg.session; }
        bool current; bool next_use;
        classify_use(bv, uv, bo, uo, co, current, next_use);
        if (next_use) { bv = 0; cv = 0; uv = hdr.agg.chunk; }
        meta.seen = (bv & meta.child_bit) != 0;
        meta.first = !meta.seen && cv == 0;
        bit<8> cn = cv + 1;
        if (meta.seen) { cn = cv; }
        meta.complete = cn == meta.children;

        bool prime = (hdr.agg.flags & FLAG_PRIME) != 0;
        bool empty = (hdr.agg.flags & FLAG_EMPTY) != 0;
        // A prime's block is the bound; a data use's block is the min the previous use
        // (the other version, complete) found, and its bound is carried over.
        if (meta.first) {
            if (prime) {
                kv = hdr.block.block;
                nv = hdr.block.block;
            } else {
                kv = mo;
                nv = no;
            }
        }
        bool prime_use = kv == nv;
        bool bad = false;
        if (!meta.seen) {
            if (prime) {
                // A call's prime opens a slot whose stream is done (or new to the session).
                bad = !empty || hdr.pad.isValid() || !prime_use || hdr.block.block != nv
                      || (meta.first && bo != 0 && mo != NO_BLOCK);
            } else {
                bad = prime_use || hdr.block.block != kv || hdr.block.next <= kv
                      || (meta.first && (bo == 0 || co != meta.children));
            }
            if (hdr.block.next >= nv && hdr.block.next != NO_BLOCK) { bad = true; }
        }
        if (meta.first) {
            mv = hdr.block.next;
            ev = hdr.agg.exp;
            wv = meta.weight;
        } else if (!meta.seen) {
            if (hdr.block.next < mv) {
                mv = hdr.block.next;
                ev = hdr.agg.exp;
            } else if (hdr.block.next == mv && hdr.agg.exp > ev) {
                ev = hdr.agg.exp;
            }
            wv = wv + meta.weight;
        }
        bv = bv | meta.child_bit;
        bool dropped = meta.stale || meta.early;
        meta.bad_block = !dropped && bad;
        // Another child's PRIME set the use's bound and this one names another: the
        // workers disagree (or one PRIME was forged). The sender is told the bound held
        // and the children it came from: only PRIMEs naming it set their bits in this use.
        meta.contradicts = meta.bad_block && prime && !meta.first && prime_use
                           && hdr.block.block != nv;
        meta.held = nv;
        meta.held_by = bv0;
        if (dropped || bad) {
            // Nothing changes: every register is written back as read.
            bv = bv0; bo = bo0; cn = cv0; co = co0; ev = ev0; wv = wv0; uv = uv0; sv = last;
            kv = kv0; nv = nv0; mv = mv0;
        }
        slot_session.write(meta.region, sv);
        bitmap.write(meta.ridx, bv);
        bitmap.write(meta.ridx_other, bo);
        count.write(meta.ridx, cn);
        count.write(meta.ridx_other, co);
        max_exp.write(meta.ridx, ev);
        workers.write(meta.ridx, wv);
        use.write(meta.ridx, uv);
        blk.write(meta.ridx, kv);
        bound.write(meta.ridx, nv);
        rmin.write(meta.ridx, mv);
        meta.exp = ev;
        meta.workers = wv;
        meta.prime_use = prime_use;
        meta.blk = kv;
        meta.rmin = mv;
    }

    action acc_write() { ACC_WRITE }
    action acc_add() { bit<32> acc_t; ACC_ADD }
    action acc_read() { ACC_READ }
    // The first packet of a sparse use is EMPTY: the sum starts at zero.
    action acc_zero() { ACC_ZERO }
    // The sum goes out in an EMPTY packet (its padding, if any, replaced).
    action acc_read_empty() {
        hdr.fixed.setValid();
        hdr.pad.setInvalid();
        ACC_READ
        hdr.agg.encoding = ENC_FIXED32;
    }
    // A prime's result carries no payload (even answering a packet that had one).
    action prime_result() {
        hdr.fixed.setInvalid();
        hdr.cnat.setInvalid();
        hdr.pad.setInvalid();
        hdr.agg.encoding = meta.result_enc;
        hdr.agg.flags = FLAG_PRIME | FLAG_EMPTY;
    }
    // Keeps the re-compressed (rounded) values, so a retransmitted result
    // re-encodes to the very codes the other children received.
    action keep_rounded() {
        DECODE_CNAT
        ACC_WRITE
        hdr.fixed.setInvalid();
    }

#ifdef FOUR_BIT
    // Lane contributions (protocol/encodings.py `lanes`), four elements per register add
    // (no decode): for each lane encoding NAME, lane_write_NAME (the first of a use) and
    // lane_add_NAME, of the macros gen_elements.py writes for it (LANE_WRITE_NAME,
    // LANE_ADD_NAME).
    LANE_ACTIONS
    // The use's sums as SUM8 bytes; meta.ovf nonzero if one is outside 0..255.
    action lane_result() {
        bit<64> ln_t; bit<64> ln_ovf = 0;
        LANE_INPUTS_INVALID
        hdr.sum.setValid();
        LANE_SUM8
        hdr.agg.encoding = ENC_SUM8;
        meta.ovf = ln_ovf & 0xff00ff00ff00ff00;
    }
#endif

    // A contribution sent back to its sender, without payload, its drop reason in `count`
    // (docs/PROTOCOL.md "Refusals"). It is counted among the drops all the same.
    action refuse(bit<8> reason) {
        meta.drop_reason = reason;
        meta.refused = true;
        hdr.agg.msg_type = meta.sparse ? MSG_SPARSE_REFUSED : MSG_REFUSED;
        hdr.agg.count = reason;
        hdr.fixed.setInvalid();
        hdr.cnat.setInvalid();
        hdr.pad.setInvalid();
#ifdef FOUR_BIT
        hdr.nib.setInvalid();
        hdr.uq.setInvalid();
        hdr.sum.setInvalid();
#endif
        sm.egress_spec = sm.ingress_port;
    }

    // The UDP checksum is filled in on the way out (NatComputeChecksum).
    // The UDP length of the packet's headers and payload (docs/PROTOCOL.md "Payload").
    action udp_length() {
#ifdef FOUR_BIT
        bit<16> body = hdr.fixed.isValid() ? FIXED32_BYTES
            : (hdr.cnat.isValid() || hdr.pad.isValid() || hdr.sum.isValid() ? CNAT8_BYTES
               : (hdr.nib.isValid() || hdr.uq.isValid() ? NIB_BYTES : 16w0));
#else
        bit<16> body = hdr.fixed.isValid() ? FIXED32_BYTES
            : (hdr.cnat.isValid() || hdr.pad.isValid() ? CNAT8_BYTES : 16w0);
#endif
        meta.udp_len = 8 + AGG_HDR_BYTES + (hdr.block.isValid() ? BLOCK_HDR_BYTES : 16w0) + body;
    }
    action set_lengths() {
        udp_length();
        hdr.udp.length = meta.udp_len;
        hdr.ipv4.total_len = meta.udp_len + 20;
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
        udp_length();
        if (hdr.udp.length != meta.udp_len) {
            meta.drop_reason = DROP_BAD_LENGTH;
            return;
        }
        integrity.apply(hdr, meta);
        if (meta.drop_reason != DROP_NONE) { return; }
        jobs.apply();
        if (meta.drop_reason != DROP_NONE) { return; }
        // The parser takes a block header for the sparse message types only.
        if (hdr.block.isValid() != meta.sparse) {
            meta.drop_reason = DROP_BAD_TYPE;
            return;
        }

        if (hdr.agg.msg_type == MSG_RESULT || hdr.agg.msg_type == MSG_SPARSE_RESULT) {
            // A result comes down from the parent only, in the job's session.
            if (!meta.is_root && sm.ingress_port == meta.parent_port
                    && hdr.agg.session != meta.session) {
                meta.drop_reason = DROP_WRONG_SESSION;
            } else if (!meta.is_root && sm.ingress_port == meta.parent_port) {
                sm.mcast_grp = meta.grp;
                events.count(EV_RESULT_DOWN);
            } else {
                meta.drop_reason = DROP_BAD_RESULT_PORT;
            }
            return;
        }
        if (hdr.agg.msg_type != MSG_CONTRIB && hdr.agg.msg_type != MSG_SPARSE_CONTRIB) {
            meta.drop_reason = DROP_BAD_TYPE;
            return;
        }
        children.apply();
        if (meta.drop_reason != DROP_NONE) { return; }
        // Only the control plane moves a job to another session.
        if (hdr.agg.session != meta.session) {
            meta.drop_reason = DROP_WRONG_SESSION;
            return;
        }
        if (hdr.agg.exp > meta.max_exp) {
            meta.drop_reason = DROP_BAD_EXP;
            return;
        }
        if (hdr.agg.version > 1) {
            meta.drop_reason = DROP_BAD_VERSION;
            return;
        }
#if 3 * ELEMS > MAX_GROWTH
        // A FIXED32 result or partial sum written into a packet of ELEMS bytes (CNAT8, or
        // a sparse EMPTY packet's padding) would grow it more than BMv2 can.
        if ((hdr.cnat.isValid() || hdr.pad.isValid()) && meta.result_enc != ENC_CNAT8) {
            meta.drop_reason = DROP_TOO_WIDE;
            return;
        }
#endif
#ifdef FOUR_BIT
        // A FIXED32 sum written into a 4-bit packet grows it by 3.5 bytes per element.
        if ((hdr.nib.isValid() || hdr.uq.isValid()) && meta.result_enc == ENC_FIXED32) {
            meta.drop_reason = DROP_TOO_WIDE;
            return;
        }
        // The lane encodings are summed in lanes of their own, which only SUM8 results are
        // read from: a job with SUM8 results takes nothing else, the others none of them.
        bool lanes = LANE_VALID;
        if (lanes != (meta.result_enc == ENC_SUM8)) {
            meta.drop_reason = DROP_BAD_ENCODING;
            return;
        }
#endif
        locate();
        if (hdr.agg.slot >= meta.num_slots || meta.region >= POOL_SIZE) {
            meta.drop_reason = DROP_BAD_SLOT;
            return;
        }

        // Dense and sparse uses share every call of an action below: p4c copies an action
        // for each place it is called from, and the payload's actions are large.
        if (hdr.cnat.isValid() && hdr.agg.encoding == ENC_CNAT8) { decode.apply(hdr); }
#ifdef FOUR_BIT
        else if (hdr.nib.isValid()) {
            decode_nat4.apply(hdr, meta);
            if (meta.bad_code >= 0x80) {
                meta.drop_reason = DROP_BAD_CODE;
                return;
            }
        }
#endif
        if (hdr.fixed.isValid()) {
            bounds.apply(hdr, meta);
            if (meta.out_of_range) {
                refuse(DROP_OUT_OF_RANGE);
                set_lengths();
                return;
            }
        }
        // Sparse (docs/PROTOCOL.md "Sparse jobs"): an EMPTY packet brings padding to hold
        // the sum where BMv2 cannot grow it by the sum's bytes: 4 * ELEMS (FIXED32 results),
        // and in the wide profile ELEMS too (CNAT8 results).
        bool empty = meta.sparse && (hdr.agg.flags & FLAG_EMPTY) != 0;
#if ELEMS > MAX_GROWTH
        bool too_small = empty && !hdr.pad.isValid();
#else
        bool too_small = empty && !hdr.pad.isValid() && meta.result_enc == ENC_FIXED32;
#endif
        if (meta.sparse) {
            if (too_small && (hdr.agg.flags & FLAG_PRIME) == 0) {
                meta.drop_reason = DROP_BAD_LENGTH;
                return;
            }
            update_sparse();
        } else {
            update_slot();
        }
        if (meta.stale) {
            meta.drop_reason = DROP_STALE;
            return;
        }
        if (meta.early) {
            meta.drop_reason = DROP_EARLY;
            return;
        }
        if (meta.contradicts) {
            hdr.block.block = meta.held;
            hdr.block.next = meta.held_by;
            refuse(DROP_BAD_BLOCK);
            set_lengths();
            return;
        }
        if (meta.bad_block) {
            meta.drop_reason = DROP_BAD_BLOCK;
            return;
        }
        if (too_small && meta.seen && meta.complete && !meta.prime_use) {
            // A prime sent again into its data use: a seen packet changed nothing.
            meta.drop_reason = DROP_BAD_LENGTH;
            return;
        }
        // A prime use (sparse) has no sum; an EMPTY packet adds nothing, or zeros first.
        if (!meta.seen) {
            events.count(EV_CONTRIB);
            if (!meta.prime_use) {
#ifdef FOUR_BIT
                LANE_APPLY
                // (A lane contribution, protocol/encodings.py `lanes`: the lane action of
                // its header, lane_write_NAME for the first of the use and lane_add_NAME
                // after it, one `if (...) {...} else` a lane encoding (gen_elements.py);
                // else the other payloads:)
#endif
                if (!empty) {
                    if (meta.first) { acc_write(); } else { acc_add(); }
                } else if (meta.first) {
                    acc_zero();
                }
            }
        } else if (meta.complete) {
#ifdef FOUR_BIT
            // (SUM8 results are read from the lanes below.)
            if (!meta.prime_use && !empty && !lanes) { acc_read(); }
#else
            if (!meta.prime_use && !empty) { acc_read(); }
#endif
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
        if (meta.sparse) {
            hdr.block.block = meta.blk;
            hdr.block.next = meta.rmin;
            if (meta.prime_use) {
                prime_result();
            } else if (empty) {
                acc_read_empty();
            }
        }
        if (!meta.prime_use && meta.result_enc == ENC_CNAT8) {
            recompress.apply(hdr, meta);
            // Dropped, never sent wrong: the raw sums stay, so every answer is dropped too.
            if (meta.sum_ovf) {
                meta.drop_reason = DROP_SUM_OVERFLOW;
                return;
            }
            keep_rounded();
        }
#ifdef FOUR_BIT
        else if (!meta.prime_use && meta.result_enc == ENC_SUM8) {
            // Exact: a sum a byte cannot carry is dropped, never sent wrong.
            lane_result();
            if (meta.ovf != 0) {
                meta.drop_reason = DROP_SUM_OVERFLOW;
                return;
            }
        }
#endif
        if (meta.is_root) {
            hdr.agg.msg_type = meta.sparse ? MSG_SPARSE_RESULT : MSG_RESULT;
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
