"""16.4: an auto-tuner for the GEMM's tile, as 16.5's chooses a convolution's algorithm.

No one tile is fastest for every product: a large block tile uses each value it loads more
often, and on a product of 64 rows it leaves half its threads, and most SMs, idle. So for
one product shape (batch, M, N, K and whether A or B is a transposed view) ``find_tiles`` runs
every candidate, a GEMM version with one tile, on fresh random operands of that shape, checks
each against the float64 product (a candidate that fails is never chosen), times the ones that
passed (CUDA events, median; on the simulator nothing is timed and the order stays the
candidates' own) and returns them ranked. ``choose`` caches the winner per shape, as
``torch.backends.cudnn.benchmark = True`` does for convolutions; ``matmul(version="auto")``
uses it. Tune before recording a step (16.6): the first call of a shape launches every candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpulib.arrays import require_bool, require_int, to_device, transposed
from gpulib.check import ValidationError, poisoned, validate
from gpulib.env import BACKEND, on_gpu, sized
from gpulib.gemm import api, kernels
from gpulib.timing import benchmark

# on a GPU: version 5's default first (a tie keeps it), then version 6 with the tiles that led at
# 4096³ in a first H100 run (before version 6 wrote its k steps out), and tiles for products of
# few rows, such as a convolution's K ≤ 64.
# REGISTERS=0 lifts the cap of 128 registers a thread that fitting two blocks an SM needs: ptxas
# (CUDA 13, sm_90) spills 60 bytes a thread of version 6's 128×128 tile at that cap and none
# without it (one block an SM then); the 128×256 tiles hold one block an SM anyway (238 registers)
GPU_CANDIDATES = (
    ("v5", kernels.V5),
    ("v6", kernels.V6),
    ("v6", dict(kernels.V6, REGISTERS=0)),
    ("v6", dict(BM=128, BN=256, BK=8, TM=8, TN=16, REGISTERS=0)),
    ("v6", dict(BM=256, BN=128, BK=8, TM=16, TN=8, REGISTERS=0)),
    ("v6", dict(BM=128, BN=128, BK=16, TM=8, TN=8, REGISTERS=0)),
    ("v5", dict(BM=64, BN=128, BK=8, TM=4, TN=8)),  # Winograd F(4x4)'s products before the tuner
    ("v6", dict(BM=64, BN=128, BK=8, TM=4, TN=8)),
    ("v6", dict(BM=64, BN=64, BK=8, TM=4, TN=4)),
)
# on the simulator: small tiles only (it runs every thread as Python)
SIM_CANDIDATES = (("v5", kernels.V5_SIM), ("v6", kernels.V6_SIM), ("v6", dict(BM=16, BN=64, BK=8, TM=4, TN=4)))
LAUNCHERS = {"v3": api.launch_v3, "v4": api.launch_v4, "v5": api.launch_v5, "v6": api.launch_v6}
BATCHED = ("v5", "v6")  # the versions that take a batch of products in one launch


def default_candidates() -> tuple:
    """The (version, tile) pairs ``find_tiles`` tries here: GPU_CANDIDATES or SIM_CANDIDATES."""
    return sized(gpu=GPU_CANDIDATES, sim=SIM_CANDIDATES)


@dataclass
class Result:
    """One candidate's outcome: ``status`` is "ok", "failed check" or "refused"."""

    version: str
    tile: dict
    status: str
    ms: float | None = None
    rel_err: float | None = None
    note: str = ""

    @property
    def label(self) -> str:
        t = self.tile
        cap = "" if t.get("REGISTERS") is None else f", registers {t['REGISTERS'] or 'uncapped'}"
        return f"{self.version} {t['BM']}x{t['BN']} BK {t['BK']} {t['TM']}x{t['TN']}/thread{cap}"


def _default_timer(fn, label):
    t = benchmark(fn, repeat=10, label=label)
    return t.median_ms if t.valid else None


def _check_candidates(pairs, batched: bool) -> list:
    if not isinstance(pairs, (list, tuple)) or not pairs:
        raise ValueError(f"candidates must be a non-empty list of (version, tile) pairs, not {pairs!r:.80}")
    out = []
    for pair in pairs:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and pair[0] in LAUNCHERS):
            raise ValueError(f"candidates: each must be a (version, tile) pair with version one of "
                             f"{tuple(LAUNCHERS)}, not {pair!r:.80}")
        if batched and pair[0] not in BATCHED:
            raise ValueError(f"candidates: {pair[0]} multiplies one product a launch; a batch needs one of {BATCHED}")
        out.append((pair[0], kernels.check_tile(pair[1], f"candidates' {pair[0]} tile")))
    return out


def _reference(A, B):
    """The float64 product and the size of its summed terms, max of |A|·|B| (on the GPU by
    CuPy's float64 GEMM where there is one: a 4096³ product takes NumPy seconds)."""
    if on_gpu():
        try:
            import cupy
        except ImportError:
            cupy = None
        if cupy is not None:
            a, b = cupy.asarray(A, cupy.float64), cupy.asarray(B, cupy.float64)
            want = cupy.asnumpy(cupy.matmul(a, b))
            scale = float(cupy.matmul(cupy.abs(a), cupy.abs(b)).max())
            return want, scale
    a, b = A.astype(np.float64), B.astype(np.float64)
    return np.matmul(a, b), float(np.matmul(np.abs(a), np.abs(b)).max())


_cache: dict = {}  # product shape -> the whole ranking; its first entry is the pick


def _key(M, N, K, batch, trans_a, trans_b) -> tuple:
    """The product's shape, checked (ValueError naming the argument), as the cache's key."""
    M, N, K = require_int(M, "M", 1), require_int(N, "N", 1), require_int(K, "K", 1)
    if batch is not None:
        batch = require_int(batch, "batch", 1)
    trans_a, trans_b = require_bool(trans_a, "trans_a"), require_bool(trans_b, "trans_b")
    if batch is not None and (trans_a or trans_b):
        raise ValueError("trans_a, trans_b: a batch of products takes C-order A and B; transposed views are for one "
                         "product (batch=None)")
    return (batch, M, N, K, trans_a, trans_b, BACKEND)


def find_tiles(M: int, N: int, K: int, *, batch: int | None = None, trans_a: bool = False, trans_b: bool = False,
               candidates=None, timer=None, seed: int = 0) -> list[Result]:
    """Check, time and rank every candidate on a product of this shape: fastest correct one first.

    ``batch`` makes it a batch of that many products (versions 5 and 6 only); ``trans_a`` and
    ``trans_b`` make A or B a transposed view, as ``matmul`` passes them. ``candidates``
    defaults to ``default_candidates()``; ``timer(fn, label)`` returns milliseconds or None (the default
    times with CUDA events on a GPU and returns None on the simulator).
    """
    batch, M, N, K, trans_a, trans_b, _ = _key(M, N, K, batch, trans_a, trans_b)
    pairs = _check_candidates(default_candidates() if candidates is None else candidates, batch is not None)
    if timer is not None and not callable(timer):
        raise ValueError(f"timer must be a function timer(fn, label) -> ms or None, not {type(timer).__name__}")
    timer = timer or _default_timer
    rng = np.random.default_rng(seed)
    if batch is None:
        A = rng.standard_normal((K, M) if trans_a else (M, K)).astype(np.float32)
        B = rng.standard_normal((N, K) if trans_b else (K, N)).astype(np.float32)
        A_dev, B_dev = to_device(A), to_device(B)
        if trans_a:  # the transposed views matmul would pass
            A, A_dev = A.T, transposed(A_dev)
        if trans_b:
            B, B_dev = B.T, transposed(B_dev)
    else:
        A = rng.standard_normal((batch, M, K)).astype(np.float32)
        B = rng.standard_normal((batch, K, N)).astype(np.float32)
        A_dev, B_dev = to_device(A), to_device(B)
    want, scale = _reference(A, B)
    results = []
    for version, tile in pairs:
        result = Result(version, dict(tile), "refused")
        launch = LAUNCHERS[version]
        out = poisoned(want.shape)
        try:
            launch(A_dev, B_dev, out, tile)
        except ValueError as err:  # the tile cannot run (a warp tile that does not divide it, ...)
            result.note = str(err).splitlines()[0]
            results.append(result)
            continue
        try:
            result.rel_err = validate(out, want, scale=scale, name=result.label).rel_err
        except ValidationError as err:
            result.status, result.note = "failed check", str(err).splitlines()[0]
            results.append(result)
            continue
        result.status = "ok"
        result.ms = timer(lambda launch=launch, tile=tile: launch(A_dev, B_dev, out, tile), result.label)
        results.append(result)
    order = {"ok": 0, "failed check": 1, "refused": 2}
    return sorted(results, key=lambda r: (order[r.status], r.ms is None, r.ms or 0.0))


def choose(M: int, N: int, K: int, *, batch: int | None = None, trans_a: bool = False, trans_b: bool = False,
           timer=None) -> Result:
    """The fastest correct (version, tile) for this product shape, found once and then cached."""
    key = _key(M, N, K, batch, trans_a, trans_b)
    if key not in _cache:
        ranking = find_tiles(M, N, K, batch=batch, trans_a=trans_a, trans_b=trans_b, timer=timer)
        if ranking[0].status != "ok":
            raise RuntimeError(f"no GEMM tile passed its check for the product {key[:-1]}")
        _cache[key] = ranking
    return _cache[key][0]


def cached_ranking(M: int, N: int, K: int, *, batch: int | None = None, trans_a: bool = False,
                   trans_b: bool = False) -> list[Result] | None:
    """The ranking ``choose`` found for this shape, or None if it has not tuned it yet."""
    return _cache.get(_key(M, N, K, batch, trans_a, trans_b))


def launch_chosen(A, B, C) -> None:
    """C = A·B with the version and tile ``choose`` picks for this shape: A, B, C 2-D (A or B
    may be a transposed view, tuned as one) or 3-D C-order batches."""
    batched = len(getattr(C, "shape", ())) == 3
    api.check_operands(A, B, C, batched=batched)
    M, K = tuple(A.shape)[-2:]
    N = tuple(B.shape)[-1]
    trans_a, trans_b = A.strides[-1] != 4, B.strides[-1] != 4  # unit stride along columns: a transposed view
    pick = choose(M, N, K, batch=C.shape[0] if batched else None, trans_a=trans_a, trans_b=trans_b)
    LAUNCHERS[pick.version](A, B, C, pick.tile)


def table(results: list[Result]) -> str:
    """The ranking as text."""
    if not isinstance(results, (list, tuple)) or not all(isinstance(r, Result) for r in results):
        raise ValueError(f"results must be a list of gemm.autotune.Result (what find_tiles returns), not {results!r:.80}")
    lines = [f"{'rank':>4} {'candidate':<46} {'status':<13} {'ms':>8} {'rel err':>8}"]
    for i, r in enumerate(results, 1):
        ms = "-" if r.ms is None else f"{r.ms:.3f}"
        err = "-" if r.rel_err is None else f"{r.rel_err:.1e}"
        lines.append(f"{i:>4} {r.label:<46} {r.status:<13} {ms:>8} {err:>8}"
                     + (f"  ({r.note})" if r.note and r.status != "ok" else ""))
    return "\n".join(lines)

