"""A small numpy MLP on scikit-learn's digits, with the flat-parameter view training needs.

All parameters live in one flat vector (what a worker compresses and sends);
layers() gives per-tensor views into it, in the order W1, b1, W2, b2, ... which
is also the order of layer_sizes (the "layers" of layer-wise compression).
Hidden units use ReLU, the output softmax cross-entropy, averaged over the
batch. Everything is deterministic given the seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Dataset:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def load_digits_split(test_fraction: float = 0.25, seed: int = 0) -> Dataset:
    """scikit-learn's 8x8 digits (1797 images, shipped with the package), scaled to [0, 1]."""
    from sklearn.datasets import load_digits

    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    return Dataset(x[train], y[train], x[test], y[test])


def shard(x: np.ndarray, y: np.ndarray, rank: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank r of n gets every n-th example starting at r: disjoint, together all of them."""
    if workers < 1 or not 0 <= rank < workers:
        raise ValueError(f"rank {rank} of {workers} workers")
    return x[rank::workers], y[rank::workers]


class Batches:
    """Endless mini-batches of one shard: a fresh seeded permutation per epoch."""

    def __init__(self, x: np.ndarray, y: np.ndarray, batch: int, seed: int = 0):
        if batch < 1 or len(y) == 0:
            raise ValueError("need a batch size >= 1 and a non-empty shard")
        self.x, self.y, self.batch = x, y, min(batch, len(y))
        self.rng = np.random.default_rng(seed)
        self._order = np.zeros(0, np.int64)

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        if self._order.size < self.batch:
            self._order = np.concatenate([self._order, self.rng.permutation(len(self.y))])
        idx, self._order = self._order[: self.batch], self._order[self.batch:]
        return self.x[idx], self.y[idx]


class MLP:
    """Fully connected ReLU network, sizes = (inputs, hidden..., classes)."""

    def __init__(self, sizes: Sequence[int] = (64, 64, 10), seed: int = 0, dtype=np.float32):
        sizes = tuple(int(s) for s in sizes)
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"need at least an input and an output size, got {sizes}")
        self.sizes = sizes
        self.dtype = np.dtype(dtype)
        self.shapes: list[tuple[int, ...]] = []
        self.names: list[str] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True), start=1):
            self.shapes += [(a, b), (b,)]
            self.names += [f"W{i}", f"b{i}"]
        self.layer_sizes = [int(np.prod(s)) for s in self.shapes]
        self.bounds = np.cumsum([0] + self.layer_sizes)
        self.params = np.zeros(self.num_params, self.dtype)
        g = np.random.default_rng(seed)
        for (name, shape), view in zip(zip(self.names, self.shapes, strict=True), self.layers(),
                                       strict=True):
            if name.startswith("W"):  # He initialisation for ReLU layers
                view[...] = g.standard_normal(shape) * np.sqrt(2.0 / shape[0])

    @property
    def num_params(self) -> int:
        return int(self.bounds[-1])

    def layers(self, flat: np.ndarray | None = None) -> list[np.ndarray]:
        """Views of a flat vector (the parameters by default) as W1, b1, W2, b2, ..."""
        flat = self.params if flat is None else flat
        if flat.shape != (self.num_params,):
            raise ValueError(f"expected a flat vector of {self.num_params}, got {flat.shape}")
        return [flat[a:b].reshape(s) for a, b, s in
                zip(self.bounds[:-1], self.bounds[1:], self.shapes, strict=True)]

    def get_params(self) -> np.ndarray:
        return self.params.copy()

    def set_params(self, flat: np.ndarray) -> None:
        flat = np.asarray(flat)
        if flat.shape != (self.num_params,):
            raise ValueError(f"expected {self.num_params} parameters, got {flat.shape}")
        self.params[...] = flat

    def _forward(self, x, params):
        acts = [np.asarray(x, self.dtype)]
        views = self.layers(params)
        for i in range(0, len(views), 2):
            z = acts[-1] @ views[i] + views[i + 1]
            acts.append(np.maximum(z, 0) if i + 2 < len(views) else z)
        return acts

    def logits(self, x, params: np.ndarray | None = None) -> np.ndarray:
        return self._forward(x, self.params if params is None else params)[-1]

    def loss_and_grad(self, x, y, params: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """Mean softmax cross-entropy over the batch and its gradient (flat, like params)."""
        params = self.params if params is None else params
        y = np.asarray(y)
        acts = self._forward(x, params)
        z = acts[-1] - acts[-1].max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        n = len(y)
        loss = float(-logp[np.arange(n), y].mean())
        delta = np.exp(logp)
        delta[np.arange(n), y] -= 1
        delta /= n
        grad = np.zeros(self.num_params, self.dtype)
        gviews = self.layers(grad)
        views = self.layers(params)
        for i in range(len(views) - 2, -1, -2):
            a = acts[i // 2]
            gviews[i][...] = a.T @ delta
            gviews[i + 1][...] = delta.sum(axis=0)
            if i:
                delta = (delta @ views[i].T) * (a > 0)
        return loss, grad

    def gradient(self, x, y, params: np.ndarray | None = None) -> np.ndarray:
        return self.loss_and_grad(x, y, params)[1]

    def loss(self, x, y, params: np.ndarray | None = None) -> float:
        return self.loss_and_grad(x, y, params)[0]

    def predict(self, x, params: np.ndarray | None = None) -> np.ndarray:
        return self.logits(x, params).argmax(axis=1)

    def accuracy(self, x, y, params: np.ndarray | None = None) -> float:
        return float((self.predict(x, params) == np.asarray(y)).mean())

    def step(self, update: np.ndarray, lr: float) -> None:
        """SGD: params -= lr * update (e.g. the averaged gradient of all workers)."""
        self.params -= np.asarray(update, self.dtype) * self.dtype.type(lr)


class EmbeddingBag:
    """A bag-of-tokens classifier whose gradient is naturally sparse: an embedding table,
    the sum of the rows of an example's tokens, a ReLU, then a linear layer.

    An 8x8 digit becomes tokens (pixel, intensity level): pixel p at level l (1..levels,
    its value rounded to `levels` steps; background pixels give no token) is row
    p * levels + l - 1 of the table. A batch touches only the rows of the tokens it holds,
    so only those rows of the table's gradient are non-zero, as in a language model's
    embedding layer: what a block-sparse allreduce leaves out (docs/PROTOCOL.md "Sparse
    jobs"). The flat parameters are E (vocab x dim), W (dim x classes), b (classes), in
    that order; the interface is the MLP's.
    """

    def __init__(self, inputs: int = 64, classes: int = 10, dim: int = 42, levels: int = 16,
                 seed: int = 0, dtype=np.float32):
        if min(inputs, classes, dim, levels) < 1:
            raise ValueError("inputs, classes, dim and levels must be >= 1")
        self.inputs, self.levels, self.dim = inputs, levels, dim
        self.vocab = inputs * levels
        self.dtype = np.dtype(dtype)
        self.shapes = [(self.vocab, dim), (dim, classes), (classes,)]
        self.names = ["E", "W", "b"]
        self.layer_sizes = [int(np.prod(s)) for s in self.shapes]
        self.bounds = np.cumsum([0] + self.layer_sizes)
        self.params = np.zeros(self.num_params, self.dtype)
        g = np.random.default_rng(seed)
        e, w, _ = self.layers()
        e[...] = g.standard_normal(e.shape) * 0.1     # ~30 rows are summed per example
        w[...] = g.standard_normal(w.shape) * np.sqrt(2.0 / dim)

    num_params = MLP.num_params
    layers = MLP.layers
    get_params = MLP.get_params
    set_params = MLP.set_params
    predict = MLP.predict
    accuracy = MLP.accuracy
    step = MLP.step
    gradient = MLP.gradient
    loss = MLP.loss

    def tokens(self, x) -> tuple[np.ndarray, np.ndarray]:
        """(example index, table row) of every token of the batch."""
        x = np.asarray(x, np.float64)
        if x.ndim != 2 or x.shape[1] != self.inputs:
            raise ValueError(f"expected a batch of {self.inputs} inputs, got {x.shape}")
        level = np.clip(np.rint(x * self.levels), 0, self.levels).astype(np.int64)
        ex, pix = np.nonzero(level)
        return ex, pix * self.levels + level[ex, pix] - 1

    def _forward(self, x, params):
        e, w, b = self.layers(params)
        ex, rows = self.tokens(x)
        h = np.zeros((len(x), self.dim), self.dtype)
        np.add.at(h, ex, e[rows])
        a = np.maximum(h, 0)
        return ex, rows, h, a, a @ w + b

    def logits(self, x, params: np.ndarray | None = None) -> np.ndarray:
        return self._forward(x, self.params if params is None else params)[-1]

    def loss_and_grad(self, x, y, params: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """Mean softmax cross-entropy and its gradient; only the touched rows of E non-zero."""
        params = self.params if params is None else params
        y = np.asarray(y)
        ex, rows, h, a, z = self._forward(x, params)
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        n = len(y)
        loss = float(-logp[np.arange(n), y].mean())
        delta = np.exp(logp)
        delta[np.arange(n), y] -= 1
        delta /= n
        grad = np.zeros(self.num_params, self.dtype)
        ge, gw, gb = self.layers(grad)
        _, w, _ = self.layers(params)
        gw[...] = a.T @ delta
        gb[...] = delta.sum(axis=0)
        dh = (delta @ w.T) * (h > 0)
        np.add.at(ge, rows, dh[ex])
        return loss, grad
