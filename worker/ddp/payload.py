"""Compressed payloads as bytes, for the Gloo allgather of compressors a switch cannot sum.

A list of worker/compression Compressed values becomes one .npz blob of numpy arrays and
scalars, named by their path ("0|p:values", "0|p:where|s" for a nested Compressed's shape);
it is loaded with allow_pickle=False, so a peer's bytes are data, never code.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np

from worker.compression.base import Compressed

SEP = "|"


class PayloadError(ValueError):
    """A blob that is not a list of compressed payloads."""


def _put(arrays: dict, path: str, c: Compressed) -> None:
    arrays[f"{path}{SEP}s"] = np.asarray(c.shape, np.int64)
    for kind, items in (("p", c.payload), ("e", c.extra)):
        for key, value in items.items():
            if SEP in key or ":" in key:
                raise PayloadError(f"payload key {key!r} holds {SEP!r} or ':'")
            name = f"{path}{SEP}{kind}:{key}"
            if isinstance(value, Compressed):
                _put(arrays, name, value)
            else:
                arrays[name] = np.asarray(value)


def pack(parts: list[Compressed]) -> bytes:
    arrays: dict[str, np.ndarray] = {"n": np.int64(len(parts))}
    for i, c in enumerate(parts):
        _put(arrays, str(i), c)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _build(tree: dict) -> Compressed:
    if "s" not in tree or isinstance(tree["s"], dict):
        raise PayloadError("a payload without its shape")
    out = {"p": {}, "e": {}}
    for name, value in tree.items():
        if name == "s":
            continue
        kind, _, key = name.partition(":")
        if kind not in out or not key:
            raise PayloadError(f"unknown entry {name!r}")
        if isinstance(value, dict):
            value = _build(value)
        elif value.ndim == 0:
            value = value[()]
        out[kind][key] = value
    return Compressed(out["p"], tuple(int(s) for s in tree["s"]), out["e"])


def unpack(blob: bytes) -> list[Compressed]:
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            n = int(z["n"])
            trees: list[dict] = [{} for _ in range(n)]
            for name in z.files:
                if name == "n":
                    continue
                first, *rest = name.split(SEP)
                node = trees[int(first)]
                for step in rest[:-1]:
                    node = node.setdefault(step, {})
                node[rest[-1]] = z[name]
        return [_build(t) for t in trees]
    except PayloadError:
        raise
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError,
            zipfile.BadZipFile) as e:
        raise PayloadError(f"not a packed payload list: {e}") from None
