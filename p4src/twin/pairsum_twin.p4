#ifndef NATSWITCH_PAIRSUM_TWIN_P4
#define NATSWITCH_PAIRSUM_TWIN_P4

// p4src/tna/pairsum_tna.p4's pair registers in their Tofino 2 form: two int32 lanes in
// one 64-bit register (first element low), written, added or read by the same table and
// entries, both lanes returned in one pass. STAGE is the TNA program's placement; v1model
// has none.
#define PAIR_SUM(NAME, STAGE) \
control NAME(inout bit<32> a, inout bit<32> b, in ig_meta_t meta) { \
    register<bit<64>>(SLOT_REGS) acc; \
    action do_put() { acc.write((bit<32>)meta.ridx, b ++ a); } \
    action do_add() { \
        bit<64> v; \
        acc.read(v, (bit<32>)meta.ridx); \
        a = v[31:0] + a; \
        b = v[63:32] + b; \
        acc.write((bit<32>)meta.ridx, b ++ a); \
    } \
    action do_get() { \
        bit<64> v; \
        acc.read(v, (bit<32>)meta.ridx); \
        a = v[31:0]; \
        b = v[63:32]; \
    } \
    table sum { \
        key = { meta.live: exact; meta.first: exact; meta.bm_seen: ternary; } \
        actions = { do_put; do_add; do_get; NoAction; } \
        const entries = { \
            (true, true, _): do_put(); \
            (true, false, 0): do_add(); \
            (true, false, _): do_get(); \
        } \
        default_action = NoAction(); \
        size = 4; \
    } \
    apply { sum.apply(); } \
}

PAIR_TYPES

// Every pair register, as the TNA ingress applies them.
control PairSums(inout tna_headers_t hdr, in ig_meta_t meta) {
    PAIR_DECLS
    apply { PAIR_APPLY }
}

#endif
