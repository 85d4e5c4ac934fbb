#ifndef NETCL_PRIMITIVES
#define NETCL_PRIMITIVES
#define LOAD(p, i) ((p)[(i)])
#define STORE(p, i, v) ((p)[(i)] = (v))
#define LOAD_HALF(p, i) vload_half((i), (p))
#define STORE_HALF(p, i, v) vstore_half((v), (i), (p))
#define ADD(a, b) ((a) + (b))
#define SUB(a, b) ((a) - (b))
#define MUL(a, b) ((a) * (b))
#define DIV(a, b) ((a) / (b))
#define NEG(a) (-(a))
#define SQR(a) ((a) * (a))
#define RELU(x) ((x) > 0 ? (x) : 0)
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#endif
#define T float
#define REDUCE_GROUP 256

__kernel void rmsprop(__global T* p, __global const T* g, __global T* sq, __global T* buf,
                      __global T* gavg, const int n, const float lr, const float alpha,
                      const float eps, const float wd, const float momentum,
                      const int centered) {
  int i = get_global_id(0);
  if (i >= n) return;
  T grad = g[i] + (T)wd * p[i];
  T s = (T)alpha * sq[i] + (T)(1.0f - alpha) * grad * grad;
  sq[i] = s;
  T denom_sq = s;
  if (centered) {
    T ga = (T)alpha * gavg[i] + (T)(1.0f - alpha) * grad;
    gavg[i] = ga;
    denom_sq = s - ga * ga;
  }
  T step = grad / (sqrt(denom_sq) + (T)eps);
  if (momentum > 0.0f) {
    T b = (T)momentum * buf[i] + step;
    buf[i] = b;
    step = b;
  }
  p[i] -= (T)lr * step;
}
