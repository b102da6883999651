#!/usr/bin/env python3
"""Builds p4src/build/: compile, compact JSON, hash of the sources.

`python3 p4src/build_tools.py compile OUTDIR [ELEMS]` runs p4c-bm2-ss the one
way this program is compiled, writing OUTDIR/agg.json (without indentation: a
third of the size, same content) and OUTDIR/agg.p4info.txt; `hash` prints the
sha256 over every source the compiled program depends on. `compile-twin` and
`hash-twin` do the same for the v1model twin of the Tofino profile
(twin/agg_twin.p4, which shares p4src/tna/'s headers, sizes, walk and the tables written
once for both, *_shared_tna.p4), PASSES > 1 for the walk of packets of several segments.
"""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
P4C = "p4c-bm2-ss"
# LocalCopyPropagation substitutes each `x = x | (x >> k)` of the
# re-compression into the next one, doubling the expression at every step:
# with it the JSON of 256 elements exceeds 100 MB; without it, a few MB.
P4C_FLAGS = ["--arch", "v1model", "--excludeMidendPasses", "P4::LocalCopyPropagation"]


PROGRAMS = {"agg": "agg.p4", "twin": "twin/agg_twin.p4"}


def sources(program: str = "agg") -> list[Path]:
    if program == "twin":
        files = [HERE / "tna" / "gen_tna.py", *sorted((HERE / "twin").glob("*.p4")),
                 *(HERE / "tna" / f for f in ("sizes_tna.p4", "headers_tna.p4",
                                               "elements_tna.p4", "lanes_tna.p4",
                                               "passes_tna.p4")),
                 # the tables and states written once for both programs
                 *sorted((HERE / "tna").glob("*_shared_tna.p4")),
                 *(HERE / "include" / f for f in ("constants.p4", "headers.p4"))]
    else:
        files = [HERE / "agg.p4", HERE / "gen_elements.py",
                 *sorted((HERE / "include").glob("*.p4"))]
    return [f for f in files if f.exists()]


def source_hash(program: str = "agg") -> str:
    h = hashlib.sha256()
    for f in sources(program):
        h.update(f.relative_to(HERE).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def minify(path: Path) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n")


def compile_program(outdir: Path, elems: int, program: str = "agg", passes: int = 1) -> None:
    outdir = outdir.resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    # Run from p4src/ on a relative path: the JSON's source_info then names
    # files as p4src/ sees them, the same in every checkout.
    walk = [f"-DPASSES={passes}"] if passes > 1 else []
    subprocess.run([P4C, *P4C_FLAGS, f"-DELEMS={elems}", *walk,
                    "--p4runtime-files", str(outdir / "agg.p4info.txt"),
                    "-o", str(outdir / "agg.json"), PROGRAMS[program]], check=True, cwd=HERE,
                   timeout=7200)    # the wide profile takes ~17 CPU minutes
    minify(outdir / "agg.json")


def main(argv: list[str]) -> int:
    if argv[:1] in (["hash"], ["hash-twin"]):
        print(source_hash("twin" if argv[0] == "hash-twin" else "agg"))
        return 0
    if argv[:1] == ["compile"] and len(argv) in (2, 3):
        compile_program(Path(argv[1]), int(argv[2]) if len(argv) == 3 else 168)
        return 0
    if argv[:1] == ["compile-twin"] and len(argv) in (3, 4):
        compile_program(Path(argv[1]), int(argv[2]), "twin",
                        int(argv[3]) if len(argv) == 4 else 1)
        return 0
    print("usage: build_tools.py hash | hash-twin | compile OUTDIR [ELEMS] | "
          "compile-twin OUTDIR ELEMS [PASSES]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
