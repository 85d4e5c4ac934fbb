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
#define T float
#define CT float
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define IDX int
#define LMAX 256
#define MAXNAN(a, b) (((b) > (a) || isnan(b)) ? (b) : (a))
#define RESULT (take_log ? v - m - lse : exp(v - m) / sum)

__kernel void softmax_row(__global T* out, __global const T* x, const IDX xo,
                          const int take_log, const IDX R)
{
  __local CT buf[LMAX];
  const IDX L = get_local_size(0), l = get_local_id(0);
  const IDX base = get_group_id(0) * R;
  CT m = -INFINITY;
  for (IDX r = l; r < R; r += L) { const CT v = LD(x, xo + base + r); m = MAXNAN(m, v); }
  buf[l] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (IDX s = L / 2; s > 0; s >>= 1) {
    if (l < s) buf[l] = MAXNAN(buf[l], buf[l + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  m = buf[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  CT sum = 0;
  for (IDX r = l; r < R; r += L) sum += exp(LD(x, xo + base + r) - m);
  buf[l] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (IDX s = L / 2; s > 0; s >>= 1) {
    if (l < s) buf[l] += buf[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  sum = buf[0];
  const CT lse = log(sum);
  for (IDX r = l; r < R; r += L) { const CT v = LD(x, xo + base + r); ST(out, base + r, RESULT); }
}
