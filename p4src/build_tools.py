#!/usr/bin/env python3
"""Builds p4src/build/: compile, compact JSON, hash of the sources.

`python3 p4src/build_tools.py compile OUTDIR [ELEMS]` runs p4c-bm2-ss the one
way this program is compiled, writing OUTDIR/agg.json (without indentation: a
third of the size, same content) and OUTDIR/agg.p4info.txt; `hash` prints the
sha256 over every source the compiled program depends on.
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


def sources() -> list[Path]:
    files = [HERE / "agg.p4", HERE / "gen_elements.py", *sorted((HERE / "include").glob("*.p4"))]
    return [f for f in files if f.exists()]


def source_hash() -> str:
    h = hashlib.sha256()
    for f in sources():
        h.update(f.relative_to(HERE).as_posix().encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def minify(path: Path) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n")


def compile_program(outdir: Path, elems: int) -> None:
    outdir = outdir.resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    # Run from p4src/ on a relative path: the JSON's source_info then names
    # files as p4src/ sees them, the same in every checkout.
    subprocess.run([P4C, *P4C_FLAGS, f"-DELEMS={elems}",
                    "--p4runtime-files", str(outdir / "agg.p4info.txt"),
                    "-o", str(outdir / "agg.json"), "agg.p4"], check=True, cwd=HERE,
                   timeout=7200)    # the wide profile takes ~17 CPU minutes
    minify(outdir / "agg.json")


def main(argv: list[str]) -> int:
    if argv[:1] == ["hash"]:
        print(source_hash())
        return 0
    if argv[:1] == ["compile"] and len(argv) in (2, 3):
        compile_program(Path(argv[1]), int(argv[2]) if len(argv) == 3 else 168)
        return 0
    print("usage: build_tools.py hash | compile OUTDIR [ELEMS]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
