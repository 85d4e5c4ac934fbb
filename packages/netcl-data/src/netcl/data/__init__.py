"""netcl.data: the input pipeline of netcl.

Datasets, a :class:`DataLoader` whose worker processes hand batches over through a
shared-memory ring (:mod:`netcl.data.shared_batch`), batch augmentation on the CPU
(:mod:`netcl.data.augment`, :mod:`netcl.data.filters`), per-sample torchvision-style
transforms (:mod:`netcl.data.transforms`), samplers with PyTorch's names, and on an OpenCL device
(:mod:`netcl.data.augment_gpu`, needs pyopencl), and character-level text windows
(:class:`CharDataset`) over a corpus every CPython ships (:func:`python_help_text`). It emits
NumPy batches and imports no other netcl layer, so any compute layer can consume it.
"""

from . import augment as augment
from . import filters as filters
from . import shared_batch as shared_batch
from . import transforms as transforms
from .__about__ import __version__ as __version__
from ._collate import default_collate as default_collate
from ._datasets import ArrayDataset as ArrayDataset
from ._datasets import Dataset as Dataset
from ._datasets import DigitsDataset as DigitsDataset
from ._datasets import ImageFolder as ImageFolder
from ._datasets import Subset as Subset
from ._datasets import random_split as random_split
from ._distributed_sampler import DistributedSampler as DistributedSampler
from ._loader import DataLoader as DataLoader
from ._loader import LoaderIterator as LoaderIterator
from ._samplers import BatchSampler as BatchSampler
from ._samplers import RandomSampler as RandomSampler
from ._samplers import Sampler as Sampler
from ._samplers import SequentialSampler as SequentialSampler
from ._samplers import SubsetRandomSampler as SubsetRandomSampler
from ._samplers import WeightedRandomSampler as WeightedRandomSampler
from ._seed import manual_seed as manual_seed
from ._text import CharDataset as CharDataset
from ._text import CharVocab as CharVocab
from ._text import python_help_text as python_help_text
from ._text import split_text as split_text

__all__ = [
    "__version__",
    "ArrayDataset",
    "BatchSampler",
    "CharDataset",
    "CharVocab",
    "DataLoader",
    "Dataset",
    "DigitsDataset",
    "DistributedSampler",
    "ImageFolder",
    "LoaderIterator",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "augment",
    "default_collate",
    "filters",
    "manual_seed",
    "python_help_text",
    "random_split",
    "shared_batch",
    "split_text",
    "transforms",
]
