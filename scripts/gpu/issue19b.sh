#!/usr/bin/env bash
# Issue 19 second GPU run: every attention test on the GPU (a fallback warning fails), the full
# attention benchmark (L 512-4096, float16 and float32), the GPT step.
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
NETCL_DEVICE=cl step attention_tests 45 python3 -m pytest -q -p no:cacheprovider -W error::RuntimeWarning \
  packages/netcl-ops/tests/test_attention.py packages/netcl-autograd/tests/test_attention.py
step bench_attention 130 python3 benchmarks/bench_attention.py --device cl
NETCL_AUTOTUNE_BUDGET_S=10 step bench_gpt_step 80 python3 benchmarks/bench_gpt_step.py
