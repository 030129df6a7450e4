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


def pytest_collection_modifyitems(session, config, items):
    """The slowest modules of the stored CI run (benchmarks/results/ci_time.json) first, the
    longest first, each module's own order kept: ``--dist loadscope`` hands modules out in this
    order, so the long ones start at once instead of being the last to finish."""
    import json
    from pathlib import Path

    stored = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "ci_time.json"
    try:
        steps = json.loads(stored.read_text())["steps"]
        seconds = {row["module"]: row["seconds"] for step in steps if step["target"] == "test" for row in step["slowest"]}
    except (OSError, KeyError, ValueError):
        return
    if not seconds:
        return

    def cost(item):
        module = item.nodeid.split("::")[0].removesuffix(".py").replace("/", ".")
        return -seconds.get(module, 0.0)

    items.sort(key=cost)  # stable: the order inside a module and among the rest stays
