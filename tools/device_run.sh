#!/usr/bin/env bash
# Run the tests, the benchmarks and the notebooks on a GPU machine without a package index.
#
# Such a machine may have a numpy (2.5) that numba-cuda 0.30 cannot use, so the wheels it
# lacks come along in .whl/ (see README, "Running on a GPU machine without a package index").
# Usage there:  bash tools/device_run.sh [notebooks...]   (results land in $OUT; the executed
#               notebooks in $OUT/notebooks.tgz)
#               TESTS=0 skips the unit tests, NOTEBOOKS=0 the notebooks;
#               BENCH=1 also runs every benchmark script, writing its JSON into $OUT;
#               PARTS="conv_direct cudnn_tensorcore:tile_cost book_model:softmax ..." measures
#               those benchmarks (or one part of one, script:part) into benchmarks/results, in
#               that order, packing benchmarks/results and the logs into $OUT/parts.tgz after
#               each, before the notebooks (which then show the new results)
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
shopt -s nullglob
wheels=(.whl/*.whl .whl/*/*.whl)  # flat, or in folders (core, cudnn, nb) that travel separately
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "${wheels[@]}" || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# shared libraries a tool of that machine lacks (libdw and libelf for the Nsight Systems that
# comes inside Nsight Compute, whose report importer needs them) go in .whl/lib
[ -d .whl/lib ] && export LD_LIBRARY_PATH=$PWD/.whl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
python3 -c "import gpulib; gpulib.report()"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "${TESTS:-1}" = 1 ]; then
    echo "== unit tests"
    python3 -m pytest -q -p no:cacheprovider tests > "$OUT/pytest.log" 2>&1
    grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest.log" | tail -15
fi
if [ "${BENCH:-0}" = 1 ]; then
    for script in benchmarks/conv_direct.py benchmarks/conv_gemm.py benchmarks/cudnn_tensorcore.py; do
        name=$(basename "$script" .py)
        echo "== $script"
        timeout "${BENCH_TIMEOUT:-400}" python3 "$script" --out "$OUT/$name.json" > "$OUT/$name.log" 2>&1
        tail -60 "$OUT/$name.log"
    done
fi
if [ -n "${PARTS:-}" ]; then
    # one archive (results + logs) comes back, rewritten after each part: a machine may return
    # only a few files, and a part that runs out of time still leaves the parts before it
    logs=$(mktemp -d)
    for item in $PARTS; do
        script=${item%%:*}; part=${item#"$script"}; part=${part#:}  # "name" or "name:part"
        args=(--save${part:+ --part $part})
        log="$logs/${script}${part:+_$part}.log"
        echo "== $script ${args[*]}"
        timeout "${PART_TIMEOUT:-200}" python3 "benchmarks/$script.py" "${args[@]}" > "$log" 2>&1
        echo "   exit $?, last lines:"; tail -12 "$log"
        tar czf "$OUT/parts.tgz" benchmarks/results -C "$logs" .
    done
fi
if [ "${NOTEBOOKS:-1}" = 1 ]; then
    echo "== notebooks"
    notebooks=("$@")
    [ ${#notebooks[@]} -eq 0 ] && notebooks=(book/*.ipynb)
    executed=$(mktemp -d)
    for notebook in "${notebooks[@]}"; do  # one at a time, packed after each into one archive
        timeout "${NOTEBOOK_TIMEOUT:-400}" python3 tools/run_notebooks.py --cells --timeout 300 \
            --out "$executed" "$notebook"
        tar czf "$OUT/notebooks.tgz" -C "$executed" .
    done
fi
