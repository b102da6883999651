"""ns_rx: a port's receive ring drained through the compiled program, frames sent natively.

For each ready slot of the port's PACKET_MMAP ring (softswitch/ring.py) it does what the
Python packet loop does with one frame: skip this host's own sent frames, put a VLAN tag
back, run the packet (ns.process), send every output with send(2) on its port's socket.
It returns to Python when the ring is empty or after `budget` frames, and with what only
the Python side does: a packet ns.process leaves after ingress (-1: the frame is copied to
SLOW), or outputs to a port without a socket here (-2: the CPU port, a missing port; RES
holds them, none sent).

The ring's record (softswitch/ring.py) says where the ring is, which slot is next, and
counts what the native side received and skipped.
Stats (int64): packets in, packets out, dropped, too big, the last failed assert's event
and the number of them. TXN: frames sent per port, then
(from MAX_TX_PORT + 1 on) send errors per port.
"""

from __future__ import annotations

from ..ring import CUR, NUMBER, RING, RX, SKIPPED, SLOT, SLOTS, TRUNCATED
from .res import RES_HEAD

IN, OUT_, DROPPED, TOO_BIG, EVENT, EVENTS = range(6)
MAX_TX_PORT = 511  # egress ports with a socket table entry (9-bit ports)
MSG_DONTWAIT = 0x40
PACKET_OUTGOING = 4


def emit_rx(b) -> None:
    """ns_rx: the loop over the ring's ready slots, each frame run and its outputs sent.
    The helpers below each emit one step of it, in order: Fn numbers values and labels
    from one counter, so the order of the calls is the generated code."""
    f = b.mod.fn("ns_rx", ["ptr noalias %F", "ptr noalias %C", "ptr noalias %P", "i64 %now",
                           "ptr noalias %OUT", "ptr noalias %RES", "ptr noalias %F2",
                           "ptr noalias %SLOW", "ptr noalias %TXFD", "ptr noalias %TXN",
                           "ptr noalias %ST", "ptr %send", "i64 %budget"], "i64", export=True)
    done = f.local("i64", "0")
    head, body, empty = f.label("slot"), f.label("frame"), f.label("empty")
    f.br(head)
    f.block(head)
    slot, status, cur = _next_ready_slot(f, done, body, empty)
    f.block(body)
    hdr = _take_slot(f, slot, cur)
    _skip_unwanted(f, slot, hdr, head)
    data, n = _frame_with_tag(f, slot, status, hdr)
    r = _run_frame(f, slot, done, data, n)
    k = _check_outputs(f, r)
    _send_outputs(f, r, k)
    f.br(head)
    f.block(empty)
    f.retv(f.op(f"load i64, ptr {done}"))


def _count(f, arr: str, idx: str, by: str = "1") -> None:
    f.store(arr, idx, f.op(f"add i64 {f.load(arr, idx)}, {by}"))


def _release(f, slot: str) -> None:
    """The slot back to the kernel."""
    f.emit(f"store atomic i32 0, ptr {slot} release, align 4")


def _next_ready_slot(f, done: str, body: str, empty: str) -> tuple[str, str, str]:
    """Within the budget, the ring's next slot: on to `body` if the kernel filled it, to
    `empty` if not. Returns the slot, its status word and the ring's cursor."""
    n_done = f.op(f"load i64, ptr {done}")
    more = f.op(f"icmp slt i64 {n_done}, %budget")
    look = f.label("look")
    f.cbr(more, look, empty)
    f.block(look)
    base = f.op(f"inttoptr i64 {f.load('%P', str(RING))} to ptr")
    size = f.load("%P", str(SLOT))
    cur = f.load("%P", str(CUR))
    slot = f.op(f"getelementptr inbounds i8, ptr {base}, i64 {f.op(f'mul i64 {cur}, {size}')}")
    status = f.op(f"load atomic i32, ptr {slot} acquire, align 4")
    ready = f.op(f"icmp ne i32 {f.op(f'and i32 {status}, 1')}, 0")
    f.cbr(ready, body, empty)
    return slot, status, cur


def _take_slot(f, slot: str, cur: str) -> dict[str, str]:
    """The slot's header fields (tpacket2_hdr, sockaddr_ll), and the cursor moved on."""

    def field(off: int, ty: str) -> str:
        p = f.op(f"getelementptr inbounds i8, ptr {slot}, i64 {off}")
        return f.op(f"zext {ty} {f.op(f'load {ty}, ptr {p}')} to i64")

    length, snap, mac = field(4, "i32"), field(8, "i32"), field(12, "i16")
    tci, tpid, pkttype = field(24, "i16"), field(26, "i16"), field(42, "i8")
    nxt = f.op(f"add i64 {cur}, 1")
    wrap = f.op(f"icmp eq i64 {nxt}, {f.load('%P', str(SLOTS))}")
    f.store("%P", str(CUR), f.op(f"select i1 {wrap}, i64 0, i64 {nxt}"))
    return dict(length=length, snap=snap, mac=mac, tci=tci, tpid=tpid, pkttype=pkttype)


def _skip_unwanted(f, slot: str, hdr: dict, head: str) -> None:
    """This host's own sent frames and truncated ones are counted, released and skipped;
    a whole received frame goes on in the block this leaves open."""
    own, notown, short, whole = f.label("own"), f.label("notown"), f.label("short"), \
        f.label("whole")
    f.cbr(f.op(f"icmp eq i64 {hdr['pkttype']}, {PACKET_OUTGOING}"), own, notown)
    f.block(own)
    _count(f, "%P", str(SKIPPED))
    _release(f, slot)
    f.br(head)
    f.block(notown)
    f.cbr(f.op(f"icmp ult i64 {hdr['snap']}, {hdr['length']}"), short, whole)
    f.block(short)
    _count(f, "%P", str(TRUNCATED))
    _release(f, slot)
    f.br(head)
    f.block(whole)


def _frame_with_tag(f, slot: str, status: str, hdr: dict) -> tuple[str, str]:
    """The frame and its length, with a VLAN tag the kernel moved into the slot's header
    put back after the addresses (in SLOW's spare room: the slot has no room for it)."""
    snap, tci, tpid = hdr["snap"], hdr["tci"], hdr["tpid"]
    data0 = f.op(f"getelementptr inbounds i8, ptr {slot}, i64 {hdr['mac']}")
    st64 = f.op(f"zext i32 {status} to i64")
    has_tag = f.op(f"icmp ne i64 {f.op(f'and i64 {st64}, 16')}, 0")
    vlan = f.op(f"or i1 {has_tag}, {f.op(f'icmp ne i64 {tci}, 0')}")
    tagged, plain, go = f.label("tagged"), f.label("plain"), f.label("run")
    dp = f.local("ptr", None)
    lp = f.local("i64", None)
    f.emit(f"store ptr {data0}, ptr {dp}")
    f.emit(f"store i64 {snap}, ptr {lp}")
    big12 = f.op(f"icmp uge i64 {snap}, 12")
    f.cbr(f.op(f"and i1 {vlan}, {big12}"), tagged, plain)
    f.block(tagged)
    tb = f.op("getelementptr inbounds i8, ptr %SLOW, i64 65600")  # after SLOW's frame room
    f.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {tb}, ptr {data0}, i64 12, i1 false)")
    tp_ok = f.op(f"icmp ne i64 {f.op(f'and i64 {st64}, 64')}, 0")
    tpid2 = f.op(f"select i1 {tp_ok}, i64 {tpid}, i64 33024")
    for k, (v, sh) in enumerate(((tpid2, 8), (tpid2, 0), (tci, 8), (tci, 0))):
        byte = f.op(f"trunc i64 {f.op(f'lshr i64 {v}, {sh}')} to i8")
        f.store(tb, str(12 + k), byte, "i8")
    rest = f.op(f"getelementptr inbounds i8, ptr {data0}, i64 12")
    dst = f.op(f"getelementptr inbounds i8, ptr {tb}, i64 16")
    f.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {dst}, ptr {rest}, "
           f"i64 {f.op(f'sub i64 {snap}, 12')}, i1 false)")
    f.emit(f"store ptr {tb}, ptr {dp}")
    f.emit(f"store i64 {f.op(f'add i64 {snap}, 4')}, ptr {lp}")
    f.br(go)
    f.block(plain)
    f.br(go)
    f.block(go)
    return f.op(f"load ptr, ptr {dp}"), f.op(f"load i64, ptr {lp}")


def _run_frame(f, slot: str, done: str, data: str, n: str) -> str:
    """One frame counted and run through ns.process; the slot released. A frame Python
    must go on with is copied to SLOW and ns_rx returns -1. Returns the outputs' count."""
    _count(f, "%P", str(RX))
    _count(f, "%ST", str(IN))
    was = f.op(f"load i64, ptr {done}")
    f.emit(f"store i64 {f.op(f'add i64 {was}, 1')}, ptr {done}")
    port = f.load("%P", str(NUMBER))
    cap = f.op(f"add i64 {n}, 512")
    r = f.op(f"call i64 @ns.process(ptr %F, ptr %C, ptr {data}, i64 {n}, i64 {port}, "
             f"i64 %now, ptr %OUT, i64 {cap}, ptr %RES, ptr %F2)")
    slow, fast = f.label("slowpkt"), f.label("fastpkt")
    f.cbr(f.op(f"icmp slt i64 {r}, 0"), slow, fast)
    f.block(slow)  # Python goes on from F: it needs the frame
    f.store("%SLOW", "0", n)
    s8 = f.op("getelementptr inbounds i8, ptr %SLOW, i64 8")
    f.emit(f"call void @llvm.memcpy.p0.p0.i64(ptr {s8}, ptr {data}, i64 {n}, i1 false)")
    _release(f, slot)
    f.retv("-1")
    f.block(fast)
    _release(f, slot)
    _count_outcome(f)
    return r


def _count_outcome(f) -> None:
    """What ns.process dropped, found too big, and the last failed assert, into ST."""
    _count(f, "%ST", str(DROPPED), f.load("%RES", "1"))
    _count(f, "%ST", str(TOO_BIG), f.load("%RES", "2"))
    ev = f.load("%RES", "4")  # a failed assert: the last one's event, and how many
    evy, evn = f.label("ev"), f.label("noev")
    f.cbr(f.op(f"icmp ne i64 {ev}, 0"), evy, evn)
    f.block(evy)
    f.store("%ST", str(EVENT), ev)
    _count(f, "%ST", str(EVENTS))
    f.br(evn)
    f.block(evn)


def _check_outputs(f, r: str) -> str:
    """Every output has a socket here, or ns_rx returns -2 and Python sends them all.
    Returns the loop's counter, which the send loop reuses."""
    kv = f.local("i64", "0")
    chk, chkb, sendall = f.label("chk"), f.label("chkb"), f.label("sendall")
    f.br(chk)
    f.block(chk)
    k = f.op(f"load i64, ptr {kv}")
    f.cbr(f.op(f"icmp slt i64 {k}, {r}"), chkb, sendall)
    f.block(chkb)
    op = f.load("%RES", f.op(f"add i64 {f.op(f'mul i64 {k}, 3')}, {RES_HEAD}"))
    inr = f.op(f"icmp ule i64 {op}, {MAX_TX_PORT}")
    okp, left = f.label("okport"), f.label("leftover")
    has = f.label("hasfd")
    f.cbr(inr, okp, left)
    f.block(okp)
    fd = f.load("%TXFD", f.op(f"select i1 {inr}, i64 {op}, i64 0"))
    f.cbr(f.op(f"icmp sge i64 {fd}, 0"), has, left)
    f.block(has)
    f.emit(f"store i64 {f.op(f'add i64 {k}, 1')}, ptr {kv}")
    f.br(chk)
    f.block(left)
    f.retv("-2")
    f.block(sendall)
    return kv


def _send_outputs(f, r: str, kv: str) -> None:
    """Each output sent with send(2) on its port's socket, counted as sent or failed on
    that port."""
    f.emit(f"store i64 0, ptr {kv}")
    sh, sb, sdone = f.label("snd"), f.label("sndb"), f.label("snddone")
    f.br(sh)
    f.block(sh)
    k = f.op(f"load i64, ptr {kv}")
    f.cbr(f.op(f"icmp slt i64 {k}, {r}"), sb, sdone)
    f.block(sb)
    e = f.op(f"add i64 {f.op(f'mul i64 {k}, 3')}, {RES_HEAD}")
    op = f.load("%RES", e)
    off = f.load("%RES", f.op(f"add i64 {e}, 1"))
    ln = f.load("%RES", f.op(f"add i64 {e}, 2"))
    fd = f.op(f"trunc i64 {f.load('%TXFD', op)} to i32")
    buf = f.op(f"getelementptr inbounds i8, ptr %OUT, i64 {off}")
    sent = f.op(f"call i64 %send(i32 {fd}, ptr {buf}, i64 {ln}, i32 {MSG_DONTWAIT})")
    bad, good, nxk = f.label("txbad"), f.label("txok"), f.label("txnext")
    f.cbr(f.op(f"icmp slt i64 {sent}, 0"), bad, good)
    f.block(bad)  # counted on the port, after its sent frames (TXN[512 + port])
    _count(f, "%TXN", f.op(f"add i64 {op}, {MAX_TX_PORT + 1}"))
    f.br(nxk)
    f.block(good)
    _count(f, "%TXN", op)
    _count(f, "%ST", str(OUT_))
    f.br(nxk)
    f.block(nxk)
    f.emit(f"store i64 {f.op(f'add i64 {k}, 1')}, ptr {kv}")
    f.br(sh)
    f.block(sdone)
