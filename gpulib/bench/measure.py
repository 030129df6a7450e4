"""16.3-16.5: the measuring library every benchmark uses: references, checked timing rows, one ratio, storage.

    reference_conv   the float64 answer of a layer (PyTorch in float64 on the GPU, NumPy without)
    magnitude        the size of the summed terms, the fair ``scale`` of a check
    cudnn_conv       cuDNN's convolution through PyTorch, per precision: fp32 (NCHW, TF32 off)
                     or fp16 (channels_last), with cudnn.benchmark = True
    checked_row      run once into a poisoned output, ``validate`` against float64, then time
                     with CUDA events: a row exists only for an output that passed its check
    with_ratio       the one ratio of every stored result: ``vs_library`` = the library's
                     time / this row's time (its speed relative to cuBLAS or cuDNN, higher is
                     better; 1.0 is the library itself)
    header           device, date and timing method, stored with every result
    kernel_resources registers and local memory per thread, shared memory per block, and the
                     blocks of a given size that fit on one SM, of a compiled Numba kernel
    load / save      the JSON files under benchmarks/results/
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np

from gpulib import reference as ref
from gpulib.arrays import to_host
from gpulib.check import validate
from gpulib.env import device_name, on_gpu
from gpulib.gemm.kernels import REGISTERS_PER_SM
from gpulib.results import ratio_text
from gpulib.timing import benchmark

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
TIMING = "median of CUDA events, L2 flushed"
CUDNN_NAMES = {"fp32": "cuDNN fp32 (torch, benchmark=True, TF32 off)",
               "fp16": "cuDNN fp16 (torch, channels_last, benchmark=True)"}


def require_gpu() -> None:
    if not on_gpu():
        raise RuntimeError("timing needs a GPU: the simulator's times say nothing about one")


def header(repeat: int) -> dict:
    """What every stored result starts with: the device, the date and how it was timed."""
    return dict(device=device_name(), date=datetime.date.today().isoformat(), timing=TIMING, repeat=repeat)


def host(a) -> np.ndarray:
    """Any output (Numba, CuPy or PyTorch array) as a NumPy array; fp16 widened to fp32."""
    if hasattr(a, "detach"):  # a PyTorch tensor
        a = a.detach().float().cpu().numpy()
    a = to_host(a)
    return a.astype(np.float32) if a.dtype == np.float16 else a


def torch_modules():
    import torch
    import torch.nn.functional as F

    return torch, F


def torch_fp32_cudnn():
    """(torch, F) set the way the benchmarks compare against PyTorch: cudnn.benchmark on (cuDNN
    times its algorithms and keeps the fastest), TF32 off (PyTorch's default lets an "fp32"
    convolution use TF32 tensor cores)."""
    torch, F = torch_modules()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch, F


def reference_conv(X, W, b, layer: dict):
    """(float64 Y, what computed it): PyTorch's conv2d in float64 on the GPU if present, else NumPy."""
    try:
        torch, F = torch_modules()
    except ImportError:
        return ref.conv2d(X, W, b, layer["padding"], layer["stride"]), "numpy float64"
    Y = F.conv2d(*(torch.from_numpy(np.asarray(a)).double().cuda() for a in (X, W, b)),
                 stride=layer["stride"], padding=layer["padding"])
    return Y.cpu().numpy(), "torch float64"


def magnitude(X, W, b, layer: dict) -> float:
    """max of Σ|W|·|X| + |b| over the first two images: the size of the summed terms."""
    return float(ref.conv2d_magnitude(X[:2], W, b, layer["padding"], layer["stride"]).max())


def cudnn_conv(X, W, b, layer: dict, precision: str = "fp32"):
    """(name, run): ``run()`` is cuDNN's convolution of the layer through PyTorch, returning Y.

    fp32: NCHW with TF32 off (PyTorch's default lets an "fp32" convolution use TF32 tensor
    cores). fp16: X, W, b rounded to fp16, channels_last, the layout cuDNN's fastest kernels want."""
    torch, F = torch_fp32_cudnn()
    tX, tW, tb = (torch.as_tensor(a, device="cuda") for a in (X, W, b))
    if precision == "fp16":
        tX, tW = (t.half().to(memory_format=torch.channels_last) for t in (tX, tW))
        tb = tb.half()
    elif precision != "fp32":
        raise ValueError(f"precision must be 'fp32' or 'fp16', not {precision!r}")
    p, s = layer["padding"], layer["stride"]
    return CUDNN_NAMES[precision], lambda: F.conv2d(tX, tW, tb, stride=s, padding=p)


def checked_row(name: str, run, want, *, out=None, view=None, flop: float | None = None, scale=None,
                rtol: float | None = None, repeat: int = 20, **extra) -> dict:
    """Run ``run()`` once, check its output against the float64 ``want``, then time ``run``.

    The output checked is ``out`` (the array ``run`` writes; pass a ``gpulib.poisoned`` one so
    an element never written fails) or else what ``run`` returns, through ``view`` if given (to
    compare part of it, or another layout). A failed check raises ``ValidationError``: nothing
    wrong is ever timed. The row holds the median time, TFLOP/s for ``flop``, the relative
    error, and ``extra``."""
    got = run()
    got = out if out is not None else got
    check = validate(host(got) if view is None else view(got), want, rtol=rtol, scale=scale, name=name)
    t = benchmark(run, repeat=repeat, label=name)
    return dict(name=name, ms=t.median_ms, tflops=t.tflops(flop) if flop else None, rel_err=check.rel_err,
                **extra)


def graph_ms(call, repeat: int = 20) -> float:
    """Median ms of ``call``'s kernels replayed as one CUDA graph (16.6's record()): the GPU's time
    without the Python launch cost that a per-call event pair also catches for a short kernel."""
    from gpulib.playbook.replay import record

    call()
    with record() as recording:
        call()
    graph = recording.graph()
    return benchmark(graph.replay, repeat=repeat, label="graph").median_ms


def with_ratio(rows: list[dict], library_ms: float) -> list[dict]:
    """Set every row's ``vs_library`` = library_ms / ms: its speed relative to the library."""
    for row in rows:
        row["vs_library"] = library_ms / row["ms"] if row.get("ms") else None
    return rows


def rows_table(rows: list[dict], library: str, width: int = 58, indent: str = "  ") -> list[str]:
    """Lines of a table of timed rows: name, ms, TFLOP/s, speed as a share of ``library``'s, error."""
    def fmt(v, spec):
        return "-" if v is None else format(v, spec)

    lines = [f"{indent}{'implementation':<{width}} {'ms':>8} {'TFLOP/s':>8} {'of ' + library:>12} {'rel err':>8}"]
    for r in rows:
        lines.append(f"{indent}{r['name']:<{width}} {r['ms']:8.3f} {fmt(r.get('tflops'), '8.2f'):>8} "
                     f"{ratio_text(r.get('vs_library')):>12} {fmt(r.get('rel_err'), '8.1e'):>8}")
    return lines


REGISTER_UNIT = 256  # registers are given to a warp in units of 256
THREADS_PER_SM, BLOCKS_PER_SM = 2048, 32  # Hopper's limits per SM


def _only_specialization(value):
    """Numba answers per compiled specialization when none is named: the one answer, or a
    ValueError when the kernel has several."""
    if isinstance(value, dict):
        if len(value) != 1:
            raise ValueError(f"kernel has {len(value)} compiled specializations; needs exactly one")
        (value,) = value.values()
    return value


SHARED_PER_SM = 228 * 1024  # Hopper: shared memory an SM holds, of which each block also takes
RESERVED_SHARED_PER_BLOCK = 1024  # 1 KiB for the system


def blocks_by_shared_memory(shared_bytes: int) -> int:
    """How many blocks using ``shared_bytes`` of shared memory fit on one Hopper SM."""
    return SHARED_PER_SM // (shared_bytes + RESERVED_SHARED_PER_BLOCK)


def kernel_resources(kernel, threads: int) -> dict:
    """What the compiler gave a compiled kernel (its one specialization), and how many blocks of
    ``threads`` fit on one SM by its registers and by the SM's thread and block limits."""
    regs = _only_specialization(kernel.get_regs_per_thread())
    per_warp = -(-regs * 32 // REGISTER_UNIT) * REGISTER_UNIT
    warps = -(-threads // 32)
    by_registers = REGISTERS_PER_SM // (per_warp * warps)
    return dict(registers=regs, local_bytes=_only_specialization(kernel.get_local_mem_per_thread()),
                shared_bytes=_only_specialization(kernel.get_shared_mem_per_block()), threads=threads,
                blocks_per_sm=min(by_registers, THREADS_PER_SM // threads, BLOCKS_PER_SM),
                blocks_by_registers=by_registers)


SASS_OPS = ("FFMA", "LDS", "LDS.64", "LDS.128", "LDG", "STS", "BAR", "all")


def sass_mix(kernel, ops=SASS_OPS) -> dict:
    """How many times each instruction of ``ops`` appears in a compiled kernel's machine code
    (its one specialization; static counts, not executed ones), and ``all`` instructions. LDS
    is the 32-bit shared-memory load, LDS.128 the 128-bit one; any other name counts the
    instructions whose opcode is it or starts with it (HGMMA, LDGSTS, STG.E.64 ...). Needs nvdisasm (the CUDA
    toolkit) on the PATH."""
    import re

    sass = _only_specialization(kernel.inspect_sass())
    counts = dict.fromkeys(ops, 0)
    counts.setdefault("all", 0)
    others = [op for op in ops if op not in SASS_OPS]
    for line in sass.splitlines():
        if re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+\S", line):  # an instruction: /*0150*/ OPCODE ...
            counts["all"] += 1
        words = line.replace(";", " ").split()
        for op in others:
            if any(word.split(".")[0] == op or word == op or word.startswith(op + ".") for word in words):
                counts[op] += 1
        for word in words:
            base = word.split(".")[0]
            if base in ("FFMA", "LDG", "STS", "BAR") and base in counts:
                counts[base] += 1
                break
            if base == "LDS":
                width = next((w for w in word.split(".")[1:] if w in ("64", "128")), None)
                name = "LDS." + width if width else "LDS"
                if name in counts:
                    counts[name] += 1
                break
    return counts


def load(path: Path) -> dict:
    """Stored results (measured on a GPU earlier), as written by ``save``."""
    return json.loads(Path(path).read_text())


def stored_or_measured(bench, measure=None) -> tuple[dict | None, bool]:
    """What a notebook shows of a benchmark module ``bench``: measured now (``measure()``, by
    default ``bench.measure()``) on a GPU whose model has no stored results yet, else the stored
    results (this GPU's model measured them earlier, or there is no GPU here); None when neither.
    The second value says whether it was measured now."""
    stored = load(bench.RESULTS) if Path(bench.RESULTS).exists() else None
    if on_gpu() and (stored is None or stored.get("device") != device_name()):
        return (measure or bench.measure)(), True
    return stored, False


def save(results: dict, path: Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
