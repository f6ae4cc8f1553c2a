#!/usr/bin/env bash
# One GPU session on a machine with a Hopper GPU and no registry access: install asyncdsl from
# this tree (xDSL and its two dependencies from the wheels in .whl/), run the GPU tests given as
# arguments (default: tests/gpu), then print one summary line per step.
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
python3 -m pytest -q -p no:cacheprovider "${@:-tests/gpu}" 2>&1 | tee "$out/gpu-tests.log" | tail -n 40
echo "gpu tests: $(tail -n 1 "$out/gpu-tests.log")"
