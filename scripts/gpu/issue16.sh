#!/usr/bin/env bash
# Issue 16's figures on the GPU machine (../shared/GPU.md), in two parts that each fit one
# device call (10 min): every step has its own time limit and writes under $OUT/r, which ends
# up as one archive ($OUT/r.tgz: the device tool returns a handful of files per call).
#   bash scripts/gpu/issue16.sh a   # tensor-core convolutions + TF32 (probe_conv_mma, its GPU
#                                   # tests), HGEMM sweep, memory-bound ops; issue 17's PyTorch
#                                   # loop and new layers
#   bash scripts/gpu/issue16.sh b   # ResNet-18 step (float32 and AMP) device time, conv layers,
#                                   # GEMM table, autotuning step
set -u
part=${1:-a}
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
# Kernel benchmarks time named variants: no autotuning there (NETCL_AUTOTUNE=off); the ResNet-18
# step, the PyTorch loop and bench_autotune run as users get them (auto: tuning on GPUs).
if [ "$part" = a ]; then
  NETCL_AUTOTUNE=off step probe_conv_mma 170 python3 benchmarks/probe_conv_mma.py ${T_ARGS:-}
  NETCL_AUTOTUNE=off step bench_membound 150 python3 benchmarks/bench_membound.py \
    --out "$R/bench_membound.json"
  NETCL_AUTOTUNE=off step probe_mma 90 python3 benchmarks/probe_mma.py
  # issue 17's: the PyTorch-style digits loop and the new layers/optimizers beside PyTorch
  [ -f scripts/gpu/gpu_pytorch_loop.py ] && step pytorch_loop 70 python3 scripts/gpu/gpu_pytorch_loop.py
  [ -f benchmarks/bench_nn_extra.py ] && NETCL_AUTOTUNE=off step bench_nn_extra 50 python3 benchmarks/bench_nn_extra.py \
    --device cl --scale 4 --repeat 20
else
  NETCL_PROFILE_EVENTS=1 step bench_capture_resnet 200 python3 benchmarks/bench_capture_resnet.py \
    --device cl --both --kernels --json "$R/bench_capture_resnet.json"
  NETCL_AUTOTUNE=off step bench_conv_layers_wgrad 70 python3 benchmarks/bench_conv_layers.py --set r18 \
    --layers 4,7,10 --repeat 3 --inner 3 --json "$R/bench_conv_layers_wgrad.json"
  NETCL_AUTOTUNE=off step bench_conv_layers_wgrad_imagenet 60 python3 benchmarks/bench_conv_layers.py \
    --set r18-imagenet --layers 4,7 --variants --repeat 3 --inner 3 \
    --json "$R/bench_conv_layers_wgrad_imagenet.json"
  NETCL_AUTOTUNE=off step bench_ops_linalg 100 python3 benchmarks/bench_ops_linalg.py --device cl \
    --sizes 1024,4096,1000,4095,128x4096x4096,4096x128x4096 --repeat 3 \
    --out "$R/bench_ops_linalg.json"
  step bench_autotune 100 python3 benchmarks/bench_autotune.py ${U_ARGS:-}
fi
cd "$(dirname "$R")" && tar czf r.tgz r && rm -rf r
