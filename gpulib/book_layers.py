"""16.3-16.5: the layers the benchmarks measure, their random inputs and their arithmetic."""

from __future__ import annotations

import numpy as np

from gpulib.shapes import output_shape as shapes_output_shape

# 16.3's layer: a middle layer of a ResNet-like network, measured in 16.3, 16.4 and 16.5
LAYER = dict(N=32, C=64, H=56, W=56, K=64, R=3, S=3, padding=1, stride=1)
# 16.5's auto-tuner layers: a first layer on RGB, the 16.3 layer, a 1x1 layer, a 5x5 layer
LAYERS = {
    "first layer, C=3, 7x7 stride 2": dict(N=32, C=3, H=224, W=224, K=64, R=7, S=7, padding=3, stride=2),
    "middle 3x3 (16.3)": dict(LAYER),
    "1x1": dict(N=32, C=256, H=28, W=28, K=128, R=1, S=1, padding=0, stride=1),
    "5x5": dict(N=32, C=32, H=28, W=28, K=64, R=5, S=5, padding=2, stride=1),
}


KEYS = ("N", "C", "H", "W", "K", "R", "S", "padding", "stride")


def check_layer(layer) -> dict:
    """A layer dict with every key of KEYS, of valid sizes (a ValueError naming ``layer`` otherwise)."""
    if not isinstance(layer, dict) or any(k not in layer for k in KEYS):
        raise ValueError(f"layer must be a dict with the keys {KEYS}, not {layer!r:.80}")
    try:
        shapes_output_shape((layer["N"], layer["C"], layer["H"], layer["W"]), (layer["K"], layer["C"], layer["R"],
                                                                              layer["S"]), layer["padding"], layer["stride"])
    except ValueError as err:
        raise ValueError(f"layer: {err}") from None
    return layer


def shapes(layer: dict) -> tuple[tuple, tuple]:
    """(X's shape [N, C, H, W], W's shape [K, C, R, S])."""
    L = check_layer(layer)
    return (L["N"], L["C"], L["H"], L["W"]), (L["K"], L["C"], L["R"], L["S"])


def output_shape(layer: dict) -> tuple:
    """Y's shape [N, K, H', W']."""
    return shapes_output_shape(*shapes(layer), layer["padding"], layer["stride"])


def flop(layer: dict = LAYER) -> float:
    """2·N·K·H'·W'·C·R·S: one multiply and one add per filter tap."""
    N, K, Ho, Wo = output_shape(layer)
    return 2.0 * N * K * Ho * Wo * layer["C"] * layer["R"] * layer["S"]


def describe(layer: dict = LAYER) -> str:
    """A short title: "conv 3x3, N=32 C=64 56x56 K=64"."""
    L = check_layer(layer)
    return f"conv {L['R']}x{L['S']}, N={L['N']} C={L['C']} {L['H']}x{L['W']} K={L['K']}"


def layer_inputs(layer: dict = LAYER, seed: int = 0):
    """Random X, W (scaled by 1/sqrt(C·R·S)) and b for a layer, float32."""
    X_shape, W_shape = shapes(layer)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal(X_shape).astype(np.float32)
    W = (rng.standard_normal(W_shape) / np.sqrt(np.prod(W_shape[1:]))).astype(np.float32)
    b = rng.standard_normal(W_shape[0]).astype(np.float32)
    return X, W, b
