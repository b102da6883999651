#ifndef NATSWITCH_HEADERS_P4
#define NATSWITCH_HEADERS_P4

#include "elements.p4"

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// The aggregation header, 16 bytes (docs/PROTOCOL.md).
header agg_h {
    bit<8>  msg_type;
    bit<8>  encoding;
    bit<16> job_id;
    bit<16> session;
    bit<16> slot;
    bit<8>  version;
    bit<8>  exp;
    bit<8>  count;
    bit<8>  flags;
    bit<32> chunk;
}

// Sparse jobs: after AGG when msg_type is 3 or 4 (docs/PROTOCOL.md "Sparse jobs").
header block_h {
    bit<32> block;
    bit<32> next;
}

// ELEMS int32 values (FIXED32) or ELEMS sign+code bytes (CNAT8).
header fixed_h { FIXED_FIELDS }
header cnat_h { CNAT_FIELDS }
#ifdef FOUR_BIT
// ELEMS 4-bit codes (NAT4), two per byte, element 2k in the high nibble.
header nib_h { NIB_FIELDS }
// The lane encodings (protocol/encodings.py `lanes`), a header each of one field per four
// elements: added a word at a time (p4src/gen_elements.py LAYOUTS, GROUP_MACROS); by its
// bits, uq_h (4-bit integers, four per 16-bit word) or sum_h (bytes, four per 32-bit word).
LANE_HEADER_TYPES
#endif
// ELEMS bytes of padding an EMPTY sparse packet may carry (ignored): a FIXED32 result
// written into it then grows it by 3 * ELEMS bytes, within BMv2's 512 (default profile),
// a CNAT8 result by none (the wide profile, whose ELEMS exceed 512).
header pad_h { CNAT_FIELDS }

struct headers_t {
    ethernet_h eth;
    ipv4_h     ipv4;
    udp_h      udp;
    agg_h      agg;
    block_h    block;
    fixed_h    fixed;
    cnat_h     cnat;
#ifdef FOUR_BIT
    nib_h      nib;
    LANE_HEADERS        // the lane encodings' headers (uq, sum), in wire-number
                        // order (gen_elements.py)
#endif
    pad_h      pad;
}

struct metadata_t {
    bit<8>  drop_reason;
    bool    is_agg;
    bool    impaired;
    // from the job table
    bool    is_root;
    bit<16> base;
    bit<16> num_slots;
    bit<8>  children;
    bit<16> grp;
    bit<9>  parent_port;
    bit<8>  result_enc;
    bit<8>  max_exp;
    bool    sparse;
    bit<16> session;
    bit<32> round_key;      // this switch's key for the job's rounding bits
    // from the children table
    bit<32> child_bit;
    bit<8>  weight;
    bit<32> max_mag;        // the largest magnitude an element from this port may have
    // refusals: a contribution sent back with its drop reason; out_of_range from
    // codec.p4's RangeCheck; a sparse PRIME contradicting the use's bound, which `held` is,
    // taken from the children whose bits `held_by` has
    bool    refused;
    bool    out_of_range;
    bool    contradicts;
    bit<32> held;
    bit<32> held_by;
    bool    sum_ovf;        // codec.p4: a re-compressed sum above 2^30 units
    // the slot's register indices
    bit<32> region;
    bit<32> ridx;
    bit<32> ridx_other;
    // slot state after this contribution
    bool    stale;
    bool    early;
    bool    seen;
    bool    first;
    bool    complete;
    bit<8>  exp;
    bit<8>  workers;
    bit<16> udp_len;
    // sparse jobs: the use's block, the running min of next, whether the use is a prime
    bool    bad_block;
    bool    prime_use;
    bit<32> blk;
    bit<32> rmin;
    // integrity.p4: the UDP sum is checked against this never-written zero; udp_bad says
    // the verify stage's checksum error was the UDP checksum's, not the IPv4 header's
    bit<16> zero16;
    bool    udp_bad;
    // codec.p4: bit 7 set if a NAT4 payload held a bad nibble; aggregation.p4: the lanes'
    // bits above their low bytes (nonzero: a sum outside 0..255, no lane result)
    bit<8>  bad_code;
    bit<64> ovf;
}

error { BadEncoding }

#endif
