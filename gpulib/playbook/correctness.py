"""16.6: the playbook's correctness tools: NVIDIA's compute-sanitizer on planted bugs, where an
asynchronous error surfaces with and without CUDA_LAUNCH_BLOCKING, Nsight Systems on a
launch-bound loop, PyTorch's memory summary after an out-of-memory error, and a NaN hunt.

    first_nonfinite(named)      the first array (in order) holding a NaN or an infinity
    PROGRAMS                    the planted bugs and probes, each a small Python program
    run(name)                   run one program under its tool (GPU only): the tool's report

Each program runs in a child process: an illegal address ruins the CUDA context of the process
that made it, and the tools (compute-sanitizer, nsys) wrap a whole process. What must stay true:
every planted program has exactly one bug, and the report shown is the tool's own text.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

from gpulib.arrays import require_int
from gpulib.env import on_gpu

_HEAD = "import gpulib\nimport numpy as np\nfrom numba import cuda, float32\n"

PROGRAMS = {
    # name: (tool, what the bug is, the program)
    "memcheck": ("memcheck", "an off-by-one bounds check reads X and writes Y past their ends", _HEAD + textwrap.dedent("""
        @cuda.jit
        def scale(X, Y):
            i = cuda.grid(1)
            if i <= X.shape[0]:          # the bug: <= instead of <
                Y[i] = 2.0 * X[i]

        X = cuda.to_device(np.ones(1000, np.float32))
        Y = cuda.device_array(1000, np.float32)
        scale[4, 256](X, Y)
        cuda.synchronize()
        print("finished; Y[:3] =", Y.copy_to_host()[:3])
        """)),
    "racecheck": ("racecheck", "a shared-memory reversal without the barrier between its write and its read",
                  _HEAD + textwrap.dedent("""
        @cuda.jit
        def reverse(a):
            s = cuda.shared.array(256, float32)
            t = cuda.threadIdx.x
            s[t] = a[t]
            # the bug: cuda.syncthreads() is missing here
            a[t] = s[255 - t]

        a = cuda.to_device(np.arange(256, dtype=np.float32))
        reverse[1, 256](a)
        cuda.synchronize()
        print("finished; a[:3] =", a.copy_to_host()[:3])
        """)),
    "synccheck": ("synccheck", "a barrier reached by half the threads of each warp",
                  _HEAD + textwrap.dedent("""
        @cuda.jit
        def halves(a):
            t = cuda.threadIdx.x
            if t % 2 == 0:
                cuda.syncthreads()       # the bug: only the even threads reach the barrier
            a[t] += 1.0

        a = cuda.to_device(np.zeros(64, np.float32))
        halves[1, 64](a)
        cuda.synchronize()
        print("finished")
        """)),
    "launch_blocking": ("", "an illegal address, then a correct kernel, then a synchronize: where does the error appear?",
                        _HEAD + textwrap.dedent("""
        import traceback

        @cuda.jit
        def wild(Y):
            Y[cuda.grid(1) + (1 << 28)] = 1.0   # the bug: a gigabyte past the array

        @cuda.jit
        def fine(Y):
            Y[cuda.grid(1)] = 2.0

        Y = cuda.device_array(256, np.float32)
        steps = ["launch wild (line A)", "launch fine (line B)", "synchronize (line C)"]
        try:
            wild[1, 256](Y)                      # line A
            fine[1, 256](Y)                      # line B
            cuda.synchronize()                   # line C
            print("no error seen")
        except Exception as e:
            line = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == __file__][-1].line
            print(f"the error appeared at: {line.strip()}")
            print(f"  {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        """)),
    "nsys": ("nsys", "a loop of 2000 tiny kernels: is the step launch-bound?", _HEAD + textwrap.dedent("""
        @cuda.jit
        def add_one(a):
            i = cuda.grid(1)
            if i < a.shape[0]:
                a[i] += 1.0

        a = cuda.to_device(np.zeros(4096, np.float32))
        for _ in range(50):
            add_one[16, 256](a)          # warm-up and compilation
        cuda.synchronize()
        for _ in range(2000):
            add_one[16, 256](a)
        cuda.synchronize()
        print("finished", a.copy_to_host()[0])
        """)),
    "memory_summary": ("", "an allocation larger than the GPU, and what torch.cuda.memory_summary says then",
                       textwrap.dedent("""
        import torch

        kept = [torch.empty(256 * 2**20, dtype=torch.float32, device="cuda") for _ in range(4)]  # 4 GiB held
        try:
            too_big = torch.empty(2**40, dtype=torch.uint8, device="cuda")                      # 1 TiB
        except torch.OutOfMemoryError as e:
            print("torch.OutOfMemoryError:", str(e).splitlines()[0][:200])
        summary = torch.cuda.memory_summary(abbreviated=True).splitlines()
        print("\\n".join(line for line in summary if line.strip())[:2400])
        """)),
}


TOOLS = ("memcheck", "racecheck", "synccheck", "nsys")


def tool_path(tool: str) -> str | None:
    """Where the tool's executable is (the PATH, then the CUDA toolkit's folders), or None."""
    if tool not in TOOLS:
        raise ValueError(f"tool must be one of {TOOLS}, not {tool!r}")
    name = "compute-sanitizer" if tool in ("memcheck", "racecheck", "synccheck") else tool
    found = shutil.which(name)
    folders = ("/usr/local/cuda*/bin", "/usr/local/cuda*/compute-sanitizer", "/usr/local/cuda*/nsight-systems-*/bin",
               "/opt/nvidia/nsight-systems/*/bin", "/opt/nvidia/nsight-systems/bin",
               "/opt/nvidia/nsight-compute/*/host/target-linux-x64")  # Nsight Compute carries an nsys
    for pattern in folders:
        for folder in sorted(glob.glob(pattern), reverse=True):  # the newest version first
            if found is None and Path(folder, name).exists():
                found = str(Path(folder, name))
    return found


def _child(program: str, env: dict, prefix: list[str], timeout: int) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "planted.py"
        path.write_text(program)
        done = subprocess.run(prefix + [sys.executable, str(path)], capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=folder)
        text = (done.stdout + done.stderr).replace(str(path), "planted.py").replace(folder + "/", "")
        return re.sub(r'"/[^"]*/site-packages/', '".../site-packages/', text)  # where this machine keeps its packages


def _trim(report: str, keep: int = 40) -> str:
    """The report without the child's warnings and blank lines, at most ``keep`` lines; a cut
    report keeps its last line (the tool's summary: how many errors in all)."""
    lines = [line.rstrip() for line in report.splitlines()
             if line.strip() and line.strip() != "=========" and "NumbaPerformanceWarning" not in line]
    if len(lines) <= keep:
        return "\n".join(lines)
    return "\n".join(lines[:keep - 1] + [f"... ({len(lines) - keep} more lines)", lines[-1]])


# the report shows the kernel's errors: not the CUDA API calls that fail on purpose when a
# library probes the driver (cuGetProcAddress), nor the host stack of each error
SANITIZER_OPTIONS = ["--report-api-errors", "no", "--show-backtrace", "no"]


def run(name: str, timeout: int = 240) -> dict:
    """Run program ``name`` of PROGRAMS under its tool on the GPU and return what it printed:
    {name, tool, bug, command, report} (``report`` of each variant for launch_blocking)."""
    if name not in PROGRAMS:
        raise ValueError(f"name must be one of {sorted(PROGRAMS)}, not {name!r}")
    timeout = require_int(timeout, "timeout", 1)
    if not on_gpu():
        raise RuntimeError("the correctness tools watch a real GPU: on the simulator the stored reports are shown")
    tool, bug, program = PROGRAMS[name]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    env.pop("CUDA_LAUNCH_BLOCKING", None)
    out = dict(name=name, tool=tool or "none", bug=bug)
    if name == "launch_blocking":
        out["command"] = "python planted.py; CUDA_LAUNCH_BLOCKING=1 python planted.py"
        out["report"] = _trim(_child(program, env, [], timeout))
        out["report_blocking"] = _trim(_child(program, dict(env, CUDA_LAUNCH_BLOCKING="1"), [], timeout))
        return out
    if name == "memory_summary":
        out["command"] = "python planted.py"
        out["report"] = _trim(_child(program, env, [], timeout), 60)
        return out
    exe = tool_path(tool)
    if exe is None:
        out.update(command="", report=f"{tool} is not installed on this machine")
        return out
    if tool == "nsys":
        with tempfile.TemporaryDirectory() as folder:
            rep = str(Path(folder) / "step")
            prefix = [exe, "profile", "--trace=cuda", "--sample=none", "--cpuctxsw=none", "-o", rep, "--force-overwrite=true"]
            _child(program, env, prefix, timeout)
            stats = subprocess.run([exe, "stats", "--report", "cuda_api_sum,cuda_gpu_kern_sum", "--format", "table",
                                    rep + ".nsys-rep"], capture_output=True, text=True, timeout=timeout)
            out["command"] = ("nsys profile --trace=cuda -o step python planted.py; "
                              "nsys stats --report cuda_api_sum,cuda_gpu_kern_sum step.nsys-rep")
            text = "\n".join(line for line in (stats.stdout + stats.stderr).splitlines()
                             if not line.startswith(("Generating SQLite", "Processing [")))  # the tool's own paths
            out["report"] = _trim(text, 40)
            out.update(launch_and_kernel(text))
        return out
    out["command"] = f"compute-sanitizer --tool {tool} {' '.join(SANITIZER_OPTIONS)} python planted.py"
    out["report"] = _trim(_child(program, env, [exe, "--tool", tool, *SANITIZER_OPTIONS], timeout))
    return out


def _table_rows(report: str, title: str) -> list[dict]:
    """The rows of the table under ``** ... (title):`` in ``nsys stats``' text output, each a
    dict from column name to cell (numbers with their thousands commas removed)."""
    rows, header, inside = [], None, False
    for line in report.splitlines():
        if line.lstrip().startswith("**"):
            inside, header = f"({title})" in line, None
        elif inside and line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if header is None:
                header = cells
            else:
                rows.append({k: v.replace(",", "") for k, v in zip(header, cells)})
    return rows


def launch_and_kernel(report: str) -> dict:
    """The launch API's and the kernel's calls and mean and median times (µs) read from the
    stored ``nsys stats`` report, for the prose to quote; {} when it holds neither."""
    if not isinstance(report, str):
        raise ValueError(f"report must be the text nsys stats printed, not {type(report).__name__}")
    launch = [r for r in _table_rows(report, "cuda_api_sum") if r.get("Name", "").startswith("cuLaunchKernel")]
    kernel = [r for r in _table_rows(report, "cuda_gpu_kern_sum") if "add_one" in r.get("Name", "")]
    if not launch or not kernel:
        return {}
    return {"launch_api": launch[0]["Name"], "launch_calls": int(launch[0]["Num Calls"]),
            "launch_avg_us": float(launch[0]["Avg (ns)"]) / 1e3, "launch_median_us": float(launch[0]["Med (ns)"]) / 1e3,
            "kernel_calls": int(kernel[0]["Instances"]), "kernel_avg_us": float(kernel[0]["Avg (ns)"]) / 1e3,
            "kernel_median_us": float(kernel[0]["Med (ns)"]) / 1e3}


def first_nonfinite(named) -> tuple[str, int] | None:
    """(name, count) of the first of the (name, array) pairs, in the order given (the order the
    step computes them), that holds a NaN or an infinity; None when all are finite. The first
    one is where to look: everything after it inherits its NaN."""
    if isinstance(named, dict):
        named = list(named.items())
    if not isinstance(named, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in named):
        raise ValueError(f"named must be (name, array) pairs in the order they were computed, not {named!r:.60}")
    for name, array in named:
        host = array.copy_to_host() if hasattr(array, "copy_to_host") else np.asarray(array)
        bad = int(np.count_nonzero(~np.isfinite(host)))
        if bad:
            return str(name), bad
    return None
