#!/usr/bin/env python3
"""Checks of docs/results.md against its own tables: every *Holm* column holds the verdict
Holm's correction gives over its table's family, recomputed from the printed intervals; and
the prose of every section says no more than its tables (docs_prose.py).

    .venv/bin/python bench/docs_check.py [docs/results.md]

A table's family, for one column of paired intervals ("... [95 % CI]"), is every row with
an interval there, its size in the Holm column's header ("Holm (family of N)"); or, with
"Holm (per COLUMN)", the rows that share COLUMN's value. A Holm column judges the nearest
interval column to its left. A ratio's interval ("1.25x [1.10, 1.42]") is a t interval of
its logarithm.
The printed intervals are rounded, so each test is rebuilt from them (paired.from_interval)
with every printed number anywhere within half a unit of its last digit: a Holm verdict is
held to the correction where all those readings agree, and either verdict passes where the
printed digits cannot decide (an adjusted p on both sides of 0.05).
"""

from __future__ import annotations

import itertools
import math
import re
import sys
from pathlib import Path

from docs_prose import prose_problems, tables
from paired import CANNOT_TELL, EQUAL, from_interval, holm_adjusted

ALPHA = 0.05
_NUM = r"[+-]?\d+(?:\.\d+)?"
INTERVAL = re.compile(rf"^({_NUM})(x)?(?: pp)? \[({_NUM}), ({_NUM})\](?:, n=(\d+))?$")
FAMILY = re.compile(r"family of (\d+)")
PER = re.compile(r"^Holm \(per (.+)\)$")


def p_range(printed: list[str], ratio: bool, n: int) -> tuple[float, float] | None:
    """The smallest and largest p of a paired test whose estimate and 95 % CI print as
    `printed` (estimate, low, high): each may be anywhere within half a unit of its last
    printed digit. A ratio's interval is a t interval of its logarithm. None: no reading
    puts the estimate within its interval (or a ratio above 0)."""
    ps = []
    for signs in itertools.product((-1, 0, 1), repeat=3):
        v = []
        for text, sign in zip(printed, signs, strict=True):
            digits = len(text.split(".")[1]) if "." in text else 0
            v.append(float(text) + sign * 0.5 * 10 ** -digits)
        if ratio:
            if min(v) <= 0:
                continue
            v = [math.log(x) for x in v]
        if not v[1] <= v[0] <= v[2]:
            continue
        d = from_interval(*v, n)
        ps.append(1.0 if d.low == d.high == d.diff == 0 else d.p)
    return (min(ps), max(ps)) if ps else None


def holm_problems(text: str) -> list[str]:
    """Where a Holm column disagrees with the correction of its table's intervals."""
    problems = []
    for line, head, body in tables(text):
        for h, name in enumerate(head):
            if not name.startswith("Holm"):
                continue
            cols = [c for c in range(h) if "[95 % CI]" in head[c]]
            if not cols:
                problems.append(f"line {line}: {name!r} has no interval column to its left")
                continue
            ci = cols[-1]
            seeds = next((c for c, x in enumerate(head) if x == "seeds"), None)
            verdict = next((c for c in range(ci + 1, h) if head[c] == "verdict"), None)
            if verdict is None:
                problems.append(f"line {line}: {name!r} has no verdict column between it and "
                                f"{head[ci]!r}: nothing to correct")
                continue
            per = PER.match(name)
            if per and per.group(1) not in head:
                problems.append(f"line {line}: {name!r}: no column {per.group(1)!r}")
                continue
            groups: dict[str, list[tuple[int, float]]] = {}
            for r, row in enumerate(body):
                if len(row) != len(head):
                    problems.append(f"line {line + 2 + r}: {len(row)} cells, the header has "
                                    f"{len(head)}")
                    continue
                m = INTERVAL.match(row[ci])
                if not m:
                    continue
                if not (m.group(5) or seeds is not None):
                    problems.append(f"line {line}: {row[0]!r}: no seeds for {row[ci]!r}")
                    continue
                n = int(m.group(5) or row[seeds])
                key = row[head.index(per.group(1))] if per else ""
                ps = p_range([m.group(k) for k in (1, 3, 4)], bool(m.group(2)), n)
                if ps is None:
                    problems.append(f"line {line + 2 + r}: {row[ci]!r}: the estimate is "
                                    "not within its interval")
                    continue
                groups.setdefault(key, []).append((r, ps))
            fam = FAMILY.search(name)
            tested = sum(len(g) for g in groups.values())
            if fam and int(fam.group(1)) != tested:
                problems.append(f"line {line}: {name!r} but {tested} rows have an "
                                f"interval in {head[ci]!r}")
            # Holm's adjusted p grows with every p of the family: the family's smallest and
            # largest p that the printed digits allow bound each row's adjusted p
            judged = [(r, lo, hi) for g in groups.values()
                      for (r, _), lo, hi in zip(g, holm_adjusted([p[0] for _, p in g]),
                                                holm_adjusted([p[1] for _, p in g]),
                                                strict=True)]
            for r, lo, hi in judged:
                row = body[r]
                own = row[verdict]
                if own == EQUAL:
                    want = own
                elif lo <= ALPHA < hi:          # the printed digits cannot decide
                    want = row[h] if row[h] in (own, CANNOT_TELL) else own
                else:
                    want = own if hi <= ALPHA else CANNOT_TELL
                if row[h] != want:
                    problems.append(f"line {line}: {row[0]!r}: {name} says {row[h]!r}, the "
                                    f"correction gives {want!r} (adjusted p {hi:.3g})")
    return problems


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "docs/results.md"
    text = path.read_text()
    problems = holm_problems(text) + prose_problems(text)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
