#ifndef NATSWITCH_CODEC_TNA_P4
#define NATSWITCH_CODEC_TNA_P4

// CNAT8 code -> int32 by an exact-match table (no variable shift on Tofino): the values
// the v1model program's 1 << (m - 1) gives, fixed by the protocol (gen_tna.py).
control DecodeCode(in bit<8> code, out bit<32> v) {
    action value(bit<32> x) { v = x; }
    table decode {
        key = { code: exact; }
        actions = { value; }
        const entries = { DECODE_ENTRIES }
        size = 256;
    }
    apply { decode.apply(); }
}

// int32 sum s -> CNAT8 code with randomized rounding. A ternary match finds the leading
// one p of |s|; s is rounded up to 2^(p+1) when r >= 2^(p+1) - |s|, r uniform on
// [0, 2^p) (the hash bits h under the mask), i.e. with probability (|s| - 2^p) / 2^p:
// unbiased. s is overwritten (it becomes 2^(p+1) - |s|, then the borrow).
control RoundCode(inout bit<32> s, in bit<32> h, out bit<8> c) {
    bit<32> r;
    bit<8> k;
    action pos(bit<32> top, bit<32> mask, bit<8> up) { s = top - s; r = h & mask; k = up; }
    action neg(bit<32> top, bit<32> mask, bit<8> up) { s = top + s; r = h & mask; k = up; }
    action zero() { s = 0; r = 0; k = 0; }
    table lead {
        key = { s: ternary; }
        actions = { pos; neg; zero; }
        const entries = { ROUND_ENTRIES }
        size = 96;
    }
    apply {
        lead.apply();
        s = r - s;          // negative: no rounding up
        s = s >> 31;
        c = k - (bit<8>)s;
    }
}

// The random bits of element i: a hash of the job's seed and the use's identity
// (DESIGN contract 10), one CRC polynomial per element (gen_tna.py).
#define ROUND_KEY hdr.bridge.seed, hdr.agg.job_id, hdr.agg.session, hdr.agg.chunk

#endif
