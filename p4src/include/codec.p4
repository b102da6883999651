#ifndef NATSWITCH_CODEC_P4
#define NATSWITCH_CODEC_P4

// Conversions between the wire encodings and int32 values; no state.

// CNAT8 payload -> FIXED32 payload: code m becomes +-(1 << (m-1)).
control DecodeCnat(inout headers_t hdr) {
    action decode_cnat() {
        hdr.fixed.setValid();
        DECODE_CNAT
        hdr.cnat.setInvalid();
        hdr.agg.encoding = ENC_FIXED32;
    }
    apply { decode_cnat(); }
}

#ifdef FOUR_BIT
// NAT4 payload -> FIXED32 payload (docs/PROTOCOL.md "Payload"): a nibble's level m becomes
// +-(1 << (m-1)) as a CNAT8 code does; meta.bad_code says whether a nibble was 0x8, which
// no encoder sends. (Lane encodings are never decoded: aggregation.p4 sums them in lanes.)
control DecodeNat4(inout headers_t hdr, inout metadata_t meta) {
    action decode_nat4() {
        bit<8> nb_bad = 0;
        hdr.fixed.setValid();
        DECODE_NAT4
        hdr.nib.setInvalid();
        hdr.agg.encoding = ENC_FIXED32;
        meta.bad_code = nb_bad;
    }
    apply { decode_nat4(); }
}
#endif

// FIXED32 payload -> CNAT8 codes, randomized rounding to a power of two.
// The FIXED32 header stays valid: the caller stores the rounded values.
// The rounding bits come from a seed per packet, a hash of this switch's key for the job
// (controller/aggregation.py) and the chunk, then of each element's index (gen_elements.py
// RECOMPRESS): a rerun rounds every sum alike, whatever order packets come in (DESIGN
// contract 10). Not the session: the control plane picks it from the clock. meta.sum_ovf: a sum above 2^30 units, whose code no
// worker can read back (docs/PROTOCOL.md "Payload").
// Compile with p4c's LocalCopyPropagation excluded (P4C_FLAGS in build_tools.py): it
// substitutes each `x = x | (x >> k)` into the next, doubling the
// expression at every step.
control Recompress(inout headers_t hdr, inout metadata_t meta) {
    action recompress() {
        bit<32> rc_s; bit<32> rc_a; bit<32> rc_x; bit<32> rc_mag; bit<32> rc_r; bit<32> rc_up;
        bit<32> rc_ovf = 0;
        bit<32> rc_k = meta.round_key ^ hdr.agg.chunk;
        rc_k = rc_k ^ (rc_k >> 16); rc_k = rc_k * 0x85ebca6b; rc_k = rc_k ^ (rc_k >> 13);
        rc_k = rc_k * 0xc2b2ae35; rc_k = rc_k ^ (rc_k >> 16);
        hdr.cnat.setValid();
        RECOMPRESS
        hdr.agg.encoding = ENC_CNAT8;
        meta.sum_ovf = rc_ovf != 0;
    }
    apply { recompress(); }
}

// Every element of a contribution (FIXED32, or decoded) within the bound of the port it
// came from: the controller installs it so that the sums of a correct job never pass 2^30
// units; anything above is a misconfigured or corrupt sender, refused before its slot.
control RangeCheck(in headers_t hdr, inout metadata_t meta) {
    action check_range() {
        bit<32> rg_bad = 0;
        bit<32> rg_2m = meta.max_mag << 1;
        RANGE
        meta.out_of_range = rg_bad != 0;
    }
    apply { check_range(); }
}

#endif
