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
#define S float
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define REDUCE_GROUP 256

void sgd_item(__global T* p, __global const T* g, __global S* buf, __global const float* steps,
              const int i, const int index, const float lr, const float momentum,
              const float dampening, const float wd, const int nesterov) {
  const int first = steps[3 * index] == 1.0f;
  const CT param = LD(p, i);
  CT grad = LD(g, i) + (CT)wd * param;
  if (momentum != 0.0f) {
    const CT b = first ? grad : (CT)momentum * buf[i] + (CT)(1.0f - dampening) * grad;
    buf[i] = (S)b;
    grad = nesterov ? grad + (CT)momentum * b : b;
  }
  ST(p, i, param - (CT)lr * grad);
}

__kernel void sgd(__global T* p, __global const T* g, __global S* buf,
                  __global const float* steps, __global const int* skip, const int n,
                  const int index, const float lr, const float momentum, const float dampening,
                  const float wd, const int nesterov) {
  const int i = get_global_id(0);
  if (i >= n || skip[0]) return;
  sgd_item(p, g, buf, steps, i, index, lr, momentum, dampening, wd, nesterov);
}
