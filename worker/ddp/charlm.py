"""A character-level transformer language model on the Python standard library's own sources:
text every machine with Python has, nothing downloaded. Judged by validation loss (nats per
character), a smooth measure whose paired differences between methods are small: the
workload that separates methods with few seeds (docs/results.md, bench/separation.py).

The corpus is a fixed list of modules present in every CPython 3 (`MODULES`), read from the
running interpreter's library; train on the first 90 % of each file, validate on the rest.
Its sha256 goes into results, so a comparison names the text it was made on.
"""

from __future__ import annotations

import hashlib
import sysconfig
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn

MODULES = ("argparse.py", "bisect.py", "calendar.py", "contextlib.py", "csv.py",
           "dataclasses.py", "difflib.py", "enum.py", "fnmatch.py", "fractions.py",
           "functools.py", "heapq.py", "json/decoder.py", "json/encoder.py", "queue.py",
           "random.py", "shlex.py", "statistics.py", "string.py", "textwrap.py")
CONTEXT = 64                # characters a window sees
VAL_WINDOWS = 512           # fixed validation windows (evenly spaced over the held-out text)
TRAIN_SHARE = 0.9
# Symbols: printable ASCII and newline; anything else (tabs, non-ASCII) is one symbol.
ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))
VOCAB = len(ALPHABET) + 1
_INDEX = np.full(256, len(ALPHABET), np.int64)
_INDEX[np.frombuffer(ALPHABET.encode(), np.uint8)] = np.arange(len(ALPHABET))


def stdlib() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


@lru_cache(maxsize=1)
def corpus() -> tuple[bytes, ...]:
    """The modules' text, each as bytes; a missing module is a clear error, not a smaller
    corpus."""
    root = stdlib()
    missing = [m for m in MODULES if not (root / m).is_file()]
    if missing:
        raise FileNotFoundError(f"the standard library at {root} lacks {missing}: the "
                                f"charlm workload needs its sources (.py files)")
    return tuple((root / m).read_bytes() for m in MODULES)


def corpus_sha256() -> str:
    h = hashlib.sha256()
    for text in corpus():
        h.update(hashlib.sha256(text).digest())
    return h.hexdigest()


def encode(text: bytes) -> np.ndarray:
    return _INDEX[np.frombuffer(text, np.uint8)]


def windows(ids: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ids[s:s+T] and next characters ids[s+1:s+T+1] for each start s."""
    idx = starts[:, None] + np.arange(CONTEXT + 1)
    w = ids[idx]
    return w[:, :-1], w[:, 1:]


def split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_val, y_val): every non-overlapping training window of each
    file's first 90 %, and VAL_WINDOWS evenly spaced windows of the held-out rest."""
    train_parts, val_parts = [], []
    for text in corpus():
        ids = encode(text)
        cut = int(len(ids) * TRAIN_SHARE)
        train_parts.append(ids[:cut])
        val_parts.append(ids[cut:])
    xs, ys = [], []
    for ids in train_parts:
        starts = np.arange(0, len(ids) - CONTEXT - 1, CONTEXT)
        x, y = windows(ids, starts)
        xs.append(x)
        ys.append(y)
    val = np.concatenate(val_parts)
    starts = np.linspace(0, len(val) - CONTEXT - 2, VAL_WINDOWS).astype(np.int64)
    xv, yv = windows(val, starts)
    return np.concatenate(xs), np.concatenate(ys), xv, yv


class CharTransformer(nn.Module):
    """Token and position embeddings, pre-norm causal transformer blocks, a linear head.
    Returns logits as (batch, VOCAB, CONTEXT), the layout cross_entropy takes with
    (batch, CONTEXT) targets. No dropout: a step is a function of its inputs."""

    def __init__(self, dim: int = 64, heads: int = 4, layers: int = 2, hidden: int = 128):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.pos = nn.Parameter(torch.zeros(CONTEXT, dim))
        block = nn.TransformerEncoderLayer(dim, heads, hidden, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB)
        with torch.no_grad():
            self.pos.normal_(0.0, 0.02)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(CONTEXT),
                             persistent=False)

    def forward(self, x):
        t = x.shape[1]
        h = self.embed(x) + self.pos[:t]
        h = self.blocks(h, mask=self.mask[:t, :t], is_causal=True)
        return self.head(self.norm(h)).transpose(1, 2)
