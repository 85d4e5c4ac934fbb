"""What a selection decides: a kernel variant, by name, and its tile and launch parameters.

A variant is named ``<FAMILY>_<KIND>`` in upper case (``CONV2D_WINOGRAD``): the part before the
first underscore, lower-cased, is its family. :class:`KernelVariant` lists the variants netcl's
own op packages ship; an op package adds one it does not list as a :class:`Variant` (through
``register_variant``), so a new kernel needs no netcl-core release. Both carry ``name``,
``value`` and ``family``, and the selector treats them alike.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FAMILIES", "AnyVariant", "KernelConfig", "KernelVariant", "Variant", "family_of_name"]

_NAME = re.compile(r"[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]")


def family_of_name(name: str) -> str:
    """The family a variant name belongs to: the part before the first ``_``, lower-cased.

    Examples:
        >>> family_of_name("CONV2D_WINOGRAD")
        'conv2d'
    """
    return name.split("_", 1)[0].lower()


class KernelVariant(enum.Enum):
    """The built-in kernel variants; :attr:`family` groups them by op.

    Examples:
        >>> KernelVariant["MATMUL_TILED"].value
        'matmul_tiled'
    """

    MATMUL_NAIVE = "matmul_naive"
    MATMUL_TILED = "matmul_tiled"
    MATMUL_REGISTER_TILED = "matmul_register_tiled"
    MATMUL_VECTORIZED = "matmul_vectorized"
    CONV2D_NAIVE = "conv2d_naive"
    CONV2D_IM2COL = "conv2d_im2col"
    CONV2D_IMPLICIT_GEMM = "conv2d_implicit_gemm"
    CONV2D_TILED_LOCAL = "conv2d_tiled_local"
    CONV2D_WINOGRAD = "conv2d_winograd"
    ELEMENTWISE_SCALAR = "elementwise_scalar"
    ELEMENTWISE_VECTORIZED = "elementwise_vectorized"
    REDUCTION_SEQUENTIAL = "reduction_sequential"
    REDUCTION_PARALLEL = "reduction_parallel"
    REDUCTION_WORKGROUP = "reduction_workgroup"
    BATCHNORM_NAIVE = "batchnorm_naive"
    BATCHNORM_FUSED = "batchnorm_fused"

    @property
    def family(self) -> str:
        """The op family: ``"matmul"``, ``"conv2d"``, ``"elementwise"``, ``"reduction"``, ...

        Examples:
            >>> KernelVariant.CONV2D_WINOGRAD.family
            'conv2d'
        """
        return family_of_name(self.name)


@dataclass(frozen=True)
class Variant:
    """A kernel variant an op package registers beyond the built-in :class:`KernelVariant`.

    Make one with ``register_variant`` (which checks the name and keeps one object per name);
    it is compared by name, so it can be forced, autotuned and stored like a built-in one.

    Examples:
        >>> v = Variant("CONV2D_DIRECT_5X5")
        >>> v.family, v.value
        ('conv2d', 'conv2d_direct_5x5')
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"Variant: a name is <FAMILY>_<KIND> in upper case (letters, "
                             f"digits, underscores), got {self.name!r}")
        if self.name in KernelVariant.__members__:
            raise ValueError(f"Variant: {self.name} is a built-in KernelVariant; use "
                             f"KernelVariant.{self.name}")

    @property
    def family(self) -> str:
        """The op family, from the name's first part."""
        return family_of_name(self.name)

    @property
    def value(self) -> str:
        """The name in lower case, as :attr:`KernelVariant.value`."""
        return self.name.lower()


AnyVariant = KernelVariant | Variant

# The built-in families, in KernelVariant's order (NETCL_FORCE_<FAMILY> exists for each).
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(v.family for v in KernelVariant))


@dataclass
class KernelConfig:
    """Tile and launch parameters of one decision.

    A work-group computes a ``tile_m`` x ``tile_n`` output tile, stepping ``tile_k`` along the
    reduced dimension; ``local_size_2d`` is its (dim 0, dim 1) shape and each work-item
    computes ``work_per_thread`` outputs per tiled dimension. Configs returned by
    :class:`~netcl.core.kernel_selector.KernelSelector` are shared through its cache: treat
    them as read-only.

    Examples:
        >>> KernelConfig(KernelVariant.MATMUL_TILED).tile_m
        32
    """

    variant: AnyVariant
    tile_m: int = 32
    tile_n: int = 32
    tile_k: int = 8
    work_per_thread: int = 4
    local_size_1d: int = 256
    local_size_2d: tuple[int, int] = (16, 16)
    use_local_memory: bool = True
    use_vectorization: bool = True
    vector_width: int = 4
    extra: dict[str, Any] = field(default_factory=dict)
