"""netcl.runtime: capture a step once and replay it; the profiler.

``capture(step)`` traces an eagerly written step (forward, backward, optimizer update) and
replays its kernel launches with every argument pre-set (:mod:`._capture`, :mod:`._graph`);
``profile()`` times each kernel (:mod:`._profile`). Both sit on netcl-core's recording hook
(:mod:`netcl.core.recording`). ``Prefetcher`` uploads the next batches on a second command
queue while the device computes (:mod:`._prefetch`).
"""

from .__about__ import __version__ as __version__
from ._capture import CapturedStep as CapturedStep
from ._capture import CaptureFallbackWarning as CaptureFallbackWarning
from ._capture import Param as Param
from ._capture import capture as capture
from ._graph import Graph as Graph
from ._prefetch import Prefetcher as Prefetcher
from ._profile import KernelStats as KernelStats
from ._profile import Profile as Profile
from ._profile import profile as profile
from .errors import CaptureError as CaptureError
from .errors import CaptureUnsupportedError as CaptureUnsupportedError
from .errors import DeviceCheckError as DeviceCheckError
from .errors import GraphReleasedError as GraphReleasedError
from .errors import HostReadError as HostReadError
from .errors import InputMismatchError as InputMismatchError
from .errors import UnstableStepError as UnstableStepError

__all__ = [
    "CaptureError",
    "CaptureFallbackWarning",
    "CaptureUnsupportedError",
    "CapturedStep",
    "DeviceCheckError",
    "Graph",
    "GraphReleasedError",
    "HostReadError",
    "InputMismatchError",
    "KernelStats",
    "Param",
    "Prefetcher",
    "Profile",
    "UnstableStepError",
    "__version__",
    "capture",
    "profile",
]
