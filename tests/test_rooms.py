"""The rooms of the repository import only what docs/ARCHITECTURE.md lets them: nothing
outside tests/ imports tests/ (what a bench and a test share lives in harness/), the
controller and softswitch stand alone, workers read the controller's topology only, and
every room may read protocol/, the ground floor, which reads none."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = {"protocol", "controller", "worker", "softswitch", "harness", "tests", "mininet",
           "bench"}
# room -> the project's modules it may import (a top-level name allows all below it)
ALLOWED = {
    "protocol": set(),
    "controller": {"protocol"},
    "softswitch": {"protocol"},
    "worker": {"protocol", "controller.topology", "controller.tree"},
    "mininet": {"protocol", "controller", "worker"},
    "harness": {"protocol", "controller", "softswitch", "worker"},
    "bench": {"protocol", "controller", "softswitch", "worker", "harness", "mininet"},
    "examples": {"protocol", "worker"},
    "p4src": {"protocol"},
}


def imports(room: str) -> dict[str, set[str]]:
    """module -> the files of `room` importing it, for the project's modules."""
    found: dict[str, set[str]] = {}
    for f in sorted((ROOT / room).rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in PROJECT - {room}:
                    found.setdefault(name, set()).add(str(f.relative_to(ROOT)))
    return found


def allowed(name: str, room: str) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:k]) in ALLOWED[room] for k in range(1, len(parts) + 1))


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_room_imports_only_what_it_may(room):
    bad = {name: files for name, files in imports(room).items() if not allowed(name, room)}
    assert not bad, f"{room}/ imports {bad}"


def test_the_check_sees_a_forbidden_import(tmp_path, monkeypatch):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "x.py").write_text("from tests.dataplane.chaos import FabricPort\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert not allowed("tests.dataplane.chaos", "bench")
    assert imports("bench") == {"tests.dataplane.chaos": {"bench/x.py"}}


def test_the_floor_may_import_no_room(tmp_path, monkeypatch):
    (tmp_path / "protocol").mkdir()
    (tmp_path / "protocol" / "x.py").write_text("from controller.profiles import PROFILES\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert not allowed("controller.profiles", "protocol")
    assert imports("protocol") == {"controller.profiles": {"protocol/x.py"}}
