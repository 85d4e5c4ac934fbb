#!/usr/bin/env bash
# Issues 19-21's figures on the GPU machine (../shared/GPU.md) in one device call: the fused
# attention (GPU tests + beside torch SDPA), the GPT-small-like training step, the recurrent
# layers, data-parallel digits with ranks sharing the GPU, shared-memory all_reduce on an
# unloaded 16-core host. Every step has its own time limit and writes under $OUT/r, archived
# as $OUT/r.tgz (the device tool returns a handful of files per call).
#   bash scripts/gpu/issue19.sh
set -u
R=${OUT:-/tmp/out}/r
mkdir -p "$R"
OUT=$R bash scripts/gpu/gpu_run.sh setup-only > "$R/setup.log" 2>&1  # installs .whl, lists devices
export PYTHONPATH=/tmp/site:$(ls -d packages/*/src | tr '\n' ':') OCL_ICD_VENDORS=/tmp/icd
export PYTHONUNBUFFERED=1 NETCL_CACHE_DIR=/tmp/netcl-cache OUT=$R
step() {  # step NAME SECONDS COMMAND...: output to $R/NAME.txt as it runs
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit}s) $(date -u +%T)" | tee -a "$R/steps.log"
  timeout "$limit" "$@" > "$R/$name.txt" 2>&1
  echo "   rc=$? $(date -u +%T)" | tee -a "$R/steps.log"
}
finish() { tar -czf "${OUT_ROOT}/r.tgz" -C "$R" . ; }
OUT_ROOT=$(dirname "$R")
trap finish EXIT
NETCL_DEVICE=cl step attention_tests 40 python3 -m pytest -q -p no:cacheprovider \
  packages/netcl-ops/tests/test_attention.py -k "forward_backward or float16 or dropout_mask"
step bench_attention 75 python3 benchmarks/bench_attention.py --device cl --quick
NETCL_AUTOTUNE_BUDGET_S=10 step bench_gpt_step 80 python3 benchmarks/bench_gpt_step.py
step bench_rnn 40 python3 benchmarks/bench_rnn.py --devices cl --capture --repeat 5
NETCL_DEVICE=cl step rnn_tests 35 python3 -m pytest -q -x -p no:cacheprovider \
  packages/netcl-nn/tests/test_rnn.py -k "not torch"
NETCL_DEVICE=cl step bench_data_parallel 45 python3 benchmarks/bench_data_parallel.py \
  --device cl --procs 1 2
step bench_allreduce 30 python3 benchmarks/bench_allreduce.py --ranks 2 4
step bench_allreduce_gpu 30 python3 benchmarks/bench_allreduce.py --ranks 2 --backends shm \
  --tensor-device cl
NETCL_DEVICE=cl step transformer_tests 40 python3 -m pytest -q -x -p no:cacheprovider -k "not torch" \
  packages/netcl-nn/tests/test_transformer.py tests-integration/test_capture_transformer.py
