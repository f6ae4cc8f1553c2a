#!/usr/bin/env bash
# One GPU session on a machine with a Hopper GPU and no registry access: install asyncdsl from
# this tree (xDSL and its two dependencies from the wheels in .whl/), run the GPU tests given as
# arguments (default: tests/gpu; the whole directory takes longer than ten minutes, so give a
# few files at a time), then print the failures and a summary line.
#   bash tests/gpu/session.sh [pytest arguments ...]
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/tmp/install.log 2>&1 || { cat /tmp/install.log; exit 1; }
# Bytecode as an installed package has it (that machine may not write any itself): import and
# first-call timings then measure what users get.
python3 -m compileall -q asyncdsl dialects passes >/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
out=${OUT:-/tmp}
# One line per test as it finishes (-v), so a run stopped by a time limit still says which
# tests failed; the console gets the failures and the last lines only.
python3 -m pytest -v -p no:cacheprovider "${@:-tests/gpu}" > "$out/gpu-tests.log" 2>&1
grep -E " (FAILED|ERROR)( |$)" "$out/gpu-tests.log" | head -n 20
tail -n 5 "$out/gpu-tests.log"
echo "gpu tests: $(tail -n 1 "$out/gpu-tests.log")"
