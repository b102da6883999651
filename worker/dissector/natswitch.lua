-- Wireshark/tshark dissector for natswitch's aggregation header (docs/PROTOCOL.md).
--
--   tshark -X lua_script:worker/dissector/natswitch.lua -r capture.pcap -V
--   wireshark -X lua_script:worker/dissector/natswitch.lua capture.pcap
-- or copy it to ~/.local/lib/wireshark/plugins/.
--
-- UDP port 20033 is the switch protocol, 20034 the host-based baseline (worker/baseline.py).
-- The payload is summarised (elements, nonzero, range or largest code), not listed.

local AGG_PORT = 20033
local PS_PORT = 20034
local HDR_LEN = 16

local msg_types = { [1] = "CONTRIB", [2] = "RESULT" }
local encodings = { [0] = "FIXED32", [1] = "CNAT8", [2] = "FLOAT32", [3] = "NAT4",
                    [4] = "UQ4", [5] = "SUM8" }
-- bytes per element; 4-bit encodings (NAT4, UQ4) hold two per byte, the high nibble first
local elem_size = { [0] = 4, [1] = 1, [2] = 4, [3] = 0.5, [4] = 0.5, [5] = 1 }

local agg = Proto("natswitch", "natswitch aggregation")
local f = agg.fields
f.msg_type = ProtoField.uint8("natswitch.msg_type", "Message type", base.DEC, msg_types)
f.encoding = ProtoField.uint8("natswitch.encoding", "Encoding", base.DEC, encodings)
f.job_id = ProtoField.uint16("natswitch.job_id", "Job", base.DEC)
f.session = ProtoField.uint16("natswitch.session", "Session", base.DEC)
f.slot = ProtoField.uint16("natswitch.slot", "Slot", base.DEC)
f.version = ProtoField.uint8("natswitch.version", "Version", base.DEC)
f.exp = ProtoField.uint8("natswitch.exp", "Exponent (biased)", base.DEC)
f.count = ProtoField.uint8("natswitch.count", "Count", base.DEC)
f.flags = ProtoField.uint8("natswitch.flags", "Flags", base.HEX)
f.chunk = ProtoField.uint32("natswitch.chunk", "Chunk number (the use)", base.DEC)
f.elems = ProtoField.uint32("natswitch.elems", "Elements", base.DEC)
f.nonzero = ProtoField.uint32("natswitch.nonzero", "Nonzero elements", base.DEC)
f.min = ProtoField.int32("natswitch.min", "Smallest value", base.DEC)
f.max = ProtoField.int32("natswitch.max", "Largest value", base.DEC)
f.max_code = ProtoField.uint8("natswitch.max_code", "Largest code m", base.DEC)
f.negative = ProtoField.uint32("natswitch.negative", "Negative elements", base.DEC)
f.first = ProtoField.string("natswitch.first", "First values")
f.payload = ProtoField.bytes("natswitch.payload", "Payload")

local e_short = ProtoExpert.new("natswitch.short", "Shorter than the 16-byte header",
                                expert.group.MALFORMED, expert.severity.ERROR)
local e_ragged = ProtoExpert.new("natswitch.ragged", "Payload is not whole elements",
                                 expert.group.MALFORMED, expert.severity.WARN)
local e_encoding = ProtoExpert.new("natswitch.bad_encoding", "Unknown encoding",
                                   expert.group.MALFORMED, expert.severity.WARN)
local e_code = ProtoExpert.new("natswitch.bad_code", "NAT4 nibble 0x8 (never encoded)",
                               expert.group.MALFORMED, expert.severity.WARN)
agg.experts = { e_short, e_ragged, e_encoding, e_code }

-- element i of a payload: the nibble (4-bit encodings) or the byte
local function nibble(buf, i)
  local b = buf(math.floor(i / 2), 1):uint()
  if i % 2 == 0 then return math.floor(b / 16) end
  return b % 16
end

local function summarise(tree, buf, enc)
  local size = elem_size[enc]
  local n = math.floor(buf:len() / size)
  local sub = tree:add(f.payload, buf)
  sub:set_text(string.format("Payload: %d %s elements", n, encodings[enc]))
  if size >= 1 and buf:len() % size ~= 0 then sub:add_proto_expert_info(e_ragged) end
  sub:add(f.elems, n):set_generated()
  local nonzero, negative, lo, hi, top = 0, 0, nil, nil, 0
  local first = {}
  local bad = false
  for i = 0, n - 1 do
    local v
    if enc == 3 then
      local c = nibble(buf, i)
      local m = c % 8
      if c == 8 then bad = true end
      if m > 0 then
        nonzero = nonzero + 1
        if c >= 8 then negative = negative + 1 end
        if m > top then top = m end
      end
      v = (c >= 8 and "-" or "+") .. m
      if m == 0 then v = "0" end
    elseif enc == 4 or enc == 5 then
      local x = enc == 4 and nibble(buf, i) or buf(i, 1):uint()
      if x ~= 0 then nonzero = nonzero + 1 end
      if lo == nil or x < lo then lo = x end
      if hi == nil or x > hi then hi = x end
      v = tostring(x)
    elseif enc == 1 then
      local c = buf(i, 1):uint()
      local m = c % 128
      if m > 0 then
        nonzero = nonzero + 1
        if c >= 128 then negative = negative + 1 end
        if m > top then top = m end
      end
      v = (c >= 128 and "-" or "+") .. m
      if m == 0 then v = "0" end
    elseif enc == 0 then
      local x = buf(i * 4, 4):int()
      if x ~= 0 then nonzero = nonzero + 1 end
      if x < 0 then negative = negative + 1 end
      if lo == nil or x < lo then lo = x end
      if hi == nil or x > hi then hi = x end
      v = tostring(x)
    else
      local x = buf(i * 4, 4):float()
      if x ~= 0 then nonzero = nonzero + 1 end
      if x < 0 then negative = negative + 1 end
      v = string.format("%g", x)
    end
    if i < 8 then first[#first + 1] = v end
  end
  sub:add(f.nonzero, nonzero):set_generated()
  sub:add(f.negative, negative):set_generated()
  if enc == 1 or enc == 3 then sub:add(f.max_code, top):set_generated() end
  if bad then sub:add_proto_expert_info(e_code) end
  if (enc == 0 or enc == 4 or enc == 5) and n > 0 then
    sub:add(f.min, lo):set_generated()
    sub:add(f.max, hi):set_generated()
  end
  sub:add(f.first, table.concat(first, " ") .. (n > 8 and " ..." or "")):set_generated()
end

function agg.dissector(buf, pinfo, tree)
  pinfo.cols.protocol = "NATSWITCH"
  local t = tree:add(agg, buf(0, math.min(buf:len(), HDR_LEN)))
  if buf:len() < HDR_LEN then
    t:add_proto_expert_info(e_short)
    return buf:len()
  end
  local mtype = buf(0, 1):uint()
  local enc = buf(1, 1):uint()
  local chunk = buf(12, 4):uint()
  t:add(f.msg_type, buf(0, 1))
  local te = t:add(f.encoding, buf(1, 1))
  t:add(f.job_id, buf(2, 2))
  t:add(f.session, buf(4, 2))
  t:add(f.slot, buf(6, 2))
  t:add(f.version, buf(8, 1))
  t:add(f.exp, buf(9, 1))
  t:add(f.count, buf(10, 1))
  t:add(f.flags, buf(11, 1))
  t:add(f.chunk, buf(12, 4))
  local what = "chunk " .. chunk
  local info = string.format("%s %s job %d session %d slot %d v%d %s exp %d count %d",
                             msg_types[mtype] or ("type " .. mtype),
                             encodings[enc] or ("encoding " .. enc),
                             buf(2, 2):uint(), buf(4, 2):uint(), buf(6, 2):uint(),
                             buf(8, 1):uint(), what, buf(9, 1):uint(), buf(10, 1):uint())
  pinfo.cols.info = info
  t:append_text(", " .. info)
  if elem_size[enc] == nil then
    te:add_proto_expert_info(e_encoding)
  elseif buf:len() > HDR_LEN then
    summarise(t, buf(HDR_LEN), enc)
  end
  return buf:len()
end

local udp = DissectorTable.get("udp.port")
udp:add(AGG_PORT, agg)
udp:add(PS_PORT, agg)
