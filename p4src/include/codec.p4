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
// no encoder sends. (UQ4 and SUM8 are never decoded: aggregation.p4 adds them in lanes.)
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
// Compile with p4c's LocalCopyPropagation excluded (P4C_FLAGS in build_tools.py): it
// substitutes each `x = x | (x >> k)` into the next, doubling the
// expression at every step.
control Recompress(inout headers_t hdr) {
    action recompress() {
        bit<32> rc_s; bit<32> rc_a; bit<32> rc_x; bit<32> rc_mag; bit<32> rc_r; bit<32> rc_up;
        hdr.cnat.setValid();
        RECOMPRESS
        hdr.agg.encoding = ENC_CNAT8;
    }
    apply { recompress(); }
}

#endif
