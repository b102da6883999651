#ifndef NATSWITCH_PAIRSUM_TNA_P4
#define NATSWITCH_PAIRSUM_TNA_P4

struct pair32_t {
    bit<32> lo;
    bit<32> hi;
}

// Two int32 elements in one 64-bit register, updated by one RegisterAction (SwitchML's
// pair registers). Tofino 1 returns one word: the second lane's sum goes out in the
// first pass, the first lane's is read in a second pass (meta.pass2). Tofino 2 returns
// both at once.
// PAIR_SUM(NAME, STAGE) defines the control NAME whose table sits in STAGE: the generator
// spreads the pairs four to a stage (four stateful ALUs), from the first stage the slot's
// flags reach (gen_tna.py).
#ifdef LO_LANE_PASS
#define PAIR_SUM(NAME, STAGE) \
control NAME(inout bit<32> a, inout bit<32> b, in ig_meta_t meta) { \
 \
    Register<pair32_t, bit<16>>(SLOT_REGS) acc; \
    RegisterAction<pair32_t, bit<16>, bit<32>>(acc) put = { \
        void apply(inout pair32_t v, out bit<32> rv) { v.lo = a; v.hi = b; rv = v.hi; } \
    }; \
    RegisterAction<pair32_t, bit<16>, bit<32>>(acc) add = { \
        void apply(inout pair32_t v, out bit<32> rv) { \
            v.lo = v.lo + a; v.hi = v.hi + b; rv = v.hi; \
        } \
    }; \
    RegisterAction<pair32_t, bit<16>, bit<32>>(acc) get_hi = { \
        void apply(inout pair32_t v, out bit<32> rv) { rv = v.hi; } \
    }; \
    RegisterAction<pair32_t, bit<16>, bit<32>>(acc) get_lo = { \
        void apply(inout pair32_t v, out bit<32> rv) { rv = v.lo; } \
    }; \
    action do_put() { b = put.execute(meta.ridx); } \
    action do_add() { b = add.execute(meta.ridx); } \
    action do_get_hi() { b = get_hi.execute(meta.ridx); } \
    action do_get_lo() { a = get_lo.execute(meta.ridx); } \
    /* One table per register, as SwitchML's: the flags pick the register action. */ \
    @stage(STAGE) table sum { \
        key = { meta.pass2: exact; meta.live: exact; meta.first: exact; meta.bm_seen: ternary; } \
        actions = { do_put; do_add; do_get_hi; do_get_lo; NoAction; } \
        const entries = { \
            (true, false, false, _): do_get_lo(); \
            (false, true, true, _): do_put(); \
            (false, true, false, 0): do_add(); \
            (false, true, false, _): do_get_hi(); \
        } \
        default_action = NoAction(); \
        size = 4; \
    } \
    apply { sum.apply(); } \
}
#else
#define PAIR_SUM(NAME, STAGE) \
control NAME(inout bit<32> a, inout bit<32> b, in ig_meta_t meta) { \
 \
    Register<pair32_t, bit<16>>(SLOT_REGS) acc; \
    RegisterAction<pair32_t, bit<16>, bit<32>>(acc) put = { \
        void apply(inout pair32_t v, out bit<32> rv, out bit<32> rv2) { \
            v.lo = a; v.hi = b; rv = v.lo; rv2 = v.hi; \
        } \
    }; \
    RegisterAction<pair32_t, bit<16>, bit<32>>(acc) add = { \
        void apply(inout pair32_t v, out bit<32> rv, out bit<32> rv2) { \
            v.lo = v.lo + a; v.hi = v.hi + b; rv = v.lo; rv2 = v.hi; \
        } \
    }; \
    RegisterAction<pair32_t, bit<16>, bit<32>>(acc) get = { \
        void apply(inout pair32_t v, out bit<32> rv, out bit<32> rv2) { \
            rv = v.lo; rv2 = v.hi; \
        } \
    }; \
    action do_put() { a = put.execute(meta.ridx, b); } \
    action do_add() { a = add.execute(meta.ridx, b); } \
    action do_get() { a = get.execute(meta.ridx, b); } \
    @stage(STAGE) table sum { \
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
#endif

#if PASSES == 1
PAIR_TYPES
#endif

#endif
