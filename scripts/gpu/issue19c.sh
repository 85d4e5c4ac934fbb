#!/usr/bin/env bash
# Issue 19 third GPU run: every attention test on the GPU (fallback warnings fail), the float16
# attention benchmark (L 512-4096).
set -u
R=${OUT:-/tmp/out}/r
mkdir -p "$R"
OUT=$R bash scripts/gpu/gpu_run.sh setup-only > "$R/setup.log" 2>&1
export PYTHONPATH=/tmp/site:$(ls -d packages/*/src | tr '\n' ':') OCL_ICD_VENDORS=/tmp/icd
export PYTHONUNBUFFERED=1 NETCL_CACHE_DIR=/tmp/netcl-cache OUT=$R
step() { local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit}s) $(date -u +%T)" | tee -a "$R/steps.log"
  timeout "$limit" "$@" > "$R/$name.txt" 2>&1
  echo "   rc=$? $(date -u +%T)" | tee -a "$R/steps.log"; }
trap 'tar -czf "$(dirname "$R")/r.tgz" -C "$R" .' EXIT
NETCL_DEVICE=cl step attention_tests 100 python3 -m pytest -q -p no:cacheprovider \
  -W error::RuntimeWarning packages/netcl-ops/tests/test_attention.py \
  packages/netcl-autograd/tests/test_attention.py
step bench_attention 70 python3 benchmarks/bench_attention.py --device cl --dtypes float16
