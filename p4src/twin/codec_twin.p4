#ifndef NATSWITCH_CODEC_TWIN_P4
#define NATSWITCH_CODEC_TWIN_P4

// p4src/tna/codec_shared_tna.p4's tables, their entries installed by the controller over
// P4Runtime (controller/twin.py, from p4src/tna/gen_tna.py's rows: the TNA program
// compiles the same rows in as constants).
#define CODEC_ROWS(ENTRIES, DEFAULT) default_action = DEFAULT;
#define CODEC_NO_ACTION NoAction;
#include "../tna/codec_shared_tna.p4"

CODEC_DECODE
CODEC_ROUND

// The random bits of element i: v1model's hash has one CRC-32, so the element's index
// joins the key where the TNA program gives each element a polynomial of its own. Not the
// session, as there: a rerun of the seed in a new session rounds alike.
// A packet of several segments has the segment in the key too, and the seed in its walk
// header (p4src/tna/codec_tna.p4).
#if PASSES > 1
#define ROUND_KEY hdr.walk.seed, hdr.agg.job_id, hdr.agg.chunk, (bit<8>)hdr.bridge.seg
#else
#define ROUND_KEY hdr.bridge.seed, hdr.agg.job_id, hdr.agg.chunk
#endif

// The FIXED32 sums to CNAT8 codes, every element at once (p4src/tna/agg_tna.p4's egress).
control Recompress(inout tna_headers_t hdr, inout eg_meta_t meta) {
    ROUND_DECLS_TWIN
    CODE_DECLS
    action add_random() { ROUND_ADD }
    apply {
        hdr.cnat.setValid();
        DRAW_TWIN
#if PASSES > 1
        MIX_TWIN
#endif
        ROUND_LEAD
        add_random();
        ROUND_CODE
        hdr.fixed.setInvalid();
        hdr.agg.encoding = ENC_CNAT8;
#if PASSES > 1
        hdr.udp.length = UDP_LEN_PACKET;
        hdr.ipv4.total_len = UDP_LEN_PACKET + 20;
#else
        hdr.udp.length = UDP_LEN_CNAT8;
        hdr.ipv4.total_len = UDP_LEN_CNAT8 + 20;
#endif
    }
}

#endif
