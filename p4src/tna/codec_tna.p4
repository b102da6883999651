#ifndef NATSWITCH_CODEC_TNA_P4
#define NATSWITCH_CODEC_TNA_P4

// CNAT8 code -> int32 by an exact-match table (no variable shift on Tofino): the values
// the v1model program's 1 << (m - 1) gives, fixed by the protocol (gen_tna.py).
control DecodeCode(in bit<8> code, inout bit<32> v) {
    action value(bit<32> x) { v = x; }
    table decode {
        key = { code: exact; }
        actions = { value; }
        const entries = { DECODE_ENTRIES }
        size = 256;
    }
    apply { decode.apply(); }
}

// int32 sum s -> CNAT8 code with randomized rounding, unbiased: |s| in [2^p, 2^(p+1)) is
// rounded up to 2^(p+1) when |s| + r >= 2^(p+1), r uniform on [0, 2^p), i.e. with
// probability (|s| - 2^p) / 2^p. RoundCode finds p by a ternary match, masks the random
// bits r to p bits, makes s its magnitude and c its sign; the egress adds r to s for all
// elements at once; CodeOf finds the leading one q of the sum: the code is q + 1.
control RoundCode(inout bit<32> s, inout bit<32> r, out bit<8> c) {
    action pos(bit<32> mask) { r = r & mask; c = 0; }
    action neg(bit<32> mask) { s = 0 - s; r = r & mask; c = 0x80; }
    action zero() { r = 0; c = 0; }
    table lead {
        key = { s: ternary; }
        actions = { pos; neg; zero; }
        const entries = { ROUND_ENTRIES }
        size = 96;
    }
    apply { lead.apply(); }
}

control CodeOf(in bit<32> s, inout bit<8> c) {
    action code(bit<8> m) { c = c | m; }
    table lead {
        key = { s: ternary; }
        actions = { code; }
        const entries = { CODE_ENTRIES }
        size = 33;
    }
    apply { lead.apply(); }
}

// The random bits of element i: a hash of the job's seed and the use's identity
// (DESIGN contract 10), one CRC polynomial per element (gen_tna.py). Not the session: a
// rerun of the seed, in a new session, rounds alike (the job's entry moves sessions).
// A packet of several segments rounds each with its index in the key: element i of every
// segment has its own bits.
#if PASSES > 1
#define ROUND_KEY hdr.walk.seed, hdr.agg.job_id, hdr.agg.chunk, hdr.bridge.seg
#else
#define ROUND_KEY hdr.bridge.seed, hdr.agg.job_id, hdr.agg.chunk
#endif

#endif
