"""What ptxas makes of the Hopper kernels, on a machine without a GPU: registers, spills, and
whether it serialized their wgmma (its C75xx notes, "Potential Performance Loss: wgmma.mma_async
instructions are serialized ...", which cost a pipelined kernel most of its speed).

    GPULIB_BACKEND=ptx python tools/ptxas_check.py [--sass=DIR] [KERNEL ...]   (the names of KERNELS)

Each kernel's LTO-IR comes from Numba (NVVM), the linked CUDA C++ (gpulib/tensorcore's inline
PTX) is compiled to LTO-IR by nvcc, and nvlink -lto runs ptxas -v on the whole, as a GPU's
link does. Needs nvcc (CUDA 12.8 or later, for sm_90a LTO) and an nvlink whose NVVM reads
Numba's IR (the ``nvidia-cuda-nvcc`` wheel of the same CUDA as Numba's ``nvidia-nvvm``;
unzip it anywhere): NVCC, NVLINK and NVVM_DIR name them (NVVM_DIR: a folder with lib64/libnvvm.so
and libdevice/). Says nothing about speed; CONTRIBUTING, "Reading the generated code without a GPU".
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import gpulib  # noqa: F401  (first: it picks the backend, GPULIB_BACKEND=ptx here)
from gpulib.launch import compile_only

compile_only((9, 0))

from numba import cuda, types  # noqa: E402

from gpulib.conv import tc_kernels  # noqa: E402
from gpulib.gemm import tc_wgmma  # noqa: E402
from gpulib.tensorcore import tma  # noqa: E402

u64, i64 = types.Array(types.uint64, 1, "C"), types.int64
f16_2, f32_1, f32_2 = (types.Array(t, n, "C") for t, n in ((types.float16, 2), (types.float32, 1), (types.float32, 2)))
# name -> (kernel, its argument types, the register cap it is compiled with)
KERNELS = {
    "v5": (tc_wgmma.V5_KERNELS[tc_wgmma.V5_DEFAULT][0], (f16_2, f16_2, f32_2), None),
    "v6": (tc_wgmma.V6_KERNELS[tc_wgmma.V6_DEFAULT][0], (u64, u64, f32_2, i64), None),
    "v7": (tc_wgmma.V7_KERNELS[tc_wgmma.V7_DEFAULT][0], (u64, u64, f32_2, i64),
           tc_wgmma.V7_CONFIGS[tc_wgmma.V7_DEFAULT][2]),
    "v8": (tc_wgmma.V8_KERNELS["fp16", "fp32"][tc_wgmma.V8_DEFAULT][0], (u64, u64, u64, f32_2, i64), None),
    "v8-16bit": (tc_wgmma.V8_KERNELS["fp16", "16-bit"][tc_wgmma.V8_DEFAULT][0], (u64, u64, u64, f16_2, i64), None),
    "v9": (tc_wgmma.V9_KERNELS["fp16", "fp32"][tc_wgmma.V9_DEFAULT][0], (u64, u64, u64, f32_2, i64),
           tc_wgmma.V9_REGISTERS[0]),
    "v9-16bit": (tc_wgmma.V9_KERNELS["fp16", "16-bit"][tc_wgmma.V9_DEFAULT][0], (u64, u64, u64, f16_2, i64),
                 tc_wgmma.V9_REGISTERS[0]),
    "conv-v3": (tc_kernels.tc_conv_wgmma_kernel, (f16_2, f16_2, f32_1, f32_2) + (i64,) * 7, None),
    "conv-v4": (tc_kernels.tc_conv_tma_kernel, (u64, u64, f32_1, f32_2) + (i64,) * 9, None),
    "conv-v5": (tc_kernels.tc_conv_persistent_kernel, (u64, u64, u64, f32_1, f32_2) + (i64,) * 10, None),
    "conv-v5-16bit": (tc_kernels.tc_conv_persistent16_kernel, (u64, u64, u64, f32_1, f16_2) + (i64,) * 10, None),
    "conv-v6": (tc_kernels.tc_conv_halo_kernel, (u64, u64, u64, f32_1, f32_2) + (i64,) * 12, None),
    "conv-v6-16bit": (tc_kernels.tc_conv_halo16_kernel, (u64, u64, u64, f32_1, f16_2) + (i64,) * 12, None),
    "conv-v7": (tc_kernels.V7_KERNELS[(8, 8), "fp32"], (u64, u64, f32_1, f32_2) + (i64,) * 11,
                tc_kernels.V7_REGISTERS[0]),
    "conv-v7-16bit": (tc_kernels.V7_KERNELS[(8, 8), "fp16"], (u64, u64, f32_1, f16_2) + (i64,) * 11,
                      tc_kernels.V7_REGISTERS[0]),
    "conv-v7-112": (tc_kernels.V7_KERNELS[(14, 8), "fp32"], (u64, u64, f32_1, f32_2) + (i64,) * 11,
                    tc_kernels.V7_REGISTERS[0]),
}


def linked_source() -> str:
    """The CUDA C++ every wgmma/TMA kernel links (wmma, wgmma and tma's sources)."""
    texts = []
    for link in tma.LINK_ALL:
        text = getattr(link, "_source", None) or getattr(link, "source", None) or getattr(link, "data", None)
        texts.append(text.decode() if isinstance(text, bytes) else text)
    return "\n".join(texts)


def check(name: str, work: Path, linked: Path, sass_dir: Path | None = None) -> dict:
    kernel, signature, registers = KERNELS[name]
    ltoir, _ = cuda.compile(kernel.py_func, signature, device=False, output="ltoir", cc=(9, 0), abi="numba")
    (work / f"{name}.ltoir").write_bytes(ltoir)
    command = [os.environ.get("NVLINK", "nvlink"), "-arch=sm_90a", "-lto", f"-nvvmpath={os.environ['NVVM_DIR']}",
               "-Xptxas", "-v", *(["-maxrregcount", str(registers)] if registers else []),
               *([f"-L{os.environ['CUDA_LIB']}", "-lcudadevrt"] if "CUDA_LIB" in os.environ else []),
               str(work / f"{name}.ltoir"), str(linked), "-o", str(work / f"{name}.cubin")]
    done = subprocess.run(command, capture_output=True, text=True)  # (it fails after ptxas, at libcudadevrt: no matter)
    text = done.stdout + done.stderr
    if os.environ.get("PTXAS_CHECK_VERBOSE"):
        print(text[-3000:])
    used = re.search(r"Used (\d+) registers", text)
    spills = re.search(r"(\d+) bytes spill stores", text)
    notes = sorted(set(re.findall(r"\((C75\d\d)\) Potential Performance Loss: wgmma[^']*?serialized due to ([^']*?) in the",
                                  text)))
    if not used:
        raise RuntimeError(f"{name}: ptxas gave no register count:\n{text[-2000:]}")
    if sass_dir:
        sass(name, work / f"{name}.cubin", sass_dir)
    return dict(name=name, registers=int(used.group(1)), spill_bytes=int(spills.group(1)) if spills else 0, serialized=notes)


def sass(name: str, cubin: Path, sass_dir: Path) -> None:
    """cuobjdump's SASS of the linked cubin into ``sass_dir``/name.sass (CUOBJDUMP names the
    tool: the nvidia-cuda-cuobjdump wheel carries it)."""
    done = subprocess.run([os.environ.get("CUOBJDUMP", "cuobjdump"), "-sass", str(cubin)], capture_output=True,
                          text=True)
    if done.returncode:
        raise RuntimeError(f"{name}: cuobjdump could not read the linked cubin: {done.stderr.strip()}")
    listing = done.stdout
    sass_dir.mkdir(parents=True, exist_ok=True)
    (sass_dir / f"{name}.sass").write_text(listing)


def main(names: list[str]) -> int:
    if "NVVM_DIR" not in os.environ:
        print("NVVM_DIR must name a folder with lib64/libnvvm.so and libdevice/ (see the docstring)", file=sys.stderr)
        return 2
    sass_dir = None
    if names and names[0].startswith("--sass="):  # --sass=DIR: also each kernel's SASS listing there
        sass_dir, names = Path(names[0].split("=", 1)[1]), names[1:]
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        print(f"unknown kernels {unknown}; choose from {list(KERNELS)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "linked.cu").write_text(linked_source())
        subprocess.run([os.environ.get("NVCC", "nvcc"), "-gencode", "arch=compute_90a,code=lto_90a", "-dc",
                        str(work / "linked.cu"), "-o", str(work / "linked.o")], check=True)
        for name in names or list(KERNELS):
            r = check(name, work, work / "linked.o", sass_dir)
            verdict = "; ".join(f"{code}: {why}" for code, why in r["serialized"]) or "not serialized"
            print(f"{r['name']:<9} {r['registers']:>4} registers, {r['spill_bytes']} bytes spilled, wgmma {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
