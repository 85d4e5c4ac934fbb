"""netcl.optim: optimizers, learning-rate schedulers and gradient clipping.

Updates run on the device as kernels (one launch per parameter, no host round trip); the
NumPy backend updates arrays in place.
"""

from .__about__ import __version__ as __version__
from ._clip import clip_grad_norm as clip_grad_norm
from ._clip import clip_grad_norm_device as clip_grad_norm_device
from ._optimizer import SGD as SGD
from ._optimizer import Adam as Adam
from ._optimizer import AdamW as AdamW
from ._optimizer import Momentum as Momentum
from ._optimizer import Optimizer as Optimizer
from ._optimizer import RMSProp as RMSProp
from ._schedulers import CosineAnnealingLR as CosineAnnealingLR
from ._schedulers import LRScheduler as LRScheduler
from ._schedulers import ReduceLROnPlateau as ReduceLROnPlateau
from ._schedulers import StepLR as StepLR
from ._schedulers import WarmupCosine as WarmupCosine

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "CosineAnnealingLR",
    "LRScheduler",
    "Momentum",
    "Optimizer",
    "RMSProp",
    "ReduceLROnPlateau",
    "StepLR",
    "WarmupCosine",
    "__version__",
    "clip_grad_norm",
    "clip_grad_norm_device",
]
