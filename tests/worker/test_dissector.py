"""The Wireshark dissector decodes a capture the project writes (tshark, Debian's package)."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from worker import wire
from worker.frames import Framer

LUA = Path(__file__).resolve().parents[2] / "worker" / "dissector" / "natswitch.lua"
FIELDS = ["msg_type", "encoding", "job_id", "session", "slot", "version", "exp", "count",
          "chunk", "elems", "nonzero", "negative", "max_code", "min", "max"]


def tshark(*args: str, first: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run(["tshark", *first, "-X", f"lua_script:{LUA}", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def dissector_ready():
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (Debian package tshark)")
    version = subprocess.run(["tshark", "-v"], capture_output=True, text=True).stdout
    if "without Lua" in version:
        pytest.skip("this tshark is built without Lua")
    protocols = tshark(first=("-G", "protocols"))
    assert "natswitch" in protocols.stdout, (
        "tshark did not load the dissector (as root, Wireshark's init.lua must allow scripts: "
        f"run_user_scripts_when_superuser); stderr: {protocols.stderr[-500:]}")


def test_tshark_decodes_header_and_payload_summary(tmp_path, dissector_ready):
    f = Framer(("02:00:0a:00:01:01", "10.0.1.1"), ("02:4e:41:ff:ff:fe", "10.255.255.254"))
    codes = np.zeros(wire.ELEMS, np.uint8)
    codes[[0, 5, 9]] = [3, 0x80 | 17, 2]
    ints = np.arange(wire.ELEMS, dtype=np.int32) - 7
    ints[100] = -(2**31)
    frames = [
        f.build(wire.MSG_CONTRIB, wire.ENC_CNAT8, 4, 300, 17, 1, 140, 1, 4000000000, codes),
        f.build(wire.MSG_RESULT, wire.ENC_FIXED32, 65535, 1, 0, 0, 0, 8, 123456, ints),
    ]
    pcap = tmp_path / "agg.pcap"
    wrpcap(str(pcap), [Ether(x) for x in frames])
    args = ["-r", str(pcap), "-T", "fields", "-E", "separator=|"]
    for name in FIELDS:
        args += ["-e", f"natswitch.{name}"]
    out = tshark(*args)
    assert out.returncode == 0, out.stderr
    rows = [dict(zip(FIELDS, line.split("|"), strict=True)) for line in out.stdout.splitlines()]
    elems = str(wire.ELEMS)
    assert rows[0] == {"msg_type": "1", "encoding": "1", "job_id": "4", "session": "300",
                       "slot": "17", "version": "1", "exp": "140", "count": "1",
                       "chunk": "4000000000", "elems": elems,
                       "nonzero": "3", "negative": "1", "max_code": "17", "min": "", "max": ""}
    assert rows[1] == {"msg_type": "2", "encoding": "0", "job_id": "65535", "session": "1",
                       "slot": "0", "version": "0", "exp": "0", "count": "8",
                       "chunk": "123456", "elems": elems,
                       "nonzero": str(wire.ELEMS - 1), "negative": "8", "max_code": "",
                       "min": str(-(2**31)), "max": str(wire.ELEMS - 8)}
    summary = tshark("-r", str(pcap))
    assert "RESULT FIXED32 job 65535 session 1 slot 0 v0 chunk 123456" in summary.stdout
    assert "CONTRIB CNAT8 job 4 session 300 slot 17 v1 chunk 4000000000" in summary.stdout


def test_tshark_decodes_the_4_bit_and_sum8_payloads(tmp_path, dissector_ready):
    """NAT4 (levels and signs, two per byte), UQ4 (integers 0..15) and SUM8 (bytes)."""
    from worker import codec

    f = Framer(("02:00:0a:00:01:01", "10.0.1.1"), ("02:4e:41:ff:ff:fe", "10.255.255.254"))
    nat = np.zeros(wire.ELEMS, np.uint8)
    nat[[0, 1, 7]] = [0x8 | 7, 3, 0x8 | 1]                   # -2^6, +2^2, -2^0 units
    uq = np.full(wire.ELEMS, 7, np.uint8)
    uq[[2, 3]] = [0, 15]
    sums = np.arange(wire.ELEMS, dtype=np.uint8)
    frames = [f.build(wire.MSG_CONTRIB, wire.ENC_NAT4, 1, 2, 3, 0, 130, 1, 9, codec.pack4(nat)),
              f.build(wire.MSG_CONTRIB, wire.ENC_UQ4, 1, 2, 3, 0, 130, 1, 9, codec.pack4(uq)),
              f.build(wire.MSG_RESULT, wire.ENC_SUM8, 1, 2, 3, 0, 130, 17, 9, sums)]
    pcap = tmp_path / "four.pcap"
    wrpcap(str(pcap), [Ether(x) for x in frames])
    args = ["-r", str(pcap), "-T", "fields", "-E", "separator=|"]
    for name in FIELDS:
        args += ["-e", f"natswitch.{name}"]
    out = tshark(*args)
    assert out.returncode == 0, out.stderr
    rows = [dict(zip(FIELDS, line.split("|"), strict=True)) for line in out.stdout.splitlines()]
    elems = str(wire.ELEMS)
    assert [r["encoding"] for r in rows] == ["3", "4", "5"]
    assert all(r["elems"] == elems for r in rows)
    assert (rows[0]["nonzero"], rows[0]["negative"], rows[0]["max_code"]) == ("3", "2", "7")
    assert (rows[1]["min"], rows[1]["max"], rows[1]["nonzero"]) == ("0", "15", str(wire.ELEMS - 1))
    assert (rows[2]["min"], rows[2]["max"]) == ("0", "167")
    assert "RESULT SUM8 job 1" in tshark("-r", str(pcap)).stdout


def test_tshark_flags_a_truncated_header(tmp_path, dissector_ready):
    f = Framer(("02:00:0a:00:01:01", "10.0.1.1"), ("02:4e:41:ff:ff:fe", "10.255.255.254"))
    good = f.build(wire.MSG_CONTRIB, wire.ENC_CNAT8, 1, 1, 0, 0, 0, 1, 0,
                   np.zeros(wire.ELEMS, np.uint8))
    pkt = Ether(good)
    pkt["UDP"].remove_payload()
    pkt = pkt / b"\x01\x01\x00"
    pkt["IP"].len = pkt["UDP"].len = None
    pcap = tmp_path / "short.pcap"
    wrpcap(str(pcap), [pkt])
    out = tshark("-r", str(pcap), "-V")
    assert "Shorter than the 16-byte header" in out.stdout
