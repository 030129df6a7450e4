"""Shared fixtures. gpulib is imported first so it, not numba, picks the backend."""

import os
import zlib

import numpy as np
import pytest

import gpulib  # noqa: F401  (must precede any numba.cuda import)

# The simulator runs every thread in Python: keep hypothesis runs few and shapes small there.
MAX_EXAMPLES = int(os.environ.get("GPULIB_MAX_EXAMPLES", "3" if gpulib.on_simulator() else "100"))


@pytest.fixture
def rng(request):
    """A fresh generator per test, seeded from the test's id so a failure reproduces."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))

