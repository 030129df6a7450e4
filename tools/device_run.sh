#!/usr/bin/env bash
# Run the tests and execute the notebooks on the GPU machine of the `device` tool.
#
# That machine has no package index and a numpy (2.5) that numba-cuda 0.30 cannot use, so
# the wheels it lacks travel in .whl/ (see README, "Running on the lent GPU machine").
# Usage there:  bash tools/device_run.sh [notebooks...]   (results land in $OUT)
#               BENCH=1 also runs every benchmark script, writing its JSON into $OUT
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 -c "import gpulib; gpulib.report()"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "== unit tests"
python3 -m pytest -q -p no:cacheprovider tests > "$OUT/pytest.log" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -15
if [ "${BENCH:-0}" = 1 ]; then
    for script in benchmarks/conv_direct.py benchmarks/conv_gemm.py benchmarks/cudnn_tensorcore.py; do
        name=$(basename "$script" .py)
        echo "== $script"
        timeout "${BENCH_TIMEOUT:-400}" python3 "$script" --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
        tail -40 "$OUT/$name.log"
    done
fi
echo "== notebooks"
notebooks=("$@")
[ ${#notebooks[@]} -eq 0 ] && notebooks=(book/*.ipynb)
timeout "${NOTEBOOK_TIMEOUT:-400}" python3 tools/run_notebooks.py --cells --timeout 300 \
    --out "$OUT" "${notebooks[@]}"
