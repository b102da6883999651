"""docs/results.md "On Tofino": the Tofino profile's figures as the compiler reported them,
read from the committed summaries in p4src/build/tofino/ (p4src/tna/build_tofino.py)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from common import step_model  # noqa: E402

from controller import switch_wire as sw  # noqa: E402
from controller.switch_wire import FRAME_OVERHEAD  # noqa: E402

ENCODINGS = {
    "fixed32": "FIXED32 / FIXED32 (SwitchML's design)",
    "cnat8-in": "CNAT8 / FIXED32",
    "cnat8": "CNAT8 / CNAT8",
    "cnat8-mp": "CNAT8 / CNAT8, several passes a packet",
    "uq4": "UQ4 / SUM8 (16-bit lanes)",
}
TARGETS = {"tofino": "Tofino 1", "tofino2": "Tofino 2"}
# (name, parameters, compute ms per step, steps to accuracy): assumptions, with where they
# come from, in docs/STEPTIME.md "Projections". Declared here, not in bench/report.py, which
# imports this module: `report` is also mininet/report.py, first on some paths.
MODELS = [("ResNet-50", 25.6e6, 100.0, 450_000), ("BERT-base", 110e6, 100.0, 1_000_000),
          ("VGG-16", 138e6, 150.0, 370_000)]


def enc_name(variant: str) -> str:
    return ENCODINGS.get(sw.encoding(variant), sw.encoding(variant))


def load() -> list[dict]:
    """The summaries switch_wire reads (sw.SUMMARIES), probes excluded."""
    order = list(ENCODINGS)
    return sorted(sw.summaries(), key=lambda r: (
        r["target"], order.index(e) if (e := sw.encoding(r["variant"])) in order else len(order),
        r["variant"]))


def table(rows: list[dict]) -> list[str]:
    out = ["| target | up / down | elements per pass | passes per packet | elements per packet "
           "| stages (ingress, egress) | stateful ALUs (sums + slot) | SRAM blocks | TCAM blocks "
           "| PHV bits | passes of a completing packet |",
           "| --- | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        enc = enc_name(r["variant"])
        sums = r["pair_registers"]
        out.append(
            f"| {TARGETS[r['target']]} | {enc} | {r['elements_per_pass']} | "
            f"{r['passes_per_packet']} | {r['elements_per_packet']} | "
            f"{r['stages_ingress']}, {r['stages_egress']} of {r['stages_available']} | "
            f"{r['stateful_alus']} ({sums} + {r['stateful_alus'] - sums}) of "
            f"{r['stateful_alus_available']} | {r['srams']} | {r['tcams']} | "
            f"{r['phv_overall_bits']} | "
            f"{r['passes_per_packet'] + r['harvest_passes']} |")
    return out


def walk_lines(rows: list[dict], nxt: dict[str, dict]) -> list[str]:
    """The C_nat targets against what compiles, one sentence a target, from the summaries
    and the probes."""
    out = []
    for target, most in (("tofino", 64), ("tofino2", 128)):
        mine = [r for r in rows if r["target"] == target
                and sw.encoding(r["variant"]) in ("cnat8", "cnat8-mp")]
        if not mine:
            continue
        pk = best = max(mine, key=lambda r: (r["elements_per_packet"], r["variant"]))
        met = "met" if pk["elements_per_packet"] >= most else "missed"
        s = (f"**C_nat on {TARGETS[target]} (target: at least {most} CNAT8 elements per packet, "
             f"CNAT8 both ways): {met}.** The walk ({best['variant']}) carries "
             f"{pk['elements_per_packet']} codes a packet in {_passes(pk['passes_per_packet'])}"
             f" of {best['elements_per_pass']}, {best['stages_ingress']} ingress and "
             f"{best['stages_egress']} egress stages of {best['stages_available']}, "
             f"{best['stateful_alus']} stateful ALUs; the packet that completes a use takes "
             f"{_passes(pk['passes_per_packet'] + pk['harvest_passes'])} in all.")
        probe = nxt.get(best["variant"])
        if probe:
            said = "; ".join(f"`{e}`" for e in probe["errors"][:1]) or "no error"
            s += (f" A pass of {probe['elements_per_pass']} "
                  + ("compiles." if probe["fits"] else f"does not: {said}."))
        out += [s, ""]
    return out


def wire(rows: list[dict]) -> list[str]:
    """Bytes per element each way at a variant's elements per packet (passes x elements per
    pass): arithmetic on the frame (controller/switch_wire.py), not a measurement."""
    out = ["| target | up / down | elements per pass | passes per packet | elements per packet "
           "| bytes per element up | down |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        n = r["elements_per_packet"]
        up, down = (sw.per_element(n, b) for b in sw.PAYLOAD_BYTES[sw.encoding(r["variant"])])
        out.append(f"| {TARGETS[r['target']]} | {enc_name(r['variant'])} | "
                   f"{r['elements_per_pass']} | {r['passes_per_packet']} | {n} | {up:.2f} | "
                   f"{down:.2f} |")
    n = 168
    out.append(f"| v1model (BMv2, softswitch) | CNAT8 / CNAT8 | {n} | 1 | {n} | "
               f"{sw.per_element(n, 1):.2f} | {sw.per_element(n, 1):.2f} |")
    return out


SWITCH_NAMES = {"line-rate": "v1model at line rate", "tofino1": "Tofino 1",
                "tofino2": "Tofino 2"}


GBITS = (10.0, 25.0, 100.0)


def project_all() -> list[dict]:
    """mininet/steptime.py's projection of each model on each switch at each rate: the
    line-rate v1model profile against the Tofino profile's compiled packets, passes and
    pool."""
    model = step_model()
    out = []
    for name, params, ms, _ in MODELS:
        for gbit in GBITS:
            ring = model.project(params, ms / 1e3, gbit, 8, "ring")
            for switch in SWITCH_NAMES:
                out.append({"model": name, "gbit": gbit, "switch": switch, "ring": ring,
                            **{m: model.project(params, ms / 1e3, gbit, 8, m, switch=switch)
                               for m in ("cnat", "int32")}})
    return out


def projections(res: list[dict]) -> list[str]:
    out = ["| model | Gbit/s | switch | C_nat INA s/step | (packet, bound) | int32 INA "
           "s/step | ring s/step | C_nat vs ring | C_nat vs int32 INA |",
           "| --- | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in res:
        c, i, ring = r["cnat"], r["int32"], r["ring"]
        out.append(f"| {r['model']} | {r['gbit']:g} | {SWITCH_NAMES[r['switch']]} | "
                   f"{c.step_s:.3f} | {c.variant or 'default'}, {c.elements_per_packet}/packet"
                   f" in {_passes(c.passes_per_packet)}, "
                   f"{c.bound} | {i.step_s:.3f} | {ring.step_s:.3f} | "
                   f"{ring.step_s / c.step_s:.2f}x | {i.step_s / c.step_s:.2f}x |")
    return out


def _passes(n: int) -> str:
    return f"{n} pass" + ("es" if n != 1 else "")


def _cnat_wires(switch: str) -> list:
    try:
        return sw.wires(switch, "cnat")
    except ValueError:              # no C_nat variant compiled for this target
        return []


def _span(values) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"


def _list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def projection_notes(rows: list[dict]) -> list[str]:
    """What the projection rows assume, with the compiled figures they take."""
    model = step_model()
    pools = sorted({r["pool_size"] for r in rows})
    line = math.ceil(100e9 * 10e-6 / 8 / (max(model.BYTES["cnat"]) * model.ELEMS["cnat"]))
    pipes = "; ".join(model.pipes_line(s) for s in ("tofino1", "tofino2"))
    return [
        "Seconds per step from those packets (`mininet/steptime.py project --switch tofino1`, "
        "`tofino2` or `line-rate`; the models, compute times and the 8 workers, 10 us round "
        "trip, 1 us for each extra pass a result takes (an assumption: docs/STEPTIME.md) and "
        "no overlap of the projections above): each method's packet carries the "
        "elements per packet its variant was compiled for, a worker waits for its link's "
        "busier direction, and a job's window is at most the slots its Tofino program was "
        f"compiled with ({_list([str(p) for p in pools])}). Where several compiled variants "
        "carry C_nat, the faster is taken; *packet* names it, its elements per packet and "
        "the passes each contribution takes. The line-rate rows are the v1model profile's "
        f"168 elements per packet with a window as large as the link needs ({line} slots at "
        "100 Gbit/s). Every pass is work for a pipe and every pass after a packet's first "
        "comes back through a port in loopback: the *pipe* term is the busiest pipe's passes "
        "per step over its packet rate, the *loopback* term the bytes that come back into a "
        "pipe over its loopback ports' rate (docs/STEPTIME.md \"Pipes and passes\"; a tie "
        f"goes to the link). Assumed: {pipes}. What comes from the compiler: the elements "
        "per pass, the passes and harvest passes per packet, the pipes they take and the "
        "pool; the rest is this arithmetic."]


def fill(model, w) -> int:
    """Slots `w`'s packets need in flight at 100 Gbit/s: a 10 us round trip and each extra
    pass of a completing packet (steptime.PASS_S), as the projection counts them."""
    rtt = 10e-6 + w.extra_passes * model.PASS_S
    return math.ceil(100e9 * rtt / 8 / w.packet_bytes)


def projection_after(res: list[dict], rows: list[dict]) -> list[str]:
    """Sentences from the projections and the summaries, whatever they say."""
    tof = [r for r in res if r["switch"] != "line-rate"]
    line = [r for r in res if r["switch"] == "line-rate"]

    def ratios(rs, a):
        return [r[a].step_s / r["cnat"].step_s for r in rs]

    out = [f"A step of int32 INA takes {_span(ratios(tof, 'int32'))} the time of C_nat INA's "
           f"on a Tofino ({_span(ratios(line, 'int32'))} at line rate), the ring's "
           f"{_span(ratios(tof, 'ring'))} ({_span(ratios(line, 'ring'))} at line rate)."]
    taken = []
    for switch in ("tofino1", "tofino2"):
        by = {}
        for r in res:
            if r["switch"] == switch:
                c = r["cnat"]
                by.setdefault((c.variant, c.elements_per_packet, c.passes_per_packet),
                              set()).add(r["gbit"])
        taken += [f"{v} ({n} elements per packet, {_passes(p)}) at "
                  f"{_list([f'{g:g}' for g in sorted(gs)])} Gbit/s on "
                  f"{SWITCH_NAMES[switch]}" for (v, n, p), gs in sorted(by.items())]
    bounds = {}
    for r in tof:
        bounds[r["cnat"].bound] = bounds.get(r["cnat"].bound, 0) + 1
    out.append(f"C_nat INA is carried by {_list(taken)}; what bounds it in its {len(tof)} "
               "Tofino rows: " + _list([f"the {b} in {n}" for b, n in
                                        sorted(bounds.items(), key=lambda x: -x[1])]) + ".")
    ws = [w for switch in ("tofino1", "tofino2") for w in _cnat_wires(switch)
          if any(r["variant"] == w.variant for r in rows)]
    if ws:
        model = step_model()
        fills = [f"{w.variant} {fill(model, w)} (pool {w.pool})" for w in ws]
        widest = max(ws, key=lambda w: (w.elems, w.variant))
        n = model.ELEMS["cnat"]
        out.append("Slots a C_nat packet needs in flight to fill 100 Gbit/s over a 10 us round "
                   f"trip and {model.PASS_S * 1e6:g} us an extra pass: {_list(fills)}. The "
                   "line-rate rows carry "
                   f"{n} elements per packet summed at line rate; the widest compiled C_nat "
                   f"packet carries {widest.elems} ({widest.variant}), and {n} would take "
                   f"{_passes(math.ceil(n / widest.elements_per_pass))} of its "
                   f"{widest.elements_per_pass}.")
    return [" ".join(out)]


def probes() -> dict[str, dict]:
    return {json.loads(p.read_text())["variant"]: json.loads(p.read_text())
            for p in sorted(sw.SUMMARIES.glob("*.next.json"))}


def binding(rows: list[dict], nxt: dict[str, dict]) -> list[str]:
    """What the compiler said at one step more than each variant has."""
    out = []
    for r in rows:
        p = nxt.get(r["variant"])
        if not p:
            out.append(f"- {TARGETS[r['target']]}, {enc_name(r['variant'])}: not probed.")
            continue
        said = "; ".join(f"`{e}`" for e in p["errors"][:2]) or "no error"
        out.append(f"- {TARGETS[r['target']]}, {enc_name(r['variant'])}, "
                   f"{p['elements_per_pass']} elements: "
                   + ("compiles." if p["fits"] else f"the compiler stops: {said}."))
    return out


NOTES = [
    "**SwitchML beside it.** SwitchML (p4lang/p4app-switchML, `dev_root/p4/`, written for "
    "Intel P4 Studio 9.2.0) sums 64 int32 per pass in 32 pair registers (one 64-bit "
    "RegisterAction each), carries 256-byte payloads, and 1024-byte ones (256 elements) by "
    "recirculating through the pipes, reading one lane per harvest pass; its slot state is a "
    "bitmap, a worker counter and the exponents. Its program as published does not compile "
    "with this back end (PHV allocation fails: `../shared/p4-toolchain-tofino/README.md`), "
    "so the like-for-like anchor is the FIXED32 row: SwitchML's design (pair registers, a "
    "second pass for the other lane on Tofino 1) with this protocol's slot state (use, "
    "bitmap, remaining, max_exp: the use numbers of DESIGN contract 6 take one stateful ALU "
    "more), compiled by the same back end. It fits Tofino 1's 12 stages with SwitchML's 64 "
    "int32 per pass, the sums from the fourth stage on.",
    "",
    "**The walk** (`p4src/tna/passes_tna.p4`, the cnat8-mp rows; docs/PROTOCOL.md "
    "\"Passes\") is SwitchML's answer to a pass that holds too few elements, for CNAT8: a "
    "packet of several segments, one summed a pass, the passes walking the pipes through "
    "ports in loopback, the packet that completes a use reading the segments back. What "
    "binds one pass is what bound the single-pass CNAT8 rows: a decode table per element "
    "beside the registers, and the sums parsed again in the egress to be re-compressed "
    "(Tofino 1's 160-byte egress parse depth; Tofino 2's PHV). The walk needs no more of a "
    "pass than those rows: one 32-bit register per element (every pass returns its "
    "segment's sums at once, Tofino 1 included), a 9-byte walk header in front of the "
    "packet and a one-byte bridge to the egress.",
    "",
    "**UQ4 / SUM8 in 16-bit lanes.** THC-style 4-bit integers need no decode: the nibbles "
    "of two elements go to the two 16-bit lanes of a 32-bit word, so a pair register adds "
    "four elements, and the sums are narrowed back to bytes in the egress with an overflow "
    "test (SUM_OVERFLOW). Each of those copies is a hash-unit table of its own (Tofino's "
    "ALUs do not move a byte to another offset of a container): on Tofino 1 they and the "
    "pair registers take the stages (32 elements need 17 of 12, so 16 fit), on Tofino 2 "
    "the PHV binds (32 fit; at 64 the sums' words and their bytes do not all find "
    "containers, the probe). Half a byte an element up, a byte down.",
    "",
    "A pass of C_nat sums fewer elements than a pass of int32 (a decode table an element, "
    "the sums re-compressed on the way out), so on a Tofino C_nat gets its bytes per "
    "element by several passes a packet: passes are pipe capacity and loopback ports, "
    "which the projections below charge.",
    "",
]


TWIN = [
    "### The twin: the compiled design, run (p4src/twin/, --profile tofino)", "",
    "No Tofino runs packets here, so the design the compiler placed is run by its v1model "
    "twin on BMv2 and softswitch: the TNA program's registers per (slot, version), its "
    "admit, count, exponent, next-step and pair-register tables with the same keys and "
    "entries (`tests/test_twin_mirrors_tna.py` compares them), and its decode and "
    "leading-one tables, their rows installed by the controller over P4Runtime, at 16 "
    "elements per pass (the CNAT8 / CNAT8 rows above; UQ4 and SUM8 in the same lanes "
    "and egress narrowing as the uq4 rows). It takes the Tofino 2 form (both "
    "lanes in one pass), draws its rounding bits from v1model's one CRC-32 with the "
    "element's index in the key (the TNA program has a polynomial per element), and applies "
    "the control plane's reset of `use` when a new session first touches a cell, since "
    "BMv2's P4Runtime server writes no registers (docs/PROTOCOL.md \"Tofino profile\"). "
    "`tests/dataplane/test_dp_twin.py` runs it exact against the integer reference, under "
    "chaos, on a two-level tree and reproducibly, BMv2 differential against softswitch.", "",
    "Running it found two faults in the compiled design, both fixed in p4src/tna/ and "
    "recompiled above: a CNAT8 result passing down a tree from its root left a leaf as a "
    "FIXED32 header over CNAT8 lengths (workers dropped it: every chunk of a two-level CNAT8 "
    "job timed out), and the rounding key held the session, so a rerun of a seed in a new "
    "session rounded otherwise.", "",
    "`make run-mininet RUN_ARGS=\"--profile tofino --switch soft\"` (then `--switch bmv2`), "
    "4 workers on a star, 100 steps of the default MLP, seed 0: test accuracy 0.902 on "
    "both targets and the same model digest on every worker of both (4841e875...), "
    "4.65 bytes per element each way (16 codes under 58 bytes of headers, as projected "
    "above for a pass of 16); 20.8 steps/s on softswitch, 0.78 on BMv2 (771 "
    "retransmissions), both bound by this machine's CPU, so these times describe no network.",
    "",
    "The walk has a twin too, from the same source (`p4src/tna/passes_tna.p4`, included by "
    "both programs; `make p4-twin-mp`, profile `tofino-mp`): 64 CNAT8 codes a packet in 4 "
    "passes of 16, the passes recirculated. `tests/dataplane/test_dp_twin_walk.py` runs it "
    "on both targets, BMv2 differential against softswitch: every segment summed at its own "
    "cells and harvested in order (codes whose sums are powers of two come back exact in all "
    "64 elements, on one switch and up a two-level tree), every pass counted, the results "
    "unbiased within the 9/8 second-moment bound, duplicates, replays and a forged walk "
    "header harmless, exact under chaos, reproducible. "
    "`make run-mininet RUN_ARGS=\"--profile tofino-mp --switch soft\"`, 100 steps, seed 0: "
    "test accuracy 0.902, 1.95 bytes per element each way (64 codes under 58 bytes of "
    "headers: 1.91, as projected below), 11.5 steps/s, CPU-bound; with `--steps 8` BMv2 "
    "and softswitch end with the same model (7077ac28...), as the end-to-end test checks.",
    "",
]


def section() -> list[str]:
    rows = load()
    if not rows:
        return ["## On Tofino (p4src/tna/, make p4-tofino)", "", "No summary committed.", ""]
    out = ["## On Tofino (p4src/tna/, make p4-tofino)", "",
           "The Tofino profile (docs/PROTOCOL.md \"Tofino profile\") compiled by p4c 1.2.5.8's "
           "open-source Tofino back end (p4c-barefoot 9.13.4, `../shared/p4-toolchain-tofino`): "
           "in `p4src/`, `p4c-tofino --target tofino --arch tna -g -DELEMS=N [FLAGS] "
           "tna/agg_tna.p4`, for Tofino 2 `--target tofino2 --arch t2na`, one compile per row "
           "(`p4src/tna/build_tofino.py` has each row's N and flags). Every figure is the "
           "compiler's own (resources.json, metrics.json, table_summary.log, "
           "the last phv_allocation_summary_N.log under `OUT/pipe/logs`), summarized in "
           "`p4src/build/tofino/`, which `tests/test_p4_tofino.py` recompiles and compares. "
           "There is no Tofino model here: the compiler says a program fits the pipe and what "
           "it takes; no packet ran through it.", "",
           *table(rows), "",
           "*Elements per pass*: the elements one pass sums, as compiled; where the compile "
           "with one step more (8 elements, 16 for lanes) failed (below), the most in such "
           "steps that fit, elsewhere a lower bound. *Passes per packet*: the passes every "
           "contribution takes (the walk's segments), so *elements per packet* is their "
           "product. *Stateful ALUs*: the sums' registers (pair registers of two int32 lanes, "
           "or the walk's one register an element) + the slot's (`use`, `bitmap`, "
           "`remaining`, `max_exp`). *Passes of a completing packet*: on Tofino 1 a single-pass "
           "variant's packet that completes a use (or asks for a completed one again) takes a "
           "second pass to read the pair registers' first lanes, as SwitchML's harvest passes "
           "do (Tofino 2's stateful ALUs return both lanes in the first); the walk's reads "
           "its segments back in one pass each but the last.",
           ""]
    nxt = probes()
    if nxt:
        out += ["What binds, as the compiler said at one step more per pass "
                "(`build_tofino.py probe`, `p4src/build/tofino/*.next.json`):", "",
                *binding(rows, nxt), ""]
    out += NOTES[:2] + walk_lines(rows, nxt) + NOTES[2:]
    out += TWIN
    res = project_all()
    out += ["### Projections from what fits (arithmetic, not measurements)", "",
            "Bytes per element on the wire if a packet carries its variant's elements per "
            "packet, elements per pass x passes per packet (frames counted as bench/wire.py "
            f"counts them: {FRAME_OVERHEAD} bytes of Ethernet, IPv4, UDP and AGG headers per "
            "packet, no FCS):", "", *wire(rows), "",
            *projection_notes(rows), "", *projections(res), "",
            *projection_after(res, rows), ""]
    return out


def main() -> int:
    """Writes the section into docs/results.md in place (the benches need not run again)."""
    path = REPO / "docs" / "results.md"
    text = path.read_text()
    new = "\n".join(section()).rstrip() + "\n"
    start = text.find("## On Tofino")
    if start < 0:
        text = text.rstrip() + "\n\n" + new
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + new + ("\n" + text[end + 1:] if end >= 0 else "")
    path.write_text(text)
    print(f"wrote the On Tofino section of {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
