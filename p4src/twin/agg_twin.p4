// natswitch, v1model twin of the Tofino profile (p4src/tna/, docs/PROTOCOL.md "Tofino
// profile"): the same register layout, checks, decode and re-compression tables and
// elements per pass as the TNA program, on BMv2 and softswitch, so that the design the
// Tofino compiler placed is the design the tests run. It takes the Tofino 2 form (both
// lanes of a pair register in one pass; no recirculation); -DPASSES=N builds the walk of
// packets of N segments (p4src/tna/passes_tna.p4), its passes recirculated. This file only
// wires the controls kept one per file beside it and in p4src/tna/.
#include <core.p4>
#include <v1model.p4>

#ifndef ELEMS
#define ELEMS 16
#endif
#define CNAT8_RESULTS 1
#define WITH_LANES 1
#include "../tna/sizes_tna.p4"
#include "arch_twin.p4"
#include "../tna/headers_tna.p4"
#include "elements_twin.p4"
#include "twin_meta.p4"
#include "parser_twin.p4"
#include "forwarding_twin.p4"
#include "slot_twin.p4"
#include "pairsum_twin.p4"
#include "codec_twin.p4"
#include "../tna/lanes_tna.p4"
#include "../tna/passes_tna.p4"
#include "../tna/agg_shared_tna.p4"
#include "esum_twin.p4"
#include "next_step_twin.p4"

// The payload table's keys and entries (p4src/tna/agg_shared_tna.p4): BMv2 matches
// validity exactly only, so no entry leaves it out.
#define PAYLOAD_KEYS \
            hdr.fixed.isValid(): exact; hdr.cnat.isValid(): exact; \
            LANE_KEYS(exact)
#if PASSES > 1
// CNAT8 packets of every segment only
#define PAYLOAD_ENTRIES \
            (false, true, LANES_NONE, UDP_LEN_PACKET): fits(); \
            (true, false, LANES_NONE, _): no_payload(); \
            /* each lane encoding's header (elements_tna.p4) */ \
            LANE_REFUSED(false, false) \
            (false, false, LANES_NONE, _): no_payload();
#else
#define PAYLOAD_ENTRIES \
            (true, false, LANES_NONE, UDP_LEN_FIXED32): fits(); \
            (false, true, LANES_NONE, UDP_LEN_CNAT8): fits(); \
            /* each lane encoding's header with its length (elements_tna.p4) */ \
            LANE_FITS(false, false) \
            (false, false, LANES_NONE, _): no_payload();
#endif

control NatIngress(inout tna_headers_t hdr, inout twin_meta_t m, inout standard_metadata_t sm) {
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_rx;
    counter(DROP_REASONS, CounterType.packets_and_bytes) drops;
    Forwarding() fwd;
    SlotState() slot;
    NextStep() next;
    DECODE_DECLS
    SpreadLanes() spread;
#if PASSES > 1
    ElemSums() sums;
    WalkStep() walk;
#else
    PairSums() sums;
#endif

    AGG_PAYLOAD_ACTIONS(m.ig)
    AGG_PAYLOAD_TABLE

    apply {
        port_rx.count((bit<32>)sm.ingress_port);
        m.ig.ipv4_bad = sm.checksum_error == 1;
        AGG_BRIDGE_INIT
        if (sm.parser_error != error.NoError) {
            // Tofino's parser drops a frame cut short; here it is counted.
            m.ig.drop_reason = DROP_BAD_LENGTH;
#if PASSES > 1
        } else if (m.ig.walking) {
            // A later pass: its segment's codes were parsed, or none when harvesting (the
            // sums then go where the codes' values would).
            hdr.fixed.setValid();
#endif
        } else if (!hdr.agg.isValid()) {
            AGG_ROUTE_OR_DROP(m.ig, hdr, m.ig, sm)
        } else {
            payload.apply();
            slot.apply(hdr, m.ig, sm.ingress_port);
#if PASSES > 1
        }
        // Every pass: the segment's codes, its sums, and the walk's next step (one place,
        // so that each table has one successor, as BMv2 needs).
        if (hdr.agg.isValid() && sm.parser_error == error.NoError) {
            if (hdr.cnat.isValid()) {
                hdr.fixed.setValid();
                DECODE_APPLY
            }
            sums.apply(hdr, m.ig);
            if (!m.ig.walking) {
                next.apply(hdr, m.ig, sm);
            }
            if (hdr.walk.isValid()) {
                walk.apply(hdr, m.ig, sm);
            }
            if (hdr.cnat.isValid() && m.ig.down) {
                hdr.fixed.setInvalid();         // a CNAT8 result on its way down: as it came
            }
#else
            if (hdr.cnat.isValid()) {
                // The codes' values go where a FIXED32 payload's would, which the packet
                // carries from here on (the TNA program writes the same PHV fields).
                hdr.fixed.setValid();
                DECODE_APPLY
            } else if (LANE_VALID) {
                spread.apply(hdr);
            }
            sums.apply(hdr, m.ig);
            next.apply(hdr, m.ig, sm);
            if (hdr.cnat.isValid()) {
                if (m.ig.down) {
                    hdr.fixed.setInvalid();     // a CNAT8 result on its way down: as it came
                } else {
                    hdr.cnat.setInvalid();
                    hdr.agg.encoding = ENC_FIXED32;
                }
            } else AGG_LANES_OUT(m.ig)
#endif
        }
        if (m.ig.drop_reason != DROP_NONE) {
            drops.count((bit<32>)m.ig.drop_reason);
            mark_to_drop(sm);
        }
    }
}

control NatEgress(inout tna_headers_t hdr, inout twin_meta_t m, inout standard_metadata_t sm) {
    counter(NUM_PORTS, CounterType.packets_and_bytes) port_tx;
    counter(DROP_REASONS, CounterType.packets_and_bytes) drops;
    ResultAddressing() addr;
    Recompress() recompress;
    NarrowLanes() narrow;
    bool overflow = false;

    apply {
        if (hdr.agg.isValid()) {
            // Every copy of a result rounds alike: the random bits are a function of the
            // use, not of the copy or of its arrival.
            if (hdr.bridge.recompress == 1 && hdr.fixed.isValid()) {
                recompress.apply(hdr, m.eg);
            }
            AGG_NARROW(drops.count((bit<32>)DROP_SUM_OVERFLOW); mark_to_drop(sm);)
            addr.apply(hdr, sm);
        }
#if PASSES > 1
        // The walk goes on through the ingress (v1model's recirculation: the port the
        // ingress chose from `loops` stands for the TNA program's loopback port), or is
        // over where the packet leaves for a host or a parent.
        if (hdr.bridge.to_recirc == 1) {
            recirculate_preserving_field_list(0);
        } else {
            hdr.walk.setInvalid();
        }
#endif
        hdr.bridge.setInvalid();
        port_tx.count((bit<32>)sm.egress_port);
    }
}

V1Switch(TwinParser(), TwinVerifyChecksum(), NatIngress(), NatEgress(),
         TwinComputeChecksum(), TwinDeparser()) main;
