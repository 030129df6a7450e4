"""The checks of the classroom assignments (``assignments/``): one module per section.

    core.py          launches that cannot hang, poisoned outputs, comparisons that name the
                     element, structural checks on the tracer's record; ``Mistake``
    mlp.py           16.1  dense forward and backward, stable softmax cross-entropy
    cnn.py           16.2  max pooling forward and backward, conv input gradient at stride 2,
                           a gradient check that skips ReLU kinks
    direct_conv.py   16.3  direct conv, tiled conv (halo, barriers), channels per block
    im2col.py        16.4  im2col, cublasSgemm's argument order, tiled SGEMM, implicit GEMM, col2im
    cudnn.py         16.5  Winograd transforms, auto-tuner, loss scaler, WMMA with any K
    cleanroom/       the grader: the same checks run in a process the student's code never
                     ran in, on proxies of the solutions (what nbgrader's autograde records)
"""
