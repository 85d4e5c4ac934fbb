"""Where netcl keeps files between runs (program binaries, autotune winners)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """Return (and create) ``$NETCL_CACHE_DIR/parts...``, default ``~/.cache/netcl``.

    Examples:
        >>> cache_dir("programs").name
        'programs'
    """
    root = os.environ.get("NETCL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "netcl"
    )
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
