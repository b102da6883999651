"""Fixtures the worker tests share."""

import pytest

from worker.allreduce import client as client_mod


@pytest.fixture(params=["compiled", "numpy"])
def checks(request, monkeypatch):
    """A burst of results checked by burst_kernels' compiled loop, or by the numpy checks it
    replaces (the client takes whichever is there)."""
    if request.param == "compiled":
        if client_mod._bursts is None:
            pytest.skip("numba is not installed")
    else:
        monkeypatch.setattr(client_mod, "_bursts", None)
    return request.param
