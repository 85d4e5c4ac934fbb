"""Update formulas and the kernels generated from them.

Each update rule is one :class:`Formula`: the statements that update element ``i`` of one
parameter, written once. From it come the per-parameter kernel (:func:`update_program` with
``width == 1``: one launch per parameter, the arguments ``run_update`` passes) and the foreach
kernel (``width == B``: one launch updates up to ``B`` parameters), both calling the same
``<kind>_item`` function, so the two cannot compute differently (NOTE [ Foreach updates ]).
This module holds the Adagrad, RAdam and NAdam formulas; SGD, Adam and RMSprop are in
``_kernels.py`` (same header, arguments and conventions: NOTE [ Step counts on the device ] and
NOTE [ float16 parameters ] there).

# NOTE [ Foreach updates ]
# Most parameters of a model are small (biases, norms: a GPT of 6 layers x 384 has 77, most
# under 1536 elements), so a launch per parameter costs its launch overhead, not its work: on
# an H200 the 77 ``adam`` launches of one step took 0.43-0.62 ms of device time (5.6-8 us
# each). PyTorch's answer is ``_foreach``/multi-tensor apply; OpenCL has no arrays of buffers,
# so the foreach kernel of width ``B`` takes ``B`` sets of buffer arguments (``p_k``, ``g_k``,
# the state ``_k``), each slot's step-count entry ``index_k``, size ``n_k`` and end ``end_k``
# in the launch's range. Each slot starts a work-group: ``end_k`` is the previous end plus
# ``n_k`` rounded up to the local size, so the slot is a function of the group id, found by an
# unrolled chain of ``base >= end_k`` selects on the group's first item (uniform in the group:
# PoCL hoists it out of its work-item loop and still vectorizes the formula, a GPU keeps it in
# uniform registers, and a warp's loads stay within one parameter). Work item ``j`` then runs
# ``<kind>_item`` on element ``j - end_{k-1}`` of its slot (items past ``n_k`` return): the
# same function, with the same arguments, as the per-parameter kernel. Slots past the last
# parameter of a launch repeat its buffers with an empty range, so one program per (kind,
# dtype, B) serves any group of 2..B parameters.
# Parameters go together when they share the update kind, dtype and hyper-parameter values
# (one launch's scalars) and the queue; a lone parameter keeps the per-parameter kernel.

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
    >>> print(update_program("adagrad", UPDATES["adagrad"], 2).splitlines()[-5])
      if (base >= end_0) { p = p_1; g = g_1; acc = acc_1; index = index_1; n = n_1; start = end_0; }
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["UPDATES", "Formula", "update_program"]

_PARAM = ("__global T* p", "__global const T* g")
_STEPS = "__global const float* steps"
_COLUMNS = 96


@dataclass(frozen=True)
class Formula:
    """An update rule for one element: ``body`` updates element ``i`` of ``p`` from ``g``
    and the ``state`` buffers (C declarations, after ``p`` and ``g``), reading the step
    entries at ``steps[3 * index]`` and the ``scalars`` (C declarations: the kernel's
    hyper-parameters, in ``run_update``'s order)."""

    state: tuple[str, ...]
    scalars: tuple[str, ...]
    body: str

    @property
    def buffers(self) -> tuple[str, ...]:
        """Every per-parameter buffer declaration: ``p``, ``g``, then the state."""
        return (*_PARAM, *self.state)


def _name(declaration: str) -> str:
    return declaration.rsplit(" ", 1)[1]


def _type(declaration: str) -> str:
    return declaration.rsplit(" ", 1)[0]


def _signature(head: str, params: list[str]) -> str:
    """``head(params)``, wrapped at ``_COLUMNS`` under the opening parenthesis."""
    indent = " " * (len(head) + 1)
    lines, line = [], head + "("
    for k, param in enumerate(params):
        text = param + ("," if k + 1 < len(params) else ")")
        if len(line) + 1 + len(text) > _COLUMNS and not line.endswith("("):
            lines.append(line)
            line = indent + text
        else:
            line += ("" if line.endswith("(") else " ") + text
    return "\n".join([*lines, line])


def _item(kind: str, formula: Formula) -> str:
    params = [*formula.buffers, _STEPS, "const int i", "const int index", *formula.scalars]
    return f"{_signature(f'void {kind}_item', params)} {{\n{formula.body}}}\n"


def _call(kind: str, formula: Formula, i: str) -> str:
    names = [_name(d) for d in (*formula.buffers, _STEPS)]
    args = [*names, i, "index", *(_name(d) for d in formula.scalars)]
    return _signature(f"  {kind}_item", args) + ";\n"


def _single(kind: str, formula: Formula) -> str:
    params = [*formula.buffers, _STEPS, "__global const int* skip", "const int n",
              "const int index", *formula.scalars]
    return (f"{_signature(f'__kernel void {kind}', params)} {{\n"
            "  const int i = get_global_id(0);\n"
            "  if (i >= n || skip[0]) return;\n"
            f"{_call(kind, formula, 'i')}}}\n")


def _foreach(kind: str, formula: Formula, width: int) -> str:
    buffers = formula.buffers
    slots = [f"{d}_{k}" for k in range(width)
             for d in (*buffers, "const int index", "const int n", "const int end")]
    params = [_STEPS, "__global const int* skip", *formula.scalars, *slots]
    pick = "".join(f"  {_type(d)} {_name(d)} = {_name(d)}_0;\n" for d in buffers)
    for k in range(1, width):
        moves = " ".join(f"{_name(d)} = {_name(d)}_{k};" for d in buffers)
        pick += (f"  if (base >= end_{k - 1}) {{ {moves} index = index_{k}; n = n_{k}; "
                 f"start = end_{k - 1}; }}\n")
    return (f"{_signature(f'__kernel void {kind}_x{width}', params)} {{\n"
            f"  // up to {width} parameters per launch: NOTE [ Foreach updates ]\n"
            "  const int base = get_group_id(0) * get_local_size(0);  // one slot per group\n"
            "  if (skip[0]) return;\n"
            f"  int index = index_0, n = n_0, start = 0;\n{pick}"
            "  const int i = get_global_id(0) - start;\n"
            "  if (i >= n) return;\n"
            f"{_call(kind, formula, 'i')}}}\n")


def update_program(kind: str, formula: Formula, width: int) -> str:
    """The program of update ``kind``: ``<kind>_item`` (the formula) and the kernel that
    calls it, ``<kind>`` (one parameter per launch) for ``width == 1``, else ``<kind>_x<width>``
    (up to ``width`` parameters per launch: NOTE [ Foreach updates ]).

    Raises:
        ValueError: ``width`` is below 1.
    """
    if width < 1:
        raise ValueError(f"update_program: width must be >= 1, got {width} for {kind!r}")
    kernel = _single(kind, formula) if width == 1 else _foreach(kind, formula, width)
    return f"\n{_item(kind, formula)}\n{kernel}"


UPDATES = {
    # p, g, sum, steps, skip ; n, index ; lr, lr_decay, eps, wd
    "adagrad": Formula(
        ("__global S* acc",),
        ("const float lr", "const float lr_decay", "const float eps", "const float wd"), """\
  const CT t = (CT)steps[3 * index];
  const CT clr = (CT)lr / ((CT)1 + (t - (CT)1) * (CT)lr_decay);
  const CT param = LD(p, i);
  const CT grad = LD(g, i) + (CT)wd * param;
  const CT s = acc[i] + grad * grad;
  acc[i] = (S)s;
  ST(p, i, param - clr * grad / (sqrt(s) + (CT)eps));
"""),
    # p, g, m, v, steps, skip ; n, index ; lr, b1, b2, one_minus_b2, eps, wd, decoupled
    "radam": Formula(
        ("__global S* m", "__global S* v"),
        ("const float lr", "const float b1", "const float b2", "const float one_minus_b2",
         "const float eps", "const float wd", "const int decoupled"), """\
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
"""),
    # p, g, m, v, mu (2 slots), steps, skip ; n, index ; lr, b1, b2, eps, wd, psi * log(0.96),
    # decoupled. 0.96^(t psi) as exp(t psi log 0.96): pow() does not vectorize on PoCL's CPU
    # device (a 4M-element step took 1.29 s with pow, 0.1 s with exp)
    "nadam": Formula(
        ("__global S* m", "__global S* v", "__global S* mu_product"),
        ("const float lr", "const float b1", "const float b2", "const float eps",
         "const float wd", "const float psi_log", "const int decoupled"), """\
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
"""),
}
