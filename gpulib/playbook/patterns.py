"""16.6: which pattern of the book each kernel uses, and the section that teaches it.

``PATTERNS[kernel name]`` = (patterns, section). The profiler labels every launch with it, so a
training step's time breakdown also reads as a map of the book.
"""

from __future__ import annotations

ELEMENTWISE = "elementwise, coalesced"
REDUCTION = "reduction"
GEMM_NAIVE = "GEMM (one thread per output)"
GEMM_TILED = "GEMM, shared-memory tiling, register blocking"

PATTERNS: dict[str, tuple[str, str]] = {
    # 16.1: the MLP's kernels, reused for the FC layer and the loss
    "dense_forward_kernel": (GEMM_NAIVE, "16.1"),
    "input_grad_kernel": (GEMM_NAIVE, "16.1"),
    "weight_grad_kernel": (GEMM_NAIVE + ", a reduction over the batch", "16.1"),
    "bias_grad_kernel": (REDUCTION + " over the batch, one thread per column", "16.1"),
    "activation_backward_kernel": (ELEMENTWISE, "16.1"),
    "softmax_xent_kernel": (REDUCTION + " (max and sum of a row, one thread per row)", "16.1"),
    "softmax_xent_backward_kernel": (ELEMENTWISE + " (+ a row sum)", "16.1"),
    "sgd_update_kernel": (ELEMENTWISE, "16.1"),
    # 16.2: ReLU, pooling, the direct backward convolution
    "relu_kernel": (ELEMENTWISE, "16.2"),
    "relu_backward_kernel": (ELEMENTWISE, "16.2"),
    "max_pool_kernel": ("window (stencil), one thread per output", "16.2"),
    "max_pool_backward_kernel": ("window (stencil), a gather, no atomics", "16.2"),
    "conv2d_input_grad_kernel": ("transposed convolution as a gather", "16.2"),
    "conv2d_weight_grad_kernel": (REDUCTION + " over N·H'·W' per weight", "16.2"),
    "conv2d_bias_grad_kernel": (REDUCTION + " over N·H'·W' per channel", "16.2"),
    # 16.3: direct convolution
    "conv2d_v1_kernel": ("direct convolution, one thread per output", "16.3"),
    "conv2d_v2": ("direct convolution, shared-memory tile with halo, KB channels per block", "16.3"),
    # 16.4: im2col, GEMM, implicit GEMM
    "im2col_kernel": ("im2col, coalesced writes (index arithmetic)", "16.4"),
    "im2col_specialized_kernel": ("im2col, coalesced writes, sizes fixed at compile time", "16.4"),
    "im2col_unsigned_kernel": ("im2col, coalesced writes, sizes fixed, unsigned 32-bit indices", "16.4"),
    "col2im_kernel": ("col2im as a gather, no atomics", "16.4"),
    "nchw_to_cols_kernel": ("layout change (transpose)", "16.4"),
    "cols_to_nchw_kernel": ("layout change (transpose) + bias", "16.4"),
    "gemm_v1_kernel": (GEMM_NAIVE, "16.4"),
    "gemm_v2_kernel": ("GEMM, shared-memory tiling", "16.4"),
    "gemm_v3": (GEMM_TILED, "16.4"),
    "gemm_v4": (GEMM_TILED + ", two shared buffers", "16.4"),
    "gemm_v5": (GEMM_TILED + ", 128-bit shared loads, batched", "16.4"),
    "cuBLAS sgemm": ("GEMM (the library: cuBLAS)", "16.4"),
    "numpy matmul": ("GEMM (the library: NumPy on the CPU, in place of cuBLAS)", "16.4"),
    "implicit_gemm": ("implicit GEMM, shared-memory tiling, no X_col", "16.4"),
    # 16.5: FFT, Winograd, tensor cores
    "spectral_product_kernel": ("FFT convolution: elementwise complex products + reduction over C", "16.5"),
    "filter_transform_kernel": ("Winograd transform", "16.5"),
    "input_transform_kernel": ("Winograd transform", "16.5"),
    "products_kernel": ("Winograd: batched small GEMMs", "16.5"),
    "output_transform_kernel": ("Winograd transform", "16.5"),
    "winograd_fused_kernel": ("Winograd, fused in one kernel", "16.5"),
    "filter_transform_f4_kernel": ("Winograd F(4x4) transform", "16.5"),
    "input_transform_f4_kernel": ("Winograd F(4x4) transform", "16.5"),
    "output_transform_f4_kernel": ("Winograd F(4x4) transform", "16.5"),
    "tc_conv_kernel": ("tensor cores (WMMA), implicit GEMM", "16.5"),
    "tc_conv_nhwc_kernel": ("tensor cores (WMMA), NHWC, asynchronous copies", "16.5"),
    "to_fp16_kernel": ("elementwise conversion to fp16", "16.5"),
    "nchw_to_nhwc16_kernel": ("layout change NCHW to NHWC, fp16, channels padded", "16.5"),
    "filters_to_rsck16_kernel": ("layout change of the filters to [R·S·C, K], fp16, padded", "16.5"),
    "bias_rows_kernel": ("bias repeated in 16 rows (accumulators' start)", "16.5"),
    "nhwc_rows_to_nchw_kernel": ("layout change NHWC rows to NCHW", "16.5"),
    # 16.6
    "weight_grad_tree_kernel": (REDUCTION + " (shared-memory tree, one block per weight)", "16.6"),
    "bias_grad_tree_kernel": (REDUCTION + " (shared-memory tree, one block per channel)", "16.6"),
    "weight_grad_staged_kernel": (REDUCTION + " (each image staged in shared memory, a row of partial sums per block)",
                                  "16.6"),
    "sum_rows_kernel": (REDUCTION + " (the blocks' partial sums added, one thread per sum)", "16.6"),
    "flip_filters_kernel": ("layout change (filters turned 180°, channels swapped: dX as a forward convolution)",
                            "16.6"),
    "relu_max_pool_kernel": ("fused: ReLU and the pooling window in one pass", "16.6"),
    "dense_softmax_xent_kernel": ("fused: FC logits (a block per sample), softmax, loss and its gradient", "16.6"),
    "dense_weight_bias_grad_kernel": ("fused: " + REDUCTION + " over the batch, dW and db in one launch", "16.6"),
    "dense_pool_input_grad_kernel": ("fused: FC input gradient, pooling and ReLU backward as one gather", "16.6"),
    "sgd_update_six_kernel": ("fused: " + ELEMENTWISE + ", every parameter in one launch", "16.6"),
    "spin_kernel": ("the profiler's wait (not part of the model)", "16.6"),
    "softmax_rows_kernel": (REDUCTION + " (shared-memory tree, one block per row)", "16.6"),
}


def pattern_of(kernel: str) -> tuple[str, str]:
    """(patterns, section) of a kernel by its name; ("?", "") for one not in the table."""
    if not isinstance(kernel, str):
        raise ValueError(f"kernel must be a kernel's name (str), not {type(kernel).__name__}")
    return PATTERNS.get(kernel, ("?", ""))
