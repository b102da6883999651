"""The DDP workloads: a 1-D CNN on MNIST-1D, generated locally from the package's templates
(`mnist1d`, the default), a bag-of-tokens classifier with an embedding table on
scikit-learn's digits (`embedding`), whose gradient is non-zero only in the rows a batch
touched, as a language model's embedding layer's is: what a sparse job sends, and a
character-level transformer language model on the Python standard library's sources
(`charlm`, worker/ddp/charlm.py), judged by validation loss.

MNIST-1D (the `mnist1d` package) turns ten hand-made 1-D templates into 40-sample signals
by padding, scaling, translating, shearing and adding correlated noise. `make_dataset`
builds the standard 4000/1000 split from its seed in about 2 s with numpy and scipy; nothing
is downloaded (the package's `get_dataset` would fetch a pickle, so it is not used). The task
is hard for linear models and MLPs (about 70% in the paper) but learnable by a small CNN
(over 90%), so a biased compressor visibly costs accuracy at equal steps, where scikit-learn's
digits let every compressor reach the same accuracy.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

DATA_SEED = 42          # the package's default: the standard MNIST-1D split
_INIT = threading.Lock()   # initialisation seeds torch's global generator


@dataclass(frozen=True)
class Data:
    x_train: torch.Tensor      # (n, 1, 40) float32
    y_train: torch.Tensor      # (n,) int64
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_mnist1d(seed: int = DATA_SEED) -> Data:
    """The MNIST-1D split the package generates for `seed` (no file, no network)."""
    import matplotlib
    matplotlib.use("Agg")       # mnist1d imports pyplot; never a display
    from mnist1d.data import get_dataset_args, make_dataset

    args = get_dataset_args()
    args.seed = seed
    state = np.random.get_state()   # make_dataset seeds numpy's global generator
    try:
        d = make_dataset(args)
    finally:
        np.random.set_state(state)

    def x(a):
        return torch.from_numpy(np.ascontiguousarray(a, np.float32)).unsqueeze(1)

    def y(a):
        return torch.from_numpy(np.asarray(a, np.int64))

    return Data(x(d["x"]), y(d["y"]), x(d["x_test"]), y(d["y_test"]))


class ConvNet1D(nn.Module):
    """Three strided convolutions (40 -> 20 -> 10 -> 5 samples) and two dense layers:
    134,922 parameters, no buffers (nothing but gradients to keep in step)."""

    def __init__(self, channels: tuple[int, int, int] = (32, 64, 128), hidden: int = 128,
                 classes: int = 10, length: int = 40):
        super().__init__()
        c1, c2, c3 = channels
        self.features = nn.Sequential(
            nn.Conv1d(1, c1, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv1d(c1, c2, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv1d(c2, c3, 5, stride=2, padding=2), nn.ReLU(),
        )
        out_len = length
        for _ in range(3):
            out_len = (out_len + 1) // 2
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(c3 * out_len, hidden), nn.ReLU(),
                                  nn.Linear(hidden, classes))

    def forward(self, x):
        return self.head(self.features(x))


def make_model(seed: int, workload: str = "mnist1d") -> nn.Module:
    """The same initial parameters for the same seed, on every rank (also when ranks are
    threads of one process: they take turns with the global generator)."""
    with _INIT:
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            return WORKLOADS[workload][1]()
        finally:
            torch.random.set_rng_state(gen_state)


class DigitsEmbedding(nn.Module):
    """A bag-of-tokens classifier with an embedding table: an 8x8 digit, its pixels set
    where above 0.4, becomes 16 tokens, the 8-bit pattern of each of its rows and of each
    of its columns (`tokens_of`), each a row of a 4096-row table; an example is the sum of
    its 16 rows, a ReLU and a linear layer (172,462 parameters). The digits use few of the
    patterns, so a step of 4 ranks x 32 examples touches about a quarter of the table's
    blocks of 168 elements (4 rows of 42), as a language model's batch touches few rows of
    its embedding table."""

    def __init__(self, dim: int = 42, classes: int = 10):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, dim, mode="sum")
        self.head = nn.Linear(dim, classes)
        with torch.no_grad():
            self.embed.weight.normal_(0.0, 0.1)

    def forward(self, tokens):
        return self.head(torch.relu(self.embed(tokens)))


VOCAB = 2 * 8 * 256         # (row or column, position, 8-bit pattern)


def tokens_of(x: np.ndarray) -> np.ndarray:
    """(n, 64) pixels in [0, 1] -> (n, 16) table rows: row i's pattern p is row i * 256 + p,
    column j's is 2048 + j * 256 + p."""
    bits = (np.asarray(x).reshape(-1, 8, 8) > 0.4).astype(np.int64)
    weights = 1 << np.arange(8)
    rows = np.arange(8) * 256 + (bits * weights).sum(2)
    cols = 2048 + np.arange(8) * 256 + (bits.transpose(0, 2, 1) * weights).sum(2)
    return np.concatenate([rows, cols], axis=1)


def load_digits_tokens() -> Data:
    """scikit-learn's digits (shipped with the package), as token rows."""
    from worker.model import load_digits_split

    d = load_digits_split()
    def x(a):
        return torch.from_numpy(tokens_of(a))

    def y(a):
        return torch.from_numpy(np.asarray(a, np.int64))

    return Data(x(d.x_train), y(d.y_train), x(d.x_test), y(d.y_test))


def load_charlm() -> Data:
    """The standard library's text as windows of characters (worker/ddp/charlm.py)."""
    from worker.ddp import charlm

    return Data(*(torch.from_numpy(a) for a in charlm.split()))


def _char_transformer() -> nn.Module:
    from worker.ddp.charlm import CharTransformer

    return CharTransformer()


# name -> (data, model class); the model is built from a seed by make_model
WORKLOADS = {"mnist1d": (load_mnist1d, ConvNet1D), "embedding": (load_digits_tokens,
                                                                  DigitsEmbedding),
             "charlm": (load_charlm, _char_transformer)}


def load_data(workload: str) -> Data:
    return WORKLOADS[workload][0]()


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return float((model(x).argmax(1) == y).float().mean())


@torch.no_grad()
def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return float(nn.functional.cross_entropy(model(x), y))


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(accuracy, loss) from one forward pass."""
    out = model(x)
    return float((out.argmax(1) == y).float().mean()), float(nn.functional.cross_entropy(out, y))
