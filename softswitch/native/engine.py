"""IR text -> machine code with llvmlite (LLVM's MCJIT), cached on disk.

The object code of a program is kept under $NATSWITCH_CACHE (or ~/.cache/natswitch) by
the hash of its IR, the LLVM version and the host CPU, so a second switch process, or the
next run, loads it instead of optimizing and compiling again; a lock file makes processes
that start together compile once.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import logging
import os
import struct
import tempfile
import threading
from pathlib import Path

from .ir import Unsupported

log = logging.getLogger("softswitch.native")
_init_lock = threading.Lock()
stats = {"compiled": 0, "cached": 0}  # modules compiled in this process / taken from the cache
_ready = False
OPT = 2


# What LLVM calls for an i128 division on x86-64: libgcc has them, but not where the JIT
# looks (the process's global symbols), so they are named to it.
RUNTIME_HELPERS = ("__udivti3", "__umodti3", "__divti3", "__modti3")


def _llvm():
    global _ready
    import llvmlite.binding as llvm
    with _init_lock:
        if not _ready:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _add_runtime_helpers(llvm)
            _ready = True
    return llvm


def _add_runtime_helpers(llvm) -> None:
    try:
        lib = ctypes.CDLL("libgcc_s.so.1")
    except OSError:
        return  # a module that calls them is refused (_check_resolved)
    for name in RUNTIME_HELPERS:
        fn = getattr(lib, name, None)
        if fn is not None:
            llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)


def cache_dir() -> Path | None:
    base = os.environ.get("NATSWITCH_CACHE")
    d = Path(base) if base else Path.home() / ".cache" / "natswitch"
    d = d / "native"
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / ".probe"
        probe.touch()
        return d
    except OSError:
        return None


class Compiled:
    """The functions of one compiled module, as ctypes callables; they are valid while
    this object (which holds the engine their code lives in) is alive."""

    def __init__(self, ee, fns: dict):
        self.ee = ee
        self.fns = fns


def compile_module(text: str, exports: dict[str, tuple], name: str = "program") -> Compiled:
    """exports: function name -> (restype, argtypes) of ctypes."""
    import llvmlite
    llvm = _llvm()
    cpu = llvm.get_host_cpu_name()
    feats = llvm.get_host_cpu_features().flatten()
    key = hashlib.sha256("\0".join([text, llvmlite.__version__, cpu, feats, str(OPT)])
                         .encode()).hexdigest()[:32]
    d = cache_dir()
    obj_path = d / f"{key}.o" if d else None
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=cpu, features=feats, opt=OPT, reloc="default", codemodel="jitdefault")
    lock_f = None
    if d is not None:
        lock_f = open(d / f"{key}.lock", "w")  # noqa: SIM115 - held until compiled
        fcntl.flock(lock_f, fcntl.LOCK_EX)
    try:
        cached = obj_path.read_bytes() if obj_path and obj_path.exists() else None
        dump = os.environ.get("NATSWITCH_NATIVE_DUMP")
        if dump:  # for debugging the generator: the IR of the last program compiled
            Path(dump).write_text(text)
        mod = llvm.parse_assembly(text)
        mod.name = name
        mod.verify()
        if cached is None:
            pto = llvm.create_pipeline_tuning_options(speed_level=OPT)
            pb = llvm.create_pass_builder(tm, pto)
            pb.getModulePassManager().run(mod, pb)
        ee = llvm.create_mcjit_compiler(mod, tm)
        fresh: list[bytes] = []
        ee.set_object_cache(lambda m, buf: fresh.append(bytes(buf)),
                            lambda m: cached)
        ee.finalize_object()
        if cached is None and fresh and obj_path is not None:
            fd, tmp = tempfile.mkstemp(dir=obj_path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                fh.write(fresh[0])
            os.replace(tmp, obj_path)
        _check_resolved(llvm, cached if cached is not None else (fresh[0] if fresh else None))
        stats["cached" if cached else "compiled"] += 1
        log.debug("native module %s: %s", key, "from the cache" if cached else "compiled")
    finally:
        if lock_f is not None:
            fcntl.flock(lock_f, fcntl.LOCK_UN)
            lock_f.close()
    if os.environ.get("NATSWITCH_PERF_MAP"):
        _perf_map(ee, text)
    fns = {}
    for fname, (res, args) in exports.items():
        addr = ee.get_function_address(fname)
        if not addr:
            raise RuntimeError(f"native function {fname} missing")
        fns[fname] = ctypes.CFUNCTYPE(res, *args)(addr)
    return Compiled(ee, fns)


def _check_resolved(llvm, obj: bytes | None) -> None:
    """Unsupported unless every symbol the object code calls outside itself resolves in
    this process. MCJIT leaves a call to a symbol it cannot find, and every other
    external call of the object with it, jumping to address 0: the first packet would
    kill the process."""
    names = undefined_symbols(obj) if obj else None
    if not names:
        return
    missing = sorted(n for n in names if not llvm.address_of_symbol(n))
    if missing:
        raise Unsupported(f"machine code that calls {', '.join(missing)}, which this process "
                          f"does not provide")


def undefined_symbols(obj: bytes) -> list[str] | None:
    """The global symbols an ELF64 little-endian object refers to but does not define
    (None for another format)."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize)
                for i in range(shnum)]
    out = []
    for _, kind, _, _, off, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        stroff = sections[link][4]
        for at in range(off, off + size, entsize or 24):
            name, info, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", obj, at)
            if shndx == 0 and name and info >> 4 in (1, 2):  # undefined, global or weak
                end = obj.index(b"\0", stroff + name)
                out.append(obj[stroff + name:end].decode())
    return out


def _perf_map(ee, text: str) -> None:
    """/tmp/perf-<pid>.map naming the functions of the module, for `perf report`."""
    import re
    names = re.findall(r"^define [^@]*@([\w.]+)\(", text, re.M)
    addrs = sorted((ee.get_function_address(n), n) for n in names)
    addrs = [(a, n) for a, n in addrs if a]
    with open(f"/tmp/perf-{os.getpid()}.map", "a") as fh:
        for (a, n), nxt in zip(addrs, addrs[1:] + [(addrs[-1][0] + 4096, "")], strict=True):
            fh.write(f"{a:x} {nxt[0] - a:x} native:{n}\n")
