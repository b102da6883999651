#ifndef NATSWITCH_SIZES_TNA_P4
#define NATSWITCH_SIZES_TNA_P4

// Elements per pass of the Tofino profile (docs/PROTOCOL.md "Tofino profile"): the
// elements one packet carries, all summed in one pass through the pipe. A multiple of 8.
#ifndef ELEMS
#define ELEMS 64
#endif
// The slot pool and table sizes of the v1model program (p4src/include/sizes.p4); a build
// may give a larger pool (-DPOOL_SIZE=N, a power of two).
#ifndef POOL_SIZE
#define POOL_SIZE 512
#endif
#define SLOT_REGS (2 * POOL_SIZE)
#define MAX_JOBS 64
#define MAX_CHILD_ENTRIES 2048
#define MAX_ROUTES 4096
#define NUM_PORTS 512
#define DROP_REASONS 32

// The port a packet is recirculated through (pipe 0).
#if __TARGET_TOFINO__ == 2
#define RECIRC_PORT 6
#else
#define RECIRC_PORT 68
#endif

#if defined(CNAT8_RESULTS) && !defined(WITH_CNAT8)
#define WITH_CNAT8
#endif

// -DWITH_LANES adds the lane encodings (protocol/encodings.py `lanes`), summed in 16-bit
// lanes two to a 32-bit word (lanes_tna.p4), and their results. -DLANES_ONLY sums those
// only: the sums are ELEMS / 2 words, so a pair register adds four elements, and FIXED32
// and CNAT8 packets are BAD_ENCODING. WORDS is the 32-bit words of the sums.
#if defined(LANES_ONLY) && !defined(WITH_LANES)
#define WITH_LANES
#endif
#if defined(LANES_ONLY) && defined(WITH_CNAT8)
#error "LANES_ONLY sums the lane encodings only"
#endif
#ifdef LANES_ONLY
#define WORDS (ELEMS / 2)
#else
#define WORDS ELEMS
#endif

// Passes per packet (passes_tna.p4): a packet carries PASSES segments of ELEMS CNAT8
// codes, one summed a pass, the passes walking the pipes through ports in loopback. Each
// segment has registers of its own (SLOT_REGS cells a segment), so the control plane may
// send any pass to any pipe.
#ifndef PASSES
#define PASSES 1
#endif
#if PASSES > 1 && !defined(CNAT8_RESULTS)
#error "PASSES > 1 sums CNAT8 contributions into CNAT8 results only (-DCNAT8_RESULTS)"
#endif

// Tofino 1's stateful ALUs return one 32-bit word: a pair register's second lane is read
// in a second pass. Tofino 2's return both. The walk of PASSES > 1 keeps one element a
// register, so every pass reads its sums at once.
#if __TARGET_TOFINO__ == 1 && PASSES == 1
#define LO_LANE_PASS 1
#endif

#endif
