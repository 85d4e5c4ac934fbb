"""netcl.nn: modules, layers, ResNet and AMP, built on netcl.autograd.

Examples:
    >>> from netcl.nn import Module, Sequential
    >>> isinstance(Sequential(), Module)
    True
"""

from . import amp as amp
from . import functional as functional
from . import init as init
from .__about__ import __version__ as __version__
from ._activation import ELU as ELU
from ._activation import Hardsigmoid as Hardsigmoid
from ._activation import Hardswish as Hardswish
from ._activation import Hardtanh as Hardtanh
from ._activation import LogSoftmax as LogSoftmax
from ._activation import Mish as Mish
from ._activation import PReLU as PReLU
from ._activation import ReLU6 as ReLU6
from ._activation import Softmax as Softmax
from ._activation import Softplus as Softplus
from ._activation import Unflatten as Unflatten
from ._autocast import autocast as autocast
from ._containers import Identity as Identity
from ._containers import ModuleDict as ModuleDict
from ._containers import ModuleList as ModuleList
from ._containers import Sequential as Sequential
from ._grad_scaler import GradScaler as GradScaler
from ._layers import GELU as GELU
from ._layers import AdaptiveAvgPool2d as AdaptiveAvgPool2d
from ._layers import AvgPool2d as AvgPool2d
from ._layers import BatchNorm1d as BatchNorm1d
from ._layers import BatchNorm2d as BatchNorm2d
from ._layers import Conv2d as Conv2d
from ._layers import Dropout as Dropout
from ._layers import Embedding as Embedding
from ._layers import Flatten as Flatten
from ._layers import LayerNorm as LayerNorm
from ._layers import LeakyReLU as LeakyReLU
from ._layers import Linear as Linear
from ._layers import MaxPool2d as MaxPool2d
from ._layers import ReLU as ReLU
from ._layers import Sigmoid as Sigmoid
from ._layers import SiLU as SiLU
from ._layers import Tanh as Tanh
from ._layers_extra import AdaptiveMaxPool2d as AdaptiveMaxPool2d
from ._layers_extra import Conv1d as Conv1d
from ._layers_extra import ConvTranspose2d as ConvTranspose2d
from ._layers_extra import Dropout2d as Dropout2d
from ._layers_extra import GroupNorm as GroupNorm
from ._layers_extra import Upsample as Upsample
from ._loss import BCELoss as BCELoss
from ._loss import BCEWithLogitsLoss as BCEWithLogitsLoss
from ._loss import CrossEntropyLoss as CrossEntropyLoss
from ._loss import HuberLoss as HuberLoss
from ._loss import KLDivLoss as KLDivLoss
from ._loss import L1Loss as L1Loss
from ._loss import MSELoss as MSELoss
from ._loss import NLLLoss as NLLLoss
from ._loss import SmoothL1Loss as SmoothL1Loss
from ._module import HookHandle as HookHandle
from ._module import Module as Module
from ._module import Parameter as Parameter
from ._resnet import BasicBlock as BasicBlock
from ._resnet import Bottleneck as Bottleneck
from ._resnet import ResNet as ResNet
from ._resnet import resnet18 as resnet18
from ._resnet import resnet34 as resnet34
from ._resnet import resnet50 as resnet50
from ._resnet import resnet101 as resnet101
from ._resnet import resnet152 as resnet152

# isort: split
# the default generator's seed, as PyTorch's torch.manual_seed (it lives in netcl.ops, the
# lowest layer with random ops: NOTE [ The default generator ] there)
from netcl.ops import manual_seed as manual_seed

# isort: split
# PyTorch's torch.inference_mode: netcl.autograd.no_grad's semantics
from netcl.autograd import inference_mode as inference_mode

# isort: split
# attention and transformer layers (issue 19)
from ._attention import MultiheadAttention as MultiheadAttention
from ._positional import LearnedPositionalEmbedding as LearnedPositionalEmbedding
from ._positional import SinusoidalPositionalEncoding as SinusoidalPositionalEncoding
from ._transformer import Transformer as Transformer
from ._transformer import TransformerDecoder as TransformerDecoder
from ._transformer import TransformerDecoderLayer as TransformerDecoderLayer
from ._transformer import TransformerEncoder as TransformerEncoder
from ._transformer import TransformerEncoderLayer as TransformerEncoderLayer

# isort: split
# recurrent layers and cells (issue 19)
from ._rnn import GRU as GRU
from ._rnn import LSTM as LSTM
from ._rnn import RNN as RNN
from ._rnn import RNNBase as RNNBase
from ._rnn_cells import GRUCell as GRUCell
from ._rnn_cells import LSTMCell as LSTMCell
from ._rnn_cells import RNNCell as RNNCell
from ._rnn_cells import RNNCellBase as RNNCellBase

__all__ = [
    "AdaptiveAvgPool2d",
    "ELU",
    "PReLU",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "Mish",
    "Softplus",
    "Unflatten",
    "LogSoftmax",
    "ReLU6",
    "Softmax",
    "AdaptiveMaxPool2d",
    "Conv1d",
    "ConvTranspose2d",
    "Dropout2d",
    "GroupNorm",
    "Upsample",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv2d",
    "Dropout",
    "Embedding",
    "Flatten",
    "GELU",
    "GradScaler",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "MaxPool2d",
    "ReLU",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "HookHandle",
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "NLLLoss",
    "SmoothL1Loss",
    "BasicBlock",
    "Bottleneck",
    "ResNet",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "Identity",
    "Module",
    "ModuleDict",
    "ModuleList",
    "Parameter",
    "Sequential",
    "__version__",
    "amp",
    "autocast",
    "functional",
    "inference_mode",
    "init",
    "manual_seed",
    "MultiheadAttention",
    "LearnedPositionalEmbedding",
    "SinusoidalPositionalEncoding",
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "GRU",
    "LSTM",
    "RNN",
    "RNNBase",
    "GRUCell",
    "LSTMCell",
    "RNNCell",
    "RNNCellBase",
]
