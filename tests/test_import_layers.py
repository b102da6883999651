"""Imports go downward only: no file imports, through any chain, a file that imports it, and
no room puts another room's folder on sys.path.

Circles. Every .py file of the rooms in ROOMS (tests/ may import anything and is left out)
is parsed; every import of a project module, at any depth (an import deferred into a
function still ties the two files together), is an edge to the file it names:
- absolute: `import controller.tree`, `from controller.tree import X`, and
  `from controller import tree` (the submodule where such a file exists, else the
  package's __init__.py, where the name is defined);
- relative: `from .entry import X`, `from .. import errors`, the same way;
- sibling: in a folder without __init__.py (bench/, mininet/, p4src/: scripts run by path,
  whose own folder Python puts first on the path), `import common` is that folder's
  common.py.
`mininet.*` is Debian's Mininet: the project's mininet/ is a folder of scripts, never a
package. A package's __init__.py run on the way to a submodule is not an edge (a package
that re-exports its submodules would be a circle with each), and a file loaded by location
(importlib.util.spec_from_file_location, how bench/ reaches mininet/) is not one either.

sys.path. Outside tests/, what sys.path.insert/append/extend or an assignment to sys.path
(or a slice of it) adds must be the repository's root spelt as __file__ walked up to it:
Path(__file__).resolve().parents[k], .parent, os.path.dirname, with os.path.abspath,
.resolve() and str() around them, directly or through a name assigned so in the same
function or at module level. A filter ([p for p in sys.path if ...]) adds nothing, and code
handed to another interpreter as a string is not read. FOREIGN_PATHS lists the edits that
add a folder outside this checkout.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("protocol", "controller", "worker", "harness", "mininet", "softswitch", "bench",
         "p4src", "examples")
# The ground floor: what every room reads (the protocol's facts); it imports none of them.
FLOOR = "protocol"
# (file, what it adds): folders that are not this checkout's
FOREIGN_PATHS = {
    ("harness/thrift.py", "d"),                     # BMv2's install of its Thrift client
    ("bench/softswitch_elems.py", "str(tree)"),     # another checkout's root (a baseline)
}


def sources(root: Path) -> list[Path]:
    return sorted(f for room in ROOMS for f in (root / room).rglob("*.py")
                  if "__pycache__" not in f.parts)


def _module_file(root: Path, parts: list[str]) -> Path | None:
    base = root.joinpath(*parts)
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _targets(root: Path, f: Path, node: ast.AST) -> list[Path]:
    """The project's files an import statement names."""
    found: list[Path | None] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] in ROOMS and parts[0] != "mininet":
                found.append(_module_file(root, parts))
            elif len(parts) == 1 and not (f.parent / "__init__.py").exists():
                found.append(_module_file(f.parent, parts))
    elif isinstance(node, ast.ImportFrom):
        mod = node.module.split(".") if node.module else []
        if node.level:
            base = f.parent
            for _ in range(node.level - 1):
                base = base.parent
            parts = list(base.relative_to(root).parts) + mod
        elif mod and mod[0] in ROOMS and mod[0] != "mininet":
            parts = mod
        elif len(mod) == 1 and not (f.parent / "__init__.py").exists():
            parts = list(f.parent.relative_to(root).parts) + mod
        else:
            return []
        for alias in node.names:
            sub = _module_file(root, parts + [alias.name]) if alias.name != "*" else None
            found.append(sub or _module_file(root, parts))
    return [t for t in found if t is not None and t != f]


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """file -> the project's files it imports, relative to `root`."""
    edges: dict[str, set[str]] = {}
    for f in sources(root):
        name = f.relative_to(root).as_posix()
        edges[name] = {t.relative_to(root).as_posix()
                       for node in ast.walk(ast.parse(f.read_text(), str(f)))
                       for t in _targets(root, f, node)}
    return edges


def groups(edges: dict[str, set[str]]) -> list[set[str]]:
    """The groups of files that import each other, through any chain (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(group)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each group."""
    return [_circle(edges, g) for g in groups(edges)]


def _circle(edges: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest path from the group's first file back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop(0)
        for w in sorted(edges.get(v, set()) & group):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    raise AssertionError(group)


def _is_sys_path(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript):
        node = node.value
    return (isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


def _added(node: ast.AST) -> list[ast.expr] | None:
    """What a statement or call adds to sys.path; None where it does not touch it."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and _is_sys_path(node.func.value):
        if node.func.attr == "insert" and len(node.args) == 2:
            return [node.args[1]]
        if node.func.attr == "append":
            return list(node.args)
        if node.func.attr == "extend":
            arg = node.args[0]
            return list(arg.elts) if isinstance(arg, (ast.List, ast.Tuple)) else [arg]
        return None
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not any(_is_sys_path(t) for t in targets):
            return None
        value = node.value
        if isinstance(value, (ast.List, ast.Tuple)):
            return list(value.elts)
        if isinstance(value, ast.ListComp) and len(value.generators) == 1:
            gen = value.generators[0]
            if _is_sys_path(gen.iter) and isinstance(gen.target, ast.Name) \
                    and isinstance(value.elt, ast.Name) and value.elt.id == gen.target.id:
                return []               # a filter: only drops entries
        return [value]
    return None


def _levels(expr: ast.expr, names: dict[str, ast.expr], seen: frozenset = frozenset()):
    """How many folders up from __file__ the path `expr` is; None if it is not such a walk."""
    if isinstance(expr, ast.Name):
        if expr.id == "__file__":
            return 0
        if expr.id in names and expr.id not in seen:
            return _levels(names[expr.id], names, seen | {expr.id})
        return None
    if isinstance(expr, ast.Attribute) and expr.attr == "parent":
        up = _levels(expr.value, names, seen)
        return None if up is None else up + 1
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) \
            and expr.value.attr == "parents" and isinstance(expr.slice, ast.Constant) \
            and isinstance(expr.slice.value, int):
        up = _levels(expr.value.value, names, seen)
        return None if up is None else up + expr.slice.value + 1
    if isinstance(expr, ast.Call):
        fn = ast.unparse(expr.func)
        if fn in ("str", "Path", "os.path.abspath", "os.path.realpath") and len(expr.args) == 1:
            return _levels(expr.args[0], names, seen)
        if fn == "os.path.dirname" and len(expr.args) == 1:
            up = _levels(expr.args[0], names, seen)
            return None if up is None else up + 1
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("resolve", "absolute") \
                and not expr.args:
            return _levels(expr.func.value, names, seen)
    return None


def _assigned(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """name -> value of the single-name assignments of one scope (not of nested functions)."""
    names: dict[str, ast.expr] = {}
    todo = list(body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            names.setdefault(node.targets[0].id, node.value)
        todo.extend(ast.iter_child_nodes(node))
    return names


def path_edits(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """(file, line, what is added) for each sys.path addition that is not the root."""
    bad = []
    for f in sources(root):
        rel = f.relative_to(root)
        tree = ast.parse(f.read_text(), str(f))
        module = _assigned(tree.body)
        scopes = [(tree, module)] + [
            (fn, {**module, **_assigned(fn.body)}) for fn in ast.walk(tree)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope, names in scopes:
            todo = list(scope.body)
            while todo:
                node = todo.pop(0)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue        # its own scope
                todo.extend(ast.iter_child_nodes(node))
                for expr in _added(node) or []:
                    if _levels(expr, names) == len(rel.parts):
                        continue
                    bad.append((rel.as_posix(), node.lineno, ast.unparse(expr)))
    return bad


def test_no_import_circles():
    edges = graph()
    found = [(_circle(edges, g), sorted(g)) for g in groups(edges)]
    assert not found, "import circles:\n" + "\n".join(
        " -> ".join(c) + (f" (the group: {', '.join(g)})" if len(g) + 1 > len(c) else "")
        for c, g in found)


def test_sys_path_gains_only_the_repository_root():
    found = path_edits()
    assert {(f, what) for f, _, what in found} >= FOREIGN_PATHS, "an exception is gone"
    bad = [(f, line, what) for f, line, what in found if (f, what) not in FOREIGN_PATHS]
    assert not bad, "sys.path edits that add another folder than the repository's root:\n" \
        + "\n".join(f"{f}:{line}: {what}" for f, line, what in bad)


def floor_breaches(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(file, what it imports) where the floor imports a file of another room."""
    return sorted((f, t) for f, ts in edges.items() if f.startswith(FLOOR + "/")
                  for t in ts if not t.startswith(FLOOR + "/"))


def test_the_floor_imports_nothing_above_it():
    bad = floor_breaches(graph())
    assert not bad, f"{FLOOR}/ imports upward: " + ", ".join(f"{f} -> {t}" for f, t in bad)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_check_sees_circles(tmp_path):
    root = _tree(tmp_path, {
        "controller/__init__.py": "",
        "controller/a.py": "from controller.b import X\n",
        "controller/b.py": "def f():\n    from . import a\n",
        "bench/common.py": "import report\n",
        "bench/report.py": "from bench.common import REPO\n",
        "softswitch/__init__.py": "",
        "softswitch/native/__init__.py": "from .rx import ring\n",
        "softswitch/native/rx.py": "from . import entry\n",
        "softswitch/native/entry.py": "from softswitch.native import rx\n",
        "mininet/run.py": "import mininet.net\nimport emulation\n",
        "mininet/emulation.py": "from mininet.node import Switch\n",
    })
    assert cycles(graph(root)) == [["bench/common.py", "bench/report.py", "bench/common.py"],
                                   ["controller/a.py", "controller/b.py", "controller/a.py"],
                                   ["softswitch/native/entry.py", "softswitch/native/rx.py",
                                    "softswitch/native/entry.py"]]
    assert graph(root)["mininet/run.py"] == {"mininet/emulation.py"}


def test_the_check_sees_other_folders_on_the_path(tmp_path):
    root = _tree(tmp_path, {
        "bench/emu.py": "import sys\nfrom pathlib import Path\n"
                        "REPO = Path(__file__).resolve().parents[1]\n"
                        "sys.path.insert(0, str(REPO))\n"
                        "sys.path.insert(0, str(REPO / 'mininet'))\n",
        "controller/main.py": "import os, sys\n_here = os.path.dirname(os.path.abspath(__file__))\n"
                              "sys.path[:] = [p for p in sys.path if p != _here]\n"
                              "sys.path.insert(0, os.path.dirname(_here))\n"
                              "sys.path.append(_here)\n",
        "worker/ddp/main.py": "import sys\nfrom pathlib import Path\n"
                              "def main():\n    here = Path(__file__).resolve().parent\n"
                              "    sys.path.insert(0, str(here.parents[1]))\n"
                              "    sys.path[:0] = ['p4src']\n",
    })
    assert path_edits(root) == [("bench/emu.py", 5, "str(REPO / 'mininet')"),
                                ("controller/main.py", 5, "_here"),
                                ("worker/ddp/main.py", 6, "'p4src'")]


def test_the_check_sees_the_floor_import_upward(tmp_path):
    root = _tree(tmp_path, {
        "protocol/__init__.py": "",
        "protocol/sizes.py": "ELEMS = 168\n",
        "protocol/encodings.py": "from protocol.sizes import ELEMS\n"
                                 "def f():\n    from worker import wire\n",
        "worker/__init__.py": "",
        "worker/wire.py": "from protocol.sizes import ELEMS\n",
    })
    assert floor_breaches(graph(root)) == [("protocol/encodings.py", "worker/wire.py")]
