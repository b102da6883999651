#ifndef NATSWITCH_ESUM_TWIN_P4
#define NATSWITCH_ESUM_TWIN_P4

#if PASSES > 1
// p4src/tna/esum_tna.p4's element registers on v1model registers, read and written once
// per pass as a RegisterAction would; the same table and entries (passes_tna.p4). STAGE is
// the TNA program's placement; v1model has none.
#define ELEM_SUM(NAME, STAGE) \
control NAME(inout bit<32> x, in tna_headers_t hdr, in ig_meta_t meta) { \
    register<bit<32>>(SLOT_REGS * PASSES) acc; \
    action do_put() { acc.write((bit<32>)meta.ridx, x); } \
    action do_add() { \
        bit<32> v; \
        acc.read(v, (bit<32>)meta.ridx); \
        x = v + x; \
        acc.write((bit<32>)meta.ridx, x); \
    } \
    action do_get() { acc.read(x, (bit<32>)meta.ridx); } \
    ESUM_TABLE() \
    apply { sum.apply(); } \
}

ESUM_TYPES

// Every element register, as the TNA ingress applies them.
control ElemSums(inout tna_headers_t hdr, in ig_meta_t meta) {
    ESUM_DECLS
    apply { ESUM_APPLY }
}
#endif

#endif
