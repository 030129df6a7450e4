"""Measuring: how fast the book's kernels run next to the library a user would pick instead.

    layers.py            the layers every benchmark uses (the 16.3 layer, the auto-tuner's four),
                         their inputs and FLOP counts
    measure.py           the measuring library: float64 and cuDNN references, ``checked_row``
                         (check an output against float64, then time it), the one ratio
                         (``vs_library``: the library's time / ours, higher is better), results
                         with their device and date, load / save
    conv_direct.py       16.3: the direct convolution ladder against cuDNN
    conv_gemm.py         16.4: GEMM against cuBLAS, im2col and implicit GEMM against cuDNN, memory
    cudnn_tensorcore.py  16.5: tensor cores, the auto-tuner, cuDNN's plans, precision
    cudnn_engines.py     16.5: cuDNN's own execution plans through the cuDNN frontend
    summary.py           16.6: the model trained and profiled, the GPU's limits, memory estimate
                         against the measured peak, the debugging playbook, im2col, CUDA C

Each benchmark module has ``measure`` (GPU only), ``table``, plots, ``load`` / ``save`` and
``RESULTS``, and a script of the same name in benchmarks/ runs it. Tests never time anything.
"""
