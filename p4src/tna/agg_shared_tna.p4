#ifndef NATSWITCH_AGG_SHARED_TNA_P4
#define NATSWITCH_AGG_SHARED_TNA_P4

// Pieces of the ingress written once for the TNA program (agg_tna.p4) and its v1model
// twin (p4src/twin/agg_twin.p4); META is the ingress's metadata.

// What the payload table finds: a payload of the length its encoding gives, or none.
#define AGG_PAYLOAD_ACTIONS(META) \
    action fits() { META.len_ok = true; } \
    action fits_lanes() { META.len_ok = true; META.lanes = true; } \
    action no_payload() { META.enc_bad = true; }

// The payload's length by its encoding: PAYLOAD_KEYS (the headers' validity) and
// PAYLOAD_ENTRIES are each program's, as its architecture matches validity.
#define AGG_PAYLOAD_TABLE \
    table payload { \
        key = { \
            PAYLOAD_KEYS \
            hdr.udp.length: ternary; \
        } \
        actions = { fits; fits_lanes; no_payload; NoAction; } \
        const entries = { \
            PAYLOAD_ENTRIES \
        } \
        default_action = NoAction(); \
        size = 8; \
    }

// The bridge header every packet carries to the egress, cleared.
#if PASSES > 1
#define AGG_BRIDGE_INIT \
        hdr.bridge.setValid(); \
        hdr.bridge.recompress = 0; \
        hdr.bridge.to_recirc = 0; \
        hdr.bridge.is_agg = 0; \
        hdr.bridge.seg = 0; \
        hdr.bridge.walked = 0;
#else
#define AGG_BRIDGE_INIT \
        hdr.bridge.setValid(); \
        hdr.bridge.recompress = 0; \
        hdr.bridge.to_recirc = 0; \
        hdr.bridge.is_agg = 0; \
        hdr.bridge.pad = 0; \
        hdr.bridge.seed = 0;
#endif

// A packet that is not aggregated: routed (fwd.apply(FWD_ARGS)) if it is sound IPv4.
#define AGG_ROUTE_OR_DROP(META, ...) \
            if (META.ipv4_bad) { \
                META.drop_reason = DROP_BAD_CHECKSUM; \
            } else if (hdr.ipv4.isValid()) { \
                fwd.apply(__VA_ARGS__); \
            } else { \
                META.drop_reason = DROP_NOT_IPV4; \
            }

// A SUM8 result on its way down a tree passes as it came; other lanes leave as sums.
#define AGG_LANES_OUT(META) \
        if (hdr.sum8.isValid() && META.down) { \
            hdr.fixed.setInvalid(); \
        } else if (LANE_VALID) { \
            /* every lane encoding's header (elements_tna.p4) */ \
            LANE_INVALIDATE \
            hdr.agg.encoding = ENC_FIXED32; \
        }

// The egress narrows the sums to SUM8 lanes (recompress 2), every copy alike; one the
// lanes cannot carry is dropped and counted (DROP_OVERFLOW).
#define AGG_NARROW(DROP_OVERFLOW) \
            if (hdr.bridge.recompress == 2 && hdr.fixed.isValid()) { \
                narrow.apply(hdr, overflow); \
                if (overflow) { \
                    DROP_OVERFLOW \
                } \
            }

#endif
