"""netcl.optim: optimizers, learning-rate schedulers and gradient clipping, PyTorch's names.

Updates run on the device as kernels (one launch per parameter, no host round trip); the
NumPy backend updates arrays in place.
"""

from .__about__ import __version__ as __version__
from ._clip import clip_grad_norm as clip_grad_norm
from ._clip import clip_grad_norm_device as clip_grad_norm_device
from ._clip import clip_grad_value_ as clip_grad_value_
from ._optimizer import SGD as SGD
from ._optimizer import Adam as Adam
from ._optimizer import AdamW as AdamW
from ._optimizer import Momentum as Momentum
from ._optimizer import Optimizer as Optimizer
from ._optimizer import RMSProp as RMSProp
from ._optimizer import RMSprop as RMSprop
from ._optimizers_extra import Adagrad as Adagrad
from ._optimizers_extra import NAdam as NAdam
from ._optimizers_extra import RAdam as RAdam
from ._schedulers import CosineAnnealingLR as CosineAnnealingLR
from ._schedulers import LRScheduler as LRScheduler
from ._schedulers import ReduceLROnPlateau as ReduceLROnPlateau
from ._schedulers import StepLR as StepLR
from ._schedulers import WarmupCosine as WarmupCosine
from ._schedulers_extra import ConstantLR as ConstantLR
from ._schedulers_extra import ExponentialLR as ExponentialLR
from ._schedulers_extra import LambdaLR as LambdaLR
from ._schedulers_extra import LinearLR as LinearLR
from ._schedulers_extra import MultiStepLR as MultiStepLR
from ._schedulers_extra import OneCycleLR as OneCycleLR
from ._schedulers_extra import SequentialLR as SequentialLR

__all__ = [
    "SGD",
    "Adagrad",
    "Adam",
    "AdamW",
    "ConstantLR",
    "CosineAnnealingLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "Momentum",
    "MultiStepLR",
    "NAdam",
    "OneCycleLR",
    "Optimizer",
    "RAdam",
    "RMSProp",
    "RMSprop",
    "ReduceLROnPlateau",
    "SequentialLR",
    "StepLR",
    "WarmupCosine",
    "__version__",
    "clip_grad_norm",
    "clip_grad_norm_device",
    "clip_grad_value_",
]
