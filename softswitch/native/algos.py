"""Hash algorithms (softswitch/hashes.py's, bit for bit) and random draws, as IR functions.

Each algorithm is `i64 @name(ptr buf, i64 n)` over n bytes and returns the unsigned result
in the i64's bits. CRCs are table driven with hashes.Crc's parameters. Random numbers come
from splitmix64 seeded by the switch (their values differ from the Python tier's, as BMv2's
differ from both).
"""

from __future__ import annotations

from .. import hashes
from .ir import Module, Unsupported

# name -> (width, polynomial, init, xor out, reflected in, reflected out), as hashes.py
CRCS = {
    "crc16": (16, 0x8005, 0, 0, True, True),
    "crc16_custom": (16, 0x8005, 0, 0, True, True),
    "crc32": (32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True),
    "crc32_custom": (32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True),
    "crcCCITT": (16, 0x1021, 0xFFFF, 0, False, False),
    "crc8_custom": (8, 0x07, 0, 0, False, False),
    "crc64_custom": (64, 0x1B, 0, 0, True, True),
}

_CSUM16 = """define internal i64 @{name}(ptr noalias %buf, i64 %n) {{
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i2, %body]
  %s = phi i64 [0, %entry], [%s2, %body]
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %body, label %tail
body:
  %p = getelementptr inbounds i8, ptr %buf, i64 %i
  %w = load i16, ptr %p, align 1
  %wb = call i16 @llvm.bswap.i16(i16 %w)
  %wz = zext i16 %wb to i64
  %s2 = add i64 %s, %wz
  %i2 = add i64 %i, 2
  br label %head
tail:
  %odd = icmp slt i64 %i, %n
  br i1 %odd, label %last, label %fold
last:
  %pl = getelementptr inbounds i8, ptr %buf, i64 %i
  %b = load i8, ptr %pl
  %bz = zext i8 %b to i64
  %bs = shl i64 %bz, 8
  %s3 = add i64 %s, %bs
  br label %fold
fold:
  %f = phi i64 [%s, %tail], [%s3, %last], [%f2, %fold]
  %lo = and i64 %f, 65535
  %hi = lshr i64 %f, 16
  %f2 = add i64 %lo, %hi
  %again = icmp ugt i64 %f2, 65535
  br i1 %again, label %fold, label %done
done:
  %r = xor i64 %f2, 65535
  ret i64 %r
}}"""

_CRC = """define internal i64 @{name}(ptr noalias %buf, i64 %n) {{
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i2, %body]
  %r = phi i64 [{init}, %entry], [%r2, %body]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %out
body:
  %p = getelementptr inbounds i8, ptr %buf, i64 %i
  %b = load i8, ptr %p
  %bz = zext i8 %b to i64
{refin}
  %top = lshr i64 %r, {shift}
  %x = xor i64 %bi, %top
  %x8 = and i64 %x, 255
  %tp = getelementptr inbounds i64, ptr {table}, i64 %x8
  %t = load i64, ptr %tp
  %rs = shl i64 %r, 8
  %rm = and i64 %rs, {mask}
  %r2 = xor i64 %t, %rm
  %i2 = add i64 %i, 1
  br label %head
out:
{refout}
  %res = xor i64 %ro, {xorout}
  ret i64 %res
}}"""

_REFLECT = """define internal i64 @ns.reflect(i64 %v, i64 %bits) {
entry:
  br label %head
head:
  %k = phi i64 [0, %entry], [%k2, %body]
  %x = phi i64 [%v, %entry], [%x2, %body]
  %r = phi i64 [0, %entry], [%r2, %body]
  %more = icmp slt i64 %k, %bits
  br i1 %more, label %body, label %done
body:
  %bit = and i64 %x, 1
  %rs = shl i64 %r, 1
  %r2 = or i64 %rs, %bit
  %x2 = lshr i64 %x, 1
  %k2 = add i64 %k, 1
  br label %head
done:
  ret i64 %r
}"""

_IDENTITY = """define internal i64 @{name}(ptr noalias %buf, i64 %n) {{
entry:
  %m = call i64 @llvm.smin.i64(i64 %n, i64 8)
  br label %head
head:
  %i = phi i64 [0, %entry], [%i2, %body]
  %r = phi i64 [0, %entry], [%r2, %body]
  %more = icmp slt i64 %i, %m
  br i1 %more, label %body, label %done
body:
  %p = getelementptr inbounds i8, ptr %buf, i64 %i
  %b = load i8, ptr %p
  %bz = zext i8 %b to i64
  %rs = shl i64 %r, 8
  %r2 = or i64 %rs, %bz
  %i2 = add i64 %i, 1
  br label %head
done:
  ret i64 %r
}}"""

# xor of big-endian chunks of {k} bytes, the last zero padded
_XOR = """define internal i64 @{name}(ptr noalias %buf, i64 %n) {{
entry:
  br label %head
head:
  %i = phi i64 [0, %entry], [%i2, %body]
  %r = phi i64 [0, %entry], [%r2, %body]
  %more = icmp slt i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %p = getelementptr inbounds i8, ptr %buf, i64 %i
  %b = load i8, ptr %p
  %bz = zext i8 %b to i64
  %pos = urem i64 %i, {k}
  %sh0 = sub i64 {k1}, %pos
  %sh = mul i64 %sh0, 8
  %v = shl i64 %bz, %sh
  %r2 = xor i64 %r, %v
  %i2 = add i64 %i, 1
  br label %head
done:
  ret i64 %r
}}"""

# splitmix64: the state is the first cell of the context's RNG array. ns.below(n), 1 <= n <=
# 2^64: uniform in [0, n) by rejection of the last 2^64 mod n draws, divided as i64 (an i128
# division would call the compiler's runtime, which the JIT cannot resolve here)
_RNG = """define internal i64 @ns.rng(ptr noalias %C) {{
entry:
  %sp = getelementptr inbounds i64, ptr %C, i64 {slot}
  %si = load i64, ptr %sp
  %st = inttoptr i64 %si to ptr
  %s = load i64, ptr %st
  %s1 = add i64 %s, -7046029254386353131
  store i64 %s1, ptr %st
  %a = lshr i64 %s1, 30
  %b = xor i64 %s1, %a
  %c = mul i64 %b, -4658895280553007687
  %d = lshr i64 %c, 27
  %e = xor i64 %c, %d
  %f = mul i64 %e, -7723592293110705685
  %g = lshr i64 %f, 31
  %h = xor i64 %f, %g
  ret i64 %h
}}

define internal i128 @ns.below(ptr noalias %C, i128 %n) {{
entry:
  %full = icmp ugt i128 %n, 18446744073709551615
  br i1 %full, label %any, label %part
any:
  %a = call i64 @ns.rng(ptr %C)
  %az = zext i64 %a to i128
  ret i128 %az
part:
  %n64 = trunc i128 %n to i64
  %neg = sub i64 0, %n64
  %m = urem i64 %neg, %n64
  %lim = sub i64 0, %m
  %all = icmp eq i64 %m, 0
  br label %draw
draw:
  %r = call i64 @ns.rng(ptr %C)
  %lt = icmp ult i64 %r, %lim
  %ok = or i1 %all, %lt
  br i1 %ok, label %done, label %draw
done:
  %v = urem i64 %r, %n64
  %vz = zext i64 %v to i128
  ret i128 %vz
}}

define internal i64 @ns.peek(ptr noalias %D, i64 %LD, i64 %bit, i64 %w) {{
entry:
  %first = lshr i64 %bit, 3
  %endbit = add i64 %bit, %w
  %e7 = add i64 %endbit, 7
  %last = lshr i64 %e7, 3
  br label %head
head:
  %k = phi i64 [%first, %entry], [%k2, %body]
  %acc = phi i128 [0, %entry], [%acc2, %body]
  %more = icmp ult i64 %k, %last
  br i1 %more, label %body, label %done
body:
  %inb = icmp ult i64 %k, %LD
  %ks = select i1 %inb, i64 %k, i64 0
  %p = getelementptr inbounds i8, ptr %D, i64 %ks
  %b = load i8, ptr %p
  %bz = zext i8 %b to i128
  %bv = select i1 %inb, i128 %bz, i128 0
  %as = shl i128 %acc, 8
  %acc2 = or i128 %as, %bv
  %k2 = add i64 %k, 1
  br label %head
done:
  %lb = shl i64 %last, 3
  %sh = sub i64 %lb, %endbit
  %sh128 = zext i64 %sh to i128
  %v = lshr i128 %acc, %sh128
  %w128 = zext i64 %w to i128
  %one = shl i128 1, %w128
  %mask = sub i128 %one, 1
  %vm = and i128 %v, %mask
  %r = trunc i128 %vm to i64
  ret i64 %r
}}"""


class Algorithms:
    """Emits each algorithm a program uses once, on first use."""

    def __init__(self, mod: Module):
        self.mod = mod
        self.done: dict[str, str] = {}

    def get(self, algo: str) -> str:
        if algo in self.done:
            return self.done[algo]
        name = "ns.h." + str(algo)
        if algo in ("csum16", "cksum16"):
            text = _CSUM16.format(name=name)
        elif algo in CRCS:
            text = self.crc(name, *CRCS[algo])
        elif algo == "identity":
            text = _IDENTITY.format(name=name)
        elif algo in ("xor16", "xor32"):
            k = 2 if algo == "xor16" else 4
            text = _XOR.format(name=name, k=k, k1=k - 1)
        else:
            raise Unsupported(f"hash algorithm {algo!r}")
        self.mod.globals.append(text)
        self.done[algo] = name
        return name

    def crc(self, name, width, poly, init, xor_out, refin, refout) -> str:
        c = hashes.Crc(width, poly, init, xor_out, refin, refout)
        table = self.mod.array([_s64(v) for v in c.table], "crct")
        if refin:
            rev = self.mod.array(c.rev8, "rev8")
            rin = (f"  %bip = getelementptr inbounds i64, ptr {rev}, i64 %bz\n"
                   "  %bi = load i64, ptr %bip")
        else:
            rin = "  %bi = add i64 %bz, 0"
        if refout:
            if "ns.reflect" not in self.done:
                self.mod.globals.append(_REFLECT)
                self.done["ns.reflect"] = "ns.reflect"
            rout = f"  %ro = call i64 @ns.reflect(i64 %r, i64 {width})"
        else:
            rout = "  %ro = add i64 %r, 0"
        return _CRC.format(name=name, init=_s64(init), refin=rin,
                           shift=width - 8 if width >= 8 else 0, table=table,
                           mask=_s64((1 << width) - 1), refout=rout, xorout=_s64(xor_out))


def _s64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def runtime(slot: int) -> str:
    """The random source and the lookahead helper (every program gets them)."""
    return _RNG.format(slot=slot)
