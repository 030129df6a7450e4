"""16.6: the whole book in one model, and the tools of the debugging playbook.

    model.py     BookCNN: conv → ReLU → conv → ReLU → max pool → FC → softmax, forward and
                 backward on gpulib kernels only, each conv layer on the auto-tuner's pick
    profile.py   Profiler: every kernel launch of a training step, timed with CUDA events on a
                 GPU (counted on the simulator), grouped by the model's operations, and the
                 device memory in use sampled after each launch
    patterns.py  which pattern of the book each kernel uses (tiling, coalescing, reduction, ...)
    replay.py    a training step recorded once and replayed (launches without Python's work per
                 launch), or built into one CUDA graph
    memory.py    a memory estimator: weights, activations kept for the backward pass, gradients
                 and each conv algorithm's workspace, step by step
    roofline.py  the GPU's limits (datasheet and measured) and a kernel's place under them
    softmax.py   softmax with its max and sum as shared-memory tree reductions, one block per row
"""
