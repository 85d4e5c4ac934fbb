"""PyTorch's ``torch.utils`` names: :mod:`netcl.utils.data` (``DataLoader``, ``TensorDataset``).

Examples:
    >>> import netcl.utils.data as data
    >>> data.TensorDataset.__name__
    'TensorDataset'
"""

from . import data as data

__all__ = ["data"]
