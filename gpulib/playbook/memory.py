"""16.6: how much device memory one training step of BookCNN needs, estimated before it runs.

The estimate follows the model's code step by step (gpulib/cnn/book_model.py): what each
operation allocates and keeps, what it holds only while it runs (a conv algorithm's
workspace, from gpulib/conv/algorithms.py), and the peak of the sum. Every tensor is float32
(argmax and labels int32), so a tensor costs 4 bytes per element.

    estimate(batch, channels=(C1, C2), algorithms=(a1, a2), inplace_relu=False)
        -> Estimate: the peak, the step at which it occurs, and the bytes by kind
           (weights, gradients, activations kept for the backward pass, backward tensors,
           workspace)

``savings`` lists what a change of the model or its run would save, each as an estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpulib.arrays import require_bool, require_int
from gpulib.conv.algorithms import ALGORITHMS
from gpulib.shapes import require_shape

F32 = 4  # bytes of a float32 or an int32


@dataclass
class Estimate:
    batch: int
    peak_bytes: int
    peak_at: str
    by_kind: dict = field(default_factory=dict)  # kind -> bytes alive at the peak
    timeline: list = field(default_factory=list)  # (step, bytes alive, workspace bytes)


def _numel(*shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def estimate(batch: int, channels=(8, 16), algorithms=("direct", "direct"), inplace_relu: bool = False,
             image_shape=(1, 8, 8), classes: int = 10) -> Estimate:
    """The peak device memory of ``BookCNN.loss_and_grads`` on a batch, above what was in use before
    the model existed (its parameters included). ``algorithms``: registry names, not "auto"."""
    batch, classes = require_int(batch, "batch", 1), require_int(classes, "classes", 2)
    channels = require_shape(channels, "channels", "[C1, C2]")
    C, H, W = require_shape(image_shape, "image_shape", "[C, H, W]")
    if H % 2 or W % 2:
        raise ValueError(f"image_shape: height and width must be even for the 2x2 pooling, not {H}x{W}")
    require_bool(inplace_relu, "inplace_relu")
    if not isinstance(algorithms, (tuple, list)) or len(algorithms) != 2:
        raise ValueError(f"algorithms must be two names, one per conv layer, not {algorithms!r}")
    for a in algorithms:
        if a not in ALGORITHMS:
            raise ValueError(f"algorithms must name entries of gpulib.conv.algorithms.ALGORITHMS (resolve 'auto' "
                             f"first), not {a!r}")
    N, (C1, C2), Q = batch, channels, classes
    features = C2 * (H // 2) * (W // 2)
    x1, w1 = (N, C, H, W), (C1, C, 3, 3)
    x2, w2 = (N, C1, H, W), (C2, C1, 3, 3)
    params = F32 * (_numel(*w1) + C1 + _numel(*w2) + C2 + Q * features + Q)

    alive: dict[str, tuple[str, int]] = {}  # tensor -> (kind, bytes)
    timeline = []
    peak = (-1, "", {})

    def step(name, new=(), workspace=0, free=()):
        nonlocal peak
        for tensor in free:
            alive.pop(tensor)
        for tensor, kind, nbytes in new:
            alive[tensor] = (kind, nbytes)
        total = sum(b for _, b in alive.values())
        timeline.append((name, total, workspace))
        if total + workspace > peak[0]:
            kinds: dict[str, int] = {}
            for kind, nbytes in alive.values():
                kinds[kind] = kinds.get(kind, 0) + nbytes
            if workspace:
                kinds["workspace"] = workspace
            peak = (total + workspace, name, kinds)

    act = lambda *shape: F32 * _numel(*shape)  # noqa: E731
    fwd_ws = [ALGORITHMS[a].workspace(x, w, 1, 1) for a, x, w in zip(algorithms, (x1, x2), (w1, w2))]
    bwd_ws = [(ALGORITHMS[a].backward_workspace or (lambda *args: 0))(x, w, 1, 1, need)
              for a, x, w, need in zip(algorithms, (x1, x2), (w1, w2), (False, True))]
    step("model and batch", [("params", "weights", params), ("X", "activations", act(*x1)),
                             ("labels", "activations", F32 * N)])
    step("conv1 forward", [("conv1", "activations", act(N, C1, H, W))], fwd_ws[0])
    step("relu1", [] if inplace_relu else [("relu1", "activations", act(N, C1, H, W))])
    step("conv2 forward", [("conv2", "activations", act(N, C2, H, W))], fwd_ws[1])
    step("relu2", [] if inplace_relu else [("relu2", "activations", act(N, C2, H, W))])
    pooled = act(N, C2, H // 2, W // 2)
    step("max pool", [("pool", "activations", pooled), ("argmax", "activations", pooled)])
    step("fc forward", [("logits", "activations", act(N, Q))])
    step("softmax + loss", [("P", "activations", act(N, Q)), ("loss", "activations", act(N))])
    step("softmax backward", [("dZ", "backward", act(N, Q))])
    fc_grads = F32 * (Q * features + Q)
    step("fc backward", [("d_flat", "backward", act(N, features)), ("fc grads", "gradients", fc_grads)],
         act(N, Q))  # the identity activation's dZ copy, freed on return
    step("max pool backward", [("d_relu2", "backward", act(N, C2, H, W))])
    step("relu2 backward", [("d_conv2", "backward", act(N, C2, H, W))])
    step("conv2 backward", [("d_relu1", "backward", act(N, C1, H, W)),
                            ("conv2 grads", "gradients", F32 * (_numel(*w2) + C2))], bwd_ws[1])
    step("relu1 backward", [("d_conv1", "backward", act(N, C1, H, W))])
    step("conv1 backward", [("conv1 grads", "gradients", F32 * (_numel(*w1) + C1))], bwd_ws[0])
    return Estimate(batch, peak[0], peak[1], peak[2], timeline)


def savings(batch: int, channels=(8, 16), algorithms=("direct", "direct"), **kw) -> list[tuple[str, int, int]]:
    """(change, estimated peak after it, bytes saved) for the usual remedies of an out-of-memory error."""
    base = estimate(batch, channels, algorithms, **kw).peak_bytes  # (checks every argument)
    rows = []

    def add(change, peak):
        rows.append((change, peak, base - peak))

    add("half the batch", estimate(max(1, batch // 2), channels, algorithms, **kw).peak_bytes)
    add("in-place ReLU (keep one tensor per layer)", estimate(batch, channels, algorithms,
                                                              **{**kw, "inplace_relu": True}).peak_bytes)
    add("implicit precomp GEMM instead (no X_col)",
        estimate(batch, channels, ("implicit_precomp_gemm",) * 2, **kw).peak_bytes)
    add("direct convolution instead (no workspace)", estimate(batch, channels, ("direct",) * 2, **kw).peak_bytes)
    return rows
