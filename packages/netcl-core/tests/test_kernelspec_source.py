"""The source KernelSpec compiles: netcl's macros are prefixed (a kernel may define its own
``RELU`` or ``MAX``), and build logs count lines in the user's own text."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernels.cache import KernelBuildError
from netcl.core.kernels.primitives import (
    EXPRESSION_MACROS,
    PRIMITIVE_PREAMBLE,
    KernelSpec,
    _user_lines,
    build_elementwise_kernel,
)
from netcl.core.tensor import Tensor


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("KernelSpec builds on OpenCL devices")
    return dev


def test_preamble_defines_only_prefixed_names() -> None:
    names = re.findall(r"#define (\w+)", PRIMITIVE_PREAMBLE)
    assert names and all(n.startswith("NETCL_") for n in names)
    short = re.findall(r"#define (\w+)\(", EXPRESSION_MACROS)
    assert {"ADD", "MUL", "RELU", "MAX", "SIGMOID"} <= set(short)


def test_user_names_do_not_collide_with_netcl_macros(cl_dev: DeviceHandle) -> None:
    src = """
float RELU(float v) { return v > 0.0f ? v : 0.0f; }
float MAX(float a, float b) { return a > b ? a : b; }
#define SQR(v) ((v) * (v) + 1.0f)
__kernel void mine(__global float* x) {
  int i = get_global_id(0);
  x[i] = MAX(RELU(x[i]), SQR(x[i])) + NETCL_ADD(1.0f, 0.0f);
}
"""
    host = np.array([-2.0, -0.5, 0.0, 3.0], np.float32)
    x = Tensor.from_host(cl_dev.queue, host)
    KernelSpec("mine", src=src).build(cl_dev.queue).run(cl_dev.queue, (4,), None, x)
    np.testing.assert_allclose(x.to_host(), np.maximum(np.maximum(host, 0), host**2 + 1) + 1)


@pytest.mark.parametrize(("part", "spec"), [
    ("src", KernelSpec("bad", src="__kernel void bad(__global float* x) {\n"
                                  "  x[1] = undeclared_name;\n}")),
    ("body", KernelSpec("bad", params=["__global float* x"],
                        body="  x[0] = 1.0f;\n  x[1] = undeclared_name;")),
    ("preamble", KernelSpec("bad", preamble="#define ONE 1.0f\nfloat f(void) { return "
                            "undeclared_name; }", params=["__global float* x"],
                            body="x[0] = ONE;")),
])
def test_build_log_lines_count_in_the_users_text(
    cl_dev: DeviceHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, part: str,
    spec: KernelSpec,
) -> None:
    """The 18-line macro preamble used to shift every line number in the build log."""
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path))
    with pytest.raises(KernelBuildError) as err:
        spec.build(cl_dev.queue)
    log = err.value.log + str(err.value)
    assert re.search(rf"\b{part}[:(]2\b", log), log  # clang: "src:2:10", others "src(2)"


def test_expression_macros_in_builder_expressions(cl_dev: DeviceHandle) -> None:
    spec, kernel = build_elementwise_kernel(cl_dev.context, "expr", 2,
                                            "MAX(RELU(SUB(v0, v1)), SIGMOID(0.0f))")
    a = np.array([-1.0, 0.25, 2.0], np.float32)
    b = np.array([0.5, 0.0, 0.5], np.float32)
    q = cl_dev.queue
    out = Tensor.from_shape(q, (3,), fill=None)
    kernel.run(q, (3,), None, Tensor.from_host(q, a), Tensor.from_host(q, b), out, 3)
    np.testing.assert_allclose(out.to_host(), np.maximum(np.maximum(a - b, 0), 0.5))
    assert EXPRESSION_MACROS in spec.to_source()


@pytest.mark.parametrize("part", ["src", "body", "preamble"])
def test_logs_of_compilers_that_ignore_line_directives_are_mapped(part: str) -> None:
    """NVIDIA's compiler ignores ``#line`` and reports ``<kernel>:21:10``: KernelSpec.build
    rewrites such locations to the part and line of the user's text."""
    spec = {
        "src": KernelSpec("bad", src="__kernel void bad(__global float* x) {\n"
                                     "  x[1] = undeclared_name;\n}"),
        "body": KernelSpec("bad", params=["__global float* x"],
                           body="  x[0] = 1.0f;\n  x[1] = undeclared_name;"),
        "preamble": KernelSpec("bad", preamble="#define ONE 1.0f\nfloat f(void) { return "
                               "undeclared_name; }", params=["__global float* x"],
                               body="x[0] = ONE;"),
    }[part]
    source = spec.device_source("cl_khr_fp64 cl_khr_fp16")
    whole = source[:source.index("undeclared_name")].count("\n") + 1
    log = f"<kernel>:{whole}:10: error: use of undeclared identifier 'undeclared_name'"
    assert _user_lines(source, log).startswith(f"{part}:2:10: error:")
    inside_netcl = "<kernel>:3:1: warning: something in netcl's preamble"
    assert _user_lines(source, inside_netcl) == inside_netcl
