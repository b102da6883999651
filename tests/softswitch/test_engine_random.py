"""The random extern (modify_field_rng_uniform) and log_msg."""

import logging

from softswitch import Switch
from tests.p4 import kit
from tests.p4.kit import assign, extract, field, hexstr, prim

SAMPLES = 6000


def program() -> dict:
    p = kit.Program()
    p.header("h", [("lo", 8), ("hi", 8)])
    p.header("o", [("small", 8), ("wide", 32), ("dyn", 8), ("never", 8)])
    p.state("start", [extract("h")])
    p.action("draw", [
        prim("add_header", {"type": "header", "value": "o"}),
        assign(field("o", "never"), hexstr(0x77)),
        prim("modify_field_rng_uniform", field("o", "small"), hexstr(5), hexstr(10)),
        prim("modify_field_rng_uniform", field("o", "wide"), hexstr(0), hexstr(0xFFFFFFFF)),
        prim("modify_field_rng_uniform", field("o", "dyn"), field("h", "lo"), field("h", "hi")),
        prim("modify_field_rng_uniform", field("o", "never"), hexstr(10), hexstr(5)),
        prim("log_msg", {"type": "string", "value": "lo={} hi={} {}"},
             {"type": "parameters_vector", "value": [field("h", "lo"), field("h", "hi")]}),
        assign(field("standard_metadata", "egress_spec"), hexstr(1)),
    ])
    p.call("ingress", "draw_t", "draw")
    return p.json()


def draws(sw, lo, hi, n):
    out = []
    for _ in range(n):
        [(_, pkt)] = sw.process(0, bytes([lo, hi]))
        o = pkt[2:]
        out.append((o[0], int.from_bytes(o[1:5], "big"), o[5], o[6]))
    return out


def test_random_is_uniform_within_bounds():
    sw = Switch(seed=99)
    sw.load(program())
    d = draws(sw, 3, 4, SAMPLES)
    small = [x[0] for x in d]
    assert set(small) == set(range(5, 11))
    # chi-square, 5 degrees of freedom: 20.5 is the 0.1% critical value
    exp = SAMPLES / 6
    chi2 = sum((small.count(v) - exp) ** 2 / exp for v in range(5, 11))
    assert chi2 < 20.5, chi2
    wide = [x[1] for x in d]
    assert all(0 <= w <= 0xFFFFFFFF for w in wide)
    # both halves of the 32-bit range are hit about equally (binomial, 6 sigma)
    top = sum(w >> 31 for w in wide)
    assert abs(top - SAMPLES / 2) < 6 * (SAMPLES / 4) ** 0.5
    assert {x[2] for x in d} == {3, 4}
    assert {x[3] for x in d} == {0x77}  # lo > hi: BMv2 leaves the field alone


def test_same_seed_same_draws_and_runtime_bounds():
    a, b = Switch(seed=5), Switch(seed=5)
    a.load(program())
    b.load(program())
    assert draws(a, 0, 255, 50) == draws(b, 0, 255, 50)
    assert {x[2] for x in draws(a, 9, 9, 20)} == {9}
    assert {x[2] for x in draws(a, 9, 2, 20)} == {0}  # lo > hi: not written, stays 0


def test_log_msg_formats_arguments(caplog):
    sw = Switch(log=logging.getLogger("softswitch.test"))
    sw.load(program())
    with caplog.at_level(logging.INFO, logger="softswitch.test"):
        sw.process(0, bytes([12, 200]))
    assert "lo=12 hi=200 {}" in caplog.text
