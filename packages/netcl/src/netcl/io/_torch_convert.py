"""Moving weights between PyTorch and netcl in memory: ``from_torch`` and ``to_torch``.

Neither imports torch at module level: ``from_torch`` only calls methods of the objects it is
given, and ``to_torch`` imports torch when called (it needs it to build tensors).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor

__all__ = ["from_torch", "to_torch"]


def _is_torch_tensor(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "detach")


def _host(t: Any) -> np.ndarray[Any, Any]:
    t = t.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        t = t.float()
    return np.array(t.numpy(), copy=True)


def from_torch(obj: Any, queue: Any = None) -> Any:
    """PyTorch objects as netcl's: a ``torch.nn.Module`` or a state dict -> a state dict of
    NumPy arrays (what ``netcl_model.load_state_dict`` takes, ``num_batches_tracked``
    included); a tensor -> a netcl Tensor on ``queue`` (the default device when None).

    Raises:
        TypeError: anything else.

    Examples:
        >>> import torch
        >>> state = from_torch(torch.nn.Linear(3, 2))
        >>> sorted(state), state["weight"].shape
        (['bias', 'weight'], (2, 3))
    """
    if _is_torch_tensor(obj):
        return Tensor.from_host(queue, _host(obj))
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        obj = obj.state_dict()
    if isinstance(obj, dict):
        out: dict[str, np.ndarray[Any, Any]] = {}
        for name, value in obj.items():
            if not _is_torch_tensor(value):
                raise TypeError(f"from_torch: {name!r} is a {type(value).__name__}, not a tensor")
            out[name] = _host(value)
        return out
    raise TypeError(f"from_torch: expected a torch Module, state dict or tensor, got "
                    f"{type(obj).__name__}")


def to_torch(obj: Any) -> Any:
    """netcl objects as PyTorch's: a netcl Module or a state dict -> an ``OrderedDict`` of
    CPU torch tensors (what ``torch_model.load_state_dict`` takes); a Tensor -> a torch
    tensor.

    Raises:
        ImportError: torch is not installed.
        TypeError: anything else.

    Examples:
        >>> import numpy as np
        >>> to_torch(Tensor.from_host(None, np.arange(3.0))).tolist()
        [0.0, 1.0, 2.0]
    """
    import torch

    def one(value: Any, name: str) -> Any:
        if isinstance(value, Tensor):
            value = value.to_host()
        if not isinstance(value, np.ndarray):
            raise TypeError(f"to_torch: {name} is a {type(value).__name__}, not a tensor")
        return torch.from_numpy(np.array(value, copy=True))

    if isinstance(obj, (Tensor, np.ndarray)):
        return one(obj, "the value")
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        obj = obj.state_dict()
    if isinstance(obj, dict):
        return OrderedDict((name, one(value, repr(name))) for name, value in obj.items())
    raise TypeError(f"to_torch: expected a netcl Module, state dict or Tensor, got "
                    f"{type(obj).__name__}")
