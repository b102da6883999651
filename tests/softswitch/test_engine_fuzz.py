"""Robustness: random and mutated packets and programs never raise or hang.

Seeded (no hypothesis in the pinned dependencies): packets are random bytes
and bit-flipped, truncated or extended copies of valid test packets, sent
through the test programs; programs are valid test programs with random
parts deleted, retyped or rewired. A packet may be dropped, never raise;
a program is loaded or rejected with INVALID_ARGUMENT, never anything else,
and a rejected one leaves the previous program running.
"""

import copy
import json
import random

import pytest

from softswitch import Switch, SwitchError
from tests.softswitch import (
    test_engine_basic,
    test_engine_externs,
    test_engine_parser,
    test_engine_paths,
)

SEED = 1234


def programs():
    return {
        "forwarding": (test_engine_basic.forwarding_program(), [test_engine_basic.ETH]),
        "parser": (test_engine_parser.program(), [d for d, _ in test_engine_parser.CASES]),
        "paths": (test_engine_paths.program(), [d for d, _ in test_engine_paths.CASES]),
        "externs": (test_engine_externs.program(), test_engine_externs.INPUTS),
    }


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    k = rng.random()
    if k < 0.3 and b:
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif k < 0.55:
        b = b[: rng.randrange(len(b) + 1)]
    elif k < 0.8:
        b += bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64)))
    else:
        b = bytearray(rng.getrandbits(8) for _ in range(rng.randint(0, 128)))
    return bytes(b)


@pytest.mark.parametrize("name", sorted(programs()))
def test_random_packets_never_raise(name):
    program, seeds = programs()[name]
    sw = Switch(seed=SEED)
    sw.load(program)
    if name == "paths":
        for g, reps in test_engine_paths.GROUPS.items():
            sw.pre.create(g, reps)
        for s, reps in test_engine_paths.SESSIONS.items():
            sw.clones.set(s, reps)
    rng = random.Random(SEED)
    for _ in range(600):
        data = mutate(rng, rng.choice(seeds))
        out = sw.process(rng.randrange(16), data)
        assert isinstance(out, list)
        for port, pkt in out:
            assert isinstance(port, int) and isinstance(pkt, bytes)
    assert sw.stats["errors"] == 0, sw.stats
    assert sw.stats["packets_in"] == 600


def mutate_json(rng: random.Random, node, depth=0):
    """Returns a copy of node with one random change somewhere inside."""
    if isinstance(node, dict) and node and (depth > 1 or rng.random() < 0.8):
        k = rng.choice(sorted(node))
        out = dict(node)
        r = rng.random()
        if r < 0.15:
            del out[k]
        elif r < 0.3:
            out[k] = rng.choice([None, 0, -1, "x", [], {}, True, 1 << 70, "0xzz"])
        else:
            out[k] = mutate_json(rng, node[k], depth + 1)
        return out
    if isinstance(node, list) and node:
        out = list(node)
        i = rng.randrange(len(out))
        r = rng.random()
        if r < 0.15:
            del out[i]
        elif r < 0.25:
            out.append(copy.deepcopy(rng.choice(node)))
        else:
            out[i] = mutate_json(rng, node[i], depth + 1)
        return out
    if isinstance(node, str):
        return rng.choice(["", node + "x", "0x" + node, "standard_metadata", "$valid$"])
    if isinstance(node, bool):
        return not node
    if isinstance(node, int):
        return rng.choice([0, -1, node + 1, 1 << 40, 255])
    return rng.choice([None, 1, "x", [], {}])


def test_mutated_programs_load_or_are_rejected_cleanly():
    rng = random.Random(SEED)
    base = programs()
    sw = Switch(seed=SEED)
    good, pkt = base["forwarding"][0], base["forwarding"][1][0]
    loaded = rejected = 0
    for i in range(240):
        name = sorted(base)[i % len(base)]
        program, seeds = base[name]
        m = program
        for _ in range(rng.randint(1, 3)):
            m = mutate_json(rng, m)
        sw.load(good)
        try:
            sw.load(json.dumps(m) if i % 2 else m)
        except SwitchError as e:
            assert e.code == "INVALID_ARGUMENT", e
            rejected += 1
            assert sw.process(1, pkt) == [(9, pkt)]  # the previous program still runs
            continue
        loaded += 1
        for data in seeds[:6]:
            sw.process(rng.randrange(16), mutate(rng, data))
    assert loaded and rejected
    assert sw.stats["errors"] == 0  # what loads also runs


def test_control_flow_loop_is_rejected():
    j = test_engine_parser.program()
    t = j["pipelines"][0]["tables"][0]
    t["next_tables"] = {a: t["name"] for a in t["actions"]}
    with pytest.raises(SwitchError) as e:
        Switch().load(j)
    assert "loops" in e.value.message
