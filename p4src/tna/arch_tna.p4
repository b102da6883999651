#ifndef NATSWITCH_ARCH_TNA_P4
#define NATSWITCH_ARCH_TNA_P4

// What a control shared with the v1model twin (p4src/twin/arch_twin.p4 defines the same
// names) asks of the architecture: the ingress's intrinsic metadata for the deparser and
// the traffic manager, and the three things it does with them.
#define IG_INTR inout ingress_intrinsic_metadata_for_deparser_t dprsr, \
                inout ingress_intrinsic_metadata_for_tm_t tm
#define IG_INTR_ARGS dprsr, tm
#define DROP_PACKET() dprsr.drop_ctl = 1
#define TO_GROUP(g) tm.mcast_grp_a = (g)
#define TO_PORT(p) tm.ucast_egress_port = (PortId_t)(p)

// A bool in a ternary match, and its two values there.
#define FLAG_KEY(e) e: ternary
#define FLAG_T true
#define FLAG_F false

#endif
