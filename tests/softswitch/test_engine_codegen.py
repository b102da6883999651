"""The load-time optimisations keep BMv2 semantics: tabulated expressions,
fields kept in locals across an action, and bounds guards checked once."""

from softswitch import Switch
from tests.p4 import kit
from tests.p4.kit import assign, expr, extract, field, hexstr, prim

M32 = 0xFFFFFFFF


def decode_expr(c):
    """p4c's shape of CNAT8 decode: +-(1 << (m - 1)) on 32 bits, 0 for m = 0."""
    sh = expr("&", expr("+", expr("&", c, hexstr(0x7F)), hexstr(0xFF)), hexstr(0xFF))
    one = expr("&", expr("<<", hexstr(1), sh), hexstr(M32))
    sign = expr("&", expr(">>", c, hexstr(7)), hexstr(0xFF))
    neg = expr("&", expr("-", hexstr(0), sign), hexstr(M32))
    return expr("&", expr("+", expr("^", one, neg), sign), hexstr(M32))


def reference_decode(code: int) -> int:
    m = code & 0x7F
    v = (1 << (m - 1)) & M32 if m else 0  # shift by 255 leaves nothing in 32 bits
    return (-v) & M32 if code & 0x80 else v


def program(n_elems: int = 4, reg_size: int = 16) -> dict:
    p = kit.Program()
    p.header("h", [("idx", 8)] + [(f"c{i}", 8) for i in range(n_elems)])
    p.header("o", [(f"v{i}", 32) for i in range(n_elems)])
    p.state("start", [extract("h")])
    t = p.scalar("t", 32)
    prims = [prim("add_header", {"type": "header", "value": "o"})]
    prims += [assign(field("o", f"v{i}"), decode_expr(field("h", f"c{i}"))) for i in range(n_elems)]
    p.action("decode", prims)
    acc = []
    for i in range(n_elems):
        r = {"type": "register_array", "value": f"r{i}"}
        p.registers.append({"name": f"r{i}", "id": i, "size": reg_size, "bitwidth": 32})
        acc += [prim("register_read", t, r, field("h", "idx")),
                assign(field("o", f"v{i}"),
                       expr("&", expr("+", field("o", f"v{i}"), t), hexstr(M32))),
                prim("register_write", r, field("h", "idx"), field("o", f"v{i}"))]
    acc.append(assign(field("standard_metadata", "egress_spec"), hexstr(1)))
    p.action("accumulate", acc)
    p.call("ingress", "dec_t", "decode", next_node="acc_t")
    p.call("ingress", "acc_t", "accumulate")
    return p.json()


def test_tabulated_decode_matches_reference_for_every_code():
    sw = Switch(native=False)
    sw.load(program(n_elems=4, reg_size=1))
    assert "tab_" in sw.program_source  # the decode became a table lookup
    for base in range(0, 256, 4):
        codes = bytes(range(base, base + 4))
        [(_, out)] = sw.process(0, b"\x07" + codes)  # index 7: outside the register
        vals = [int.from_bytes(out[5 + 4 * i : 9 + 4 * i], "big") for i in range(4)]
        assert vals == [reference_decode(c) for c in codes]


def test_register_accumulation_with_guards_hoisted_and_out_of_range():
    sw = Switch(native=False)
    sw.load(program(n_elems=4, reg_size=16))
    assert "if f" in sw.program_source and "else:" in sw.program_source
    pkt = b"\x03" + bytes([1, 2, 0x81, 0])  # +1, +2, -1, 0
    outs = [sw.process(0, pkt)[0][1] for _ in range(3)]
    sums = [int.from_bytes(outs[-1][5 + 4 * i : 9 + 4 * i], "big") for i in range(4)]
    assert sums == [3, 6, (-3) & M32, 0]
    assert [sw.registers[f"r{i}"].read(3) for i in range(4)] == sums
    # index 200 is out of range: no read (t keeps its per-packet 0), no write
    [(_, out)] = sw.process(0, b"\xc8" + bytes([1, 1, 1, 1]))
    assert [sw.registers[f"r{i}"].read(3) for i in range(4)] == sums
    assert [int.from_bytes(out[5 + 4 * i : 9 + 4 * i], "big") for i in range(4)] == [1] * 4
    assert sw.stats["errors"] == 0


def doubling(leaf, k):
    """A tree p4c makes by substituting a temporary into both of its uses, k times."""
    e = leaf
    for i in range(k):
        e = expr("&", expr("+", expr("^", e, hexstr(i + 1)), e), hexstr(M32))
    return e


def chain(leaf, k):
    e = leaf
    for i in range(k):
        e = expr("&", expr("+", e, hexstr(i)), hexstr(M32))
    return e


def test_exponential_and_deep_trees_compile_to_small_code():
    p = kit.Program()
    p.header("h", [("a", 32)])
    p.header("o", [("x", 32), ("y", 32)])
    p.state("start", [extract("h")])
    p.action("big", [
        prim("add_header", {"type": "header", "value": "o"}),
        assign(field("o", "x"), doubling(field("h", "a"), 24)),  # 2^24 leaves as a tree
        assign(field("o", "y"), chain(field("h", "a"), 600)),  # 1800 levels deep
        assign(field("standard_metadata", "egress_spec"), hexstr(1)),
    ])
    p.call("ingress", "big_t", "big")
    sw = Switch(native=False)
    sw.load(p.json())
    assert len(sw.program_source) < 200_000
    for a in (0, 1, 0xDEADBEEF):
        x = a
        for i in range(24):
            x = ((x ^ (i + 1)) + x) & M32
        y = (a + sum(range(600))) & M32
        [(_, out)] = sw.process(0, a.to_bytes(4, "big"))
        assert out[4:] == x.to_bytes(4, "big") + y.to_bytes(4, "big")


def test_struct_plans_read_and_write_any_byte_aligned_widths():
    """struct_read / struct_write against the bit string the fields make, for random
    widths: odd ones straddling items, and long runs (thousands of fields)."""
    import random
    import struct

    from softswitch.program.module import struct_read, struct_write

    rng = random.Random(4)
    cases = [[rng.choice([1, 3, 7, 8, 9, 12, 16, 24, 31, 32, 33, 48, 63, 64, 65])
              for _ in range(rng.randint(1, 12))] for _ in range(300)]
    cases += [[8] * 1456, [32] * 1456, [4, 12] * 500]
    for widths in cases:
        widths = widths + [8 - sum(widths) % 8] if sum(widths) % 8 else widths
        vals = [rng.getrandbits(w) for w in widths]
        bits = "".join(format(v, f"0{w}b") for v, w in zip(vals, widths, strict=True))
        data = int(bits, 2).to_bytes(len(bits) // 8, "big")
        fmt, exprs = struct_read(widths, "t")
        t = struct.unpack(fmt, data)
        assert [eval(e, {"t": t}) for e in exprs] == vals  # noqa: S307
        wfmt, items = struct_write(widths, [f"v[{i}]" for i in range(len(widths))])
        assert struct.pack(wfmt, *[eval(e, {"v": vals}) for e in items]) == data  # noqa: S307
