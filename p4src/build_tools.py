#!/usr/bin/env python3
"""Helpers for p4src/build/: the hash of the sources and a compact JSON.

`python3 p4src/build_tools.py hash` prints the sha256 over every source the
compiled program depends on; `minify FILE` rewrites p4c's JSON without
indentation (a third of the size, same content).
"""

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


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


def main(argv: list[str]) -> int:
    if argv[:1] == ["hash"]:
        print(source_hash())
        return 0
    if argv[:1] == ["minify"] and len(argv) == 2:
        minify(Path(argv[1]))
        return 0
    print("usage: build_tools.py hash | minify FILE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
