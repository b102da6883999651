"""The numpy MLP and the digits data: gradients, views, determinism, shards, learning."""

import numpy as np
import pytest

from worker.model import MLP, Batches, load_digits_split, shard


@pytest.fixture(scope="module")
def data():
    return load_digits_split(seed=0)


def test_digits_split(data):
    assert data.x_train.shape[1] == 64 and data.classes == 10
    assert len(data.y_train) + len(data.y_test) == 1797
    assert 0 <= data.x_train.min() and data.x_train.max() <= 1
    again = load_digits_split(seed=0)
    assert np.array_equal(again.y_test, data.y_test)
    assert not np.array_equal(load_digits_split(seed=1).y_test, data.y_test)


def test_gradient_matches_finite_differences(data):
    m = MLP((64, 16, 12, 10), seed=1, dtype=np.float64)
    x, y = data.x_train[:20], data.y_train[:20]
    _, g = m.loss_and_grad(x, y)
    p = m.get_params()
    idx = np.random.default_rng(0).choice(m.num_params, 60, replace=False)
    eps = 1e-6
    for i in idx:
        hi, lo = p.copy(), p.copy()
        hi[i] += eps
        lo[i] -= eps
        num = (m.loss(x, y, hi) - m.loss(x, y, lo)) / (2 * eps)
        assert abs(num - g[i]) <= 1e-6 + 1e-4 * abs(num), (m.names, i, num, g[i])


def test_flat_parameters_and_layer_views():
    m = MLP((64, 64, 10), seed=0)
    assert m.layer_sizes == [64 * 64, 64, 64 * 10, 10] and m.num_params == 4810
    views = m.layers()
    views[2][0, 0] = 123.0  # a view writes through to the flat vector
    assert m.params[64 * 64 + 64] == 123.0
    p = m.get_params()
    p[:] = 0
    assert m.params[64 * 64 + 64] == 123.0  # get_params is a copy
    m.set_params(p)
    assert not m.params.any()
    with pytest.raises(ValueError):
        m.set_params(np.zeros(3))
    g = m.layers(np.arange(m.num_params, dtype=np.float32))
    assert [v.shape for v in g] == [(64, 64), (64,), (64, 10), (10,)]


def test_deterministic_given_the_seed(data):
    a, b = MLP(seed=3), MLP(seed=3)
    assert np.array_equal(a.params, b.params)
    assert not np.array_equal(a.params, MLP(seed=4).params)
    x, y = data.x_train[:32], data.y_train[:32]
    assert np.array_equal(a.gradient(x, y), b.gradient(x, y))
    ba, bb = Batches(x, y, 8, seed=5), Batches(x, y, 8, seed=5)
    for _ in range(6):
        assert np.array_equal(ba.next()[1], bb.next()[1])


def test_shards_partition_the_data(data):
    n = len(data.y_train)
    parts = [shard(np.arange(n), np.arange(n), r, 3)[0] for r in range(3)]
    assert sorted(np.concatenate(parts)) == list(range(n))
    with pytest.raises(ValueError):
        shard(data.x_train, data.y_train, 3, 3)


def test_batches_cover_an_epoch():
    x = np.arange(10)
    b = Batches(x, x, 4, seed=0)
    seen = np.concatenate([b.next()[1] for _ in range(5)])  # 20 = two epochs
    assert sorted(seen[:10]) == list(range(10)) and sorted(seen[10:]) == list(range(10))


def test_sgd_learns_digits(data):
    m = MLP(seed=0)
    before = m.accuracy(data.x_test, data.y_test)
    batches = Batches(data.x_train, data.y_train, 32, seed=0)
    for _ in range(300):
        m.step(m.gradient(*batches.next()), lr=0.1)
    after = m.accuracy(data.x_test, data.y_test)
    assert before < 0.3 and after > 0.9


def test_embedding_gradient_matches_finite_differences_and_is_row_sparse(data):
    from worker.model import EmbeddingBag

    m = EmbeddingBag(seed=3, dtype=np.float64)
    x, y = data.x_train[:16], data.y_train[:16]
    loss, g = m.loss_and_grad(x, y)
    rng = np.random.default_rng(0)
    eps = 1e-5
    for i in np.concatenate([rng.choice(np.flatnonzero(g), 12),
                             rng.choice(np.flatnonzero(g == 0), 4)]):
        p = m.params.copy()
        p[i] += eps
        up = m.loss(x, y, p)
        p[i] -= 2 * eps
        down = m.loss(x, y, p)
        assert abs((up - down) / (2 * eps) - g[i]) <= 1e-6 * max(1.0, abs(g[i]))
    # only the table rows of the batch's tokens have a gradient
    e = m.layers(g)[0]
    _, rows = m.tokens(x)
    touched = np.zeros(m.vocab, bool)
    touched[rows] = True
    assert not e[~touched].any() and e[touched].any(axis=1).mean() > 0.9
    assert 0.05 < touched.mean() < 0.8


def test_embedding_model_learns_the_digits(data):
    from worker.train import TrainConfig, train

    out = train(lambda g: g, 0, 1, TrainConfig(steps=150, batch=32, lr=0.3,
                                               model="embedding", eval_every=150))
    assert out["final_test_accuracy"] > 0.7
    assert all(s["nonzero"] < 0.8 for s in out["steps"])
    with pytest.raises(ValueError, match="model must be"):
        TrainConfig(model="transformer")
