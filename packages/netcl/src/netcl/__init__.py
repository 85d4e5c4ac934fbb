"""netcl: a deep-learning framework on OpenCL (PyOpenCL) with a NumPy backend.

The root offers lazy shortcuts to the most used names; everything else is imported from its
layer (``netcl.core``, ``netcl.ops``, ``netcl.autograd``, ``netcl.nn``, ...). Importing ``netcl``
imports no layer until a shortcut is first used.

PyTorch-style code reads the same: ``import netcl`` gives the layers as lazy submodules
(``netcl.nn``, ``netcl.optim``, ``netcl.autograd``, ``netcl.ops``, ``netcl.data``,
``netcl.utils.data``, ``netcl.core``, ...), ``netcl.no_grad``, the dtypes (``netcl.float32``,
``netcl.long``, ... are dtype names), factories (``netcl.tensor``, ``netcl.zeros``,
``netcl.ones``, ``netcl.full``, ``netcl.empty``, ``netcl.rand``, ``netcl.randn``,
``netcl.arange``, ``netcl.from_numpy``), PyTorch's free functions on tensors (``netcl.max(x,
1)``, ``netcl.sum``, ``netcl.cat``, ``netcl.stack``, ``netcl.where``, ...) and
``netcl.manual_seed``.

Choosing the device: ``netcl.device("cl")`` returns a device handle (``"cpu"`` is the NumPy
backend, ``"cl"`` the best OpenCL device, ``"gpu"``, ``"cl:P:D"`` platform and device index,
or a name fragment such as ``"pthread"``), usable wherever ``device=`` is taken
(``Tensor.to``, factories, layers). Tensors created without a device go to the default device:
the innermost ``with netcl.core.device.device(...)`` block, else the one
``netcl.set_default_device(...)`` chose, else the ``NETCL_DEVICE`` environment variable, else
``"auto"`` (a GPU, then an accelerator, then an OpenCL CPU device, then NumPy);
``netcl.get_default_device()`` says which it is.

Examples:
    >>> import numpy as np
    >>> import netcl as nc
    >>> nc.Tensor.from_host(None, np.ones(2)).shape
    (2,)
    >>> x = nc.tensor([[1.0, 2.0], [3.0, 4.0]], device="cpu")
    >>> (x @ x).sum(dim=1).tolist(), x.to(nc.float16).dtype, nc.device("cpu").backend
    ([17.0, 37.0], 'float16', 'cpu')
    >>> with nc.no_grad():
    ...     nc.nn.Linear(2, 1, device="cpu")(x).shape
    (2, 1)
"""

# NOTE [ extend_path first ]
# Every layer is its own distribution that ships a portion of the ``netcl`` namespace. This
# package alone has ``netcl/__init__.py``; ``extend_path`` makes the other portions importable
# through it, in editable and regular installs alike. It must stay the first statement (only
# the docstring before it, so that ``netcl.__doc__`` is the docstring above).
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

import importlib
from typing import TYPE_CHECKING, Any

from .__about__ import __version__ as __version__

if TYPE_CHECKING:
    from netcl import autograd as autograd
    from netcl import core as core
    from netcl import data as data
    from netcl import nn as nn
    from netcl import ops as ops
    from netcl import optim as optim
    from netcl import utils as utils
    from netcl._factories import arange as arange
    from netcl._factories import empty as empty
    from netcl._factories import from_numpy as from_numpy
    from netcl._factories import full as full
    from netcl._factories import manual_seed as manual_seed
    from netcl._factories import ones as ones
    from netcl._factories import ones_like as ones_like
    from netcl._factories import rand as rand
    from netcl._factories import randn as randn
    from netcl._factories import tensor as tensor
    from netcl._factories import zeros as zeros
    from netcl._factories import zeros_like as zeros_like
    from netcl._functions import abs as abs
    from netcl._functions import argmax as argmax
    from netcl._functions import argmin as argmin
    from netcl._functions import cat as cat
    from netcl._functions import clamp as clamp
    from netcl._functions import exp as exp
    from netcl._functions import flatten as flatten
    from netcl._functions import is_tensor as is_tensor
    from netcl._functions import log as log
    from netcl._functions import max as max
    from netcl._functions import maximum as maximum
    from netcl._functions import mean as mean
    from netcl._functions import min as min
    from netcl._functions import minimum as minimum
    from netcl._functions import numel as numel
    from netcl._functions import reshape as reshape
    from netcl._functions import sigmoid as sigmoid
    from netcl._functions import sqrt as sqrt
    from netcl._functions import stack as stack
    from netcl._functions import sum as sum
    from netcl._functions import tanh as tanh
    from netcl._functions import where as where
    from netcl.autograd import Tape as Tape
    from netcl.autograd import enable_grad as enable_grad
    from netcl.autograd import no_grad as no_grad
    from netcl.core.kernels.primitives import KernelSpec as KernelSpec
    from netcl.core.placement import device as device
    from netcl.core.placement import get_default_device as get_default_device
    from netcl.core.placement import set_default_device as set_default_device
    from netcl.core.tensor import Tensor as Tensor
    from netcl.ops import bias_add as bias_add
    from netcl.ops import build_matmul_kernel as build_matmul_kernel
    from netcl.ops import conv2d as conv2d
    from netcl.ops import elementwise_binary as elementwise_binary
    from netcl.ops import matmul as matmul
    from netcl.ops import reduce_sum as reduce_sum
    from netcl.ops import relu as relu
    from netcl.ops import softmax as softmax

# shortcut name -> module that defines it
_SHORTCUTS: dict[str, str] = {
    "Tensor": "netcl.core.tensor",
    "KernelSpec": "netcl.core.kernels.primitives",
    "matmul": "netcl.ops",
    "build_matmul_kernel": "netcl.ops",
    "bias_add": "netcl.ops",
    "elementwise_binary": "netcl.ops",
    "relu": "netcl.ops",
    "reduce_sum": "netcl.ops",
    "softmax": "netcl.ops",
    "conv2d": "netcl.ops",
    "Tape": "netcl.autograd",
    "no_grad": "netcl.autograd",
    "enable_grad": "netcl.autograd",
    "device": "netcl.core.placement",
    "get_default_device": "netcl.core.placement",
    "set_default_device": "netcl.core.placement",
    **{name: "netcl._functions" for name in (
        "abs", "argmax", "argmin", "cat", "clamp", "exp", "flatten", "is_tensor", "log", "max",
        "maximum", "mean", "min", "minimum", "numel", "reshape", "sigmoid", "sqrt", "stack",
        "sum", "tanh", "where")},
    **{name: "netcl._factories" for name in (
        "arange", "empty", "from_numpy", "full", "manual_seed", "ones", "ones_like", "rand",
        "randn", "tensor", "zeros", "zeros_like")},
}

# layers reachable as attributes (``netcl.nn``), imported on first use
_SUBMODULES = ("autograd", "core", "data", "distributed", "io", "metrics", "nn", "ops", "optim",
               "runtime", "trainer", "utils")

# PyTorch's dtype names -> netcl's dtype names (netcl has no bool dtype: uint8 holds masks)
_DTYPES: dict[str, str] = {
    "float32": "float32", "float": "float32", "float16": "float16", "half": "float16",
    "float64": "float64", "double": "float64", "int32": "int32", "int": "int32",
    "int64": "int64", "long": "int64", "uint8": "uint8", "bool": "uint8",
}

__all__ = [
    "KernelSpec",
    "Tape",
    "Tensor",
    "__version__",
    "abs",
    "arange",
    "argmax",
    "argmin",
    "bias_add",
    "build_matmul_kernel",
    "cat",
    "clamp",
    "conv2d",
    "device",
    "elementwise_binary",
    "empty",
    "enable_grad",
    "exp",
    "flatten",
    "from_numpy",
    "full",
    "get_default_device",
    "is_tensor",
    "log",
    "manual_seed",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "no_grad",
    "numel",
    "ones",
    "ones_like",
    "rand",
    "randn",
    "reduce_sum",
    "relu",
    "reshape",
    "set_default_device",
    "sigmoid",
    "softmax",
    "sqrt",
    "stack",
    "sum",
    "tanh",
    "tensor",
    "where",
    "zeros",
    "zeros_like",
]


def __getattr__(name: str) -> Any:
    if name in _DTYPES:
        return _DTYPES[name]
    if name in _SUBMODULES:
        value: Any = importlib.import_module(f"netcl.{name}")
    else:
        module = _SHORTCUTS.get(name)
        if module is None:
            raise AttributeError(f"module 'netcl' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SHORTCUTS) | set(_SUBMODULES) | set(_DTYPES))
