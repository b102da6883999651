"""The character-level language model workload (worker/ddp/charlm.py): its text comes from
the standard library with nothing downloaded, targets are the next characters, the model
sees no character ahead of the one it predicts, and a short training lowers validation
loss; run.py and the DDP worker take it by name."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from worker.ddp import charlm  # noqa: E402
from worker.ddp.workload import load_data, loss, make_model  # noqa: E402


def test_the_corpus_is_the_standard_librarys_own_text_split_into_windows():
    x, y, xv, yv = charlm.split()
    assert x.shape[1] == y.shape[1] == charlm.CONTEXT and len(x) > 5000
    assert xv.shape == yv.shape == (charlm.VAL_WINDOWS, charlm.CONTEXT)
    # targets are the inputs shifted by one character
    assert np.array_equal(x[:, 1:], y[:, :-1]) and np.array_equal(xv[:, 1:], yv[:, :-1])
    assert 0 <= x.min() and x.max() < charlm.VOCAB
    text = charlm.corpus()[0]
    assert charlm.encode(b"def f():\n\tpass")[[0, 8, 9]].tolist() == [
        charlm.ALPHABET.index("d"), charlm.ALPHABET.index("\n"), charlm.VOCAB - 1]
    assert b"import" in text and len(charlm.corpus_sha256()) == 64


def test_a_missing_module_is_a_clear_error(monkeypatch, tmp_path):
    charlm.corpus.cache_clear()
    monkeypatch.setattr(charlm, "stdlib", lambda: tmp_path)
    try:
        with pytest.raises(FileNotFoundError, match="lacks"):
            charlm.corpus()
    finally:
        charlm.corpus.cache_clear()


def test_the_model_is_causal_and_seeded():
    torch.manual_seed(0)
    m = make_model(3, "charlm")
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(),
                                                 make_model(3, "charlm").parameters(),
                                                 strict=True))
    x = torch.randint(0, charlm.VOCAB, (2, charlm.CONTEXT))
    out = m(x)
    assert out.shape == (2, charlm.VOCAB, charlm.CONTEXT)
    later = x.clone()
    later[:, 40:] = (later[:, 40:] + 1) % charlm.VOCAB
    with torch.no_grad():
        a, b = m(x), m(later)
    assert torch.allclose(a[:, :, :40], b[:, :, :40], atol=1e-6), "it sees ahead"
    assert not torch.allclose(a[:, :, 40:], b[:, :, 40:])


def test_a_short_training_lowers_validation_loss():
    """60 SGD steps of 64 windows from a fixed seed: from ln(VOCAB) (about 4.6 nats) to
    below 3.0, the frequencies of characters and beyond."""
    torch.set_num_threads(1)
    d = load_data("charlm")
    m = make_model(0, "charlm")
    start = loss(m, d.x_test, d.y_test)
    opt = torch.optim.SGD(m.parameters(), lr=0.3, momentum=0.9)
    rng = np.random.default_rng(0)
    for _ in range(60):
        i = torch.from_numpy(rng.integers(0, len(d.x_train), 64))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(d.x_train[i]), d.y_train[i]).backward()
        opt.step()
    end = loss(m, d.x_test, d.y_test)
    assert start > 4.3 and end < 3.0, (start, end)
