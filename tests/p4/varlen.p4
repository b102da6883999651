// A varbit field extracted with a length expression and emitted at that length,
// and a stack of header unions filled by the parser, pushed and popped.
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> len;   // bytes of opt.data
    bit<8> count; // union stack elements that follow
}

header opt_t {
    bit<8>      kind;
    varbit<64>  data;
}

header short_t {
    bit<8> tag;   // 0x0X
    bit<8> x;
}

header long_t {
    bit<8>  tag;  // 0x1X
    bit<24> y;
}

header_union item_t {
    short_t s;
    long_t  l;
}

header info_t {
    bit<8>  flags;
    bit<8>  err;
    bit<16> plen;  // packet_length in egress (follows headers made valid or invalid)
}

struct headers_t {
    ctl_t     ctl;
    opt_t     opt;
    item_t[2] items;
    info_t    info;
}

struct meta_t {
    bit<8> left;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ctl);
        pkt.extract(hdr.opt, (bit<32>) hdr.ctl.len * 8);
        meta.left = hdr.ctl.count;
        transition next_item;
    }
    state next_item {
        transition select(meta.left) {
            0: accept;
            default: item;
        }
    }
    state item {
        meta.left = meta.left - 1;
        transition select(pkt.lookahead<bit<8>>()[7:4]) {
            0: item_short;
            default: item_long;
        }
    }
    state item_short {
        pkt.extract(hdr.items.next.s);
        transition next_item;
    }
    state item_long {
        pkt.extract(hdr.items.next.l);
        transition next_item;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 2;
        if (hdr.opt.isValid() && hdr.opt.kind == 0xfe) {
            hdr.items.push_front(1);
            hdr.items[0].s.setValid();
            hdr.items[0].s.tag = 0x0e;
            hdr.items[0].s.x = 0x77;
        } else if (hdr.opt.isValid() && hdr.opt.kind == 0xfd) {
            hdr.items.pop_front(1);
        }
        hdr.info.setValid();
        hdr.info.err = 4;
        if (std.parser_error == error.NoError) {
            hdr.info.err = 0;
        } else if (std.parser_error == error.HeaderTooShort) {
            hdr.info.err = 1;
        } else if (std.parser_error == error.StackOutOfBounds) {
            hdr.info.err = 2;
        } else if (std.parser_error == error.PacketTooShort) {
            hdr.info.err = 3;
        }
        hdr.info.flags = 0;
        if (hdr.opt.isValid()) {
            hdr.info.flags = hdr.info.flags | 1;
        }
        if (hdr.items[0].s.isValid()) {
            hdr.info.flags = hdr.info.flags | 2;
        }
        if (hdr.items[0].l.isValid()) {
            hdr.info.flags = hdr.info.flags | 4;
        }
        if (hdr.items[1].s.isValid()) {
            hdr.info.flags = hdr.info.flags | 8;
        }
        if (hdr.items[1].l.isValid()) {
            hdr.info.flags = hdr.info.flags | 16;
            hdr.items[1].l.y = hdr.items[1].l.y + 1;
        }
        if (hdr.opt.isValid() && hdr.opt.kind == 0xff) {
            hdr.opt.setInvalid();
        }
    }
}

control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        hdr.info.plen = (bit<16>) std.packet_length;
    }
}

control CC(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.info);
        pkt.emit(hdr.ctl);
        pkt.emit(hdr.opt);
        pkt.emit(hdr.items);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
