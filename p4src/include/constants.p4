#ifndef NATSWITCH_CONSTANTS_P4
#define NATSWITCH_CONSTANTS_P4

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  PROTO_UDP = 17;
const bit<16> AGG_UDP_PORT = 20033;

const bit<8> MSG_CONTRIB = 1;
const bit<8> MSG_RESULT = 2;
// Sparse (block) jobs (docs/PROTOCOL.md "Sparse jobs").
const bit<8> MSG_SPARSE_CONTRIB = 3;
const bit<8> MSG_SPARSE_RESULT = 4;
// A contribution the switch will not take, sent back to its port with the drop reason in
// `count` (docs/PROTOCOL.md "Refusals"): the sender learns why at once. SPARSE_REFUSED
// keeps the block header, which then holds the switch's view of the use.
const bit<8> MSG_REFUSED = 5;
const bit<8> MSG_SPARSE_REFUSED = 6;
const bit<8> FLAG_PRIME = 0x01;     // the first use of a slot in a call
const bit<8> FLAG_EMPTY = 0x02;     // no payload: the sender does not hold the use's block
const bit<32> NO_BLOCK = 0xffffffff;

// The encodings' wire numbers (ENC_*) are protocol/encodings.py's, declared once there:
// p4src/gen_elements.py writes them into include/elements.p4, and p4src/tna/gen_tna.py
// into tna/elements_tna.p4 for the Tofino profile, for every encoding a switch sums or
// sends (FLOAT32, host to host only, has none: a switch drops it), the lane encodings
// among them (`lanes`: summed in 16-bit lanes, never decoded). tests/test_protocol.py
// checks the generated numbers against the declaration.

// Lengths of an aggregation packet after the IPv4 header.
const bit<16> AGG_HDR_BYTES = 16;
const bit<16> UDP_LEN_FIXED32 = 8 + AGG_HDR_BYTES + 4 * ELEMS;
const bit<16> UDP_LEN_CNAT8 = 8 + AGG_HDR_BYTES + ELEMS;
const bit<16> BLOCK_HDR_BYTES = 8;
const bit<16> FIXED32_BYTES = 4 * ELEMS;
const bit<16> CNAT8_BYTES = ELEMS;
const bit<16> NIB_BYTES = ELEMS / 2;
// An EMPTY sparse packet: no payload, or ELEMS bytes of padding (docs/PROTOCOL.md).
const bit<16> UDP_LEN_EMPTY = 8 + AGG_HDR_BYTES + BLOCK_HDR_BYTES;
const bit<16> UDP_LEN_EMPTY_PADDED = UDP_LEN_EMPTY + ELEMS;

// Indices of the events counter (docs/PROTOCOL.md).
const bit<32> EV_CONTRIB = 0;
const bit<32> EV_DUPLICATE = 1;
const bit<32> EV_COMPLETE = 2;
const bit<32> EV_RESULT_MCAST = 3;
const bit<32> EV_ANSWERED = 4;
const bit<32> EV_PARTIAL_UP = 5;
const bit<32> EV_RESULT_DOWN = 6;
const bit<32> EV_FORWARDED = 7;

// Drop reasons, the index of the drops counters.
const bit<8> DROP_NONE = 0;
const bit<8> DROP_UNKNOWN_JOB = 1;
const bit<8> DROP_FOREIGN_PORT = 2;
const bit<8> DROP_BAD_SLOT = 3;
const bit<8> DROP_BAD_LENGTH = 4;
const bit<8> DROP_BAD_ENCODING = 5;
const bit<8> DROP_BAD_VERSION = 6;
const bit<8> DROP_NO_ROUTE = 7;
const bit<8> DROP_TTL_EXPIRED = 8;
const bit<8> DROP_IMPAIRMENT = 9;
const bit<8> DROP_NOT_IPV4 = 10;
const bit<8> DROP_BAD_RESULT_PORT = 11;
const bit<8> DROP_BAD_TYPE = 12;
const bit<8> DROP_BAD_CHECKSUM = 13;
const bit<8> DROP_STALE = 14;            // a use of the slot that is over (a replay)
const bit<8> DROP_BAD_UDP_CHECKSUM = 15; // the UDP checksum over the payload does not add up
const bit<8> DROP_BAD_EXP = 16;          // an exponent above the job's bound
const bit<8> DROP_BAD_BLOCK = 17;        // a sparse packet's block, next or flags do not fit the use
const bit<8> DROP_TOO_WIDE = 18;         // the wide profile: a result or partial sum would grow
                                         // the packet beyond MAX_GROWTH (FIXED32 out of CNAT8)
const bit<8> DROP_WRONG_SESSION = 19;    // not the session the control plane set for the job
const bit<8> DROP_EARLY = 20;            // a use no correct sender can have sent yet
const bit<8> DROP_BAD_CODE = 21;         // a NAT4 payload holding the nibble 0x8 (never encoded)
const bit<8> DROP_SUM_OVERFLOW = 22;     // a sum its result or partial sum cannot carry:
                                         // SUM8 outside 0..255, CNAT8 above 2^30 units
const bit<8> DROP_OUT_OF_RANGE = 23;     // an element above the bound of the child's port
// Size of the drops counters: the largest drop reason + 1, rounded up.
#define DROP_REASONS 32

#endif
