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
#define CT float
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))

__kernel void conv2d_sum_batch(__global const T* parts, __global T* out, const int size,
                               const int nb, const int accumulate) {
    const int i = get_global_id(0);
    if (i >= size) return;
    CT acc = accumulate ? LD(out, i) : (CT)0;
    for (int b = 0; b < nb; ++b) acc += LD(parts, (long)b * size + i);
    ST(out, i, acc);
}
