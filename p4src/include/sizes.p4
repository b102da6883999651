#ifndef NATSWITCH_SIZES_P4
#define NATSWITCH_SIZES_P4

// Elements per packet: must match include/elements.p4 (p4src/gen_elements.py).
#ifndef ELEMS
#define ELEMS 256
#endif
// Slots in the switch's register pool; each slot has two versions (shadow copies).
#define POOL_SIZE 512
#define SLOT_REGS 1024
#define MAX_JOBS 64
#define MAX_CHILD_ENTRIES 2048
#define MAX_ROUTES 4096
#define NUM_PORTS 512

#endif
