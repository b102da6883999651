#ifndef NATSWITCH_ESUM_TNA_P4
#define NATSWITCH_ESUM_TNA_P4

#if PASSES > 1
// The walk's sums (passes_tna.p4): a 32-bit register per element, so that every pass
// returns its segment's sums at once (Tofino 1's stateful ALUs return one word; pair
// registers would take a pass per lane), each segment at cells of its own.
// ELEM_SUM(NAME, STAGE) defines the control NAME whose table sits in STAGE (gen_tna.py
// spreads them four to a stage, as the pair registers).
#define ELEM_SUM(NAME, STAGE) \
control NAME(inout bit<32> x, in tna_headers_t hdr, in ig_meta_t meta) { \
    Register<bit<32>, bit<16>>(SLOT_REGS * PASSES) acc; \
    RegisterAction<bit<32>, bit<16>, bit<32>>(acc) put = { \
        void apply(inout bit<32> v, out bit<32> rv) { v = x; rv = v; } \
    }; \
    RegisterAction<bit<32>, bit<16>, bit<32>>(acc) add = { \
        void apply(inout bit<32> v, out bit<32> rv) { v = v + x; rv = v; } \
    }; \
    RegisterAction<bit<32>, bit<16>, bit<32>>(acc) get = { \
        void apply(inout bit<32> v, out bit<32> rv) { rv = v; } \
    }; \
    action do_put() { x = put.execute(meta.ridx); } \
    action do_add() { x = add.execute(meta.ridx); } \
    action do_get() { x = get.execute(meta.ridx); } \
    ESUM_TABLE(@stage(STAGE)) \
    apply { sum.apply(); } \
}

ESUM_TYPES
#endif

#endif
