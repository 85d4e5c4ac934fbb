"""netcl.io: checkpoints as data (safetensors + JSON), written atomically and checksummed;
plain safetensors files both ways, and PyTorch ``.pt`` files read without unpickling code.

Examples:
    >>> import numpy as np, tempfile, os
    >>> from netcl.io import save_tensors, load_tensors
    >>> p = os.path.join(tempfile.mkdtemp(), "state.netcl")
    >>> _ = save_tensors(p, {"b": np.zeros(3, np.float32)}, {"epoch": 1})
    >>> sorted(load_tensors(p)[0])
    ['b']
"""

from ._checkpoint import load_tensors as load_tensors
from ._checkpoint import save_tensors as save_tensors
from ._format import CheckpointError as CheckpointError
from ._model import load_model as load_model
from ._model import save_model as save_model
from ._safetensors import load_safetensors as load_safetensors
from ._safetensors import save_safetensors as save_safetensors
from ._torch_convert import from_torch as from_torch
from ._torch_convert import to_torch as to_torch
from ._torch_file import load_torch_state_dict as load_torch_state_dict
from ._weights import read_weights as read_weights

__all__ = ["CheckpointError", "from_torch", "load_model", "load_safetensors", "load_tensors",
           "load_torch_state_dict", "read_weights", "save_model", "save_safetensors",
           "save_tensors", "to_torch"]
