"""16.5 speed: tensor cores, cuDNN's algorithm families and mixed precision, measured on a GPU
or read from benchmarks/results/cudnn_tensorcore.json.

    tensor_cores   GEMM 4096³, fp16 operands and fp32 sums: gpulib tensor-core v1-v4 (writing
                   fp32) against cuBLAS fp16 (CuPy, writing fp16: half the output bytes);
                   the 16.3 layer in fp16: gpulib's tensor-core conv v1 (NCHW) and v2 (NHWC)
                   against cuDNN fp16 (channels_last)
    autotune       for each layer of LAYERS: gpulib's auto-tuner ranking (every algorithm checked,
                   timed, with its extra memory) and cuDNN fp32 for the same layer
    cudnn_engines  cuDNN's own execution plans for the 16.3 layer, listed and timed through the
                   cuDNN frontend, when that package is installed
    precision      one GEMM and one conv in fp32, TF32, fp16 and bf16 through PyTorch: time and
                   error against float64
    resources      what the compiler gave each tensor-core kernel (registers, local memory,
                   shared memory, blocks per SM), and conv v2 timed with and without its
                   register cap (``measure_part("resources")`` adds it to stored results)
    wgmma          tensor-core GEMM v5, v6 and v7 (Hopper's warpgroup MMA; v6 with TMA, v7 with a
                   producer warpgroup) in each config against cuBLAS fp16 on the same C = A·Bᵀ
                   at 4096³ and 8192³, v6 and v7 with bf16 operands against cuBLAS bf16, v4
                   (WMMA) and cuBLAS on C = A·B at 4096³ in the same run, conv v3 and v4
                   against PyTorch and cuDNN's plans, and each kernel's registers, shared memory and
                   SASS (HGMMA, LDGSTS, UTMALDG, BAR) (``--part wgmma``)
    winograd_f4    Winograd F(4x4, 3x3) on the 16.3 layer: the whole call (events and wall time),
                   each of its four launches, cuDNN fp32 and implicit precomp GEMM in the same
                   run, and its batched GEMM's registers and SASS (``--part winograd_f4``)
    nsight         Nsight Compute's counters of GEMM v6 and v7 and conv v3 and v4 (tensor pipe,
                   occupancy, throughput, warp stalls), one profiled launch each
                   (``--part nsight``; gpulib/bench/nsight.py)

Every timed row is checked first. ``benchmarks/cudnn_tensorcore.py`` is the command line.
"""

from __future__ import annotations

import math

import numpy as np

from gpulib.arrays import blocks, to_host
from gpulib.bench import cudnn_engines, nsight
from gpulib.bench import measure as measuring
from gpulib.book_layers import LAYER, LAYERS, flop, layer_inputs
from gpulib.check import poisoned
from gpulib.conv import autotune
from gpulib.conv import tensorcore as tc_conv
from gpulib.env import cuda
from gpulib.gemm import tensorcore as tc_gemm
from gpulib.gemm.kernels import block_threads
from gpulib.results import ratio_text
from gpulib.tensorcore import wgmma
from gpulib.timing import benchmark

RESULTS = measuring.RESULTS_DIR / "cudnn_tensorcore.json"
GEMM_SIZE = 4096
# the precision part: each format's largest error allowed, relative to the result's largest value
PRECISION_RTOL = dict(fp32=1e-5, tf32=2e-3, fp16=3e-3, bf16=3e-2)


def measure_tensor_cores(repeat: int = 20) -> dict:
    """gpulib's tensor-core GEMM and conv against cuBLAS fp16 and cuDNN fp16."""
    import cupy

    rng = np.random.default_rng(3)
    S = GEMM_SIZE
    A = rng.standard_normal((S, S)).astype(np.float16)
    B = rng.standard_normal((S, S)).astype(np.float16)
    cA, cB = cupy.asarray(A), cupy.asarray(B)
    want = cupy.asnumpy(cA.astype(cupy.float64) @ cB.astype(cupy.float64))
    scale = float((cupy.abs(cA).astype(cupy.float64) @ cupy.abs(cB).astype(cupy.float64)).max())
    gemm_flop = 2.0 * S**3
    A_dev, Bt_dev = cuda.to_device(A), cuda.to_device(np.ascontiguousarray(B.T))  # the ladder's operands: A, Bᵀ
    gemm_rows = []
    for version in tc_gemm.VERSIONS:  # the launcher's time: Bᵀ transposed to the [K, N] these versions read, then the GEMM
        C = poisoned((S, S))  # any element left unwritten fails the check
        gemm_rows.append(measuring.checked_row(f"gpulib tensor-core GEMM {version}",
                                       lambda: tc_gemm.launch(A_dev, Bt_dev, C, version=version),
                                       want, out=C, flop=gemm_flop, scale=scale, repeat=repeat))
    cC = cupy.empty((S, S), cupy.float16)
    gemm_rows.append(measuring.checked_row("cuBLAS fp16 (CuPy)", lambda: cupy.matmul(cA, cB, out=cC), want, flop=gemm_flop,
                                   scale=scale, rtol=2e-3, repeat=repeat))

    L = LAYER
    X, W, b = layer_inputs(L)
    as16 = lambda a: a.astype(np.float16).astype(np.float32)  # noqa: E731  (what the tensor cores see)
    want, _ = measuring.reference_conv(as16(X), as16(W), b, L)
    scale = measuring.magnitude(X, W, b, L)
    conv_flop = flop(L)
    conv_rows = []
    for version, name in (("v1", "gpulib tensor-core conv v1 (NCHW, fp16)"),
                          ("v2", "gpulib tensor-core conv v2 (NHWC, async copies, fp16)"),
                          ("v3", "gpulib tensor-core conv v3 (NHWC, wgmma, fp16)")):
        # the layout conversion outside the timing, as for cuDNN; any output element left unwritten fails
        operands = tc_conv.prepare(X, W, b, L["padding"], L["stride"], version=version)
        Y = poisoned(operands.out_shape)
        conv_rows.append(measuring.checked_row(name, lambda: tc_conv.launch(operands, Y), want, out=Y,
                                       view=None if version == "v1" else lambda Y: tc_conv.to_nchw(Y, want.shape),
                                       flop=conv_flop, scale=scale, repeat=repeat))
        operands = Y = None  # freed now (the timed lambdas hold them otherwise)
    library, run = measuring.cudnn_conv(X, W, b, L, precision="fp16")
    conv_rows.append(measuring.checked_row(library, run, want, flop=conv_flop, scale=scale, rtol=3e-3, repeat=repeat))
    return dict(gemm=dict(size=S, library=gemm_rows[-1]["name"], rows=measuring.with_ratio(gemm_rows, gemm_rows[-1]["ms"])),
                conv=dict(layer=L, library=library, rows=measuring.with_ratio(conv_rows, conv_rows[-1]["ms"])))


def measure_autotune(layers=LAYERS, repeat: int = 10) -> list[dict]:
    """The auto-tuner's ranking for each layer, next to cuDNN fp32 for the same layer (checked
    against the same float64 reference); every row's ``vs_library`` is relative to that cuDNN."""
    timer = lambda fn, label: benchmark(fn, repeat=repeat, label=label).median_ms  # noqa: E731
    out = []
    for title, L in layers.items():
        X, W, b = layer_inputs(L)
        want, _ = measuring.reference_conv(X, W, b, L)
        scale = measuring.magnitude(X, W, b, L)
        ranking = autotune.find_algorithms(X, W, b, L["padding"], L["stride"], timer=timer, reference=want,
                                           scale=scale)
        name, run = measuring.cudnn_conv(X, W, b, L)
        library = measuring.checked_row(name, run, want, flop=flop(L), scale=scale, repeat=repeat)
        rows = measuring.with_ratio([vars(r) for r in ranking], library["ms"])
        out.append(dict(title=title, layer=L, gflop=flop(L) / 1e9, library=library, ranking=rows))
    return out


def measure_cudnn_engines(repeat: int = 10) -> dict:
    """cuDNN's own execution plans for the 16.3 layer in fp16 (channels_last), if the cuDNN
    frontend is installed; else a note saying it is not."""
    version = cudnn_engines.available()
    if not version:
        return dict(version="", rows=[], note="the cuDNN frontend (pip install nvidia-cudnn-frontend) is not installed")
    X, W, _ = layer_inputs(LAYER)
    five = next(L for title, L in LAYERS.items() if L["R"] == 5)  # the 5x5 layer, in fp32 as the auto-tuner ran it
    X5, W5, _ = layer_inputs(five)
    return dict(version=version, layer=LAYER, dtype="fp16, channels_last",
                rows=cudnn_engines.engines(X, W, LAYER["padding"], LAYER["stride"], half=True, repeat=repeat),
                five_by_five=dict(layer=five, dtype="fp32, NCHW",
                                  rows=cudnn_engines.engines(X5, W5, five["padding"], five["stride"], half=False,
                                                             repeat=repeat)))


def measure_precision(repeat: int = 20) -> list[dict]:
    """One GEMM (4096³) and the 16.3 conv in fp32, TF32, fp16, bf16 through PyTorch: each checked
    against float64 with its format's tolerance, then timed."""
    torch, F = measuring.torch_modules()
    rng = np.random.default_rng(5)
    A = torch.as_tensor(rng.standard_normal((GEMM_SIZE, GEMM_SIZE)), device="cuda")
    B = torch.as_tensor(rng.standard_normal((GEMM_SIZE, GEMM_SIZE)), device="cuda")
    L = LAYER
    X, W, b = (torch.as_tensor(a, device="cuda").double() for a in layer_inputs(L))
    exact_gemm = (A @ B).cpu().numpy()
    exact_conv = F.conv2d(X, W, b, padding=L["padding"], stride=L["stride"]).cpu().numpy()
    rows = []
    for fmt, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                             ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        a, bb = A.to(dtype), B.to(dtype)
        rows.append(measuring.checked_row(f"GEMM {GEMM_SIZE}^3 {fmt}", lambda: a @ bb, exact_gemm, flop=2.0 * GEMM_SIZE**3,
                                  rtol=PRECISION_RTOL[fmt], repeat=repeat, op=f"GEMM {GEMM_SIZE}^3", format=fmt))
        x, w, bias = X.to(dtype), W.to(dtype), b.to(dtype)
        if dtype != torch.float32:
            x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
        rows.append(measuring.checked_row(f"conv {fmt}", lambda: F.conv2d(x, w, bias, padding=L["padding"], stride=L["stride"]),
                                  exact_conv, flop=flop(L), rtol=PRECISION_RTOL[fmt], repeat=repeat,
                                  op="conv 3x3 (16.3 layer)", format=fmt))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return rows


def measure_resources(repeat: int = 20) -> dict:
    """Registers, local memory (spills), shared memory and blocks per SM of every tensor-core
    kernel as compiled for the benchmark's operands; and conv v2 on the 16.3 layer with its
    register cap (``max_registers=168``) against the same kernel compiled without it."""


    S = 256  # small operands of the benchmark's types: the compiled code is the same
    A16, B16 = (cuda.to_device(np.ones((S, S), np.float16)) for _ in range(2))
    for version in tc_gemm.VERSIONS:
        tc_gemm.launch(A16, B16, cuda.device_array((S, S), np.float32), version=version)
    threads = dict(v1=32 * tc_gemm.WARPS, v2=tc_gemm.V2_THREADS, v3=tc_gemm.V3_THREADS, v4=tc_gemm.V3_THREADS)
    kernels = {f"tensor-core GEMM {v}": measuring.kernel_resources(getattr(tc_gemm, f"tc_gemm_{v}_kernel"), threads[v])
               for v in tc_gemm.VERSIONS}

    L = LAYER
    X, W, b = layer_inputs(L)
    want, _ = measuring.reference_conv(*(a.astype(np.float16).astype(np.float32) for a in (X, W)), b, L)
    scale = measuring.magnitude(X, W, b, L)
    tc_conv.conv2d_tc(X[:1], W, b, L["padding"], L["stride"], version="v1")
    kernels["tensor-core conv v1 (NCHW)"] = measuring.kernel_resources(tc_conv.tc_conv_kernel, tc_conv.THREADS)
    v2 = tc_conv.prepare(X, W, b, L["padding"], L["stride"], version="v2")
    X2, Wt, bias_rows = v2.X, v2.W, v2.bias
    N, K, Ho, Wo = want.shape
    grid = (blocks(N * Ho * Wo, tc_conv.V2_BM), blocks(Wt.shape[1], tc_conv.V2_BN))
    uncapped = tc_conv.tc_conv_nhwc_uncapped_kernel
    rows = []
    for name, kernel in (("tensor-core conv v2 (NHWC), max_registers=168", tc_conv.tc_conv_nhwc_kernel),
                         ("tensor-core conv v2 (NHWC), no register cap", uncapped)):
        Yn = poisoned(v2.out_shape)

        def run(kernel=kernel, Yn=Yn):
            kernel[grid, tc_conv.V2_THREADS](X2, Wt, bias_rows, Yn, L["H"], L["W"], Ho, Wo, L["S"], L["padding"],
                                        L["stride"])

        row = measuring.checked_row(name, run, want, out=Yn, view=lambda Yn: tc_conv.to_nchw(Yn, want.shape),
                            flop=flop(L), scale=scale, repeat=repeat)
        rows.append(dict(row, **measuring.kernel_resources(kernel, tc_conv.V2_THREADS)))  # compiled by now
    kernels["tensor-core conv v2 (NHWC)"] = {k: rows[0][k] for k in kernels["tensor-core conv v1 (NCHW)"]}
    return dict(measuring.header(repeat), kernels=kernels, register_cap=rows)


def measure_winograd_f4(repeat: int = 20) -> dict:
    """Winograd F(4x4, 3x3) on the 16.3 layer, checked against float64: the whole call (CUDA
    events and wall time), each of its four launches alone, cuDNN fp32 and implicit precomp GEMM
    in the same run, and the registers and SASS of its batched GEMM v5."""
    import time

    from gpulib.check import validate
    from gpulib.conv import implicit_gemm, winograd

    L = LAYER
    X, W, b = layer_inputs(L)
    want, _ = measuring.reference_conv(X, W, b, L)
    scale = measuring.magnitude(X, W, b, L)
    X_dev, W_dev, b_dev = (cuda.to_device(a) for a in (X, W, b))
    Y = poisoned(want.shape)

    def call():
        winograd.conv2d_winograd_f4(X_dev, W_dev, b_dev, L["padding"], out=Y)

    call()
    rel_err = validate(Y, want, scale=4 * scale, name="winograd_f4").rel_err
    event_ms = benchmark(call, repeat=repeat).median_ms
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeat):
        call()
    cuda.synchronize()
    wall_ms = (time.perf_counter() - t0) / repeat * 1e3
    plan = winograd.F4_PLANS[(tuple(X.shape), tuple(W.shape), L["padding"])]
    steps = {"filter transform": lambda: plan.filters(W_dev, plan.U),
             "input transform": lambda: plan.inputs(X_dev, plan.V, L["padding"], plan.tiles_y, plan.tiles_x),
             f"36 products (batched GEMM {plan.products_tile[0]})": lambda: plan.products(plan.U, plan.V, plan.M),
             "output transform": lambda: plan.outputs(plan.M, b_dev, Y, plan.tiles_y, plan.tiles_x)}
    kernels = [dict(step=step, ms=benchmark(run, repeat=repeat, flush_l2=False).median_ms)
               for step, run in steps.items()]
    name, cudnn_run = measuring.cudnn_conv(X, W, b, L)
    cudnn_ms = benchmark(cudnn_run, repeat=repeat).median_ms
    precomp_ms = benchmark(lambda: implicit_gemm.conv2d_implicit_precomp_gemm(X_dev, W_dev, b_dev, L["padding"],
                                                                             L["stride"], out=Y), repeat=repeat).median_ms
    products = plan.products.kernel
    version, tile = plan.products_tile
    threads = math.prod(block_threads(tile))
    return dict(measuring.header(repeat), layer=L, rel_err=rel_err, event_ms=event_ms, wall_ms=wall_ms, kernels=kernels,
                products_tile=dict(version=version, **tile),
                cudnn=name, cudnn_ms=cudnn_ms, implicit_precomp_ms=precomp_ms,
                products_resources=measuring.kernel_resources(products, threads), products_sass=measuring.sass_mix(products),
                multiplications=winograd.f4_multiplications(X.shape, W.shape, L["padding"]),
                direct_multiplications=flop(L) / 2)


WGMMA_SIZES = (4096, 8192)
WGMMA_SASS = ("HGMMA", "LDGSTS", "UTMALDG", "UTMASTG", "STG.E.64", "SYNCS", "BAR", "all")


V8_NAME = "v8 (persistent, TMA)"
V9_NAME = "v9 (persistent, TMA, producer warpgroup)"
PERSISTENT_NAMES = {"v8": V8_NAME, "v9": V9_NAME}


def measure_wgmma(repeat: int = 20, sizes=WGMMA_SIZES, versions: dict | None = None, extras: bool = True) -> dict:
    """GEMM v5 (wgmma, cp.async) and v6 (wgmma, TMA) in each config against cuBLAS fp16 (CuPy) on
    C = A·Bᵀ, fp16 operands, every row checked against float64 first; v4 (WMMA) against cuBLAS
    on C = A·B at the first size; each kernel's resources and SASS counts. ``versions`` ({version:
    configs}) limits the fp32-C rows to those; ``extras=False`` leaves out the WMMA rung, the
    convolutions, the tile cost and the resources (a quick look at the GEMMs alone)."""
    import cupy

    rng = np.random.default_rng(16)
    out = []
    for S in sizes:
        A = rng.standard_normal((S, S)).astype(np.float16)
        Bt = rng.standard_normal((S, S)).astype(np.float16)
        cA, cBt = cupy.asarray(A), cupy.asarray(Bt)
        want = cupy.asnumpy(cA.astype(cupy.float64) @ cBt.astype(cupy.float64).T)
        scale = float((cupy.abs(cA).astype(cupy.float64) @ cupy.abs(cBt).astype(cupy.float64).T).max())
        flop = 2.0 * S**3
        A_dev, Bt_dev = cuda.to_device(A), cuda.to_device(Bt)
        rows = []
        for version, name in (("v5", "v5 (wgmma, cp.async)"), ("v6", "v6 (wgmma, TMA)"),
                              ("v7", "v7 (wgmma, TMA, producer warpgroup)"), ("v8", V8_NAME + ", fp32 C"),
                              ("v9", V9_NAME + ", fp32 C")):
            for config in tc_gemm.CONFIGS[version][0] if versions is None else versions.get(version, ()):
                C = poisoned((S, S))
                rows.append(measuring.checked_row(f"gpulib tensor-core GEMM {name}, {config}",
                                          lambda: tc_gemm.launch(A_dev, Bt_dev, C, version=version, config=config), want,
                                          out=C, flop=flop,
                                          scale=scale, repeat=repeat))
                C = None  # freed now (the timed lambdas hold them otherwise)
        for version, name in PERSISTENT_NAMES.items():  # like for like: C in fp16, as cuBLAS writes it
            for config in tc_gemm.PERSISTENT[version]["fp16", "16-bit"]:
                if versions is not None and config not in versions.get(version, ()):
                    continue
                C = poisoned((S, S), np.float16)
                rows.append(measuring.checked_row(f"gpulib tensor-core GEMM {name}, fp16 C, {config}",
                                                  lambda: tc_gemm.launch(A_dev, Bt_dev, C, version=version, config=config),
                                                  want, out=C, flop=flop, scale=scale, rtol=2e-3, repeat=repeat))
                C = None
        cC = cupy.empty((S, S), cupy.float16)
        rows.append(measuring.checked_row("cuBLAS fp16 (CuPy), C = A·Bᵀ", lambda: cupy.matmul(cA, cBt.T, out=cC), want,
                                  flop=flop, scale=scale, rtol=2e-3, repeat=repeat))
        entry = dict(size=S, layout="C = A·Bᵀ", library=rows[-1]["name"], rows=measuring.with_ratio(rows, rows[-1]["ms"]))
        entry["bf16_rows"] = _bf16_rows(rng, S, repeat)
        if S == sizes[0] and extras:  # the WMMA rung (Bᵀ transposed to the [K, N] it reads, then C = A·B) against cuBLAS's A·B
            cB = cupy.ascontiguousarray(cBt.T)
            C = poisoned((S, S))
            wmma_rows = [measuring.checked_row("gpulib tensor-core GEMM v4 (WMMA), C = A·B",
                                       lambda: tc_gemm.launch(A_dev, Bt_dev, C, version="v4"),
                                       want, out=C, flop=flop, scale=scale, repeat=repeat),
                         measuring.checked_row("cuBLAS fp16 (CuPy), C = A·B", lambda: cupy.matmul(cA, cB, out=cC), want,
                                       flop=flop, scale=scale, rtol=2e-3, repeat=repeat)]
            entry["wmma_rows"] = measuring.with_ratio(wmma_rows, wmma_rows[-1]["ms"])
            C = cB = None  # freed now (the timed lambdas hold them otherwise)
        out.append(entry)
        A_dev = Bt_dev = cA = cBt = cC = None  # freed now (the timed lambdas hold them otherwise)
    if not extras:
        return dict(measuring.header(repeat), sizes=out)
    conv = measure_wgmma_conv(repeat)
    tile_cost = measure_tile_cost(repeat)
    kernels = {
        f"{version} {config}": dict(
            measuring.kernel_resources(kernel, threads), dynamic_shared_bytes=shared, sass=measuring.sass_mix(kernel, WGMMA_SASS)
        )
        for version, table, threads in (
            ("v5", tc_gemm.V5_KERNELS, tc_gemm.V5_THREADS),
            ("v6", tc_gemm.V6_KERNELS, tc_gemm.V5_THREADS),
            ("v7", tc_gemm.V7_KERNELS, tc_gemm.V7_THREADS),
            ("v8", tc_gemm.V8_KERNELS["fp16", "fp32"], tc_gemm.V5_THREADS),
            ("v8 fp16 C", tc_gemm.V8_KERNELS["fp16", "16-bit"], tc_gemm.V5_THREADS),
            ("v9", tc_gemm.V9_KERNELS["fp16", "fp32"], tc_gemm.V9_THREADS),
            ("v9 fp16 C", tc_gemm.V9_KERNELS["fp16", "16-bit"], tc_gemm.V9_THREADS),
        )
        for config, (kernel, shared) in table.items()
    }
    kernels["conv v3"] = dict(
        measuring.kernel_resources(tc_conv.tc_conv_wgmma_kernel, tc_conv.V3_THREADS),
        dynamic_shared_bytes=tc_conv.V3_SHARED,
        sass=measuring.sass_mix(tc_conv.tc_conv_wgmma_kernel, WGMMA_SASS),
    )
    kernels["conv v4"] = dict(
        measuring.kernel_resources(tc_conv.tc_conv_tma_kernel, tc_conv.V3_THREADS),
        dynamic_shared_bytes=tc_conv.V4_SHARED,
        sass=measuring.sass_mix(tc_conv.tc_conv_tma_kernel, WGMMA_SASS),
    )
    kernels.update(_conv_v5_kernels())
    return dict(measuring.header(repeat), sizes=out, kernels=kernels, conv=conv, tile_cost=tile_cost)


def _conv_v5_kernels() -> dict:
    """Conv v5's and v6's kernels (fp32 and fp16 Y): resources, shared memory for the 16.3 layer, SASS."""
    W_shape = (LAYER["K"], LAYER["C"], LAYER["R"], LAYER["S"])
    height, width = tc_conv.halo_tile(LAYER["H"], LAYER["W"], LAYER["R"])  # (stride 1, padding 1: H' = H)
    box = (height + LAYER["R"] - 1) * width

    def v6_bytes(half):
        return tc_conv.v6_shared_bytes(W_shape, tc_conv.v6_stages(W_shape, box, half), box, half)

    return {name: dict(measuring.kernel_resources(kernel, tc_conv.V3_THREADS), dynamic_shared_bytes=shared,
                       sass=measuring.sass_mix(kernel, WGMMA_SASS))
            for name, kernel, shared in (
                ("conv v5", tc_conv.tc_conv_persistent_kernel, tc_conv.v5_shared_bytes(W_shape, False)),
                ("conv v5 fp16 Y", tc_conv.tc_conv_persistent16_kernel, tc_conv.v5_shared_bytes(W_shape, True)),
                ("conv v6", tc_conv.tc_conv_halo_kernel, v6_bytes(False)),
                ("conv v6 fp16 Y", tc_conv.tc_conv_halo16_kernel, v6_bytes(True)))} | _conv_v7_kernels()


def _conv_v7_kernels() -> dict:
    """Conv v7's kernels (each patch shape, fp32 and fp16 Y): resources, shared memory for the 16.3 layer, SASS."""
    W_shape = (LAYER["K"], LAYER["C"], LAYER["R"], LAYER["S"])
    out = {}
    for (height, width), kernel_out in tc_conv.V7_KERNELS:
        box = (height + LAYER["R"] - 1) * width
        shared = tc_conv.v7_shared_bytes(W_shape, tc_conv.v7_stages(W_shape, box), box)
        kernel = tc_conv.V7_KERNELS[(height, width), kernel_out]
        out[f"conv v7 {height}x{width}" + (" fp16 Y" if kernel_out == "fp16" else "")] = dict(
            measuring.kernel_resources(kernel, tc_conv.V7_THREADS), dynamic_shared_bytes=shared,
            sass=measuring.sass_mix(kernel, WGMMA_SASS))
    return out


def measure_v7_tiles(X, W, b, L: dict, want, scale, repeat: int = 20) -> list[dict]:
    """Conv v7 in each of its patch shapes on the layer (NHWC fp16 in, fp16 and fp32 Y, the
    kernel's own time as a CUDA graph), checked first: the shape v7_tile picks is the
    measured fastest, or this table says by how much it is not."""
    X_dev, W_dev, b_dev = (cuda.to_device(a) for a in (X, W, b))
    Xn, Wk = tc_conv.image_nhwc16(X_dev), tc_conv.filters_krsc16(W_dev)
    N, H, Wd, _ = Xn.shape
    K, R, S, _ = Wk.shape
    rows = []
    for tile in tc_conv.V7_TILES:
        row = dict(tile=f"{tile[0]}x{tile[1]}", chosen=tile == tc_conv.v7_tile(want.shape[2], want.shape[3], R))
        for dtype, key in ((np.float16, "fp16_ms"), (np.float32, "fp32_ms")):
            Y = poisoned((want.shape[0], want.shape[2], want.shape[3], want.shape[1]), dtype)
            plan = tc_conv.launch_plan("v7", Xn, Wk, b_dev, Y, N, H, Wd, R, S, L["padding"], L["stride"], tile=tile)

            def call(plan=plan):
                wgmma.launch(*plan[:4], *plan[4])

            measuring.checked_row(f"conv v7 {row['tile']}, Y {np.dtype(dtype).name}", call, want, out=Y,
                                  view=lambda Y: to_host(Y).astype(np.float32).transpose(0, 3, 1, 2), scale=scale,
                                  rtol=3e-3 if dtype == np.float16 else None, repeat=3)
            row[key] = measuring.graph_ms(call, repeat)
            Y = plan = None
        rows.append(row)
    return rows


TILE_COST_KS = (64, 256, 1024, 2048, 4096)
TILE_COST_CONFIG = ("v6", "128x256, 4 stages")


def waves(M: int, N: int, tile: tuple, sms: int) -> dict:
    """How a grid of (M / tile rows) x (N / tile columns) blocks, one block per SM at a time, fills
    ``sms`` SMs: tiles, waves (rounded up) and the share of the waves' SM slots that hold a tile."""
    tiles = -(-M // tile[0]) * -(-N // tile[1])
    count = -(-tiles // sms)
    return dict(tiles=tiles, waves=count, filled=tiles / (count * sms))


def measure_tile_cost(repeat: int = 20, M: int = 4096, Ks=TILE_COST_KS) -> dict:
    """HGEMM v6 (128x256, 4 stages) at M = N = 4096 for several K, each row checked against float64:
    the time of one wave against its number of 64-deep k-steps. A straight line's intercept is the
    fixed cost of a tile (the pipeline's fill, the fp32 epilogue), its slope the cost of a step."""
    import cupy

    version, config = TILE_COST_CONFIG
    rng = np.random.default_rng(17)
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    fill = waves(M, M, (128, 256), sms)
    rows = []
    for K in Ks:
        A = rng.standard_normal((M, K)).astype(np.float16)
        Bt = rng.standard_normal((M, K)).astype(np.float16)
        cA, cBt = cupy.asarray(A), cupy.asarray(Bt)
        want = cupy.asnumpy(cA.astype(cupy.float64) @ cBt.astype(cupy.float64).T)
        scale = float((cupy.abs(cA).astype(cupy.float64) @ cupy.abs(cBt).astype(cupy.float64).T).max())
        A_dev, Bt_dev, C = cuda.to_device(A), cuda.to_device(Bt), poisoned((M, M))
        row = measuring.checked_row(f"HGEMM {version} {config}, {M}x{M}x{K}",
                                    lambda: tc_gemm.launch(A_dev, Bt_dev, C, version=version, config=config), want,
                                    out=C, flop=2.0 * M * M * K, scale=scale, repeat=repeat)
        rows.append(dict(row, K=K, steps=K // 64, wave_us=1000 * row["ms"] / fill["waves"]))
        A_dev = Bt_dev = C = cA = cBt = None
    steps = np.array([r["steps"] for r in rows], float)
    wave_us = np.array([r["wave_us"] for r in rows])
    slope, intercept = np.polyfit(steps, wave_us, 1)
    return dict(M=M, config=f"{version} {config}", sms=sms, waves=fill, rows=rows,
                step_us=float(slope), fixed_us=float(intercept))


def tile_cost_table(r: dict) -> str:
    w = r["waves"]
    lines = [f"Fixed cost of a tile: {r['config']}, M = N = {r['M']}, {w['tiles']} tiles on {r['sms']} SMs = "
             f"{w['waves']} waves, {w['filled']:.0%} of their SM slots filled"]
    lines += [f"  K = {x['K']:>5} ({x['steps']:>3} k-steps): {x['ms']:.4f} ms, {x['wave_us']:6.2f} µs a wave"
              for x in r["rows"]]
    lines.append(f"  a wave = {r['fixed_us']:.1f} µs + {r['step_us']:.3f} µs per k-step (least squares); at K = 4096 "
                 f"the fixed part is {r['fixed_us'] / (r['fixed_us'] + 64 * r['step_us']):.0%} of a wave, at K = 8192 "
                 f"{r['fixed_us'] / (r['fixed_us'] + 128 * r['step_us']):.0%}")
    return "\n".join(lines)


def _bf16_rows(rng, S: int, repeat: int) -> list[dict]:
    """v6 and v7 with bf16 operands against cuBLAS bf16 (PyTorch, writing bf16) on C = A·Bᵀ, all
    checked against the float64 product of the bf16-rounded operands."""
    import cupy
    import torch

    from gpulib import precision

    A32, Bt32 = (rng.standard_normal((S, S)).astype(np.float32) for _ in range(2))
    A_words, Bt_words = precision.bf16_bits(A32), precision.bf16_bits(Bt32)
    cA, cBt = (cupy.asarray(precision.from_bf16_bits(w)).astype(cupy.float64) for w in (A_words, Bt_words))
    want = cupy.asnumpy(cA @ cBt.T)
    scale = float((cupy.abs(cA) @ cupy.abs(cBt).T).max())
    cA = cBt = None  # freed now (the timed lambdas hold them otherwise)
    flop = 2.0 * S**3
    A_dev, Bt_dev = cuda.to_device(A_words), cuda.to_device(Bt_words)
    rows = []
    for version, name, config in (
        ("v6", "v6 (wgmma, TMA)", tc_gemm.V6_DEFAULT),
        ("v7", "v7 (wgmma, TMA, producer warpgroup)", tc_gemm.V7_DEFAULT),
        ("v8", V8_NAME + ", fp32 C", tc_gemm.V8_DEFAULT),
        ("v9", V9_NAME + ", fp32 C", tc_gemm.V9_DEFAULT),
    ):
        C = poisoned((S, S))  # fresh for each kernel: an element left unwritten fails its check
        rows.append(
            measuring.checked_row(
                f"gpulib tensor-core GEMM {name}, bf16, {config}",
                lambda: tc_gemm.launch(A_dev, Bt_dev, C, version=version, operands="bf16"),
                want,
                out=C,
                flop=flop,
                scale=scale,
                repeat=repeat,
            )
        )
        C = None  # freed now (the timed lambdas hold them otherwise)
    for version, name in PERSISTENT_NAMES.items():
        C = poisoned((S, S), np.uint16)  # bf16 words; the poison is a NaN word
        rows.append(measuring.checked_row(f"gpulib tensor-core GEMM {name}, bf16, bf16 C, {tc_gemm.CONFIGS[version][1]}",
                                          lambda: tc_gemm.launch(A_dev, Bt_dev, C, version=version, operands="bf16"),
                                          want, out=C, view=lambda words: precision.from_bf16_bits(to_host(words)),
                                          flop=flop, scale=scale, rtol=1.6e-2, repeat=repeat))
        C = None
    tA, tBt = (torch.as_tensor(precision.from_bf16_bits(w), device="cuda").to(torch.bfloat16) for w in (A_words, Bt_words))
    out = torch.empty((S, S), device="cuda", dtype=torch.bfloat16)
    rows.append(
        measuring.checked_row(
            "cuBLAS bf16 (PyTorch), C = A·Bᵀ",
            lambda: torch.matmul(tA, tBt.T, out=out),
            want,
            flop=flop,
            scale=scale,
            rtol=1.6e-2,
            repeat=repeat,
        )
    )
    return measuring.with_ratio(rows, rows[-1]["ms"])


CONV_VERSIONS = (("v3", "wgmma, cp.async"), ("v4", "wgmma, TMA"), ("v5", "wgmma, TMA, persistent"),
                 ("v6", "wgmma, TMA, persistent, a box per filter column"),
                 ("v7", "wgmma, TMA, filters as A, producer and two consumers"))
CONV_ALGORITHMS = {"v3": "tc_implicit_gemm_wgmma", "v4": "tc_implicit_gemm_tma", "v5": "tc_implicit_gemm_persistent",
                   "v6": "tc_implicit_gemm_halo", "v7": "tc_implicit_gemm_pingpong"}


def measure_whole_call(X, W, b, L: dict, want, scale, repeat: int = 20) -> list[dict]:
    """Each wgmma conv through the registry as a model calls it, against its kernel alone (a CUDA
    graph of the NHWC call): NCHW float32 in and out (conversions each way, the filters
    converted at every call), and a channels-last fp16 model's NHWC operands as they are."""
    from gpulib.conv import front

    X_dev, W_dev, b_dev = (cuda.to_device(a) for a in (X, W, b))
    Xn, Wk = tc_conv.image_nhwc16(X_dev), tc_conv.filters_krsc16(W_dev)
    P, S = L["padding"], L["stride"]
    rows = []
    for version, _ in CONV_VERSIONS:
        algorithm = CONV_ALGORITHMS[version]
        Y, Yn = poisoned(want.shape), poisoned((want.shape[0], want.shape[2], want.shape[3], want.shape[1]))
        nchw = measuring.checked_row(f"conv {version}, NCHW float32 through conv2d", lambda: front.conv2d(
            X_dev, W_dev, b_dev, P, S, algorithm=algorithm, out=Y), want, out=Y, scale=scale, repeat=repeat)

        def nhwc():
            front.conv2d(Xn, Wk, b_dev, P, S, algorithm=algorithm, out=Yn, layout="NHWC")

        channels_last = measuring.checked_row(f"conv {version}, NHWC fp16 through conv2d(layout='NHWC')", nhwc, want,
                                              out=Yn, view=lambda Y: to_host(Y).transpose(0, 3, 1, 2), scale=scale,
                                              repeat=repeat)
        kernel_ms = measuring.graph_ms(nhwc, repeat)
        row = dict(version=version, algorithm=algorithm, kernel_ms=kernel_ms, nchw_ms=nchw["ms"],
                   nhwc_ms=channels_last["ms"], nchw_vs_kernel=nchw["ms"] / kernel_ms,
                   nhwc_vs_kernel=channels_last["ms"] / kernel_ms)
        if version in ("v5", "v6", "v7"):  # and Y in fp16 too, as cuDNN writes it
            Yh = poisoned(Yn.shape, np.float16)

            def half():
                front.conv2d(Xn, Wk, b_dev, P, S, algorithm=algorithm, out=Yh, layout="NHWC")

            fp16 = measuring.checked_row(f"conv {version}, NHWC fp16 in and out", half, want, out=Yh,
                                         view=lambda Y: to_host(Y).astype(np.float32).transpose(0, 3, 1, 2),
                                         scale=scale, rtol=3e-3, repeat=repeat)
            row.update(fp16_out_ms=fp16["ms"], fp16_out_kernel_ms=measuring.graph_ms(half, repeat))
            Yh = None
        rows.append(row)
        Y = Yn = None
    return rows


def measure_wgmma_conv(repeat: int = 20) -> dict:
    """Tensor-core conv v3 (wgmma, cp.async), v4 (wgmma, TMA) and v5 (v4 persistent) on the 16.3
    layer: per call (CUDA events around each launch) and as a CUDA graph (the kernel's own
    time), and each whole call through the registry (measure_whole_call), against PyTorch's
    channels_last fp16 conv with bias (cuDNN) and cuDNN's fastest plan listed through the cuDNN
    frontend (no bias)."""
    L = LAYER
    X, W, b = layer_inputs(L)
    want, _ = measuring.reference_conv(*(a.astype(np.float16).astype(np.float32) for a in (X, W)), b, L)
    scale = measuring.magnitude(X, W, b, L)
    out = {}
    for version, what in CONV_VERSIONS:
        operands = tc_conv.prepare(X, W, b, L["padding"], L["stride"], version=version)
        Y = poisoned(operands.out_shape)  # fresh for each version: an element left unwritten fails

        def call():
            tc_conv.launch(operands, Y)

        row = measuring.checked_row(
            f"gpulib tensor-core conv {version} (NHWC, {what}, fp16)",
            call,
            want,
            out=Y,
            view=lambda Y: tc_conv.to_nchw(Y, want.shape),
            flop=flop(L),
            scale=scale,
            repeat=repeat,
        )
        out.update(
            {
                f"{version}_ms": row["ms"],
                f"{version}_graph_ms": measuring.graph_ms(call, repeat),
                f"{version}_rel_err": row["rel_err"],
            }
        )
        Y = None  # freed now (the timed lambdas hold them otherwise)
    out["whole_call"] = measure_whole_call(X, W, b, L, want, scale, repeat)
    out["v7_tiles"] = measure_v7_tiles(X, W, b, L, want, scale, repeat)
    library, run = measuring.cudnn_conv(X, W, b, L, precision="fp16")
    torch_row = measuring.checked_row(library, run, want, flop=flop(L), scale=scale, rtol=3e-3, repeat=repeat)
    engines = measure_cudnn_engines(max(5, repeat // 2))
    timed = [r for r in engines["rows"] if r["ms"] is not None]
    best = min(timed, key=lambda r: r["ms"]) if timed else None
    return dict(
        layer=L,
        **out,
        torch_name=library,
        torch_ms=torch_row["ms"],
        cudnn_best=best and dict(name=best["name"], ms=best["ms"]),
        cudnn_version=engines.get("version", ""),
    )


def wgmma_table(r: dict) -> str:
    lines = [f"Tensor-core GEMM v5-v9 (wgmma) against cuBLAS fp16 ({r['device']}, {r['date']}); gpulib writes fp32 (v8 and "
             f"v9 also fp16 and bf16, as cuBLAS does)"]
    for entry in r["sizes"]:
        lines.append(f"  {entry['size']}^3, {entry['layout']}")
        lines += measuring.rows_table(entry["rows"], "cuBLAS", width=58, indent="    ")
        if "wmma_rows" in entry:
            lines += measuring.rows_table(entry["wmma_rows"], "cuBLAS", width=58, indent="    ")
        if "bf16_rows" in entry:
            lines += measuring.rows_table(entry["bf16_rows"], "cuBLAS", width=58, indent="    ")
    c = r.get("conv")
    if c:
        best = c["cudnn_best"]
        lines.append(
            f"  16.3 layer, fp16: {c['torch_name']} {c['torch_ms']:.4f} ms; "
            + (f"cuDNN's fastest plan ({best['name']}, no bias) {best['ms']:.4f} ms" if best else "no cuDNN frontend")
        )
        for version, _ in CONV_VERSIONS:
            if f"{version}_ms" in c:
                graph = c[f"{version}_graph_ms"]
                lines.append(
                    f"    conv {version}: {c[f'{version}_ms']:.4f} ms per call, {graph:.4f} ms as a CUDA graph "
                    f"(rel err {c[f'{version}_rel_err']:.1e}); PyTorch's time / ours {c['torch_ms'] / graph:.0%}"
                    + (f", cuDNN's best plan's / ours {best['ms'] / graph:.0%}" if best else "")
                )
        for w in c.get("whole_call", []):
            lines.append(f"    conv {w['version']} whole call: kernel {w['kernel_ms']:.4f} ms; NCHW float32 "
                         f"{w['nchw_ms']:.4f} ms ({w['nchw_vs_kernel']:.2f}x); NHWC fp16 {w['nhwc_ms']:.4f} ms "
                         f"({w['nhwc_vs_kernel']:.2f}x)"
                         + (f"; fp16 Y {w['fp16_out_ms']:.4f} ms (kernel {w['fp16_out_kernel_ms']:.4f})"
                            if "fp16_out_ms" in w else ""))
        for t in c.get("v7_tiles", []):
            lines.append(f"    conv v7 in {t['tile']} patches{' (its choice)' if t['chosen'] else ''}: fp16 Y "
                         f"{t['fp16_ms']:.4f} ms, fp32 Y {t['fp32_ms']:.4f} ms as a CUDA graph"
                         + (f"; cuDNN's best plan's / ours {best['ms'] / t['fp16_ms']:.0%}" if best else ""))
    lines.append(f"  {'kernel':<23} {'registers':>9} {'local B':>8} {'dyn. shared B':>14} {'blocks/SM':>10}  SASS")
    for config, k in r["kernels"].items():
        sass = ", ".join(f"{op} {n}" for op, n in k["sass"].items())
        fit = min(k["blocks_per_sm"], measuring.blocks_by_shared_memory(k["dynamic_shared_bytes"]))
        lines.append(
            f"  {config:<23} {k['registers']:>9} {k['local_bytes']:>8} {k['dynamic_shared_bytes']:>14} {fit:>10}  {sass}"
        )
    lines.append("  (blocks/SM: the fewest that registers, threads and shared memory allow)")
    return "\n".join(lines)


def winograd_f4_table(r: dict) -> str:
    lines = [
        f"Winograd F(4x4, 3x3) on the 16.3 layer ({r['device']}, {r['date']}), rel err {r['rel_err']:.1e}:",
        f"  whole call {r['event_ms']:.3f} ms (events), {r['wall_ms']:.3f} ms (wall); {r['cudnn']} "
        f"{r['cudnn_ms']:.3f} ms (ours runs at {r['cudnn_ms'] / r['event_ms']:.2f}x cuDNN's speed); implicit precomp GEMM "
        f"{r['implicit_precomp_ms']:.3f} ms",
    ]
    lines += [f"  {k['step']:<32} {k['ms']:.4f} ms" for k in r["kernels"]]
    res = r["products_resources"]
    lines.append(
        f"  products kernel: {res['registers']} registers, {res['blocks_per_sm']} blocks/SM; SASS "
        + ", ".join(f"{op} {n}" for op, n in r["products_sass"].items())
    )
    return "\n".join(lines)


def measure_persistent(repeat: int = 20) -> dict:
    """The persistent rungs against their non-persistent ones and the libraries, in one run:
    HGEMM v6 and v7 (their defaults) and v8's and v9's 128x256 configs (fp32 C; fp16 and bf16 C as cuBLAS writes them)
    against cuBLAS fp16 and bf16 at 4096³ and 8192³; conv v3, v4 and v5 on the 16.3 layer
    and each whole call through the registry, against PyTorch's channels_last conv and cuDNN's
    fastest plan; v8's, v9's and conv v5's resources and SASS counts."""
    wide = [config for config, (bn, _) in tc_gemm.V8_CONFIGS.items() if bn == 256]  # 128x128 ran at half speed
    gemm = measure_wgmma(repeat, versions={"v6": [tc_gemm.V6_DEFAULT], "v7": [tc_gemm.V7_DEFAULT], "v8": wide,
                                           "v9": wide}, extras=False)
    kernels = {f"{version} {out} C {config}": dict(measuring.kernel_resources(kernel, tc_gemm.CONFIGS[version][2]),
                                                   dynamic_shared_bytes=shared,
                                                   sass=measuring.sass_mix(kernel, WGMMA_SASS))
               for version in tc_gemm.PERSISTENT for out in tc_gemm.OUTPUTS
               for config, (kernel, shared) in tc_gemm.PERSISTENT[version]["fp16", out].items() if config in wide}
    conv = measure_wgmma_conv(repeat)
    kernels.update(_conv_v5_kernels())
    return dict(gemm, conv=conv, kernels=kernels)


def measure_part(part: str, repeat: int = 20) -> dict:
    """One part of ``measure``, to add to stored results (it carries its own device and date)."""
    measuring.require_gpu()
    if part == "winograd_f4":
        return measure_winograd_f4(repeat)
    if part == "wgmma":
        return measure_wgmma(repeat)
    if part == "persistent":  # v8 and conv v5 beside v6, v3/v4 and the libraries; the stored ladder stays
        return measure_persistent(repeat)
    if part == "nsight":  # the profiler's counters of v6, v7 and conv v3/v4 (gpulib/bench/nsight.py)
        return nsight.measure_nsight()
    if part == "tile_cost":  # also inside "wgmma"; alone, it leaves a stored ladder as it was
        return dict(measuring.header(repeat), **measure_tile_cost(repeat))
    if part == "cudnn_engines":
        return dict(measuring.header(repeat), **measure_cudnn_engines(max(5, repeat // 2)))
    if part == "tensor_cores":
        return dict(measuring.header(repeat), **measure_tensor_cores(repeat))
    if part == "autotune":  # a list of layers: each carries the header
        header = measuring.header(max(5, repeat // 2))
        return [dict(layer, measured=header) for layer in measure_autotune(repeat=max(5, repeat // 2))]
    if part != "resources":
        raise ValueError(
            f"part must be 'tensor_cores', 'resources', 'autotune', 'cudnn_engines', 'winograd_f4', 'wgmma' or "
            f"'tile_cost', 'persistent' or 'nsight' "
            f"(the others are measured together "
            f"by measure()), not {part!r}"
        )
    return measure_resources(repeat)


def measure(repeat: int = 20, progress=print) -> dict:
    measuring.require_gpu()
    progress("tensor cores ...")
    tc = measure_tensor_cores(repeat)
    progress("auto-tuner ...")
    tuned = measure_autotune(repeat=max(5, repeat // 2))
    progress("cuDNN's own plans ...")
    try:
        engines = measure_cudnn_engines(max(5, repeat // 2))
    except Exception as e:  # the frontend's API moves between versions: report, do not lose the rest
        engines = dict(version=cudnn_engines.available(), rows=[], note=f"listing failed: {e}")
    progress("precision ...")
    prec = measure_precision(repeat)
    progress("kernel resources ...")
    resources = measure_resources(repeat)
    progress("Winograd F(4x4) ...")
    f4 = measure_winograd_f4(repeat)
    progress("wgmma GEMM ...")
    wg = measure_wgmma(repeat)
    return dict(
        measuring.header(repeat),
        tensor_cores=tc,
        autotune=tuned,
        cudnn_engines=engines,
        precision=prec,
        resources=resources,
        winograd_f4=f4,
        wgmma=wg,
    )


def load(path=RESULTS) -> dict:
    return measuring.load(path)


def save(results: dict, path=RESULTS) -> None:
    measuring.save(results, path)


PARTS = ("tensor_cores", "autotune", "cudnn_engines", "precision", "resources", "winograd_f4", "wgmma")


def _ranking(layer: dict) -> list[autotune.Result]:
    """A stored layer's ranking as the auto-tuner's results (without the stored ratio)."""
    return [autotune.Result(**{k: v for k, v in r.items() if k != "vs_library"}) for r in layer["ranking"]]


def table(results: dict, parts=PARTS) -> str:
    """The results as text: every part, or those named in ``parts``."""
    lines = [f"{results['device']}, {results['date']}, {results['timing']}"]
    tc = results["tensor_cores"]
    if "tensor_cores" in parts:
        lines.append(
            f"Tensor cores: GEMM {tc['gemm']['size']}^3, fp16 operands, fp32 sums "
            "(gpulib writes fp32, cuBLAS via CuPy writes fp16)"
        )
        lines += measuring.rows_table(tc["gemm"]["rows"], "cuBLAS", width=54)
        lines.append("Tensor cores: conv (16.3 layer) in fp16")
        lines += measuring.rows_table(tc["conv"]["rows"], "cuDNN", width=54)
    if "autotune" in parts:
        for layer in results["autotune"]:
            library = layer["library"]
            lines.append(
                f"Auto-tuner: {layer['title']} {layer['layer']} ({layer['gflop']:.2f} GFLOP), cuDNN fp32 {library['ms']:.3f} ms"
            )
            ranking = _ranking(layer)
            rows = autotune.table(ranking).splitlines()
            rows[0] += f" {'of cuDNN':>9}"
            for i, r in enumerate(layer["ranking"], 1):
                rows[i] += f" {ratio_text(r['vs_library']):>9}" if r["vs_library"] else ""
            if ranking and ranking[0].status == "ok":
                rows[1] += "  <- the auto-tuner's pick"
            err = "-" if library["rel_err"] is None else f"{library['rel_err']:.1e}"
            rows.append(
                f"{'-':>4} {'cuDNN fp32 (torch, benchmark=True)':<47} {'library':<14} "
                f"{library['ms']:8.3f} {'':>9} {err:>8} {ratio_text(1.0):>9}"
            )
            lines += ["  " + line for line in rows]
    engines = results.get("cudnn_engines", {})
    if "cudnn_engines" in parts and engines.get("rows"):
        lines.append(f"cuDNN {engines['version']} frontend: its own plans for the 16.3 layer ({engines['dtype']})")
        lines.append(cudnn_engines.table(engines["rows"]))
    elif "cudnn_engines" in parts and engines:
        lines.append(f"cuDNN's own plans: {engines['note']}")
    if "precision" in parts:
        lines.append("Precision (PyTorch): time and max error / max |exact|")
        for r in results["precision"]:
            lines.append(f"  {r['op']:<24} {r['format']:<5} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s  err {r['rel_err']:.1e}")
    if "resources" in parts and "resources" in results:
        lines += resources_table(results["resources"]).splitlines()
    if "winograd_f4" in parts and "winograd_f4" in results:
        lines += winograd_f4_table(results["winograd_f4"]).splitlines()
    if "wgmma" in parts and "wgmma" in results:
        lines += wgmma_table(results["wgmma"]).splitlines()
    cost = results.get("tile_cost") or results.get("wgmma", {}).get("tile_cost")
    if "wgmma" in parts and cost:
        lines += tile_cost_table(cost).splitlines()
    if "wgmma" in parts and results.get("nsight"):
        lines += nsight.table(results["nsight"]).splitlines()
    if "wgmma" in parts and results.get("persistent"):
        lines += wgmma_table(results["persistent"]).splitlines()
    return "\n".join(lines)


def resources_table(resources: dict) -> str:
    """The compiler's allocation per tensor-core kernel, then conv v2 with and without its cap."""
    lines = [
        f"Kernel resources ({resources['device']}, {resources['date']}): per thread, per block, per SM",
        f"  {'kernel':<30} {'registers':>9} {'local B':>8} {'shared B':>9} {'threads':>8} {'blocks/SM':>10}",
    ]
    for name, k in resources["kernels"].items():
        lines.append(
            f"  {name:<30} {k['registers']:9d} {k['local_bytes']:8d} {k['shared_bytes']:9d} "
            f"{k['threads']:8d} {k['blocks_per_sm']:10d}"
        )
    lines.append("  the 16.3 layer, fp16:")
    for r in resources["register_cap"]:
        lines.append(
            f"  {r['name']:<48} {r['ms']:7.3f} ms {r['tflops']:6.1f} TFLOP/s  {r['registers']} registers, "
            f"{r['local_bytes']} B local, {r['blocks_per_sm']} blocks/SM"
        )
    return "\n".join(lines)
