"""Update kernels of Adagrad, RAdam and NAdam (PyTorch's formulas), merged into the update
programs of ``_kernels.py`` (same header, arguments and conventions: NOTE [ Step counts on
the device ] and NOTE [ float16 parameters ] there).

# NOTE [ NAdam's momentum product ]
# NAdam scales its two terms by ``prod_{i <= t} mu_i``, a running product PyTorch keeps as one
# scalar per parameter. Every work item of the update needs the product before this step and
# one of them must store the new one: written in place, some items would read the new value.
# So the state holds two slots: step ``t`` reads slot ``(t - 1) % 2`` and work item 0 writes
# slot ``t % 2`` (slot 0 starts at 1). A skipped step (found-inf) writes nothing and does not
# advance ``t``, so the slots stay consistent; a captured step replays the same way.

Examples:
    >>> sorted(UPDATES)
    ['adagrad', 'nadam', 'radam']
"""

from __future__ import annotations

__all__ = ["UPDATES"]

UPDATES = {
    # p, g, sum, steps, skip ; n, index ; lr, lr_decay, eps, wd
    "adagrad": """
__kernel void adagrad(__global T* p, __global const T* g, __global S* acc,
                      __global const float* steps, __global const int* skip, const int n,
                      const int index, const float lr, const float lr_decay, const float eps,
                      const float wd) {
  int i = get_global_id(0);
  if (i >= n || skip[0]) return;
  const CT t = (CT)steps[3 * index];
  const CT clr = (CT)lr / ((CT)1 + (t - (CT)1) * (CT)lr_decay);
  const CT param = LD(p, i);
  const CT grad = LD(g, i) + (CT)wd * param;
  const CT s = acc[i] + grad * grad;
  acc[i] = (S)s;
  ST(p, i, param - clr * grad / (sqrt(s) + (CT)eps));
}
""",
    # p, g, m, v, steps, skip ; n, index ; lr, b1, b2, one_minus_b2, eps, wd, decoupled
    "radam": """
__kernel void radam(__global T* p, __global const T* g, __global S* m, __global S* v,
                    __global const float* steps, __global const int* skip, const int n,
                    const int index, const float lr, const float b1, const float b2,
                    const float one_minus_b2, const float eps, const float wd,
                    const int decoupled) {
  int i = get_global_id(0);
  if (i >= n || skip[0]) return;
  const CT t = (CT)steps[3 * index];
  const CT bc1 = (CT)steps[3 * index + 1], bc2 = (CT)steps[3 * index + 2];  // 1 - b^t
  CT param = LD(p, i);
  CT grad = LD(g, i);
  if (decoupled) param *= (CT)(1.0f - lr * wd); else grad += (CT)wd * param;
  const CT mi = (CT)b1 * m[i] + (CT)(1.0f - b1) * grad;
  const CT vi = (CT)b2 * v[i] + (CT)one_minus_b2 * grad * grad;
  m[i] = (S)mi;
  v[i] = (S)vi;
  const CT rho_inf = (CT)2 / (CT)one_minus_b2 - (CT)1;
  const CT rho_t = rho_inf - (CT)2 * t * ((CT)1 - bc2) / bc2;
  CT step = mi / bc1;
  if (rho_t > (CT)5) {
    const CT rect = sqrt((rho_t - (CT)4) * (rho_t - (CT)2) * rho_inf
                         / ((rho_inf - (CT)4) * (rho_inf - (CT)2) * rho_t));
    step *= sqrt(bc2) / (sqrt(vi) + (CT)eps) * rect;
  }
  ST(p, i, param - (CT)lr * step);
}
""",
    # p, g, m, v, mu (2 slots), steps, skip ; n, index ; lr, b1, b2, eps, wd, psi * log(0.96),
    # decoupled. 0.96^(t psi) as exp(t psi log 0.96): pow() does not vectorize on PoCL's CPU
    # device (a 4M-element step took 1.29 s with pow, 0.1 s with exp)
    "nadam": """
__kernel void nadam(__global T* p, __global const T* g, __global S* m, __global S* v,
                    __global S* mu_product, __global const float* steps,
                    __global const int* skip, const int n, const int index, const float lr,
                    const float b1, const float b2, const float eps, const float wd,
                    const float psi_log, const int decoupled) {
  int i = get_global_id(0);
  if (i >= n || skip[0]) return;
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
""",
}
