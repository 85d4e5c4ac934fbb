#pragma OPENCL EXTENSION cl_khr_fp64 : enable
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
#define T double
#define CT double
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))

#define RNN_SIG(x) ((CT)1 / ((CT)1 + exp(-(x))))
#define BIAS(k) (has_bias ? LD(bias, boff + (k) * H + j) : (CT)0)

__kernel void rnn_step(__global const T* xp, const int xoff, __global const T* hh,
                       const int hhoff, __global const T* bias, const int boff,
                       const int has_bias, __global T* hout, const int hoff,
                       const int B, const int H, const int relu) {
    const int i = get_global_id(0);
    if (i >= B * H) return;
    const int j = i % H;
    const CT pre = LD(xp, xoff + i) + LD(hh, hhoff + i) + BIAS(0);
    ST(hout, hoff + i, relu ? (pre > 0 ? pre : (CT)0) : tanh(pre));
}

__kernel void rnn_step_back(__global const T* dy, const int dyoff, const int has_dy,
                            __global const T* rec, const int recoff, const int has_rec,
                            __global const T* h, const int hoff, __global T* dx,
                            const int dxoff, const int B, const int H, const int relu) {
    const int i = get_global_id(0);
    if (i >= B * H) return;
    CT dh = (has_dy ? LD(dy, dyoff + i) : (CT)0) + (has_rec ? LD(rec, recoff + i) : (CT)0);
    const CT y = LD(h, hoff + i);
    ST(dx, dxoff + i, relu ? (y > 0 ? dh : (CT)0) : dh * ((CT)1 - y * y));
}

__kernel void lstm_step(__global const T* xp, const int xoff, __global const T* hh,
                        const int hhoff, __global const T* bias, const int boff,
                        const int has_bias, __global const T* cprev, const int cpoff,
                        __global T* cnext, const int cnoff, __global T* hout, const int hoff,
                        __global T* gates, const int goff, const int B, const int H) {
    const int i = get_global_id(0);
    if (i >= B * H) return;
    const int b = i / H, j = i % H;
    const int g = b * 4 * H + j;
    const CT gi = RNN_SIG(LD(xp, xoff + g) + LD(hh, hhoff + g) + BIAS(0));
    const CT gf = RNN_SIG(LD(xp, xoff + g + H) + LD(hh, hhoff + g + H) + BIAS(1));
    const CT gg = tanh(LD(xp, xoff + g + 2 * H) + LD(hh, hhoff + g + 2 * H) + BIAS(2));
    const CT go = RNN_SIG(LD(xp, xoff + g + 3 * H) + LD(hh, hhoff + g + 3 * H) + BIAS(3));
    const CT c = gf * LD(cprev, cpoff + i) + gi * gg;
    ST(cnext, cnoff + i, c);
    ST(hout, hoff + i, go * tanh(c));
    ST(gates, goff + g, gi);
    ST(gates, goff + g + H, gf);
    ST(gates, goff + g + 2 * H, gg);
    ST(gates, goff + g + 3 * H, go);
}

__kernel void lstm_step_back(__global const T* dy, const int dyoff, const int has_dy,
                             __global const T* rec, const int recoff, const int has_rec,
                             __global const T* dcin, const int dcinoff,
                             __global T* dcout, const int dcoutoff,
                             __global const T* gates, const int goff,
                             __global const T* cprev, const int cpoff,
                             __global const T* cnext, const int cnoff,
                             __global T* dx, const int dxoff, const int B, const int H) {
    const int i = get_global_id(0);
    if (i >= B * H) return;
    const int b = i / H, j = i % H;
    const int g = b * 4 * H + j;
    const CT dh = (has_dy ? LD(dy, dyoff + i) : (CT)0) + (has_rec ? LD(rec, recoff + i) : (CT)0);
    const CT gi = LD(gates, goff + g), gf = LD(gates, goff + g + H);
    const CT gg = LD(gates, goff + g + 2 * H), go = LD(gates, goff + g + 3 * H);
    const CT tc = tanh(LD(cnext, cnoff + i));
    const CT dc = LD(dcin, dcinoff + i) + dh * go * ((CT)1 - tc * tc);
    ST(dcout, dcoutoff + i, dc * gf);
    ST(dx, dxoff + g, dc * gg * gi * ((CT)1 - gi));
    ST(dx, dxoff + g + H, dc * LD(cprev, cpoff + i) * gf * ((CT)1 - gf));
    ST(dx, dxoff + g + 2 * H, dc * gi * ((CT)1 - gg * gg));
    ST(dx, dxoff + g + 3 * H, dh * tc * go * ((CT)1 - go));
}

__kernel void gru_step(__global const T* xp, const int xoff, __global const T* hh,
                       const int hhoff, __global const T* bias, const int boff,
                       const int has_bias, __global const T* hprev, const int hpoff,
                       __global T* hout, const int hoff, __global T* gates, const int goff,
                       const int B, const int H) {
    const int i = get_global_id(0);
    if (i >= B * H) return;
    const int b = i / H, j = i % H;
    const int x = b * 3 * H + j, g = b * 4 * H + j;
    const CT r = RNN_SIG(LD(xp, xoff + x) + LD(hh, hhoff + x) + BIAS(0));
    const CT z = RNN_SIG(LD(xp, xoff + x + H) + LD(hh, hhoff + x + H) + BIAS(1));
    const CT hn = LD(hh, hhoff + x + 2 * H) + BIAS(2);
    const CT n = tanh(LD(xp, xoff + x + 2 * H) + r * hn);
    ST(hout, hoff + i, ((CT)1 - z) * n + z * LD(hprev, hpoff + i));
    ST(gates, goff + g, r);
    ST(gates, goff + g + H, z);
    ST(gates, goff + g + 2 * H, n);
    ST(gates, goff + g + 3 * H, hn);
}

__kernel void gru_step_back(__global const T* dy, const int dyoff, const int has_dy,
                            __global const T* rec, const int recoff, const int has_rec,
                            __global T* carry, const int carryoff, const int has_carry,
                            __global const T* gates, const int goff,
                            __global const T* hprev, const int hpoff,
                            __global T* dx, const int dxoff, __global T* dhh,
                            const int dhhoff, const int B, const int H) {
    const int i = get_global_id(0);
    if (i >= B * H) return;
    const int b = i / H, j = i % H;
    const int x = b * 3 * H + j, g = b * 4 * H + j;
    const CT dh = (has_dy ? LD(dy, dyoff + i) : (CT)0) + (has_rec ? LD(rec, recoff + i) : (CT)0)
        + (has_carry ? LD(carry, carryoff + i) : (CT)0);
    const CT r = LD(gates, goff + g), z = LD(gates, goff + g + H);
    const CT n = LD(gates, goff + g + 2 * H), hn = LD(gates, goff + g + 3 * H);
    const CT dn = dh * ((CT)1 - z) * ((CT)1 - n * n);
    const CT dr = dn * hn * r * ((CT)1 - r);
    const CT dz = dh * (LD(hprev, hpoff + i) - n) * z * ((CT)1 - z);
    ST(carry, carryoff + i, dh * z);
    ST(dx, dxoff + x, dr);
    ST(dx, dxoff + x + H, dz);
    ST(dx, dxoff + x + 2 * H, dn);
    ST(dhh, dhhoff + x, dr);
    ST(dhh, dhhoff + x + H, dz);
    ST(dhh, dhhoff + x + 2 * H, dn * r);
}

__kernel void rnn_copy(__global T* dst, const int doff, __global const T* a, const int aoff,
                       __global const T* b, const int boff, const int has_a, const int has_b,
                       const int n) {
    const int i = get_global_id(0);
    if (i >= n) return;
    ST(dst, doff + i, (has_a ? LD(a, aoff + i) : (CT)0) + (has_b ? LD(b, boff + i) : (CT)0));
}
