#ifndef NATSWITCH_CODEC_SHARED_TNA_P4
#define NATSWITCH_CODEC_SHARED_TNA_P4

// The codec's tables, written once for the TNA program (codec_tna.p4) and its v1model twin
// (p4src/twin/codec_twin.p4). Their rows are gen_tna.py's: the TNA program compiles them
// in as constants, the twin's controller installs them over P4Runtime (controller/twin.py).
// Each defines before using them CODEC_ROWS(ENTRIES, DEFAULT), a table's rows (the
// constants ENTRIES, or the default action DEFAULT until the controller's come), and
// CODEC_NO_ACTION, the action a table without rows takes.

// CNAT8 code -> int32 by an exact-match table (no variable shift on Tofino): the values
// the v1model program's 1 << (m - 1) gives, fixed by the protocol (gen_tna.py).
#define CODEC_DECODE \
control DecodeCode(in bit<8> code, inout bit<32> v) { \
    action value(bit<32> x) { v = x; } \
    table decode { \
        key = { code: exact; } \
        actions = { value; CODEC_NO_ACTION } \
        CODEC_ROWS(DECODE_ENTRIES, NoAction()) \
        size = 256; \
    } \
    apply { decode.apply(); } \
}

// int32 sum s -> CNAT8 code with randomized rounding, unbiased: |s| in [2^p, 2^(p+1)) is
// rounded up to 2^(p+1) when |s| + r >= 2^(p+1), r uniform on [0, 2^p), i.e. with
// probability (|s| - 2^p) / 2^p. RoundCode finds p by a ternary match, masks the random
// bits r to p bits, makes s its magnitude and c its sign; the egress adds r to s for all
// elements at once; CodeOf finds the leading one q of the sum: the code is q + 1.
#define CODEC_ROUND \
control RoundCode(inout bit<32> s, inout bit<32> r, out bit<8> c) { \
    action pos(bit<32> mask) { r = r & mask; c = 0; } \
    action neg(bit<32> mask) { s = 0 - s; r = r & mask; c = 0x80; } \
    action zero() { r = 0; c = 0; } \
    table lead { \
        key = { s: ternary; } \
        actions = { pos; neg; zero; } \
        CODEC_ROWS(ROUND_ENTRIES, zero()) \
        size = 96; \
    } \
    apply { lead.apply(); } \
} \
 \
control CodeOf(in bit<32> s, inout bit<8> c) { \
    action code(bit<8> m) { c = c | m; } \
    table lead { \
        key = { s: ternary; } \
        actions = { code; CODEC_NO_ACTION } \
        CODEC_ROWS(CODE_ENTRIES, NoAction()) \
        size = 33; \
    } \
    apply { lead.apply(); } \
}

#endif
