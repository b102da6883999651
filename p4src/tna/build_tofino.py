#!/usr/bin/env python3
"""Compiles the Tofino profile and keeps a compact summary of what the compiler reported.

`python3 p4src/tna/build_tofino.py compile VARIANT [OUTDIR]` runs p4c-tofino the one way a
variant is compiled (VARIANTS) into OUTDIR (default build/tofino-out/VARIANT, not
committed); `summary VARIANT OUTDIR` prints the summary read from OUTDIR/pipe/logs
(resources.json, metrics.json, table_summary.log, phv_allocation_summary_N.log) as JSON;
`build VARIANT` does both and writes p4src/build/tofino/VARIANT.json, the committed file a
test compares; `probe VARIANT` compiles it with one step more (8 elements, 16 for lanes)
and keeps the compiler's errors in p4src/build/tofino/VARIANT.next.json (what binds).
"""

import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository: protocol/
from protocol.encodings import BY_NAME  # noqa: E402
from protocol.profiles import FAMILIES  # noqa: E402
from protocol.sizes import TNA_PIPES, TNA_POOL_SIZE  # noqa: E402

HERE = Path(__file__).resolve().parent
P4SRC = HERE.parent
PROGRAM = "tna/agg_tna.p4"
OUT = P4SRC / "build" / "tofino-out"
SUMMARIES = P4SRC / "build" / "tofino"
P4C = "p4c-tofino"

# name: (target, arch, elements per pass, extra flags, harvest passes a result takes).
# Elements per pass: the most, in steps of 8, that compile (docs/results.md "On Tofino").
# Harvest passes: Tofino 1 reads a pair register's first lane in a second pass; a packet of
# PASSES segments (-DPASSES=N, passes_tna.p4) reads its sums back in N - 1 passes more.
# fixed32: FIXED32 in and out (SwitchML's design); cnat8-in: CNAT8 contributions decoded by
# table, FIXED32 results; cnat8: CNAT8 both ways, results re-compressed in the egress;
# LANE_FAMILY: the family (protocol/profiles.py) whose contributions are a lane encoding
# (protocol/encodings.py `lanes`), summed in 16-bit lanes with their results (LANES_ONLY:
# four elements a pair register, so its elements per pass go in steps of 16); cnat8-mp:
# CNAT8 both ways in packets of several segments, one summed a pass, the passes walking
# the pipes.
(LANE_FAMILY,) = (f.name for f in FAMILIES.values() if BY_NAME[f.contribution].lanes)
VARIANTS = {
    "fixed32-t1": ("tofino", "tna", 64, [], 1),
    "cnat8-in-t1": ("tofino", "tna", 48, ["-DWITH_CNAT8"], 1),
    "cnat8-t1": ("tofino", "tna", 16, ["-DCNAT8_RESULTS"], 1),
    "fixed32-t2": ("tofino2", "t2na", 88, [], 0),
    "cnat8-in-t2": ("tofino2", "t2na", 72, ["-DWITH_CNAT8"], 0),
    "cnat8-t2": ("tofino2", "t2na", 16, ["-DCNAT8_RESULTS"], 0),
    f"{LANE_FAMILY}-t1": ("tofino", "tna", 16, ["-DLANES_ONLY"], 1),
    f"{LANE_FAMILY}-t2": ("tofino2", "t2na", 32, ["-DLANES_ONLY"], 0),
    # A pool of 2048 slots: a window that covers 100 Gbit/s x a round trip the passes
    # lengthen (docs/STEPTIME.md "Pipes and passes"); the registers take SRAM, not stages.
    "cnat8-mp-t1": ("tofino", "tna", 16, ["-DCNAT8_RESULTS", "-DPASSES=4", "-DPOOL_SIZE=2048"],
                    3),
    "cnat8-mp-t2": ("tofino2", "t2na", 16,
                    ["-DCNAT8_RESULTS", "-DPASSES=8", "-DPOOL_SIZE=2048"], 7),
}
PIPES = TNA_PIPES           # both targets' pipes
POOL_SIZE = TNA_POOL_SIZE   # sizes_tna.p4's default (tests/test_protocol.py compares them)


def flag(name: str, key: str, default: int) -> int:
    """A -DKEY=N of the variant's flags, or the program's default."""
    for f in VARIANTS[name][3]:
        if f.startswith(f"-D{key}="):
            return int(f.split("=", 1)[1])
    return default


def passes(name: str) -> int:
    return flag(name, "PASSES", 1)


def sources() -> list[Path]:
    """What every variant is compiled from: the TNA program's files (its generated elements
    included), their generator and the protocol's headers and constants it includes."""
    return [*sorted(HERE.glob("*.p4")), HERE / "gen_tna.py",
            *(P4SRC / "include" / f for f in ("constants.p4", "headers.p4"))]


def source_hash() -> str:
    """sha256 over sources(), each named relative to p4src/: a summary records the sources
    it was compiled from, so a test can tell a stale one without recompiling."""
    h = hashlib.sha256()
    for f in sources():
        h.update(f.relative_to(P4SRC).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def step(name: str) -> int:
    """The elements one more step of a variant adds: a word of sums, or two lanes' worth."""
    return 16 if "-DLANES_ONLY" in VARIANTS[name][3] else 8


def command(name: str, outdir: Path, elems: int | None = None) -> list[str]:
    target, arch, default, flags, _ = VARIANTS[name]
    return [P4C, "--target", target, "--arch", arch, "-g", f"-DELEMS={elems or default}",
            *flags, "-o", str(outdir), PROGRAM]


def compile_variant(name: str, outdir: Path) -> float:
    outdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    # Run from p4src/ on a relative path, so the logs name files the same in every checkout.
    subprocess.run(command(name, outdir), check=True, cwd=P4SRC, timeout=3600,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def probe(name: str, outdir: Path) -> dict:
    """Compiles the variant with one step more than it has: what the compiler says."""
    elems = VARIANTS[name][2] + step(name)
    outdir.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(command(name, outdir, elems), cwd=P4SRC, timeout=7200,
                         capture_output=True, text=True)
    return {"variant": name, "elements_per_pass": elems, "fits": run.returncode == 0,
            "errors": error_lines(run.stdout + run.stderr, outdir)[:4]}


def error_lines(text: str, outdir: Path) -> list[str]:
    """The compiler's error lines (with the count PHV allocation gives on the next line),
    the output directory written OUT."""
    lines = [ln.strip().replace(str(outdir), "OUT") for ln in text.splitlines()]
    out = []
    for k, ln in enumerate(lines):
        if not re.search(r"(^|\s)error:", ln):
            continue
        if "PHV allocation was not successful" in ln and k + 1 < len(lines):
            ln = f"{ln}: {lines[k + 1]}"
        out.append(ln)
    return out


def _stages_line(text: str, what: str) -> int:
    found = re.findall(rf"Number of stages for {what} table allocation: (\d+)", text)
    return int(found[-1])


def summarize(name: str, outdir: Path) -> dict:
    """The compiler's figures for one variant; nothing of the machine or the time."""
    target, arch, elems, flags, recirc = VARIANTS[name]
    logs = outdir / "pipe" / "logs"
    res = json.loads((logs / "resources.json").read_text())["resources"]["mau"]
    metrics = json.loads((logs / "metrics.json").read_text())
    summary_log = (logs / "table_summary.log").read_text()
    stages = res["mau_stages"]
    per_stage = [{
        "stage": st["stage_number"],
        "stateful_alus": len(st["meter_alus"]["meters"]),
        "logical_tables": len(st["logical_tables"]["ids"]),
        "srams": len(st["rams"]["srams"]),
        "tcams": len(st["tcams"]["tcams"]),
    } for st in stages]
    users = [u["used_by"] for st in stages for m in st["meter_alus"]["meters"]
             for u in m["usages"]]
    phv = metrics["phv"]

    def phv_bits(kind: str) -> int:
        return sum(c["bits_occupied"] for c in phv[kind])

    def phv_containers(kind: str) -> int:
        return sum(c["containers_occupied"] for c in phv[kind])

    # The last round of PHV allocation is the one the compiler kept.
    rounds = sorted(logs.glob("phv_allocation_summary_*.log"),
                    key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    phv_text = rounds[-1].read_text()
    overall = re.search(r"Overall PHV Usage\s*\|\s*(\d+)[^|]*\|\s*(\d+)[^\n]*\|\s*(\d+)\s*\|\s*$",
                        phv_text, re.M)
    return {
        "variant": name,
        "target": target,
        "arch": arch,
        "flags": flags,
        "elements_per_pass": elems,
        # A packet's segments, one summed a pass; the pipes those passes walk; the passes
        # the packet that completes a use takes beyond them to read the sums back.
        "passes_per_packet": passes(name),
        "elements_per_packet": elems * passes(name),
        "pipes": min(passes(name), PIPES),
        "harvest_passes": recirc,
        "recirculations_per_result": passes(name) - 1 + recirc,
        "pool_size": flag(name, "POOL_SIZE", POOL_SIZE),
        "sources_sha256": source_hash(),
        "stages_available": res["nStages"],
        "stages_ingress": _stages_line(summary_log, "ingress"),
        "stages_egress": _stages_line(summary_log, "egress"),
        "stateful_alus": sum(s["stateful_alus"] for s in per_stage),
        # The sums' registers the compiler placed, the rest the slot's: two int32 elements
        # each, four in 16-bit lanes (LANES_ONLY), one in the walk's (PASSES > 1).
        "pair_registers": sum(1 for u in users if re.search(r"\.(pair|esum)\d+\.acc$", u)),
        "elements_per_pair_register": 4 if "-DLANES_ONLY" in flags else
        1 if passes(name) > 1 else 2,
        "stateful_alus_available": stages[0]["meter_alus"]["nAlus"] * res["nStages"],
        "srams": metrics["mau"]["srams"],
        "tcams": metrics["mau"]["tcams"],
        "map_rams": metrics["mau"]["map_rams"],
        "logical_tables": metrics["mau"]["logical_tables"],
        # Tofino 1 has normal and tagalong containers, Tofino 2 normal, mocha and dark.
        "phv_bits": {kind: phv_bits(kind) for kind in sorted(phv)},
        "phv_containers": {kind: phv_containers(kind) for kind in sorted(phv)},
        "phv_overall_containers": int(overall.group(1)),
        "phv_overall_bits": int(overall.group(2)),
        "phv_overall_bits_available": int(overall.group(3)),
        "per_stage": per_stage,
    }


def main(argv: list[str]) -> int:
    if argv == ["list"]:        # the order `make p4-tofino` compiles them in: Tofino 1 first
        print(" ".join(sorted(VARIANTS, key=lambda v: v.rsplit("-", 1)[1])))
        return 0
    if len(argv) >= 2 and argv[0] == "probe" and argv[1] in VARIANTS:
        name = argv[1]
        result = probe(name, Path(argv[2]).resolve() if len(argv) > 2 else OUT / f"{name}+8")
        SUMMARIES.mkdir(parents=True, exist_ok=True)
        (SUMMARIES / f"{name}.next.json").write_text(json.dumps(result, indent=1) + "\n")
        return 0
    if len(argv) >= 2 and argv[0] in ("compile", "summary", "build") and argv[1] in VARIANTS:
        name = argv[1]
        outdir = Path(argv[2]).resolve() if len(argv) > 2 else OUT / name
        if argv[0] in ("compile", "build"):
            secs = compile_variant(name, outdir)
            print(f"{name}: compiled in {secs:.0f} s into {outdir}", file=sys.stderr)
        summary = summarize(name, outdir)
        text = json.dumps(summary, indent=1, sort_keys=True) + "\n"
        if argv[0] == "build":
            SUMMARIES.mkdir(parents=True, exist_ok=True)
            (SUMMARIES / f"{name}.json").write_text(text)
        else:
            sys.stdout.write(text)
        return 0
    print(f"usage: build_tofino.py list | compile|summary|build|probe VARIANT [OUTDIR]; variants: "
          f"{', '.join(VARIANTS)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
