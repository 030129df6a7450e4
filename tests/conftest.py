"""Shared fixtures. gpulib is imported first so it, not numba, picks the backend."""

import os
import zlib

import numpy as np
import pytest

import gpulib  # noqa: F401  (must precede any numba.cuda import)

# The simulator runs every thread in Python: keep hypothesis runs few and shapes small there.
MAX_EXAMPLES = int(os.environ.get("GPULIB_MAX_EXAMPLES", "10" if gpulib.on_simulator() else "100"))


@pytest.fixture
def rng(request):
    """A fresh generator per test, seeded from the test's id so a failure reproduces."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """When ``make test`` runs these tests and the notebooks in one session (``--dist
    loadgroup``), keep each notebook's cells on one worker: they share one kernel."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
