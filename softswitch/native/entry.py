"""The exported functions: simple_switch's steps around the compiled program.

`ns_ingress`, `ns_egress`, `ns_emit` and `ns_parse` are the steps Switch._run drives one
by one (switch.py). `ns_process` runs a whole packet: ingress, then the unicast copy or
each multicast copy (the groups mirrored by program.NativeProgram) through egress and the
deparser, every frame into OUT; a packet that needs what only the Python orchestration
does (a clone, resubmit or digest, a group too large to mirror) returns -1 after ingress,
and the switch goes on from there. Programs that clone in egress or recirculate never use
it (`fast_path`).
"""

from __future__ import annotations

from ..program.layout import (
    ABORT,
    CLONE,
    CLONE_FL,
    DIGEST,
    EXIT,
    INLEN,
    INSTANCE_NORMAL,
    INSTANCE_REPLICATION,
    PAYLOAD,
    PKTLEN,
    RECIRC,
    RESUBMIT,
    TRUNC,
)
from .res import RES_HEAD
from .rx import emit_rx
from .storage import Storage, s64

ENTRY = ["ptr noalias %F", "ptr noalias %C"]
SLOW_OPS = ("clone_egress_pkt_to_egress", "recirculate")


def fast_path(j: dict) -> bool:
    return not any(p.get("op") in SLOW_OPS for a in j.get("actions", [])
                   for p in a.get("primitives", []))


def _metadata(f, prog, names_values: list[tuple[str, str]]) -> None:
    for name, value in names_values:
        s = prog.sm.get(name)
        if s is not None:
            slot, mask = s
            f.store("%F", str(slot), f.op(f"and i64 {value}, {s64(mask)}"))


def _data(f) -> None:
    f.store("%C", str(Storage.DATA), f.op("ptrtoint ptr %D to i64"))
    f.store("%C", str(Storage.DLEN), "%LD")


def emit_entries(b, parse: str, verify: str, update: str, deparse: str, ingress: str,
                 egress: str) -> None:
    prog, mod = b.prog, b.mod
    sm = prog.sm
    ing_args = ["ptr noalias %D", "i64 %LD", "i64 %port", "i64 %pktlen", "i64 %itype",
                "i64 %now", "i64 %new"]

    # receive_ in simple_switch.cpp, parser, verify, ingress (Switch._ingress)
    f = mod.fn("ns.ingress", ENTRY + ing_args, "i64")
    yes, go = f.label("new"), f.label("old")
    f.cbr(f.op("icmp ne i64 %new, 0"), yes, go)
    f.block(yes)
    _metadata(f, prog, [("ingress_port", "%port"), ("ingress_global_timestamp", "%now")])
    f.br(go)
    f.block(go)
    _metadata(f, prog, [("packet_length", "%pktlen"), ("instance_type", "%itype")])
    posp = f.local("i64", "0")
    err = f.op(f"call i64 @{parse}(ptr %F, ptr %C, ptr %D, i64 %LD, ptr {posp})")
    pos = f.op(f"load i64, ptr {posp}")
    f.store("%F", str(PAYLOAD), pos)
    ck = f.op(f"zext i1 {f.op(f'call i1 @{verify}(ptr %F, ptr %C)')} to i64")
    _metadata(f, prog, [("parser_error", err), ("checksum_error", ck)])
    f.emit(f"call void @{ingress}(ptr %F, ptr %C)")
    f.store("%F", str(EXIT), "0")
    f.retv(pos)

    f = mod.fn("ns_ingress", ENTRY + ing_args, "i64", export=True)
    _data(f)
    f.retv(f.op("call i64 @ns.ingress(ptr %F, ptr %C, ptr %D, i64 %LD, i64 %port, "
                "i64 %pktlen, i64 %itype, i64 %now, i64 %new)"))

    f = mod.fn("ns_parse", ENTRY + ["ptr noalias %D", "i64 %LD"], "i64", export=True)
    _data(f)
    posp = f.local("i64", "0")
    f.op(f"call i64 @{parse}(ptr %F, ptr %C, ptr %D, i64 %LD, ptr {posp})")
    pos = f.op(f"load i64, ptr {posp}")
    f.store("%F", str(PAYLOAD), pos)
    f.retv(pos)

    # checksums and deparser: the frame's length, -4 past CAP bytes
    f = mod.fn("ns.emit", ENTRY + ["ptr noalias %OUT", "i64 %CAP"], "i64")
    f.emit(f"call void @{update}(ptr %F, ptr %C)")
    n = f.op(f"call i64 @{deparse}(ptr %F, ptr %C, ptr %OUT, i64 %CAP)")
    big = f.op(f"icmp slt i64 {n}, 0")
    f.retv(f.op(f"select i1 {big}, i64 -4, i64 {n}"))

    f = mod.fn("ns_emit", ENTRY + ["ptr noalias %D", "i64 %LD", "ptr noalias %OUT", "i64 %CAP"],
               "i64", export=True)
    _data(f)
    f.retv(f.op("call i64 @ns.emit(ptr %F, ptr %C, ptr %OUT, i64 %CAP)"))

    # egress of one copy (Switch._egress): -1 aborted, -2 a clone asked for, -3 dropped,
    # -4 too big, else the frame's length
    f = mod.fn("ns.egress", ENTRY + ["i64 %port", "i64 %now", "ptr noalias %OUT", "i64 %CAP"],
               "i64")
    now_enq = []
    if sm.get("enq_timestamp") is not None:
        enq = f.load("%F", str(sm["enq_timestamp"][0]))
        now_enq = [("deq_timedelta", f.op(f"sub i64 %now, {enq}"))]
    pktlen = f.load("%F", str(PKTLEN))
    _metadata(f, prog, [("egress_global_timestamp", "%now")] + now_enq +
              [("deq_qdepth", "0"), ("qid", "0"), ("egress_port", "%port"),
               ("egress_spec", str(b.drop_port + 1)), ("packet_length", pktlen)])
    f.store("%F", str(EXIT), "0")
    f.emit(f"call void @{egress}(ptr %F, ptr %C)")
    for slot, code in ((ABORT, -1), (CLONE, -2)):
        yes, no = f.label("ret"), f.label("on")
        f.cbr(f.op(f"icmp ne i64 {f.load('%F', str(slot))}, 0"), yes, no)
        f.block(yes)
        f.retv(str(code))
        f.block(no)
    es = sm["egress_spec"]
    yes, no = f.label("drop"), f.label("send")
    f.cbr(f.op(f"icmp eq i64 {f.load('%F', str(es[0]))}, {b.drop_port}"), yes, no)
    f.block(yes)
    f.retv("-3")
    f.block(no)
    f.retv(f.op("call i64 @ns.emit(ptr %F, ptr %C, ptr %OUT, i64 %CAP)"))

    f = mod.fn("ns_egress", ENTRY + ["ptr noalias %D", "i64 %LD", "i64 %port", "i64 %now",
                                     "ptr noalias %OUT", "i64 %CAP"], "i64", export=True)
    _data(f)
    f.retv(f.op("call i64 @ns.egress(ptr %F, ptr %C, i64 %port, i64 %now, ptr %OUT, "
                "i64 %CAP)"))
    _process(b)
    if fast_path(b.j):
        emit_rx(b)


def _process(b) -> None:
    """ns_process(F, C, D, LD, port, now, OUT, CAP, RES, F2) -> outputs, or -1: go on in
    Python from F as ingress left it."""
    _emit_out(b)
    _emit_process(b)


def _emit_out(b) -> None:
    """ns.out: one copy, queued and sent (Switch._enqueue, then ns.egress): its frame into
    RES."""
    prog, mod = b.prog, b.mod
    sm = prog.sm
    f = mod.fn("ns.out", ENTRY + ["i64 %port", "i64 %now", "ptr noalias %OUT", "i64 %CAP",
                                  "ptr noalias %RES"])
    drop, go = f.label("qdrop"), f.label("queue")
    if sm.get("priority") is not None:
        f.cbr(f.op(f"icmp sge i64 {f.load('%F', str(sm['priority'][0]))}, 1"), drop, go)
    else:
        f.br(go)
    f.block(go)
    _metadata(f, prog, [("enq_timestamp", "%now"), ("enq_qdepth", "0")])
    off = f.load("%RES", "3")
    at = f.op(f"getelementptr inbounds i8, ptr %OUT, i64 {off}")
    n = f.op(f"call i64 @ns.egress(ptr %F, ptr %C, i64 %port, i64 %now, ptr {at}, i64 %CAP)")
    big, sent, dropped = f.label("big"), f.label("sent"), f.label("dropped")
    f.emit(f"switch i64 {n}, label %{sent} [i64 -1, label %{dropped} i64 -2, label %{dropped} "
           f"i64 -3, label %{dropped} i64 -4, label %{big}]")
    f.open = False
    f.block(sent)
    tr = f.load("%F", str(TRUNC))
    cut = f.op(f"and i1 {f.op(f'icmp sge i64 {tr}, 0')}, {f.op(f'icmp slt i64 {tr}, {n}')}")
    n2 = f.op(f"select i1 {cut}, i64 {tr}, i64 {n}")
    k = f.load("%RES", "0")
    base = f.op(f"add i64 {f.op(f'mul i64 {k}, 3')}, {RES_HEAD}")
    f.store("%RES", base, "%port")
    f.store("%RES", f.op(f"add i64 {base}, 1"), off)
    f.store("%RES", f.op(f"add i64 {base}, 2"), n2)
    f.store("%RES", "0", f.op(f"add i64 {k}, 1"))
    f.store("%RES", "3", f.op(f"add i64 {off}, {n}"))
    f.retv()
    f.block(big)
    f.store("%RES", "2", f.op(f"add i64 {f.load('%RES', '2')}, 1"))
    f.br(dropped)
    f.block(drop)
    f.br(dropped)
    f.block(dropped)
    f.store("%RES", "1", f.op(f"add i64 {f.load('%RES', '1')}, 1"))
    f.retv()


def _emit_process(b) -> None:
    """ns_process and ns.process: ingress, then the copies sent through ns.out."""
    prog, mod = b.prog, b.mod
    sm = prog.sm
    nslots = prog.layout.nslots
    args = ["ptr noalias %D", "i64 %LD", "i64 %port", "i64 %now", "ptr noalias %OUT",
            "i64 %CAP", "ptr noalias %RES", "ptr noalias %F2"]
    f = mod.fn("ns_process", ENTRY + args, "i64", export=True)
    f.retv(f.op("call i64 @ns.process(ptr %F, ptr %C, ptr %D, i64 %LD, i64 %port, i64 %now, "
                "ptr %OUT, i64 %CAP, ptr %RES, ptr %F2)"))
    f = mod.fn("ns.process", ENTRY + args, "i64")
    _data(f)
    F0 = f.op(f"inttoptr i64 {f.load('%C', str(Storage.F0))} to ptr")
    f.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr %F, ptr {F0}, i64 {8 * nslots}, i1 false)")
    f.store("%F", str(INLEN), "%LD")
    f.store("%F", str(PKTLEN), "%LD")
    for i in range(RES_HEAD):
        f.store("%RES", str(i), "0")
    f.emit(f"call i64 @ns.ingress(ptr %F, ptr %C, ptr %D, i64 %LD, i64 %port, i64 %LD, "
           f"i64 {INSTANCE_NORMAL}, i64 %now, i64 1)")
    done, slow, gone = f.label("done"), f.label("slow"), f.label("gone")
    ab, ok = f.label("abort"), f.label("live")
    f.cbr(f.op(f"icmp ne i64 {f.load('%F', str(ABORT))}, 0"), ab, ok)
    f.block(ab)
    f.br(gone)
    f.block(ok)
    x = f.op(f"or i64 {f.load('%F', str(CLONE))}, {f.load('%F', str(DIGEST))}")
    x = f.op(f"or i64 {x}, {f.load('%F', str(RESUBMIT))}")
    plain = f.label("plain")
    f.cbr(f.op(f"icmp ne i64 {x}, 0"), slow, plain)
    f.block(plain)
    uni = f.label("unicast")
    if sm.get("mcast_grp") is not None:
        _replicate(f, prog, uni, slow, gone, done)
    else:
        f.br(uni)
    f.block(uni)
    es = f.load("%F", str(sm["egress_spec"][0]))
    send = f.label("send")
    f.cbr(f.op(f"icmp eq i64 {es}, {b.drop_port}"), gone, send)
    f.block(send)
    _metadata(f, prog, [("instance_type", str(INSTANCE_NORMAL))])
    f.emit(f"call void @ns.out(ptr %F, ptr %C, i64 {es}, i64 %now, ptr %OUT, i64 %CAP, "
           "ptr %RES)")
    f.br(done)
    f.block(gone)
    f.store("%RES", "1", f.op(f"add i64 {f.load('%RES', '1')}, 1"))
    f.br(done)
    f.block(done)
    ev = f.op(f"inttoptr i64 {f.load('%C', str(Storage.EVENTS))} to ptr")
    f.store("%RES", "4", f.load(ev, "0"))
    f.store(ev, "0", "0")
    f.retv(f.load("%RES", "0"))
    f.block(slow)
    f.retv("-1")


def _replicate(f, prog, uni: str, slow: str, gone: str, done: str) -> None:
    """A packet with a multicast group: a copy through ns.out for each of the group's
    replicas (the last one in F itself). On to `uni` without a group, to `slow` for a
    group too large to mirror here, to `gone` for a group not installed."""
    sm = prog.sm
    nslots = prog.layout.nslots
    mc = f.label("mcast")
    mg = f.load("%F", str(sm["mcast_grp"][0]))
    f.cbr(f.op(f"icmp ne i64 {mg}, 0"), mc, uni)
    f.block(mc)
    _metadata(f, prog, [("instance_type", str(INSTANCE_REPLICATION))])
    inr = f.label("ingroup")
    f.cbr(f.op(f"icmp ugt i64 {mg}, 65535"), slow, inr)
    f.block(inr)
    G = f.op(f"inttoptr i64 {f.load('%C', str(Storage.GROUPS))} to ptr")
    R = f.op(f"inttoptr i64 {f.load('%C', str(Storage.REPLICAS))} to ptr")
    gi = f.load(G, mg)
    some, big = f.label("group"), f.label("nogroup")
    f.cbr(f.op(f"icmp sge i64 {gi}, 0"), some, big)
    f.block(big)
    f.cbr(f.op(f"icmp eq i64 {gi}, -2"), slow, gone)  # -2: too large to mirror
    f.block(some)
    cnt = f.load(R, gi)
    iv = f.local("i64", "0")
    head, body, last, other, nxt = (f.label("rep"), f.label("repbody"), f.label("replast"),
                                    f.label("repcopy"), f.label("repnext"))
    f.br(head)
    f.block(head)
    i = f.op(f"load i64, ptr {iv}")
    f.cbr(f.op(f"icmp slt i64 {i}, {cnt}"), body, done)
    f.block(body)
    e = f.op(f"add i64 {f.op(f'add i64 {gi}, 1')}, {f.op(f'mul i64 {i}, 2')}")
    rport = f.load(R, e)
    rid = f.load(R, f.op(f"add i64 {e}, 1"))
    f.cbr(f.op(f"icmp eq i64 {i}, {f.op(f'sub i64 {cnt}, 1')}"), last, other)
    for lbl, buf in ((other, "%F2"), (last, "%F")):
        f.block(lbl)
        if buf == "%F2":
            f.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr %F2, ptr %F, i64 {8 * nslots}, "
                   "i1 false)")
        _copy_fields(f, prog, buf, rid)
        f.emit(f"call void @ns.out(ptr {buf}, ptr %C, i64 {rport}, i64 %now, ptr %OUT, "
               f"i64 %CAP, ptr %RES)")
        f.br(nxt)
    f.block(nxt)
    f.emit(f"store i64 {f.op(f'add i64 {i}, 1')}, ptr {iv}")
    f.br(head)


def _copy_fields(f, prog, buf: str, rid: str) -> None:
    """What Switch._replicate sets in each copy."""
    s = prog.sm.get("egress_rid")
    if s is not None:
        f.store(buf, str(s[0]), f.op(f"and i64 {rid}, {s64(s[1])}"))
    for slot in (CLONE, CLONE_FL, RESUBMIT, RECIRC, DIGEST):
        f.store(buf, str(slot), "0")
    f.store(buf, str(TRUNC), "-1")
