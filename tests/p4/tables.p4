// Conformance: tables of each match kind with const entries and priorities,
// const and non-const default actions with parameters, hit/miss and
// action_run dispatch, keyless tables, and isValid() as a key.
#include <core.p4>
#include <v1model.p4>

header k_t { bit<8> e; bit<32> addr; bit<16> t; bit<16> r; bit<8> o; bit<8> sel; }
header opt_t { bit<8> x; }
header res_t {
    bit<8> exact; bit<8> lpm; bit<8> tern; bit<8> range; bit<8> opt;
    bit<8> hit; bit<8> run; bit<8> valid; bit<16> param; bit<8> keyless; bit<8> pad;
}

struct headers_t { k_t k; opt_t opt; res_t res; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.k);
        transition select(h.k.sel) {
            1: parse_opt;
            default: accept;
        }
    }
    state parse_opt { pkt.extract(h.opt); transition accept; }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action set_exact(bit<8> v) { h.res.exact = v; }
    action set_lpm(bit<8> v) { h.res.lpm = v; }
    action set_tern(bit<8> v) { h.res.tern = v; }
    action set_range(bit<8> v) { h.res.range = v; }
    action set_opt(bit<8> v) { h.res.opt = v; }
    action set_valid(bit<8> v) { h.res.valid = v; }
    action set_param(bit<16> p) { h.res.param = p; }
    action run_a() { h.res.run = 1; }
    action run_b() { h.res.run = 2; }
    action keyless_act() { h.res.keyless = h.res.keyless + 1; }

    table t_exact {
        key = { h.k.e: exact; }
        actions = { set_exact; }
        const entries = { 1: set_exact(11); 2: set_exact(22); 255: set_exact(0xff); }
        default_action = set_exact(0xee);
    }
    table t_lpm {
        key = { h.k.addr: lpm; }
        actions = { set_lpm; }
        const entries = {
            0x0a000000 &&& 0xff000000: set_lpm(8);
            0x0a010000 &&& 0xffff0000: set_lpm(16);
            0x0a010200 &&& 0xffffff00: set_lpm(24);
            0x0a010203 &&& 0xffffffff: set_lpm(32);
        }
        const default_action = set_lpm(0);
    }
    table t_tern {
        key = { h.k.t: ternary; h.k.e: exact; }
        actions = { set_tern; }
        const entries = {
            (0x1200 &&& 0xff00, 1): set_tern(1);
            (0x1234 &&& 0xffff, 1): set_tern(2);
            (0x0000 &&& 0x0000, 1): set_tern(3);
            (0x0004 &&& 0x000f, 2): set_tern(4);
        }
        default_action = set_tern(0);
    }
    table t_range {
        key = { h.k.r: range; }
        actions = { set_range; }
        const entries = {
            10 .. 20: set_range(1);
            15 .. 30: set_range(2);
            0 .. 0xffff: set_range(3);
        }
    }
    table t_opt {
        key = { h.k.o: optional; h.k.e: exact; }
        actions = { set_opt; }
        const entries = {
            (5, 1): set_opt(1);
            (_, 1): set_opt(2);
            (7, 2): set_opt(3);
        }
        default_action = set_opt(0x77);
    }
    table t_valid {
        key = { h.opt.isValid(): exact; }
        actions = { set_valid; }
        const entries = { true: set_valid(1); false: set_valid(2); }
    }
    table t_hit {
        key = { h.k.e: exact; }
        actions = { set_param; NoAction; }
        const entries = { 2: set_param(0x2222); 3: NoAction(); }
        const default_action = set_param(0xdead);
    }
    table t_run {
        key = { h.k.e: exact; }
        actions = { run_a; run_b; NoAction; }
        const entries = { 1: run_a(); 2: run_b(); }
        default_action = NoAction();
    }
    table t_keyless {
        actions = { keyless_act; }
        default_action = keyless_act();
    }

    apply {
        h.res.setValid();
        t_exact.apply();
        t_lpm.apply();
        t_tern.apply();
        t_range.apply();
        t_opt.apply();
        t_valid.apply();
        if (t_hit.apply().hit) { h.res.hit = 1; } else { h.res.hit = 2; }
        switch (t_run.apply().action_run) {
            run_a: { h.res.param = h.res.param + 1; }
            run_b: { h.res.param = h.res.param + 2; }
            default: { h.res.param = h.res.param + 3; }
        }
        t_keyless.apply();
        sm.egress_spec = 4;
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers_t h) {
    apply { pkt.emit(h.res); pkt.emit(h.k); pkt.emit(h.opt); }
}

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
