// natswitch, Tofino profile (docs/PROTOCOL.md "Tofino profile"): the aggregation protocol
// of p4src/agg.p4 for TNA / T2NA, ELEMS elements per pass. This file only wires the
// controls kept one per file beside it. -DWITH_CNAT8 adds CNAT8 contributions (decoded by
// a table), -DCNAT8_RESULTS CNAT8 results and partial sums (re-compressed by tables in the
// egress), -DWITH_LANES the lane encodings (protocol/encodings.py) in 16-bit lanes with
// their results (-DLANES_ONLY: those only, four elements a pair register); without them
// the program sums FIXED32 only, the SwitchML way. -DPASSES=N (with -DCNAT8_RESULTS): packets of N segments of ELEMS codes,
// one summed a pass (passes_tna.p4).
#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

#include "sizes_tna.p4"
#include "arch_tna.p4"
#include "headers_tna.p4"
#include "parser_tna.p4"
#include "forwarding_tna.p4"
#include "slot_tna.p4"
#include "pairsum_tna.p4"
#include "codec_tna.p4"
#include "lanes_tna.p4"
#include "passes_tna.p4"
#include "agg_shared_tna.p4"
#include "esum_tna.p4"
#include "next_step_tna.p4"
#include "deparser_tna.p4"

// The payload table's keys and entries (agg_shared_tna.p4): a key of every payload header
// the variant parses, ternary.
#ifdef WITH_LANES
#define PAYLOAD_KEYS \
            hdr.fixed.isValid(): ternary; hdr.cnat.isValid(): ternary; \
            LANE_KEYS(ternary)
#else
#define PAYLOAD_KEYS hdr.fixed.isValid(): ternary; hdr.cnat.isValid(): ternary;
#endif
#if PASSES > 1
// CNAT8 packets of every segment only
#define PAYLOAD_ENTRIES \
            (false, true, UDP_LEN_PACKET): fits(); \
            (_, _, _): no_payload();
#elif defined(WITH_LANES)
#ifndef LANES_ONLY
#define PAYLOAD_FIXED32 (true, false, LANES_NONE, UDP_LEN_FIXED32): fits();
#else
#define PAYLOAD_FIXED32 (true, false, LANES_NONE, _): no_payload();
#endif
// LANE_FITS: each lane encoding's header with its length (elements_tna.p4)
#define PAYLOAD_ENTRIES \
            PAYLOAD_FIXED32 \
            LANE_FITS(false, false) \
            (false, false, LANES_NONE, _): no_payload();
#else
#ifdef WITH_CNAT8
#define PAYLOAD_CNAT8 (false, true, UDP_LEN_CNAT8): fits();
#else
#define PAYLOAD_CNAT8
#endif
#define PAYLOAD_ENTRIES \
            (true, false, UDP_LEN_FIXED32): fits(); \
            PAYLOAD_CNAT8 \
            (false, false, _): no_payload();
#endif

control TnaIngress(inout tna_headers_t hdr, inout ig_meta_t meta,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t prsr,
                   inout ingress_intrinsic_metadata_for_deparser_t dprsr,
                   inout ingress_intrinsic_metadata_for_tm_t tm) {
    Counter<bit<32>, bit<8>>(DROP_REASONS, CounterType_t.PACKETS_AND_BYTES) drops;
    Forwarding() fwd;
    SlotState() slot;
    NextStep() next;
#ifdef WITH_CNAT8
    DECODE_DECLS
#endif
#ifdef WITH_LANES
    SpreadLanes() spread;
#endif
#if PASSES > 1
    WalkStep() walk;
    ESUM_DECLS
#else
    PAIR_DECLS
#endif

    AGG_PAYLOAD_ACTIONS(meta)
    AGG_PAYLOAD_TABLE

    apply {
        AGG_BRIDGE_INIT
#if PASSES > 1
        if (meta.walking) {
            // A later pass: its segment's codes were parsed, or none when harvesting.
            if (hdr.walk.harvest == 1) {
                hdr.fixed.setValid();
            }
        } else
#endif
#ifdef LO_LANE_PASS
        if (hdr.recirc.isValid()) {
            // Second pass of a result: the pair registers' first lanes (below).
            meta.pass2 = true;
            meta.ridx = hdr.recirc.ridx;
        } else
#endif
        if (!hdr.agg.isValid()) {
            AGG_ROUTE_OR_DROP(meta, hdr, meta, tm)
        } else {
            payload.apply();
            slot.apply(hdr, meta, ig_intr_md.ingress_port);
        }
#ifdef WITH_CNAT8
        // Independent of the slot's state: placed beside it. The codes' values go where a
        // FIXED32 payload's would, which the packet carries from here on.
        if (hdr.cnat.isValid()) {
            DECODE_APPLY
        }
#endif
#ifdef WITH_LANES
        if (LANE_VALID) {
            spread.apply(hdr);
        }
#endif
#if PASSES > 1
        ESUM_APPLY
        if (!meta.walking) {
            next.apply(hdr, meta, ig_intr_md.ingress_port, dprsr, tm);
        }
        if (hdr.walk.isValid()) {
            walk.apply(hdr, meta, dprsr, tm);
        }
#else
        PAIR_APPLY
        next.apply(hdr, meta, ig_intr_md.ingress_port, dprsr, tm);
#endif
#if defined(WITH_CNAT8) && PASSES == 1
        // A CNAT8 result on its way down a tree passes as it came.
        if (hdr.cnat.isValid() && !meta.down) {
            hdr.fixed.setValid();
            hdr.cnat.setInvalid();
            hdr.agg.encoding = ENC_FIXED32;
        }
#endif
#ifdef WITH_LANES
        AGG_LANES_OUT(meta)
#endif
        if (meta.drop_reason != DROP_NONE) {
            drops.count(meta.drop_reason);
            dprsr.drop_ctl = 1;
        }
    }
}

control TnaEgress(inout tna_headers_t hdr, inout eg_meta_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t prsr,
                  inout egress_intrinsic_metadata_for_deparser_t dprsr,
                  inout egress_intrinsic_metadata_for_output_port_t oport) {
    ResultAddressing() addr;
#ifdef WITH_LANES
    Counter<bit<32>, bit<8>>(DROP_REASONS, CounterType_t.PACKETS_AND_BYTES) drops;
    NarrowLanes() narrow;
    bool overflow = false;
#endif
#ifdef CNAT8_RESULTS
    ROUND_POLYS
    ROUND_DECLS
    CODE_DECLS
    DRAW_ACTIONS
    action add_random() { ROUND_ADD }
#endif

    apply {
        if (hdr.agg.isValid()) {
#ifdef CNAT8_RESULTS
            // Every copy of a result rounds alike: the random bits are a function of the
            // use, not of the copy or of its arrival.
            if (hdr.bridge.recompress == 1 && hdr.fixed.isValid()) {
                hdr.cnat.setValid();
                DRAW_CALLS
                ROUND_LEAD
                add_random();
                ROUND_CODE
                hdr.fixed.setInvalid();
                hdr.agg.encoding = ENC_CNAT8;
#if PASSES > 1
                hdr.udp.length = UDP_LEN_PACKET;
                hdr.ipv4.total_len = UDP_LEN_PACKET + 20;
#else
                hdr.udp.length = UDP_LEN_CNAT8;
                hdr.ipv4.total_len = UDP_LEN_CNAT8 + 20;
#endif
            }
#endif
#ifdef WITH_LANES
            AGG_NARROW(drops.count(DROP_SUM_OVERFLOW); dprsr.drop_ctl = 1;)
#endif
            addr.apply(hdr, eg_intr_md.egress_port);
        }
#if PASSES > 1
        // The walk is over where the packet leaves for a host or a parent.
        if (hdr.bridge.to_recirc == 0) {
            hdr.walk.setInvalid();
        }
#endif
        hdr.bridge.setInvalid();
    }
}

Pipeline(TnaIngressParser(), TnaIngress(), TnaIngressDeparser(),
         TnaEgressParser(), TnaEgress(), TnaEgressDeparser()) pipe;

Switch(pipe) main;
