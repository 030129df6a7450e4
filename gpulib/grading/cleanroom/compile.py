"""Kernels that must be kernels: each one compiled to PTX for compute capability 9.0, on any machine.

``python -m gpulib.grading.cleanroom.compile`` (in a sandbox, ``GPULIB_BACKEND=ptx``) loads the
solutions as the worker does, but with Numba's real CUDA target instead of the simulator, and
answers ``ptx`` requests: the kernel compiled by NVVM (from the ``nvidia-nvvm`` wheel; no GPU,
no driver) for the argument types of the launch. A kernel that calls NumPy, Python objects or
anything else no GPU can run fails here with Numba's message, and earns nothing, even where the
simulator would have run it. The answer lists the functions the PTX calls (the WMMA loads a
tensor-core exercise must take from shared memory, say).
"""

from __future__ import annotations

import os
import re
import sys

CC = (9, 0)


def prepare_numba() -> None:
    """Numba's CUDA target without a driver: NVVM only (no NVRTC), the architecture given."""
    from gpulib.launch import compile_only

    compile_only(CC)


def numba_type(spec):
    import numpy as np
    from numba import from_dtype, types

    if spec[0] == "array":
        _, dtype, ndim, layout = spec
        return types.Array(from_dtype(np.dtype(dtype)), int(ndim), layout)
    return {"bool": types.boolean, "int64": types.int64, "float64": types.float64}[spec[1]]


def _first_lines(text: str, n: int = 12) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[:n])


def main() -> None:
    import gpulib.env  # noqa: F401  (first: with GPULIB_BACKEND=ptx it selects the real CUDA target)

    prepare_numba()
    from gpulib.grading.cleanroom.worker import Worker, start_restricted

    start_restricted()

    class Compiler(Worker):
        def ptx(self, handle, types, what):
            from numba import cuda

            from gpulib import _backend
            from gpulib.grading.cleanroom.worker import GraderError
            from gpulib.grading.core import Mistake

            found, why = _backend.nvvm_found()
            if not found:
                raise GraderError(f"{why}: the clean room compiles every kernel for compute capability 9.0 with NVVM; "
                                  f"on a machine without CUDA install it with pip install 'gpulib[grader-cpu]' "
                                  f"(the nvidia-nvvm wheel)")
            kernel = self.objects[handle]
            fn = getattr(kernel, "py_func", None)
            if fn is None:
                raise Mistake("not_a_kernel", f"{what}: @cuda.jit 커널이 아니다")
            signature = tuple(numba_type(t) for t in types)
            try:
                ptx, _ = cuda.compile_ptx(fn, signature, cc=CC)
            except Exception as exc:  # noqa: BLE001  (Numba's typing or lowering error: the student's kernel)
                raise Mistake("not_compilable", f"{what}: 이 커널은 GPU(compute capability 9.0)용으로 컴파일되지 않는다. "
                                                f"시뮬레이터는 파이썬으로 돌리므로 NumPy 호출이나 파이썬 객체도 받아 주지만, "
                                                f"GPU에서는 돌지 않는 코드라 점수가 없다. Numba의 말:\n"
                                                f"{type(exc).__name__}: {_first_lines(str(exc))}") from None
            calls = sorted(set(re.findall(r"\.extern \.func\s+(?:\([^)]*\)\s*)?(\w+)", ptx)))
            return {"calls": calls}

    answers = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    Compiler().serve(0, answers)


if __name__ == "__main__":
    main()
