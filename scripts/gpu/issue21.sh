#!/usr/bin/env bash
# Issue 21 on a host with two NVIDIA GPUs (../shared/GPU.md) in one device call: data-parallel
# ResNet-18 (CIFAR stem, batch 128 per rank, float32 and AMP), one rank per GPU, through
# `netcl launch -n 1/2` and `mpiexec -n 2`; the weight check against one GPU on the global
# batch; all_reduce of Tensors with each rank on its own GPU (1/16/128 MB); PyTorch DDP (NCCL)
# on the same GPUs. Prints the scaling efficiency (2-GPU images/s over 1-GPU images/s; target
# >= 1.8) and netcl's images/s over PyTorch's. Every step has its own time limit and writes
# under $OUT/r (JSON lines in ddp.jsonl, check.jsonl, torch.jsonl; summary.txt), archived as
# $OUT/r.tgz after each step.
#
# Once, on the machine with a package index: GPU.md's `pip download` line with `mpi4py mpich`
# added to its package list (for mpiexec; without them the MPI steps say so and are skipped;
# MPICH goes in with --prefix /tmp/mpi, LD_LIBRARY_PATH naming its lib/: checked on a CPU
# machine with pyenv's python3 and those two wheels).
# Then, with the device tool: kind nvidia-h200-x2, carry [".whl"]:
#   bash scripts/gpu/issue21.sh [all | a | b]
# a: netcl launch 1 and 2 GPUs (float32, AMP) and PyTorch DDP, with the summary (about 5 min);
# b: mpiexec, the weight checks and all_reduce. `all` (default) is both, if 10 minutes allow.
# NETCL_DEVICE stays unset: device_for_rank then gives rank k GPU k.
# Knobs (environment): BATCH (128), STEPS (20), WARMUP (3), EXTRA (more bench_ddp_resnet
# options), PY (python3), SKIP_SETUP=1 (no wheels/ICD set-up: a CPU rehearsal, e.g.
#   SKIP_SETUP=1 PY=$V/bin/python BATCH=8 STEPS=3 WARMUP=1 EXTRA="--width 8 --image-size 16" \
#     TORCH_ARGS="--width 8 --image-size 16" OUT=/tmp/rehearse bash scripts/gpu/issue21.sh).
set -u
part=${1:-all}
case $part in all|a|b) ;; *) echo "usage: issue21.sh [all|a|b]" >&2; exit 2 ;; esac
R=${OUT:-/tmp/out}/r
OUT_ROOT=$(dirname "$R")
mkdir -p "$R" /tmp/ckpt
PY=${PY:-python3}
BATCH=${BATCH:-128} STEPS=${STEPS:-20} WARMUP=${WARMUP:-3} EXTRA=${EXTRA:-}
TORCH_ARGS=${TORCH_ARGS:-}
if [ "${SKIP_SETUP:-0}" != 1 ]; then
  OUT=$R bash scripts/gpu/gpu_run.sh setup-only > "$R/setup.log" 2>&1  # .whl, devices
  export PYTHONPATH=/tmp/site:$(ls -d packages/*/src | tr '\n' ':') OCL_ICD_VENDORS=/tmp/icd
  if ls .whl/mpich-*.whl > /dev/null 2>&1; then  # pip's --target drops MPICH's lib/: a prefix
    python3 -m pip install -q --no-index --no-deps --prefix /tmp/mpi .whl/mpich-*.whl \
      >> "$R/setup.log" 2>&1
    export PATH=/tmp/mpi/bin:$PATH LD_LIBRARY_PATH=/tmp/mpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  fi
else
  export PATH=$(dirname "$(command -v "$PY")"):$PATH  # a venv's mpiexec
fi
unset NETCL_DEVICE
export PYTHONUNBUFFERED=1 NETCL_CACHE_DIR=/tmp/netcl-cache
MPIEXEC=$(command -v mpiexec || true)
archive() { tar -czf "$OUT_ROOT/r.tgz" -C "$R" . ; }
step() {  # step NAME SECONDS COMMAND...: output to $R/NAME.txt as it runs
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit}s) $(date -u +%T)" | tee -a "$R/steps.log"
  timeout "$limit" "$@" > "$R/$name.txt" 2>&1
  local rc=$?
  echo "   rc=$rc $(date -u +%T) $(grep -h '^RESULT\|^check-weights' "$R/$name.txt" | tr '\n' ' ')" \
    | tee -a "$R/steps.log"
  archive
}
trap archive EXIT
{ nvidia-smi -L 2>/dev/null; "$PY" -c "import netcl.distributed as d
names = [str(d.device_for_rank(k)) for k in range(2)]
print('device_for_rank:', names)
if names[0] == names[1]:
    print('WARNING: ranks 0 and 1 share one device: not the two-GPU run issue 21 asks for')"; } \
  > "$R/devices.txt" 2>&1
cat "$R/devices.txt"
BENCH=(benchmarks/bench_ddp_resnet.py --batch "$BATCH" $EXTRA)
TIMED=("${BENCH[@]}" --steps "$STEPS" --warmup "$WARMUP" --out "$R/ddp.jsonl")
LAUNCH=("$PY" -m netcl.cli launch)

if [ "$part" != b ]; then
  for prec in float32 amp; do
    flag=(); [ $prec = amp ] && flag=(--amp)
    step "netcl_${prec}_1gpu" 150 "${LAUNCH[@]}" -n 1 "${TIMED[@]}" "${flag[@]}" \
      --checkpoint /tmp/ckpt/${prec}_1.netcl
    step "netcl_${prec}_2gpu" 90 "${LAUNCH[@]}" -n 2 "${TIMED[@]}" "${flag[@]}" \
      --checkpoint /tmp/ckpt/${prec}_2.netcl
  done
  step torch_ddp 150 "$PY" benchmarks/_ddp_torch.py --gpus 1 2 --both --batch "$BATCH" \
    --steps "$STEPS" --warmup "$WARMUP" --out "$R/torch.jsonl" $TORCH_ARGS
fi
if [ "$part" != a ]; then
  if [ -n "$MPIEXEC" ] && "$PY" -c "from mpi4py import MPI" > /dev/null 2>&1; then
    for prec in float32 amp; do
      flag=(); [ $prec = amp ] && flag=(--amp)
      step "mpiexec_${prec}_2gpu" 90 "$MPIEXEC" -n 2 "$PY" "${TIMED[@]}" "${flag[@]}" \
        --checkpoint /tmp/ckpt/${prec}_mpi.netcl
    done
  else
    echo "== mpiexec: skipped (no mpiexec or mpi4py: add mpi4py mpich to .whl)" \
      | tee -a "$R/steps.log"
  fi
  # the weight checks: 2 GPUs with SyncBatchNorm against one GPU on the global batch (rank 0)
  CHECK=("${BENCH[@]}" --steps 4 --warmup 1 --check-weights --out "$R/check.jsonl")
  step check_float32 120 "${LAUNCH[@]}" -n 2 "${CHECK[@]}" --checkpoint /tmp/ckpt/check.netcl
  step check_amp 150 "${LAUNCH[@]}" -n 2 "${CHECK[@]}" --amp --init-scale 1024 \
    --checkpoint /tmp/ckpt/check_amp.netcl
  step allreduce_gpu_to_gpu 90 "$PY" benchmarks/bench_allreduce.py --ranks 2 \
    --backends shm mpi --tensor-device rank --sizes-mb 1 16 128 --repeat 5 \
    --out "$R/allreduce.json"
fi

"$PY" - "$R" > "$R/summary.txt" 2>&1 <<'EOF'
import json, sys
from pathlib import Path
r = Path(sys.argv[1])
def rows(name):
    f = r / name
    return [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.exists() else []
netcl, torch = rows("ddp.jsonl"), rows("torch.jsonl")
def pick(src, prec, ranks, backend=None):
    got = [x for x in src if x["precision"] == prec and x["ranks"] == ranks
           and (backend is None or x["backend"] == backend)]
    return got[-1] if got else None
def num(row, key, spec):
    return "-" if row is None else format(row[key], spec)
def ratio(a, b):
    return "-" if a is None or b is None else f"{a['images_per_s'] / b['images_per_s']:.2f}x"
print("issue 21: ResNet-18 (CIFAR stem) data-parallel; images/s over the global batch")
print(f"{'precision':<9} {'who':<21} {'ms 1 GPU':>9} {'ms 2 GPUs':>9} {'img/s 1':>9} "
      f"{'img/s 2':>9} {'scaling':>8} {'vs torch':>8}")
for prec in ("float32", "amp"):
    t2 = pick(torch, prec, 2)
    for who, src, backend in (("netcl launch (shm)", netcl, "shm"),
                              ("netcl mpiexec (mpi)", netcl, "mpi"),
                              ("PyTorch DDP (NCCL)", torch, None)):
        one = pick(src, prec, 1, None if backend == "mpi" else backend)
        two = pick(src, prec, 2, backend)
        if two is None and (one is None or backend == "mpi"):
            continue
        print(f"{prec:<9} {who:<21} {num(one, 'step_ms', '.1f'):>9} "
              f"{num(two, 'step_ms', '.1f'):>9} {num(one, 'images_per_s', '.1f'):>9} "
              f"{num(two, 'images_per_s', '.1f'):>9} "
              f"{ratio(two, one):>8} {ratio(two, t2) if src is netcl else '':>8}")
print("scaling: 2-GPU images/s over 1-GPU images/s (target >= 1.8; the mpiexec row divides by "
      "netcl launch's 1 GPU); vs torch: netcl's 2-GPU images/s over PyTorch DDP's")
for x in netcl:
    if x["ranks"] == 2:
        print(f"devices of the 2-rank runs ({x['backend']}): {x['devices']}")
        break
for c in rows("check.jsonl"):
    w = c.get("check_weights", {})
    print(f"weight check {c['precision']}: {w.get('metric')} {w.get(w.get('metric', ''), 0):.3g}"
          f" (max relative {w.get('max_rel_diff', 0):.3g}), tolerance {w.get('tol', 0):.3g}: "
          f"{'PASS' if w.get('passed') else 'FAIL'}")
ar = r / "allreduce.json"
for a in (json.loads(ar.read_text()) if ar.exists() else []):
    print(f"all_reduce {a['backend']} {a['data'][:40]} {a['mb']} MB: best "
          f"{a['best_s'] * 1e3:.2f} ms, algbw {a['algbw_gbs']:.2f} GB/s")
EOF
cat "$R/summary.txt"
archive
