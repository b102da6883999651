"""A vector group's runs of elementwise lines fused into one compiled loop (numba).

Each numpy operation of a group costs a call and a pass over the lanes; an action with a
dozen of them on a thousand lanes spends most of its time there. A run of consecutive lines
`Vn = <elementwise expression>` becomes one call of a kernel that computes every lane's
values in one loop. The vector compiler bounds every value it computes inside int64 (a
group it cannot bound stays scalar), so the loop's int64 arithmetic gives the very values
numpy does. A line that draws random numbers or reads a register moves above the run when
the run does not feed it (it has no effect the run's arithmetic could see). Kernels are
cached on disk (numba's cache, one source file per kernel), so a switch compiles each once
per machine. Without numba, or with NATSWITCH_FUSE=0, the lines stay as they are.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import logging
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

MIN_OPS = 8  # below this, a kernel call costs about what the numpy calls it saves
_DEF = re.compile(r"^(V\d+) = (.+)$")
_FNS = {"np.where": 3, "np.logical_and": 2, "np.logical_or": 2, "np.logical_not": 1,
        "np.clip": 3, "np.minimum": 2, "_vb2d": 1}
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift,
           ast.RShift, ast.FloorDiv, ast.Mod)
log = logging.getLogger("softswitch.fuse")
_numba = None


def enabled() -> bool:
    """numba is there and fusion is not turned off (NATSWITCH_FUSE=0)."""
    global _numba
    if os.environ.get("NATSWITCH_FUSE", "1") == "0":
        return False
    if _numba is None:
        try:
            import numba
            _numba = numba
        except ImportError:
            _numba = False
    return bool(_numba)


def _shift_ok(n) -> bool:
    """A shift amount known to be below 64: a constant, or np.minimum(x, c <= 63) (what the
    vector compiler writes for a shift it cannot bound)."""
    if isinstance(n, ast.Constant):
        return type(n.value) is int and 0 <= n.value < 64
    return (isinstance(n, ast.Call) and ast.unparse(n.func) == "np.minimum"
            and len(n.args) == 2 and isinstance(n.args[1], ast.Constant)
            and type(n.args[1].value) is int and 0 <= n.args[1].value < 64)


class _Leaves(ast.NodeVisitor):
    """Checks an expression is elementwise arithmetic the kernel can run; counts its
    operations and collects its names (V.., p..) and scalar slots (F[k])."""

    def __init__(self):
        self.ops = 0
        self.names: list[str] = []
        self.slots: list[int] = []

    def generic_visit(self, node):
        raise ValueError(type(node).__name__)

    def visit_Expression(self, n):
        self.visit(n.body)

    def visit_BinOp(self, n):
        if not isinstance(n.op, _BINOPS):
            raise ValueError("operator")
        if isinstance(n.op, (ast.FloorDiv, ast.Mod)) and not (
                isinstance(n.right, ast.Constant) and type(n.right.value) is int
                and n.right.value > 0):
            raise ValueError("division by a value not known to be positive")
        if isinstance(n.op, (ast.LShift, ast.RShift)) and not _shift_ok(n.right):
            # numpy and Python leave 0 or -1 for a shift of 64 or more, LLVM's is undefined
            raise ValueError("shift by a value that may reach 64")
        self.ops += 1
        self.visit(n.left)
        self.visit(n.right)

    def visit_UnaryOp(self, n):
        if not isinstance(n.op, (ast.USub, ast.Invert, ast.Not)):
            raise ValueError("unary operator")
        self.ops += 1
        self.visit(n.operand)

    def visit_Compare(self, n):
        if len(n.ops) != 1 or not isinstance(n.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE,
                                                        ast.Eq, ast.NotEq)):
            raise ValueError("comparison")
        self.ops += 1
        self.visit(n.left)
        self.visit(n.comparators[0])

    def visit_IfExp(self, n):
        self.ops += 1
        for x in (n.test, n.body, n.orelse):
            self.visit(x)

    def visit_Constant(self, n):
        if type(n.value) is bool:
            return
        if type(n.value) is not int or not -(1 << 62) <= n.value < 1 << 62:
            raise ValueError("constant")

    def visit_Name(self, n):
        if not re.fullmatch(r"[Vp]\d+", n.id):
            raise ValueError("name")
        self.names.append(n.id)

    def visit_Subscript(self, n):
        if not (isinstance(n.value, ast.Name) and n.value.id == "F"
                and isinstance(n.slice, ast.Constant) and type(n.slice.value) is int):
            raise ValueError("subscript")
        self.slots.append(n.slice.value)

    def visit_Call(self, n):
        fn = ast.unparse(n.func)
        if _FNS.get(fn) != len(n.args) or n.keywords:
            raise ValueError("call")
        self.ops += 1
        for a in n.args:
            self.visit(a)


class _Scalar(ast.NodeTransformer):
    """The expression for one lane: numpy's elementwise calls as scalar Python."""

    def __init__(self, arg_of: dict):
        self.arg_of = arg_of  # 'F[k]' / 'pN' -> kernel argument name

    def visit_Name(self, n):
        if n.id.startswith("V"):
            return ast.Name("v" + n.id[1:], ast.Load())
        return ast.Name(self.arg_of[n.id], ast.Load())

    def visit_Subscript(self, n):
        return ast.Name(self.arg_of[f"F[{n.slice.value}]"], ast.Load())

    def visit_Call(self, n):
        a = [self.visit(x) for x in n.args]
        fn = ast.unparse(n.func)
        if fn == "np.where":
            return ast.IfExp(a[0], a[1], a[2])
        if fn == "_vb2d":
            return ast.IfExp(a[0], ast.Constant(1), ast.Constant(0))
        if fn == "np.logical_not":
            return ast.UnaryOp(ast.Not(), a[0])
        if fn in ("np.logical_and", "np.logical_or"):
            op = ast.And() if fn == "np.logical_and" else ast.Or()
            return ast.BoolOp(op, a)
        if fn == "np.minimum":
            return ast.Call(ast.Name("min", ast.Load()), a, [])
        lo = ast.Call(ast.Name("max", ast.Load()), [a[0], a[1]], [])   # np.clip
        return ast.Call(ast.Name("min", ast.Load()), [lo, a[2]], [])


def _parse(code: str):
    """(tree, leaves) of an expression the kernel can run, else None."""
    try:
        tree = ast.parse(code, mode="eval")
        leaves = _Leaves()
        leaves.visit(tree)
    except (SyntaxError, ValueError, RecursionError):
        return None
    return tree, leaves


def kernel_source(run: list, inputs: list, outputs: list, kinds: dict, m: int) -> str:
    """A numba kernel: run = [(V name, tree)], inputs = [V name / 'F[k]' / 'pN'] in
    argument order, outputs = [V name]; kinds: V name -> (vec, kind)."""
    arg_of = {x: f"a{i}" for i, x in enumerate(inputs)}
    head, loop = [], []
    for x in inputs:
        a = arg_of[x]
        if not x.startswith("V"):
            head.append(f"{a} = np.int64({a})")           # a scalar field or parameter
        elif kinds[x][0]:
            loop.append(f"v{x[1:]} = np.{_dtype(kinds, x)}({a}[i])")   # one lane per pass
        else:
            head.append(f"v{x[1:]} = np.{_dtype(kinds, x)}({a})")
    to_scalar = _Scalar(arg_of)
    for name, tree in run:
        expr = ast.unparse(to_scalar.visit(copy.deepcopy(tree)).body)
        loop.append(f"v{name[1:]} = {expr}")
    outs = [f"o{name[1:]}" for name in outputs]
    alloc = [f"o{name[1:]} = np.empty({m}, np.{_dtype(kinds, name)})" for name in outputs]
    loop += [f"o{name[1:]}[i] = v{name[1:]}" for name in outputs]
    body = head + alloc + [f"for i in range({m}):"] + ["    " + x for x in loop] + \
        [f"return ({', '.join(outs)},)"]
    return ("import numpy as np\nfrom numba import njit\n\n\n"
            "@njit(cache=True, nogil=True)\n"
            f"def kernel({', '.join(arg_of[x] for x in inputs)}):\n"
            + "".join(f"    {x}\n" for x in body))


def _cache_dir() -> Path | None:
    base = os.environ.get("NATSWITCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "natswitch")
    d = Path(base) / "kernels"
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return d if os.access(d, os.W_OK) else None


def load_kernel(src: str):
    """The kernel of `src`, from a file in the cache directory (so numba caches its
    machine code), or compiled in memory where there is no writable cache."""
    h = hashlib.sha256(src.encode()).hexdigest()[:20]
    d = _cache_dir()
    if d is None:
        ns: dict = {}
        exec(compile(src.replace("cache=True", "cache=False"), f"<kernel {h}>", "exec"), ns)  # noqa: S102
        return ns["kernel"]
    path = d / f"k_{h}.py"
    if not path.exists():
        # several switches may start at once: each writes whole files only
        fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(src)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    name = f"natswitch_kernel_{h}"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod     # numba's cache finds the kernel's module by name
        spec.loader.exec_module(mod)
    return mod.kernel


def fuse(lines: list[str], kinds: dict, m: int, bind, rest: str = "") -> list[str]:
    """lines with each run worth it replaced by a kernel call; kinds: V name -> (vec,
    kind); bind(obj, prefix) -> the global name the generated code calls obj by; rest:
    code after `lines` that may read their values."""
    if not enabled():
        return lines
    out: list[str] = []
    pending: list[str] = []          # the run's lines as written, hoisted ones included
    run: list = []                   # (name, tree, leaves) fused
    hoisted: list[str] = []

    def flush():
        nonlocal pending, run, hoisted
        fused = _emit(run, hoisted, kinds, m, bind, lines, rest) if run else None
        out.extend(pending if fused is None else fused)
        pending, run, hoisted = [], [], []

    for ln in lines:
        d = _DEF.match(ln)
        parsed = _parse(d.group(2)) if d and kinds.get(d.group(1), (False,))[0] else None
        if parsed is not None:
            run.append((d.group(1), parsed[0], parsed[1]))
            pending.append(ln)
            continue
        if d and run and not (set(re.findall(r"\bV\d+\b", d.group(2)))
                              & {r[0] for r in run}):
            hoisted.append(ln)   # feeds the run or nothing in it: computed before it
            pending.append(ln)
            continue
        flush()
        out.append(ln)
    flush()
    return out


def _emit(run, hoisted, kinds, m, bind, lines, rest) -> list[str] | None:
    if sum(r[2].ops for r in run) < MIN_OPS:
        return None
    names = {r[0] for r in run}
    inputs: list[str] = []
    for _, _, leaves in run:
        for x in leaves.names + [f"F[{s}]" for s in leaves.slots]:
            if x not in names and x not in inputs:
                inputs.append(x)
    text = "\n".join(x for x in lines if (d := _DEF.match(x)) is None
                     or d.group(1) not in names) + "\n" + rest
    outputs = [r[0] for r in run if re.search(rf"\b{r[0]}\b", text)]
    if not outputs or any(x.startswith("V") and x not in kinds for x in inputs):
        return None
    src = kernel_source([(r[0], r[1]) for r in run], inputs, outputs, kinds, m)
    try:
        kernel = load_kernel(src)
        # numba compiles once per type of the arguments, and a held run's array is
        # read-only: compile each mix now, so that no packet waits for the compiler
        arrays = [x for x in inputs if x.startswith("V") and kinds[x][0]]
        mixes = range(1 << len(arrays)) if len(arrays) <= 3 else (0,)
        for mix in mixes:
            ro = {x for i, x in enumerate(arrays) if mix >> i & 1}
            kernel(*[_sample(x, kinds, m, x not in ro) for x in inputs])
    except Exception:  # noqa: BLE001 - an optimisation: the numpy lines are always right
        log.warning("a vector run stays numpy: its kernel did not compile", exc_info=True)
        return None
    k = bind(kernel, "fk")
    return hoisted + [f"{', '.join(outputs)}, = {k}({', '.join(inputs)})"]


def _sample(x: str, kinds: dict, m: int, writeable: bool):
    """An argument of the type the kernel is called with, to compile it at load time."""
    if not x.startswith("V") or not kinds[x][0]:
        return 0
    v = np.zeros(m, _dtype(kinds, x))
    v.flags.writeable = writeable
    return v


def _dtype(kinds: dict, x: str) -> str:
    """The numpy type of V name x's lanes."""
    return "bool_" if kinds[x][1] == "bool" else "int64"
