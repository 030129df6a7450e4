"""Backend choice: each case runs in a fresh interpreter, because Numba fixes it at import."""

import os
import subprocess
import sys
import textwrap

import pytest

from gpulib import _backend


def run_python(code: str, **env_overrides) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GPULIB_BACKEND", "NUMBA_ENABLE_CUDASIM")}
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)


HAS_GPU = _backend._detect().name == "gpu"

REPORT = """
    import gpulib
    from numba import cuda
    gpulib.report()
    print("device array module:", type(cuda.to_device([1.0])).__module__)
"""


def test_sim_override_selects_the_simulator():
    proc = run_python(REPORT, GPULIB_BACKEND="sim")
    assert proc.returncode == 0, proc.stderr
    assert "gpulib backend: simulator" in proc.stdout
    assert "GPULIB_BACKEND=sim was set" in proc.stdout
    assert "simulator" in proc.stdout.splitlines()[-1]
    assert "numba-cuda" in proc.stdout and "numpy" in proc.stdout


def test_numba_cudasim_variable_counts_as_sim():
    proc = run_python(REPORT, NUMBA_ENABLE_CUDASIM="1")
    assert proc.returncode == 0, proc.stderr
    assert "NUMBA_ENABLE_CUDASIM=1 was set" in proc.stdout


def test_gpu_override():
    proc = run_python(REPORT, GPULIB_BACKEND="gpu")
    if HAS_GPU:
        assert proc.returncode == 0, proc.stderr
        assert "gpulib backend: GPU" in proc.stdout
        assert "simulator" not in proc.stdout.splitlines()[-1]
    else:
        assert proc.returncode != 0
        assert "GPULIB_BACKEND=gpu was set, but no usable GPU" in proc.stderr


def test_bad_override_is_rejected():
    proc = run_python("import gpulib", GPULIB_BACKEND="tpu")
    assert proc.returncode != 0
    assert "GPULIB_BACKEND must be 'gpu' or 'sim'" in proc.stderr


def test_automatic_choice_matches_the_machine():
    proc = run_python(REPORT)
    assert proc.returncode == 0, proc.stderr
    expected = "gpulib backend: GPU" if HAS_GPU else "gpulib backend: simulator"
    assert expected in proc.stdout
    assert "why:" in proc.stdout


def test_importing_numba_cuda_first_warns_and_keeps_its_backend():
    code = """
        import warnings
        import numba
        numba.config.ENABLE_CUDASIM = 1
        from numba import cuda
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import gpulib
        print([str(w.category.__name__) for w in caught])
        print(gpulib.BACKEND)
    """
    proc = run_python(code, GPULIB_BACKEND="gpu")  # the override cannot apply any more
    assert proc.returncode == 0, proc.stderr
    assert "BackendWarning" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "sim"


def test_detect_needs_nvvm_as_well_as_a_device(monkeypatch):
    monkeypatch.setattr(_backend, "_driver_device_count", lambda: (1, "1 device"))
    monkeypatch.setattr(_backend, "_nvvm_found", lambda: (False, "NVVM was not found"))
    choice = _backend._detect()
    assert choice.name == "sim" and "NVVM was not found" in choice.reason
    monkeypatch.setattr(_backend, "_nvvm_found", lambda: (True, "NVVM at /x"))
    assert _backend._detect().name == "gpu"


def test_detect_without_a_driver(monkeypatch):
    monkeypatch.setattr(_backend, "_driver_device_count", lambda: (0, "no CUDA driver library"))
    choice = _backend._detect()
    assert choice == _backend.Choice("sim", "no CUDA driver library")


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_no_driver_here_is_reported_by_name():
    count, why = _backend._driver_device_count()
    assert count == 0 and why
