"""The generic kernel selector's parts: variants, the family registry, forcing, argument checks.

netcl-core knows no op: each op package registers its families here (a
:class:`SelectionFamily` with its parse, key, rule and configure functions, and its variants'
defaults), and :class:`netcl.core.kernel_selector.KernelSelector` resolves every decision the
same way: forced -> tuned -> the family's rule, cached per query and fitted to the device. A family
may also register a :class:`FamilyTuner` (its shape classes and candidate configs), which the
selector uses when tuning is on (``netcl.core.autotune``).

Examples:
    >>> from netcl.core.device_profile import extended_profile
    >>> from netcl.core.kernel_selector import KernelSelector
    >>> small, large = Variant("DEMO_SMALL"), Variant("DEMO_LARGE")
    >>> demo = register_family(
    ...     SelectionFamily("demo", parse=lambda n: int_arg("select_demo", "n", n, 0),
    ...                     key=lambda n: (n,),
    ...                     rule=lambda profile, n: large if n > 100 else small,
    ...                     configure=lambda profile, v, n: default_config(v)),
    ...     {small: {"tile_m": 1}, large: {"tile_m": 64}})
    >>> sel = KernelSelector(extended_profile(None))
    >>> sel.select(demo, 1000).variant.name, sel.select("demo", 5).tile_m
    ('DEMO_LARGE', 1)
    >>> with force_variant(small):
    ...     sel.select(demo, 1000).variant.name
    'DEMO_SMALL'
"""

from ._forcing import force_variant as force_variant
from ._forcing import forced_variant as forced_variant
from ._registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._registry import Applies as Applies
from ._registry import KernelFamilyError as KernelFamilyError
from ._registry import SelectionFamily as SelectionFamily
from ._registry import default_config as default_config
from ._registry import family_named as family_named
from ._registry import register_family as register_family
from ._registry import register_variant as register_variant
from ._registry import registry_generation as registry_generation
from ._registry import variant_applies as variant_applies
from ._registry import variant_named as variant_named
from ._registry import variant_names as variant_names
from ._tuning import Bench as Bench
from ._tuning import Candidate as Candidate
from ._tuning import FamilyTuner as FamilyTuner
from ._tuning import Params as Params
from ._tuning import Tuned as Tuned
from ._tuning import apply_params as apply_params
from ._tuning import class_op as class_op
from ._tuning import params_of as params_of
from ._tuning import pow2_bucket as pow2_bucket
from ._tuning import register_tuner as register_tuner
from ._tuning import time_candidate as time_candidate
from ._tuning import tuner_for as tuner_for
from ._variants import FAMILIES as FAMILIES
from ._variants import AnyVariant as AnyVariant
from ._variants import KernelConfig as KernelConfig
from ._variants import KernelVariant as KernelVariant
from ._variants import Variant as Variant
from .args import bool_arg as bool_arg
from .args import float_dtype_arg as float_dtype_arg
from .args import int_arg as int_arg
from .args import pair_arg as pair_arg

__all__ = [
    "ENTRY_POINT_GROUP",
    "FAMILIES",
    "Applies",
    "AnyVariant",
    "Bench",
    "Candidate",
    "FamilyTuner",
    "KernelConfig",
    "SelectionFamily",
    "KernelFamilyError",
    "KernelVariant",
    "Params",
    "Tuned",
    "Variant",
    "apply_params",
    "bool_arg",
    "class_op",
    "default_config",
    "family_named",
    "float_dtype_arg",
    "force_variant",
    "forced_variant",
    "int_arg",
    "pair_arg",
    "params_of",
    "pow2_bucket",
    "register_family",
    "register_tuner",
    "register_variant",
    "registry_generation",
    "time_candidate",
    "tuner_for",
    "variant_applies",
    "variant_named",
    "variant_names",
]
