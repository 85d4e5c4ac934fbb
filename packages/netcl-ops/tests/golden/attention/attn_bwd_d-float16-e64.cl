#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#ifndef NETCL_PRIMITIVES
#define NETCL_PRIMITIVES
#define NETCL_LOAD(p, i) ((p)[(i)])
#define NETCL_STORE(p, i, v) ((p)[(i)] = (v))
#define NETCL_LOAD_HALF(p, i) vload_half((i), (p))
#define NETCL_STORE_HALF(p, i, v) vstore_half((v), (i), (p))
#define NETCL_ADD(a, b) ((a) + (b))
#define NETCL_SUB(a, b) ((a) - (b))
#define NETCL_MUL(a, b) ((a) * (b))
#define NETCL_DIV(a, b) ((a) / (b))
#define NETCL_NEG(a) (-(a))
#define NETCL_SQR(a) ((a) * (a))
#define NETCL_RELU(x) ((x) > 0 ? (x) : 0)
#define NETCL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define NETCL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NETCL_SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#endif
#define T half
#define CT float
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((v), (i), (p))
#define IDX int
#define EV 64
#define BM 64
#define BN 16

__kernel __attribute__((reqd_work_group_size(BM, 1, 1)))
void attn_bwd_d(__global CT* dd, __global const T* dout, const IDX go,
                __global const T* out, const IDX oo, const IDX rows)
{
  __local CT part[BM];
  const int lid = get_local_id(0), lane = lid % BN;
  const IDX r = (IDX)get_group_id(0) * (BM / BN) + lid / BN;
  CT acc = (CT)0;
  if (r < rows) {
    const IDX base = r * EV;
    for (int e = lane; e < EV; e += BN)
      acc = fma(LD(dout, go + base + e), LD(out, oo + base + e), acc);
  }
  part[lid] = acc;
  for (int s = BN / 2; s > 0; s /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane < s) part[lid] += part[lid + s];
  }
  if (lane == 0 && r < rows) dd[r] = part[lid];
}
