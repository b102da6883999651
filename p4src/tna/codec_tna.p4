#ifndef NATSWITCH_CODEC_TNA_P4
#define NATSWITCH_CODEC_TNA_P4

// codec_shared_tna.p4's tables, their rows gen_tna.py's constants.
#define CODEC_ROWS(ENTRIES, DEFAULT) const entries = { ENTRIES }
#define CODEC_NO_ACTION
#include "codec_shared_tna.p4"

CODEC_DECODE
CODEC_ROUND

// The random bits of element i: a hash of the job's seed and the use's identity
// (DESIGN contract 10), one CRC polynomial per element (gen_tna.py). Not the session: a
// rerun of the seed, in a new session, rounds alike (the job's entry moves sessions).
// A packet of several segments rounds each with its index in the key: element i of every
// segment has its own bits.
#if PASSES > 1
#define ROUND_KEY hdr.walk.seed, hdr.agg.job_id, hdr.agg.chunk, hdr.bridge.seg
#else
#define ROUND_KEY hdr.bridge.seed, hdr.agg.job_id, hdr.agg.chunk
#endif

#endif
