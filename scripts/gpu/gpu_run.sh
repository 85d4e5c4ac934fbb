#!/usr/bin/env bash
# Run on the NVIDIA GPU machine (see ../shared/GPU.md): set up pyopencl from .whl, then run the
# test suites on the GPU and every benchmark, writing logs and JSON under $OUT.
#   bash scripts/gpu/gpu_run.sh [tests] [bench] [selector] [capture] [convs] [train] [SCRIPT.py ...]
# A step naming a .py file runs it with python3 (its stdout and stderr under $OUT/<name>.txt).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$(ls -d packages/*/src | tr '\n' ':')
mkdir -p /tmp/icd && echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd
export OCL_ICD_VENDORS=/tmp/icd PYTHONUNBUFFERED=1 NETCL_CACHE_DIR=/tmp/netcl-cache
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
what=${*:-tests bench}
python3 -m netcl.cli devices | tee "$OUT/devices.txt"
for step in $what; do
  case $step in
    tests)
      NETCL_DEVICE=cl timeout 420 python3 -m pytest -q -p no:cacheprovider \
        --ignore=packages/netcl/tests/test_trainer.py \
        packages/netcl-core/tests packages/netcl-ops/tests packages/netcl-autograd/tests \
        packages/netcl-nn/tests packages/netcl-optim/tests packages/netcl/tests \
        packages/netcl-runtime/tests tests-integration/test_runtime_capture.py \
        $(ls tests-integration/test_capture_*.py 2>/dev/null) \
        2>&1 | tail -40 | tee "$OUT/tests_gpu.txt" ;;
    bench)
      for b in benchmarks/bench_ops_linalg.py benchmarks/bench_ops_elementwise.py \
               benchmarks/bench_selector.py benchmarks/bench_fusion.py benchmarks/bench_train.py; do
        [ -f "$b" ] || continue
        name=$(basename "$b" .py)
        extra=""; [ "$name" = bench_train ] && extra="--tasks resnet18"
        timeout 300 python3 "$b" --device cl $extra --out "$OUT/$name.json" 2>&1 | tail -60 \
          | tee "$OUT/$name.txt"
      done ;;
    selector)
      for name in bench_selector bench_ops_elementwise; do
        timeout 300 python3 "benchmarks/$name.py" --device cl --out "$OUT/$name.json" 2>&1 \
          | tail -60 | tee "$OUT/$name.txt"
      done ;;
    capture)
      NETCL_PROFILE_EVENTS=1 timeout 300 python3 benchmarks/bench_capture_resnet.py --device cl \
        --both --kernels --json "$OUT/bench_capture_resnet.json" 2>&1 | tail -80 \
        | tee "$OUT/bench_capture_resnet.txt"
      timeout 200 python3 benchmarks/bench_runtime.py --json "$OUT/bench_runtime.json" 2>&1 \
        | tail -40 | tee "$OUT/bench_runtime.txt"
      timeout 200 python3 benchmarks/bench_dispatch.py --device cl --calls 3000 \
        --out "$OUT/bench_dispatch.json" 2>&1 | tail -40 | tee "$OUT/bench_dispatch.log" ;;
    convs)
      for set in r18 r50 r18-imagenet r50-imagenet; do
        extra=""; [ $set = r18 ] || extra="--variants --repeat 3 --inner 3"
        timeout 400 python3 benchmarks/bench_conv_layers.py --set $set $extra \
          --json "$OUT/bench_conv_layers_$set.json" 2>&1 | tail -150 \
          | tee "$OUT/bench_conv_layers_$set.txt"
      done ;;
    *.py)
      name=$(basename "$step" .py)
      timeout 400 python3 "$step" 2>&1 | tail -120 | tee "$OUT/$name.txt" ;;
    train)
      timeout 300 python3 -m netcl.cli train --device cl --no-progress 2>&1 | tail -15 \
        | tee "$OUT/train_gpu.txt" ;;
  esac
done
