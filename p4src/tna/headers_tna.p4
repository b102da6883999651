#ifndef NATSWITCH_HEADERS_TNA_P4
#define NATSWITCH_HEADERS_TNA_P4

// The wire headers are the v1model program's (p4src/include/headers.p4, read-only); the
// payload field macros it expects come from elements_tna.p4 for this ELEMS.
#include "elements_tna.p4"
#define NATSWITCH_ELEMENTS_P4
#define FOUR_BIT 1
#include "../include/constants.p4"
#include "../include/headers.p4"

// UDP_LEN_NAME of each lane encoding (elements_tna.p4, from protocol/encodings.py).
LANE_UDP_LENS

// Between passes (Tofino 1): the slot's register index and what to do with the result.
// It rides in front of the Ethernet header, on the recirculation port only.
header recirc_h {
    bit<16> ridx;
    bit<16> grp;
    bit<16> port;       // unicast port when grp is 0
    // The bridge's first byte for the second pass, bit for bit: Tofino copies it from one
    // source (a byte of constants and a copied field would be two).
    bit<2>  recompress;
    bit<1>  to_recirc;
    bit<1>  is_agg;
    bit<4>  flags_pad;
    bit<8>  pad;
    bit<32> seed;
}

// Ingress to egress: what the egress does to the packet. Five bytes: on Tofino 1 the
// egress parser reads at most 160 bytes, this header and the sums it narrows included.
// The walk's (PASSES > 1) is one byte: its seed rides in the walk header, which the egress
// parses in front of the sums it re-compresses.
header bridge_h {
    bit<2>  recompress;     // 1: re-compress the FIXED32 sums to CNAT8; 2: narrow the lanes
                            // to SUM8
    bit<1>  to_recirc;      // leaving for a second pass: untouched
    bit<1>  is_agg;         // an aggregation packet (a result, a partial sum)
#if PASSES > 1
    bit<3>  seg;            // the segment whose sums the egress re-compresses
    bit<1>  walked;         // the walk header is in front of the Ethernet header
#else
    bit<4>  pad;
    bit<32> seed;           // the job's seed (DESIGN contract 10)
#endif
}

#if PASSES > 1
#if PASSES > 8
#error "PASSES: at most 8 (the walk's segment is 3 bits)"
#endif
const bit<16> UDP_LEN_PACKET = 8 + AGG_HDR_BYTES + PASSES * ELEMS;

// Between the passes of one packet (passes_tna.p4), in front of the Ethernet header on the
// loopback ports only: the slot's decisions, made once in the first pass. Nine bytes, for
// Tofino 1's egress parser (above).
header walk_h {
    bit<16> ridx;           // the register index of this pass's segment
    bit<3>  seg;            // the segment this pass sums (or reads, harvesting)
    bit<2>  op;             // OP_PUT, OP_ADD or OP_GET on the segment's registers
    bit<1>  harvest;        // 1: the sums are read back, one segment a pass, last first
    bit<2>  dest;           // where the result goes once harvested (OUT_*)
    bit<16> to;             // its multicast group (OUT_MCAST) or port (OUT_UCAST)
    bit<32> seed;           // the job's seed (DESIGN contract 10)
}
#endif

struct tna_headers_t {
    bridge_h   bridge;
    recirc_h   recirc;
#if PASSES > 1
    walk_h     walk;
#endif
    ethernet_h eth;
    ipv4_h     ipv4;
    udp_h      udp;
    agg_h      agg;
    fixed_h    fixed;
    cnat_h     cnat;
    // hdr.NAME of each lane encoding: a contribution's nibbles, the result's bytes
    LANE_TNA_HEADERS
}

struct ig_meta_t {
    bit<8>  drop_reason;
    bool    ipv4_bad;
    bool    len_ok;         // the UDP length fits the payload's encoding
    bool    enc_bad;        // no payload the profile sums (another encoding)
    bool    lanes;          // a lane encoding's payload, summed in 16-bit lanes
    bool    job_ok;
    bool    child_ok;
    bool    admitted;       // passed the checks: the use register was run
    bool    result_in;      // a result, to be checked as one from the parent
    bit<16> sess_x;         // the packet's session xor the job's: 0 if they agree
    // from the job table
    bool    is_root;
    bit<8>  children;
    bit<16> grp;
    bit<9>  parent_port;
    bit<8>  result_enc;
    bit<8>  exp_chk;        // 255: exp > the job's max_exp
    bit<8>  workers;
    bit<32> seed;
    bit<16> slot_chk;       // bit 15 set: slot >= num_slots
    bit<16> ridx;
    bit<32> c2n;            // the chunk two uses before this one, in this version
    // from the children table
    bit<32> child_bit;
    // slot state after this contribution
    bit<32> use_old;
    bit<32> use_d;
    bit<32> bm_seen;        // nonzero: this child was seen in the use
    bool    live;           // the current or the next use (not stale, not early)
    bool    first;
    bit<8>  remaining;      // children still to come; 0: complete
    bit<8>  exp;
    bool    down;           // a result from the parent, multicast to the children
    bool    pass2;          // second pass: read the pair registers' first lanes
#if PASSES > 1
    bool    walking;        // a later pass of a packet (the walk header is valid)
#endif
}

struct eg_meta_t {
#ifdef CNAT8_RESULTS
    ROUND_FIELDS        // per element: random bits, the code rounded up
#endif
}

#endif
