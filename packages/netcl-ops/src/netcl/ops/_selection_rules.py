"""The elementwise, reduction and batch-norm families' selection policies.

Registered with netcl-core's generic selector as families ``"elementwise"``, ``"reduction"``
and ``"batchnorm"``; ``KernelSelector.select_elementwise_kernel``, ``select_reduction_kernel``
and ``select_batchnorm_kernel`` resolve through them. Every variant of these families
computes every query, so none has an ``applies`` predicate.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from netcl.core.device_profile import ExtendedDeviceProfile
from netcl.core.dtypes import canonical_dtype
from netcl.core.kernel_selector import KernelConfig, KernelVariant, default_config
from netcl.core.selection import (
    AnyVariant,
    SelectionFamily,
    bool_arg,
    float_dtype_arg,
    int_arg,
    register_family,
)

from ._matmul_rule import NO_LOCAL_PARAMS

__all__ = [
    "BATCHNORM_FAMILY",
    "ELEMENTWISE_FAMILY",
    "REDUCTION_FAMILY",
    "REDUCTION_KINDS",
    "batchnorm_rule",
    "elementwise_rule",
    "reduction_rule",
]

V = KernelVariant

ELEMENTWISE_VECTOR_MIN = 1024  # elements above which the vectorized kernel pays off
ELEMENTWISE_WIDE = 8  # vector width where the device prefers 8 or more lanes, else ...
ELEMENTWISE_NARROW = 4
REDUCTION_SEQUENTIAL_MAX = 256  # elements below which one work-item per output wins
REDUCTION_PARALLEL_MAX = 64 * 1024  # ... and below which one work-group per output does
REDUCTION_STAGES = 2
REDUCTION_KINDS = ("sum", "mean", "max", "min", "prod", "argmax", "argmin")

ELEMENTWISE_DEFAULTS: dict[AnyVariant, dict[str, Any]] = {
    V.ELEMENTWISE_SCALAR: {"work_per_thread": 1, **NO_LOCAL_PARAMS},
    V.ELEMENTWISE_VECTORIZED: {"use_local_memory": False, "vector_width": ELEMENTWISE_NARROW},
}
REDUCTION_DEFAULTS: dict[AnyVariant, dict[str, Any]] = {
    V.REDUCTION_SEQUENTIAL: {"local_size_1d": 1, "work_per_thread": 1, **NO_LOCAL_PARAMS},
    V.REDUCTION_PARALLEL: {},
    V.REDUCTION_WORKGROUP: {"extra": {"stages": REDUCTION_STAGES}},
}
BATCHNORM_DEFAULTS: dict[AnyVariant, dict[str, Any]] = {
    V.BATCHNORM_NAIVE: {"work_per_thread": 1, **NO_LOCAL_PARAMS},
    V.BATCHNORM_FUSED: {"work_per_thread": 1, **NO_LOCAL_PARAMS},
}


# -- elementwise ----------------------------------------------------------------------------


class ElementwiseQuery(NamedTuple):
    """``n`` elements of ``dtype``; the tuple is the tuned key ``(n, dtype)``."""

    n: int
    dtype: str


def _parse_elementwise(n: Any, dtype: Any = "float32") -> ElementwiseQuery:
    fn = "select_elementwise_kernel"
    return ElementwiseQuery(int_arg(fn, "n", n, 0), canonical_dtype(dtype, op=fn))


def elementwise_rule(profile: ExtendedDeviceProfile, q: ElementwiseQuery) -> KernelVariant:
    """Vectorized above 1024 elements, else scalar; always scalar on an OpenCL CPU device
    that prefers scalar floats (Intel's CPU runtime, which vectorizes across work items: NOTE
    [ Elementwise kernels on CPU devices ] in ``_elementwise_base``).

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> elementwise_rule(extended_profile(None), ElementwiseQuery(100, "float32")).name
        'ELEMENTWISE_SCALAR'
    """
    if profile.opencl_cpu and profile.preferred_vector_width_float <= 1:
        return V.ELEMENTWISE_SCALAR
    if q.n > ELEMENTWISE_VECTOR_MIN:
        return V.ELEMENTWISE_VECTORIZED
    return V.ELEMENTWISE_SCALAR


def _elementwise_config(profile: ExtendedDeviceProfile, variant: AnyVariant,
                        q: ElementwiseQuery) -> KernelConfig:
    """Vectorized: width 8 where the device's preferred vector width for the dtype (half for
    float16, float otherwise) is 8 or more, else 4."""
    cfg = default_config(variant)
    if variant is V.ELEMENTWISE_VECTORIZED:
        preferred = (profile.preferred_vector_width_half if q.dtype == "float16"
                     else profile.preferred_vector_width_float)
        cfg.vector_width = ELEMENTWISE_WIDE if preferred >= ELEMENTWISE_WIDE else ELEMENTWISE_NARROW
    cfg.extra["dtype"] = q.dtype
    return cfg


# -- reduction ------------------------------------------------------------------------------


class ReductionQuery(NamedTuple):
    """``n`` elements reduced by ``kind``; the tuple is the tuned key ``(n, kind)``."""

    n: int
    kind: str


def _parse_reduction(n: Any, kind: Any = "sum") -> ReductionQuery:
    fn = "select_reduction_kernel"
    n = int_arg(fn, "n", n, 0)
    if kind not in REDUCTION_KINDS:
        valid = ", ".join(REDUCTION_KINDS)
        raise ValueError(f"{fn}: kind must be one of {valid}, got {kind!r}")
    return ReductionQuery(n, kind)


def reduction_rule(profile: ExtendedDeviceProfile, q: ReductionQuery) -> KernelVariant:
    """Sequential below 256 elements, and always on an OpenCL CPU device; one parallel
    work-group below 64 Ki, multi-stage work-group reduction above.

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> reduction_rule(extended_profile(None), ReductionQuery(1000, "max")).name
        'REDUCTION_PARALLEL'
    """
    if q.n < REDUCTION_SEQUENTIAL_MAX or profile.opencl_cpu:
        # PoCL: one work item per output looping over its elements beat the work-group
        # kernels at every size measured, 1.2-17x (bench_selector)
        return V.REDUCTION_SEQUENTIAL
    if q.n < REDUCTION_PARALLEL_MAX:
        return V.REDUCTION_PARALLEL
    return V.REDUCTION_WORKGROUP


def _reduction_config(profile: ExtendedDeviceProfile, variant: AnyVariant,
                      q: ReductionQuery) -> KernelConfig:
    """``extra["use_subgroups"]`` where the device has subgroups (work-group variants)."""
    cfg = default_config(variant)
    if variant is not V.REDUCTION_SEQUENTIAL and profile.has_subgroups:
        cfg.extra["use_subgroups"] = True
    return cfg


# -- batch norm -----------------------------------------------------------------------------


class BatchnormQuery(NamedTuple):
    """The tuned key ``(N, C, HW, training, fuse_relu, dtype)``."""

    N: int
    C: int
    HW: int
    training: bool
    fuse_relu: bool
    dtype: str


def _parse_batchnorm(N: Any, C: Any, HW: Any, training: Any, fuse_relu: Any = False,
                     dtype: Any = "float32") -> BatchnormQuery:
    fn = "select_batchnorm_kernel"
    N, C, HW = (int_arg(fn, n, v, 1) for n, v in (("N", N), ("C", C), ("HW", HW)))
    return BatchnormQuery(N, C, HW, bool_arg(fn, "training", training),
                          bool_arg(fn, "fuse_relu", fuse_relu), float_dtype_arg(fn, dtype))


def batchnorm_rule(profile: ExtendedDeviceProfile, q: BatchnormQuery) -> KernelVariant:
    """Fused BN+ReLU when ``fuse_relu`` and not ``training``, else the plain kernel.

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> q = BatchnormQuery(8, 16, 64, False, True, "float32")
        >>> batchnorm_rule(extended_profile(None), q).name
        'BATCHNORM_FUSED'
    """
    if q.fuse_relu and not q.training:
        return V.BATCHNORM_FUSED
    return V.BATCHNORM_NAIVE


def _batchnorm_config(profile: ExtendedDeviceProfile, variant: AnyVariant,
                      q: BatchnormQuery) -> KernelConfig:
    cfg = default_config(variant)
    cfg.extra["dtype"] = q.dtype
    return cfg


ELEMENTWISE_FAMILY: SelectionFamily[ElementwiseQuery] = register_family(
    SelectionFamily("elementwise", parse=_parse_elementwise, key=tuple, rule=elementwise_rule,
                    configure=_elementwise_config),
    ELEMENTWISE_DEFAULTS,
)
REDUCTION_FAMILY: SelectionFamily[ReductionQuery] = register_family(
    SelectionFamily("reduction", parse=_parse_reduction, key=tuple, rule=reduction_rule,
                    configure=_reduction_config),
    REDUCTION_DEFAULTS,
)
BATCHNORM_FAMILY: SelectionFamily[BatchnormQuery] = register_family(
    SelectionFamily("batchnorm", parse=_parse_batchnorm, key=tuple, rule=batchnorm_rule,
                    configure=_batchnorm_config),
    BATCHNORM_DEFAULTS,
)
