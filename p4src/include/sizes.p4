#ifndef NATSWITCH_SIZES_P4
#define NATSWITCH_SIZES_P4

// Elements per packet: one of the profiles of include/elements.p4 (p4src/gen_elements.py).
// BMv2 lets a packet grow by at most 512 bytes, and a CNAT8 contribution
// turned into a FIXED32 partial sum or result grows by 3 bytes per element:
// 3 * 168 = 504. 168 still moves 3.2x fewer bytes than FIXED32 per element.
// The wide profile (-DELEMS=1456, p4src/build/wide/) fills a 1500-byte MTU with
// CNAT8 and cannot grow a packet so far: it aggregates CNAT8 both ways only.
#ifndef ELEMS
#define ELEMS 168
#endif
#define MAX_GROWTH 512
// The 4-bit encodings and their one-byte results: a 4-bit contribution of ELEMS/2 bytes
// leaves as a one-byte-per-element result or partial sum, growing by ELEMS/2 bytes. The
// profiles where that fits (default and wide4) have them; elsewhere their packets are
// BAD_ENCODING (docs/PROTOCOL.md "Payload").
#if ELEMS <= 2 * MAX_GROWTH
#define FOUR_BIT 1
#endif
// Slots in the switch's register pool; each slot has two versions (shadow copies).
#define POOL_SIZE 512
#define SLOT_REGS 1024
#define MAX_JOBS 64
#define MAX_CHILD_ENTRIES 2048
#define MAX_ROUTES 4096
#define NUM_PORTS 512

#endif
