#ifndef NATSWITCH_TWIN_META_P4
#define NATSWITCH_TWIN_META_P4

// v1model has one metadata struct for both controls: the TNA program's ingress and
// egress metadata side by side (p4src/tna/headers_tna.p4).
struct twin_meta_t {
    ig_meta_t ig;
    eg_meta_t eg;
}

#endif
