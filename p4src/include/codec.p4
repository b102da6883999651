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
// The 4-bit and byte encodings to FIXED32 (docs/PROTOCOL.md "Payload"): a NAT4 nibble's
// level m becomes +-(1 << (m-1)) as a CNAT8 code does (meta.bad_code says whether a nibble
// was 0x8, which no encoder sends); UQ4 integers and SUM8 sums are added as they are.
control DecodeSmall(inout headers_t hdr, inout metadata_t meta) {
    action decode_nat4() {
        bit<8> nb_bad = 0;
        hdr.fixed.setValid();
        DECODE_NAT4
        hdr.nib.setInvalid();
        hdr.agg.encoding = ENC_FIXED32;
        meta.bad_code = nb_bad;
    }
    action decode_uq4() {
        hdr.fixed.setValid();
        DECODE_UQ4
        hdr.nib.setInvalid();
        hdr.agg.encoding = ENC_FIXED32;
    }
    action decode_sum8() {
        hdr.fixed.setValid();
        DECODE_SUM8
        hdr.cnat.setInvalid();
        hdr.agg.encoding = ENC_FIXED32;
    }
    apply {
        if (hdr.agg.encoding == ENC_NAT4) {
            decode_nat4();
        } else if (hdr.agg.encoding == ENC_UQ4) {
            decode_uq4();
        } else {
            decode_sum8();
        }
    }
}

// FIXED32 sums -> SUM8 bytes; meta.ovf is nonzero if a sum is outside 0..255 (the caller
// drops the packet: a byte cannot carry it).
control EncodeSum8(inout headers_t hdr, inout metadata_t meta) {
    action encode_sum8() {
        bit<32> ovf = 0;
        hdr.cnat.setValid();
        ENCODE_SUM8
        hdr.fixed.setInvalid();
        hdr.agg.encoding = ENC_SUM8;
        meta.ovf = ovf;
    }
    apply { encode_sum8(); }
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
