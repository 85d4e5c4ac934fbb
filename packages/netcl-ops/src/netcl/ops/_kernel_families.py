"""netcl-ops's kernel families, registered with netcl-core's generic selector on import.

``import netcl.ops`` imports this module; so does netcl-core when it is asked for one of these
families before netcl-ops was imported (the ``netcl.kernel_families`` entry points in
netcl-ops's ``pyproject.toml`` name it). Each family's rule lives next to its kernels:
``_matmul_rule``, ``_conv_rule`` and ``_selection_rules`` (elementwise, reduction, batchnorm).
The matmul and conv2d families also register their tuners (``_matmul_tuner``,
``_conv_tuner``): what the selector times when tuning is on (``NETCL_AUTOTUNE``).

Examples:
    >>> [family.name for family in KERNEL_FAMILIES]
    ['matmul', 'conv2d', 'elementwise', 'reduction', 'batchnorm']
    >>> sorted(TUNERS)
    ['conv2d', 'matmul']
"""

from __future__ import annotations

from typing import Any

from netcl.core.selection import FamilyTuner, SelectionFamily, register_tuner

from ._conv_rule import CONV2D_FAMILY
from ._conv_tuner import CONV2D_TUNER
from ._matmul_rule import MATMUL_FAMILY
from ._matmul_tuner import MATMUL_TUNER
from ._selection_rules import BATCHNORM_FAMILY, ELEMENTWISE_FAMILY, REDUCTION_FAMILY

__all__ = ["KERNEL_FAMILIES", "TUNERS"]

KERNEL_FAMILIES: tuple[SelectionFamily[Any], ...] = (
    MATMUL_FAMILY, CONV2D_FAMILY, ELEMENTWISE_FAMILY, REDUCTION_FAMILY, BATCHNORM_FAMILY,
)

TUNERS: dict[str, FamilyTuner] = {
    MATMUL_FAMILY.name: register_tuner(MATMUL_FAMILY.name, MATMUL_TUNER),
    CONV2D_FAMILY.name: register_tuner(CONV2D_FAMILY.name, CONV2D_TUNER),
}
