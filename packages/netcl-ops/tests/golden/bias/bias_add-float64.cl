#pragma OPENCL EXTENSION cl_khr_fp64 : enable
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
#define T double
#define CT double
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))

__kernel void bias_add(__global const T* x, __global const T* bias, __global T* y,
                       const int offx, const int offb, const int total, const int channels,
                       const int inner) {
    const int i = get_global_id(0);
    if (i >= total) return;
    ST(y, i, LD(x, offx + i) + LD(bias, offb + (i / inner) % channels));
}
