"""How many work-groups an NVIDIA SM holds at once through OpenCL, by local memory and size.

Each work-group reads its SM (``%smid``) and the global timer at its start, spins for a fixed
time, and records its end; the most work-groups whose spans overlap on one SM is what the
driver let reside there. It tells whether NVIDIA's OpenCL driver gives 48 KiB work-groups the
shared-memory carveout for several per SM (the tensor-core GEMM's pipeline depth depends on
it: NOTE [ What bounds the tensor-core GEMM ] in netcl.ops._matmul_mma_source).

Run on the GPU machine: ``python3 scripts/gpu/occupancy_probe.py``.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl

SOURCE = """
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void occ(__global ulong* spans, __global uint* sms, const ulong spin_ns)
{
  __local uint buf[LOCAL_WORDS];
  const int l = get_local_id(0);
  for (int i = l; i < LOCAL_WORDS; i += NT) buf[i] = i;
  barrier(CLK_LOCAL_MEM_FENCE);
  ulong t0, t;
  uint sm;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  uint acc = 0;
  do {
    acc += buf[(acc + l) % LOCAL_WORDS];
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < spin_ns);
  if (l == 0) {
    const int g = get_group_id(0);
    spans[2 * g] = t0;
    spans[2 * g + 1] = t;
    sms[g] = sm + (acc == 0xFFFFFFFFu);
  }
}
"""


def _gpu() -> cl.Device:
    for platform in cl.get_platforms():
        for device in platform.get_devices():
            if "NVIDIA" in platform.name:
                return device
    raise SystemExit("no NVIDIA OpenCL device")


def resident(ctx: cl.Context, queue: cl.CommandQueue, local_bytes: int, threads: int,
             groups: int) -> tuple[int, float]:
    """(most work-groups overlapping on one SM, mean per SM) for one kernel shape."""
    words = max(local_bytes // 4, 1)
    prg = cl.Program(ctx, SOURCE).build(options=f"-DNT={threads} -DLOCAL_WORDS={words}")
    spans = np.zeros(2 * groups, np.uint64)
    sms = np.zeros(groups, np.uint32)
    mf = cl.mem_flags
    d_spans = cl.Buffer(ctx, mf.WRITE_ONLY, spans.nbytes)
    d_sms = cl.Buffer(ctx, mf.WRITE_ONLY, sms.nbytes)
    prg.occ(queue, (groups * threads,), (threads,), d_spans, d_sms, np.uint64(200_000))
    cl.enqueue_copy(queue, spans, d_spans)
    cl.enqueue_copy(queue, sms, d_sms)
    starts, ends = spans[0::2].astype(np.int64), spans[1::2].astype(np.int64)
    most, per_sm = 0, []
    for sm in np.unique(sms):
        on = sms == sm
        events = sorted([(s, 1) for s in starts[on]] + [(e, -1) for e in ends[on]])
        live = peak = 0
        for _, step in events:
            live += step
            peak = max(peak, live)
        most = max(most, peak)
        per_sm.append(peak)
    return most, float(np.mean(per_sm))


def main() -> None:
    device = _gpu()
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx)
    units = device.max_compute_units
    print(f"{device.name}: {units} SMs, local memory {device.local_mem_size} B, "
          f"driver {device.driver_version}")
    for threads in (128, 256):
        for kib in (0, 8, 16, 24, 32, 40, 48):
            most, mean = resident(ctx, queue, kib * 1024, threads, units * 16)
            print(f"threads {threads:4d} local {kib:2d} KiB: at most {most} work-groups an SM "
                  f"at once (mean of SMs' peaks {mean:.1f}; {most * kib} KiB of local memory)")


if __name__ == "__main__":
    main()
