#!/usr/bin/env bash
# Run the tests and execute the notebooks on the GPU machine of the `device` tool.
#
# That machine has no package index and a numpy (2.5) that numba-cuda 0.30 cannot use, so
# the wheels it lacks travel in .whl/ (see README, "Running on the lent GPU machine").
# Usage there:  bash tools/device_run.sh [notebooks...]   (results land in $OUT)
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
echo "== notebooks"
notebooks=("$@")
[ ${#notebooks[@]} -eq 0 ] && notebooks=(book/*.ipynb)
timeout "${NOTEBOOK_TIMEOUT:-400}" python3 tools/run_notebooks.py --cells --timeout 300 \
    --out "$OUT" "${notebooks[@]}"
