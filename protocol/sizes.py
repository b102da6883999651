"""Sizes the switch program, the wire format and the control plane share.

p4src/include/sizes.p4, constants.p4 and p4src/tna/sizes_tna.p4 hold the same numbers for
the compiler; tests/test_protocol.py compares them with these.
"""

AGG_PORT = 20033           # UDP port of aggregation traffic (0x4E41): AGG_UDP_PORT

# Header bytes in front of a payload. A frame on a link: Ethernet, IPv4, UDP, AGG, payload.
ETH_HDR = 14               # no FCS
IPV4_HDR = 20
UDP_HDR = 8
AGG_HDR = 16               # AGG_HDR_BYTES
BLOCK_HDR = 8              # a sparse packet's block header, after AGG: BLOCK_HDR_BYTES
IP_UDP_AGG = IPV4_HDR + UDP_HDR + AGG_HDR
MTU = 1500                 # the links' (veths', Mininet's) IPv4 MTU

# The v1model program (sizes.p4).
ELEMS = 168                # elements per packet of the default profile: ELEMS
MAX_GROWTH = 512           # bytes BMv2 lets a program add to a packet: MAX_GROWTH
POOL_SIZE = 512            # register slots per switch (two versions each): POOL_SIZE
SLOT_REGS = 2 * POOL_SIZE  # SLOT_REGS
MAX_JOBS = 64
MAX_CHILD_ENTRIES = 2048
MAX_ROUTES = 4096
NUM_PORTS = 512
MAX_CHILDREN = 32          # the width of a slot's bitmap of children (bit<32>)

# The Tofino profile (sizes_tna.p4): its default pool, and both targets' pipes.
TNA_POOL_SIZE = 512
TNA_PIPES = 4
