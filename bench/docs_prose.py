"""The prose of docs/results.md against the tables beside it: every decimal number of a
section's sentences is one its own tables print, or a ratio of two of their numbers, or a
stated setting of a run; so a sentence says no more than a table. The rules:

- *printed*: a decimal some table of the same `## ` section prints (its `###` parts
  included), or that a fenced code block there prints (a bench's output pasted as it
  printed it), written with the same digits: 2.2 is not 2.21, a rounded figure says
  more than the table.
- *ratio*: "N.NNx", "N.NN times" or either end of a range of them ("1.06-2.21x") may be
  a / b, a and b the leading numbers of two rows of one column, or of two cells of one
  row, of one table of the section, every such row named in the ratio's sentence (each
  text cell before its first numbers appears there). Rounding: a / b, rounded half away
  to the digits the ratio is written with, is the ratio: |a / b - N.NN| <= half a unit of
  its last digit.
- *range*: "a-b" or "a to b" of decimals: each end is checked as above.
- *setting*: a key of SETTINGS, an input of a run that the reader chose (a number or a
  phrase around one), never a result.
- A paragraph that names another section, by the start of its title (`##` or `###`) in
  quotes ("On Tofino") or as "the NAME table" (NAME the bench NAME.py of a `##` title,
  or the first word of a `###` title), may also use that section's tables.

Integers (seeds, steps, bits, percentages) are not checked; inline code and image lines
are not prose.
"""

from __future__ import annotations

import re


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


# sections whose prose is held to their tables (a title's beginning; "" is every section)
CHECKED = ("",)
# Numbers the prose may state without a table: inputs of a run, each a setting the reader
# chose before it ran, never a result (a measured figure belongs in a table). A key is the
# number alone or a phrase around it, which then must be there.
SETTINGS = {"0.9": "SGD momentum", "0.005": "the workload's precision target, nats",
            "0.01": "the equivalence margin, nats, fixed before its runs",
            "4.57": "ln 97, the divergence threshold",
            "21.33": "an earlier compute per step, ms (input)",
            "2.03 ms": "MNIST-1D's compute per step, ms (input)",
            "compute-ms 2.03": "the same, in a command",
            "compute 2.0 ms": "the same, as the caption rounds it",
            "13.2 ms": "charlm's compute per step, ms (input)",
            "compute-ms 13.2": "the same, in a command",
            "2.35 nats": "charlm's target, fixed before its runs",
            "lr 0.1": "the learning rate of the MNIST-1D runs",
            "half-width of 0.3 pp": "the 95 % half-width a seed plan is sized for "
                                    "(paired.HALF_WIDTH_PP)",
            "at most 0.6 up and 1.1 down": "the 4-bit work's byte targets, set before it",
            "1.22e9 passes/s": "a Tofino 1 pipe's rate, assumed by the projection",
            "1.5e9 passes/s": "a Tofino 2 pipe's rate, assumed by the projection"}
# a decimal (1.5e9 included); 1.15.0 is a version, not a number
_PROSE_NUM = r"(?<![\w.`/])(\d+\.\d+(?:e[+-]?\d+)?)(?!\.?\d)"
_DECIMAL = re.compile(_PROSE_NUM)
_LEADING = re.compile(r"[+-]?(\d+(?:\.\d+)?(?:e[+-]?\d+)?)")  # a cell's figure, unsigned
# a ratio: "1.35x", "1.35 times", or the low end of a range of them ("1.06-2.21x")
_RATIO = re.compile(rf"{_PROSE_NUM}(?:x|\s+times)\b"
                    rf"|{_PROSE_NUM}x?(?=(?:-|\s+to\s+)\d+\.\d+(?:x|\s+times)\b)")
_NAMED = re.compile(r'"([^"]+)"|\bthe ([\w-]+) table\b')


def sections(text: str) -> list[tuple[str, str]]:
    """(title, body) of every `## ` section; its `### ` subsections are part of it."""
    return [(s.split("\n", 1)[0], s.partition("\n")[2])
            for s in re.split(r"(?m)^## ", text)[1:]]


def _key(row: list[str]) -> list[set[str]]:
    """What names a row: its text cells before its first run of more than two numbers
    (part, method; placement, the density and union skipped, variant), each as itself or
    one of its parts ("C_nat INA (CNAT8)" is also "C_nat INA" and "CNAT8")."""
    key, numbers = [], 0
    for cell in row:
        if not re.search(r"[A-Za-z]", cell) or re.match(r"[+-]?\d", cell):
            numbers += 1
            if numbers > 2 or not key:
                break
            continue
        if numbers:
            key, numbers = key + [None], 0
        key.append({p.strip() for p in [cell, *re.split(r"[(),;]", cell)]
                    if len(p.strip()) > 2})
    return [k for k in key if k]


def printed(body: str) -> tuple[set[str], list[list[tuple[list[set[str]], list]]]]:
    """The decimals a section prints, in its tables or in its fenced code (a bench's output
    pasted as it printed it); and each table as rows of (key, the leading number of each
    cell or None): what a ratio may be the quotient of."""
    seen, found = set(), []
    for _, head, rows in tables(body):
        for cell in [*head, *(c for row in rows for c in row)]:
            seen |= set(_DECIMAL.findall(" " + cell))
        found.append([(_key(row), [float(m.group(1)) if m else None for m in
                                   (_LEADING.match(c) for c in row)]) for row in rows])
    code = re.findall(r"(?ms)^```[^\n]*\n(.*?)^```", body)
    seen |= {m for block in code for m in _DECIMAL.findall(block)}
    return seen, found


def _quotient(written: str, found, sentence: str) -> bool:
    """Whether `written` is a / b for two numbers of one table: two rows of one column or
    two cells of one row, every row the sentence names (each cell of its key appears in
    it). The quotient is rounded to the digits `written` has: it passes within half a unit
    of its last digit."""
    w, half = float(written), 0.5 * 10.0 ** -len(written.split(".")[1]) + 1e-12

    def near(pairs):
        return any(a is not None and b and abs(a / b - w) <= half for a, b in pairs)

    for rows in found:
        named = [nums for key, nums in rows
                 if key and all(any(x in sentence for x in cell) for cell in key)]
        if any(near((a, b) for a in nums for b in nums) for nums in named):
            return True
        width = max((len(n) for n in named), default=0)
        for c in range(width):
            col = [n[c] for n in named if c < len(n)]
            if near((a, b) for a in col for b in col):
                return True
    return False


def _paragraphs(body: str) -> list[list[str]]:
    """The prose lines of a section by paragraph (a list item is one); tables, images and
    fenced code are not prose, and inline code is dropped."""
    out, para, code = [], [], False
    for line in body.splitlines():
        if line.startswith("```"):
            code = not code
            continue
        prose = not (code or line.startswith(("|", "![", "#")) or not line.strip())
        if not prose or line.startswith("- "):
            out, para = out + [para] if para else out, []
        if prose:
            para.append(re.sub(r"`[^`]*`", "", line))
    return out + [para] if para else out


def prose_problems(text: str, checked=CHECKED, settings=SETTINGS) -> list[str]:
    """The decimal numbers in the prose of the `checked` sections that break the rules
    above, one line each: section, number, its sentence."""
    secs = sections(text)
    found = {title: printed(body) for title, body in secs}

    def named(para: str) -> set[str]:
        out = set()
        for title, body in secs:
            heads = [title] + re.findall(r"(?m)^### (.*)$", body)
            words = set(re.findall(r"bench/(\w+)\.py", title)) | \
                {h.split()[0].lower() for h in heads[1:]}
            for q, name in _NAMED.findall(para):
                if (q and any(h.startswith(q) for h in heads)) or name.lower() in words:
                    out.add(title)
        return out

    problems = []
    for title, body in secs:
        if not title.startswith(tuple(checked)):
            continue
        for para in _paragraphs(body):
            para_text = " ".join(para)
            seen, columns = set(found[title][0]), list(found[title][1])
            for other in named(para_text) - {title}:
                seen |= found[other][0]
                columns += found[other][1]
            ratios = {m.start(m.lastindex) for m in _RATIO.finditer(para_text)}
            for m in _DECIMAL.finditer(para_text):
                x, ratio = m.group(1), m.start(1) in ratios
                if x in seen or _setting(x, m.start(1), para_text, settings):
                    continue
                sentence = _sentence(para_text, m.start(1))
                if ratio and _quotient(x, columns, sentence):
                    continue
                what = " nor the quotient of two rows it names" if ratio else ""
                problems.append(f"{title[:40]}: {x} is in no table{what}: "
                                f"{sentence.strip()[:100]}")
    return problems


def _sentence(text: str, at: int) -> str:
    """The sentence of `text` that holds position `at`."""
    ends = [m.end() for m in re.finditer(r"[.;:!?]\s+(?=[A-Z*(\"_])", text)]
    return text[max([0] + [e for e in ends if e <= at]):
                min([len(text)] + [e for e in ends if e > at])]


def _setting(x: str, at: int, text: str, settings) -> bool:
    """Whether the number at `at` is a stated setting: a key of `settings` that is the
    number itself, or a phrase around it ("lr 0.1")."""
    return any(m.start() <= at < m.end() and x in k for k in settings
               for m in re.finditer(rf"(?<![\w.]){re.escape(k)}(?![\w.]?\d)", text))
