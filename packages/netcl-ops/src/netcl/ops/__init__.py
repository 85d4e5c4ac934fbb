"""netcl.ops: forward-only ops, each an OpenCL kernel family and a vectorized NumPy path.

Every op takes and returns :class:`netcl.core.tensor.Tensor`; kernel variants are chosen by
:mod:`netcl.core.kernel_selector` and can be forced with ``force_variant``.
"""

from .__about__ import __version__ as __version__

# --- elementwise, reductions, softmax, movement, creation, random (section A) ---
# (names re-exported here, one `from ._module import name as name` per line)

# --- matmul, conv2d, pooling, normalization (section B) ---
# (names re-exported here, one `from ._module import name as name` per line)

__all__ = [
    "__version__",
    # section A names
    # section B names
]
