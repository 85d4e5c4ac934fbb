"""netcl-ops's kernel families, registered with netcl-core's generic selector on import.

``import netcl.ops`` imports this module; so does netcl-core when it is asked for one of these
families before netcl-ops was imported (the ``netcl.kernel_families`` entry points in
netcl-ops's ``pyproject.toml`` name it). Each family's rule lives next to its kernels:
``_matmul_rule``, ``_conv_rule`` and ``_selection_rules`` (elementwise, reduction, batchnorm).

Examples:
    >>> [family.name for family in KERNEL_FAMILIES]
    ['matmul', 'conv2d', 'elementwise', 'reduction', 'batchnorm']
"""

from __future__ import annotations

from typing import Any

from netcl.core.selection import SelectionFamily

from ._conv_rule import CONV2D_FAMILY
from ._matmul_rule import MATMUL_FAMILY
from ._selection_rules import BATCHNORM_FAMILY, ELEMENTWISE_FAMILY, REDUCTION_FAMILY

__all__ = ["KERNEL_FAMILIES"]

KERNEL_FAMILIES: tuple[SelectionFamily[Any], ...] = (
    MATMUL_FAMILY, CONV2D_FAMILY, ELEMENTWISE_FAMILY, REDUCTION_FAMILY, BATCHNORM_FAMILY,
)
