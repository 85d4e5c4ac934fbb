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
#define S float
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((v), (i), (p))
#define REDUCE_GROUP 256

void rmsprop_item(__global T* p, __global const T* g, __global S* sq, __global S* buf,
                  __global S* gavg, __global const float* steps, const int i, const int index,
                  const float lr, const float alpha, const float eps, const float wd,
                  const float momentum, const int centered) {
  const CT param = LD(p, i);
  const CT grad = LD(g, i) + (CT)wd * param;
  const CT s = (CT)alpha * sq[i] + (CT)(1.0f - alpha) * grad * grad;
  sq[i] = (S)s;
  CT denom_sq = s;
  if (centered) {
    const CT ga = (CT)alpha * gavg[i] + (CT)(1.0f - alpha) * grad;
    gavg[i] = (S)ga;
    denom_sq = s - ga * ga;
  }
  CT step = grad / (sqrt(denom_sq) + (CT)eps);
  if (momentum > 0.0f) {
    const CT b = (CT)momentum * buf[i] + step;
    buf[i] = (S)b;
    step = b;
  }
  ST(p, i, param - (CT)lr * step);
}

__kernel void rmsprop(__global T* p, __global const T* g, __global S* sq, __global S* buf,
                      __global S* gavg, __global const float* steps, __global const int* skip,
                      const int n, const int index, const float lr, const float alpha,
                      const float eps, const float wd, const float momentum, const int centered) {
  const int i = get_global_id(0);
  if (i >= n || skip[0]) return;
  rmsprop_item(p, g, sq, buf, gavg, steps, i, index, lr, alpha, eps, wd, momentum, centered);
}
