"""netcl.distributed: Collectives and the data-parallel step.

One process per device: on one host the ranks exchange data through shared memory
(``python -m netcl.distributed.launch -n N script.py``), across hosts through MPI
(``mpiexec -n N python script.py``). The names follow ``torch.distributed``.

Examples:
    >>> import numpy as np
    >>> import netcl.distributed as dist
    >>> _ = dist.init_process_group("shm", rank=0, world_size=1)
    >>> x = np.arange(3, dtype=np.float32)
    >>> dist.all_reduce(x, op="sum"); x.tolist()
    [0.0, 1.0, 2.0]
    >>> dist.destroy_process_group()
"""

from .__about__ import __version__ as __version__
from ._backend import REDUCE_OPS as REDUCE_OPS
from ._backend import Backend as Backend
from ._backend import DistributedError as DistributedError
from ._backend import Work as Work
from ._bucket import GradBucketer as GradBucketer
from ._bucket import sync_grads as sync_grads
from ._collectives import all_gather as all_gather
from ._collectives import all_gather_into_tensor as all_gather_into_tensor
from ._collectives import all_reduce as all_reduce
from ._collectives import barrier as barrier
from ._collectives import broadcast as broadcast
from ._collectives import gather as gather
from ._collectives import host_array as host_array
from ._collectives import reduce_scatter as reduce_scatter
from ._collectives import reduce_scatter_tensor as reduce_scatter_tensor
from ._collectives import scatter as scatter
from ._collectives import write_back as write_back
from ._data_parallel import data_parallel_step as data_parallel_step
from ._ddp import DistributedDataParallel as DistributedDataParallel
from ._ddp_sync_batchnorm import SyncBatchNorm as SyncBatchNorm
from ._group import ProcessGroup as ProcessGroup
from ._group import destroy_process_group as destroy_process_group
from ._group import device_for_rank as device_for_rank
from ._group import get_group as get_group
from ._group import get_rank as get_rank
from ._group import get_world_size as get_world_size
from ._group import init_process_group as init_process_group
from ._group import is_initialized as is_initialized
from ._mpi import MPIBackend as MPIBackend
from ._shm import ShmBackend as ShmBackend

__all__ = [
    "REDUCE_OPS",
    "Backend",
    "DistributedDataParallel",
    "DistributedError",
    "GradBucketer",
    "MPIBackend",
    "ProcessGroup",
    "ShmBackend",
    "SyncBatchNorm",
    "Work",
    "__version__",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "barrier",
    "broadcast",
    "data_parallel_step",
    "destroy_process_group",
    "device_for_rank",
    "gather",
    "get_group",
    "get_rank",
    "get_world_size",
    "host_array",
    "init_process_group",
    "is_initialized",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "sync_grads",
    "write_back",
]
