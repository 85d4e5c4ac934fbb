#!/usr/bin/env bash
# Session 12's GPU runs (issues 16 and 19): each argument is a step.
#   ptxas [FILTER...]     registers/spills/local memory per kernel (scripts/gpu/ptxas_info.py)
#   attn16 | attn32       bench_attention float16 / float32 (extra args from $ATTN_ARGS)
#   attntests             the attention tests on the GPU (fallback warnings fail)
#   softmax               bench_membound --only softmax
#   reduce | membound     bench_membound --only reduce | every group
#   tests                 pytest $TESTS on the GPU (default: the row reductions)
#   convs | convs_in      bench_conv_layers --variants, ResNet-18 CIFAR | ImageNet layers
#   attnprof              scripts/gpu/attn_profile.py (host vs device time of attention)
#   sweep                 benchmarks/sweep_gemm.py ($SWEEP_CLASSES, default mid,skinny,small)
#   gpt                   bench_gpt_step --kernels (GPT step, kernels by device time)
#   gemmshapes            scripts/gpu/gemm_shapes.py (GPT step GEMMs or $GEMM_SHAPES vs torch.mm)
#   convprof              scripts/gpu/conv_profile.py ($CONV_LAYERS, $CONV_PASSES, $CONV_VARIANTS)
#   occupancy             scripts/gpu/occupancy_probe.py (work-groups per SM by local memory)
#   capture               bench_capture_resnet --both --kernels (ResNet-18 step device time)
# Results under $OUT/r (and $OUT/r.tgz).
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
while [ $# -gt 0 ]; do
  case $1 in
    ptxas) PTX_DUMP_DIR=$R/ptx step ptxas 120 python3 scripts/gpu/ptxas_info.py ${PTXAS_FILTER:-attention softmax} ;;
    tests) NETCL_DEVICE=cl step tests 300 python3 -m pytest -q -p no:cacheprovider -x \
      -W error::RuntimeWarning ${TESTS:-packages/netcl-ops/tests/test_reduce_rows.py} ;;
    attn16) step attn16 150 python3 benchmarks/bench_attention.py --device cl --dtypes float16 ${ATTN_ARGS:-} ;;
    attn32) step attn32 200 python3 benchmarks/bench_attention.py --device cl --dtypes float32 ${ATTN_ARGS:-} ;;
    attntests) NETCL_DEVICE=cl step attntests 200 python3 -m pytest -q -p no:cacheprovider \
      -W error::RuntimeWarning packages/netcl-ops/tests/test_attention.py \
      $(ls packages/netcl-ops/tests/test_attention_*.py) packages/netcl-autograd/tests/test_attention.py ;;
    softmax) step softmax 200 python3 benchmarks/bench_membound.py --device cl --only softmax --softmax-kernels ${SOFTMAX_KERNELS:-row,mrow,warp,warp-r64} --out "$R/softmax.json" ;;
    reduce) step reduce 150 python3 benchmarks/bench_membound.py --device cl --only reduce --out "$R/reduce.json" ;;
    convs) step convs_r18 300 python3 benchmarks/bench_conv_layers.py --set r18 --variants --repeat 3 --inner 3 ${CONV_ARGS:-} --json "$R/convs_r18.json" ;;
    convs_in) step convs_r18_imagenet 300 python3 benchmarks/bench_conv_layers.py --set r18-imagenet --variants --repeat 3 --inner 3 ${CONV_ARGS:-} --json "$R/convs_r18_imagenet.json" ;;
    capture) NETCL_PROFILE_EVENTS=1 step capture 300 python3 benchmarks/bench_capture_resnet.py --device cl --both --kernels --json "$R/capture.json" ;;
    attnprof) NETCL_PROFILE_EVENTS=1 step attnprof 200 python3 scripts/gpu/attn_profile.py ;;
    sweep) step sweep 300 python3 benchmarks/sweep_gemm.py --budget ${SWEEP_BUDGET:-240} --classes ${SWEEP_CLASSES:-mid,skinny,small} --out "$R/sweep.json" ;;
    gemm) step gemm 200 python3 benchmarks/bench_ops_linalg.py --device cl ${GEMM_ARGS:-} ;;
    gpt) NETCL_PROFILE_EVENTS=1 step gpt 300 python3 benchmarks/bench_gpt_step.py --device cl --kernels ${GPT_ARGS:-} --json "$R/gpt.json" ;;
    gemmshapes) NETCL_PROFILE_EVENTS=1 step gemmshapes 200 python3 scripts/gpu/gemm_shapes.py ${GEMM_SHAPES:+--shapes $GEMM_SHAPES} ;;
    hgemmshapes) NETCL_PROFILE_EVENTS=1 step hgemmshapes 200 python3 scripts/gpu/gemm_shapes.py --dtype float16 ${GEMM_SHAPES:+--shapes $GEMM_SHAPES} ;;
    convprof) NETCL_PROFILE_EVENTS=1 step convprof 200 python3 scripts/gpu/conv_profile.py $(for l in ${CONV_LAYERS:-128,256,256,8,3,1,1}; do echo --layer $l; done) --passes ${CONV_PASSES:-weight} --variants ${CONV_VARIANTS:-auto} ;;
    occupancy) step occupancy 120 python3 scripts/gpu/occupancy_probe.py ;;
    membound) step membound 300 python3 benchmarks/bench_membound.py --device cl --out "$R/membound.json" ;;
    *) echo "unknown step $1" | tee -a "$R/steps.log" ;;
  esac
  shift
done
