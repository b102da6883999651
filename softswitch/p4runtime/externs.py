"""CounterEntry (indirect counters) and RegisterEntry.

Counters follow BMv2 (MODIFY one index, DELETE resets it, wildcard write
unsupported). BMv2 serves no registers; RegisterEntry follows the P4Runtime
1.4 spec: MODIFY only, an unset index reads or writes every cell.
"""

from p4.v1 import p4runtime_pb2

from . import bytestrings
from .device import Device
from .pipeline import Prefix, id_prefix
from .readsink import ReadSink
from .status import P4RTError, engine_call, invalid
from .tables import counter_values, fill_counter_data

Update = p4runtime_pb2.Update


def _index(entry, size: int, what: str) -> int | None:
    if not entry.HasField("index"):
        return None
    index = entry.index.index
    if index < 0:
        raise invalid("a negative number is not a valid index value")
    if index >= size:
        raise P4RTError("OUT_OF_RANGE", f"index {index} out of range for {what} of size {size}")
    return index


def _update_type_error(kind: int, entity: str) -> P4RTError:
    if kind == Update.UNSPECIFIED:
        return invalid("update type is not set")
    if kind in (Update.INSERT, Update.DELETE):
        return invalid(f"{Update.Type.Name(kind)} update type not supported for {entity}")
    return invalid("invalid update type")


# ---- counters ---------------------------------------------------------------------------------

def _counter_info(device: Device, counter_id: int):
    if id_prefix(counter_id) == Prefix.DIRECT_COUNTER and \
            counter_id in device.pipeline.direct_counters:
        raise invalid("cannot use CounterEntry with a direct counter")
    return device.pipeline.counter(counter_id)


def write_counter(device: Device, kind: int, ce: p4runtime_pb2.CounterEntry) -> None:
    info = _counter_info(device, ce.counter_id)
    if not ce.HasField("index"):
        raise P4RTError("UNIMPLEMENTED", "wildcard write is not supported for indirect counters")
    index = _index(ce, info.size, f"counter {info.name}")
    engine = device.switch.counters[info.name]
    if kind == Update.MODIFY:
        if ce.HasField("data"):
            engine_call(engine.write, index, *counter_values(info.unit, ce.data))
    elif kind == Update.DELETE:  # BMv2 resets the cell
        engine_call(engine.write, index, 0, 0)
    else:
        raise _update_type_error(kind, "counters")


def read_counter(device: Device, ce: p4runtime_pb2.CounterEntry, out: ReadSink) -> None:
    infos = (list(device.pipeline.counters.values()) if ce.counter_id == 0
             else [_counter_info(device, ce.counter_id)])
    for info in infos:
        engine = device.switch.counters[info.name]
        index = _index(ce, info.size, f"counter {info.name}")
        for i in range(info.size) if index is None else (index,):
            packets, nbytes = engine.read(i)
            msg = out.add("counter_entry")
            msg.counter_id = info.id
            msg.index.index = i
            fill_counter_data(packets, nbytes, msg.data)


# ---- registers --------------------------------------------------------------------------------

def write_register(device: Device, kind: int, re: p4runtime_pb2.RegisterEntry) -> None:
    info = device.pipeline.register(re.register_id)
    if kind != Update.MODIFY:
        raise _update_type_error(kind, "registers")
    index = _index(re, info.size, f"register {info.name}")
    if re.data.WhichOneof("data") != "bitstring":
        raise invalid(f"register {info.name}: data must be a bitstring")
    what = f"register {info.name} value"
    if info.signed:
        value = bytestrings.decode_signed(re.data.bitstring, info.bitwidth, what)
        value &= (1 << info.bitwidth) - 1
    else:
        value = bytestrings.decode(re.data.bitstring, info.bitwidth, what)
    engine = device.switch.registers[info.name]
    for i in range(info.size) if index is None else (index,):
        engine_call(engine.write, i, value)


def read_register(device: Device, re: p4runtime_pb2.RegisterEntry, out: ReadSink) -> None:
    infos = (list(device.pipeline.registers.values()) if re.register_id == 0
             else [device.pipeline.register(re.register_id)])
    for info in infos:
        engine = device.switch.registers[info.name]
        index = _index(re, info.size, f"register {info.name}")
        for i in range(info.size) if index is None else (index,):
            value = engine.read(i)
            msg = out.add("register_entry")
            msg.register_id = info.id
            msg.index.index = i
            if info.signed:
                if value >> (info.bitwidth - 1):
                    value -= 1 << info.bitwidth
                msg.data.bitstring = bytestrings.encode_signed(value)
            else:
                msg.data.bitstring = bytestrings.encode(value)
