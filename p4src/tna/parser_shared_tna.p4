#ifndef NATSWITCH_PARSER_SHARED_TNA_P4
#define NATSWITCH_PARSER_SHARED_TNA_P4

// The ingress parser's states from Ethernet to the payload, and the walk's, written once
// for the TNA program (parser_tna.p4) and its v1model twin (p4src/twin/parser_twin.p4).
// Each defines before using them PARSE_IPV4_CHECK, what its parser does with the IPv4
// header (the TNA's Checksum extern; the twin verifies it in its checksum control).

#ifdef WITH_CNAT8
#define PARSE_CNAT_SELECT ENC_CNAT8: parse_cnat;
#define PARSE_CNAT_STATE \
    state parse_cnat { \
        pkt.extract(hdr.cnat); \
        transition accept; \
    }
#else
#define PARSE_CNAT_SELECT
#define PARSE_CNAT_STATE
#endif
#ifdef WITH_LANES
// The lane encodings' select entries and states, one a lane encoding in wire-number order
// (elements_tna.p4, written by gen_tna.py from protocol/encodings.py `lanes`): ENC_NAME
// goes to state parse_NAME, which extracts hdr.NAME and accepts. Their names are the
// encodings' own, as the TNA program's headers are (headers_tna.p4); the payload table
// (agg_tna.p4, PAYLOAD_KEYS) then tells the encodings apart by which header is valid.
//
//
//
#define PARSE_LANE_SELECT LANE_PARSE_SELECT
#define PARSE_LANE_STATES LANE_PARSE_STATES
#else
#define PARSE_LANE_SELECT
#define PARSE_LANE_STATES
#endif

// A later pass of the walk (passes_tna.p4), META its metadata. Harvesting: the codes
// already read back stay unparsed behind the headers.
#define PARSE_WALK_STATES(META) \
    state parse_walk { \
        pkt.extract(hdr.walk); \
        META.walking = true; \
        META.ridx = hdr.walk.ridx; \
        transition select(hdr.walk.harvest) { \
            0: parse_eth; \
            default: parse_harvest; \
        } \
    } \
    state parse_harvest { \
        pkt.extract(hdr.eth); \
        pkt.extract(hdr.ipv4); \
        pkt.extract(hdr.udp); \
        pkt.extract(hdr.agg); \
        transition accept; \
    }

// Options and fragments are routed, never aggregated. Any other encoding leaves no
// payload header valid: BAD_ENCODING.
#define PARSE_AGG_STATES \
    state parse_eth { \
        pkt.extract(hdr.eth); \
        transition select(hdr.eth.ether_type) { \
            ETHERTYPE_IPV4: parse_ipv4; \
            default: accept; \
        } \
    } \
    state parse_ipv4 { \
        pkt.extract(hdr.ipv4); \
        PARSE_IPV4_CHECK \
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) { \
            (5, 0, PROTO_UDP): parse_udp; \
            default: accept; \
        } \
    } \
    state parse_udp { \
        pkt.extract(hdr.udp); \
        transition select(hdr.udp.dst_port) { \
            AGG_UDP_PORT: parse_agg; \
            default: accept; \
        } \
    } \
    state parse_agg { \
        pkt.extract(hdr.agg); \
        transition select(hdr.agg.encoding) { \
            ENC_FIXED32: parse_fixed; \
            PARSE_CNAT_SELECT \
            PARSE_LANE_SELECT \
            default: accept; \
        } \
    } \
    state parse_fixed { \
        pkt.extract(hdr.fixed); \
        transition accept; \
    } \
    PARSE_CNAT_STATE \
    PARSE_LANE_STATES

#endif
