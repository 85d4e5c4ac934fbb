"""netcl.ops: forward-only ops, each an OpenCL kernel family and a vectorized NumPy path.

Every op takes and returns :class:`netcl.core.tensor.Tensor`; kernel variants are chosen by
:mod:`netcl.core.kernel_selector` and can be forced with ``force_variant``.
"""

from .__about__ import __version__ as __version__

# --- elementwise, reductions, softmax, movement, creation, random (section A) ---
# isort: split
from ._creation import arange as arange
from ._creation import fill as fill
from ._creation import full as full
from ._creation import one_hot as one_hot
from ._creation import ones as ones
from ._creation import zeros as zeros
from ._cross_entropy import softmax_cross_entropy as softmax_cross_entropy
from ._elementwise import abs as abs
from ._elementwise import clamp as clamp
from ._elementwise import elementwise as elementwise
from ._elementwise import exp as exp
from ._elementwise import gelu as gelu
from ._elementwise import leaky_relu as leaky_relu
from ._elementwise import log as log
from ._elementwise import neg as neg
from ._elementwise import reciprocal as reciprocal
from ._elementwise import relu as relu
from ._elementwise import rsqrt as rsqrt
from ._elementwise import sigmoid as sigmoid
from ._elementwise import sign as sign
from ._elementwise import silu as silu
from ._elementwise import sqrt as sqrt
from ._elementwise import tanh as tanh
from ._elementwise_binary import add as add
from ._elementwise_binary import cast as cast
from ._elementwise_binary import div as div
from ._elementwise_binary import elementwise_binary as elementwise_binary
from ._elementwise_binary import eq as eq
from ._elementwise_binary import ge as ge
from ._elementwise_binary import gt as gt
from ._elementwise_binary import le as le
from ._elementwise_binary import lt as lt
from ._elementwise_binary import maximum as maximum
from ._elementwise_binary import minimum as minimum
from ._elementwise_binary import mul as mul
from ._elementwise_binary import ne as ne
from ._elementwise_binary import pow as pow
from ._elementwise_binary import sub as sub
from ._elementwise_binary import where as where
from ._elementwise_source import EwOp as EwOp
from ._elementwise_table import ELEMENTWISE as ELEMENTWISE
from ._movement import broadcast_to as broadcast_to
from ._movement import concat as concat
from ._movement import contiguous as contiguous
from ._movement import copy as copy
from ._movement import flatten as flatten
from ._movement import getitem as getitem
from ._movement import pad as pad
from ._movement import permute as permute
from ._movement import reshape as reshape
from ._movement import slice as slice
from ._movement import squeeze as squeeze
from ._movement import stack as stack
from ._movement import transpose as transpose
from ._movement import unsqueeze as unsqueeze
from ._movement import view as view
from ._movement_take import embedding as embedding
from ._movement_take import gather as gather
from ._movement_take import index_select as index_select
from ._random import Generator as Generator
from ._random import bernoulli as bernoulli
from ._random import default_generator as default_generator
from ._random import dropout as dropout
from ._random import manual_seed as manual_seed
from ._random import normal as normal
from ._random import philox4x32_10 as philox4x32_10
from ._random import random_bits as random_bits
from ._random import uniform as uniform
from ._reduce import argmax as argmax
from ._reduce import max as max
from ._reduce import mean as mean
from ._reduce import min as min
from ._reduce import reduce_sum as reduce_sum
from ._reduce import sum as sum
from ._reduce import var as var
from ._softmax import log_softmax as log_softmax
from ._softmax import nll_gather as nll_gather
from ._softmax import softmax as softmax

# isort: split

# --- matmul, bias_add, convolution, pooling and normalization ---
from . import _kernel_families as _kernel_families  # registers the selector's kernel families
from ._bias import bias_add as bias_add
from ._conv import conv2d as conv2d
from ._conv import conv2d_backward_data as conv2d_backward_data
from ._conv import conv2d_backward_weight as conv2d_backward_weight
from ._matmul import build_matmul_kernel as build_matmul_kernel
from ._matmul import matmul as matmul
from ._normalization import batch_norm as batch_norm
from ._normalization import batch_norm_backward as batch_norm_backward
from ._normalization import layer_norm as layer_norm
from ._normalization import layer_norm_backward as layer_norm_backward
from ._pooling import adaptive_avg_pool2d as adaptive_avg_pool2d
from ._pooling import adaptive_avg_pool2d_backward as adaptive_avg_pool2d_backward
from ._pooling import avg_pool2d as avg_pool2d
from ._pooling import avg_pool2d_backward as avg_pool2d_backward
from ._pooling import global_avg_pool2d as global_avg_pool2d
from ._pooling import max_pool2d as max_pool2d
from ._pooling import max_pool2d_backward as max_pool2d_backward
from ._precision import get_float32_matmul_precision, set_float32_matmul_precision

# isort: split

# --- attention and masking ---
from ._attention import scaled_dot_product_attention as scaled_dot_product_attention
from ._attention import (
    scaled_dot_product_attention_backward as scaled_dot_product_attention_backward,
)
from ._attention import (
    scaled_dot_product_attention_forward as scaled_dot_product_attention_forward,
)
from ._masking import masked_fill as masked_fill
from ._masking import tril as tril
from ._masking import triu as triu

# isort: split

# --- recurrent layers' scan (helper C's module) ---
from ._rnn_scan import rnn_scan as rnn_scan
from ._rnn_scan import rnn_scan_backward as rnn_scan_backward

# isort: split

from . import _tensor_methods as _tensor_methods  # fills the Tensor method slots

__all__ = [
    # section C names
    "conv2d",
    "conv2d_backward_data",
    "conv2d_backward_weight",
    "batch_norm",
    "batch_norm_backward",
    "layer_norm",
    "layer_norm_backward",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "global_avg_pool2d",
    "max_pool2d",
    "max_pool2d_backward",
    "__version__",
    # section A names
    "ELEMENTWISE",
    "EwOp",
    "Generator",
    "abs",
    "add",
    "arange",
    "argmax",
    "bernoulli",
    "broadcast_to",
    "cast",
    "clamp",
    "concat",
    "contiguous",
    "copy",
    "default_generator",
    "div",
    "dropout",
    "elementwise",
    "elementwise_binary",
    "embedding",
    "eq",
    "exp",
    "fill",
    "flatten",
    "full",
    "gather",
    "ge",
    "gelu",
    "getitem",
    "gt",
    "index_select",
    "le",
    "leaky_relu",
    "log",
    "log_softmax",
    "lt",
    "manual_seed",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mul",
    "ne",
    "neg",
    "nll_gather",
    "normal",
    "one_hot",
    "ones",
    "pad",
    "permute",
    "philox4x32_10",
    "pow",
    "random_bits",
    "reciprocal",
    "reduce_sum",
    "relu",
    "reshape",
    "rsqrt",
    "sigmoid",
    "sign",
    "silu",
    "slice",
    "softmax",
    "softmax_cross_entropy",
    "sqrt",
    "squeeze",
    "stack",
    "sub",
    "sum",
    "tanh",
    "transpose",
    "uniform",
    "unsqueeze",
    "var",
    "view",
    "where",
    "zeros",
    # section B names
    "bias_add",
    "build_matmul_kernel",
    "matmul",
    "get_float32_matmul_precision",
    "set_float32_matmul_precision",
    # attention and masking
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
    "scaled_dot_product_attention_forward",
    "masked_fill",
    "tril",
    "triu",
    "rnn_scan",
    "rnn_scan_backward",
]
