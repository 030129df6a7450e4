"""16.6 on a GPU: the model trained and profiled, the GPU's limits, the memory estimator against
the measured peak, the debugging playbook's measurements, and im2col's real bottleneck.

    training    BookCNN on the digits, each conv layer on the auto-tuner's pick: the picks and
                their rankings, the gradients checked against float64, loss and accuracy per
                epoch, wall time
    breakdown   one training step profiled kernel by kernel (CUDA events), at the training
                batch and at a large batch
    limits      the datasheet's and the measured limits: fp32 FMA (a Numba kernel of
                independent FMA chains), HBM bandwidth (a copy kernel), TF32/fp16/bf16 tensor
                cores (cuBLAS through PyTorch, 8192³)
    memory      the estimator (gpulib/playbook/memory.py) against the peak device memory of one
                training step at several batch sizes and three configurations
    playbook    PyTorch's cuDNN: NCHW against NHWC, channels that are and are not multiples of 8
                on the tensor cores, default TF32, cudnn.benchmark, and Python's launch cost
                next to CUDA-event time for small layers (gpulib and PyTorch)
    im2col      the 16.3 layer's im2col: Numba with sizes at run time and compiled in, the same
                two in CUDA C, and a plain fill of X_col (the memory-speed floor)
    cuda_c      the CUDA C direct convolution against the Numba one
    softmax     one block per row (tree reductions) against one thread per row, for wide rows
    pytorch     (only when asked: it needs PyTorch) one training step against PyTorch eager, from
                the same weights: gpulib eager, the step recorded once and replayed (launches,
                and one CUDA graph), and PyTorch

``benchmarks/book_model.py`` is the command line; results go to benchmarks/results/book_model.json.
"""

from __future__ import annotations

import gc
import math
import statistics
import time

import numpy as np

from gpulib import reference as ref
from gpulib.bench import measure as measuring
from gpulib.book_layers import LAYER, flop, layer_inputs
from gpulib.check import poisoned, validate
from gpulib.cnn.book_model import NO_PROFILER, BookCNN, reference_grads
from gpulib.conv import autotune, cuda_c
from gpulib.conv import im2col as im2col_conv
from gpulib.data import load_digits
from gpulib.env import cuda
from gpulib.mlp.train import train
from gpulib.playbook import memory, probes, roofline
from gpulib.playbook.profile import Profiler
from gpulib.playbook.replay import ReplayedStep
from gpulib.reductions.softmax import softmax_rows
from gpulib.timing import benchmark

RESULTS = measuring.RESULTS_DIR / "book_model.json"
CHANNELS = (16, 32)
TRAIN = dict(epochs=30, batch=64, lr=0.1, seed=0)
MEMORY_BATCHES = (1024, 4096, 16384)
MEMORY_CONFIGS = {"im2col + GEMM": dict(algorithms=("gemm", "gemm")),
                  "im2col + GEMM, in-place ReLU": dict(algorithms=("gemm", "gemm"), inplace_relu=True),
                  "implicit precomp GEMM": dict(algorithms=("implicit_precomp_gemm",) * 2)}


def _model(config: dict) -> BookCNN:
    """BookCNN for a configuration written as the estimator's keywords."""
    return BookCNN(channels=CHANNELS, algorithms_per_layer=config["algorithms"],
                   inplace_relu=config.get("inplace_relu", False))


def _images(batch: int, seed: int = 0):
    """A batch of digits (repeated when the batch is larger than the data set) and labels."""
    d = load_digits()
    idx = np.random.default_rng(seed).integers(0, len(d.X_train), batch)
    return np.ascontiguousarray(d.X_train[idx].reshape(batch, 1, 8, 8)), d.y_train[idx].astype(np.int32)


# ------------------------------------------------------------------ training and breakdown
def measure_training(progress=print) -> dict:
    data = load_digits()
    model = BookCNN(channels=CHANNELS, seed=TRAIN["seed"])
    X, y = _images(TRAIN["batch"], 1)
    # the gradients of the auto-tuned model against float64 before any training
    _, grads = model.loss_and_grads(X, y)
    want = reference_grads(model.host_params(), X, y)
    grad_errors = [validate(g, w, scale=float(np.abs(w).max()) or 1.0, rtol=1e-4, name=f"grad {i}").rel_err
                   for i, (g, w) in enumerate(zip(grads, want))]
    picks = {}  # what the auto-tuner chose for the training batch's shapes, and its rankings
    for layer, (Wp, C) in enumerate(((model.params[0], 1), (model.params[2], CHANNELS[0]))):
        ranking = autotune.cached_ranking((TRAIN["batch"], C, 8, 8), Wp.shape, 1, 1)
        picks[f"conv{layer + 1}"] = dict(pick=ranking[0].name, ranking=[vars(r) for r in ranking])
    progress(f"picks: {[p['pick'] for p in picks.values()]}")
    t0 = time.perf_counter()
    history = train(model, data, TRAIN["lr"], TRAIN["epochs"], TRAIN["batch"], seed=TRAIN["seed"], progress=False)
    cuda.synchronize()
    seconds = time.perf_counter() - t0
    steps = len(history.step_loss)
    per_epoch = math.ceil(len(data.X_train) / TRAIN["batch"])
    epoch_loss = [float(np.mean(history.step_loss[i:i + per_epoch])) for i in range(0, steps, per_epoch)]
    return dict(channels=CHANNELS, **TRAIN, grad_rel_err=grad_errors, picks=picks, seconds=seconds, steps=steps,
                epoch_loss=epoch_loss, train_acc=history.epoch_train_acc, test_acc=history.epoch_test_acc)


def median_wall_ms(step, repeat: int, warmup: int, synchronize=cuda.synchronize) -> float:
    """The median wall time of ``step()`` in ms over ``repeat`` calls after ``warmup`` calls,
    each ended by ``synchronize()`` (the GPU work finished, not only launched)."""
    for _ in range(warmup):
        step()
    synchronize()
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        synchronize()
        walls.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(walls)


# (batch, how the gradients dW and db are summed, the small kernels fused); "staged" also finds dX as a
# forward convolution ("flipped")
BREAKDOWNS = ((64, "tree", False), (4096, "thread", False), (4096, "tree", False), (256, "tree", False),
              (256, "staged", False), (256, "staged", True))


def measure_breakdown(algorithms=("auto", "auto"), breakdowns=BREAKDOWNS, repeat: int = 5) -> list[dict]:
    """One training step profiled: the median over ``repeat`` steps of each launch's time, and the
    step's wall time measured apart, without the profiler."""
    out = []
    for batch, reduction, fused in breakdowns:
        model = BookCNN(channels=CHANNELS, algorithms_per_layer=algorithms, reduction=reduction,
                        input_grad="flipped" if reduction == "staged" else "gather", fused=fused)
        X, y = _images(batch)
        X_dev, y_dev = cuda.to_device(X), cuda.to_device(y)
        step_wall_ms = median_wall_ms(lambda: model.step(model.loss_and_grads(X_dev, y_dev)[1], 1e-9), repeat,
                                      warmup=2)  # the warm-up compiles and tunes
        runs = []
        for _ in range(repeat):
            with Profiler() as prof:
                model.profiler = prof
                model.step(model.loss_and_grads(X_dev, y_dev)[1], 1e-9)
            model.profiler = NO_PROFILER
            runs.append((prof.kernels(), prof.ops()))
        kernels = runs[0][0]
        for i, row in enumerate(kernels):
            row["ms"] = statistics.median(r[0][i]["ms"] for r in runs)
        ops = runs[0][1]
        for i, row in enumerate(ops):
            row["ms"] = statistics.median(r[1][i]["ms"] for r in runs)
            row["wall_ms"] = statistics.median(r[1][i]["wall_ms"] for r in runs)
        resolved = [a if a != "auto" else autotune.cached_ranking(shape, W.shape, 1, 1)[0].name
                    for a, shape, W in zip(algorithms, ((batch, 1, 8, 8), (batch, CHANNELS[0], 8, 8)),
                                           (model.params[0], model.params[2]))]
        out.append(dict(batch=batch, algorithms=resolved, reduction=reduction, input_grad=model.input_grad, fused=fused,
                        kernels=kernels, ops=ops,
                        step_wall_ms=step_wall_ms,
                        step_gpu_ms=sum(o["ms"] for o in ops)))
    return out


# ------------------------------------------------------------------ limits


def measure_limits(repeat: int = 10) -> dict:
    torch, _ = measuring.torch_modules()
    device = cuda.get_current_device()
    sms = device.MULTIPROCESSOR_COUNT
    threads, iterations = sms * 2048 * 4, 4096
    out = cuda.device_array(threads, np.float32)
    fma = benchmark(lambda: probes.fma_kernel[threads // 256, 256](out, iterations), repeat=repeat, flush_l2=False)
    fma_flops = 2.0 * 8 * iterations * threads / (fma.median_ms * 1e-3)
    n = 2**28  # 1 GiB of float32
    src, dst = cuda.device_array(n, np.float32), cuda.device_array(n, np.float32)
    copy = benchmark(lambda: probes.copy_kernel[n // 256, 256](src, dst), repeat=repeat, flush_l2=False)
    hbm = 2.0 * 4 * n / (copy.median_ms * 1e-3)
    import cupy

    csrc, cdst = cupy.asarray(src), cupy.asarray(dst)
    library_copy = benchmark(lambda: cupy.copyto(cdst, csrc), repeat=repeat, flush_l2=False)
    hbm_library = 2.0 * 4 * n / (library_copy.median_ms * 1e-3)
    src = dst = csrc = cdst = None  # freed now (the timed lambdas hold them otherwise)
    rates = {}
    size = 8192
    for fmt, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                             ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        A = torch.randn(size, size, device="cuda", dtype=dtype)
        B = torch.randn(size, size, device="cuda", dtype=dtype)
        t = benchmark(lambda: torch.matmul(A, B), repeat=repeat, flush_l2=False)
        rates[fmt] = 2.0 * size**3 / (t.median_ms * 1e-3)
        A = B = None  # freed now (the timed lambdas hold them otherwise)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.cuda.empty_cache()
    name = measuring.header(repeat)["device"]
    return dict(
        datasheet=roofline.datasheet(name),
        measured=dict(
            fp32_fma=fma_flops, hbm_copy=hbm, hbm_cupy_copy=hbm_library, **{f"cublas_{k}": v for k, v in rates.items()}
        ),
        how=dict(
            fp32_fma=f"Numba kernel, {threads} threads x 8 independent FMA chains x {iterations}",
            hbm_copy="Numba copy of 1 GiB, one element per thread (read + write)",
            hbm_cupy_copy="cupy.copyto of 1 GiB (read + write)",
            cublas=f"torch.matmul {size}^3 (cuBLAS); fp32 with TF32 off",
        ),
    )


# ------------------------------------------------------------------ memory
def _free_everything():
    gc.collect()
    cuda.current_context().deallocations.clear()
    cuda.synchronize()


def measure_memory(batches=MEMORY_BATCHES, configs=MEMORY_CONFIGS) -> list[dict]:
    rows = []
    for title, config in configs.items():
        for batch in batches:
            X, y = _images(batch)
            for flush in (True, False):
                warm = _model(config)  # compile every kernel, create cuBLAS's handle
                warm.loss_and_grads(X, y)
                del warm
                _free_everything()
                with Profiler(memory=True, flush=flush) as prof:
                    model = _model(config)
                    model.profiler = prof
                    loss, grads = model.loss_and_grads(X, y)
                    cuda.synchronize()
                    prof.sample()
                del model, grads
                _free_everything()
                if flush:
                    est = memory.estimate(batch, CHANNELS, **config)
                    row = dict(
                        config=title,
                        batch=batch,
                        estimate=est.peak_bytes,
                        estimate_at=est.peak_at,
                        by_kind=est.by_kind,
                        measured_live=prof.peak_above_base,
                    )
                else:
                    row["measured_as_run"] = prof.peak_above_base
            rows.append(row)
    return rows


# ------------------------------------------------------------------ playbook (PyTorch)
def _wall_and_events(run, repeat: int = 50):
    """(median wall ms from launch to synchronize, median CUDA-event ms) of ``run``."""
    torch, _ = measuring.torch_modules()
    wall = median_wall_ms(run, repeat, warmup=5, synchronize=torch.cuda.synchronize)
    events = benchmark(run, repeat=repeat, flush_l2=False).median_ms
    return wall, events


def measure_playbook(repeat: int = 20) -> dict:
    torch, F = measuring.torch_modules()
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default, restored below
    L = LAYER
    X, W, b = layer_inputs(L)
    exact = F.conv2d(*(torch.as_tensor(a, device="cuda").double() for a in (X, W, b)), padding=1)
    tX, tW, tb = (torch.as_tensor(a, device="cuda") for a in (X, W, b))
    F_ = flop(L)
    out = {}

    def timed(run):
        return benchmark(run, repeat=repeat).median_ms

    def err(Y):
        return float((Y.double() - exact).abs().max() / exact.abs().max())

    # the defaults: TF32 on for convolutions, off for matmul since PyTorch 1.12
    out["defaults"] = dict(
        cudnn_allow_tf32=bool(torch.backends.cudnn.allow_tf32),
        matmul_allow_tf32=bool(torch.backends.cuda.matmul.allow_tf32),
        cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
        torch=torch.__version__,
    )
    rows = []
    for bench_on in (False, True):
        for tf32 in (True, False):
            torch.backends.cudnn.benchmark = bench_on
            torch.backends.cudnn.allow_tf32 = tf32
            run = lambda: F.conv2d(tX, tW, tb, padding=1)  # noqa: E731
            Y = run()
            rows.append(dict(benchmark=bench_on, allow_tf32=tf32, ms=timed(run), rel_err=err(Y)))
    out["tf32_and_benchmark"] = rows
    torch.backends.cudnn.benchmark = True
    layouts = []
    for precision, dtype in (("fp32 (TF32 off)", torch.float32), ("fp16", torch.float16)):
        torch.backends.cudnn.allow_tf32 = False
        for layout in ("NCHW", "NHWC"):
            x, w, bb = tX.to(dtype), tW.to(dtype), tb.to(dtype)
            if layout == "NHWC":
                x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
            run = lambda x=x, w=w, bb=bb: F.conv2d(x, w, bb, padding=1)  # noqa: E731
            Y = run()
            ms = timed(run)
            layouts.append(dict(precision=precision, layout=layout, ms=ms, tflops=F_ / ms / 1e9, rel_err=err(Y)))
    out["layout"] = layouts
    channel_rows = []
    rng = np.random.default_rng(7)
    for C in (56, 60, 62, 63, 64, 65, 66, 72):
        layer = dict(L, C=C, K=C)
        x = torch.as_tensor(rng.standard_normal((L["N"], C, L["H"], L["W"])), device="cuda", dtype=torch.float16)
        w = torch.as_tensor(rng.standard_normal((C, C, 3, 3)) / math.sqrt(9 * C), device="cuda", dtype=torch.float16)
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
        run = lambda x=x, w=w: F.conv2d(x, w, padding=1)  # noqa: E731
        want = F.conv2d(x.double(), w.double(), padding=1)
        Y = run()
        rel = float((Y.double() - want).abs().max() / want.abs().max())
        if rel > 1e-2:
            raise AssertionError(f"cuDNN fp16 conv with C=K={C} is off by {rel:.2e}")
        ms = timed(run)
        channel_rows.append(dict(C=C, K=C, ms=ms, tflops=flop(layer) / ms / 1e9, rel_err=rel))
    out["channels"] = channel_rows
    launch_rows = []
    from gpulib.cnn import layers as CL
    from gpulib.conv import front

    for n in (1, 8, 32):
        layer = dict(L, N=n)
        Xn, Wn, bn = layer_inputs(layer)
        X_dev, W_dev, b_dev = cuda.to_device(Xn), cuda.to_device(Wn), cuda.to_device(bn)
        Y = cuda.device_array((n, L["K"], L["H"], L["W"]), np.float32)
        gpulib_run = lambda X_dev=X_dev, W_dev=W_dev, b_dev=b_dev, Y=Y: front.conv2d(  # noqa: E731
            X_dev, W_dev, b_dev, 1, 1, algorithm="implicit_precomp_gemm", out=Y
        )
        gpulib_run()
        validate(Y, measuring.reference_conv(Xn, Wn, bn, layer)[0], scale=measuring.magnitude(Xn, Wn, bn, layer), name="conv")
        wall, event = _wall_and_events(gpulib_run)
        launch_rows.append(dict(what="gpulib implicit precomp GEMM", N=n, wall_ms=wall, event_ms=event))
        relu_out = cuda.device_array(Y.shape, np.float32)
        wall, event = _wall_and_events(lambda Y=Y, relu_out=relu_out: CL.relu(Y, out=relu_out))
        launch_rows.append(dict(what="gpulib ReLU", N=n, wall_ms=wall, event_ms=event))
        tx, tw, tbb = (torch.as_tensor(a, device="cuda") for a in (Xn, Wn, bn))
        torch.backends.cudnn.allow_tf32 = False
        wall, event = _wall_and_events(lambda tx=tx, tw=tw, tbb=tbb: F.conv2d(tx, tw, tbb, padding=1))
        launch_rows.append(dict(what="PyTorch conv2d (cuDNN fp32)", N=n, wall_ms=wall, event_ms=event))
    out["launch"] = launch_rows
    torch.backends.cudnn.allow_tf32 = False
    return out


# ------------------------------------------------------------------ im2col, CUDA C, softmax
def measure_im2col(repeat: int = 20) -> dict:
    L = LAYER
    X, W, b = layer_inputs(L)
    R, S, p, s = L["R"], L["S"], L["padding"], L["stride"]
    small = X[:2]  # the float64 reference on two images; the full size against version 1's output
    want_small = ref.im2col(small, R, S, p, s)
    X_dev = cuda.to_device(X)
    rows_total = L["C"] * R * S
    X_col = cuda.device_array((rows_total, L["N"] * L["H"] * L["W"]), np.float32)
    im2col_conv.im2col(X_dev, R, S, p, s, out=X_col, version="v1")
    v1 = X_col.copy_to_host()
    nbytes = X.nbytes + X_col.size * 4
    runs = {
        "Numba v1 (sizes at run time)": lambda Xa, out: im2col_conv.im2col(Xa, R, S, p, s, out=out, version="v1"),
        "Numba v2 (sizes compiled in)": lambda Xa, out: im2col_conv.im2col(Xa, R, S, p, s, out=out, version="v2"),
        "Numba v3 (compiled in, unsigned 32-bit)": lambda Xa, out: im2col_conv.im2col(Xa, R, S, p, s, out=out, version="v3"),
        "CUDA C, sizes at run time": lambda Xa, out: cuda_c.im2col_c(Xa, R, S, p, s, out=out),
        "CUDA C, sizes as template constants": lambda Xa, out: cuda_c.im2col_c(Xa, R, S, p, s, out=out, fixed_sizes=True),
    }
    rows = []
    for name, run in runs.items():
        got = run(cuda.to_device(small), poisoned(want_small.shape))
        validate(got, want_small, name=name)
        out = poisoned(X_col.shape)
        run(X_dev, out)
        if not np.array_equal(out.copy_to_host(), v1):
            raise AssertionError(f"{name} differs from version 1 on the full layer")
        ms = benchmark(lambda run=run, out=out: run(X_dev, out), repeat=repeat).median_ms
        rows.append(dict(name=name, ms=ms, gbps=nbytes / ms / 1e6))
    n = X_col.size
    flat = X_col.reshape(n)
    fill = benchmark(lambda: probes.fill_kernel[(n + 255) // 256, 256](flat, 0.0), repeat=repeat).median_ms
    rows.append(dict(name="fill X_col (writes only)", ms=fill, gbps=X_col.size * 4 / fill / 1e6))
    return dict(layer=L, bytes=nbytes, x_col_bytes=X_col.size * 4, rows=rows)


def measure_cuda_c(repeat: int = 10) -> dict:
    from gpulib.conv import direct

    L = LAYER
    X, W, b = layer_inputs(L)
    want, _ = measuring.reference_conv(X, W, b, L)
    scale = measuring.magnitude(X, W, b, L)
    X_dev, W_dev, b_dev = cuda.to_device(X), cuda.to_device(W), cuda.to_device(b)
    rows = []
    for name, run in (
        ("Numba direct v1", lambda out: direct.conv2d_direct(X_dev, W_dev, b_dev, 1, 1, out=out, version="v1")),
        ("CUDA C direct (one thread per output)", lambda out: cuda_c.conv2d_direct_c(X_dev, W_dev, b_dev, 1, 1, out=out)),
    ):
        Y = poisoned(want.shape)
        rows.append(measuring.checked_row(name, lambda run=run, Y=Y: run(Y), want, out=Y, flop=flop(L), scale=scale,
                                          repeat=repeat))
    return dict(layer=L, rows=rows)


def measure_softmax(repeat: int = 20) -> list[dict]:
    from gpulib.mlp import layers as mlp

    rows = []
    for rows_n, cols in ((4096, 10), (256, 32768)):
        Z = (np.random.default_rng(cols).standard_normal((rows_n, cols)) * 4).astype(np.float32)
        labels = np.zeros(rows_n, np.int32)
        want = ref.softmax(Z)
        Z_dev, labels_dev = cuda.to_device(Z), cuda.to_device(labels)
        P = poisoned(Z.shape)
        softmax_rows(Z_dev, out=P)
        tree_err = validate(P, want, name="softmax_rows").rel_err
        tree = benchmark(lambda: softmax_rows(Z_dev, out=P), repeat=repeat).median_ms
        # the thread-per-row kernel is the training step's softmax_xent_kernel: it also writes one
        # loss per row (4 bytes against the row's 4 * cols), into arrays allocated here, and its
        # labels are not read back, so both rows time one kernel each
        P_one, loss = poisoned(Z.shape), poisoned((rows_n,))
        mlp.softmax_cross_entropy(Z_dev, labels_dev, out=(P_one, loss))
        # one thread adds up 32768 terms in a row, each rounding: a looser bound than the tree's
        serial_err = validate(P_one, want, rtol=1e-4, name="softmax_xent (one thread per row)").rel_err
        one = benchmark(lambda: mlp.softmax_cross_entropy(Z_dev, labels_dev, out=(P_one, loss), check_labels=False),
                        repeat=repeat).median_ms
        rows.append(
            dict(
                rows=rows_n,
                cols=cols,
                tree_ms=tree,
                thread_per_row_ms=one,
                tree_rel_err=tree_err,
                thread_per_row_rel_err=serial_err,
            )
        )
    return rows


# ------------------------------------------------------------------ against PyTorch
PYTORCH_BATCH = 256


# the faster steps measure_pytorch times beside the default one: BookCNN's options for each
VARIANTS = {"staged": dict(reduction="staged", input_grad="flipped"),
            "fused": dict(reduction="staged", input_grad="flipped", fused=True)}


def torch_book_loss(F, X, y, W1, b1, W2, b2, Wf, bf):
    """BookCNN's loss in PyTorch (``F``: torch.nn.functional): conv, ReLU, conv, ReLU, 2x2 max
    pooling, the dense layer and the mean cross-entropy."""
    a1 = F.relu(F.conv2d(X, W1, b1, padding=1))
    a2 = F.relu(F.conv2d(a1, W2, b2, padding=1))
    return F.cross_entropy(F.linear(F.max_pool2d(a2, 2).flatten(1), Wf, bf), y)


def measure_pytorch(batch: int = PYTORCH_BATCH, repeat: int = 20, lr: float = 0.05, rounds: int = 3) -> dict:
    """One training step of the book's model (BookCNN, convolutions on the auto-tuner's picks)
    against the same model in PyTorch eager mode (cuDNN with cudnn.benchmark, fp32, TF32 off),
    from the same weights on the same batch. First the two steps' losses and gradients are
    compared, then each step's wall time is measured (median of ``repeat``): forward, backward,
    the SGD update and the loss copied to the host, as the book's training loop does. The steps are
    timed in turn ``rounds`` times; each headline time is the median of its rounds, and the rounds
    are kept, so the prose can say how much one run's rounds differ."""
    torch, F = measuring.torch_fp32_cudnn()
    model = BookCNN(channels=CHANNELS)
    X, y = _images(batch)
    X_dev, y_dev = cuda.to_device(X), cuda.to_device(y)
    gpu = torch.device("cuda")
    params = [torch.tensor(p, device=gpu, requires_grad=True) for p in model.host_params()]
    Xt, yt = torch.tensor(X, device=gpu), torch.tensor(y, device=gpu, dtype=torch.long)

    def torch_loss():
        return torch_book_loss(F, Xt, yt, *params)

    loss, grads = model.loss_and_grads(X_dev, y_dev)
    t_loss = torch_loss()
    t_loss.backward()
    def errors_vs_torch(grads, label: str) -> list[float]:  # each gradient against PyTorch's (ValueError if off)
        return [
            validate(
                g,
                p.grad.detach().cpu().numpy().astype(np.float64),
                scale=float(p.grad.abs().max()) or 1.0,
                rtol=1e-4,
                name=f"{label} {i} vs PyTorch",
            ).rel_err
            for i, (g, p) in enumerate(zip(grads, params))
        ]

    grad_errors = errors_vs_torch(grads, "grad")
    loss_diff = abs(loss - float(t_loss))

    torch_step = _torch_sgd_step(torch, params, torch_loss, lr)

    def gpulib_step():
        step_loss, step_grads = model.loss_and_grads(X_dev, y_dev)
        model.step(step_grads, lr)
        return step_loss

    def both_synchronized():  # Numba's and PyTorch's work both finished
        cuda.synchronize()
        torch.cuda.synchronize()

    # the same step recorded once and replayed (gpulib/playbook/replay.py), as launches and as one
    # CUDA graph; first three steps each from the same weights, which must end equal. The faster
    # variants are the same model with 16.6's faster backward ("staged": gpulib.cnn.conv2d_backward's
    # reduction="staged" and input_grad="flipped") and with the small kernels fused too ("fused",
    # gpulib/cnn/fused.py); their gradients are checked against PyTorch's too
    steps = {"eager": model, "replayed": BookCNN(channels=CHANNELS), "graph": BookCNN(channels=CHANNELS)}
    replayed = {"replayed": ReplayedStep(steps["replayed"], batch, lr),
                "graph": ReplayedStep(steps["graph"], batch, lr, graph=True)}
    for name, options in VARIANTS.items():
        for how, graph in (("replayed", False), ("graph", True)):
            steps[f"{name}_{how}"] = BookCNN(channels=CHANNELS, **options)
            replayed[f"{name}_{how}"] = ReplayedStep(steps[f"{name}_{how}"], batch, lr, graph=graph)
    start = model.host_params()
    for m in steps.values():
        for p, value in zip(m.params, start):
            p.copy_to_device(value)
    variant_grad_errors = {name: errors_vs_torch(steps[f"{name}_replayed"].loss_and_grads(X_dev, y_dev)[1], f"{name} grad")
                           for name in VARIANTS}
    for _ in range(3):
        gpulib_step()
        for run in replayed.values():
            run(X_dev, y_dev)
    eager_params = model.host_params()
    replay_diff = {
        name: max(float(np.abs(a - b).max()) for a, b in zip(eager_params, steps[name].host_params())) for name in replayed
    }
    rec = replayed["replayed"].recording
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeat):  # the replay's Python work alone: the GPU queue never runs dry
        rec.replay()
    python_us = (time.perf_counter() - t0) / repeat / len(rec.entries) * 1e6
    cuda.synchronize()

    # the step's GPU time: CUDA events around the graph's replay (a graph's kernels run back to back)
    graph = replayed["graph"].graph
    gpu_ms = benchmark(graph.replay, repeat=repeat, flush_l2=False).median_ms if graph is not None else None
    variant_gpu_ms = {name: (benchmark(replayed[f"{name}_graph"].graph.replay, repeat=repeat, flush_l2=False).median_ms
                             if replayed[f"{name}_graph"].graph is not None else None) for name in VARIANTS}

    # the steps timed in turn, ``rounds`` times over: the spread between rounds is the run's
    # own noise, the median of the rounds its result
    runs = {"gpulib": gpulib_step, "torch": torch_step}
    runs.update({name: (lambda run=run: run(X_dev, y_dev)) for name, run in replayed.items()})
    timed = [
        {name: median_wall_ms(run, repeat, warmup=3, synchronize=both_synchronized) for name, run in runs.items()}
        for _ in range(rounds)
    ]
    ms = {name: float(np.median([t[name] for t in timed])) for name in runs}
    # torch.compile's step after the rounds, so that its compiler's threads stay out of them
    compiled = _torch_compile_step(torch, F, params, Xt, yt, lr, repeat)
    return dict(
        batch=batch,
        channels=CHANNELS,
        gpulib_ms=ms["gpulib"],
        torch_ms=ms["torch"],
        ratio=ms["gpulib"] / ms["torch"],
        gpu_ms=gpu_ms,
        replayed_ms=ms["replayed"],
        graph_ms=ms["graph"],
        **{key: value for name in VARIANTS for key, value in (
            (f"{name}_gpu_ms", variant_gpu_ms[name]),
            (f"{name}_replayed_ms", ms[f"{name}_replayed"]),
            (f"{name}_graph_ms", ms[f"{name}_graph"]),
            (f"{name}_launches", len(replayed[f"{name}_replayed"].recording.entries)),
            (f"{name}_grad_rel_err", variant_grad_errors[name]))},
        rounds=[dict(t, **{f"{name}_ratio": t[name] / t["torch"] for name in replayed}) for t in timed],
        graph_built=replayed["graph"].graph is not None,
        graph_error=replayed["graph"].graph_error,
        launches=len(rec.entries),
        replay_python_us_per_launch=python_us,
        replay_max_abs_diff=replay_diff,
        step_timing=f"median over {rounds} rounds of the median of {repeat} steps' wall time, each step ended by "
        "synchronizing the GPU",
        grad_rel_err=grad_errors,
        loss_diff=loss_diff,
        torch=torch.__version__,
        torch_compile=compiled,
        algorithms=[p for p in model.algorithms],
    )


def _torch_sgd_step(torch, params, loss, lr: float):
    """PyTorch's training step as the book's loop takes it: gradients cleared, ``loss()``, its
    backward pass, the SGD update, and the loss read on the host."""
    def step():
        for p in params:
            p.grad = None
        step_loss = loss()
        step_loss.backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
        return step_loss.item()
    return step


def _torch_compile_step(torch, F, params, Xt, yt, lr: float, repeat: int) -> dict:
    """measure_pytorch's PyTorch step with its loss compiled by torch.compile, where it compiles on
    this machine (TorchInductor builds its GPU kernels with Triton): its median wall time, or why not."""
    try:
        compiled = torch.compile(lambda *args: torch_book_loss(F, *args))
        step = _torch_sgd_step(torch, params, lambda: compiled(Xt, yt, *params), lr)
        step()  # compiles
        return dict(ms=median_wall_ms(step, repeat, warmup=3, synchronize=torch.cuda.synchronize), note="")
    except Exception as err:  # noqa: BLE001  (any failure to compile is the row's result)
        return dict(ms=None, note=f"did not compile here: {type(err).__name__}: {str(err).splitlines()[0][:200]}")


PARTS = ("training", "breakdown", "limits", "memory", "playbook", "im2col", "cuda_c", "softmax")
# measured only when asked for (--part pytorch): it needs PyTorch besides the book's packages
EXTRA_PARTS = ("pytorch",)


def measure_part(part: str, repeat: int = 20) -> dict:
    """One part of ``measure`` alone (``benchmarks/book_model.py --part NAME --save``), carrying its
    own device and date, since the stored results around it may come from another run."""
    if part not in PARTS + EXTRA_PARTS:
        raise ValueError(f"unknown part {part!r}; choose one of {PARTS + EXTRA_PARTS}")
    results = measure(repeat=repeat, parts=(part,))
    if part in results.get("failed", {}):
        raise RuntimeError(f"{part}: {results['failed'][part]}")
    if isinstance(results[part], list):  # rows (softmax): each row carries the header
        return [dict(row, measured=measuring.header(repeat)) for row in results[part]]
    return dict(results[part], measured=measuring.header(repeat))


def measure(repeat: int = 20, progress=print, parts=PARTS) -> dict:
    measuring.require_gpu()
    results = dict(measuring.header(repeat))
    if "training" in parts:
        progress("training ...")
        results["training"] = measure_training(progress)
    if "breakdown" in parts:
        progress("breakdown ...")
        results["breakdown"] = measure_breakdown()
    for part, fn in (
        ("limits", measure_limits),
        ("memory", measure_memory),
        ("playbook", measure_playbook),
        ("im2col", measure_im2col),
        ("cuda_c", measure_cuda_c),
        ("softmax", measure_softmax),
        ("pytorch", measure_pytorch),
    ):
        if part in parts:
            progress(f"{part} ...")
            try:
                results[part] = fn()
            except Exception as err:  # keep the other parts; the failure is printed and stored
                progress(f"{part} FAILED: {type(err).__name__}: {err}")
                results.setdefault("failed", {})[part] = f"{type(err).__name__}: {err}"
    return results


def load(path=RESULTS) -> dict:
    return measuring.load(path)


def save(results: dict, path=RESULTS) -> None:
    measuring.save(results, path)


def table(results: dict) -> str:
    lines = [f"{results.get('device')} ({results.get('date')})"]
    for part, why in results.get("failed", {}).items():
        lines.append(f"FAILED {part}: {why}")
    t = results.get("training")
    if t:
        lines.append(
            f"training: picks {[p['pick'] for p in t['picks'].values()]}, {t['steps']} steps in "
            f"{t['seconds']:.1f} s, test accuracy {t['test_acc'][-1]:.1%}, "
            f"grad rel err max {max(t['grad_rel_err']):.1e}"
        )
    for bd in results.get("breakdown", []):
        lines.append(
            f"breakdown, batch {bd['batch']}, {bd['algorithms']}, {bd['reduction']}: "
            f"GPU {bd['step_gpu_ms']:.3f} ms, wall {bd['step_wall_ms']:.3f} ms"
        )
        for o in bd["ops"]:
            lines.append(f"  {o['op']:<20} {o['ms']:.4f} ms (wall {o['wall_ms']:.3f})  {', '.join(o['kernels'])}")
    lim = results.get("limits")
    if lim:
        lines.append(
            "limits (measured, TFLOP/s or TB/s): " + ", ".join(f"{k} {v / 1e12:.1f}" for k, v in lim["measured"].items())
        )
    for r in results.get("memory", []):
        lines.append(
            f"memory {r['config']:<30} N={r['batch']:>6}: estimate {r['estimate'] / 2**20:8.1f} MiB, "
            f"live {r['measured_live'] / 2**20:8.1f}, as run {r['measured_as_run'] / 2**20:8.1f}"
        )
    pb = results.get("playbook")
    if pb:
        lines.append(f"defaults: {pb['defaults']}")
        for key in ("tf32_and_benchmark", "layout", "channels", "launch"):
            for r in pb[key]:
                lines.append(f"  {key}: {r}")
    im = results.get("im2col")
    if im:
        for r in im["rows"]:
            lines.append(f"im2col {r['name']:<40} {r['ms']:.3f} ms {r['gbps']:.0f} GB/s")
    cc = results.get("cuda_c")
    if cc:
        for r in cc["rows"]:
            lines.append(f"cuda_c {r['name']:<40} {r['ms']:.3f} ms rel err {r['rel_err']:.1e}")
    for r in results.get("softmax", []):
        lines.append(
            f"softmax {r['rows']}x{r['cols']}: tree {r['tree_ms']:.4f} ms, thread per row {r['thread_per_row_ms']:.4f} ms"
        )
    pt = results.get("pytorch")
    if pt:
        lines.append(
            f"one training step, batch {pt['batch']}: gpulib {pt['gpulib_ms']:.3f} ms, PyTorch {pt['torch']} "
            f"{pt['torch_ms']:.3f} ms ({pt['ratio']:.2f}x PyTorch's time); gradients within "
            f"{max(pt['grad_rel_err']):.1e}, loss within {pt['loss_diff']:.1e}"
        )
        if "replayed_ms" in pt:
            if pt.get("gpu_ms"):
                lines.append(f"  the step's kernels take {pt['gpu_ms']:.3f} ms of GPU time (events around the graph)")
            lines.append(
                f"  recorded once, replayed: {pt['replayed_ms']:.3f} ms ({pt['replayed_ms'] / pt['torch_ms']:.2f}x), "
                f"as one CUDA graph: {pt['graph_ms']:.3f} ms ({pt['graph_ms'] / pt['torch_ms']:.2f}x, built: "
                f"{pt['graph_built']}); {pt['launches']} launches, "
                f"{pt['replay_python_us_per_launch']:.1f} us of Python each; parameters after 3 steps "
                f"differ from eager by {pt['replay_max_abs_diff']}"
            )
        for name in VARIANTS:
            if f"{name}_replayed_ms" in pt:
                gpu = pt[f"{name}_gpu_ms"]
                lines.append(
                    f"  {name}: replayed {pt[f'{name}_replayed_ms']:.3f} ms "
                    f"({pt[f'{name}_replayed_ms'] / pt['torch_ms']:.2f}x), graph {pt[f'{name}_graph_ms']:.3f} ms "
                    f"({pt[f'{name}_graph_ms'] / pt['torch_ms']:.2f}x), kernels "
                    + (f"{gpu:.3f} ms" if gpu else "-") + f", {pt[f'{name}_launches']} launches, gradients within "
                    f"{max(pt[f'{name}_grad_rel_err']):.1e} of PyTorch's"
                )
        for i, t in enumerate(pt.get("rounds", []), 1):
            lines.append(f"  round {i}: gpulib {t['gpulib']:.3f}, PyTorch {t['torch']:.3f} ms; " + ", ".join(
                f"{name} {t[name]:.3f} ({t[f'{name}_ratio']:.2f}x)" for name in t
                if name not in ("gpulib", "torch") and not name.endswith("_ratio")))
    return "\n".join(lines)
