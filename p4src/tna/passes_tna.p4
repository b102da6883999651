#ifndef NATSWITCH_PASSES_TNA_P4
#define NATSWITCH_PASSES_TNA_P4

#if PASSES > 1
// A packet of PASSES segments (docs/PROTOCOL.md "Tofino profile", "Passes"), SwitchML's
// walk through the pipes: the first pass runs the slot's checks and sums segment 0; each
// later pass, entered through a port in loopback mode, sums the next segment into the
// registers of the pipe that port is in, at the segment's own cells (the walk header
// carries the first pass's decisions and the index); the packet
// that completes a use then reads the sums back one segment a pass, last segment first,
// and the egress of each of those passes re-compresses its segment in front of the codes
// already harvested, so the last pass sends segments 0..PASSES-1 in order. A pass
// consumes the segment it sums: only the first ELEMS codes are ever parsed.
const bit<2> OP_PUT = 1;
const bit<2> OP_ADD = 2;
const bit<2> OP_GET = 3;
const bit<2> OUT_NONE = 0;      // a contribution to a use still open: absorbed at the end
const bit<2> OUT_MCAST = 1;
const bit<2> OUT_UCAST = 2;

// The table that picks an element register's action (esum_tna.p4 and the twin's
// esum_twin.p4 declare the registers and actions around it, and where it sits): the first
// pass from the slot's flags, a later one from the walk header.
#define ESUM_TABLE(AT) \
    AT table sum { \
        key = { meta.walking: exact; hdr.walk.op: ternary; meta.live: exact; \
                meta.first: exact; meta.bm_seen: ternary; } \
        actions = { do_put; do_add; do_get; NoAction; } \
        const entries = { \
            (false, _, true, true, _): do_put(); \
            (false, _, true, false, 0): do_add(); \
            (false, _, true, false, _): do_get(); \
            (true, OP_PUT, false, false, _): do_put(); \
            (true, OP_ADD, false, false, _): do_add(); \
            (true, OP_GET, false, false, _): do_get(); \
        } \
        default_action = NoAction(); \
        size = 8; \
    }

// The step after a pass: on to the next segment, the harvest, or out. WALK_ENTRIES are the
// const entries for PASSES (gen_tna.py); the port of each pass comes from `loops`, which
// the control plane fills with a loopback port of the pipe that sums the segment.
control WalkStep(inout tna_headers_t hdr, inout ig_meta_t meta, IG_INTR) {
    // The first pass: the action its later passes take on the registers.
    action op(bit<2> o) { hdr.walk.op = o; }
    table op_of {
        key = { meta.first: exact; meta.bm_seen: ternary; }
        actions = { op; }
        const entries = {
            (true, _): op(OP_PUT);
            (false, 0): op(OP_ADD);
            (false, _): op(OP_GET);
        }
        default_action = op(OP_GET);
        size = 4;
    }

    // Segment k's cells are SLOT_REGS after segment k - 1's.
    action consume(bit<3> seg) {
        hdr.walk.seg = seg;
        hdr.walk.ridx = hdr.walk.ridx + SLOT_REGS;
        hdr.cnat.setInvalid();
        hdr.fixed.setInvalid();
        hdr.bridge.to_recirc = 1;
    }
    action absorb() { DROP_PACKET(); }
    // This pass's sums (segment `read`) go to the egress to be re-compressed.
    action harvest(bit<3> seg, bit<3> read) {
        hdr.walk.harvest = 1;
        hdr.walk.op = OP_GET;
        hdr.walk.seg = seg;
        hdr.walk.ridx = hdr.walk.ridx - SLOT_REGS;
        hdr.cnat.setInvalid();
        hdr.fixed.setValid();
        hdr.bridge.to_recirc = 1;
        hdr.bridge.is_agg = 1;
        hdr.bridge.recompress = 1;
        hdr.bridge.seg = read;
        hdr.bridge.walked = 1;
    }
    // The last pass reads segment 0; the egress re-compresses it and drops the walk.
    action leave() {
        hdr.fixed.setValid();
        hdr.bridge.is_agg = 1;
        hdr.bridge.recompress = 1;
        hdr.bridge.seg = 0;
        hdr.bridge.walked = 1;
    }
    action out_mcast() {
        leave();
        TO_GROUP(hdr.walk.to);
    }
    action out_ucast() {
        leave();
        TO_PORT(hdr.walk.to);
    }
    table walk_step {
        key = { hdr.walk.harvest: exact; hdr.walk.seg: exact; hdr.walk.dest: ternary; }
        actions = { consume; absorb; harvest; out_mcast; out_ucast; NoAction; }
        const entries = { WALK_ENTRIES }
        default_action = NoAction();
        size = 64;
    }

    action loop(bit<9> port) { TO_PORT(port); }
    action no_loop() { meta.drop_reason = DROP_NO_ROUTE; }
    table loops {
        key = { hdr.walk.seg: exact; }
        actions = { loop; @defaultonly no_loop; }
        default_action = no_loop();
        size = PASSES;
    }

    apply {
        if (!meta.walking) {
            op_of.apply();
        }
        walk_step.apply();
        if (hdr.bridge.to_recirc == 1) {
            loops.apply();
        }
    }
}
#endif

#endif
