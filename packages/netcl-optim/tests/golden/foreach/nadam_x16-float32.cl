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

void nadam_item(__global T* p, __global const T* g, __global S* m, __global S* v,
                __global S* mu_product, __global const float* steps, const int i,
                const int index, const float lr, const float b1, const float b2,
                const float eps, const float wd, const float psi_log, const int decoupled) {
  const float tf = steps[3 * index];
  const int t = (int)tf;
  const CT bc2 = (CT)steps[3 * index + 2];
  const CT mu = (CT)b1 * ((CT)1 - (CT)0.5 * exp((CT)tf * (CT)psi_log));
  const CT mu_next = (CT)b1 * ((CT)1 - (CT)0.5 * exp(((CT)tf + (CT)1) * (CT)psi_log));
  const CT prod = (CT)mu_product[(t - 1) & 1] * mu;  // NOTE [ NAdam's momentum product ]
  if (i == 0) mu_product[t & 1] = (S)prod;
  CT param = LD(p, i);
  CT grad = LD(g, i);
  if (decoupled) param *= (CT)(1.0f - lr * wd); else grad += (CT)wd * param;
  const CT mi = (CT)b1 * m[i] + (CT)(1.0f - b1) * grad;
  const CT vi = (CT)b2 * v[i] + (CT)(1.0f - b2) * grad * grad;
  m[i] = (S)mi;
  v[i] = (S)vi;
  const CT denom = sqrt(vi / bc2) + (CT)eps;
  param -= (CT)lr * ((CT)1 - mu) / ((CT)1 - prod) * grad / denom;
  param -= (CT)lr * mu_next / ((CT)1 - prod * mu_next) * mi / denom;
  ST(p, i, param);
}

__kernel void nadam_x16(__global const float* steps, __global const int* skip, const float lr,
                        const float b1, const float b2, const float eps, const float wd,
                        const float psi_log, const int decoupled, __global T* p_0,
                        __global const T* g_0, __global S* m_0, __global S* v_0,
                        __global S* mu_product_0, const int index_0, const int n_0,
                        const int end_0, __global T* p_1, __global const T* g_1,
                        __global S* m_1, __global S* v_1, __global S* mu_product_1,
                        const int index_1, const int n_1, const int end_1, __global T* p_2,
                        __global const T* g_2, __global S* m_2, __global S* v_2,
                        __global S* mu_product_2, const int index_2, const int n_2,
                        const int end_2, __global T* p_3, __global const T* g_3,
                        __global S* m_3, __global S* v_3, __global S* mu_product_3,
                        const int index_3, const int n_3, const int end_3, __global T* p_4,
                        __global const T* g_4, __global S* m_4, __global S* v_4,
                        __global S* mu_product_4, const int index_4, const int n_4,
                        const int end_4, __global T* p_5, __global const T* g_5,
                        __global S* m_5, __global S* v_5, __global S* mu_product_5,
                        const int index_5, const int n_5, const int end_5, __global T* p_6,
                        __global const T* g_6, __global S* m_6, __global S* v_6,
                        __global S* mu_product_6, const int index_6, const int n_6,
                        const int end_6, __global T* p_7, __global const T* g_7,
                        __global S* m_7, __global S* v_7, __global S* mu_product_7,
                        const int index_7, const int n_7, const int end_7, __global T* p_8,
                        __global const T* g_8, __global S* m_8, __global S* v_8,
                        __global S* mu_product_8, const int index_8, const int n_8,
                        const int end_8, __global T* p_9, __global const T* g_9,
                        __global S* m_9, __global S* v_9, __global S* mu_product_9,
                        const int index_9, const int n_9, const int end_9, __global T* p_10,
                        __global const T* g_10, __global S* m_10, __global S* v_10,
                        __global S* mu_product_10, const int index_10, const int n_10,
                        const int end_10, __global T* p_11, __global const T* g_11,
                        __global S* m_11, __global S* v_11, __global S* mu_product_11,
                        const int index_11, const int n_11, const int end_11, __global T* p_12,
                        __global const T* g_12, __global S* m_12, __global S* v_12,
                        __global S* mu_product_12, const int index_12, const int n_12,
                        const int end_12, __global T* p_13, __global const T* g_13,
                        __global S* m_13, __global S* v_13, __global S* mu_product_13,
                        const int index_13, const int n_13, const int end_13, __global T* p_14,
                        __global const T* g_14, __global S* m_14, __global S* v_14,
                        __global S* mu_product_14, const int index_14, const int n_14,
                        const int end_14, __global T* p_15, __global const T* g_15,
                        __global S* m_15, __global S* v_15, __global S* mu_product_15,
                        const int index_15, const int n_15, const int end_15) {
  // up to 16 parameters per launch: NOTE [ Foreach updates ]
  const int base = get_group_id(0) * get_local_size(0);  // one slot per group
  if (skip[0]) return;
  int index = index_0, n = n_0, start = 0;
  __global T* p = p_0;
  __global const T* g = g_0;
  __global S* m = m_0;
  __global S* v = v_0;
  __global S* mu_product = mu_product_0;
  if (base >= end_0) { p = p_1; g = g_1; m = m_1; v = v_1; mu_product = mu_product_1; index = index_1; n = n_1; start = end_0; }
  if (base >= end_1) { p = p_2; g = g_2; m = m_2; v = v_2; mu_product = mu_product_2; index = index_2; n = n_2; start = end_1; }
  if (base >= end_2) { p = p_3; g = g_3; m = m_3; v = v_3; mu_product = mu_product_3; index = index_3; n = n_3; start = end_2; }
  if (base >= end_3) { p = p_4; g = g_4; m = m_4; v = v_4; mu_product = mu_product_4; index = index_4; n = n_4; start = end_3; }
  if (base >= end_4) { p = p_5; g = g_5; m = m_5; v = v_5; mu_product = mu_product_5; index = index_5; n = n_5; start = end_4; }
  if (base >= end_5) { p = p_6; g = g_6; m = m_6; v = v_6; mu_product = mu_product_6; index = index_6; n = n_6; start = end_5; }
  if (base >= end_6) { p = p_7; g = g_7; m = m_7; v = v_7; mu_product = mu_product_7; index = index_7; n = n_7; start = end_6; }
  if (base >= end_7) { p = p_8; g = g_8; m = m_8; v = v_8; mu_product = mu_product_8; index = index_8; n = n_8; start = end_7; }
  if (base >= end_8) { p = p_9; g = g_9; m = m_9; v = v_9; mu_product = mu_product_9; index = index_9; n = n_9; start = end_8; }
  if (base >= end_9) { p = p_10; g = g_10; m = m_10; v = v_10; mu_product = mu_product_10; index = index_10; n = n_10; start = end_9; }
  if (base >= end_10) { p = p_11; g = g_11; m = m_11; v = v_11; mu_product = mu_product_11; index = index_11; n = n_11; start = end_10; }
  if (base >= end_11) { p = p_12; g = g_12; m = m_12; v = v_12; mu_product = mu_product_12; index = index_12; n = n_12; start = end_11; }
  if (base >= end_12) { p = p_13; g = g_13; m = m_13; v = v_13; mu_product = mu_product_13; index = index_13; n = n_13; start = end_12; }
  if (base >= end_13) { p = p_14; g = g_14; m = m_14; v = v_14; mu_product = mu_product_14; index = index_14; n = n_14; start = end_13; }
  if (base >= end_14) { p = p_15; g = g_15; m = m_15; v = v_15; mu_product = mu_product_15; index = index_15; n = n_15; start = end_14; }
  const int i = get_global_id(0) - start;
  if (i >= n) return;
  nadam_item(p, g, m, v, mu_product, steps, i, index, lr, b1, b2, eps, wd, psi_log, decoupled);
}
