#!/usr/bin/env python3
"""Checks of docs/results.md against its own tables: every *Holm* column holds the verdict
Holm's correction gives over its table's family, recomputed from the printed intervals; and
in the sections CHECKED every decimal number of the prose is one some table of the file
prints (or a stated setting of the run, SETTINGS), so a sentence says no more than a table.

    .venv/bin/python bench/docs_check.py [docs/results.md]

A table's family, for one column of paired intervals ("... [95 % CI]"), is every row with
an interval there, its size in the Holm column's header ("Holm (family of N)"); or, with
"Holm (per COLUMN)", the rows that share COLUMN's value. A Holm column judges the nearest
interval column to its left. A ratio's interval ("1.25x [1.10, 1.42]") is a t interval of
its logarithm.
The printed intervals are rounded, so each test is rebuilt from them (paired.from_interval):
p-values good to about two digits, enough away from 0.05.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

from paired import CANNOT_TELL, EQUAL, from_interval, holm_adjusted

ALPHA = 0.05
_NUM = r"[+-]?\d+(?:\.\d+)?"
INTERVAL = re.compile(rf"^({_NUM})(x)?(?: pp)? \[({_NUM}), ({_NUM})\](?:, n=(\d+))?$")
FAMILY = re.compile(r"family of (\d+)")
PER = re.compile(r"^Holm \(per (.+)\)$")


def tables(text: str) -> list[tuple[int, list[str], list[list[str]]]]:
    """(line number of the header, header cells, body rows) of every markdown table."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and \
                re.match(r"^\|( *:?-+:? *\|)+ *$", lines[i + 1]):
            head = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            j, body = i + 2, []
            while j < len(lines) and lines[j].startswith("|"):
                body.append([c.strip() for c in lines[j].strip().strip("|").split("|")])
                j += 1
            out.append((i + 1, head, body))
            i = j
        else:
            i += 1
    return out


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
            per = PER.match(name)
            if per and per.group(1) not in head:
                problems.append(f"line {line}: {name!r}: no column {per.group(1)!r}")
                continue
            groups: dict[str, list[tuple[int, float]]] = {}
            for r, row in enumerate(body):
                m = INTERVAL.match(row[ci]) if ci < len(row) else None
                if not m:
                    continue
                if not (m.group(5) or seeds is not None):
                    problems.append(f"line {line}: {row[0]!r}: no seeds for {row[ci]!r}")
                    continue
                n = int(m.group(5) or row[seeds])
                v = [float(m.group(k)) for k in (1, 3, 4)]
                if m.group(2):
                    v = [math.log(x) for x in v]
                d = from_interval(*v, n)
                key = row[head.index(per.group(1))] if per else ""
                groups.setdefault(key, []).append(
                    (r, 1.0 if d.low == d.high == d.diff == 0 else d.p))
            fam = FAMILY.search(name)
            tested = sum(len(g) for g in groups.values())
            if fam and int(fam.group(1)) != tested:
                problems.append(f"line {line}: {name!r} but {tested} rows have an "
                                f"interval in {head[ci]!r}")
            judged = [(r, adj) for g in groups.values()
                      for (r, _), adj in zip(g, holm_adjusted([p for _, p in g]), strict=True)]
            for r, adj in judged:
                row = body[r]
                own = row[verdict] if verdict is not None else None
                if own is None or own == EQUAL:
                    want = own
                else:
                    want = own if adj <= ALPHA else CANNOT_TELL
                if want is not None and row[h] != want:
                    problems.append(f"line {line}: {row[0]!r}: {name} says {row[h]!r}, the "
                                    f"correction gives {want!r} (adjusted p {adj:.3g})")
    return problems


# sections whose prose is held to the tables (a title's beginning)
CHECKED = ("PyTorch DDP: time to accuracy", "The seeds' claims")
# numbers the prose may state that are settings of a run, not results
SETTINGS = {"0.9": "SGD momentum", "0.005": "the workload's precision target, nats",
            "0.01": "the equivalence margin, nats, fixed before its runs",
            "4.57": "ln 97, the divergence threshold", "21.33": "compute per step, ms (input)",
            "21.3": "the same, as the caption rounds it"}
_DECIMAL = re.compile(r"(?<![\w.`/])(\d+\.\d+)")


def prose_problems(text: str, checked=CHECKED, settings=SETTINGS) -> list[str]:
    """Decimal numbers in the prose of the `checked` sections that no table of `text`
    prints and that are no stated setting. Integers (seeds, steps, bits) are not checked;
    inline code and image lines are not prose."""
    printed = set()
    for _, head, body in tables(text):
        for cell in [*head, *(c for row in body for c in row)]:
            printed |= {m.group(1) for m in _DECIMAL.finditer(" " + cell)}
    problems = []
    for sec in re.split(r"(?m)^## ", text)[1:]:
        title = sec.splitlines()[0]
        if not title.startswith(tuple(checked)):
            continue
        code = False
        for line in sec.splitlines()[1:]:
            if line.startswith("```"):
                code = not code
            if code or line.startswith(("|", "![", "```")):
                continue
            for m in _DECIMAL.finditer(re.sub(r"`[^`]*`", "", line)):
                if m.group(1) not in printed and m.group(1) not in settings:
                    problems.append(f"{title[:40]}: {m.group(1)} is in no table: "
                                    f"{line.strip()[:100]}")
    return problems


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "docs/results.md"
    problems = holm_problems(path.read_text()) + prose_problems(path.read_text())
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
