"""The DDP workload: a 1-D CNN on MNIST-1D, generated locally from the package's templates.

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


def make_model(seed: int) -> ConvNet1D:
    """The same initial parameters for the same seed, on every rank (also when ranks are
    threads of one process: they take turns with the global generator)."""
    with _INIT:
        gen_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            return ConvNet1D()
        finally:
            torch.random.set_rng_state(gen_state)


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return float((model(x).argmax(1) == y).float().mean())


@torch.no_grad()
def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return float(nn.functional.cross_entropy(model(x), y))
