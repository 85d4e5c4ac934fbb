"""One reader for weight files of every kind netcl knows: what ``resnet18(weights=path)``
(through the ``netcl.weights`` entry point) and users call."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ._checkpoint import load_tensors
from ._format import CheckpointError
from ._safetensors import load_safetensors
from ._torch_file import load_torch_state_dict

__all__ = ["read_weights"]


def read_weights(path: str | os.PathLike[str]) -> dict[str, np.ndarray[Any, Any]]:
    """A model's weights from ``path`` as NumPy arrays by name: ``.safetensors`` (any
    producer), ``.pt``/``.pth``/``.bin`` (``torch.save`` of a state dict, read without running
    code), or a netcl checkpoint (:func:`save_model`'s, or a Trainer checkpoint's ``model/``
    entries).

    Raises:
        CheckpointError: a file that cannot be read, or a suffix netcl does not know.

    Examples:
        >>> import numpy as np, os, tempfile
        >>> p = os.path.join(tempfile.mkdtemp(), "w.safetensors")
        >>> from safetensors.numpy import save_file
        >>> save_file({"fc.bias": np.zeros(3, np.float32)}, p)
        >>> sorted(read_weights(p))
        ['fc.bias']
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix == ".safetensors":
        return load_safetensors(target)
    if suffix in (".pt", ".pth", ".bin"):
        state = load_torch_state_dict(target)
        for key in ("state_dict", "model"):  # a training checkpoint holding the state dict
            if isinstance(state.get(key), dict):
                state = state[key]
        bad = sorted(k for k, v in state.items() if not isinstance(v, np.ndarray))
        if bad:
            raise CheckpointError("format", f"read_weights({target}): entries {bad[:5]} are not "
                                  f"tensors")
        return state
    if suffix == ".netcl":
        tensors, _ = load_tensors(target)
        model = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
        return model or tensors
    raise CheckpointError("format", f"read_weights({target}): unknown weight file suffix "
                          f"{suffix!r} (known: .safetensors, .pt, .pth, .bin, .netcl)")
