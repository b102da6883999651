#ifndef NATSWITCH_ARCH_TWIN_P4
#define NATSWITCH_ARCH_TWIN_P4

// p4src/tna/arch_tna.p4's names on v1model's standard metadata.
#define IG_INTR inout standard_metadata_t sm
#define IG_INTR_ARGS sm
#define DROP_PACKET() mark_to_drop(sm)
#define TO_GROUP(g) sm.mcast_grp = (g)
#define TO_PORT(p) sm.egress_spec = (bit<9>)(p)

// BMv2 takes no bool in a ternary match: the flag as a bit, true as 1, under its name.
#define FLAG_KEY(e) (bit<1>)e: ternary @name(#e)
#define FLAG_T 1
#define FLAG_F 0

#endif
