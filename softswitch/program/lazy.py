"""Runs of fields a vector writes, held as that vector until other code needs the fields.

A vector store to a run of fields turns an int64 array into 10^3 Python ints (tolist) and
the next vector read of the run often only wants the array back. This pass, over the
generated source, gives each such run (a lazy run: consecutive fields of one header that is
no metadata, stack or union member, in no field list) one extra slot K of F. A vector
store of the run in a function where nothing else touches it afterwards becomes
`F[K] = array` (read-only, so the copies of F a multicast makes can share it; lanes of
at most 8 bits, which go back as bytes, wrapped to a byte as those would be); while
F[K] is set, the fields' own slots are stale. A vector read of the run takes F[K] when set.
Any other code that may touch the run's slots (any F[...] overlapping them, an index not
known here, F handed to a helper) first writes the array back into the slots and clears
F[K] ("flushes"), at the top of its function, or at the top of a vector group's scalar
fallback for accesses only there. Anything this pass cannot read exactly flushes every
lazy run, so a program it does not understand is only slower, never wrong.
"""

from __future__ import annotations

import re

import numpy as np

from .layout import Layout

# a vector stored into a run of fields (kept for the next read, or as bytes for <= 8 bits)
_KEEP = re.compile(r"^(\s*)F\[(\d+):(\d+)\] = (?:_vkeep\(_vmemo, 'F\[\d+:\d+\]', |(_vtobytes8)\()"
                   r"(.+), (\d+)\)$")
# a header extracted whole by one struct call, and a header copied into another
_EXTRACT = re.compile(r"^(\s*)F\[(\d+):(\d+)\] = unpack_\d+\(D, pos\)$")
_COPY = re.compile(r"^(\s*)F\[(\d+) \+ 1:\d+ \+ (\d+)\] = F\[(\d+) \+ 1:\d+ \+ \d+\]$")
# the fields of a header made valid, zeroed (actions.zero_runs)
_ZERO = re.compile(r"^(\s*)F\[(\d+):(\d+)\] = z_\d+$")
# a vector read of a run of fields
_READ = re.compile(r"_vread_kept\(_vmemo, 'F\[(\d+):(\d+)\]', \w+, \w+, F\[\d+:\d+\], \d+\)"
                   r"|_vread8\(F\[(\d+):(\d+)\], \d+\)")
# generated functions (each handles the runs it touches itself) and the names the generated
# code calls them by
_CALLEE = re.compile(r"(?<![\w.])(?:(?:a|c|t|calc|ps|run|parse|deparse|ck_verify|ck_update"
                     r"|sm_\w+)_\d+|fn|n|st)\($")
_PACK = re.compile(r"(?:pack_\d+\(\*F\[(\d+):(\d+)\]\)|bytes\(F\[(\d+):(\d+)\]\))")
_CONST = re.compile(r"^[\d\s+\-]+$")
FALLBACK = "  # vector fallback"  # ends the `else:` of a vector group's scalar code
MIN_WHOLE = 16  # fields of a header held from its extract or copy on (fewer: not worth it)
ALL = None  # a touch of every lazy run


def _flush(F: list, k: int, lo: int, hi: int) -> None:
    F[lo:hi] = F[k].tolist()
    F[k] = None


def _lazy(v, m: int):
    """v as the read-only int64 array of m lanes that F[K] holds (a copy when it is a view:
    a register bank row must not show through)."""
    if not isinstance(v, np.ndarray) or v.ndim != 1 or v.dtype != np.int64 \
            or not v.flags.owndata:
        v = np.array(np.broadcast_to(np.asarray(v, dtype=np.int64), (m,)))
    v.flags.writeable = False
    return v


def _lazy8(v, m: int):
    """_lazy for lanes of <= 8 bits, wrapped as the bytes a list of them would take."""
    return _lazy(np.asarray(v, dtype=np.int64) & 0xFF, m)


def _from(D: bytes, pos: int, dtype: str, m: int):
    global _PACKED
    v = np.frombuffer(D, dtype, m, pos).astype(np.int64)
    v.flags.writeable = False
    _PACKED = (v, dtype, D[pos:pos + m * int(dtype[-1])])   # '>u4': 4 bytes a lane
    return v


def _copy(F: list, kd: int, ks: int, dlo: int, dhi: int, slo: int, shi: int) -> None:
    """A header copied into another: the vector it is held as, else its fields."""
    v = F[ks]
    if v is None:
        F[dlo:dhi] = F[slo:shi]
    F[kd] = v


_ZEROS: dict = {}


def _zeros(m: int):
    """m zero lanes, one read-only array shared by every packet."""
    v = _ZEROS.get(m)
    if v is None:
        v = _ZEROS[m] = np.zeros(m, np.int64)
        v.flags.writeable = False
    return v


# The last array packed (or extracted) and its bytes: a packet's checksum and deparser, and
# every multicast copy's, pack the same read-only array one after the other. One tuple,
# replaced whole, so engines in other threads never see half of one.
_PACKED: tuple = (None, None, b"")


def _bytes(v, dtype) -> bytes:
    global _PACKED
    p = _PACKED
    if p[0] is v and p[1] == dtype:
        return p[2]
    b = v.astype(dtype).tobytes()
    _PACKED = (v, dtype, b)
    return b


HELPERS = {"_vflush": _flush, "_vlazy": _lazy, "_vlazy8": _lazy8, "_vbytes": _bytes,
           "_vfrom": _from, "_vcopy": _copy, "_vzeros": _zeros}


def _index_range(expr: str):
    """[lo, hi) of the slots F[expr] reaches, or None when expr is not constant."""
    parts = expr.split(":")
    if len(parts) > 3 or not all(_CONST.match(p) for p in parts):
        return None
    try:
        ends = [eval(p) for p in parts[:2]]  # noqa: S307 - digits, spaces, + and - only
    except SyntaxError:
        return None
    return (ends[0], ends[0] + 1) if len(ends) == 1 else (ends[0], ends[1])


def _accesses(line: str):
    """Per F[...] and bare F in a line: (lo, hi) or ALL."""
    out = []
    i = 0
    while True:
        m = re.search(r"\bF\b", line[i:])
        if m is None:
            return out
        s = i + m.start()
        e = s + 1
        if e < len(line) and line[e] == "[":
            depth, j = 0, e
            while j < len(line):
                if line[j] == "[":
                    depth += 1
                elif line[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            out.append(_index_range(line[e + 1:j]))
            i = j + 1
        else:
            if not _CALLEE.search(line[:s]):
                out.append(ALL)
            i = e


def _span(mm) -> tuple[int, int]:
    """(lo, hi) of the first pair of groups of a match that took part."""
    g = [x for x in mm.groups() if x is not None]
    return int(g[0]), int(g[1])


def _special(ln: str, runs: dict, whole: dict):
    """(run written, runs read, lazy code) of a vector store, zeroing, whole extract or
    header copy of lazy runs; None for any other line."""
    m = _KEEP.match(ln)
    if m and (r := (int(m.group(2)), int(m.group(3)))) in runs:
        fn = "_vlazy8" if m.group(4) else "_vlazy"
        return r, (), f"{m.group(1)}F[{runs[r]}] = {fn}({m.group(5)}, {m.group(6)})"
    m = _ZERO.match(ln)
    if m and (r := (int(m.group(2)), int(m.group(3)))) in runs:
        return r, (), f"{m.group(1)}F[{runs[r]}] = _vzeros({r[1] - r[0]})"
    m = _EXTRACT.match(ln)
    if m and (r := (int(m.group(2)), int(m.group(3)))) in whole:
        return r, (), (f"{m.group(1)}F[{runs[r]}] = _vfrom(D, pos, {whole[r]!r}, "
                       f"{r[1] - r[0]})")
    m = _COPY.match(ln)
    if m:
        n = int(m.group(3)) - 1
        d = (int(m.group(2)) + 1, int(m.group(2)) + 1 + n)
        s = (int(m.group(4)) + 1, int(m.group(4)) + 1 + n)
        if d in runs and s in runs:
            return d, (s,), (f"{m.group(1)}_vcopy(F, {runs[d]}, {runs[s]}, {d[0]}, {d[1]}, "
                             f"{s[0]}, {s[1]})")
    return None


class _Fn:
    def __init__(self, start: int):
        self.start = start  # index of the def line
        self.touch: dict = {}  # run -> last line touching it (function level)
        self.touch_all = -1
        self.keeps: list = []  # (line index, run)
        self.regions: list = []  # [else line index, body indent, set of runs, all?]
        self.loops = False


def lazify(lines: list[str], L: Layout, excluded: set[int]) -> tuple[list[str], dict]:
    """The source with lazy runs; {(lo, hi): K}. L.nslots grows by one slot per run."""
    hdrs = [h for h in L.headers.values() if not h.metadata and h.stack is None
            and h.union is None and h.htype.varbit is None]
    dtypes = _whole_header_dtypes(hdrs)
    ok = _chosen_runs(_candidate_runs(lines, dtypes), hdrs, excluded)
    if not ok:
        return lines, {}
    whole = {r: dt for r, dt in dtypes.items() if r in ok}
    runs = {}
    for r in ok:
        runs[r] = L.nslots
        L.nslots += 1
    fns = _scan_functions(lines, runs, whole)
    inserts, repl = _plan_flushes(lines, fns, runs)
    return _rewrite(lines, runs, whole, inserts, repl), runs


def _whole_header_dtypes(hdrs: list) -> dict:
    """Run -> numpy dtype of a header that is exactly that run (fields of one unsigned
    byte-multiple width)."""
    dtypes = {}
    for h in hdrs:
        lo, n = h.base + 1, len(h.htype.fields)
        ws = {(f.width, f.signed) for f in h.htype.fields}
        if n >= MIN_WHOLE and len(ws) == 1:
            w, signed = ws.pop()
            if not signed and w in (8, 16, 32, 64):
                dtypes[lo, lo + n] = np.dtype(f">u{w // 8}").str
    return dtypes


def _candidate_runs(lines: list[str], dtypes: dict) -> set:
    """The runs the source keeps or extracts whole, and the destinations of copies from
    them."""
    cands = set()
    copies = []
    for ln in lines:
        m = _KEEP.match(ln)
        if m:
            cands.add((int(m.group(2)), int(m.group(3))))
        m = _EXTRACT.match(ln)
        if m and (int(m.group(2)), int(m.group(3))) in dtypes:
            cands.add((int(m.group(2)), int(m.group(3))))
        m = _COPY.match(ln)
        if m:
            n = int(m.group(3)) - 1
            d, s = int(m.group(2)) + 1, int(m.group(4)) + 1
            if (d, d + n) in dtypes and dtypes[d, d + n] == dtypes.get((s, s + n)):
                copies.append(((d, d + n), (s, s + n)))
    grown = True
    while grown:  # a copy's destination is held where its source may be
        grown = False
        for d, s in copies:
            if s in cands and d not in cands:
                cands.add(d)
                grown = True
    return cands


def _chosen_runs(cands: set, hdrs: list, excluded: set[int]) -> list:
    """Of the candidates, those inside one header, clear of excluded slots and of every
    other candidate, in order."""
    ok = []
    for lo, hi in sorted(cands):
        if any(s in excluded for s in range(lo, hi)):
            continue
        if not any(h.base + 1 <= lo and hi <= h.base + 1 + len(h.htype.fields) for h in hdrs):
            continue
        if any(r != (lo, hi) and r[0] < hi and lo < r[1] for r in cands):
            continue
        ok.append((lo, hi))
    return ok


def _scan_functions(lines: list[str], runs: dict, whole: dict) -> list[_Fn]:
    """Per generated function, where it touches each run, its fallback regions and the
    lines that could read a run whole."""

    def hits(rng):
        if rng is ALL:
            return list(runs)
        return [r for r in runs if r[0] < rng[1] and rng[0] < r[1]]

    fns: list[_Fn] = []
    cur = None
    region = None
    for idx, ln in enumerate(lines):
        if ln.startswith("def "):
            cur = _Fn(idx)
            fns.append(cur)
            region = None
            continue
        if ln and not ln[0].isspace():
            cur = None
            continue
        if cur is None or not ln.strip():
            continue
        indent = len(ln) - len(ln.lstrip())
        if region is not None and indent <= region[1] - 4:
            region = None
        if ln.endswith(FALLBACK):
            region = [idx, indent + 4, set(), False]
            cur.regions.append(region)
            continue
        if re.match(r"\s*(for|while)\b", ln):
            cur.loops = True
        if region is None:
            special = _special(ln, runs, whole)
            if special is not None:
                cur.keeps.append((idx, *special))
                continue
        text = _READ.sub(lambda mm: "R" if _span(mm) in runs else mm.group(0), ln)
        text = _PACK.sub(lambda mm: "P" if _span(mm) in whole else mm.group(0), text)
        for acc in _accesses(text):
            for r in hits(acc):
                if region is not None:
                    region[2].add(r)
                else:
                    cur.touch[r] = idx
            if acc is ALL and region is None:
                cur.touch_all = idx
            elif acc is ALL:
                region[3] = True
    return fns


def _plan_flushes(lines: list[str], fns: list[_Fn], runs: dict) -> tuple[dict, dict]:
    """The flushes to insert after a line (function entries, fallback regions) and the
    lines a whole-run form replaces: (line -> inserted lines, line -> replacement)."""
    inserts: dict[int, list[str]] = {}
    repl: dict[int, str] = {}
    for f in fns:
        entry = set(f.touch)
        for idx, r, reads, code in f.keeps:
            last = max(f.touch.get(r, -1), f.touch_all)
            if f.loops or last > idx:
                entry.add(r)  # stays what it was, which touches the runs
                entry.update(reads)
                continue
            repl[idx] = code
        if f.touch_all >= 0:
            entry = set(runs)
        if entry:
            body = lines[f.start + 1] if f.start + 1 < len(lines) else "    pass"
            ind = body[:len(body) - len(body.lstrip())] or "    "
            inserts[f.start] = [f"{ind}if F[{runs[r]}] is not None:\n{ind}    "
                                f"_vflush(F, {runs[r]}, {r[0]}, {r[1]})" for r in sorted(entry)]
        for ri, rind, rruns, rall in f.regions:
            rr = set(runs) if rall else rruns
            if rr:
                ind = " " * rind
                inserts[ri] = [f"{ind}if F[{runs[r]}] is not None:\n{ind}    "
                               f"_vflush(F, {runs[r]}, {r[0]}, {r[1]})" for r in sorted(rr)]
    return inserts, repl


def _rewrite(lines: list[str], runs: dict, whole: dict, inserts: dict,
             repl: dict) -> list[str]:
    """The source with reads of a run taken from its slot while it holds the run."""

    def read(mm):
        r = _span(mm)
        if r not in runs:
            return mm.group(0)
        k = runs[r]
        return f"(F[{k}] if F[{k}] is not None else {mm.group(0)})"

    def pack(mm):
        r = _span(mm)
        if r not in whole:
            return mm.group(0)
        k = runs[r]
        return f"(_vbytes(F[{k}], {whole[r]!r}) if F[{k}] is not None else {mm.group(0)})"

    out = []
    for idx, ln in enumerate(lines):
        ln = repl.get(idx, ln)
        out.append(_PACK.sub(pack, _READ.sub(read, ln)))
        out.extend(inserts.get(idx, ()))
    return out
