"""netcl.nn: modules, layers, ResNet and AMP, built on netcl.autograd.

Examples:
    >>> from netcl.nn import Module, Sequential
    >>> isinstance(Sequential(), Module)
    True
"""

from . import init as init
from .__about__ import __version__ as __version__
from ._containers import Identity as Identity
from ._containers import ModuleList as ModuleList
from ._containers import Sequential as Sequential
from ._module import HookHandle as HookHandle
from ._module import Module as Module
from ._module import Parameter as Parameter

__all__ = [
    "HookHandle",
    "Identity",
    "Module",
    "ModuleList",
    "Parameter",
    "Sequential",
    "__version__",
    "init",
]
