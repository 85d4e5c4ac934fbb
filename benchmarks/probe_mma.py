"""Probe and benchmark tensor-core (``mma.sync``) GEMM kernels on NVIDIA's OpenCL driver.

Issue #16: NVIDIA's OpenCL compiler accepts inline PTX, so float16-storage GEMMs can run on
the tensor cores. This script checks, on the GPU machine (see ../shared/GPU.md):

1. one ``m16n8k16`` f16 tile and one ``m16n8k8`` tf32 tile against NumPy, then netcl's probe
   kernel (``cp.async`` into local memory, ``ldmatrix`` out, one ``mma``), printing the build
   log on failure, and the rate of back-to-back ``mma.sync`` from registers (the ceiling);
2. the tiled GEMM of ``netcl.ops._matmul_mma_source`` for several tile configurations:
   correctness on edge shapes against a float32 NumPy reference and TFLOP/s at 2048^3 and
   4096^3 (median kernel time from profiling events);
   (diagnostic entries drop the k loop's tile copies or fragment loads: wrong results, telling
   times);
3. the best configuration at 256..8192 cubed, and the best small-tile one up to 2048, beside
   ``torch.matmul`` in float16 on CUDA;
4. ``pytest packages/netcl-ops/tests/test_matmul_mma.py`` on the GPU (``--no-tests`` skips it).

Every kernel runs in a child process, so a crash (an illegal address) cannot take the rest of
the run down. Build logs (with ``-cl-nv-verbose``: registers and spills) and the PTX of the
best kernel go to ``$OUT/probe_mma_detail.txt`` and ``$OUT/probe_mma_best.ptx``.

Run from the repository root:  bash scripts/gpu/gpu_run.sh benchmarks/probe_mma.py
(or ``python3 benchmarks/probe_mma.py`` where pyopencl sees an NVIDIA GPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import time
from types import ModuleType
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE = pathlib.Path(
    os.environ.get(
        "PROBE_MMA_SOURCE", ROOT / "packages/netcl-ops/src/netcl/ops/_matmul_mma_source.py"
    )
)
OUT = pathlib.Path(os.environ.get("OUT", "/tmp/out"))
DETAIL = OUT / "probe_mma_detail.txt"
# PROBE_MMA_DRY=1: any OpenCL device, PTX emulated (checks this script's flow; slow).
DRY = bool(os.environ.get("PROBE_MMA_DRY"))
BUILD_OPTIONS = [] if DRY else ["-cl-nv-verbose"]
# The inline-assembly keyword: "__asm__" (as netcl renders it) or "asm" (PROBE_MMA_ASM=asm).
ASM = os.environ.get("PROBE_MMA_ASM", "__asm__")

# Iteration 4: the 48 KiB of local memory held big tiles to 2 stages of bk = 32; bk = 16 gives
# them 4 (128x256, 256x128) and 128x128 tiles 6, the same bytes in flight in finer steps
# (plain k loop: pipelined fragments need bk % 32 == 0). Iteration 3's best and 128x256 with
# 2 stages of 32 are the references (230 and 175 TFLOP/s at 4096^3 then).
BASE: dict[str, Any] = dict(bm=128, bn=128, bk=32, warps_m=2, warps_n=2, stages=3)
R128: list[str] = ["-cl-nv-maxrregcount=128"]
CONFIGS: list[dict[str, Any]] = [  # most telling first: a time limit may cut the list short
    BASE,
    dict(bm=128, bn=256, bk=16, warps_m=2, warps_n=4, stages=4, pipeline=False),
    dict(bm=256, bn=128, bk=16, warps_m=4, warps_n=2, stages=4, pipeline=False),
    dict(bm=128, bn=128, bk=16, warps_m=2, warps_n=2, stages=6, pipeline=False),
    dict(bm=128, bn=256, bk=32, warps_m=2, warps_n=4, stages=2),
    dict(bm=128, bn=128, bk=16, warps_m=2, warps_n=4, stages=6, pipeline=False, _options=R128),
]


# (every dimension a multiple of 8: each layout reads 16-byte rows of its contiguous one)
CHECK_SHAPES = [(1, 1000, 1000, 1000), (3, 72, 136, 80), (1, 8, 8, 8), (1, 2048, 2048, 2048)]
if DRY:  # emulated PTX is slow: small shapes only
    CHECK_SHAPES = [(1, 40, 48, 40), (2, 16, 8, 24)]
SWEEP_SIZES = [2048, 4096]
FULL_SIZES = [256, 512, 1024, 2048, 4096, 8192]


def detail(text: str) -> None:
    """Append ``text`` to the detail log (not to stdout: gpu_run.sh keeps 120 lines)."""
    OUT.mkdir(parents=True, exist_ok=True)
    with DETAIL.open("a") as f:
        f.write(text.rstrip() + "\n")


def load_source() -> ModuleType:
    """``netcl.ops._matmul_mma_source`` by path (no netcl import needed)."""
    spec = importlib.util.spec_from_file_location("mma_source", SOURCE)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {SOURCE}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mma_source"] = module
    spec.loader.exec_module(module)
    return module


def nvidia() -> tuple[Any, Any, Any]:
    """(device, context, profiling queue) of the first NVIDIA OpenCL GPU."""
    import pyopencl as cl

    for platform in cl.get_platforms():
        if "NVIDIA" in platform.name or DRY:
            dev = platform.get_devices()[0]
            ctx = cl.Context([dev])
            props = cl.command_queue_properties.PROFILING_ENABLE
            return dev, ctx, cl.CommandQueue(ctx, dev, properties=props)
    raise RuntimeError("no NVIDIA OpenCL platform: " + str([p.name for p in cl.get_platforms()]))


def build(ctx: Any, dev: Any, source: str, tag: str) -> tuple[Any, str]:
    """Build ``source``; return (program or None, build log), logging both to the detail file."""
    import pyopencl as cl

    prg = cl.Program(ctx, source)
    try:
        prg.build(options=BUILD_OPTIONS)
        ok = True
    except cl.RuntimeError as e:  # the log is in the message
        ok = False
        log = str(e)
    if ok:
        log = prg.get_build_info(dev, cl.program_build_info.LOG) or ""
    detail(f"=== build {tag}: {'ok' if ok else 'FAILED'}\n{log}")
    if not ok:
        detail(f"--- source {tag}\n{source}")
    return (prg if ok else None), log


def ptxas_summary(log: str) -> str:
    """'regs=R spill=S/L smem=B' from the ptxas lines of a -cl-nv-verbose log."""
    regs = re.findall(r"Used (\d+) registers", log)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    smem = re.findall(r"(\d+) bytes smem", log)
    out = f"regs={regs[-1] if regs else '?'}"
    if spills:
        out += f" spill={spills[-1][0]}/{spills[-1][1]}"
    if smem:
        out += f" smem={smem[-1]}"
    return out


def f16_bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.astype(np.float16)).view(np.uint16)


def child_tile(kind: str) -> dict[str, Any]:
    """Run one tile test (f16, tf32, probe: cp.async + ldmatrix + mma); compare with NumPy."""
    import pyopencl as cl

    src = load_source()
    dev, ctx, queue = nvidia()
    rng = np.random.default_rng(0)
    mf = cl.mem_flags
    if kind == "tf32":
        a = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
        b = rng.uniform(-1, 1, (8, 8)).astype(np.float32)
        source, name, ha, hb = src.TILE_TF32_SOURCE, "mma_tile_tf32", a, b
    else:
        a = rng.uniform(-1, 1, (16, 16)).astype(np.float16).astype(np.float32)
        b = rng.uniform(-1, 1, (16, 8)).astype(np.float16).astype(np.float32)
        ha, hb = f16_bits(a), f16_bits(b)
        source, name = (
            (src.TILE_F16_SOURCE, "mma_tile_f16")
            if kind == "f16"
            else (src.PROBE_SOURCE, "mma_probe")
        )
    source = source.replace("__asm__", ASM)
    prg, log = build(ctx, dev, source, f"tile {kind}")
    if prg is None:
        return {"ok": False, "error": "build failed", "log": log[-1500:]}
    da = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=ha)
    db = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=hb)
    c = np.zeros((16, 8), np.float32)
    dc = cl.Buffer(ctx, mf.WRITE_ONLY, c.nbytes)
    knl = getattr(prg, name)
    info = np.zeros(2, np.uint32)
    if kind == "probe":
        dinfo = cl.Buffer(ctx, mf.WRITE_ONLY, info.nbytes)
        knl(queue, (32,), (32,), da, db, dc, dinfo)
        cl.enqueue_copy(queue, info, dinfo)
    else:
        knl(queue, (32,), (32,), da, db, dc)
    cl.enqueue_copy(queue, c, dc)
    queue.finish()
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.abs(c - ref).max())
    tol = 5e-3 if kind == "tf32" else 1e-4
    out = {"ok": err < tol, "max_err": err, "ptxas": ptxas_summary(log)}
    if kind == "probe":
        out["local_addresses"] = [int(info[0]), int(info[1])]
    if not out["ok"]:
        detail(f"tile {kind} result\n{c}\nreference\n{ref}")
        out["c_row0"] = [round(float(v), 4) for v in c[0]]
        out["ref_row0"] = [round(float(v), 4) for v in ref[0]]
    return out


RATE_SOURCE = """\
__kernel void mma_rate(__global float* out, const int iters)
{
    const int l = (int)get_local_id(0);
    uint a[4][4], b[8][2];
    float acc[4][8][4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            a[i][j] = 0x3c003c00u ^ (uint)((l + i + j) & 1);
        }
    }
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        b[i][0] = 0x3c003c00u ^ (uint)(l & 1);
        b[i][1] = 0x3c003c00u ^ (uint)((l + i) & 1);
        #pragma unroll
        for (int m = 0; m < 4; ++m) {
            acc[m][i][0] = acc[m][i][1] = acc[m][i][2] = acc[m][i][3] = 0.0f;
        }
    }
    for (int it = 0; it < iters; ++it) {
        #pragma unroll
        for (int m = 0; m < 4; ++m) {
            #pragma unroll
            for (int n = 0; n < 8; ++n) {
                __asm__("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                        : "+f"(acc[m][n][0]), "+f"(acc[m][n][1]), "+f"(acc[m][n][2]),
                          "+f"(acc[m][n][3])
                        : "r"(a[m][0]), "r"(a[m][1]), "r"(a[m][2]), "r"(a[m][3]),
                          "r"(b[n][0]), "r"(b[n][1]));
            }
        }
    }
    float s = 0.0f;
    #pragma unroll
    for (int m = 0; m < 4; ++m) {
        #pragma unroll
        for (int n = 0; n < 8; ++n) {
            s += acc[m][n][0] + acc[m][n][1] + acc[m][n][2] + acc[m][n][3];
        }
    }
    out[get_global_id(0)] = s;
}
"""


def child_rate() -> dict[str, Any]:
    """TFLOP/s of back-to-back mma.sync (32 independent tiles per warp, registers only) for
    4-warp work-groups, 1..4 per SM: the ceiling the GEMM's inner loop works against."""
    import pyopencl as cl

    dev, ctx, queue = nvidia()
    prg, log = build(ctx, dev, RATE_SOURCE.replace("__asm__", ASM), "mma_rate")
    if prg is None:
        return {"ok": False, "error": "build failed", "log": log[-1500:]}
    knl = prg.mma_rate
    units = dev.max_compute_units
    out: dict[str, Any] = {"ok": True, "ptxas": ptxas_summary(log)}
    iters = 4096
    for per_sm in (1, 2, 3, 4):
        groups = units * per_sm
        buf = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, groups * 128 * 4)
        knl(queue, (groups * 128,), (128,), buf, np.int32(16))
        queue.finish()
        times = []
        for _ in range(5):
            e = knl(queue, (groups * 128,), (128,), buf, np.int32(iters))
            e.wait()
            times.append((e.profile.end - e.profile.start) * 1e-9)
        flops = groups * 4 * iters * 32 * 4096
        out[f"{per_sm}_per_sm"] = round(flops / min(times) / 1e12, 1)
    return out


def child_gemm(cfg: dict[str, Any], sizes: list[int], save_ptx: bool) -> dict[str, Any]:
    """Build one GEMM config, check it on CHECK_SHAPES, time it at ``sizes`` cubed."""
    import pyopencl as cl

    src = load_source()
    # diagnostics (timing only, results wrong): "_nocopy" drops the k loop's tile copies,
    # "_noldsm" its fragment loads; "_options" adds build options
    diag = {k: cfg[k] for k in cfg if k.startswith("_")}
    config = src.MmaConfig(**{k: v for k, v in cfg.items() if k not in diag}, emulate=DRY)
    dev, ctx, queue = nvidia()
    source = src.hgemm_source(config).replace("__asm__", ASM)
    if diag.get("_nocopy"):
        source = source.replace("LOAD_TILE(ws, kt + STAGES - 1);", "")
        source = source.replace("LOAD_TILE(next % STAGES, next);", "")
    if diag.get("_noldsm"):
        fake = (
            "#undef LDSM_X4\n#undef LDSM_X4_T\n"
            "#define LDSM_X4(r0, r1, r2, r3, addr) do { r0 = (addr); r1 = (addr) ^ 1u; "
            "r2 = (addr) ^ 2u; r3 = (addr) ^ 3u; } while (0)\n"
            "#define LDSM_X4_T(r0, r1, r2, r3, addr) LDSM_X4(r0, r1, r2, r3, addr)\n"
        )
        source = source.replace("#define TILE_AT(", fake + "#define TILE_AT(")
    global BUILD_OPTIONS
    BUILD_OPTIONS = BUILD_OPTIONS + diag.get("_options", [])
    prg, log = build(ctx, dev, source, config.label() + json.dumps(diag))
    if prg is None:
        return {"ok": False, "error": "build failed", "log": log[-1500:]}
    if save_ptx:
        binary = prg.get_info(cl.program_info.BINARIES)[0]
        (OUT / "probe_mma_best.ptx").write_bytes(binary)
        (OUT / "probe_mma_best.cl").write_text(source)
    knl = getattr(prg, src.hgemm_kernel_name(config))
    out_dtype = np.float16 if config.out_f16 else np.float32
    rng = np.random.default_rng(1)
    mf = cl.mem_flags

    def launch(da: Any, db: Any, dc: Any, batch: int, m: int, n: int, k: int) -> Any:
        tiles = -(-m // config.bm) * -(-n // config.bn)
        lda = m if config.trans_a else k
        ldb = k if config.trans_b else n
        i32, i64 = np.int32, np.int64
        return knl(
            queue,
            (tiles * config.threads, batch),
            (config.threads, 1),
            da, i64(0), i32(lda), i64(m * k),
            db, i64(0), i32(ldb), i64(k * n),
            dc, i64(0), i32(n), i64(m * n),
            i32(m), i32(n), i32(k),
        )  # fmt: skip

    def operands(batch: int, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Random A and B in their stored layouts, and the float32 reference product."""
        a = rng.uniform(-1, 1, (batch, k, m) if config.trans_a else (batch, m, k))
        b = rng.uniform(-1, 1, (batch, n, k) if config.trans_b else (batch, k, n))
        return a.astype(np.float16), b.astype(np.float16)

    result: dict[str, Any] = {"ptxas": ptxas_summary(log), "errors": {}, "tflops": {}}
    ok = True
    for batch, m, n, k in CHECK_SHAPES:
        a, b = operands(batch, m, n, k)
        da = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a.view(np.uint16))
        db = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b.view(np.uint16))
        c = np.full((batch, m, n), np.nan, out_dtype)
        dc = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=c)
        launch(da, db, dc, batch, m, n, k)
        cl.enqueue_copy(queue, c, dc)
        queue.finish()
        fa, fb = a.astype(np.float32), b.astype(np.float32)
        fa = fa.transpose(0, 2, 1) if config.trans_a else fa
        fb = fb.transpose(0, 2, 1) if config.trans_b else fb
        ref = np.matmul(fa, fb)
        scale = float(np.abs(ref).max())
        rel = float(np.nanmax(np.abs(c.astype(np.float32) - ref)) / scale)
        if np.isnan(c).any():
            rel = float("nan")
        tol = 2e-3 if config.out_f16 else 1e-4
        good = rel < tol
        ok = ok and good
        result["errors"][f"{batch}x{m}x{n}x{k}"] = rel
        if not good:
            bad = np.argwhere(~(np.abs(c.astype(np.float32) - ref) <= tol * scale))
            detail(
                f"{config.label()} {batch}x{m}x{n}x{k}: {len(bad)} bad, first {bad[:8].tolist()}"
            )
    result["ok"] = ok
    for s in sizes:
        a = rng.uniform(-1, 1, (s, s)).astype(np.float16)
        da = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a.view(np.uint16))
        db = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a.view(np.uint16))
        dc = cl.Buffer(ctx, mf.READ_WRITE, s * s * np.dtype(out_dtype).itemsize)
        for _ in range(3):
            launch(da, db, dc, 1, s, s, s)
        queue.finish()
        reps = 30 if s <= 4096 else 10
        t0 = time.perf_counter()
        events = [launch(da, db, dc, 1, s, s, s) for _ in range(reps)]
        queue.finish()
        wall = (time.perf_counter() - t0) / reps
        kernel = float(np.median([(e.profile.end - e.profile.start) * 1e-9 for e in events]))
        result["tflops"][s] = 2 * s**3 / kernel / 1e12
        result.setdefault("wall_tflops", {})[s] = 2 * s**3 / wall / 1e12
    return result


def run_child(args: list[str], timeout: float = 90) -> dict[str, Any]:
    """Run this script as a child; return its RESULT json or the failure's tail."""
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timeout {timeout}s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])  # type: ignore[no-any-return]
    tail = (proc.stdout + proc.stderr)[-1200:]
    detail(f"child {args} rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return {"ok": False, "error": f"rc={proc.returncode}", "tail": tail}


def torch_times(sizes: list[int]) -> dict[int, float]:
    """TFLOP/s of torch.matmul float16 on CUDA (median of CUDA-event timings)."""
    import torch

    out = {}
    for s in sizes:
        a = torch.rand(s, s, device="cuda", dtype=torch.float16) * 2 - 1
        b = torch.rand(s, s, device="cuda", dtype=torch.float16) * 2 - 1
        for _ in range(3):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        times = []
        for _ in range(30 if s <= 4096 else 10):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        out[s] = 2 * s**3 / float(np.median(times)) / 1e12
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tile", help="child: run one tile test")
    parser.add_argument("--gemm", help="child: one GEMM config (json)")
    parser.add_argument("--sizes", default="", help="child: timing sizes")
    parser.add_argument("--save-ptx", action="store_true")
    parser.add_argument("--configs", default="", help="only these config indices (0,3,...)")
    parser.add_argument("--no-tests", action="store_true", help="skip test_matmul_mma.py")
    args = parser.parse_args()
    if args.tile:
        result = child_rate() if args.tile == "rate" else child_tile(args.tile)
        print("RESULT " + json.dumps(result))
        return
    if args.gemm:
        sizes = [int(s) for s in args.sizes.split(",") if s]
        print("RESULT " + json.dumps(child_gemm(json.loads(args.gemm), sizes, args.save_ptx)))
        return
    sweep(args)
    if not args.no_tests:
        run_tests()


def sweep(args: argparse.Namespace) -> None:
    """Tiles, configs, and the best configs beside torch (the parent process's work)."""
    OUT.mkdir(parents=True, exist_ok=True)
    DETAIL.write_text("")
    dev, _, _ = nvidia()
    print(
        f"device: {dev.name} | driver {dev.driver_version} | {dev.version} | "
        f"{dev.opencl_c_version} | local {dev.local_mem_size} | CUs {dev.max_compute_units}"
    )
    print("== tiles (max abs error vs NumPy float64)")
    for kind in ["f16", "tf32", "probe", "rate"]:
        r = run_child(["--tile", kind])
        print(f"tile {kind:10s} {json.dumps(r)[:600]}")
        if kind == "f16" and not r.get("ok") and ASM == "__asm__":
            os.environ["PROBE_MMA_ASM"] = "asm"  # children inherit it
            r = run_child(["--tile", kind])
            print(f"tile {kind} with 'asm': {json.dumps(r)[:600]}")
            if not r.get("ok"):
                os.environ["PROBE_MMA_ASM"] = "__asm__"
    print("== GEMM configs (rel err = max|C - ref| / max|ref|; TFLOP/s from kernel events)")
    chosen = [int(i) for i in args.configs.split(",") if i] or list(range(len(CONFIGS)))
    results = []
    for i in chosen:
        cfg = CONFIGS[i]
        r = run_child(["--gemm", json.dumps(cfg), "--sizes", ",".join(map(str, SWEEP_SIZES))])
        results.append((cfg, r))
        plain = {k: v for k, v in cfg.items() if not k.startswith("_")}
        label = load_source().MmaConfig(**plain).label()
        label += "".join(f"{k}" for k in cfg if k.startswith("_"))
        if "tflops" in r:
            errs = " ".join(f"{v:.1e}" for v in r["errors"].values())
            tf = " ".join(f"{s}:{v:6.1f}" for s, v in r["tflops"].items())
            print(f"[{i:2d}] {label:38s} ok={r['ok']} {r['ptxas']} err {errs} | TF/s {tf}")
        else:
            print(f"[{i:2d}] {label:38s} FAILED {json.dumps(r)[:700]}")
    good = [(cfg, r) for cfg, r in results if r.get("ok") and r.get("tflops")]
    if not good:
        print("no correct GEMM config; see probe_mma_detail.txt")
        return
    best_cfg, _ = max(good, key=lambda cr: cr[1]["tflops"]["4096"])
    small = [(cfg, r) for cfg, r in good if cfg["bm"] * cfg["bn"] <= 64 * 128]
    small_cfg = max(small, key=lambda cr: cr[1]["tflops"]["2048"])[0] if small else best_cfg
    print(f"== best {json.dumps(best_cfg)}, small {json.dumps(small_cfg)} vs torch fp16")
    full = run_child(
        ["--gemm", json.dumps(best_cfg), "--sizes", ",".join(map(str, FULL_SIZES)), "--save-ptx"],
        timeout=180,
    )
    small_sizes = [s for s in FULL_SIZES if s <= 2048]
    fulls = run_child(["--gemm", json.dumps(small_cfg), "--sizes", ",".join(map(str, small_sizes))])
    try:
        ref = torch_times(FULL_SIZES)
    except Exception as e:  # report, do not lose the OpenCL figures
        print(f"torch failed: {e!r}")
        ref = {}
    print(f"{'size':>6s} {'best':>7s} {'wall':>7s} {'small':>7s} {'torch':>7s} {'ratio':>6s}")
    nan = float("nan")
    for s in FULL_SIZES:
        ours = full.get("tflops", {}).get(str(s), nan)
        wall = full.get("wall_tflops", {}).get(str(s), nan)
        little = fulls.get("tflops", {}).get(str(s), nan)
        theirs = ref.get(s, nan)
        ratio = max(ours, little if little == little else 0.0) / theirs
        print(f"{s:6d} {ours:7.1f} {wall:7.1f} {little:7.1f} {theirs:7.1f} {ratio:6.2f}")


def run_tests() -> None:
    """netcl's tensor-core tests on the GPU (NETCL_DEVICE=cl), summary lines only."""
    test = ROOT / "packages/netcl-ops/tests/test_matmul_mma.py"
    env = {**os.environ, "NETCL_DEVICE": "cl"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(test)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=150)
    detail(f"pytest {test}\n{proc.stdout}\n{proc.stderr}")
    print("== pytest test_matmul_mma.py on the GPU")
    print("\n".join((proc.stdout + proc.stderr).strip().splitlines()[-12:]))


if __name__ == "__main__":
    main()
