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

__kernel void bias_add(__global const T* x, __global const T* bias, __global T* y,
                       const int offx, const int offb, const int total, const int channels,
                       const int inner) {
    const int i = get_global_id(0);
    if (i >= total) return;
    ST(y, i, LD(x, offx + i) + LD(bias, offb + (i / inner) % channels));
}

// CPU devices (NOTE [ Bias add on CPU devices ]): one work-item per contiguous run of ``run``
// elements sharing one bias pattern, a serial loop without a division per element. The
// vec_type_hint keeps Intel's compiler from vectorizing across work-items (strided gathers).
__kernel __attribute__((vec_type_hint(float4)))
void bias_add_rows(__global const T* x, __global const T* bias, __global T* y,
                   const int offx, const int offb, const int rows, const int run,
                   const int channels, const int inner) {
    const int r = get_global_id(0);
    if (r >= rows) return;
    const __global T* xr = x + offx + (long)r * run;
    __global T* yr = y + (long)r * run;
    const __global T* b = bias + offb;
    if (inner == 1) {
        for (int j = 0; j < run; ++j) ST(yr, j, LD(xr, j) + LD(b, j));
    } else {
        const CT v = LD(b, r % channels);
        for (int j = 0; j < run; ++j) ST(yr, j, LD(xr, j) + v);
    }
}

